//! Filters by event name and callsite (`gaspard run --exclude/--include/
//! --exclude-sites`): the events left out are absent from the trace, the rest
//! is untouched, and the trace says how many were left out.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;
use common::{dump, events, report};

const ITERS: usize = 30;

/// heat.c built in a directory of the test's own (`name`).
fn heat(name: &str) -> (PathBuf, PathBuf) {
    let dir = common::tmpdir(name);
    let exe = common::compile_heat(&dir);
    (dir, exe)
}

/// Runs heat under `gaspard run` with `opts`; its dump and report.
fn run(dir: &Path, name: &str, exe: &Path, opts: &[&str]) -> (Value, Value) {
    let trace = dir.join(name);
    let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .arg("run")
        .arg("-o")
        .arg(&trace)
        .args(opts)
        .arg("--")
        .arg(exe)
        .arg(ITERS.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dump(&trace), report(&trace))
}

/// Events per kind name (user events under their name), START and ATOMIC
/// phases only, over all threads.
fn counts(v: &Value) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for e in events(v).iter().flatten() {
        if e["phase"] == "END" {
            continue;
        }
        let name = e["name"]
            .as_str()
            .or_else(|| e["kind"].as_str())
            .unwrap()
            .to_string();
        *m.entry(name).or_default() += 1;
    }
    m
}

/// The number the trace gives for the events the filters left out.
fn left_out(r: &Value) -> u64 {
    let p: Vec<&str> = r["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str())
        .filter(|p| p.contains("left out by the filters"))
        .collect();
    assert_eq!(p.len(), 1, "{:#}", r["problems"]);
    let words: Vec<&str> = p[0].split_whitespace().collect();
    let i = words.iter().position(|w| *w == "events").unwrap();
    words[i - 1].parse().unwrap()
}

fn line_of(needle: &str) -> usize {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/gasp/heat.c"),
    )
    .unwrap();
    1 + src.lines().position(|l| l.contains(needle)).unwrap()
}

#[test]
fn names_prefixes_and_sites_leave_out_exactly_their_events() {
    let (dir, exe) = heat("filters-names");
    let (all_dump, all_report) = run(&dir, "all", &exe, &[]);
    let all = counts(&all_dump);
    assert!(!all_report["problems"]
        .to_string()
        .contains("left out by the filters"));
    // Four threads, ITERS iterations, each with a user event, memputs, gets.
    assert_eq!(all["GASP_UPC_MEMPUT"], 4 * ITERS);
    assert_eq!(all["GASP_UPC_GET"], 6 * ITERS, "{all:?}");
    assert_eq!(all["iteration"], 4 * ITERS, "{all:?}");

    // By kind name and by user event name: START and END of each are left out.
    let (d, r) = run(
        &dir,
        "exclude",
        &exe,
        &["--exclude", "GASP_UPC_GET,iteration"],
    );
    let c = counts(&d);
    assert!(
        !c.contains_key("GASP_UPC_GET") && !c.contains_key("iteration"),
        "{c:?}"
    );
    for (k, n) in &all {
        if k != "GASP_UPC_GET" && k != "iteration" {
            assert_eq!(c.get(k), Some(n), "{k}");
        }
    }
    assert_eq!(left_out(&r), 2 * (6 + 4) * ITERS as u64);

    // Only what is included (gaspard's own events are always kept).
    let (d, r) = run(
        &dir,
        "include",
        &exe,
        &["--include", "GASP_UPC_NOTIFY,GASP_UPC_W*"],
    );
    let c = counts(&d);
    let kept: Vec<&String> = c.keys().filter(|k| !k.starts_with("GASPARD_")).collect();
    assert_eq!(kept, ["GASP_UPC_NOTIFY", "GASP_UPC_WAIT"], "{c:?}");
    assert_eq!(c["GASP_UPC_WAIT"], all["GASP_UPC_WAIT"]);
    let dropped: usize = all
        .iter()
        .filter(|(k, _)| !k.starts_with("GASPARD_") && !kept.contains(k))
        .map(|(k, n)| if k == "GASP_UPC_NOTIFY" { 0 } else { 2 * n })
        .sum();
    assert_eq!(left_out(&r), dropped as u64);

    // By source position: the forall loop's start and end lines.
    let start = line_of("GASP_UPC_FORALL, GASP_START");
    let end = line_of("GASP_UPC_FORALL, GASP_END");
    let sites = format!("heat.c:{start},gasp/heat.c:{end}");
    let (d, r) = run(&dir, "sites", &exe, &["--exclude-sites", &sites]);
    let c = counts(&d);
    assert!(!c.contains_key("GASP_UPC_FORALL"), "{c:?}");
    assert_eq!(c["GASP_UPC_MEMPUT"], all["GASP_UPC_MEMPUT"]);
    assert_eq!(left_out(&r), 2 * all["GASP_UPC_FORALL"] as u64);
}

#[test]
fn a_filter_naming_no_event_is_reported() {
    let (dir, exe) = heat("filters-unknown");
    let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .arg("run")
        .arg("-o")
        .arg(dir.join("t"))
        .args([
            "--exclude",
            "GASP_UPC_NO_SUCH_EVENT",
            "--exclude-sites",
            "heat.c:x",
        ])
        .arg("--")
        .arg(&exe)
        .arg("3")
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'GASP_UPC_NO_SUCH_EVENT' names no event kind"),
        "{err}"
    );
    assert!(err.contains("'heat.c:x'"), "{err}");
    // Nothing was left out: no note.
    let r = report(&dir.join("t"));
    assert!(!r["problems"].to_string().contains("left out"));
}
