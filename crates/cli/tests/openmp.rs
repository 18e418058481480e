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

/// The executable mappings of the traced process (its `.maps` file in
/// `trace`): from, to, path.
fn code_maps(trace: &std::path::Path) -> Vec<(u64, u64, String)> {
    let maps = std::fs::read_dir(trace)
        .unwrap()
        .flatten()
        .find(|e| e.path().extension().is_some_and(|x| x == "maps"))
        .expect("the trace has its process's maps");
    let text = std::fs::read_to_string(maps.path()).unwrap();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (from, to) = f.next()?.split_once('-')?;
            let path = f.nth(4)?.to_string();
            Some((
                u64::from_str_radix(from, 16).ok()?,
                u64::from_str_radix(to, 16).ok()?,
                path,
            ))
        })
        .collect()
}

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
    let maps = code_maps(&trace);
    // Constructs whose code address libomp gives inside itself rather than
    // in the program (seen once, for a critical section, in a run under
    // load; OMPT lets a runtime give no return address): there is no line
    // of the program to turn them into. A few are allowed, and said.
    let mut in_runtime = Vec::new();
    let mut checked = 0;
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
                let codeptr = e["args"]["codeptr"].as_str().unwrap();
                let codeptr = u64::from_str_radix(codeptr.trim_start_matches("0x"), 16).unwrap();
                let map = maps.iter().find(|m| m.0 <= codeptr && codeptr < m.1);
                checked += 1;
                match map {
                    Some((_, _, path)) if path.ends_with("/omp") => {
                        assert!(e["file"].as_str().unwrap_or("").ends_with("omp.c"), "{e}");
                        assert_eq!(e["line"], line_of(needle), "{kind}: {e}");
                    }
                    Some((_, _, path)) if path.contains("libomp") => in_runtime.push(e.clone()),
                    _ => panic!("{kind}: a code address in neither the program nor libomp: {e}"),
                }
            }
        }
        assert_eq!(
            count("GASP_OMP_SINGLE", "START"),
            1,
            "every thread meets the single"
        );
        // Each thread's implicit task of the region is placed at the
        // region's line (OMPT gives an implicit task no code address: its
        // region's is recorded); the initial task, outside any region, has
        // none.
        for e in evs
            .iter()
            .filter(|e| e["kind"] == "GASP_OMP_IMPLICIT_TASK" && e["phase"] == "START")
        {
            if e["args"]["flags"] == 1 {
                assert_eq!(e["args"]["codeptr"], "0x0", "{e}");
                assert!(e["file"].is_null(), "{e}");
            } else {
                assert!(e["file"].as_str().unwrap_or("").ends_with("omp.c"), "{e}");
                assert_eq!(e["line"], line_of("omp parallel"), "{e}");
            }
        }
    }
    assert_eq!(criticals, 3 * 400, "one critical section per iteration");
    assert!(
        in_runtime.len() * 100 <= checked,
        "{} of {checked} code addresses inside libomp: {in_runtime:?}",
        in_runtime.len()
    );
    assert_eq!(
        parallel, 1,
        "one parallel region, begun by the primary thread"
    );

    // Time in parallel regions: the primary thread's is its team task's, its
    // initial task (flags 1, open all along) left out; the workers' team
    // tasks never end (libomp says so at the next region, and there is
    // none): they count until their threads' last events.
    let task_starts = |t: &Value| -> Vec<(f64, i64)> {
        t["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "GASP_OMP_IMPLICIT_TASK" && e["phase"] == "START")
            .map(|e| {
                (
                    e["t_ns"].as_f64().unwrap(),
                    e["args"]["flags"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    let r = common::report(&trace);
    let breakdown = r["breakdown"].as_array().unwrap();
    for t in threads {
        let b = breakdown
            .iter()
            .find(|b| b["stream"] == t["stream"])
            .expect("a breakdown per thread");
        let parallel = b["parallel_ns"].as_f64().unwrap();
        let span = b["span_ns"].as_f64().unwrap();
        let evs = t["events"].as_array().unwrap();
        let starts = task_starts(t);
        if t["thread"] == 0 {
            assert_eq!(
                starts.iter().map(|s| s.1).collect::<Vec<_>>(),
                [1, 2],
                "{starts:?}"
            );
            let end = evs
                .iter()
                .find(|e| e["kind"] == "GASP_OMP_IMPLICIT_TASK" && e["phase"] == "END")
                .expect("the primary thread's team task ends")["t_ns"]
                .as_f64()
                .unwrap();
            let team = end - starts[1].0;
            assert!(
                (parallel - team).abs() < 2e3,
                "{parallel} ns, team task {team} ns"
            );
            assert!(parallel < span, "{b}");
        } else {
            assert_eq!(
                starts.iter().map(|s| s.1).collect::<Vec<_>>(),
                [2],
                "{starts:?}"
            );
            let last = evs.last().unwrap()["t_ns"].as_f64().unwrap();
            let open = last - starts[0].0;
            assert!(
                (parallel - open).abs() < 2e3,
                "{parallel} ns, open task {open} ns"
            );
            // (Its span begins at the thread's start, which may come well
            // before its task in a debug build.)
            assert!(parallel <= span, "{b}");
        }
    }
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
    // Without address randomization (`setarch -R`), the heap, where libomp
    // keeps the lock, begins right after the program's data.
    let (trace, _) = common::gaspard_run(&dir, &["setarch", "-R", exe.to_str().unwrap()]);
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
    // The lock, on the heap right after the program's image, is named by
    // its construct, not as a place in the program's data.
    let name = r["locks"][0]["lock"].as_str().unwrap();
    assert!(name.starts_with("omp critical 0x"), "{name}");
}
