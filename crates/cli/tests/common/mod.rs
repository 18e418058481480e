//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A fresh, empty directory for one test: `<name>` in this test binary's
/// directory ([`root`]).
pub fn tmpdir(name: &str) -> PathBuf {
    let d = root().join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// This test binary's directory, `gaspard-tests-<pid>` in the temp dir.
/// Those of earlier runs are removed once their process is gone and they
/// are an hour old: a failed test's traces stay for a while to be looked
/// at, and runs do not pile up.
pub fn root() -> &'static Path {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let tmp = std::env::temp_dir();
        let me = std::process::id();
        let stale = |e: &std::fs::DirEntry| {
            let pid = e.file_name().to_str().and_then(|n| {
                n.strip_prefix("gaspard-tests-")
                    .and_then(|p| p.parse::<u32>().ok())
            });
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age.as_secs() >= 3600);
            pid.is_some_and(|p| p != me && !Path::new(&format!("/proc/{p}")).exists()) && old
        };
        for e in std::fs::read_dir(&tmp).into_iter().flatten().flatten() {
            if stale(&e) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        tmp.join(format!("gaspard-tests-{me}"))
    })
}

/// One timing-sensitive test of a test binary at a time, compiler included.
/// Two cores are all this machine has: a run whose balance (or imbalance) a
/// test checks must not share them with a compiler or another run, or the
/// scheduler alone makes a balanced run look loaded. Hold the guard from the
/// first compile to the end of the test.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// `gaspard dump DIR --json`, parsed.
pub fn dump(dir: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .arg("dump")
        .arg(dir)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dump failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Each thread's events of a dump.
pub fn events(v: &Value) -> Vec<Vec<Value>> {
    v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["events"].as_array().unwrap().clone())
        .collect()
}

/// `gaspard report DIR --json`, parsed.
pub fn report(dir: &Path) -> Value {
    report_with(dir, &[])
}

/// `gaspard report DIR --json` with `args` too, parsed. The same report
/// must come of the trace's streams summarized window by window
/// (`GASPARD_WINDOW_EVENTS`, windows of 7 events, or of 10 000 in a big
/// trace), and of the trace read whole (`--in-memory`): both are checked
/// too.
pub fn report_with(dir: &Path, args: &[&str]) -> Value {
    let run_with = |window: Option<u64>, more: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_gaspard"));
        c.arg("report").arg(dir).arg("--json").args(args).args(more);
        if let Some(n) = window {
            c.env("GASPARD_WINDOW_EVENTS", n.to_string());
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "report failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let run = |window: Option<u64>| run_with(window, &[]);
    let whole = run(None);
    let v: Value = serde_json::from_slice(&whole).unwrap();
    let events = v["events"].as_u64().unwrap_or(0);
    let window = if events > 200_000 { 10_000 } else { 7 };
    let windowed = run(Some(window));
    let differs = |other: &[u8], how: &str| {
        if other == whole.as_slice() {
            return;
        }
        let (a, b) = (
            String::from_utf8_lossy(&whole),
            String::from_utf8_lossy(other),
        );
        let line = a.lines().zip(b.lines()).position(|(x, y)| x != y);
        panic!(
            "{}: the report {how} differs, from line {:?}: {:?} vs {:?}",
            dir.display(),
            line.map(|l| l + 1),
            line.and_then(|l| a.lines().nth(l)),
            line.and_then(|l| b.lines().nth(l)),
        );
    };
    differs(&windowed, &format!("made in windows of {window} events"));
    if !args.contains(&"--in-memory") {
        differs(&run_with(None, &["--in-memory"]), "of the trace read whole");
    }
    v
}

/// The kinds of the findings of a report.
pub fn finding_kinds(r: &Value) -> Vec<String> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_string())
        .collect()
}

/// `gaspard run -o DIR/trace -- CMD...` in `dir`, as root may run Open MPI's
/// launchers, each launch with its own session directory (concurrent launches
/// race creating a shared one). Returns the trace directory and the output.
pub fn gaspard_run(dir: &Path, cmd: &[&str]) -> (std::path::PathBuf, std::process::Output) {
    gaspard_run_with(dir, cmd, &[])
}

