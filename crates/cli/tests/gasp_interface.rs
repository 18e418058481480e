//! The GASP 1.4 interface end to end: `tests/c/gasp_all_events.c` plays a UPC
//! runtime that sends every event of Tables 1-10, linked against the real
//! `libgaspard.so`; `gaspard dump --json` must give back every event and
//! argument exactly.
//!
//! The C program writes, next to each event it sends, the JSON a correct
//! tool records for it (events sent while measurement is off are not
//! expected). These tests compare that with the dump, event by event, and
//! check that the expectations cover the whole specification.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

mod common;

/// Every event of Tables 1-10 and the phases the tables give it.
const SPEC_EVENTS: &[(&str, &[&str])] = &[
    ("GASP_C_FUNC", START_END),
    ("GASP_C_MALLOC", START_END),
    ("GASP_C_REALLOC", START_END),
    ("GASP_C_FREE", START_END),
    ("GASP_UPC_COLLECTIVE_EXIT", START_END),
    ("GASP_UPC_NONCOLLECTIVE_EXIT", ATOMIC),
    ("GASP_UPC_NOTIFY", START_END),
    ("GASP_UPC_WAIT", START_END),
    ("GASP_UPC_BARRIER", START_END),
    ("GASP_UPC_FENCE", START_END),
    ("GASP_UPC_FORALL", START_END),
    ("GASP_UPC_GLOBAL_ALLOC", START_END),
    ("GASP_UPC_ALL_ALLOC", START_END),
    ("GASP_UPC_ALLOC", START_END),
    ("GASP_UPC_FREE", START_END),
    ("GASP_UPC_GLOBAL_LOCK_ALLOC", START_END),
    ("GASP_UPC_ALL_LOCK_ALLOC", START_END),
    ("GASP_UPC_LOCK_FREE", START_END),
    ("GASP_UPC_LOCK", START_END),
    ("GASP_UPC_LOCK_ATTEMPT", START_END),
    ("GASP_UPC_UNLOCK", START_END),
    ("GASP_UPC_MEMCPY", START_END),
    ("GASP_UPC_MEMGET", START_END),
    ("GASP_UPC_MEMPUT", START_END),
    ("GASP_UPC_MEMSET", START_END),
    ("GASP_UPC_GET", START_END),
    ("GASP_UPC_PUT", START_END),
    ("GASP_UPC_NB_GET_INIT", START_END),
    ("GASP_UPC_NB_GET_DATA", START_END),
    ("GASP_UPC_NB_PUT_INIT", START_END),
    ("GASP_UPC_NB_PUT_DATA", START_END),
    ("GASP_UPC_NB_SYNC", START_END),
    ("GASP_UPC_CACHE_MISS", ATOMIC),
    ("GASP_UPC_CACHE_HIT", ATOMIC),
    ("GASP_UPC_CACHE_INVALIDATE", ATOMIC),
    ("GASP_UPC_ALL_BROADCAST", START_END),
    ("GASP_UPC_ALL_SCATTER", START_END),
    ("GASP_UPC_ALL_GATHER", START_END),
    ("GASP_UPC_ALL_GATHER_ALL", START_END),
    ("GASP_UPC_ALL_EXCHANGE", START_END),
    ("GASP_UPC_ALL_PERMUTE", START_END),
    ("GASP_UPC_ALL_REDUCE", START_END),
    ("GASP_UPC_ALL_PREFIX_REDUCE", START_END),
];
const START_END: &[&str] = &["START", "END"];
const ATOMIC: &[&str] = &["ATOMIC"];

