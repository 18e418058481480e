//! The quick scan (`gaspard_analyze::scan`, which the browser view shows
//! while the whole trace is read) gives every thread's intervals exactly as
//! the whole trace's reader does: times (clocks fitted, one rank's clock
//! skewed on purpose and corrected), names of kinds, user events and
//! functions, callsites, event numbers, ranks and communication peers. On
//! real traces of a GASP program, MPI, OpenSHMEM and an instrumented C
//! program; and a damaged trace is scanned as far as it is intact.

use std::path::Path;
use std::process::Command;

use gaspard_analyze::dump::event_name;
use gaspard_analyze::intervals::intervals;
use gaspard_analyze::objects::arg;
use gaspard_analyze::scan::{scan, Quick};
use gaspard_analyze::trace::{read, Trace};
use gaspard_format::kinds::{self, Class};

mod common;

/// Every difference between the quick scan and the whole trace; the number
/// of intervals compared.
fn compare(t: &Trace, q: &Quick) -> usize {
    assert_eq!(
        q.streams.len(),
        t.streams.len(),
        "the scan and the reader see different streams"
    );
    let mut n = 0;
    for (s, qs) in t.streams.iter().zip(&q.streams) {
        assert_eq!((&s.process, s.stream), (&qs.process, qs.stream));
        assert_eq!(
            gaspard_analyze::findings::thread_name(s),
            qs.name,
            "thread names"
        );
        assert_eq!(gaspard_analyze::matrix::rank(s), qs.rank);
        assert_eq!(s.events.len() as u64, qs.events);
        assert_eq!(
            s.events.first().map(|e| e.t_ns),
            qs.first_last.map(|f| f.0),
            "first event of {}",
            qs.name
        );
        assert_eq!(
            s.events.last().map(|e| e.t_ns),
            qs.first_last.map(|f| f.1),
            "last event of {}",
            qs.name
        );
        let ivs = intervals(s);
        assert_eq!(ivs.len(), qs.spans.len(), "intervals of {}", qs.name);
        for (iv, sp) in ivs.iter().zip(&qs.spans) {
            let e = &s.events[iv.start_event as usize];
            let what = format!("{} event {}", qs.name, iv.start_event);
            assert_eq!(
                (iv.kind, iv.start, iv.end, iv.start_event),
                (sp.kind, sp.start, sp.end, sp.start_event),
                "{what}"
            );
            assert_eq!(event_name(t, e), q.names[sp.name as usize], "{what}");
            assert_eq!(e.user().is_some(), sp.user, "{what}");
            assert_eq!(
                t.callsites[iv.callsite as usize], q.callsites[sp.callsite as usize],
                "{what}"
            );
            let comm = e.user().is_none()
                && kinds::kind(e.kind).is_some_and(|k| matches!(k.class, Class::Comm));
            let end = &s.events[iv.end_event as usize];
            let peer = if comm {
                arg(s, end, "pe")
                    .or_else(|| arg(s, end, "peer"))
                    .or_else(|| arg(s, end, "target"))
            } else {
                None
            };
            // An argument of -1 names no peer.
            assert_eq!(peer.filter(|&p| p != u64::MAX), sp.peer(), "{what}");
            n += 1;
        }
    }
    n
}

fn check(dir: &Path) -> (Trace, Quick, usize) {
    let t = read(dir).unwrap();
    let q = scan(dir).unwrap();
    let n = compare(&t, &q);
    (t, q, n)
}

#[test]
fn gasp_threads_and_user_events() {
    let dir = common::tmpdir("quick-gasp");
    let exe = common::compile_heat(&dir);
    let trace = dir.join("trace");
    let st = Command::new(&exe)
        .arg("200")
        .env("GASPARD_DIR", &trace)
        .status()
        .unwrap();
    assert!(st.success());
    let (t, q, n) = check(&trace);
    assert!(t.streams.len() >= 4, "{} threads", t.streams.len());
    assert!(n > 1000, "{n} intervals");
    assert!(q.names.iter().any(|n| n == "iteration"), "{:?}", q.names);
    assert!(
        q.names.iter().any(|n| n == "GASP_UPC_NOTIFY"),
        "{:?}",
        q.names
    );
}

const MPI_PROGRAM: &str = r#"
#include <mpi.h>
#include <unistd.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, n, x = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (int i = 0; i < 5; i++) {
    usleep(3000 * ((me + i) % 3));
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
      for (int r = 1; r < n; r++) MPI_Send(&i, 1, MPI_INT, r, 5, MPI_COMM_WORLD);
      for (int r = 1; r < n; r++) MPI_Recv(&x, 1, MPI_INT, r, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&x, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&x, 1, MPI_INT, 0, 6, MPI_COMM_WORLD);
    }
  }
  MPI_Finalize();
  return 0;
}
"#;

