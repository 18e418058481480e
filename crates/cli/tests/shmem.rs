//! OpenSHMEM programs (Open MPI's oshmem) run as `gaspard run -- oshrun ...`
//! are recorded through the pshmem wrappers of libgaspard_shmem.so.

use std::process::Command;

use serde_json::Value;

mod common;
use common::{dump, events, report};

const PROGRAM: &str = r#"
#include <shmem.h>
int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  long *x = shmem_malloc(16 * sizeof(long));
  for (int i = 0; i < 16; i++) x[i] = 0;
  shmem_barrier_all();
  long v = 100 + me;
  shmem_long_put(&x[me], &v, 1, (me + 1) % n);      /* 8 bytes to the right neighbour */
  shmem_putmem(&x[8], &v, 3, (me + 1) % n);          /* 3 bytes */
  shmem_quiet();
  shmem_long_atomic_fetch_add(&x[15], 1, 0);          /* everyone increments PE 0's counter */
  shmem_barrier_all();
  int ok = me != 0 || x[15] == n;
  shmem_free(x);
  shmem_finalize();
  return ok ? 0 : 3;
}
"#;

/// Writes `src` as `NAME.c` in a fresh directory and builds it with oshcc.
fn build(dir_name: &str, name: &str, src: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = common::tmpdir(dir_name);
    let file = dir.join(format!("{name}.c"));
    std::fs::write(&file, src).unwrap();
    let exe = dir.join(name);
    let out = Command::new("oshcc")
        .arg("-g")
        .arg(&file)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("oshcc is needed for the OpenSHMEM tests (Debian: libopenmpi-dev openmpi-bin)");
    assert!(
        out.status.success(),
        "oshcc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, exe)
}

fn run_on(pes: usize) {
    let (dir, exe) = build(&format!("shmem-{pes}"), "s", PROGRAM);
    let np = pes.to_string();
    let (trace, _) = common::gaspard_run(
        &dir,
        &[
            "oshrun",
            "-np",
            &np,
            "--oversubscribe",
            "--mca",
            "osc",
            "^rdma",
            exe.to_str().unwrap(),
        ],
    );
    let v = dump(&trace);
    let threads = events(&v);
    assert_eq!(threads.len(), pes, "one stream per PE");
    let mut targets = Vec::new();
    for evs in &threads {
        let starts = |kind: &str| -> Vec<&Value> {
            evs.iter()
                .filter(|e| e["kind"] == kind && e["phase"] == "START")
                .collect()
        };
        let ends = |kind: &str| {
            evs.iter()
                .filter(|e| e["kind"] == kind && e["phase"] == "END")
                .count()
        };
        // The user's two barriers; the one shmem_finalize makes itself is not counted.
        assert_eq!(starts("GASP_SHMEM_BARRIER_ALL").len(), 2);
        assert_eq!(ends("GASP_SHMEM_BARRIER_ALL"), 2);
        let malloc_end: Vec<&Value> = evs
            .iter()
            .filter(|e| e["kind"] == "GASP_SHMEM_MALLOC" && e["phase"] == "END")
            .collect();
        assert_eq!(malloc_end.len(), 1);
        assert_eq!(malloc_end[0]["args"]["size"], 128);
        let base = u64::from_str_radix(
            malloc_end[0]["args"]["ptr"]
                .as_str()
                .unwrap()
                .trim_start_matches("0x"),
            16,
        )
        .unwrap();
        let put = starts("GASP_SHMEM_LONG_PUT");
        assert_eq!(put.len(), 1);
        assert_eq!(put[0]["args"]["nbytes"], 8);
        let pe = put[0]["args"]["pe"].as_u64().unwrap() as usize;
        // The sender is the PE to the left of the target; its slot is its own number.
        let me = (pe + pes - 1) % pes;
        assert_eq!(
            put[0]["args"]["dest"],
            format!("{:#x}", base + 8 * me as u64)
        );
        targets.push(pe);
        let mem = starts("GASP_SHMEM_PUTMEM");
        assert_eq!(
            (
                mem[0]["args"]["nbytes"].as_u64(),
                mem[0]["args"]["pe"].as_u64()
            ),
            (Some(3), Some(pe as u64))
        );
        assert_eq!(mem[0]["args"]["dest"], format!("{:#x}", base + 64));
        let amo = starts("GASP_SHMEM_LONG_ATOMIC_FETCH_ADD");
        assert_eq!(amo[0]["args"]["pe"], 0);
        assert_eq!(amo[0]["args"]["target"], format!("{:#x}", base + 120));
        assert_eq!(amo[0]["objects"]["target"]["offset"], 120);
        assert_eq!(starts("GASP_SHMEM_QUIET").len(), 1);
        assert_eq!(starts("GASP_SHMEM_INIT").len(), 1);
        assert_eq!(ends("GASP_SHMEM_FINALIZE"), 1);
        assert_eq!(starts("GASP_SHMEM_FREE").len(), 1);
    }
    targets.sort();
    assert_eq!(
        targets,
        (0..pes).collect::<Vec<_>>(),
        "each PE is put to exactly once"
    );
    for p in v["processes"].as_array().unwrap() {
        assert_eq!(p["status"], "complete");
    }
    // Who talks to whom: each PE puts 8 + 3 bytes to its right neighbour and
    // adds 8 bytes atomically on PE 0.
    let r = report(&trace);
    let m = r["communication"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["model"] == "SHMEM")
        .expect("SHMEM matrix");
    assert_eq!(m["ranks"], pes);
    for me in 0..pes {
        let right = (me + 1) % pes;
        for to in 0..pes {
            let want_bytes = if to == right { 11 } else { 0 } + if to == 0 { 8 } else { 0 };
            let want_ops = if to == right { 2 } else { 0 } + if to == 0 { 1 } else { 0 };
            assert_eq!(m["bytes"][me][to], want_bytes, "bytes {me} -> {to}");
            assert_eq!(m["ops"][me][to], want_ops, "ops {me} -> {to}");
        }
    }
}

#[test]
fn shmem_operations_on_2_pes() {
    run_on(2);
}

#[test]
fn shmem_operations_on_4_pes() {
    run_on(4);
}

const STORM: &str = r#"
#include <shmem.h>
#define N 100000
int main(void) {
  shmem_init();
  int me = shmem_my_pe(), np = shmem_n_pes();
  long *x = shmem_malloc(N * sizeof(long));
  static long src[N];
  for (int i = 0; i < N; i++) src[i] = i;
  shmem_barrier_all();
  for (int i = 0; i < N; i++) shmem_long_p(&x[i], src[i], (me + 1) % np);  /* element by element */
  shmem_barrier_all();
  shmem_long_put(x, src, N, (me + 1) % np);                                  /* the same, at once */
  shmem_barrier_all();
  shmem_free(x);
  shmem_finalize();
  return 0;
}
"#;

#[test]
fn element_by_element_puts_are_found() {
    let (dir, exe) = build("shmem-storm", "storm", STORM);
    let (trace, _) = common::gaspard_run(
        &dir,
        &[
            "oshrun",
            "-np",
            "2",
            "--oversubscribe",
            "--mca",
            "osc",
            "^rdma",
            exe.to_str().unwrap(),
        ],
    );
    let r = report(&trace);
    let small: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "small_messages")
        .collect();
    assert_eq!(small.len(), 1, "{}", r["findings"]);
    let line = STORM
        .lines()
        .position(|l| l.contains("element by element"))
        .unwrap()
        + 1;
    assert_eq!(small[0]["location"]["line"], line);
    assert!(
        small[0]["message"]
            .as_str()
            .unwrap()
            .contains("200000 GASP_SHMEM_LONG_P of 8 bytes"),
        "{}",
        small[0]["message"]
    );
    assert_eq!(small[0]["threads"].as_array().unwrap().len(), 2);
}
