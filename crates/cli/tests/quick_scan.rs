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
use gaspard_analyze::scan::{overview, scan, Quick, QuickSpan, Windows};
use gaspard_analyze::trace::{read, Callsite, Trace};
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
    check_overview(dir, &t, &q);
    (t, q, n)
}

/// Classes an overview counts in, in this test: user events, then one per
/// kind class; gaspard's own kinds not counted.
const CLASSES: usize = 9;
fn class(kind: u16, user: bool) -> Option<u8> {
    if user {
        return Some(0);
    }
    if matches!(
        kind,
        kinds::GASPARD_INIT
            | kinds::GASPARD_MEASUREMENT
            | kinds::GASPARD_LOST
            | kinds::GASPARD_CLOCK_SYNC
    ) {
        return None;
    }
    Some(match kinds::kind(kind).map(|k| k.class) {
        Some(Class::Sync) => 1,
        Some(Class::Comm) => 2,
        Some(Class::Memory) => 3,
        Some(Class::Work) => 4,
        Some(Class::Program) | None => 5,
        Some(Class::Cache) => 6,
        Some(Class::Function) => 7,
        Some(Class::User) => 8,
    })
}

/// The time of a thread during which the innermost open interval (the one
/// that started last, at equal starts the shorter) is of each class, from
/// the whole trace's intervals.
fn innermost_ns(s: &gaspard_analyze::trace::Stream) -> [f64; CLASSES] {
    let mut spans: Vec<(u64, u64, u32, u8)> = intervals(s)
        .iter()
        .filter_map(|iv| {
            let user = s.events[iv.start_event as usize].user().is_some();
            let c = class(iv.kind, user)?;
            // An empty interval takes no time.
            (iv.end > iv.start).then_some((iv.start, iv.end, iv.start_event, c))
        })
        .collect();
    spans.sort_by_key(|&(a, b, e, _)| (a, std::cmp::Reverse(b), e));
    let mut ends: Vec<(u64, usize)> = spans.iter().enumerate().map(|(i, s)| (s.1, i)).collect();
    ends.sort_unstable();
    let mut out = [0f64; CLASSES];
    let (mut si, mut ei, mut now) = (0, 0, 0u64);
    let mut active: Vec<usize> = Vec::new();
    while ei < ends.len() {
        let take_end = si >= spans.len() || ends[ei].0 <= spans[si].0;
        let at = if take_end { ends[ei].0 } else { spans[si].0 };
        if let Some(&top) = active.last() {
            out[spans[top].3 as usize] += at.saturating_sub(now) as f64;
        }
        now = at;
        if take_end {
            let p = active.iter().rposition(|&x| x == ends[ei].1).unwrap();
            active.remove(p);
            ei += 1;
        } else {
            active.push(si);
            si += 1;
        }
    }
    out
}

/// The overview (`gaspard_analyze::scan::overview`) of the trace in `dir`
/// gives each thread's busy time per class as its intervals in the whole
/// trace do, in bins over the same time span.
fn check_overview(dir: &Path, t: &Trace, q: &Quick) {
    let bins = 4096;
    let o = overview(dir, bins, CLASSES, class).unwrap();
    assert_eq!(o.streams.len(), t.streams.len());
    check_windows(dir, &o.windows, q);
    let (t0, t1) = q.span().expect("events");
    assert_eq!(o.t0, t0, "the same start");
    assert_eq!(o.t1, t1.max(o.t0 + 1), "the same end");
    let bin_w = (o.t1 - o.t0) as f64 / bins as f64;
    let mut busy = 0.0;
    for (s, os) in t.streams.iter().zip(&o.streams) {
        assert_eq!(gaspard_analyze::findings::thread_name(s), os.name);
        assert_eq!(s.events.len() as u64, os.events);
        let want = innermost_ns(s);
        let span = match (s.events.first(), s.events.last()) {
            (Some(a), Some(b)) => (b.t_ns - a.t_ns) as f64,
            _ => 0.0,
        };
        for (c, &want) in want.iter().enumerate() {
            let got: f64 = (0..bins)
                .map(|b| f64::from(os.bins[b * CLASSES + c]))
                .sum::<f64>()
                * bin_w;
            let tolerance = 1e-3 * span + bin_w;
            assert!(
                (got - want).abs() <= tolerance,
                "{}: class {c}: {got} ns in the overview, {want} ns in the intervals",
                os.name,
            );
            busy += want;
        }
        // No bin is more than whole.
        for b in 0..bins {
            let sum: f32 = os.bins[b * CLASSES..(b + 1) * CLASSES].iter().sum();
            assert!(sum <= 1.01, "{}: bin {b} is {sum} busy", os.name);
        }
    }
    assert!(busy > 0.0, "some time in intervals");
}

