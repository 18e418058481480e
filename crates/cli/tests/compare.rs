//! `gaspard compare`: runs of examples/shmem/heat.c at 2 and 4 PEs, compared
//! against each run's own report.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

mod common;
use common::report;

/// Steps of the heat example: each PE meets at 2 barriers per step, 2 more
/// around the loop.
const STEPS: u64 = 10;

fn gaspard(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .args(args)
        .output()
        .unwrap()
}

/// The traces of heat.c at 2 and 4 PEs, recorded once for all tests.
fn traces() -> &'static (PathBuf, PathBuf) {
    static TRACES: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    TRACES.get_or_init(|| {
        let build = common::tmpdir("compare-build");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/shmem/heat.c");
        let exe = build.join("heat");
        let out = Command::new("oshcc")
            .arg("-g")
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .output()
            .expect("oshcc is needed (Debian: libopenmpi-dev openmpi-bin)");
        assert!(
            out.status.success(),
            "oshcc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let run = |pes: usize| {
            let dir = common::tmpdir(&format!("compare-{pes}"));
            let np = pes.to_string();
            let steps = STEPS.to_string();
            let (trace, out) = common::gaspard_run(
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
                    &steps,
                ],
            );
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(
                said.contains(&format!("heat: {STEPS} steps on {pes} PEs")),
                "{said}"
            );
            trace
        };
        (run(2), run(4))
    })
}

/// The line of heat.c's barrier after each step's halo puts.
fn halo_barrier_line() -> u64 {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/shmem/heat.c");
    let text = std::fs::read_to_string(src).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let put = lines
        .iter()
        .rposition(|l| l.contains("shmem_double_put"))
        .unwrap();
    let barrier = lines[put..]
        .iter()
        .position(|l| l.contains("shmem_barrier_all"))
        .unwrap();
    (put + barrier + 1) as u64
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an unsigned: {v}"))
}