/// [`gaspard_run`] with more environment variables.
pub fn gaspard_run_with(
    dir: &Path,
    cmd: &[&str],
    vars: &[(&str, &str)],
) -> (std::path::PathBuf, std::process::Output) {
    let trace = dir.join("trace");
    let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .envs(vars.iter().copied())
        .arg("run")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .args(cmd)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_orte_tmpdir_base", dir)
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("OMP_TOOL_LIBRARIES")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        cmd[0],
        String::from_utf8_lossy(&out.stderr)
    );
    (trace, out)
}

/// The workspace's root directory.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Writes `src` as `dir/NAME.c` and compiles it with `opt` (e.g. "-O2")
/// against gaspard's headers and the debug libgaspard; the executable.
pub fn compile_gasp(dir: &Path, name: &str, src: &str, opt: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    compile_gasp_file(&c, &exe, opt);
    exe
}

/// Compiles the C file `source` into `exe` with `opt` and `-g` against
/// gaspard's headers and the debug libgaspard.
pub fn compile_gasp_file(source: &Path, exe: &Path, opt: &str) {
    let ws = workspace();
    let lib = ws.join("target/debug");
    assert!(
        lib.join("libgaspard.so").exists(),
        "target/debug/libgaspard.so is missing: run `cargo build --workspace` first (make test does)"
    );
    let out = Command::new("cc")
        .args([opt, "-g", "-pthread", "-I"])
        .arg(ws.join("crates/gasp/include"))
        .arg(source)
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lgaspard", "-o"])
        .arg(exe)
        .output()
        .expect("cannot run cc: a C compiler is needed for these tests");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// examples/gasp/heat.c (compiled where it is, so that its events name it)
/// with `-O2`, as `dir/heat`.
pub fn compile_heat(dir: &Path) -> PathBuf {
    let exe = dir.join("heat");
    compile_gasp_file(&workspace().join("examples/gasp/heat.c"), &exe, "-O2");
    exe
}

/// Writes `src` as `dir/FILE` and compiles it with `compiler` (`mpicc`,
/// `oshcc`, `mpifort`...) and `-g` into `dir/prog`; the executable.
pub fn compile_with(dir: &Path, compiler: &str, file: &str, src: &str) -> PathBuf {
    let path = dir.join(file);
    std::fs::write(&path, src).unwrap();
    let exe = dir.join("prog");
    let out = Command::new(compiler)
        .arg("-g")
        .arg(&path)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|_| {
            panic!("{compiler} is needed (Debian: libopenmpi-dev openmpi-bin gfortran)")
        });
    assert!(
        out.status.success(),
        "{compiler}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Writes `src` as `dir/NAME.c` and builds it with
/// `gaspard cc WRAPPER_ARGS -- cc CC_ARGS` into `dir/NAME`; the executable.
pub fn gaspard_cc(dir: &Path, name: &str, src: &str, wrapper: &[&str], cc: &[&str]) -> PathBuf {
    gaspard_cc_with(dir, name, src, wrapper, "cc", cc)
}

/// [`gaspard_cc`] with another compiler: `gaspard cc WRAPPER_ARGS -- COMPILER CC_ARGS`.
pub fn gaspard_cc_with(
    dir: &Path,
    name: &str,
    src: &str,
    wrapper: &[&str],
    compiler: &str,
    cc: &[&str],
) -> PathBuf {
    compile(dir, name, src, wrapper, compiler, cc, false)
}

/// [`gaspard_cc`] run in `dir` on the source's name alone (`NAME.c`), as
/// `__FILE__` then gives it.
pub fn gaspard_cc_here(
    dir: &Path,
    name: &str,
    src: &str,
    wrapper: &[&str],
    cc: &[&str],
) -> PathBuf {
    compile(dir, name, src, wrapper, "cc", cc, true)
}

fn compile(
    dir: &Path,
    name: &str,
    src: &str,
    wrapper: &[&str],
    compiler: &str,
    cc: &[&str],
    here: bool,
) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(name);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gaspard"));
    cmd.arg("cc").args(wrapper).args(["--", compiler]).args(cc);
    if here {
        cmd.arg(format!("{name}.c")).current_dir(dir);
    } else {
        cmd.arg(&c);
    }
    let out = cmd.arg("-o").arg(&exe).output().unwrap();
    assert!(
        out.status.success(),
        "gaspard cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}