/// A span as the quick scan and a window give it, names and callsites
/// looked up.
fn described(sp: &QuickSpan, names: &[String], sites: &[Callsite]) -> String {
    format!(
        "{} user={} [{}, {}] event {} {:?} {:?} peer {:?}",
        sp.kind,
        sp.user,
        sp.start,
        sp.end,
        sp.start_event,
        names[sp.name as usize],
        sites[sp.callsite as usize],
        sp.peer()
    )
}

/// Windows of the trace in `dir` read alone, from the chunks the overview
/// marked (kept as bytes and read back, as the view index keeps them),
/// give the quick scan's spans that overlap them, exactly: for the whole
/// run and windows of 1/2 to 1/5000 of it at five places each, and empty
/// windows before, between and after the events. Returns how many windows
/// read fewer events than the whole trace holds.
fn check_windows(dir: &Path, w: &Windows, q: &Quick) -> usize {
    let w = Windows::from_bytes(dir, &w.to_bytes()).expect("kept windows read back");
    assert_eq!(w.len(), q.streams.len());
    let rows: Vec<(String, u32)> = q
        .streams
        .iter()
        .map(|s| (s.process.clone(), s.stream))
        .collect();
    assert_eq!(w.rows(), rows);
    let ranks: Vec<_> = q.streams.iter().map(|s| s.rank).collect();
    assert_eq!(w.ranks(), ranks);
    let Some((t0, t1)) = q.span() else {
        return 0;
    };
    let run = (t1 - t0).max(1);
    let mut windows = vec![(t0, t1 + 1), (0, t0), (t1 + 1, t1 + 1000)];
    for k in [2u64, 7, 50, 400, 5000] {
        let width = (run / k).max(1);
        for i in 0..5 {
            let a = t0 + (run - width) * i / 4;
            windows.push((a, a + width));
        }
    }
    let total = q.events();
    let mut partial = 0;
    for (a, b) in windows {
        let got = w.window(a, b).expect("the window is read");
        assert_eq!(got.streams.len(), q.streams.len());
        assert_eq!(got.events, w.events_in(a, b));
        if got.events < total {
            partial += 1;
        }
        for (qs, spans) in q.streams.iter().zip(&got.streams) {
            let want: Vec<String> = qs
                .spans
                .iter()
                .filter(|sp| sp.end >= a && sp.start < b)
                .map(|sp| described(sp, &q.names, &q.callsites))
                .collect();
            let have: Vec<String> = spans
                .iter()
                .map(|sp| described(sp, &got.names, &got.callsites))
                .collect();
            if have != want {
                let i = have.iter().zip(&want).take_while(|(h, w)| h == w).count();
                panic!(
                    "{}: window [{a}, {b}): {} spans, the quick scan {}; first difference at {i}: {:?} against {:?}",
                    qs.name,
                    have.len(),
                    want.len(),
                    have.get(i),
                    want.get(i)
                );
            }
        }
    }
    partial
}

/// A thread's spans nest deep and long across many chunks: one over the
/// whole run, phases, steps in steps of the same user event, remote
/// reads and barriers; one START is never closed, in the middle of the
/// run. Windows read a few chunks and give the same spans as the quick
/// scan.
const NESTED: &str = r#"
#include <pthread.h>
#include <stdint.h>
#include <gasp_upc.h>

typedef struct { uint64_t thread, addr; } pts_t;
int gaspard_upc_resolve_pts(const gasp_upc_PTS_t *pts, uint64_t *thread, uint64_t *addr) {
  const pts_t *p = (const pts_t *)pts;
  *thread = p->thread;
  *addr = p->addr;
  return 0;
}

