//! `mpirun -np N gaspard report DIR --mpi`: the ranks share the reading of a
//! trace and the report is the one `gaspard report DIR` prints, which reads
//! the trace one process at a time; so is the report of `gaspard report DIR
//! --in-memory`, which reads it whole.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Traces of bundled examples recorded with the real launchers: MPI one-sided
/// at 4 ranks, OpenSHMEM heat at 3 PEs (callsites found from code addresses)
/// Coarray Fortran Jacobi at 2 images (coarray events recognised), and the
/// MPI example built with `gaspard cc --profile` (function events, their
/// signatures shared by the ranks).
fn traces(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (name, compiler, src, cmd, args) in [
        (
            "mpi",
            "mpicc",
            "examples/mpi/rma_halo.c",
            ["mpirun", "-np", "4"],
            &["20"][..],
        ),
        (
            "shmem",
            "oshcc",
            "examples/shmem/heat.c",
            ["oshrun", "-np", "3"],
            &["20"][..],
        ),
        (
            "caf",
            "caf",
            "examples/caf/jacobi.f90",
            ["cafrun", "-np", "2"],
            &[][..],
        ),
        (
            "func",
            "mpicc",
            "examples/mpi/rma_halo.c",
            ["mpirun", "-np", "3"],
            &["5"][..],
        ),
    ] {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        let exe = d.join("prog");
        let mut cc = if name == "func" {
            let mut c = Command::new(env!("CARGO_BIN_EXE_gaspard"));
            c.args(["cc", "--profile", "--", compiler]);
            c
        } else {
            Command::new(compiler)
        };
        let st = cc
            .arg("-g")
            .arg(Path::new(ROOT).join(src))
            .arg("-o")
            .arg(&exe)
            .status()
            .unwrap();
        assert!(st.success(), "{compiler} {src}");
        let mut full: Vec<&str> = cmd.to_vec();
        full.push("--oversubscribe");
        if name == "mpi" || name == "shmem" {
            full.extend(["--mca", "osc", "^rdma"]);
        }
        full.push(exe.to_str().unwrap());
        full.extend(args);
        let (trace, _) = common::gaspard_run(&d, &full);
        out.push(trace);
    }
    out
}

/// `gaspard report ARGS`, under `mpirun -np NP` when `np` is given, killed
/// after two minutes (a rank waiting forever is a failure, not a hang).
/// The first line where two outputs differ, for the failure message.
fn first_difference(a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    match a
        .lines()
        .zip(b.lines())
        .enumerate()
        .find(|(_, (x, y))| x != y)
    {
        Some((i, (x, y))) => format!("line {}: {x:?} vs {y:?}", i + 1),
        None => format!("{} lines vs {}", a.lines().count(), b.lines().count()),
    }
}

fn report(dir: &Path, np: Option<usize>, args: &[&str]) -> Output {
    report_env(dir, np, args, &[])
}

/// [`report`] with the variables `env` set.
fn report_env(dir: &Path, np: Option<usize>, args: &[&str], env: &[(&str, &str)]) -> Output {
    let gaspard = env!("CARGO_BIN_EXE_gaspard");
    let mut c = match np {
        Some(n) => {
            let mut c = Command::new("mpirun");
            c.args(["-np", &n.to_string(), "--oversubscribe", gaspard]);
            c
        }
        None => Command::new(gaspard),
    };
    c.arg("report")
        .args(args)
        .envs(env.iter().copied())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_orte_tmpdir_base", dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = c.spawn().unwrap();
    let start = Instant::now();
    let id = child.id();
    let watchdog = std::thread::spawn(move || {
        while start.elapsed() < Duration::from_secs(120) {
            std::thread::sleep(Duration::from_millis(200));
            // SAFETY: signal 0 only asks whether the process exists.
            if unsafe { libc_kill(id as i32, 0) } != 0 {
                return false;
            }
        }
        // SAFETY: ends the launcher that has run for too long.
        unsafe { libc_kill(id as i32, 9) };
        true
    });
    let out = child.wait_with_output().unwrap();
    assert!(
        !watchdog.join().unwrap(),
        "gaspard report {args:?} (np {np:?}) hung"
    );
    out
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// Fails unless `out` succeeded and printed what `serial` printed.
fn assert_same(serial: &Output, out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout == serial.stdout,
        "{what}: the report differs from the serial one: {}",
        first_difference(&serial.stdout, &out.stdout)
    );
}

#[test]
fn the_ranks_report_what_one_process_reports() {
    let dir = common::tmpdir("distributed-same");
    for trace in traces(&dir) {
        let t = trace.to_str().unwrap();
        for args in [vec![t, "--json"], vec![t]] {
            let serial = report(&dir, None, &args);
            assert!(serial.status.success());
            let mut with = args.clone();
            with.push("--mpi");
            let mut low = args.clone();
            low.push("--low-memory");
            let mut whole = args.clone();
            whole.push("--in-memory");
            let mut both = with.clone();
            both.push("--low-memory");
            // The ranks, then one process at a time (as without --mpi by
            // default) and read whole, alone, and one process at a time by
            // each of 2 ranks.
            let runs = [
                (Some(1), &with),
                (Some(2), &with),
                (Some(3), &with),
                (None, &low),
                (None, &whole),
                (Some(2), &both),
            ];
            for (np, run) in runs {
                let out = report(&dir, np, run);
                assert_same(&serial, &out, &format!("np {np:?}, {run:?}"));
            }
            // Each stream summarized window by window.
            for n in ["1", "7", "1000"] {
                let out = report_env(&dir, None, &args, &[("GASPARD_WINDOW_EVENTS", n)]);
                assert_same(&serial, &out, &format!("windows of {n} events"));
            }
            if args.len() == 2 {
                // The report is about the program: events, processes, findings.
                let v: serde_json::Value = serde_json::from_slice(&serial.stdout).unwrap();
                assert!(v["processes"].as_u64().unwrap() >= 2, "{}", v["processes"]);
                assert!(v["events"].as_u64().unwrap() > 100);
            }
        }
    }
}

