//! A forked child (without exec) records into streams of its own, under its
//! own pid, while the parent's record stays whole: nothing the parent had
//! recorded before the fork shows up again in the child, and nothing of the
//! child's in the parent.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;

fn compile(dir: &Path, src: &str) -> PathBuf {
    common::compile_gasp(dir, "f", src, "-O1")
}

/// Before the fork: the main thread records 0..PRE and 50 `noise` events
/// (still in its buffer at the fork), a helper thread records 500000..500000+PRE and is still alive
/// at the fork. After: the parent records PRE..PRE+POST; the child records
/// 1000000..1000000+CHILD on the forking thread and 2000000..2000000+CHILD
/// on a thread it starts, and 20 `noise` events on the forking thread; user
/// events created before the fork are used in the child too.
const FORK: &str = r#"
#include <gasp_upc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#define PRE 1000
#define POST 700
#define CHILD 300
static int g_argc; static char **g_argv;
static unsigned ev, noise;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int stage;
static void emit(gasp_context_t c, long from, long n) {
  for (long i = from; i < from + n; i++) gasp_event_notify(c, ev, GASP_ATOMIC, "f.c", 20, 0, i);
}
static void *helper(void *a) {
  gasp_context_t c = gasp_init(GASP_MODEL_UPC, &g_argc, &g_argv);
  emit(c, 500000, PRE);
  pthread_mutex_lock(&m);
  stage = 1;
  pthread_cond_broadcast(&cv);
  while (stage < 2) pthread_cond_wait(&cv, &m);  /* alive until the fork is done */
  pthread_mutex_unlock(&m);
  return a;
}
static void *child_thread(void *a) {
  gasp_context_t c = gasp_init(GASP_MODEL_UPC, &g_argc, &g_argv);
  emit(c, 2000000, CHILD);
  return a;
}
int main(int argc, char **argv) {
  g_argc = argc; g_argv = argv;
  gasp_context_t c = gasp_init(GASP_MODEL_UPC, &argc, &argv);
  ev = gasp_create_event(c, "step", "%ld");
  noise = gasp_create_event(c, "noise", NULL);
  emit(c, 0, PRE);
  for (int i = 0; i < 50; i++) gasp_event_notify(c, noise, GASP_ATOMIC, "f.c", 30, 0);
  pthread_t h;
  pthread_create(&h, 0, helper, 0);
  pthread_mutex_lock(&m);
  while (stage < 1) pthread_cond_wait(&cv, &m);
  pthread_mutex_unlock(&m);
  pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    emit(c, 1000000, CHILD);
    for (int i = 0; i < 20; i++) gasp_event_notify(c, noise, GASP_ATOMIC, "f.c", 31, 0);
    pthread_t t;
    pthread_create(&t, 0, child_thread, 0);
    pthread_join(t, 0);
    exit(0);
  }
  printf("%d\n", (int)pid);
  pthread_mutex_lock(&m);
  stage = 2;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&m);
  pthread_join(h, 0);
  emit(c, PRE, POST);
  int st = 0;
  if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) return 3;
  return 0;
}
"#;

const PRE: u64 = 1000;
const POST: u64 = 700;
const CHILD: u64 = 300;

/// The `step` values of a thread's events, and how many GASPARD_INIT it has.
fn steps(t: &Value) -> (Vec<u64>, usize) {
    let evs = t["events"].as_array().unwrap();
    let vals = evs
        .iter()
        .filter(|e| e["kind"] == "GASPARD_USER" && e["name"] == "step")
        .map(|e| e["text"].as_str().unwrap().parse().unwrap())
        .collect();
    let inits = evs.iter().filter(|e| e["kind"] == "GASPARD_INIT").count();
    (vals, inits)
}

