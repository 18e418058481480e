//! `gaspard cc`: C programs compiled with the wrapper record their functions,
//! their malloc family and their pupc.h user events; without --profile,
//! nothing is instrumented.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

mod common;
use common::{dump, events};

fn tmp(name: &str) -> std::path::PathBuf {
    common::tmpdir(&format!("cc-{name}"))
}

const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdlib.h>
#include <pupc.h>
static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
int work(int n) {
  char *p = malloc(100 + n);
  p = realloc(p, 1000 + n);
  free(p);
  return fib(n);
}
static void *thread_main(void *arg) {
  unsigned ev = pupc_create_event("phase", "%d");
  pupc_event_start(ev, 7);
  int r = work(4);
  pupc_event_end(ev, 7);
  return (void *)(long)r;
}
int main(void) {
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, thread_main, 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
  return 0;
}
"#;

/// Builds PROGRAM with `gaspard cc ARGS -- cc`, runs it, returns its trace directory.
fn build_and_run(name: &str, wrapper: &[&str]) -> PathBuf {
    let dir = tmp(name);
    let exe = common::gaspard_cc(&dir, "prog", PROGRAM, wrapper, &["-O1", "-g", "-pthread"]);
    run_traced(&dir, &exe)
}

/// Runs `exe` (built in `dir`), which must succeed, with its trace in
/// `dir/trace`; that directory.
fn run_traced(dir: &std::path::Path, exe: &std::path::Path) -> PathBuf {
    let trace = dir.join("trace");
    let st = Command::new(exe)
        .env("GASPARD_DIR", &trace)
        .env_remove("LD_LIBRARY_PATH")
        .status()
        .unwrap();
    assert!(st.success());
    trace
}

#[test]
fn profiled_program_records_functions_memory_and_user_events() {
    let v = dump(&build_and_run("profile", &["--profile"]));
    let threads = events(&v);
    // The main thread (main) and the two workers.
    assert_eq!(threads.len(), 3, "{:?}", v["threads"]);
    let mut workers = 0;
    for evs in &threads {
        // Function events nest properly: every END closes the innermost START of the same function.
        let mut stack: Vec<String> = Vec::new();
        let mut calls = Vec::new();
        for e in evs.iter().filter(|e| e["kind"] == "GASP_C_FUNC") {
            let f = e["args"]["funcsig"].as_str().unwrap().to_string();
            match e["phase"].as_str().unwrap() {
                "START" => {
                    calls.push(f.clone());
                    stack.push(f)
                }
                "END" => assert_eq!(
                    stack.pop().as_deref(),
                    Some(f.as_str()),
                    "unbalanced function events"
                ),
                p => panic!("phase {p}"),
            }
        }
        assert!(stack.is_empty(), "functions left open: {stack:?}");
        if calls.first().map(String::as_str) == Some("main") {
            continue;
        }
        workers += 1;
        // thread_main, work, then fib(4): 9 calls of a static function. The
        // recorder names a static function by module and offset (the
        // dynamic linker knows no name for it); the reader names it from the
        // program's symbol table.
        assert_eq!(calls.len(), 11, "{calls:?}");
        assert_eq!(calls[0], "thread_main", "{calls:?}");
        assert_eq!(calls[1], "work");
        assert!(calls[2..].iter().all(|c| c == "fib"), "{calls:?}");
        // malloc, realloc, free, each START and END, with consistent pointers.
        let mem: Vec<&Value> = evs
            .iter()
            .filter(|e| {
                e["kind"].as_str().unwrap().starts_with("GASP_C_") && e["kind"] != "GASP_C_FUNC"
            })
            .collect();
        let kinds: Vec<(&str, &str)> = mem
            .iter()
            .map(|e| (e["kind"].as_str().unwrap(), e["phase"].as_str().unwrap()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("GASP_C_MALLOC", "START"),
                ("GASP_C_MALLOC", "END"),
                ("GASP_C_REALLOC", "START"),
                ("GASP_C_REALLOC", "END"),
                ("GASP_C_FREE", "START"),
                ("GASP_C_FREE", "END")
            ]
        );
        assert_eq!(mem[0]["args"]["nbytes"], 104);
        let m = mem[1]["args"]["returnptr"].as_str().unwrap();
        assert_ne!(m, "0x0");
        assert_eq!(mem[2]["args"]["ptr"], m);
        assert_eq!(mem[2]["args"]["size"], 1004);
        let r = mem[3]["args"]["returnptr"].as_str().unwrap();
        assert_eq!(mem[4]["args"]["ptr"], r);
        // Each call placed at its source line by its return address (the
        // STARTs carry it; the program has debug information).
        let line_of =
            |needle: &str| PROGRAM.lines().position(|l| l.contains(needle)).unwrap() as u64 + 1;
        for (e, needle) in [
            (mem[0], "malloc(100 + n)"),
            (mem[2], "realloc(p, 1000 + n)"),
            (mem[4], "free(p)"),
        ] {
            assert_eq!(e["line"], line_of(needle), "{e}");
            assert!(e["file"].as_str().unwrap().ends_with("prog.c"), "{e}");
            assert!(e["args"]["codeptr"].as_str().unwrap() != "0x0", "{e}");
        }
        let work = evs
            .iter()
            .find(|e| e["kind"] == "GASP_C_FUNC" && e["args"]["funcsig"] == "work")
            .unwrap();
        assert_eq!(work["line"], line_of("work(4)"), "{work}");
        // The user event, with its source line from the macro.
        let user: Vec<&Value> = evs.iter().filter(|e| e["kind"] == "GASPARD_USER").collect();
        assert_eq!(user.len(), 2);
        assert_eq!(user[0]["name"], "phase");
        assert_eq!(user[0]["text"], "7");
        assert_eq!(user[0]["line"], 14);
        assert!(user[0]["file"].as_str().unwrap().ends_with("prog.c"));
    }
    assert_eq!(workers, 2);
}