#[test]
fn mpi_with_a_skewed_clock() {
    let dir = common::tmpdir("quick-mpi");
    let exe = common::compile_with(&dir, "mpicc", "p.c", MPI_PROGRAM);
    let exe = exe.to_str().unwrap();
    let (trace, _) = common::gaspard_run_with(
        &dir,
        &["mpirun", "-np", "3", "--oversubscribe", exe],
        &[
            ("GASPARD_CLOCK_SKEW_NS", "50000000"),
            ("GASPARD_CLOCK_DRIFT_PPM", "1000"),
            ("GASPARD_CLOCK_SKEW_RANK", "1"),
        ],
    );
    let (t, q, n) = check(&trace);
    assert_eq!(t.clock_sync.len(), 2, "ranks 1 and 2 measured their clocks");
    assert!(n > 30, "{n} intervals");
    let peers: Vec<u64> = q
        .streams
        .iter()
        .flat_map(|s| s.spans.iter().filter_map(|sp| sp.peer()))
        .collect();
    assert!(peers.contains(&1) && peers.contains(&2), "{peers:?}");
    let ranks: Vec<usize> = q
        .streams
        .iter()
        .filter_map(|s| s.rank.map(|r| r.me))
        .collect();
    assert_eq!(ranks.len(), 3, "{ranks:?}");
}

const SHMEM_PROGRAM: &str = r#"
#include <shmem.h>
int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  static long v[4];
  for (int i = 0; i < 6; i++) {
    shmem_long_p(&v[i % 4], i, (me + 1) % n);
    shmem_barrier_all();
  }
  shmem_finalize();
  return 0;
}
"#;

#[test]
fn shmem() {
    let dir = common::tmpdir("quick-shmem");
    let exe = common::compile_with(&dir, "oshcc", "p.c", SHMEM_PROGRAM);
    let exe = exe.to_str().unwrap();
    let (trace, _) = common::gaspard_run(
        &dir,
        &[
            "oshrun",
            "-np",
            "3",
            "--oversubscribe",
            "--mca",
            "osc",
            "^rdma",
            exe,
        ],
    );
    let (_, q, n) = check(&trace);
    assert!(n > 20, "{n} intervals");
    assert!(
        q.streams.iter().all(|s| s.name.starts_with("PE ")),
        "{:?}",
        q.streams.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
}

const C_PROGRAM: &str = r#"
#include <stdlib.h>
#include <pupc.h>
static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
int main(void) {
  unsigned ev = pupc_create_event("phase", "%d");
  for (int i = 0; i < 3; i++) {
    pupc_event_start(ev, i);
    char *p = malloc(100 + i);
    fib(6);
    free(p);
    pupc_event_end(ev, i);
  }
  return 0;
}
"#;

#[test]
fn instrumented_c_program() {
    let dir = common::tmpdir("quick-c");
    let exe = common::gaspard_cc(&dir, "prog", C_PROGRAM, &["--profile"], &["-O0"]);
    let trace = dir.join("trace");
    let st = Command::new(&exe)
        .env("GASPARD_DIR", &trace)
        .env_remove("LD_LIBRARY_PATH")
        .status()
        .unwrap();
    assert!(st.success());
    let (_, q, n) = check(&trace);
    assert!(n > 50, "{n} intervals");
    assert!(
        q.names.iter().any(|n| n == "GASP_C_FUNC main")
            && q.names.iter().any(|n| n == "GASP_C_MALLOC"),
        "{:?}",
        q.names
    );
    assert!(q.names.iter().any(|n| n == "phase"), "{:?}", q.names);
}

#[test]
fn damaged_trace_is_scanned_as_far_as_it_is_intact() {
    let dir = common::tmpdir("quick-damaged");
    let exe = common::compile_heat(&dir);
    let trace = dir.join("trace");
    let st = Command::new(&exe)
        .arg("3000")
        .env("GASPARD_DIR", &trace)
        .env("GASPARD_BUFFER_KB", "64")
        .status()
        .unwrap();
    assert!(st.success());
    // Cut one stream file in the middle and flip a byte in another.
    let mut files: Vec<_> = std::fs::read_dir(&trace)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "gst"))
        .collect();
    files.sort();
    assert!(files.len() >= 2);
    let a = std::fs::read(&files[0]).unwrap();
    std::fs::write(&files[0], &a[..a.len() / 2]).unwrap();
    let mut b = std::fs::read(&files[1]).unwrap();
    let at = b.len() / 3;
    b[at] ^= 0x5a;
    std::fs::write(&files[1], &b).unwrap();
    let (t, _, n) = check(&trace);
    assert!(!t.problems.is_empty());
    assert!(n > 100, "{n} intervals");
    // Nothing at all is a clear error.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    assert!(scan(&empty).is_err());
    assert!(scan(&dir.join("missing")).is_err());
}