static int g_argc;
static char **g_argv;
static double sink;

static void *run(void *arg) {
  int t = (int)(intptr_t)arg;
  gasp_context_t ctx = gasp_init(GASP_MODEL_UPC, &g_argc, &g_argv);
  unsigned outer = gasp_create_event(ctx, "outer", NULL);
  unsigned phase = gasp_create_event(ctx, "phase", "%d");
  unsigned step = gasp_create_event(ctx, "step", NULL);
  unsigned never = gasp_create_event(ctx, "never_closed", NULL);
  gasp_event_notify(ctx, outer, GASP_START, __FILE__, __LINE__, 0);
  for (int p = 0; p < 12; p++) {
    if (p == 5) gasp_event_notify(ctx, never, GASP_START, __FILE__, __LINE__, 0);
    gasp_event_notify(ctx, phase, GASP_START, __FILE__, __LINE__, 0, p);
    for (int i = 0; i < 3000; i++) {
      gasp_event_notify(ctx, step, GASP_START, __FILE__, __LINE__, 0);
      if (i % 7 == 0) gasp_event_notify(ctx, step, GASP_START, __FILE__, __LINE__, 0);
      double x = 0;
      pts_t src = {(uint64_t)(1 - t), 0x1000 + 8 * (uint64_t)i};
      gasp_event_notify(ctx, GASP_UPC_GET, GASP_START, __FILE__, __LINE__, 0, 1, &x, &src, sizeof x);
      sink += x * i;
      gasp_event_notify(ctx, GASP_UPC_GET, GASP_END, __FILE__, __LINE__, 0, 1, &x, &src, sizeof x);
      if (i % 7 == 0) gasp_event_notify(ctx, step, GASP_END, __FILE__, __LINE__, 0);
      gasp_event_notify(ctx, step, GASP_END, __FILE__, __LINE__, 0);
    }
    gasp_event_notify(ctx, GASP_UPC_NOTIFY, GASP_START, __FILE__, __LINE__, 0, 1, p);
    gasp_event_notify(ctx, GASP_UPC_NOTIFY, GASP_END, __FILE__, __LINE__, 0, 1, p);
    gasp_event_notify(ctx, GASP_UPC_WAIT, GASP_START, __FILE__, __LINE__, 0, 1, p);
    gasp_event_notify(ctx, GASP_UPC_WAIT, GASP_END, __FILE__, __LINE__, 0, 1, p);
    gasp_event_notify(ctx, phase, GASP_END, __FILE__, __LINE__, 0, p);
  }
  gasp_event_notify(ctx, outer, GASP_END, __FILE__, __LINE__, 0);
  return NULL;
}

int main(int argc, char **argv) {
  g_argc = argc;
  g_argv = argv;
  pthread_t th[2];
  for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, run, (void *)(intptr_t)t);
  for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
  return 0;
}
"#;