/// The dynamic symbols a program needs from elsewhere.
fn undefined_symbols(exe: &std::path::Path) -> String {
    let out = Command::new("nm")
        .args(["-D", "--undefined-only"])
        .arg(exe)
        .output()
        .expect("nm (binutils)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const HOOKS: [&str; 3] = [
    "__cyg_profile_func_enter",
    "__wrap_malloc",
    "gasp_event_notify",
];

#[test]
fn without_profile_nothing_is_instrumented() {
    let trace = build_and_run("plain", &[]);
    // No function hooks, no wrapped malloc, user events compiled away...
    let plain = undefined_symbols(&trace.parent().unwrap().join("prog"));
    for hook in HOOKS {
        assert!(
            !plain.contains(hook),
            "{hook} in an uninstrumented program:\n{plain}"
        );
    }
    // ... where the profiled build has all three.
    let profiled = undefined_symbols(
        &build_and_run("profiled", &["--profile"])
            .parent()
            .unwrap()
            .join("prog"),
    );
    for hook in HOOKS {
        assert!(
            profiled.contains(hook),
            "{hook} missing from a profiled program:\n{profiled}"
        );
    }
    // Nothing was recorded: no context was ever made.
    if trace.exists() && std::fs::read_dir(&trace).unwrap().next().is_some() {
        let n: usize = events(&dump(&trace)).iter().map(|e| e.len()).sum();
        assert_eq!(n, 0);
    }
}

#[test]
fn profile_only_takes_the_listed_events() {
    let dir = tmp("only-list");
    let list = dir.join("events");
    std::fs::write(&list, "GASP_C_MALLOC\nGASP_C_FREE\n").unwrap();
    let v = dump(&build_and_run(
        "only",
        &["--profile-only", list.to_str().unwrap()],
    ));
    let kinds: std::collections::BTreeSet<String> = events(&v)
        .iter()
        .flatten()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    let want: std::collections::BTreeSet<String> = [
        "GASPARD_INIT",
        "GASPARD_USER",
        "GASP_C_MALLOC",
        "GASP_C_FREE",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(kinds, want);
}

#[test]
fn multi_call_name_acts_as_the_wrapper() {
    let dir = tmp("multicall");
    let link = dir.join("gaspard-cc");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_gaspard"), &link).unwrap();
    let src = dir.join("p.c");
    std::fs::write(
        &src,
        "#include <pupc.h>\nint main(void) { return pupc_tick_granularityus() == 1 ? 0 : 1; }\n",
    )
    .unwrap();
    let exe = dir.join("p");
    let st = Command::new(&link)
        .arg("--profile")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap();
    assert!(st.success());
    let st = Command::new(&exe)
        .env("GASPARD_DIR", dir.join("t"))
        .env_remove("LD_LIBRARY_PATH")
        .status()
        .unwrap();
    assert!(st.success());
}

const THROTTLED: &str = r#"
#include <stdlib.h>
__attribute__((noinline)) int tiny(int x) { return x * 3 + 1; }
__attribute__((noinline)) double slow(int n) {
  volatile double s = 0;
  for (int i = 0; i < n; i++) s += i * 0.5;
  return s;
}
int main(int argc, char **argv) {
  long calls = atol(argv[1]);
  int sum = 0;
  for (long i = 0; i < calls; i++) sum += tiny((int)i);
  for (int i = 0; i < 50; i++) slow(200000);
  return sum == 12345;
}
"#;

/// Counts START and END events of the GASP_C_FUNC events of `name`.
fn function_events(v: &Value, name: &str) -> (usize, usize) {
    let mut n = (0, 0);
    for evs in events(v) {
        for e in evs
            .iter()
            .filter(|e| e["kind"] == "GASP_C_FUNC" && e["args"]["funcsig"].as_str() == Some(name))
        {
            match e["phase"].as_str().unwrap() {
                "START" => n.0 += 1,
                "END" => n.1 += 1,
                _ => {}
            }
        }
    }
    n
}

#[test]
fn very_frequent_short_functions_are_throttled() {
    let dir = tmp("throttle");
    let exe = common::gaspard_cc(&dir, "t", THROTTLED, &["--profile"], &["-O1"]);
    let run = |throttle: &str, name: &str| {
        let trace = dir.join(name);
        let mut cmd = Command::new(&exe);
        cmd.arg("30000")
            .env("GASPARD_DIR", &trace)
            .env_remove("GASPARD_THROTTLE")
            .env_remove("LD_LIBRARY_PATH");
        if !throttle.is_empty() {
            cmd.env("GASPARD_THROTTLE", throttle);
        }
        let st = cmd.status().unwrap();
        assert!(st.success());
        dump(&trace)
    };
    // tiny: 1000 calls recorded, then no more; slow (far above 10 us a call) stays.
    let v = run("1000,10", "on");
    assert_eq!(function_events(&v, "tiny"), (1000, 1000));
    assert_eq!(function_events(&v, "slow"), (50, 50));
    assert_eq!(function_events(&v, "main"), (1, 1));
    let notes = v["problems"].as_array().unwrap();
    assert!(
        notes.iter().any(|p| {
            let p = p.as_str().unwrap();
            p.contains("function tiny: no longer recorded") && p.contains("after 1000 calls")
        }),
        "{notes:#?}"
    );
    assert!(!notes
        .iter()
        .any(|p| p.as_str().unwrap().contains("function slow")));
    // Off: every call.
    let v = run("off", "off");
    assert_eq!(function_events(&v, "tiny"), (30000, 30000));
    // The default (100000 calls) does not reach 30000.
    let v = run("", "default");
    assert_eq!(function_events(&v, "tiny"), (30000, 30000));
}

const ALTERNATING: &str = r#"
#include <stdlib.h>
__attribute__((noinline)) int first(int x) { return x + 1; }
__attribute__((noinline)) int second(int x) { return x + 2; }
int main(int argc, char **argv) {
  long n = atol(argv[1]);
  int sum = 0;
  for (int round = 0; round < 3; round++) {
    for (long i = 0; i < n; i++) sum += first((int)i);
    for (long i = 0; i < n; i++) sum += second((int)i);
  }
  return sum == 12345;
}
"#;

/// In chunks of 64 KiB, each function's events keep their name: a chunk
/// defines the names its events use, whichever function came first in it.
#[test]
fn function_names_are_right_in_every_chunk() {
    let dir = tmp("chunks");
    let exe = common::gaspard_cc(&dir, "a", ALTERNATING, &["--profile"], &["-O1"]);
    let trace = dir.join("trace");
    let st = Command::new(&exe)
        .arg("25000")
        .env("GASPARD_DIR", &trace)
        // Throttling on (the default) but out of reach: each function's
        // statistics keep its name's number for the chunk.
        .env("GASPARD_THROTTLE", "1000000000,10")
        .env("GASPARD_BUFFER_KB", "64")
        .env_remove("LD_LIBRARY_PATH")
        .status()
        .unwrap();
    assert!(st.success());
    let bytes: u64 = std::fs::read_dir(&trace)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "gst"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(bytes > 4 * 65536, "{bytes} bytes: too few chunks to test");
    let v = dump(&trace);
    assert_eq!(function_events(&v, "first"), (75000, 75000));
    assert_eq!(function_events(&v, "second"), (75000, 75000));
    assert_eq!(function_events(&v, "main"), (1, 1));
}

const THREADED_HOT: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) int tiny(int x) { return x * 3 + 1; }
/* At -O2 its exit hook is jumped to (a tail call), not called. */
__attribute__((noinline)) void depth(int n, long *acc) {
  if (n == 0) return;
  *acc += 1;
  depth(n - 1, acc);
}
/* Static: no dynamic symbol, recorded as hot+OFFSET; at -O2 a tail jump too. */
static __attribute__((noinline)) void bump(long *acc) { *acc += 2; }
__attribute__((noinline)) long rare(long i) { return i + 1; }
static long calls;
static void *work(void *arg) {
  long sum = (long)arg * 0;
  for (long i = 0; i < calls; i++) {
    sum += tiny((int)i);
    depth(3, &sum);
    bump(&sum);
    if (i % 1000 == 0) sum += rare(i);
  }
  return (void *)sum;
}
int main(int argc, char **argv) {
  calls = atol(argv[1]);
  int n = atoi(argv[2]);
  pthread_t t[4];
  long total = 0;
  for (long i = 0; i < n; i++) pthread_create(&t[i], 0, work, (void *)i);
  for (int i = 0; i < n; i++) {
    void *r;
    pthread_join(t[i], &r);
    total += (long)r;
  }
  printf("total %ld\n", total);
  return 0;
}
"#;

/// Runs THREADED_HOT built with `compiler cc_args` on `threads` threads of
/// `calls` iterations (throttling at 1000 calls), with `vars`; checks the
/// output, that START and END balance per thread and function, that `rare`
/// is recorded at every call and that `tiny` and `depth` stop being
/// recorded while `rare` still is. Returns the notes.
fn run_threaded_hot(
    name: &str,
    compiler: &str,
    cc_args: &[&str],
    threads: i64,
    vars: &[(&str, &str)],
) -> Vec<String> {
    let dir = tmp(name);
    let mut args = vec!["-pthread"];
    args.extend_from_slice(cc_args);
    let exe = common::gaspard_cc_with(&dir, "hot", THREADED_HOT, &["--profile"], compiler, &args);
    let calls: i64 = 100_000;
    let mut env = vec![("GASPARD_THROTTLE", "1000,10")];
    env.extend_from_slice(vars);
    let (trace, out) = common::gaspard_run_with(
        &dir,
        &[
            exe.to_str().unwrap(),
            &calls.to_string(),
            &threads.to_string(),
        ],
        &env,
    );
    let rares = calls / 1000;
    let per_thread =
        3 * calls * (calls - 1) / 2 + 6 * calls + 1000 * rares * (rares - 1) / 2 + rares;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("total {}", per_thread * threads),
        "{name}"
    );
    let v = dump(&trace);
    let (mut rare, mut tiny, mut depth) = (0, 0, 0);
    for evs in events(&v) {
        let funcs: Vec<&Value> = evs.iter().filter(|e| e["kind"] == "GASP_C_FUNC").collect();
        let mut balance = std::collections::HashMap::<&str, (usize, usize)>::new();
        let (mut last_rare, mut last_hot) = (None, None);
        for (i, e) in funcs.iter().enumerate() {
            let f = e["args"]["funcsig"].as_str().unwrap();
            let b = balance.entry(f).or_default();
            if e["phase"] == "START" {
                b.0 += 1;
            } else {
                b.1 += 1;
            }
            // (A call in flight when its exit was patched out gets its END
            // at its caller's exit: STARTs tell when recording stopped.)
            match f {
                "rare" => last_rare = Some(i),
                "tiny" | "depth" if e["phase"] == "START" => last_hot = Some(i),
                _ => {}
            }
        }
        for (f, (s, e)) in &balance {
            assert_eq!(s, e, "{name}: {f} starts and ends");
        }
        if let Some(r) = last_rare {
            // The hot functions stopped being recorded; the rare one went on.
            assert!(last_hot.is_none_or(|h| h < r), "{name}: {balance:?}");
        }
        rare += balance.get("rare").map_or(0, |b| b.0);
        tiny += balance.get("tiny").map_or(0, |b| b.0);
        depth += balance.get("depth").map_or(0, |b| b.0);
    }
    assert_eq!(rare as i64, threads * rares, "{name}: every call of rare");
    assert!(
        tiny > 0 && (tiny as i64) < threads * calls / 2,
        "{name}: tiny {tiny}"
    );
    assert!(
        depth > 0 && (depth as i64) < threads * calls * 2,
        "{name}: depth {depth}"
    );
    v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn throttled_functions_are_patched_out_while_threads_call_them() {
    // Both hook calls of each hot function are patched out: called (e8
    // through the PLT, ff 15 with -fno-plt) or, for the exits of depth and
    // bump at -O2, jumped to.
    for (name, compiler, args, threads) in [
        ("patch-gcc-o2", "cc", &["-O2"][..], 3),
        ("patch-clang-o0", "clang", &["-O0"][..], 2),
        ("patch-clang-o2", "clang", &["-O2"][..], 2),
        (
            "patch-gcc-nopie",
            "cc",
            &["-O1", "-fno-pie", "-no-pie"][..],
            4,
        ),
        ("patch-gcc-noplt", "cc", &["-O2", "-fno-plt"][..], 2),
    ] {
        let notes = run_threaded_hot(name, compiler, args, threads, &[]);
        let throttled: Vec<&String> = notes
            .iter()
            .filter(|n| n.contains(": no longer recorded on any thread after"))
            .collect();
        // bump is static: the recorder names it by module and offset
        // (hot+0x...), the reader by its symbol.
        for f in ["tiny:", "depth:", "bump:"] {
            assert!(
                throttled
                    .iter()
                    .any(|n| n.contains(&format!("function {f}"))),
                "{name}: {notes:#?}"
            );
        }
        for note in &throttled {
            // An entry and at least one exit (-O1 may give two exits).
            let sites: usize = note
                .split("patched out of the code at ")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{name}: {note}"));
            assert!(sites >= 2, "{name}: {note}");
        }
        assert!(!notes.iter().any(|n| n.contains("function rare")), "{name}");
    }
}

#[test]
fn throttled_functions_keep_their_hook_calls_when_patching_is_off() {
    let notes = run_threaded_hot(
        "patch-off",
        "cc",
        &["-O2"],
        3,
        &[("GASPARD_THROTTLE_PATCH", "0")],
    );
    assert!(
        notes.iter().any(
            |n| n.contains("function tiny: no longer recorded on any thread")
                && n.contains("its hook calls were not patched out")
        ),
        "{notes:#?}"
    );
    assert!(!notes.iter().any(|n| n.contains("patched out of the code")));
}

const FORKING_HOT: &str = r#"
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
__attribute__((noinline)) int tiny(int x) { return x * 3 + 1; }
__attribute__((noinline)) long rare(long i) { return i + 1; }
static long loop(long n) {
  long s = 0;
  for (long i = 0; i < n; i++) {
    s += tiny((int)i);
    if (i % 1000 == 0) s += rare(i);
  }
  return s;
}
int main(void) {
  long a = loop(50000);
  pid_t p = fork();
  long b = loop(50000);
  if (p == 0) {
    printf("child %ld\n", a + b);
    return 0;
  }
  int st;
  waitpid(p, &st, 0);
  printf("parent %ld %d\n", a + b, WEXITSTATUS(st));
  return 0;
}
"#;

#[test]
fn a_forked_child_runs_the_patched_code() {
    let dir = tmp("patch-fork");
    let exe = common::gaspard_cc(&dir, "f", FORKING_HOT, &["--profile"], &["-O2"]);
    let (trace, out) = common::gaspard_run_with(
        &dir,
        &[exe.to_str().unwrap()],
        &[("GASPARD_THROTTLE", "1000,10")],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let sum: i64 =
        (0..50_000i64).map(|i| 3 * i + 1).sum::<i64>() + (0..50).map(|k| 1000 * k + 1).sum::<i64>();
    assert!(stdout.contains(&format!("child {}", 2 * sum)), "{stdout}");
    assert!(
        stdout.contains(&format!("parent {} 0", 2 * sum)),
        "{stdout}"
    );
    let v = dump(&trace);
    // Parent: 100 calls of rare, tiny stopped; the child (the thread
    // without main's START): its 50 calls of rare, none of tiny, whose code
    // stayed patched.
    let mut rares = Vec::new();
    for evs in events(&v) {
        let count = |f: &str| {
            evs.iter()
                .filter(|e| {
                    e["kind"] == "GASP_C_FUNC"
                        && e["phase"] == "START"
                        && e["args"]["funcsig"].as_str() == Some(f)
                })
                .count()
        };
        rares.push((count("rare"), count("tiny"), count("main")));
    }
    rares.sort();
    assert_eq!(rares.len(), 2, "{rares:?}");
    assert_eq!(rares[0], (50, 0, 0), "{rares:?}");
    assert_eq!(rares[1].0, 100, "{rares:?}");
    assert!(rares[1].1 < 50_000, "{rares:?}");
    let notes: Vec<&str> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(
        notes
            .iter()
            .filter(|n| n.contains("function tiny: no longer recorded on any thread"))
            .count(),
        2,
        "{notes:#?}"
    );
}

const ALLOCATING: &str = r#"
#include <stdlib.h>
int main(int argc, char **argv) {
  long calls = atol(argv[1]);
  long sum = 0;
  for (long i = 0; i < calls; i++) {
    char *p = malloc(16);
    sum += (long)(p != 0);
    free(p);
  }
  char *volatile big = malloc(1 << 20);
  free(big);
  return sum != calls;
}
"#;

/// Counts the events of `kind` in `phase`.
fn kind_events(v: &Value, kind: &str, phase: &str) -> usize {
    events(v)
        .iter()
        .flat_map(|evs| evs.iter())
        .filter(|e| e["kind"] == kind && e["phase"] == phase)
        .count()
}

#[test]
fn very_frequent_short_allocations_are_throttled_and_counted() {
    let dir = tmp("throttle-alloc");
    let exe = common::gaspard_cc(&dir, "a", ALLOCATING, &["--profile"], &["-O1"]);
    let run = |throttle: &str, name: &str| {
        let trace = dir.join(name);
        let mut cmd = Command::new(&exe);
        cmd.arg("30000")
            .env("GASPARD_DIR", &trace)
            // Throttled call sites go on through the wrappers, counted.
            .env("GASPARD_THROTTLE_PATCH", "0")
            .env_remove("GASPARD_THROTTLE")
            .env_remove("LD_LIBRARY_PATH");
        if !throttle.is_empty() {
            cmd.env("GASPARD_THROTTLE", throttle);
        }
        assert!(cmd.status().unwrap().success());
        dump(&trace)
    };
    // The loop's call sites: 1000 calls recorded each, then counted; the
    // other call sites (called once) are recorded.
    let v = run("1000,10", "on");
    assert!(
        !v["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str().unwrap().contains("patched")),
        "{v:#?}"
    );
    for kind in ["GASP_C_MALLOC", "GASP_C_FREE"] {
        assert_eq!(kind_events(&v, kind, "START"), 1001, "{kind}");
        assert_eq!(kind_events(&v, kind, "END"), 1001, "{kind}");
    }
    let notes: Vec<&str> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    let has = |what: &str| notes.iter().any(|n| n.contains(what));
    assert!(
        has("GASP_C_MALLOC at ") && has("no longer recorded on one thread after 1000 calls"),
        "{notes:#?}"
    );
    assert!(
        has("29000 calls for 464000 bytes not recorded (throttled on 1 thread"),
        "{notes:#?}"
    );
    assert!(
        has("GASP_C_FREE at ") && has("29000 calls not recorded"),
        "{notes:#?}"
    );
    // Off: every call.
    let v = run("off", "off");
    assert_eq!(kind_events(&v, "GASP_C_MALLOC", "START"), 30001);
    assert_eq!(kind_events(&v, "GASP_C_FREE", "END"), 30001);
    assert!(!v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p.as_str().unwrap().contains("throttled")));
}

const ALLOC_HOT: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
/* One malloc, one realloc and one free call site, each called `calls`
 * times; the contents are checked through the reallocation. */
__attribute__((noinline)) long churn(long calls) {
  long sum = 0;
  for (long i = 0; i < calls; i++) {
    long *p = malloc(2 * sizeof *p);
    if (!p) return -1;
    p[0] = i;
    p[1] = 1;
    long *q = realloc(p, 4 * sizeof *q);
    if (!q) return -1;
    q[2] = q[0] + q[1];
    sum += q[2];
    free(q);
  }
  return sum;
}
static long calls;
static void *thread_main(void *arg) {
  (void)arg;
  return (void *)churn(calls);
}
int main(int argc, char **argv) {
  calls = atol(argv[1]);
  int threads = atoi(argv[2]);
  if (argc > 3) { /* fork once the sites are throttled */
    long a = churn(calls);
    pid_t p = fork();
    long b = churn(calls);
    if (p == 0) {
      printf("child %ld\n", a + b);
      return 0;
    }
    int st;
    waitpid(p, &st, 0);
    printf("parent %ld %d\n", a + b, WEXITSTATUS(st));
    return 0;
  }
  pthread_t t[8];
  long total = 0;
  for (int i = 0; i < threads; i++) pthread_create(&t[i], 0, thread_main, 0);
  for (int i = 0; i < threads; i++) {
    void *r;
    pthread_join(t[i], &r);
    total += (long)r;
  }
  printf("total %ld\n", total);
  return 0;
}
"#;

/// The sum `churn(calls)` returns.
fn churned(calls: i64) -> i64 {
    calls * (calls - 1) / 2 + calls
}

/// Builds ALLOC_HOT with `compiler cc_args`, runs it with `args` (calls,
/// threads, and "fork" or not) and `vars`, throttling at 1000 calls; returns
/// the output, the dump and its notes.
fn run_alloc_hot(
    name: &str,
    compiler: &str,
    cc_args: &[&str],
    args: &[&str],
    vars: &[(&str, &str)],
) -> (String, Value, Vec<String>) {
    let dir = tmp(name);
    let mut cc = vec!["-pthread"];
    cc.extend_from_slice(cc_args);
    let exe = common::gaspard_cc_with(&dir, "ah", ALLOC_HOT, &["--profile"], compiler, &cc);
    let mut cmd = vec![exe.to_str().unwrap()];
    cmd.extend_from_slice(args);
    let mut env = vec![("GASPARD_THROTTLE", "1000,10")];
    env.extend_from_slice(vars);
    let (trace, out) = common::gaspard_run_with(&dir, &cmd, &env);
    let v = dump(&trace);
    let notes = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), v, notes)
}

