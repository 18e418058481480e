//! A run where one MPI process is killed outright and another aborts: the
//! report is still produced from what was recorded, and says what is missing
//! and where each record stops.

use std::process::Command;

mod common;
use common::{dump, events};

const PROGRAM: &str = r#"
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me; MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int x = me, y;
  for (int i = 0; i < 20000; i++) {
    MPI_Sendrecv(&x, 1, MPI_INT, me, 7, &y, 1, MPI_INT, me, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (i == 5000 && me == 1) raise(SIGKILL);
    if (i == 5000 && me == 2) abort();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
"#;

#[test]
fn killed_and_aborted_processes() {
    let dir = common::tmpdir("crash");
    let src = dir.join("crash.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("crash");
    let out = Command::new("mpicc")
        .arg("-g")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("mpicc is needed (Debian: libopenmpi-dev)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let trace = dir.join("trace");
    let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .args(["run", "-o"])
        .arg(&trace)
        .args(["--", "mpirun", "-np", "4", "--oversubscribe"])
        .arg(&exe)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_orte_tmpdir_base", &dir)
        // mpirun ends the other ranks with SIGTERM, then SIGKILL a second
        // later by default: on a loaded machine a rank may not have written
        // its buffers by then. Give them time, so that only the rank killed
        // on purpose is killed outright.
        .env("OMPI_MCA_odls_base_sigkill_timeout", "3")
        .env_remove("LD_LIBRARY_PATH")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the job fails: its exit status is passed on"
    );

    let v = dump(&trace);
    let r = common::report(&trace);
    assert_eq!(r["processes"], 4, "every process has its manifest");
    let procs = v["processes"].as_array().unwrap();
    let status = |s: &str| procs.iter().filter(|p| p["status"] == s).count();
    assert_eq!(
        status("running"),
        1,
        "the killed process never finished: {procs:?}"
    );
    assert_eq!(status("crashed SIGABRT"), 1, "{procs:?}");
    // The aborting rank saved everything up to its abort: 5001 exchanges.
    let threads = v["threads"].as_array().unwrap();
    let evs = events(&v);
    let rank_of = |i: usize| {
        evs[i]
            .iter()
            .find(|e| e["kind"] == "GASP_MPI_INIT" && e["phase"] == "END")
            .and_then(|e| e["args"]["rank"].as_u64())
    };
    let aborted = (0..threads.len())
        .find(|&i| rank_of(i) == Some(2))
        .expect("rank 2's stream");
    let exchanges = evs[aborted]
        .iter()
        .filter(|e| e["kind"] == "GASP_MPI_SENDRECV" && e["phase"] == "START")
        .count();
    assert_eq!(exchanges, 5001);
    assert!(
        (0..threads.len()).all(|i| rank_of(i) != Some(1)),
        "the killed process wrote nothing (it held its events in memory)"
    );
    // The report names what is missing and where each record stops.
    let problems: Vec<&str> = r["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let proc_of = |i: usize| threads[i]["process"].as_str().unwrap().to_string();
    let killed = procs.iter().find(|p| p["status"] == "running").unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        problems
            .iter()
            .any(|p| p.contains(&killed) && p.contains("nothing it recorded reached the disk")),
        "{problems:#?}"
    );
    assert!(
        problems.iter().any(|p| p.contains(&proc_of(aborted))
            && p.contains("the record stops at")
            && p.contains("GASP_MPI_SENDRECV END")),
        "{problems:#?}"
    );
    assert!(problems
        .iter()
        .any(|p| p.contains(&proc_of(aborted)) && p.contains("crashed SIGABRT")));
}
