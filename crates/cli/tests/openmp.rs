//! OpenMP programs (clang, LLVM libomp) run under `gaspard run` are recorded
//! through OMPT: parallel regions, work-sharing, barriers, critical sections.

use std::process::Command;

use serde_json::Value;

mod common;
use common::dump;

fn tmp(name: &str) -> std::path::PathBuf {
    common::tmpdir(&format!("omp-{name}"))
}

const PROGRAM: &str = r#"
#include <omp.h>
#include <stdio.h>
int main(void) {
  long sum = 0;
  #pragma omp parallel num_threads(4)
  {
    for (int round = 0; round < 3; round++) {
      #pragma omp for
      for (int i = 0; i < 400; i++) {
        #pragma omp critical
        sum += i;
      }
      #pragma omp barrier
    }
    #pragma omp single
    printf("sum=%ld\n", sum);
  }
  return sum == 3 * 79800 ? 0 : 1;
}
"#;

/// Writes `src` to a fresh directory and builds it with clang's OpenMP.
fn build(name: &str, src: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = tmp(name);
    let file = dir.join(format!("{name}.c"));
    std::fs::write(&file, src).unwrap();
    let exe = dir.join(name);
    let out = Command::new("clang")
        .args(["-fopenmp", "-O1", "-g"])
        .arg(&file)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("clang is needed for the OpenMP tests (Debian: clang libomp-dev)");
    assert!(
        out.status.success(),
        "clang failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, exe)
}

#[test]
fn openmp_constructs_are_recorded_per_thread() {
    let (dir, exe) = build("omp", PROGRAM);
    let (trace, st) = common::gaspard_run(&dir, &[exe.to_str().unwrap()]);
    assert_eq!(String::from_utf8_lossy(&st.stdout).trim(), "sum=239400");
    let v: Value = dump(&trace);
    let threads = v["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 4, "one stream per OpenMP thread");
    let mut criticals = 0;
    let mut parallel = 0;
    for t in threads {
        assert_eq!(t["model"], "OMP");
        let evs = t["events"].as_array().unwrap();
        let count = |kind: &str, phase: &str| {
            evs.iter()
                .filter(|e| e["kind"] == kind && e["phase"] == phase)
                .count()
        };
        // Three explicit barriers, each with a START and an END.
        assert_eq!(
            count("GASP_OMP_BARRIER", "START"),
            3,
            "thread {}",
            t["thread"]
        );
        assert_eq!(count("GASP_OMP_BARRIER", "END"), 3);
        // Three loops, each thread taking part in each.
        assert_eq!(count("GASP_OMP_LOOP", "START"), 3);
        assert_eq!(count("GASP_OMP_LOOP", "END"), 3);
        // Every critical section is entered, marked acquired and released.
        let c = count("GASP_OMP_CRITICAL", "START");
        assert_eq!(count("GASP_OMP_CRITICAL", "END"), c);
        assert_eq!(
            evs.iter()
                .filter(|e| e["kind"] == "GASP_OMP_MUTEX_ACQUIRED" && e["args"]["mutex"] == 5)
                .count(),
            c
        );
        criticals += c;
        parallel += count("GASP_OMP_PARALLEL", "START");
        // Each construct's code address is turned into its source line.
        let line_of = |needle: &str| PROGRAM.lines().position(|l| l.contains(needle)).unwrap() + 1;
        for (kind, needle) in [
            ("GASP_OMP_BARRIER", "omp barrier"),
            ("GASP_OMP_CRITICAL", "omp critical"),
        ] {
            for e in evs
                .iter()
                .filter(|e| e["kind"] == kind && e["phase"] == "START")
            {
                assert_ne!(e["args"]["codeptr"], "0x0");
                assert!(e["file"].as_str().unwrap_or("").ends_with("omp.c"), "{e}");
                assert_eq!(e["line"], line_of(needle), "{kind}: {e}");
            }
        }
        assert_eq!(
            count("GASP_OMP_SINGLE", "START"),
            1,
            "every thread meets the single"
        );
    }
    assert_eq!(criticals, 3 * 400, "one critical section per iteration");
    assert_eq!(
        parallel, 1,
        "one parallel region, begun by the primary thread"
    );
}

const CONTENDED: &str = r#"
#include <omp.h>
#include <stdio.h>
int main(void) {
  double sum = 0;
  #pragma omp parallel num_threads(4)
  for (int i = 0; i < 100; i++) {
    #pragma omp critical
    {
      volatile double x = 0;
      for (int k = 0; k < 20000; k++) x += k;  /* all the work inside the lock */
      sum += x;
    }
  }
  printf("%.0f\n", sum);
  return 0;
}
"#;

#[test]
fn a_contended_critical_section_is_found() {
    let (dir, exe) = build("contended", CONTENDED);
    let (trace, _) = common::gaspard_run(&dir, &[exe.to_str().unwrap()]);
    let r = common::report(&trace);
    let locks: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "lock_contention")
        .collect();
    assert_eq!(locks.len(), 1, "{}", r["findings"]);
    assert_eq!(locks[0]["threads"].as_array().unwrap().len(), 4);
    let line = CONTENDED
        .lines()
        .position(|l| l.contains("omp critical"))
        .unwrap()
        + 1;
    assert_eq!(locks[0]["location"]["line"], line);
    assert!(
        locks[0]["message"]
            .as_str()
            .unwrap()
            .contains("over 400 acquisitions"),
        "{}",
        locks[0]["message"]
    );
}