/// The note of the throttled call site of `kind` (one is expected).
fn site_note<'a>(name: &str, notes: &'a [String], kind: &str) -> &'a str {
    let found: Vec<&String> = notes
        .iter()
        .filter(|n| n.contains(&format!(": {kind} at churn+0x")) && n.contains("not recorded"))
        .collect();
    assert_eq!(found.len(), 1, "{name} {kind}: {notes:#?}");
    found[0]
}

#[test]
fn throttled_allocation_sites_are_patched_to_call_the_c_library() {
    // One thread: each site records its first 1000 calls; the 1001st is
    // counted and patches the call (e8 through the PLT, ff 15 with
    // -fno-plt), so that no later call reaches the wrappers: the notes count
    // exactly one call left out per site. clang -fno-plt loads the GOT slots
    // of malloc and realloc into registers before the loop (`call *%r13`):
    // those calls are not patched, and every call left out is counted.
    for (name, compiler, args, hoisted) in [
        ("alloc-gcc-o2", "cc", &["-O2"][..], false),
        ("alloc-gcc-o0", "cc", &["-O0"][..], false),
        ("alloc-clang-o2", "clang", &["-O2"][..], false),
        (
            "alloc-gcc-nopie",
            "cc",
            &["-O1", "-fno-pie", "-no-pie"][..],
            false,
        ),
        ("alloc-gcc-noplt", "cc", &["-O2", "-fno-plt"][..], false),
        ("alloc-clang-noplt", "clang", &["-O2", "-fno-plt"][..], true),
    ] {
        let (out, v, notes) = run_alloc_hot(name, compiler, args, &["30000", "1"], &[]);
        assert_eq!(out.trim(), format!("total {}", churned(30000)), "{name}");
        for kind in ["GASP_C_MALLOC", "GASP_C_REALLOC", "GASP_C_FREE"] {
            assert_eq!(kind_events(&v, kind, "START"), 1000, "{name} {kind}");
            assert_eq!(kind_events(&v, kind, "END"), 1000, "{name} {kind}");
        }
        let patched = ": its later calls on every thread were neither recorded nor counted";
        for (kind, libc, bytes) in [
            ("GASP_C_MALLOC", "malloc", 16),
            ("GASP_C_REALLOC", "realloc", 32),
        ] {
            let note = site_note(name, &notes, kind);
            if hoisted {
                assert!(
                    note.ends_with(&format!(
                        ": 29000 calls for {} bytes not recorded (throttled on 1 thread, \
                         GASPARD_THROTTLE=1000,10)",
                        29000 * bytes
                    )),
                    "{name}: {note}"
                );
            } else {
                assert!(
                    note.contains(&format!(
                        ": 1 call for {bytes} bytes not recorded (throttled on 1 thread"
                    )) && note.contains(&format!(
                        "then its call was patched to call {libc} directly"
                    )) && note.ends_with(patched),
                    "{name}: {note}"
                );
            }
        }
        let note = site_note(name, &notes, "GASP_C_FREE");
        assert!(
            note.contains(": 1 call not recorded (throttled on 1 thread")
                && note.contains("then its call was patched to call free directly")
                && note.ends_with(patched),
            "{name}: {note}"
        );
    }
}

