//! Recording under stress: 64 threads emitting events as fast as they can,
//! each switching measurement off and on halfway; nothing may be lost, and
//! nothing may be recorded while off. Under a memory cap set low on purpose
//! (and a flusher held back until the program ends, so that the cap is
//! reached whatever the machine's load), the trace must count exactly what it
//! dropped. The traces are counted chunk by chunk, straight from the stream
//! files, so that millions of events need little memory.

use std::path::{Path, PathBuf};
use std::process::Command;

use gaspard_format::chunk::{self, ChunkHeader, CHUNK_HEADER_LEN};
use gaspard_format::codec::{self, DecodedChunk};
use gaspard_format::kinds;

mod common;

/// Compiles `src` with `-O2` against gaspard's headers and the debug libgaspard.
fn compile(dir: &Path, name: &str, src: &str) -> PathBuf {
    common::compile_gasp(dir, name, src, "-O2")
}

/// THREADS threads, each emitting N events `step(i)` for i in 0..N, with
/// measurement off for i in N/4..N/2.
const STRESS: &str = r#"
#include <gasp_upc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static int g_argc; static char **g_argv; static long n;
static void *run(void *a) {
  gasp_context_t c = gasp_init(GASP_MODEL_UPC, &g_argc, &g_argv);
  unsigned ev = gasp_create_event(c, "step", "%ld");
  for (long i = 0; i < n; i++) {
    if (i == n / 4 && gasp_control(c, 0) != 1) abort();
    if (i == n / 2 && gasp_control(c, 1) != 0) abort();
    gasp_event_notify(c, ev, GASP_ATOMIC, "s.c", 12, 0, i);
  }
  return a;
}
int main(int argc, char **argv) {
  g_argc = argc; g_argv = argv;
  int threads = atoi(argv[1]);
  n = atol(argv[2]);
  pthread_t t[256];
  if (threads > 256) return 2;
  for (int i = 0; i < threads; i++)
    if (pthread_create(&t[i], 0, run, 0)) return 3;
  for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
  return 0;
}
"#;

/// What one stream holds.
#[derive(Debug, Default)]
struct Count {
    file: String,
    init: u64,
    /// The measurement switches, in order (0 off, 1 on).
    switches: Vec<u64>,
    /// The `step` values as runs of consecutive values `[start, end)`.
    runs: Vec<(u64, u64)>,
    steps: u64,
    other: u64,
    /// Events the stream's GASPARD_LOST records count.
    lost: u64,
    lost_records: u64,
}

fn count_stream(path: &Path) -> Count {
    let data = std::fs::read(path).unwrap();
    let header = chunk::parse_file_header(&data).unwrap();
    let mut c = Count {
        file: path.file_name().unwrap().to_string_lossy().into_owned(),
        ..Default::default()
    };
    let mut pos = header.len;
    let mut seq = 0;
    while pos < data.len() {
        let h = ChunkHeader::parse(&data[pos..]).expect("an intact chunk");
        assert_eq!(h.seq, seq, "{}: chunks in order, none missing", c.file);
        seq += 1;
        let end = pos + CHUNK_HEADER_LEN + h.payload_len as usize;
        let payload = &data[pos + CHUNK_HEADER_LEN..end];
        assert!(
            ChunkHeader::verify(&data[pos..], payload),
            "{}: checksum",
            c.file
        );
        let mut d = DecodedChunk::default();
        codec::decode(&h, payload, &mut d).unwrap();
        assert_eq!(d.events.len(), h.events as usize);
        for e in &d.events {
            let a = d.args_of(e);
            match e.kind {
                kinds::GASPARD_INIT => c.init += 1,
                kinds::GASPARD_MEASUREMENT => c.switches.push(a[0]),
                kinds::GASPARD_LOST => {
                    c.lost += a[0];
                    c.lost_records += 1;
                }
                kinds::GASPARD_USER => {
                    let v = *a.last().unwrap();
                    c.steps += 1;
                    match c.runs.last_mut() {
                        Some(r) if r.1 == v => r.1 += 1,
                        _ => c.runs.push((v, v + 1)),
                    }
                }
                _ => c.other += 1,
            }
        }
        pos = end;
    }
    c
}

/// Every stream of a trace, counted, two files at a time.
fn count(dir: &Path) -> Vec<Count> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "gst"))
        .collect();
    files.sort();
    let half = files.len().div_ceil(2);
    std::thread::scope(|s| {
        let parts: Vec<_> = files
            .chunks(half.max(1))
            .map(|part| s.spawn(move || part.iter().map(|p| count_stream(p)).collect::<Vec<_>>()))
            .collect();
        parts.into_iter().flat_map(|h| h.join().unwrap()).collect()
    })
}