#[test]
fn json_matches_each_runs_report() {
    let (two, four) = traces();
    // Largest first: compare sorts by process count.
    let out = gaspard(&[
        "compare".as_ref(),
        four.as_os_str(),
        two.as_os_str(),
        "--json".as_ref(),
    ]);
    assert!(
        out.status.success(),
        "compare: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    let reports = [report(two), report(four)];
    let runs = c["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(u(&c["largest"]), 1);
    for (pes, (run, rep)) in [2u64, 4].iter().zip(runs.iter().zip(&reports)) {
        assert_eq!(u(&run["processes"]), *pes);
        assert_eq!(run["processes"], rep["processes"]);
        assert_eq!(run["threads"], rep["threads"]);
        let bd = rep["breakdown"].as_array().unwrap();
        let wall = bd.iter().map(|b| u(&b["span_ns"])).max().unwrap();
        assert!(wall > 0);
        assert_eq!(u(&run["wall_ns"]), wall);
        for k in ["compute_ns", "sync_ns", "comm_ns"] {
            assert_eq!(u(&run[k]), bd.iter().map(|b| u(&b[k])).sum::<u64>(), "{k}");
        }
    }
    assert!(runs[0]["label"].as_str().unwrap().contains("compare-2"));
    assert!(runs[1]["label"].as_str().unwrap().contains("compare-4"));
    // The baseline against itself, the larger run against the formula.
    assert_eq!(f(&runs[0]["speedup"]), 1.0);
    assert_eq!(f(&runs[0]["efficiency"]), 1.0);
    let (w0, p0) = (u(&runs[0]["wall_ns"]) as f64, u(&runs[0]["threads"]) as f64);
    let (w1, p1) = (u(&runs[1]["wall_ns"]) as f64, u(&runs[1]["threads"]) as f64);
    assert!(close(f(&runs[1]["speedup"]), w0 / w1));
    assert!(close(f(&runs[1]["efficiency"]), (w0 * p0) / (w1 * p1)));

    // Every event of each report is a region with its numbers, but the
    // runtime's start-up and shutdown, which are not the program's.
    let regions = c["regions"].as_array().unwrap();
    let runtime = |name: &str| name == "GASP_SHMEM_INIT" || name == "GASP_SHMEM_FINALIZE";
    assert!(
        !regions.iter().any(|r| runtime(r["name"].as_str().unwrap())),
        "no region of the runtime's start-up"
    );
    let region = |kind: &str, name: &str, file: Option<&str>, line: Option<u64>| {
        regions
            .iter()
            .find(|r| {
                r["kind"] == kind
                    && r["name"] == name
                    && r["file"].as_str() == file
                    && r["line"].as_u64() == line
            })
            .unwrap_or_else(|| panic!("no {kind} region {name} {file:?}:{line:?}"))
    };
    for (i, rep) in reports.iter().enumerate() {
        let threads = u(&rep["threads"]) as f64;
        for s in rep["by_event"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| !runtime(s["name"].as_str().unwrap()))
        {
            let r = &region("event", s["name"].as_str().unwrap(), None, None)["runs"][i];
            assert_eq!(r["count"], s["count"], "{s}");
            assert_eq!(r["total_ns"], s["total_ns"], "{s}");
            assert_eq!(r["bytes"], s["bytes"], "{s}");
            assert!(close(
                f(&r["per_thread_ns"]),
                u(&s["total_ns"]) as f64 / threads
            ));
        }
        // Callsites: the report's entries of one line (any column) added up.
        for s in rep["by_callsite"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| !runtime(s["name"].as_str().unwrap()))
        {
            let (name, file, line) = (
                s["name"].as_str().unwrap(),
                s["file"].as_str(),
                s["line"].as_u64(),
            );
            let same: Vec<&Value> = rep["by_callsite"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| {
                    o["name"] == name && o["file"].as_str() == file && o["line"].as_u64() == line
                })
                .collect();
            let r = &region("callsite", name, file, line)["runs"][i];
            assert_eq!(
                u(&r["count"]),
                same.iter().map(|o| u(&o["count"])).sum::<u64>()
            );
            assert_eq!(
                u(&r["total_ns"]),
                same.iter().map(|o| u(&o["total_ns"])).sum::<u64>()
            );
        }
    }
    // The barriers: in both runs, 2 per step and 2 more on each PE.
    let barrier = region("event", "GASP_SHMEM_BARRIER_ALL", None, None);
    let cells = barrier["runs"].as_array().unwrap();
    for (i, cell) in cells.iter().enumerate() {
        let threads = u(&runs[i]["threads"]);
        assert_eq!(u(&cell["count"]), (2 * STEPS + 2) * threads);
        assert!(close(
            f(&cell["per_thread_ns"]),
            u(&cell["total_ns"]) as f64 / threads as f64
        ));
    }
    let (t0, t1) = (f(&cells[0]["per_thread_ns"]), f(&cells[1]["per_thread_ns"]));
    assert_eq!(f(&cells[0]["efficiency"]), 1.0);
    assert!(close(f(&cells[1]["speedup"]), t0 / t1));
    let eff = (t0 * p0) / (t1 * p1);
    assert!(close(f(&cells[1]["efficiency"]), eff));
    assert_eq!(
        barrier["does_not_scale"].as_bool().unwrap(),
        t1 > t0 || eff < 0.5
    );
    // The barrier of each step's halo exchange, at its line in both runs.
    let halo_line = halo_barrier_line();
    let halo = regions
        .iter()
        .find(|r| {
            r["kind"] == "callsite"
                && r["name"] == "GASP_SHMEM_BARRIER_ALL"
                && r["file"].as_str().is_some_and(|f| f.ends_with("heat.c"))
                && r["line"] == halo_line
        })
        .unwrap_or_else(|| panic!("heat.c:{halo_line} barrier"));
    for (i, cell) in halo["runs"].as_array().unwrap().iter().enumerate() {
        assert_eq!(u(&cell["count"]), STEPS * u(&runs[i]["threads"]));
    }

    // Each report's findings, with their severity in their run.
    let findings = c["findings"].as_array().unwrap();
    for (i, rep) in reports.iter().enumerate() {
        for fd in rep["findings"].as_array().unwrap() {
            let (file, line) = (
                fd["location"]["file"].as_str(),
                fd["location"]["line"].as_u64(),
            );
            let total: f64 = rep["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| o["kind"] == fd["kind"] && o["location"] == fd["location"])
                .map(|o| f(&o["severity"]))
                .sum();
            let t = findings
                .iter()
                .find(|t| {
                    t["kind"] == fd["kind"]
                        && t["file"].as_str() == file
                        && t["line"].as_u64() == line
                })
                .unwrap_or_else(|| panic!("finding {fd} missing"));
            assert!(close(f(&t["severity"][i]), total));
        }
    }
    for t in findings {
        let s = t["severity"].as_array().unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(t["grows"].as_bool().unwrap(), f(&s[1]) > f(&s[0]));
    }
}

#[test]
fn text_names_both_runs() {
    let (two, four) = traces();
    let out = gaspard(&["compare".as_ref(), four.as_os_str(), two.as_os_str()]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let json = gaspard(&[
        "compare".as_ref(),
        four.as_os_str(),
        two.as_os_str(),
        "--json".as_ref(),
    ]);
    let c: Value = serde_json::from_slice(&json.stdout).unwrap();
    let labels: Vec<&str> = c["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert!(
        text.contains(&format!("baseline {} (2 processes, 2 threads)", labels[0])),
        "{text}"
    );
    for l in &labels {
        assert!(
            text.lines().any(|line| line.trim_start().starts_with(l)),
            "{l}: {text}"
        );
    }
    assert!(text.contains("GASP_SHMEM_BARRIER_ALL"), "{text}");
    let at = format!("heat.c:{} GASP_SHMEM_BARRIER_ALL", halo_barrier_line());
    assert!(text.contains(&at), "{text}");
}

#[test]
fn fewer_than_two_dirs_is_an_error() {
    let dir = common::tmpdir("compare-one");
    let out = gaspard(&["compare".as_ref(), dir.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("at least two trace directories (1 given)"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn missing_or_unreadable_dir_is_an_error() {
    let dir = common::tmpdir("compare-missing");
    let missing = dir.join("no-such-trace");
    let out = gaspard(&["compare".as_ref(), dir.as_os_str(), missing.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{} does not exist", missing.display())),
        "{err}"
    );
    // An existing directory holding no trace.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = gaspard(&["compare".as_ref(), empty.as_os_str(), empty.as_os_str()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds no gaspard trace"), "{err}");
    assert!(out.stdout.is_empty());
}