#[test]
fn throttled_allocation_sites_stay_in_the_wrappers_when_patching_is_off() {
    let (out, v, notes) = run_alloc_hot(
        "alloc-patch-off",
        "cc",
        &["-O2"],
        &["30000", "1"],
        &[("GASPARD_THROTTLE_PATCH", "0")],
    );
    assert_eq!(out.trim(), format!("total {}", churned(30000)));
    assert_eq!(kind_events(&v, "GASP_C_MALLOC", "START"), 1000);
    assert!(site_note("off", &notes, "GASP_C_MALLOC")
        .ends_with(": 29000 calls for 464000 bytes not recorded (throttled on 1 thread, GASPARD_THROTTLE=1000,10)"));
    assert!(site_note("off", &notes, "GASP_C_REALLOC")
        .ends_with(": 29000 calls for 928000 bytes not recorded (throttled on 1 thread, GASPARD_THROTTLE=1000,10)"));
    assert!(site_note("off", &notes, "GASP_C_FREE")
        .ends_with(": 29000 calls not recorded (throttled on 1 thread, GASPARD_THROTTLE=1000,10)"));
    assert!(!notes.iter().any(|n| n.contains("patched")), "{notes:#?}");
}

#[test]
fn throttled_allocation_sites_are_patched_while_threads_call_them() {
    // Four threads on the same three sites: the first thread to throttle a
    // site patches it for all; each thread records at most its first 1000
    // calls of each site, every START has its END, the results are right.
    // Unless those calls took 10 us or more on average (the rule is on the
    // mean, README): a thread descheduled in a recorded call (a loaded
    // machine) counts that time in the call, and goes on recording the site
    // until its mean drops below 10 us, or another thread patches the site.
    let (out, v, notes) = run_alloc_hot("alloc-threads", "cc", &["-O2"], &["50000", "4"], &[]);
    assert_eq!(out.trim(), format!("total {}", 4 * churned(50000)));
    for evs in events(&v) {
        for kind in ["GASP_C_MALLOC", "GASP_C_REALLOC", "GASP_C_FREE"] {
            let times = |phase: &str| -> Vec<u64> {
                evs.iter()
                    .filter(|e| e["kind"] == kind && e["phase"] == phase)
                    .map(|e| e["t_ns"].as_u64().unwrap())
                    .collect()
            };
            let (starts, ends) = (times("START"), times("END"));
            assert_eq!(starts.len(), ends.len(), "{kind}");
            // A call's START and END carry the times its duration is
            // measured between; the calls of a kind on a thread do not nest.
            // Call n + 1 was recorded only if the first n (n >= 1000) took
            // 10 us or more on average (9.5 here: the recorder's limit is in
            // clock ticks, at a measured rate).
            let mut total = 0u64;
            for (i, (s, e)) in starts.iter().zip(&ends).enumerate() {
                let n = i + 1;
                total += e.saturating_sub(*s);
                assert!(
                    n < 1000 || n == starts.len() || total >= 9_500 * n as u64,
                    "{kind}: {} calls recorded, the first {n} in {:.3} us on average",
                    starts.len(),
                    total as f64 / n as f64 / 1000.0
                );
            }
        }
    }
    for (kind, libc) in [
        ("GASP_C_MALLOC", "malloc"),
        ("GASP_C_REALLOC", "realloc"),
        ("GASP_C_FREE", "free"),
    ] {
        let note = site_note("threads", &notes, kind);
        assert!(
            note.contains(&format!(
                "then its call was patched to call {libc} directly"
            )),
            "{note}"
        );
    }
}