/// Unknown tags each UPC thread sends while measurement is on.
const UNKNOWN_TAGS_PER_THREAD: u64 = 3;
/// Source lines of the events sent while measurement is off.
const OFF_WINDOW_LINES: std::ops::Range<u64> = 900_000..1_000_000;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// A new, empty directory in this test binary's ([`common::root`]).
fn fresh_dir(name: &str) -> PathBuf {
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let dir = common::root().join(format!("gasp-{name}-{n}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// The directory of the default `libgaspard.so`, built by `cargo build`.
fn default_library() -> PathBuf {
    let dir = workspace().join("target/debug");
    assert!(
        dir.join("libgaspard.so").exists(),
        "{}/libgaspard.so is missing: run `cargo build -p gaspard -p gaspard-gasp` first",
        dir.display()
    );
    dir
}

/// Builds `libgaspard.so` against `tests/c/renumbered/gasp_upc.h` into
/// `target/renumbered` and returns the directory holding it.
fn renumbered_library() -> PathBuf {
    let ws = workspace();
    let target = ws.join("target/renumbered");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&ws)
        .env("GASPARD_GASP_UPC_H", ws.join("tests/c/renumbered"))
        .args(["build", "-p", "gaspard-gasp", "--target-dir"])
        .arg(&target)
        .output()
        .expect("cannot run cargo");
    assert!(
        out.status.success(),
        "building libgaspard against the renumbered gasp_upc.h failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("debug")
}

/// Compiles the C program with `include` first on the include path and links
/// the `libgaspard.so` in `lib`.
fn compile(name: &str, include: &Path, lib: &Path) -> PathBuf {
    let ws = workspace();
    let exe = fresh_dir(&format!("bin-{name}")).join("gasp_all_events");
    let out = Command::new("cc")
        .args(["-O1", "-pthread", "-I"])
        .arg(include)
        .arg("-I")
        .arg(ws.join("crates/gasp/include"))
        .arg(ws.join("tests/c/gasp_all_events.c"))
        .arg("-L")
        .arg(lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lgaspard", "-o"])
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `cc` ({e}): these tests need a C compiler named cc")
        });
    assert!(
        out.status.success(),
        "cc failed on tests/c/gasp_all_events.c:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// One run of the program: how it ended, what it expects, what was recorded.
/// Its directories are removed when the test passes, kept when it fails.
struct Run {
    output: Output,
    expected: Value,
    dump: Value,
    trace: PathBuf,
    dirs: Vec<PathBuf>,
}

impl Run {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            for d in &self.dirs {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
}

/// Runs the program in `mode` with a fresh recording directory and dumps it.
fn run(exe: &Path, name: &str, mode: &str) -> Run {
    let dir = fresh_dir(name);
    let rec = dir.join("trace");
    let expected_path = dir.join("expected.json");
    // cargo test puts target/debug on LD_LIBRARY_PATH, which would win over
    // the -rpath of a program linked against another build of the library.
    let output = Command::new(exe)
        .arg(mode)
        .arg(&expected_path)
        .env("GASPARD_DIR", &rec)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("cannot run the test program");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let text = std::fs::read_to_string(&expected_path).unwrap_or_else(|e| {
        panic!(
            "the program wrote no expectations ({e}); it ended with {:?}, stderr:\n{stderr}",
            output.status
        )
    });
    let expected: Value = serde_json::from_str(&text).expect("expectations are JSON");
    let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .arg("dump")
        .arg(&rec)
        .arg("--json")
        .output()
        .expect("cannot run gaspard");
    assert!(
        out.status.success(),
        "gaspard dump {} --json failed:\n{}",
        rec.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let dump = serde_json::from_slice(&out.stdout).expect("gaspard dump --json prints JSON");
    let dirs = vec![dir, exe.parent().expect("program directory").to_path_buf()];
    Run {
        output,
        expected,
        dump,
        trace: rec,
        dirs,
    }
}

fn array<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("no array \"{key}\" in {}", short(v)))
}

/// A value as JSON, cut after 400 characters.
fn short(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(400) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s,
    }
}

/// An event of the dump without its time (the other fields in their order).
fn untimed(e: &Value) -> Value {
    match e.as_object() {
        Some(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "t_ns")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        None => e.clone(),
    }
}

/// Compares every expected thread with the dump's thread of the same tid and
/// model, event by event, and the totals. Panics with every difference.
fn assert_recorded_exactly(run: &Run, known_problems: &[&str]) {
    let (expected, dump) = (&run.expected, &run.dump);
    let mut errors = Vec::new();
    let pid = expected["pid"].as_u64().expect("expected pid");

    let processes = array(dump, "processes");
    if processes.len() != 1 || processes[0]["pid"].as_u64() != Some(pid) {
        errors.push(format!(
            "expected one process, pid {pid}; dump has {}",
            short(&dump["processes"])
        ));
    }
    if dump["lost_events"] != 0 {
        errors.push(format!(
            "lost_events: expected 0, dump has {}",
            dump["lost_events"]
        ));
    }
    if dump["unknown_tags"] != expected["unknown_tags"] {
        errors.push(format!(
            "unknown_tags: expected {}, dump has {}",
            expected["unknown_tags"], dump["unknown_tags"]
        ));
    }
    for p in array(dump, "problems") {
        // Every run has one: the user event with a %n format.
        let known =
            |s: &str| s.contains("'unreadable'") || known_problems.iter().any(|k| s.contains(k));
        if !p.as_str().is_some_and(known) {
            errors.push(format!("unexpected problem: {p}"));
        }
    }

    let dump_threads = array(dump, "threads");
    let expected_threads = array(expected, "threads");
    if dump_threads.len() != expected_threads.len() {
        errors.push(format!(
            "expected {} threads, dump has {}",
            expected_threads.len(),
            dump_threads.len()
        ));
    }
    for want in expected_threads {
        let (tid, model) = (&want["tid"], &want["model"]);
        let Some(got) = dump_threads
            .iter()
            .find(|t| t["tid"] == *tid && t["model"] == *model && t["pid"].as_u64() == Some(pid))
        else {
            errors.push(format!(
                "no thread with tid {tid} and model {model} in the dump"
            ));
            continue;
        };
        let who = format!("thread tid {tid} model {model}");
        if got["damaged"] != false {
            errors.push(format!("{who}: damaged is {}", got["damaged"]));
        }
        compare_events(
            &who,
            array(want, "events"),
            array(got, "events"),
            &mut errors,
        );
    }

    assert!(
        errors.is_empty(),
        "the dump of {} differs from what the program sent ({} differences):\n{}",
        run.trace.display(),
        errors.len(),
        errors.join("\n")
    );
}

fn compare_events(who: &str, want: &[Value], got: &[Value], errors: &mut Vec<String>) {
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        let g = untimed(g);
        if *w != g {
            errors.push(format!("{who}, event {i}:\n  expected {w}\n  recorded {g}"));
        }
    }
    if want.len() != got.len() {
        errors.push(format!(
            "{who}: expected {} events, dump has {}; first extra or missing: {}",
            want.len(),
            got.len(),
            want.get(got.len())
                .or_else(|| got.get(want.len()))
                .map(short)
                .unwrap_or_default()
        ));
    }
    let times: Vec<u64> = got
        .iter()
        .map(|e| e["t_ns"].as_u64().unwrap_or(0))
        .collect();
    if let Some(i) = times.windows(2).position(|w| w[1] < w[0]) {
        errors.push(format!(
            "{who}: events out of time order at event {}",
            i + 1
        ));
    }
    for e in got {
        if e["line"]
            .as_u64()
            .is_some_and(|l| OFF_WINDOW_LINES.contains(&l))
        {
            errors.push(format!(
                "{who}: recorded while measurement was off: {}",
                short(e)
            ));
        }
    }
}

/// The expectations of every UPC thread cover the whole specification: every
/// event with its phases, every reduction type (over all threads), strict and
/// relaxed accesses, named and anonymous barriers, trivial handles, events
/// without source position, user events with values, without format and
/// with an unreadable one.
fn assert_expectations_cover_spec(expected: &Value) {
    let mut reductions = BTreeSet::new();
    for thread in array(expected, "threads") {
        let events = array(thread, "events");
        let mut phases: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for e in events {
            let kind = e["kind"].as_str().unwrap();
            phases
                .entry(kind)
                .or_default()
                .insert(e["phase"].as_str().unwrap());
            if kind.ends_with("REDUCE") {
                reductions.insert((kind, e["args"]["type"].as_str().unwrap().to_string()));
            }
        }
        for (kind, want) in SPEC_EVENTS {
            let got: Vec<&str> = phases
                .get(kind)
                .map(|s| s.iter().copied().collect())
                .unwrap_or_default();
            let mut want = want.to_vec();
            want.sort();
            assert_eq!(got, want, "{kind}: phases sent");
        }
        let has = |what: &str, f: &dyn Fn(&Value) -> bool| {
            assert!(events.iter().any(f), "the program sends no {what}");
        };
        let arg =
            |e: &Value, kind: &str, name: &str, v: Value| e["kind"] == kind && e["args"][name] == v;
        for kind in ["GASP_UPC_GET", "GASP_UPC_PUT"] {
            has("strict access", &|e| arg(e, kind, "is_relaxed", 0.into()));
            has("relaxed access", &|e| arg(e, kind, "is_relaxed", 1.into()));
        }
        has("anonymous barrier", &|e| {
            arg(e, "GASP_UPC_BARRIER", "named", 0.into())
        });
        has("named barrier", &|e| {
            arg(e, "GASP_UPC_BARRIER", "named", 1.into())
        });
        has("trivial get handle", &|e| {
            arg(e, "GASP_UPC_NB_GET_INIT", "handle", "0x0".into())
        });
        has("trivial put handle", &|e| {
            arg(e, "GASP_UPC_NB_PUT_INIT", "handle", "0x0".into())
        });
        has("event without source file", &|e| {
            e["file"].is_null() && e["line"] == 0 && e["kind"] != "GASPARD_INIT"
        });
        has("measurement off", &|e| {
            arg(e, "GASPARD_MEASUREMENT", "on", 0.into())
        });
        for phase in ["START", "END", "ATOMIC"] {
            has("user event with values", &|e| {
                e["kind"] == "GASPARD_USER" && e["name"] == "phase" && e["phase"] == phase
            });
        }
        has("user event without format", &|e| e["name"] == "marker");
        has("unreadable user event", &|e| e["args_unread"] == true);
    }
    for kind in ["GASP_UPC_ALL_REDUCE", "GASP_UPC_ALL_PREFIX_REDUCE"] {
        for ty in ["C", "UC", "S", "US", "I", "UI", "L", "UL", "F", "D", "LD"] {
            let name = format!("GASP_UPC_REDUCTION_{ty}");
            assert!(
                reductions.contains(&(kind, name.clone())),
                "no {kind} of {name}"
            );
        }
    }
}

fn assert_exit_success(run: &Run) {
    assert!(
        run.output.status.success(),
        "the program reported wrong return values from the tool ({:?}):\n{}",
        run.output.status,
        run.stderr()
    );
}

/// The whole interface with four UPC threads and gaspard's own header.
#[test]
fn every_event_and_argument_is_recorded_exactly() {
    let exe = compile(
        "default",
        &workspace().join("crates/gasp/include"),
        &default_library(),
    );
    let run = run(&exe, "all", "all");
    assert_eq!(array(&run.expected, "threads").len(), 4);
    assert_eq!(run.expected["unknown_tags"], 4 * UNKNOWN_TAGS_PER_THREAD);
    assert_expectations_cover_spec(&run.expected);
    assert_recorded_exactly(&run, &[]);
    assert_eq!(run.dump["processes"][0]["status"], "complete");
    assert_exit_success(&run);
}

/// The same program and library source with a runtime's header that numbers
/// every event differently: the tool maps tags by name.
#[test]
fn a_renumbered_header_records_the_same_events() {
    let ws = workspace();
    let lib = renumbered_library();
    let exe = compile("renumbered", &ws.join("tests/c/renumbered"), &lib);
    let run = run(&exe, "renumbered", "all");
    assert_expectations_cover_spec(&run.expected);
    assert_recorded_exactly(&run, &[]);
    assert_eq!(run.dump["processes"][0]["status"], "complete");
    assert_exit_success(&run);
}

/// One thread with a UPC and a CAF context: two streams, measurement control
/// per context.
#[test]
fn two_models_on_one_thread_are_recorded_apart() {
    let exe = compile(
        "twomodel",
        &workspace().join("crates/gasp/include"),
        &default_library(),
    );
    let run = run(&exe, "twomodel", "twomodel");
    let threads = array(&run.expected, "threads");
    assert_eq!(threads.len(), 2);
    assert_eq!(
        threads[0]["tid"], threads[1]["tid"],
        "both contexts are on one thread"
    );
    assert_eq!(run.expected["unknown_tags"], 1);
    assert_recorded_exactly(&run, &[]);
    assert_eq!(run.dump["processes"][0]["status"], "complete");
    assert_exit_success(&run);
}

/// A crash after the threads are done: the process dies by the signal, the
/// manifest says so, and nothing recorded before is lost.
fn assert_crash_is_recorded(mode: &str, signal: i32, status: &str) {
    let exe = compile(
        mode,
        &workspace().join("crates/gasp/include"),
        &default_library(),
    );
    let run = run(&exe, mode, mode);
    assert_eq!(
        run.output.status.signal(),
        Some(signal),
        "the program should die by signal {signal}; it ended with {:?}, stderr:\n{}",
        run.output.status,
        run.stderr()
    );
    assert_eq!(run.dump["processes"][0]["status"], status);
    assert_recorded_exactly(&run, &[status, "the record stops at"]);
}

#[test]
fn events_before_abort_are_kept() {
    assert_crash_is_recorded("abort", libc_signal::SIGABRT, "crashed SIGABRT");
}

#[test]
fn events_before_a_segmentation_fault_are_kept() {
    assert_crash_is_recorded("segv", libc_signal::SIGSEGV, "crashed SIGSEGV");
}

/// Signal numbers (Linux), without a dependency on libc.
mod libc_signal {
    pub const SIGABRT: i32 = 6;
    pub const SIGSEGV: i32 = 11;
}
