//! Shared objects in blocks: false sharing and producer-consumer found in
//! real OpenSHMEM programs, and not found where the program has neither.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;
use common::{finding_kinds, report};

/// Three patterns on one symmetric array of 8 pages, 20 epochs each:
/// 0: every PE writes its own 64-byte slot of the first page of PE 0 (false sharing);
/// 1: PE it%np writes a page of PE 0, the others read it after the barrier (producer-consumer);
/// 2: every PE writes its own page of PE 0 (neither);
/// 3: every PE but 0 reads PE 0's pages over and over (a remote hot spot, not produced data).
const PROGRAM: &str = r#"
#include <shmem.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  int mode = atoi(argv[1]);
  shmem_init();
  int me = shmem_my_pe(), np = shmem_n_pes();
  double *a = shmem_calloc(4096, sizeof(double));
  double buf[512];
  for (int i = 0; i < 512; i++) buf[i] = me + i;
  shmem_barrier_all();
  for (int it = 0; it < 20; it++) {
    if (mode == 0) {
      shmem_putmem(&a[me * 8], buf, 64, 0);              /* FS_LINE */
    } else if (mode == 1) {
      if (me == it % np) shmem_putmem(&a[512 * (it % 8)], buf, 4096, 0);
      shmem_barrier_all();
      if (me != it % np) shmem_getmem(buf, &a[512 * (it % 8)], 4096, 0);  /* PC_LINE */
    } else if (mode == 2) {
      shmem_putmem(&a[512 * me], buf, 4096, 0);
    } else {
      if (me != 0) for (int k = 0; k < 4000; k++) shmem_getmem(buf, &a[512 * (k % 8)], 4096, 0);  /* HOT_LINE */
    }
    volatile double x = 0;
    for (int k = 0; k < 100000; k++) x += k;
    shmem_barrier_all();
  }
  shmem_free(a);
  shmem_finalize();
  return 0;
}
"#;

fn line_of(marker: &str) -> u64 {
    PROGRAM
        .lines()
        .position(|l| l.contains(marker))
        .map(|i| i as u64 + 1)
        .unwrap()
}