#[test]
fn a_forked_child_runs_the_patched_allocation_calls() {
    let (out, v, notes) = run_alloc_hot("alloc-fork", "cc", &["-O2"], &["20000", "1", "fork"], &[]);
    let sum = 2 * churned(20000);
    assert!(out.contains(&format!("child {sum}")), "{out}");
    assert!(out.contains(&format!("parent {sum} 0")), "{out}");
    // The parent recorded 1000 calls of each site; the child none (its
    // sites were patched before the fork), and its notes say so.
    assert_eq!(kind_events(&v, "GASP_C_MALLOC", "START"), 1000);
    assert_eq!(kind_events(&v, "GASP_C_FREE", "END"), 1000);
    for kind in ["GASP_C_MALLOC", "GASP_C_REALLOC", "GASP_C_FREE"] {
        let child: Vec<&String> = notes
            .iter()
            .filter(|n| {
                n.contains(&format!(": {kind} at churn+0x"))
                    && n.contains("directly before this process was forked: its calls were neither recorded nor counted")
            })
            .collect();
        assert_eq!(child.len(), 1, "{kind}: {notes:#?}");
    }
}

const CXX_PROGRAM: &str = r#"
#include <cstdio>
namespace solver {
struct Grid {
  double v[100];
  double step(int k) {
    double s = 0;
    for (int i = 0; i < 100; i++) { v[i] = v[i] * 0.5 + k; s += v[i]; }
    return s;
  }
};
static double helper(double x) { return x * 2; }
}
int main() {
  solver::Grid g = {};
  double s = 0;
  for (int i = 0; i < 50; i++) s += solver::helper(g.step(i));
  std::printf("%.1f\n", s);
  return 0;
}
"#;

