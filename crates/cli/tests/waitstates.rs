//! Wait states of real programs under `mpirun -np 2`: a late sender, a late
//! receiver, a balanced exchange, a late sender seen through MPI_Irecv and
//! MPI_Wait, MPI_Waitall and MPI_Sendrecv, ranks waiting at MPI_Win_fence and
//! in MPI_Allreduce for a late one, for a late root in MPI_Bcast, and a root
//! waiting in MPI_Reduce; and a lock held long by each OpenMP thread, and by
//! each of two OpenSHMEM PEs.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

mod common;
use common::{dump, events, finding_kinds, report};

/// Iterations of each exchange, and the work injected before the late side's
/// call in each, ms.
const ITERATIONS: u64 = 4;
const DELAY_MS: u64 = 80;

/// `./prog MODE`: each iteration, one rank computes (a busy loop of
/// DELAY_MS) before its side of the exchange, the other goes straight to it.
const PROGRAM: &str = r#"
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Busy work for ms milliseconds: the CPU computes, it does not sleep. */
static volatile double sink;
static void compute(double ms) {
  double end = now() + ms / 1000.0, x = 0;
  while (now() < end)
    for (int k = 0; k < 1000; k++) x += k * 0.5;
  sink = x;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  const char *mode = argv[1];
  int iterations = atoi(argv[2]);
  double delay = atof(argv[3]);
  double buf[16] = {0};
  MPI_Barrier(MPI_COMM_WORLD); /* start together */
  for (int it = 0; it < iterations; it++) {
    if (!strcmp(mode, "late_sender")) {
      if (me == 0) {
        compute(delay);
        MPI_Send(buf, 16, MPI_DOUBLE, 1, 5, MPI_COMM_WORLD);
      } else {
        MPI_Recv(buf, 16, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* RECV */
      }
    } else if (!strcmp(mode, "late_receiver")) {
      if (me == 0) {
        MPI_Ssend(buf, 16, MPI_DOUBLE, 1, 6, MPI_COMM_WORLD); /* SSEND */
      } else {
        compute(delay);
        MPI_Recv(buf, 16, MPI_DOUBLE, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
    } else if (!strcmp(mode, "balanced")) {
      compute(delay);
      if (me == 0) {
        MPI_Ssend(buf, 16, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD);
        MPI_Recv(buf, 16, MPI_DOUBLE, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(buf, 16, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, 16, MPI_DOUBLE, 0, 8, MPI_COMM_WORLD);
      }
    } else if (!strcmp(mode, "irecv")) {
      if (me == 0) {
        compute(delay);
        MPI_Send(buf, 16, MPI_DOUBLE, 1, 9, MPI_COMM_WORLD);
      } else {
        MPI_Request rq;
        MPI_Irecv(buf, 16, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq); /* IRECV */
        MPI_Wait(&rq, MPI_STATUS_IGNORE); /* WAIT */
      }
    } else if (!strcmp(mode, "waitall")) {
      /* Both post a receive and a send and wait for both; rank 0 computes first. */
      double in[16];
      MPI_Request rq[2];
      if (me == 0) compute(delay);
      MPI_Irecv(in, 16, MPI_DOUBLE, 1 - me, 10, MPI_COMM_WORLD, &rq[0]);
      MPI_Isend(buf, 16, MPI_DOUBLE, 1 - me, 10, MPI_COMM_WORLD, &rq[1]);
      MPI_Waitall(2, rq, MPI_STATUSES_IGNORE); /* WAITALL */
    } else if (!strcmp(mode, "sendrecv")) {
      double in[16];
      if (me == 0) compute(delay);
      MPI_Sendrecv(buf, 16, MPI_DOUBLE, 1 - me, 11, in, 16, MPI_DOUBLE, 1 - me, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* SENDRECV */
    } else if (!strcmp(mode, "fence")) {
      static double *base;
      static MPI_Win win;
      if (it == 0) MPI_Win_allocate(16 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
      if (me == 0) compute(delay);
      MPI_Win_fence(0, win); /* FENCE */
      MPI_Put(buf, 1, MPI_DOUBLE, 1 - me, 0, 1, MPI_DOUBLE, win);
      MPI_Win_fence(0, win);
      if (it == iterations - 1) MPI_Win_free(&win);
    } else if (!strcmp(mode, "allreduce")) {
      double sum;
      if (me == 0) compute(delay);
      MPI_Allreduce(buf, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* ALLREDUCE */
    } else if (!strcmp(mode, "bcast")) {
      if (me == 0) compute(delay);
      MPI_Bcast(buf, 16, MPI_DOUBLE, 0, MPI_COMM_WORLD); /* BCAST */
    } else if (!strcmp(mode, "reduce")) {
      double sum;
      if (me == 1) compute(delay);
      MPI_Reduce(buf, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD); /* REDUCE */
    }
  }
  MPI_Finalize();
  return 0;
}
"#;

/// Builds PROGRAM once per test in its own directory.
fn build(name: &str) -> (PathBuf, PathBuf) {
    let dir = common::tmpdir(&format!("waits-{name}"));
    let src = dir.join("w.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("w");
    let out = Command::new("mpicc")
        .arg("-g")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("mpicc is needed for the wait-state tests (Debian: libopenmpi-dev openmpi-bin)");
    assert!(
        out.status.success(),
        "mpicc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, exe)
}

/// One program at a time: the programs compute in busy loops, and running
/// them side by side on few cores would add scheduling delays to the waits.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `mode` on 2 ranks; returns the dump and the report.
fn run(mode: &str, delay_ms: u64) -> (Value, Value) {
    let (dir, exe) = build(mode);
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let iterations = ITERATIONS.to_string();
    let delay = delay_ms.to_string();
    let (trace, _) = common::gaspard_run(
        &dir,
        &[
            "mpirun",
            "-np",
            "2",
            "--oversubscribe",
            exe.to_str().unwrap(),
            mode,
            &iterations,
            &delay,
        ],
    );
    (dump(&trace), report(&trace))
}

/// The source line holding `marker`.
fn line_of(marker: &str) -> u64 {
    marker_line(PROGRAM, marker)
}

/// The line of `src` holding `marker`.
fn marker_line(src: &str, marker: &str) -> u64 {
    src.lines().position(|l| l.contains(marker)).unwrap() as u64 + 1
}

/// Checks that the wait `w` is the work injected, within 50 %.
fn assert_waited(w: &Value, injected_ns: f64) {
    let waited = w["wait_ns"].as_f64().unwrap();
    assert!(
        waited > 0.5 * injected_ns && waited < 1.5 * injected_ns,
        "waited {waited} ns for {injected_ns} ns injected: {w}"
    );
}

/// The thread name (`host-pid stream N`) of MPI rank `rank` in a dump.
fn rank_thread(v: &Value, rank: u64) -> String {
    let threads = v["threads"].as_array().unwrap();
    let evs = events(v);
    let i = (0..threads.len())
        .find(|&i| {
            evs[i].iter().any(|e| {
                e["kind"] == "GASP_MPI_INIT" && e["phase"] == "END" && e["args"]["rank"] == rank
            })
        })
        .expect("rank recorded");
    format!(
        "rank {rank} ({} stream {})",
        threads[i]["process"].as_str().unwrap(),
        threads[i]["stream"]
    )
}

fn findings_of<'a>(r: &'a Value, kind: &str) -> Vec<&'a Value> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == kind)
        .collect()
}

/// The `waits` entry of `pattern` at `line`.
fn wait_at<'a>(r: &'a Value, pattern: &str, line: u64) -> &'a Value {
    r["waits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["pattern"] == pattern && w["location"]["line"] == line)
        .unwrap_or_else(|| panic!("no {pattern} wait at line {line}: {}", r["waits"]))
}

/// Checks a two-sided finding: its one thread, its line, its severity, and
/// the wait it reports against the work injected; `calls` are the calls
/// made at that line (by both ranks when both run it).
fn check_finding(v: &Value, r: &Value, kind: &str, waiter: u64, marker: &str, calls: u64) {
    let found = findings_of(r, kind);
    assert_eq!(found.len(), 1, "{}", r["findings"]);
    let f = found[0];
    assert_eq!(f["threads"], serde_json::json!([rank_thread(v, waiter)]));
    assert_eq!(f["location"]["line"], line_of(marker), "{f}");
    assert!(f["location"]["file"].as_str().unwrap().ends_with("w.c"));
    // One of the two threads waits most of its time: about half the total.
    let severity = f["severity"].as_f64().unwrap();
    assert!(severity > 0.1 && severity <= 1.0, "{f}");
    let w = wait_at(r, kind, line_of(marker));
    let injected = (ITERATIONS * DELAY_MS * 1_000_000) as f64;
    let waited = w["wait_ns"].as_f64().unwrap();
    assert!(
        waited > 0.5 * injected,
        "waited {waited} ns for {injected} ns injected: {w}"
    );
    assert_eq!(w["calls"], calls, "{w}");
    let waits = w["waits"].as_u64().unwrap();
    assert!((1..=ITERATIONS).contains(&waits), "{w}");
    assert_eq!(
        w["partners"][0].as_str().unwrap(),
        rank_thread(v, 1 - waiter)
    );
    let message = f["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("rank {}", 1 - waiter)),
        "{message}"
    );
}

/// Runs a check up to three times: the programs' timing is theirs only when
/// nothing else on the machine stalls one of their processes for longer
/// than the work injected; a check that fails three times fails.
fn retried(check: impl Fn()) {
    for _ in 0..2 {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(&check)).is_ok() {
            return;
        }
    }
    check();
}

#[test]
fn a_late_sender_is_found_at_the_receive() {
    retried(|| {
        let (v, r) = run("late_sender", DELAY_MS);
        check_finding(&v, &r, "late_sender", 1, "/* RECV */", ITERATIONS);
        assert!(!finding_kinds(&r).contains(&"late_receiver".to_string()));
    });
}

#[test]
fn a_late_receiver_is_found_at_the_synchronous_send() {
    retried(|| {
        let (v, r) = run("late_receiver", DELAY_MS);
        check_finding(&v, &r, "late_receiver", 0, "/* SSEND */", ITERATIONS);
        assert!(!finding_kinds(&r).contains(&"late_sender".to_string()));
    });
}

#[test]
fn a_balanced_exchange_has_no_late_side() {
    retried(|| {
        let (_, r) = run("balanced", DELAY_MS);
        let kinds = finding_kinds(&r);
        assert!(
            !kinds.contains(&"late_sender".to_string())
                && !kinds.contains(&"late_receiver".to_string()),
            "{}",
            r["findings"]
        );
        // The exchanges were matched and measured all the same.
        let calls: u64 = r["waits"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["pattern"] == "late_sender" || w["pattern"] == "late_receiver")
            .map(|w| w["calls"].as_u64().unwrap())
            .sum();
        assert_eq!(
            calls,
            4 * ITERATIONS,
            "an MPI_Ssend, an MPI_Send and two MPI_Recv per iteration: {}",
            r["waits"]
        );
    });
}

#[test]
fn a_late_sender_is_found_at_the_wait_of_a_nonblocking_receive() {
    retried(|| {
        let (v, r) = run("irecv", DELAY_MS);
        check_finding(&v, &r, "late_sender", 1, "/* WAIT */", ITERATIONS);
        assert_eq!(
            wait_at(&r, "late_sender", line_of("/* WAIT */"))["call"],
            "GASP_MPI_WAIT"
        );
    });
}

#[test]
fn a_late_sender_is_found_at_a_waitall_and_at_a_sendrecv() {
    retried(|| {
        for (mode, marker) in [("waitall", "/* WAITALL */"), ("sendrecv", "/* SENDRECV */")] {
            let (v, r) = run(mode, DELAY_MS);
            check_finding(&v, &r, "late_sender", 1, marker, 2 * ITERATIONS);
        }
    });
}

#[test]
fn ranks_waiting_at_a_fence_for_a_late_one() {
    retried(|| {
        let (v, r) = run("fence", DELAY_MS);
        let fences: Vec<&Value> = findings_of(&r, "barrier_wait")
            .into_iter()
            .filter(|f| f["message"].as_str().unwrap().contains("MPI_Win_fence"))
            .collect();
        assert_eq!(fences.len(), 1, "{}", r["findings"]);
        let f = fences[0];
        assert_eq!(f["location"]["line"], line_of("/* FENCE */"), "{f}");
        assert_eq!(f["threads"].as_array().unwrap().len(), 2);
        let message = f["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("{} arrives last", rank_thread(&v, 0))),
            "{message}"
        );
        let w = wait_at(&r, "fence", line_of("/* FENCE */"));
        let injected = (ITERATIONS * DELAY_MS * 1_000_000) as f64;
        let waited = w["wait_ns"].as_f64().unwrap();
        assert!(
            waited > 0.5 * injected,
            "waited {waited} ns for {injected} ns injected: {w}"
        );
    });
}

#[test]
fn ranks_waiting_in_an_allreduce_for_a_late_one() {
    retried(|| {
        let (v, r) = run("allreduce", DELAY_MS);
        let found: Vec<&Value> = findings_of(&r, "barrier_wait")
            .into_iter()
            .filter(|f| f["message"].as_str().unwrap().contains("MPI_Allreduce"))
            .collect();
        assert_eq!(found.len(), 1, "{}", r["findings"]);
        let f = found[0];
        assert_eq!(f["location"]["line"], line_of("/* ALLREDUCE */"), "{f}");
        assert_eq!(f["threads"].as_array().unwrap().len(), 2);
        let message = f["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                "{} arrives last at {ITERATIONS} of them",
                rank_thread(&v, 0)
            )),
            "{message}"
        );
        assert!(message.contains("MPI_Iallreduce"), "{message}");
        let w = wait_at(&r, "collective", line_of("/* ALLREDUCE */"));
        assert_eq!(w["call"], "GASP_MPI_ALLREDUCE");
        assert_eq!(w["calls"], 2 * ITERATIONS, "{w}");
        assert_waited(w, (ITERATIONS * DELAY_MS * 1_000_000) as f64);
    });
}

#[test]
fn ranks_waiting_for_a_late_root_and_a_root_waiting_for_the_others() {
    // MPI_Bcast: rank 1 waits for rank 0, the root, which computes first
    // (late broadcast). MPI_Reduce: rank 0, the root, waits for rank 1,
    // which computes first (early reduce).
    for (mode, pattern, marker, waiter, call) in [
        ("bcast", "late_broadcast", "/* BCAST */", 1, "MPI_Bcast"),
        ("reduce", "early_reduce", "/* REDUCE */", 0, "MPI_Reduce"),
    ] {
        retried(|| {
            let (v, r) = run(mode, DELAY_MS);
            let found = findings_of(&r, "late_sender");
            assert_eq!(found.len(), 1, "{mode}: {}", r["findings"]);
            let f = found[0];
            assert_eq!(f["location"]["line"], line_of(marker), "{f}");
            assert_eq!(f["threads"], serde_json::json!([rank_thread(&v, waiter)]));
            let message = f["message"].as_str().unwrap();
            assert!(
                message.contains(call)
                    && message.contains(&rank_thread(&v, 1 - waiter))
                    && message.contains(if mode == "bcast" {
                        "late broadcast"
                    } else {
                        "early reduce"
                    }),
                "{message}"
            );
            let w = wait_at(&r, pattern, line_of(marker));
            assert_eq!(w["call"], format!("GASP_{}", call.to_uppercase()));
            // One waiting rank, at each of the calls.
            assert_eq!(w["calls"], ITERATIONS, "{w}");
            assert_eq!(
                w["partners"][0].as_str().unwrap(),
                rank_thread(&v, 1 - waiter)
            );
            assert_waited(w, (ITERATIONS * DELAY_MS * 1_000_000) as f64);
        });
    }
}

const LOCKS: &str = r#"
#include <omp.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(void) {
  omp_lock_t lock;
  omp_init_lock(&lock);
  volatile double x = 0;
  #pragma omp parallel num_threads(2)
  for (int i = 0; i < 4; i++) {
    omp_set_lock(&lock); /* SET */
    double end = now() + 0.020;  /* 20 ms of work holding the lock */
    while (now() < end) x += 1;
    omp_unset_lock(&lock);
  }
  omp_destroy_lock(&lock);
  printf("%d\n", x > 0);
  return 0;
}
"#;

#[test]
fn a_lock_held_long_reports_its_hold_time() {
    retried(|| {
        let dir = common::tmpdir("waits-locks");
        let src = dir.join("locks.c");
        std::fs::write(&src, LOCKS).unwrap();
        let exe = dir.join("locks");
        let out = Command::new("clang")
            .args(["-fopenmp", "-g"])
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .output()
            .expect("clang is needed for the OpenMP tests (Debian: clang libomp-dev)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (trace, _) = {
            let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
            common::gaspard_run(&dir, &[exe.to_str().unwrap()])
        };
        let r = report(&trace);
        let set_line = LOCKS.lines().position(|l| l.contains("/* SET */")).unwrap() as u64 + 1;
        let found = findings_of(&r, "lock_contention");
        assert_eq!(found.len(), 1, "{}", r["findings"]);
        assert_eq!(found[0]["location"]["line"], set_line);
        let message = found[0]["message"].as_str().unwrap();
        assert!(
            message.contains("over 8 acquisitions") && message.contains("held"),
            "{message}"
        );
        let locks = r["locks"].as_array().unwrap();
        assert_eq!(locks.len(), 1, "{}", r["locks"]);
        let l = &locks[0];
        assert_eq!(l["acquisitions"], 8);
        assert_eq!(l["threads"].as_array().unwrap().len(), 2);
        // Eight holds of 20 ms of work each.
        let hold = l["hold_ns"].as_f64().unwrap();
        assert!(hold > 0.5 * 8.0 * 20e6, "{l}");
        // A thread waits for the other's holds: they wait a good part of the
        // time the lock is held.
        assert!(l["waiters"].as_u64().unwrap() >= 1, "{l}");
        assert!(l["contended"].as_u64().unwrap() >= 1, "{l}");
        let wait = l["wait_ns"].as_f64().unwrap();
        assert!(wait > 0.25 * hold, "{l}");
        assert_eq!(found[0]["threads"], l["threads"]);
    });
}

/// Builds the OpenSHMEM program `src` as `name` and runs it on 2 PEs under
/// gaspard (one program at a time); its trace directory.
fn run_shmem(name: &str, src: &str) -> PathBuf {
    let dir = common::tmpdir(&format!("waits-shmem-{name}"));
    let file = dir.join(format!("{name}.c"));
    std::fs::write(&file, src).unwrap();
    let exe = dir.join(name);
    let out = Command::new("oshcc")
        .arg("-g")
        .arg(&file)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("oshcc is needed for the OpenSHMEM tests (Debian: libopenmpi-dev openmpi-bin)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cmd = [
        "oshrun",
        "-np",
        "2",
        "--oversubscribe",
        "--mca",
        "osc",
        "^rdma",
        exe.to_str().unwrap(),
    ];
    common::gaspard_run(&dir, &cmd).0
}

const SHMEM_LOCK: &str = r#"
#include <shmem.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static long lock = 0;  /* a global: its address differs from PE to PE */

int main(void) {
  shmem_init();
  volatile double x = 0;
  shmem_barrier_all();
  for (int i = 0; i < 4; i++) {
    shmem_set_lock(&lock); /* SET */
    double end = now() + 0.020;  /* 20 ms of work holding the lock */
    while (now() < end) x += 1;
    shmem_clear_lock(&lock);
  }
  shmem_barrier_all();
  shmem_finalize();
  return 0;
}
"#;

#[test]
fn an_openshmem_global_lock_is_one_lock_on_every_pe() {
    retried(|| {
        let trace = run_shmem("shlock", SHMEM_LOCK);
        let r = report(&trace);
        let locks = r["locks"].as_array().unwrap();
        assert_eq!(locks.len(), 1, "one lock for both PEs: {}", r["locks"]);
        let l = &locks[0];
        assert!(
            l["lock"].as_str().unwrap().starts_with("lock (shlock+0x"),
            "named by its variable, then by the binary and its offset: {l}"
        );
        assert_eq!(l["acquisitions"], 8);
        assert_eq!(l["threads"].as_array().unwrap().len(), 2);
        let hold = l["hold_ns"].as_f64().unwrap();
        assert!(hold > 0.5 * 8.0 * 20e6, "{l}");
        assert!(l["waiters"].as_u64().unwrap() >= 1, "{l}");
        let set_line = SHMEM_LOCK
            .lines()
            .position(|l| l.contains("/* SET */"))
            .unwrap() as u64
            + 1;
        let found = findings_of(&r, "lock_contention");
        assert_eq!(found.len(), 1, "{}", r["findings"]);
        assert_eq!(found[0]["location"]["line"], set_line);
        assert_eq!(found[0]["threads"], l["threads"]);
    });
}

const SHMEM_REDUCE: &str = r#"
#include <shmem.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static long src, dst, work[SHMEM_REDUCE_MIN_WRKDATA_SIZE];
static long psync[2][SHMEM_REDUCE_SYNC_SIZE];

int main(void) {
  shmem_init();
  for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) psync[0][i] = psync[1][i] = SHMEM_SYNC_VALUE;
  volatile double x = 0;
  shmem_barrier_all();
  for (int it = 0; it < 4; it++) {
    if (shmem_my_pe() == 0) {
      double end = now() + 0.080;  /* 80 ms of work on PE 0 alone */
      while (now() < end) x += 1;
    }
    src = it;
    shmem_long_sum_to_all(&dst, &src, 1, 0, 0, shmem_n_pes(), work, psync[it % 2]); /* SUM */
  }
  shmem_barrier_all();
  shmem_finalize();
  return 0;
}
"#;

#[test]
fn openshmem_pes_waiting_in_a_reduction_for_a_late_one() {
    retried(|| {
        let trace = run_shmem("reduce", SHMEM_REDUCE);
        let r = report(&trace);
        let line = marker_line(SHMEM_REDUCE, "/* SUM */");
        let found: Vec<&Value> = findings_of(&r, "barrier_wait")
            .into_iter()
            .filter(|f| {
                f["message"]
                    .as_str()
                    .unwrap()
                    .contains("shmem_long_sum_to_all")
            })
            .collect();
        assert_eq!(found.len(), 1, "{}", r["findings"]);
        let f = found[0];
        assert_eq!(f["location"]["line"], line, "{f}");
        let message = f["message"].as_str().unwrap();
        assert!(message.contains("these 2 PEs"), "{message}");
        assert!(message.contains("PE 0 ("), "{message}");
        assert!(message.contains("arrives last at 4 of them"), "{message}");
        let w = wait_at(&r, "collective", line);
        assert_eq!(w["call"], "GASP_SHMEM_LONG_SUM_TO_ALL");
        assert_eq!(w["calls"], 8, "{w}");
        assert_waited(w, 4.0 * 80e6);
    });
}

const SHMEM_BROADCAST: &str = r#"
#include <shmem.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static long src, dst;
static long psync[2][SHMEM_BCAST_SYNC_SIZE];

int main(void) {
  shmem_init();
  for (int i = 0; i < SHMEM_BCAST_SYNC_SIZE; i++) psync[0][i] = psync[1][i] = SHMEM_SYNC_VALUE;
  volatile double x = 0;
  shmem_barrier_all();
  for (int it = 0; it < 4; it++) {
    if (shmem_my_pe() == 0) {
      double end = now() + 0.080;  /* 80 ms of work on PE 0, the root, alone */
      while (now() < end) x += 1;
    }
    src = it;
    shmem_broadcast64(&dst, &src, 1, 0, 0, 0, shmem_n_pes(), psync[it % 2]); /* BCAST */
  }
  shmem_barrier_all();
  shmem_finalize();
  return 0;
}
"#;

#[test]
fn openshmem_pes_waiting_in_a_broadcast_for_a_late_root() {
    retried(|| {
        let trace = run_shmem("broadcast", SHMEM_BROADCAST);
        let r = report(&trace);
        let line = marker_line(SHMEM_BROADCAST, "/* BCAST */");
        let found = findings_of(&r, "late_sender");
        assert_eq!(found.len(), 1, "{}", r["findings"]);
        let f = found[0];
        assert_eq!(f["location"]["line"], line, "{f}");
        assert_eq!(f["threads"].as_array().unwrap().len(), 1, "{f}");
        let message = f["message"].as_str().unwrap();
        assert!(
            message.contains("shmem_broadcast64")
                && message.contains("for the root, PE 0 (")
                && message.contains("(late broadcast)"),
            "{message}"
        );
        let w = wait_at(&r, "late_broadcast", line);
        assert_eq!(w["call"], "GASP_SHMEM_BROADCAST64");
        assert_eq!(w["calls"], 4, "{w}");
        assert_waited(w, 4.0 * 80e6);
    });
}
