//! Profile-only mode (`gaspard run --profile-only`): no events on disk, a
//! `.profile` per process, and `gaspard report` gives the same counts and
//! bytes per event, per callsite and per thread as from the full trace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;
use common::report;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn compile(dir: &Path, name: &str, cmd: &[&str], src: &str, after: &[String]) -> PathBuf {
    let exe = dir.join(name);
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .arg(root().join("../../examples").join(src))
        .arg("-o")
        .arg(&exe)
        .args(after)
        .output()
        .expect("the compiler is needed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

fn run(dir: &Path, name: &str, profile_only: bool, cmd: &[&str]) -> PathBuf {
    let trace = dir.join(name);
    let mut c = Command::new(env!("CARGO_BIN_EXE_gaspard"));
    c.arg("run").arg("-o").arg(&trace);
    if profile_only {
        c.arg("--profile-only");
    }
    // Throttling depends on timing: off, so that both runs record the same.
    let out = c
        .arg("--")
        .args(cmd)
        .env("GASPARD_THROTTLE", "off")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    trace
}

fn files(dir: &Path, ext: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == ext))
        .count()
}

/// (name, count, bytes) per event; (name, file, line) -> (count, bytes) per callsite.
type Table = BTreeMap<String, (u64, u64)>;

fn tables(r: &Value) -> (Table, Table, Vec<u64>) {
    let row = |s: &Value| (s["count"].as_u64().unwrap(), s["bytes"].as_u64().unwrap());
    let by_event = r["by_event"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap().to_string(), row(s)))
        .collect();
    let by_site = r["by_callsite"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let file = s["file"].as_str().unwrap_or("-");
            let file = file.rsplit('/').next().unwrap();
            (
                format!("{} {file}:{}", s["name"].as_str().unwrap(), s["line"]),
                row(s),
            )
        })
        .collect();
    let mut per_thread: Vec<u64> = r["by_thread"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["by_event"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["count"].as_u64().unwrap())
                .sum()
        })
        .collect();
    per_thread.sort_unstable();
    (by_event, by_site, per_thread)
}

fn same_profiles(full: &Path, prof: &Path) -> Value {
    assert!(files(full, "gst") > 0);
    assert_eq!(files(prof, "gst"), 0, "profile-only mode writes no events");
    assert_eq!(files(prof, "profile"), 1);
    let (a, b) = (report(full), report(prof));
    assert_eq!(tables(&a), tables(&b));
    assert_eq!(a["threads"], b["threads"]);
    assert!(
        b["problems"].to_string().contains("profile-only mode"),
        "{:#}",
        b["problems"]
    );
    // Interval times are measured, as in the full trace.
    let total = |r: &Value, name: &str| {
        r["by_event"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map_or(0, |s| s["total_ns"].as_u64().unwrap())
    };
    assert!(total(&b, "GASP_C_FUNC main") > 0 || total(&b, "iteration") > 0);
    b
}

#[test]
fn gasp_program_profiles_match_the_full_trace() {
    let dir = common::tmpdir("profile-only-gasp");
    let lib = root().join("../../target/debug");
    let exe = compile(
        &dir,
        "heat",
        &[
            "cc",
            "-O2",
            "-pthread",
            &format!("-I{}", root().join("../gasp/include").display()),
        ],
        "gasp/heat.c",
        &[
            format!("-L{}", lib.display()),
            format!("-Wl,-rpath,{}", lib.display()),
            "-lgaspard".into(),
        ],
    );
    let cmd = [exe.to_str().unwrap(), "40"];
    let full = run(&dir, "full", false, &cmd);
    let prof = run(&dir, "prof", true, &cmd);
    let b = same_profiles(&full, &prof);
    let (ev, _, threads) = tables(&b);
    assert_eq!(ev["GASP_UPC_MEMPUT"], (4 * 40, 4 * 40 * 4096 * 8));
    assert_eq!(ev["iteration"].0, 4 * 40);
    assert_eq!(threads.len(), 4);
}

#[test]
fn instrumented_c_functions_keep_their_names() {
    let dir = common::tmpdir("profile-only-c");
    let gaspard = env!("CARGO_BIN_EXE_gaspard");
    let exe = compile(
        &dir,
        "sort",
        &[gaspard, "cc", "--profile", "--", "cc", "-g"],
        "c/sort.c",
        &[],
    );
    let cmd = [exe.to_str().unwrap(), "256"];
    let full = run(&dir, "full", false, &cmd);
    let prof = run(&dir, "prof", true, &cmd);
    let b = same_profiles(&full, &prof);
    let (ev, _, _) = tables(&b);
    assert_eq!(ev["GASP_C_FUNC sort"].0, 2 * 511);
    assert_eq!(ev["GASP_C_FUNC main"].0, 1);
}