#[test]
fn a_damaged_trace_gives_the_same_problems() {
    let dir = common::tmpdir("distributed-damaged");
    let trace = traces(&dir).remove(0);
    // Cut one stream file in its middle and remove another process's manifest.
    let mut gst: Vec<PathBuf> = std::fs::read_dir(&trace)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "gst"))
        .collect();
    gst.sort();
    let len = std::fs::metadata(&gst[0]).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&gst[0])
        .unwrap();
    f.set_len(len / 2).unwrap();
    // The process that started first loses its manifest: its events come
    // before those of every process that keeps one.
    let before = common::dump(&trace);
    let first_of = |v: &serde_json::Value| -> (String, u64) {
        v["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| !t["events"].as_array().unwrap().is_empty())
            .map(|t| {
                let ev = t["events"].as_array().unwrap();
                let at = |phase: &str| {
                    ev.iter()
                        .find(|e| e["kind"] == "GASP_MPI_INIT" && e["phase"] == phase)
                        .map_or(0, |e| e["t_ns"].as_u64().unwrap())
                };
                (
                    t["process"].as_str().unwrap().to_string(),
                    at("END") - at("START"),
                )
            })
            .min_by_key(|(p, _)| {
                let t = before["threads"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|t| t["process"] == p.as_str())
                    .unwrap();
                t["events"][0]["t_ns"].as_u64().unwrap()
            })
            .unwrap()
    };
    let (earliest, gap) = first_of(&before);
    std::fs::remove_file(trace.join(format!("{earliest}.manifest"))).unwrap();
    // Its events keep their times: none is pulled to the start of the trace,
    // which would shorten its MPI_Init.
    let after = common::dump(&trace);
    let kept = after["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["process"] == earliest.as_str())
        .unwrap();
    let at = |phase: &str| {
        kept["events"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "GASP_MPI_INIT" && e["phase"] == phase)
            .unwrap()["t_ns"]
            .as_u64()
            .unwrap()
    };
    let init = at("END") - at("START");
    assert!(
        init.abs_diff(gap) <= gap / 100_000 + 2000,
        "{earliest}: MPI_Init takes {init} ns, {gap} ns with its manifest"
    );
    let t = trace.to_str().unwrap();
    let serial = report(&dir, None, &[t, "--json"]);
    assert!(serial.status.success());
    let v: serde_json::Value = serde_json::from_slice(&serial.stdout).unwrap();
    let problems = v["problems"].as_array().unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p.as_str().unwrap().contains("no manifest")),
        "{problems:?}"
    );
    assert!(problems.len() >= 2, "{problems:?}");
    let out = report(&dir, Some(2), &[t, "--json", "--mpi"]);
    assert_same(&serial, &out, "the damaged trace at 2 ranks");
    let out = report(&dir, None, &[t, "--json", "--in-memory"]);
    assert_same(&serial, &out, "the damaged trace read whole");
}

#[test]
fn a_missing_directory_is_an_error_on_every_rank() {
    let dir = common::tmpdir("distributed-missing");
    let missing = dir.join("no-such-trace");
    let out = report(&dir, Some(2), &[missing.to_str().unwrap(), "--mpi"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not exist"), "{err}");
    assert!(out.stdout.is_empty());
}

/// MPI's libraries are loaded only for `--mpi`: with a broken `libmpi`
/// first on the library path, the other commands work, and `--mpi` says
/// what is wrong instead of the binary failing to start.
#[test]
fn mpi_libraries_are_loaded_only_for_mpi() {
    let dir = common::tmpdir("distributed-nompi");
    let libs = dir.join("libs");
    std::fs::create_dir_all(&libs).unwrap();
    std::fs::write(libs.join("libmpi.so.40"), b"").unwrap();
    // gaspard with the broken libmpi first on the library path.
    let run = |args: &[&str], trace: Option<&Path>| {
        Command::new(env!("CARGO_BIN_EXE_gaspard"))
            .args(args)
            .args(trace)
            .env("LD_LIBRARY_PATH", &libs)
            .output()
            .unwrap()
    };
    let help = run(&["--version"], None);
    assert!(
        help.status.success(),
        "{}",
        String::from_utf8_lossy(&help.stderr)
    );
    let heat = common::compile_heat(&dir);
    let t = common::gaspard_run(&dir, &[heat.to_str().unwrap(), "5"]).0;
    let plain = run(&["report", "--json"], Some(&t));
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert!(v["events"].as_u64().unwrap() > 0);
    let mpi = run(&["report", "--mpi"], Some(&t));
    assert_eq!(mpi.status.code(), Some(2));
    let err = String::from_utf8_lossy(&mpi.stderr);
    assert!(
        err.contains("MPI's libraries cannot be loaded") && err.contains("libmpi.so.40"),
        "{err}"
    );
    assert!(mpi.stdout.is_empty());
}