#[test]
fn cxx_functions_are_named_as_their_source_writes_them() {
    // C++ names are mangled in the symbol tables (and a static function has
    // none the dynamic linker knows): the report gives them demangled.
    let dir = tmp("cxx");
    let exe = common::gaspard_cc_with(
        &dir,
        "cxx",
        CXX_PROGRAM,
        &["--profile"],
        "g++",
        &["-O0", "-g"],
    );
    let r = common::report(&run_traced(&dir, &exe));
    let count = |name: &str| {
        r["by_event"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["count"].as_u64().unwrap())
    };
    let names: Vec<&str> = r["by_event"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        count("GASP_C_FUNC solver::Grid::step(int)"),
        Some(50),
        "{names:?}"
    );
    assert_eq!(
        count("GASP_C_FUNC solver::helper(double)"),
        Some(50),
        "{names:?}"
    );
    assert_eq!(count("GASP_C_FUNC main"), Some(1), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("_Z")), "{names:?}");
}

/// The time of a function's calls within one another (recursion) counts
/// once in its total, in the outermost call, as the time the thread spent in
/// it; the mean is of every call. The same from events and from a
/// profile-only recording.
#[test]
fn a_recursive_function_s_time_counts_once() {
    let dir = tmp("recursion");
    let exe = common::gaspard_cc(&dir, "prog", PROGRAM, &["--profile"], &["-O1", "-pthread"]);
    let trace = run_traced(&dir, &exe);
    let v = dump(&trace);
    // From the events: each worker's fib calls, the outermost ones' times
    // and every call's.
    let (mut outer, mut all, mut calls) = (0u64, 0u64, 0u64);
    for evs in events(&v) {
        let mut open: Vec<u64> = Vec::new();
        for e in evs
            .iter()
            .filter(|e| e["kind"] == "GASP_C_FUNC" && e["args"]["funcsig"] == "fib")
        {
            let t = e["t_ns"].as_u64().unwrap();
            if e["phase"] == "START" {
                open.push(t);
            } else {
                let d = t - open.pop().unwrap();
                all += d;
                calls += 1;
                if open.is_empty() {
                    outer += d;
                }
            }
        }
    }
    assert_eq!(calls, 18, "fib(4) makes 9 calls on each of 2 threads");
    assert!(outer < all, "{outer} {all}");
    let r = common::report(&trace);
    let row = |r: &Value, name: &str| {
        r["by_event"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {}", r["by_event"]))
            .clone()
    };
    let fib = row(&r, "GASP_C_FUNC fib");
    assert_eq!(fib["count"], calls);
    assert_eq!(fib["total_ns"], outer, "{fib}");
    let mean = fib["mean_ns"].as_f64().unwrap();
    assert!(
        (mean * calls as f64 - all as f64).abs() < 1.0,
        "{fib}: {all}"
    );
    assert!(
        fib["total_ns"].as_u64().unwrap()
            <= row(&r, "GASP_C_FUNC work")["total_ns"].as_u64().unwrap()
    );
    // The text report marks that total, and says why under its tables;
    // `work`, which does not call itself, is not marked.
    let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .arg("report")
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let by_event = text.split("\nBy event\n").nth(1).unwrap();
    let line = |name: &str| {
        by_event
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name}: {text}"))
            .to_string()
    };
    assert!(line("GASP_C_FUNC fib").contains("s*"), "{text}");
    assert!(!line("GASP_C_FUNC work").contains('*'), "{text}");
    assert!(
        text.contains("* calls made within calls of the same name (recursion) count once"),
        "{text}"
    );
    // Recorded in profile-only mode: the same rule.
    let trace = dir.join("profile-only");
    let st = Command::new(&exe)
        .env("GASPARD_DIR", &trace)
        .env("GASPARD_PROFILE_ONLY", "1")
        .env_remove("LD_LIBRARY_PATH")
        .status()
        .unwrap();
    assert!(st.success());
    let r = common::report(&trace);
    let (fib, work) = (row(&r, "GASP_C_FUNC fib"), row(&r, "GASP_C_FUNC work"));
    assert_eq!(fib["count"], calls);
    let (total, work_total) = (
        fib["total_ns"].as_u64().unwrap(),
        work["total_ns"].as_u64().unwrap(),
    );
    assert!(total <= work_total, "{fib} {work}");
    assert!(
        fib["mean_ns"].as_f64().unwrap() * calls as f64 > total as f64,
        "nested calls are in the mean, not in the total: {fib}"
    );
}