/// Builds the program in a directory of the test's own (`name`): tests run
/// at the same time.
fn build(name: &str) -> (PathBuf, PathBuf) {
    let dir = common::tmpdir(name);
    let src = dir.join("fs.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("fs");
    let out = Command::new("oshcc")
        .args(["-g", "-O1"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("oshcc is needed (Debian: libopenmpi-dev openmpi-bin)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, exe)
}

fn run_mode(dir: &Path, exe: &Path, mode: u32) -> PathBuf {
    let d = dir.join(format!("mode{mode}"));
    std::fs::create_dir_all(&d).unwrap();
    let (trace, _) = common::gaspard_run(
        &d,
        &[
            "oshrun",
            "-np",
            "4",
            "--oversubscribe",
            "--mca",
            "osc",
            "^rdma",
            exe.to_str().unwrap(),
            &mode.to_string(),
        ],
    );
    trace
}

fn gaspard(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .args(args)
        .output()
        .unwrap()
}

fn finding<'a>(r: &'a Value, kind: &str) -> &'a Value {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} finding in {:#}", r["findings"]))
}

#[test]
fn false_sharing_producer_consumer_and_neither() {
    let _alone = common::alone();
    let (dir, exe) = build("blocks-fs-pc");

    // False sharing: one block of PE 0, four writers, 20 epochs, 20 writes each.
    let t = run_mode(&dir, &exe, 0);
    let r = report(&t);
    let b = &r["blocks"];
    assert_eq!(b["objects"].as_array().unwrap().len(), 1);
    assert_eq!(b["accesses"], 80);
    let fs = b["false_sharing"].as_array().unwrap();
    assert_eq!(fs.len(), 1, "{b:#}");
    assert_eq!(fs[0]["home"], 0);
    assert_eq!(fs[0]["block"], 0);
    assert_eq!(fs[0]["epochs"], 20);
    let writes: Vec<u64> = fs[0]["writes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_u64().unwrap())
        .collect();
    assert_eq!(writes, vec![20, 20, 20, 20]);
    let f = finding(&r, "false_sharing");
    assert_eq!(f["threads"].as_array().unwrap().len(), 4);
    assert_eq!(f["location"]["line"].as_u64(), Some(line_of("FS_LINE")));
    assert!(f["location"]["file"].as_str().unwrap().ends_with("fs.c"));
    assert!(!finding_kinds(&r).contains(&"producer_consumer".to_string()));
    // With 64-byte blocks each PE has its own block: no false sharing.
    let out = gaspard(&[
        "report",
        "--json",
        "--block-size",
        "64",
        t.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let r64: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r64["blocks"]["block_size"], 64);
    assert!(r64["blocks"]["false_sharing"]
        .as_array()
        .unwrap()
        .is_empty());
    assert!(!finding_kinds(&r64).contains(&"false_sharing".to_string()));

    // Producer-consumer: each of the 8 pages produced, then read by the 3 others.
    let t = run_mode(&dir, &exe, 1);
    let r = report(&t);
    let pc = r["blocks"]["producer_consumer"].as_array().unwrap();
    assert_eq!(pc.len(), 8, "{:#}", r["blocks"]);
    let times: u64 = pc.iter().map(|p| p["times"].as_u64().unwrap()).sum();
    assert_eq!(times, 20);
    assert!(pc.iter().all(|p| p["readers"] == 3 && p["home"] == 0));
    let f = finding(&r, "producer_consumer");
    assert_eq!(f["location"]["line"].as_u64(), Some(line_of("PC_LINE")));
    assert!(f["message"].as_str().unwrap().contains("shmem_broadcast"));
    assert!(!finding_kinds(&r).contains(&"false_sharing".to_string()));
    // The per-epoch view: block 0 written by one PE in one epoch, read by the 3 others in the next.
    let out = gaspard(&["blocks", "--json", t.to_str().unwrap()]);
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Read one process at a time, the same analysis.
    let low = gaspard(&["blocks", "--json", "--low-memory", t.to_str().unwrap()]);
    assert!(low.status.success());
    assert_eq!(out.stdout, low.stdout);
    // And read whole, whatever the default.
    let whole = gaspard(&["blocks", "--json", "--in-memory", t.to_str().unwrap()]);
    assert!(whole.status.success());
    assert_eq!(out.stdout, whole.stdout);
    let ep: Vec<&Value> = v["epochs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["block"] == 0)
        .collect();
    assert_eq!(
        ep.len(),
        6,
        "block 0 is produced 3 times (it = 0, 8, 16) and read after each"
    );
    for pair in ep.chunks(2) {
        assert_eq!(pair[0]["writers"].as_array().unwrap().len(), 1);
        assert!(pair[0]["readers"].as_array().unwrap().is_empty());
        assert_eq!(pair[1]["epoch"], pair[0]["epoch"].as_u64().unwrap() + 1);
        assert_eq!(pair[1]["readers"].as_array().unwrap().len(), 3);
        assert!(!pair[1]["readers"]
            .as_array()
            .unwrap()
            .contains(&pair[0]["writers"][0]));
    }

    // Neither: each PE writes its own page.
    let t = run_mode(&dir, &exe, 2);
    let r = report(&t);
    let kinds = finding_kinds(&r);
    assert!(!kinds.contains(&"false_sharing".to_string()), "{kinds:?}");
    assert!(
        !kinds.contains(&"producer_consumer".to_string()),
        "{kinds:?}"
    );
    assert!(r["blocks"]["false_sharing"].as_array().unwrap().is_empty());
    assert!(r["blocks"]["producer_consumer"]
        .as_array()
        .unwrap()
        .is_empty());
}

#[test]
fn one_home_serving_everyone_is_a_remote_hotspot() {
    // The gets' share of the PEs' time is part of the finding: the run
    // must not share the two cores with the other tests' runs.
    let _alone = common::alone();
    let (dir, exe) = build("blocks-hotspot");
    let t = run_mode(&dir, &exe, 3);
    let r = report(&t);
    let f = finding(&r, "remote_hotspot");
    assert_eq!(f["threads"].as_array().unwrap().len(), 3, "{f:#}");
    assert!(
        f["message"].as_str().unwrap().contains("held by PE 0"),
        "{f:#}"
    );
    let o = &r["blocks"]["objects"][0];
    assert_eq!(o["ranks"], 4);
    for pe in 1..4 {
        assert_eq!(o["ops"][pe][0], 4000 * 20, "gets from PE {pe} to PE 0");
        assert_eq!(o["bytes"][pe][0], 4000 * 20 * 4096);
    }
    assert_eq!(o["remote_ops"], 3 * 4000 * 20);
    assert_eq!(o["local_ops"], 0);
    // Read all along, never written: not produced data.
    assert!(!finding_kinds(&r).contains(&"producer_consumer".to_string()));
}

#[test]
fn blocks_command_errors() {
    let out = gaspard(&["blocks", "/nonexistent/trace"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/trace"));
    let out = gaspard(&["report", "--block-size", "0", "/nonexistent/trace"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("block-size"));
}