/// How many `noise` events a thread has.
fn noise(t: &Value) -> usize {
    t["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "noise")
        .count()
}

fn run(dir: &Path, exe: &Path, vars: &[(&str, &str)]) -> (PathBuf, u32) {
    let trace = dir.join("trace");
    let out = Command::new(exe)
        .env("GASPARD_DIR", &trace)
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let child: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    (trace, child)
}

#[test]
fn a_forked_child_records_into_its_own_streams() {
    let dir = common::tmpdir("fork-trace");
    let exe = compile(&dir, FORK);
    let (trace, child) = run(&dir, &exe, &[]);
    let v = common::dump(&trace);
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2, "parent and child: {procs:?}");
    for p in procs {
        assert_eq!(p["status"], "complete", "{p}");
        assert_eq!(p["lost"], 0, "{p}");
    }
    let kid = procs
        .iter()
        .find(|p| p["pid"] == child)
        .expect("the child's manifest");
    assert!(
        kid["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().starts_with("forked from process")),
        "{kid}"
    );
    let threads = v["threads"].as_array().unwrap();
    let of = |pid: u32| -> Vec<&Value> { threads.iter().filter(|t| t["pid"] == pid).collect() };
    let parent_pid = procs
        .iter()
        .map(|p| p["pid"].as_u64().unwrap() as u32)
        .find(|&p| p != child)
        .unwrap();
    // The parent: its main thread has everything it recorded, before and after.
    let parent = of(parent_pid);
    assert_eq!(parent.len(), 2, "main and helper threads");
    let main: Vec<u64> = (0..PRE + POST).collect();
    let helper: Vec<u64> = (500_000..500_000 + PRE).collect();
    assert_eq!(steps(parent[0]), (main, 1));
    assert_eq!(steps(parent[1]), (helper, 1));
    // The child: the forking thread's stream (no GASPARD_INIT: the context
    // goes on) with only what it recorded after the fork, and its new thread.
    let kids = of(child);
    assert_eq!(
        kids.len(),
        2,
        "the forking thread and the child's own thread"
    );
    assert_eq!(
        steps(kids[0]),
        ((1_000_000..1_000_000 + CHILD).collect(), 0)
    );
    assert_eq!(
        steps(kids[1]),
        ((2_000_000..2_000_000 + CHILD).collect(), 1)
    );
    assert_eq!((noise(parent[0]), noise(kids[0])), (50, 20));
    assert_eq!(kids[0]["thread"], 0);
    assert_eq!(kids[1]["thread"], 1);
    assert_ne!(
        kids[0]["tid"], parent[0]["tid"],
        "the child's own thread id"
    );
    // Each stream is named after its own process.
    for t in threads {
        let pid = t["pid"].as_u64().unwrap();
        assert!(t["process"].as_str().unwrap().ends_with(&format!("-{pid}")));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_forked_child_in_profile_only_mode_keeps_its_own_profile() {
    let dir = common::tmpdir("fork-profile");
    let exe = compile(&dir, FORK);
    let (trace, child) = run(&dir, &exe, &[("GASPARD_PROFILE_ONLY", "1")]);
    let mut found = Vec::new();
    for e in std::fs::read_dir(&trace).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "profile") {
            let f =
                gaspard_format::profile::ProfileFile::parse(&std::fs::read_to_string(&p).unwrap())
                    .unwrap();
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let steps: u64 = f
                .rows
                .iter()
                .filter(|r| r.name == "step")
                .map(|r| r.count)
                .sum();
            found.push((name.ends_with(&format!("-{child}")), f.streams.len(), steps));
        }
    }
    found.sort();
    assert_eq!(
        found,
        vec![(false, 2, 2 * PRE + POST), (true, 2, 2 * CHILD)],
        "parent: main and helper threads; child: its two threads, only its own events"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_forked_child_counts_what_its_own_filters_left_out() {
    let dir = common::tmpdir("fork-filter");
    let exe = compile(&dir, FORK);
    let (trace, child) = run(&dir, &exe, &[("GASPARD_EXCLUDE", "noise")]);
    let v = common::dump(&trace);
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2);
    for p in procs {
        let left_out: Vec<&str> = p["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .filter(|n| n.contains("left out by the filters"))
            .collect();
        let expected = if p["pid"] == child { 20 } else { 50 };
        assert_eq!(left_out.len(), 1, "{p}");
        assert!(
            left_out[0].starts_with(&format!("{expected} events were left out")),
            "{p}"
        );
    }
    for t in v["threads"].as_array().unwrap() {
        assert_eq!(noise(t), 0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