/// The manifests' totals: (events, lost).
fn manifest_totals(dir: &Path) -> (u64, u64) {
    let mut t = (0, 0);
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "manifest") {
            let m =
                gaspard_format::manifest::Manifest::parse(&std::fs::read_to_string(&p).unwrap())
                    .unwrap();
            assert_eq!(m.status, "complete");
            t.0 += m.events;
            t.1 += m.lost;
        }
    }
    t
}

fn run(dir: &Path, exe: &Path, threads: usize, n: u64, vars: &[(&str, &str)]) -> PathBuf {
    let trace = dir.join("trace");
    let st = Command::new(exe)
        .arg(threads.to_string())
        .arg(n.to_string())
        .env("GASPARD_DIR", &trace)
        .envs(vars.iter().copied())
        .status()
        .unwrap();
    assert!(st.success(), "{exe:?} failed: {st}");
    trace
}

/// Every thread recorded exactly its events: all of 0..N/4 and N/2..N,
/// measurement off then on, nothing lost.
fn stress(threads: usize, n: u64) {
    let dir = common::tmpdir(&format!("stress-{threads}-{n}"));
    let exe = compile(&dir, "stress", STRESS);
    let t0 = std::time::Instant::now();
    let trace = run(&dir, &exe, threads, n, &[]);
    let recorded = t0.elapsed();
    let counts = count(&trace);
    eprintln!(
        "{threads} threads x {n} events: recorded in {recorded:?}, counted in {:?}",
        t0.elapsed() - recorded
    );
    assert_eq!(counts.len(), threads, "one stream per thread");
    for c in &counts {
        assert_eq!(c.init, 1, "{}", c.file);
        assert_eq!(c.switches, vec![0, 1], "{}: off, then on", c.file);
        assert_eq!(c.runs, vec![(0, n / 4), (n / 2, n)], "{}", c.file);
        assert_eq!(c.steps, n / 4 + (n - n / 2), "{}", c.file);
        assert_eq!((c.other, c.lost), (0, 0), "{}", c.file);
    }
    let per_thread = 1 + 2 + n / 4 + (n - n / 2);
    assert_eq!(
        manifest_totals(&trace),
        (per_thread * threads as u64, 0),
        "the manifest counts every event written, and no loss"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sixty_four_threads_lose_nothing() {
    stress(64, 200_000);
}

/// The full size: 64 threads x 5 M events, 240 M of them measured (on two
/// cores, a debug build: about 56 s to record and check).
#[test]
fn sixty_four_threads_five_million_events_each() {
    stress(64, 5_000_000);
}

#[test]
fn memory_cap_losses_are_counted_exactly() {
    let dir = common::tmpdir("stress-cap");
    let exe = compile(&dir, "stress", STRESS);
    let (threads, n) = (8, 400_000u64);
    // 1 MiB of 64 KiB buffers for 8 threads writing megabytes, and a flusher
    // that writes nothing before the program ends: the cap is reached
    // whatever the load of the machine, and every event after it is dropped.
    let trace = run(
        &dir,
        &exe,
        threads,
        n,
        &[
            ("GASPARD_BUFFER_KB", "64"),
            ("GASPARD_MAX_MB", "1"),
            ("GASPARD_ON_FULL", "drop"),
            ("GASPARD_FLUSH_DELAY_MS", "3600000"),
        ],
    );
    let counts = count(&trace);
    // A thread that never got a buffer (all taken before its first event)
    // writes no stream: its losses are in the manifest only.
    assert!(!counts.is_empty() && counts.len() <= threads);
    let unwritten = (threads - counts.len()) as u64;
    let sent_per_thread = 1 + 2 + n / 4 + (n - n / 2);
    let (mut recorded, mut lost_in_records, mut records) = (0, 0, 0);
    for c in &counts {
        // What a thread kept is a prefix of what it sent (the cap, once
        // reached, is never left: nothing is written before the end).
        let kept = c.init + c.switches.len() as u64 + c.steps;
        assert_eq!(c.other, 0);
        assert_eq!(
            kept + c.lost,
            sent_per_thread,
            "{}: kept + lost = sent",
            c.file
        );
        assert_eq!(c.runs.first().map(|r| r.0), Some(0), "{}", c.file);
        recorded += kept;
        lost_in_records += c.lost;
        records += c.lost_records;
    }
    let sent = sent_per_thread * threads as u64;
    let (events, lost) = manifest_totals(&trace);
    assert!(
        lost > sent / 2,
        "the cap must have dropped most: {lost} of {sent}"
    );
    assert_eq!(
        lost,
        sent - recorded,
        "the manifest's loss is exactly what is missing"
    );
    assert_eq!(
        lost_in_records + unwritten * sent_per_thread,
        lost,
        "each stream says what it lost"
    );
    assert_eq!(
        events,
        recorded + records,
        "the manifest counts what was written"
    );
    // The reader and the report say the same.
    let v = common::report(&trace);
    assert_eq!(v["lost_events"].as_u64(), Some(lost));
    let _ = std::fs::remove_dir_all(&dir);
}