#[test]
fn windows_of_spans_nested_across_many_chunks() {
    let dir = common::tmpdir("quick-windows");
    let exe = common::compile_gasp(&dir, "nested", NESTED, "-O1");
    let trace = dir.join("trace");
    let st = Command::new(&exe)
        .env("GASPARD_DIR", &trace)
        .env("GASPARD_BUFFER_KB", "64")
        .status()
        .unwrap();
    assert!(st.success());
    let (t, q, n) = check(&trace);
    assert!(n > 100_000, "{n} intervals");
    assert!(
        t.streams.iter().all(|s| s.chunks >= 8),
        "chunks: {:?}",
        t.streams.iter().map(|s| s.chunks).collect::<Vec<_>>()
    );
    assert!(q.names.iter().any(|n| n == "outer"), "{:?}", q.names);
    let never = q.names.iter().position(|n| n == "never_closed");
    assert!(never.is_some(), "{:?}", q.names);
    assert!(
        q.streams
            .iter()
            .all(|s| s.spans.iter().all(|sp| Some(sp.name as usize) != never)),
        "a START never closed is no span"
    );
    let o = overview(&trace, 64, CLASSES, class).unwrap();
    // Most windows (all but the whole run and the halves) read a part of
    // the trace.
    let partial = check_windows(&trace, &o.windows, &q);
    assert!(partial >= 20, "{partial} windows read in part");
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
            // Rank 2 shares rank 0's clock: measured all the same.
            ("GASPARD_CLOCK_SYNC_ALL", "1"),
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

/// An instrumented C program compiled from its directory (`cc prog.c`): its
/// user events name their file as `__FILE__` does (`prog.c`), its functions
/// and allocations as the debugging information does (in full); both give
/// the full name, in the reader and in the scan alike.
#[test]
fn instrumented_c_program() {
    let dir = common::tmpdir("quick-c");
    let exe = common::gaspard_cc_here(&dir, "prog", C_PROGRAM, &["--profile"], &["-O0", "-g"]);
    let trace = dir.join("trace");
    let st = Command::new(&exe)
        .env("GASPARD_DIR", &trace)
        .env_remove("LD_LIBRARY_PATH")
        .status()
        .unwrap();
    assert!(st.success());
    // The stream names the file as `__FILE__` gives it, not in full.
    let full = std::fs::canonicalize(dir.join("prog.c")).unwrap();
    let stream: Vec<u8> = std::fs::read_dir(&trace)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "gst"))
        .flat_map(|p| std::fs::read(p).unwrap())
        .collect();
    let has = |s: &str| stream.windows(s.len()).any(|w| w == s.as_bytes());
    assert!(has("prog.c") && !has(full.to_str().unwrap()));
    let (t, q, n) = check(&trace);
    let files: std::collections::BTreeSet<&str> = t
        .callsites
        .iter()
        .filter_map(|c| c.file.as_deref())
        .collect();
    assert_eq!(
        files.into_iter().collect::<Vec<_>>(),
        vec![full.to_str().unwrap()],
        "one name for the program's file"
    );
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
    // Flip a byte in one stream file and cut another short. The cut must
    // leave intervals never closed, which the overview reads the stream again
    // without (checked by `check`): a cut where every interval happens to be
    // closed (between two of a thread's intervals, at a chunk's end) is
    // moved further on, then tried in another stream file (restored first).
    let mut files: Vec<_> = std::fs::read_dir(&trace)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "gst"))
        .collect();
    files.sort();
    assert!(files.len() >= 2);
    let mut b = std::fs::read(&files[1]).unwrap();
    let at = b.len() / 3;
    b[at] ^= 0x5a;
    std::fs::write(&files[1], &b).unwrap();
    let mut open_after_cut = None;
    let cuts = [
        (1, 2),
        (5, 9),
        (4, 7),
        (3, 5),
        (5, 8),
        (2, 3),
        (7, 10),
        (3, 4),
        (7, 8),
        (3, 8),
    ];
    'search: for f in [0, 2, 3].into_iter().filter(|&i| i < files.len()) {
        let whole = std::fs::read(&files[f]).unwrap();
        for (num, den) in cuts {
            std::fs::write(&files[f], &whole[..whole.len() * num / den]).unwrap();
            let (t, _, n) = check(&trace);
            assert!(!t.problems.is_empty());
            let unclosed: usize = t
                .streams
                .iter()
                .map(|s| {
                    let counted = |kind: u16, user: bool| class(kind, user).is_some();
                    let starts = s
                        .events
                        .iter()
                        .filter(|e| e.phase == 0)
                        .filter(|e| counted(e.kind, e.user().is_some()));
                    let closed = intervals(s).iter().filter(|iv| {
                        counted(iv.kind, s.events[iv.start_event as usize].user().is_some())
                    });
                    starts.count() - closed.count()
                })
                .sum();
            if unclosed > 0 {
                open_after_cut = Some(n);
                break 'search;
            }
        }
        // Not this file: whole again before the next one is cut.
        std::fs::write(&files[f], &whole).unwrap();
    }
    let n = open_after_cut.expect("no cut left an interval open");
    assert!(n > 100, "{n} intervals");
    // Nothing at all is a clear error.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    assert!(scan(&empty).is_err());
    assert!(scan(&dir.join("missing")).is_err());
    assert!(overview(&empty, 64, CLASSES, class).is_err());
    assert!(overview(&dir.join("missing"), 64, CLASSES, class).is_err());
}
