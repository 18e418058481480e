//! A real trace, damaged in every way a disk, a crash or a careless copy can
//! damage it: `gaspard dump` and `gaspard report` always end cleanly (never
//! a panic, a signal or a hang) and say what is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod common;

/// Longest a command may take on a damaged trace of a few thousand events.
const LIMIT: Duration = Duration::from_secs(60);

/// Three threads that meet at barriers, read a neighbour's cell and record a
/// user event whose arguments (a string, a double, an int) change every
/// time, so that the streams fill several chunks with few events.
const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <gasp_upc.h>
#define THREADS 3
static int g_argc; static char **g_argv; static int steps = 1500;
static pthread_barrier_t bar;
static double cell[THREADS];
typedef struct { uint64_t thread; uint64_t addr; } pts_t;
static void *run(void *arg) {
  int me = (int)(intptr_t)arg;
  gasp_context_t ctx = gasp_init(GASP_MODEL_UPC, &g_argc, &g_argv);
  unsigned ev = gasp_create_event(ctx, "step", "%s %f %d");
  unsigned long x = 88172645463325252ul + (unsigned long)me;
  char text[64];
  for (int i = 0; i < steps; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    snprintf(text, sizeof text, "%016lx-%016lx-%016lx", x, x * 31, x * 17);
    gasp_event_notify(ctx, ev, GASP_START, __FILE__, __LINE__, 0, text, (double)x / 3.0, i);
    double v;
    pts_t src = {(uint64_t)((me + 1) % THREADS), (uint64_t)(uintptr_t)&cell[(me + 1) % THREADS]};
    gasp_event_notify(ctx, GASP_UPC_GET, GASP_START, __FILE__, __LINE__, 9, 1, &v, &src, sizeof v);
    v = cell[(me + 1) % THREADS];
    gasp_event_notify(ctx, GASP_UPC_GET, GASP_END, __FILE__, __LINE__ - 2, 9, 1, &v, &src, sizeof v);
    cell[me] = v + 1;
    if (i % 50 == 0) {
      gasp_event_notify(ctx, GASP_UPC_WAIT, GASP_START, __FILE__, __LINE__, 5, 1, i);
      pthread_barrier_wait(&bar);
      gasp_event_notify(ctx, GASP_UPC_WAIT, GASP_END, __FILE__, __LINE__ - 2, 5, 1, i);
    }
    gasp_event_notify(ctx, ev, GASP_END, __FILE__, __LINE__, 0, text, 0.5 * i, i);
  }
  gasp_event_notify(ctx, GASP_UPC_COLLECTIVE_EXIT, GASP_START, __FILE__, __LINE__, 0, 0);
  pthread_barrier_wait(&bar);
  gasp_event_notify(ctx, GASP_UPC_COLLECTIVE_EXIT, GASP_END, __FILE__, __LINE__, 0, 0);
  return NULL;
}
int main(int argc, char **argv) {
  g_argc = argc; g_argv = argv;
  if (argc > 1) steps = atoi(argv[1]);
  pthread_barrier_init(&bar, NULL, THREADS);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, run, (void *)(intptr_t)i);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  printf("%f\n", cell[0]);
  return 0;
}
"#;

/// [`PROGRAM`], recorded once with the smallest buffers, so that each stream
/// has several chunks.
fn recorded() -> &'static Path {
    static TRACE: OnceLock<PathBuf> = OnceLock::new();
    TRACE.get_or_init(|| {
        let dir = common::tmpdir("corrupt-recorded");
        let exe = common::compile_gasp(&dir, "steps", PROGRAM, "-O1");
        let trace = dir.join("trace");
        let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
            .arg("run")
            .arg("-o")
            .arg(&trace)
            .arg("--")
            .arg(&exe)
            .arg("1000")
            .env("GASPARD_BUFFER_KB", "64")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The intact trace has no problems, so every problem below comes from the damage.
        let r = run(&trace, &["dump", "--json"]);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(
            v["problems"].as_array().unwrap().len(),
            0,
            "{}",
            v["problems"]
        );
        trace
    })
}

/// A copy of the recorded trace in a directory of its own.
fn copy(name: &str) -> PathBuf {
    let src = recorded();
    let d = common::tmpdir(&format!("corrupt-{name}")).join("trace");
    std::fs::create_dir_all(&d).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, d.join(p.file_name().unwrap())).unwrap();
    }
    d
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    v
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `gaspard ARGS DIR`, killing it after [`LIMIT`]. Output goes to files
/// (a pipe could fill and stall the command).
fn run(dir: &Path, args: &[&str]) -> Outcome {
    let tag = format!("{}-{:?}", std::process::id(), std::thread::current().id())
        .replace(|c: char| !c.is_ascii_alphanumeric(), "");
    let files = common::root();
    std::fs::create_dir_all(files).unwrap();
    let out_path = files.join(format!("corrupt-out-{tag}"));
    let err_path = files.join(format!("corrupt-err-{tag}"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .arg(args[0])
        .arg(dir)
        .args(&args[1..])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gaspard {args:?} on {} hangs", dir.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let read = |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned();
    let o = Outcome {
        code: status.code(),
        stdout: read(&out_path),
        stderr: read(&err_path),
    };
    let _ = std::fs::remove_file(out_path);
    let _ = std::fs::remove_file(err_path);
    o
}

/// `dump --json` and `report` on the damaged `dir` (the damage being `what`)
/// end cleanly; when `expect` is given, the problems (or the error) say it.
/// The report (one process at a time) is the one of the trace read whole.
fn check(dir: &Path, what: &str, expect: &[&str]) {
    let (by_process, whole) = (run(dir, &["report"]), run(dir, &["report", "--in-memory"]));
    assert_eq!(
        (by_process.code, &by_process.stdout),
        (whole.code, &whole.stdout),
        "{what}: the report read one process at a time and read whole differ: {} / {}",
        by_process.stderr,
        whole.stderr
    );
    for args in [&["dump", "--json"][..], &["report"][..]] {
        let r = run(dir, args);
        assert!(
            !r.stderr.contains("panicked") && !r.stdout.contains("panicked"),
            "{what}: gaspard {args:?} panicked: {}",
            r.stderr
        );
        let Some(code) = r.code else {
            panic!(
                "{what}: gaspard {args:?} was killed by a signal: {}",
                r.stderr
            );
        };
        if code != 0 {
            // A refusal must say why, in a sentence naming what is wrong.
            assert!(
                r.stderr.trim().len() > 10 && r.stderr.contains("error"),
                "{what}: gaspard {args:?} exits {code} without a clear message: {:?}",
                r.stderr
            );
            if !expect.is_empty() {
                assert!(
                    expect.iter().any(|e| r.stderr.contains(e)),
                    "{what}: gaspard {args:?}: {:?} does not say any of {expect:?}",
                    r.stderr
                );
            }
            continue;
        }
        if args[0] == "dump" {
            let v: serde_json::Value = serde_json::from_str(&r.stdout)
                .unwrap_or_else(|e| panic!("{what}: dump --json is not JSON: {e}"));
            let problems: Vec<&str> = v["problems"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect();
            if !expect.is_empty() {
                assert!(
                    problems
                        .iter()
                        .any(|p| expect.iter().any(|e| p.contains(e))),
                    "{what}: no problem says any of {expect:?}: {problems:?}"
                );
            }
        } else if !expect.is_empty() {
            // The text report lists the same problems as notes.
            assert!(
                r.stdout
                    .lines()
                    .any(|l| l.starts_with("note:") && expect.iter().any(|e| l.contains(e))),
                "{what}: the report has no note saying any of {expect:?}:\n{}",
                r.stdout
            );
        }
    }
}

/// Byte offsets where chunks start in a stream file (and its header's length).
fn layout(b: &[u8]) -> (usize, Vec<usize>) {
    let header = 16 + u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
    let mut chunks = Vec::new();
    let mut at = header;
    while at + 64 <= b.len() {
        assert_eq!(&b[at..at + 4], b"GSPC");
        chunks.push(at);
        at += 64 + u32::from_le_bytes(b[at + 16..at + 20].try_into().unwrap()) as usize;
    }
    (header, chunks)
}

#[test]
fn truncated_streams() {
    let dir = copy("trunc");
    let stream = files(&dir, "gst").remove(1);
    let file = name(&stream);
    let whole = std::fs::read(&stream).unwrap();
    let (header, chunks) = layout(&whole);
    assert!(
        chunks.len() >= 3,
        "{} chunks: make the run longer",
        chunks.len()
    );
    let mut cuts = vec![0, 1, 7, 8, 12, 15, 16, header - 1, header, whole.len() - 1];
    for &c in &chunks {
        cuts.extend([c + 1, c + 4, c + 20, c + 63, c + 64, c + 65, c + 200]);
    }
    // Exactly between two chunks: only the manifest can tell.
    cuts.extend(chunks.iter().skip(1).copied());
    cuts.retain(|&c| c < whole.len());
    for cut in cuts {
        std::fs::write(&stream, &whole[..cut]).unwrap();
        check(
            &dir,
            &format!("{file} cut at byte {cut}"),
            &[file.as_str(), "events are missing"],
        );
    }
}

#[test]
fn flipped_bytes() {
    let dir = copy("flip");
    let stream = files(&dir, "gst").remove(2);
    let file = name(&stream);
    let whole = std::fs::read(&stream).unwrap();
    let (_, chunks) = layout(&whole);
    // The magic, the version and the header's length; then, in every chunk,
    // its magic, version, stream, sequence number, payload length, event
    // count, timestamps, checksum, and bytes of its payload.
    let mut at = vec![0, 5, 8, 9, 12, 13, 14];
    // The first chunks, and the last (cut short where the run ended).
    let some: Vec<usize> = chunks
        .iter()
        .take(2)
        .chain(chunks.last())
        .copied()
        .collect();
    for &c in &some {
        at.extend([0, 4, 8, 12, 16, 19, 20, 24, 40, 56].map(|o| c + o));
        at.extend([64, 70, 150, 300].map(|o| c + o));
    }
    at.retain(|&a| a < whole.len());
    // All bits of a byte, or the lowest one only.
    for (i, a) in at.into_iter().enumerate() {
        let mask = if i % 2 == 0 { 0xffu8 } else { 0x01 };
        let mut b = whole.clone();
        b[a] ^= mask;
        std::fs::write(&stream, &b).unwrap();
        check(
            &dir,
            &format!("{file}: byte {a} ^ {mask:#x}"),
            &[file.as_str()],
        );
    }
}

/// The text of a stream file's header with `key`'s value replaced (its
/// length field kept right: the header text has no checksum).
fn with_header_value(b: &[u8], key: &str, value: &str) -> Vec<u8> {
    let (header, _) = layout(b);
    let text = String::from_utf8_lossy(&b[16..header]).into_owned();
    let text: String = text
        .lines()
        .map(|l| match l.split_once('=') {
            Some((k, _)) if k == key => format!("{k}={value}\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    let mut out = b[..12].to_vec();
    out.extend_from_slice(&(text.len() as u32).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(&b[header..]);
    out
}

#[test]
fn odd_stream_headers() {
    // Values no recorder writes, in the unprotected text of a stream's
    // header: read without a panic, whatever the analyses make of them.
    let dir = copy("headers");
    let stream = files(&dir, "gst").remove(1);
    let whole = std::fs::read(&stream).unwrap();
    let max = u64::MAX.to_string();
    let cases = [
        ("pts_bytes", "0"),
        ("pts_bytes", "3"),
        ("pts_bytes", "4294967295"),
        ("pts_bytes", max.as_str()),
        ("stream", "0"),
        ("stream", "4294967295"),
        ("thread", "4294967295"),
        ("thread", "0"),
        ("model", "4294967295"),
        ("model", "3"),
        ("tid", max.as_str()),
        ("clock", "sundial"),
        ("host", ""),
        ("host", "../other host"),
        ("pid", "-1"),
    ];
    for (key, value) in cases {
        std::fs::write(&stream, with_header_value(&whole, key, value)).unwrap();
        let said = format!("pointers-to-shared of {value} bytes, which no runtime has");
        let expect: &[&str] = match (key, value) {
            ("pts_bytes", "3") => &[],
            ("pts_bytes", _) => &[said.as_str()],
            _ => &[],
        };
        check(&dir, &format!("stream header {key}={value}"), expect);
    }
    // Another pid: a process without a manifest, and the manifest's own
    // stream is missing.
    std::fs::write(&stream, with_header_value(&whole, "pid", "4242")).unwrap();
    check(
        &dir,
        "stream header of another pid",
        &["-4242: no manifest"],
    );
}

#[test]
fn zeroed_and_deleted_files() {
    let dir = copy("zero");
    let streams = files(&dir, "gst");
    let manifest = files(&dir, "manifest").remove(0);
    let process = manifest.file_stem().unwrap().to_string_lossy().into_owned();
    let s = &streams[0];
    let file = name(s);
    let keep = std::fs::read(s).unwrap();
    std::fs::write(s, vec![0u8; keep.len()]).unwrap();
    check(
        &dir,
        "a stream of zeros",
        &[&format!("{file}: not a gaspard stream file")],
    );
    // Zeros after the header: the chunks are gone.
    let (header, _) = layout(&keep);
    let mut b = keep.clone();
    b[header..].fill(0);
    std::fs::write(s, &b).unwrap();
    check(&dir, "zeroed chunks", &[&format!("{file}: ")]);
    std::fs::write(s, b"").unwrap();
    check(
        &dir,
        "an empty stream",
        &[&format!("{file}: file header is truncated")],
    );
    std::fs::remove_file(s).unwrap();
    check(
        &dir,
        "a deleted stream",
        &[&format!(
            "({file}) is listed in its manifest but its file is missing"
        )],
    );
    std::fs::write(s, &keep).unwrap();
    let m = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, vec![0u8; m.len()]).unwrap();
    check(&dir, "a manifest of zeros", &["not a gaspard manifest"]);
    std::fs::write(&manifest, b"").unwrap();
    check(&dir, "an empty manifest", &["not a gaspard manifest"]);
    std::fs::remove_file(&manifest).unwrap();
    check(
        &dir,
        "a deleted manifest",
        &[&format!("process {process}: no manifest")],
    );
    for s in &streams {
        std::fs::remove_file(s).unwrap();
    }
    check(
        &dir,
        "no streams and no manifest",
        &["holds no gaspard trace"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
    check(&dir, "no directory", &["does not exist"]);
}

#[test]
fn garbage_manifests() {
    let dir = copy("manifest");
    let manifest = files(&dir, "manifest").remove(0);
    let mname = name(&manifest);
    let process = manifest.file_stem().unwrap().to_string_lossy().into_owned();
    let good = std::fs::read_to_string(&manifest).unwrap();
    // Bytes from a fixed pseudo-random sequence.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let replace = |key: &str, with: &str| -> String {
        good.lines()
            .map(|l| {
                if l.split(' ').next() == Some(key) {
                    with.to_string()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let unreadable: Vec<(String, Vec<u8>, &str)> = vec![
        ("noise".into(), noise.clone(), "not a gaspard manifest"),
        (
            "noise after the first line".into(),
            [good.lines().next().unwrap().as_bytes(), b"\n", &noise].concat(),
            "its manifest has no status line",
        ),
        (
            "a newer version".into(),
            b"gaspard-manifest 99\n".to_vec(),
            "manifest version 99",
        ),
        (
            "a bad version".into(),
            b"gaspard-manifest two\n".to_vec(),
            "bad manifest version line",
        ),
        (
            "a pid out of range".into(),
            replace("pid", "pid 99999999999999999999999").into_bytes(),
            "cannot read 'pid 9999",
        ),
        (
            "a clock reference cut short".into(),
            replace("clock_ref", "clock_ref 12").into_bytes(),
            "cannot read 'clock_ref 12'",
        ),
        (
            "a stream line without a file".into(),
            replace("stream", "stream 0").into_bytes(),
            "cannot read 'stream 0'",
        ),
        (
            "an event count that is not a number".into(),
            replace("events", "events many").into_bytes(),
            "cannot read 'events many'",
        ),
    ];
    for (what, bytes, says) in unreadable {
        std::fs::write(&manifest, &bytes).unwrap();
        check(&dir, &what, &[says]);
        let r = run(&dir, &["dump", "--json"]);
        assert!(
            r.stdout.contains(&format!("{mname}: "))
                || r.stdout
                    .contains(&format!("process {process}: its manifest")),
            "{what}: the problems do not name the manifest"
        );
    }
    // Readable, but with values no run produces: read without a panic.
    let odd = [
        replace("clock_ref", "clock_ref 18446744073709551615 0"),
        replace("clock_ref", "clock_ref 0 18446744073709551615"),
        replace(
            "clock_ref",
            "clock_ref 1 1\nclock_ref 2 18446744073709551615",
        ),
        replace(
            "clock_ref",
            "clock_ref 18446744073709551615 1\nclock_ref 1 18446744073709551615",
        ),
        replace(
            "realtime_ref",
            "realtime_ref 18446744073709551615 18446744073709551615",
        ),
        replace("pts_bytes", "pts_bytes 4294967295"),
        replace("pts_bytes", "pts_bytes 0"),
        replace("lost", "lost 18446744073709551615"),
        replace("host", "host ../../etc"),
        replace("command", &format!("command {}", "x".repeat(1 << 20))),
        format!(
            "{good}\n{}",
            String::from_utf8_lossy(&noise).replace('\n', " ")
        ),
    ];
    for (i, text) in odd.iter().enumerate() {
        std::fs::write(&manifest, text).unwrap();
        check(&dir, &format!("odd manifest {i}"), &[]);
    }
}

#[test]
fn manifest_disagrees_with_streams() {
    let dir = copy("disagree");
    let manifest = files(&dir, "manifest").remove(0);
    let process = manifest.file_stem().unwrap().to_string_lossy().into_owned();
    let good = std::fs::read_to_string(&manifest).unwrap();
    let events: u64 = good
        .lines()
        .find_map(|l| l.strip_prefix("events "))
        .unwrap()
        .parse()
        .unwrap();
    let streams = files(&dir, "gst");
    let last = name(streams.last().unwrap());
    // A stream the manifest lists is not there, and events are missing.
    let more = good
        .replace(
            &format!("events {events}"),
            &format!("events {}", events + 10),
        )
        .replace(
            "\nevents ",
            &format!("\nstream 9 {process}-9.gst model=0 tid=1 thread=9\nevents "),
        );
    std::fs::write(&manifest, &more).unwrap();
    check(
        &dir,
        "a listed stream without a file",
        &[&format!(
            "stream 9 ({process}-9.gst) is listed in its manifest but its file is missing"
        )],
    );
    // More events counted than the streams hold, every file there and whole.
    std::fs::write(
        &manifest,
        good.replace(
            &format!("events {events}"),
            &format!("events {}", events + 7),
        ),
    )
    .unwrap();
    check(&dir, "an event count too high", &["7 events are missing"]);
    // A stream file the manifest does not list.
    let fewer: String = good
        .lines()
        .filter(|l| !(l.starts_with("stream ") && l.contains(&last)))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&manifest, fewer).unwrap();
    check(
        &dir,
        "an unlisted stream",
        &[&format!("{last} is not listed in its manifest")],
    );
    // The process never finished, or crashed.
    std::fs::write(&manifest, good.replace("status complete", "status running")).unwrap();
    check(&dir, "still running", &["still running"]);
    std::fs::write(
        &manifest,
        good.replace("status complete", "status crashed SIGBUS"),
    )
    .unwrap();
    check(&dir, "crashed", &["crashed SIGBUS"]);
    // Another process's manifest for the same streams' host: those streams have none.
    std::fs::write(&manifest, &good).unwrap();
    std::fs::rename(&manifest, dir.join("otherhost-1.manifest")).unwrap();
    check(
        &dir,
        "a manifest under another name",
        &[&format!("process {process}: no manifest")],
    );
}

#[test]
fn chunks_swapped_duplicated_and_mixed() {
    let dir = copy("mixed");
    let streams = files(&dir, "gst");
    let a = std::fs::read(&streams[1]).unwrap();
    let b = std::fs::read(&streams[2]).unwrap();
    let (ha, ca) = layout(&a);
    let (_, cb) = layout(&b);
    let file = name(&streams[1]);
    let chunk = |v: &[u8], c: &[usize], i: usize| {
        v[c[i]..c.get(i + 1).copied().unwrap_or(v.len())].to_vec()
    };
    // Chunks 0 and 1 swapped.
    let swapped = [
        &a[..ha],
        &chunk(&a, &ca, 1),
        &chunk(&a, &ca, 0),
        &a[ca[2]..],
    ]
    .concat();
    std::fs::write(&streams[1], &swapped).unwrap();
    check(
        &dir,
        "chunks swapped",
        &[&format!("{file}: chunks 0..0 are missing")],
    );
    // Chunk 1 twice.
    let twice = [&a[..ca[2]], &chunk(&a, &ca, 1), &a[ca[2]..]].concat();
    std::fs::write(&streams[1], &twice).unwrap();
    check(
        &dir,
        "a chunk twice",
        &[&format!("{file}: chunk 1 at offset")],
    );
    // A chunk of another stream in the middle.
    let foreign = [&a[..ca[1]], &chunk(&b, &cb, 1), &a[ca[2]..]].concat();
    std::fs::write(&streams[1], &foreign).unwrap();
    check(&dir, "a chunk of another stream", &[]);
    // A stream file's header on another stream's chunks.
    let other_header = [&b[..cb[0]], &a[ca[0]..]].concat();
    std::fs::write(&streams[1], &other_header).unwrap();
    check(&dir, "two files claim one stream", &[]);
}

/// The bytes of an export's output: a file, or the files of a directory by name.
fn output_bytes(out: &Path) -> Option<Vec<(String, Vec<u8>)>> {
    if out.is_file() {
        return Some(vec![(String::new(), std::fs::read(out).ok()?)]);
    }
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(out)
        .ok()?
        .flatten()
        .map(|e| (name(&e.path()), std::fs::read(e.path()).unwrap_or_default()))
        .collect();
    v.sort();
    Some(v)
}

/// `gaspard blocks` and every `gaspard export` format on the damaged `dir`
/// end cleanly too; Perfetto and Parquet exports read one process at a time
/// (`--low-memory`) end as the whole reading's, with the same bytes.
/// `dump` read one process at a time says what the whole reading says: the
/// same threads and entries in JSON (the problems in another order: those
/// found in the events come last), the same thread blocks and notes in text.
fn check_dump_by_process(dir: &Path, what: &str) {
    let whole = run(dir, &["dump", "--json"]);
    let low = run(dir, &["dump", "--json", "--low-memory"]);
    assert_eq!(
        whole.code == Some(0),
        low.code == Some(0),
        "{what}: dump and dump --low-memory end differently: {} / {}",
        whole.stderr,
        low.stderr
    );
    if whole.code != Some(0) {
        return;
    }
    let (mut a, mut b): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&whole.stdout).unwrap(),
        serde_json::from_str(&low.stdout).unwrap(),
    );
    for v in [&mut a, &mut b] {
        let p = v["problems"].as_array_mut().unwrap();
        p.sort_by_key(|x| x.to_string());
    }
    assert!(a == b, "{what}: dump --json --low-memory differs");
    let whole = run(dir, &["dump"]);
    let low = run(dir, &["dump", "--low-memory"]);
    // Thread blocks and clock lines in order, notes as a set, the count of
    // events and threads (first line of the whole dump, last line but the
    // notes of the other).
    fn split(t: &str) -> (Vec<&str>, Vec<&str>, Option<String>) {
        let mut notes: Vec<&str> = t.lines().filter(|l| l.starts_with("note: ")).collect();
        notes.sort_unstable();
        let body: Vec<&str> = t
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with("note: ") && !l.starts_with("trace "))
            .collect();
        let count = t
            .lines()
            .filter(|l| l.starts_with("trace ") && l.ends_with(" threads"))
            .map(|l| l.rsplit_once(": ").unwrap().1.to_string())
            .next_back();
        (notes, body, count)
    }
    let ((wn, wb, wc), (ln, lb, lc)) = (split(&whole.stdout), split(&low.stdout));
    assert_eq!(wn, ln, "{what}: dump --low-memory notes differ");
    assert_eq!(wc, lc, "{what}: dump --low-memory counts differ");
    let first = wb.iter().zip(&lb).position(|(a, b)| a != b);
    assert!(
        first.is_none() && wb.len() == lb.len(),
        "{what}: dump --low-memory differs at line {first:?} ({} and {} lines): {:?} / {:?}",
        wb.len(),
        lb.len(),
        first.map(|i| wb[i]),
        first.map(|i| lb[i])
    );
}

fn check_other_commands(dir: &Path, what: &str) {
    check_dump_by_process(dir, what);
    let out_path = dir.parent().unwrap().join("exported");
    let out = out_path.to_str().unwrap();
    let low_path = dir.parent().unwrap().join("exported-low-memory");
    let low = low_path.to_str().unwrap();
    let commands: [&[&str]; 4] = [
        &["blocks"],
        &["export", "--format", "otf2", "--force", "-o", out],
        &["export", "--format", "perfetto", "--force", "-o", out],
        &["export", "--format", "parquet", "--force", "-o", out],
    ];
    for args in commands {
        let r = run(dir, args);
        if args.contains(&"perfetto") || args.contains(&"parquet") {
            let mut by_process: Vec<&str> = args.to_vec();
            *by_process.last_mut().unwrap() = low;
            by_process.push("--low-memory");
            let l = run(dir, &by_process);
            assert_eq!(
                l.code == Some(0),
                r.code == Some(0),
                "{what}: gaspard {args:?} and with --low-memory end differently: {} / {}",
                r.stderr,
                l.stderr
            );
            if r.code == Some(0) {
                assert!(
                    output_bytes(&out_path) == output_bytes(&low_path),
                    "{what}: gaspard {args:?} with --low-memory writes other bytes"
                );
                // And says the same of the trace's problems.
                let note = |e: &str| {
                    e.lines()
                        .find(|l| l.contains("problem(s)"))
                        .map(str::to_string)
                };
                assert_eq!(note(&r.stderr), note(&l.stderr), "{what}: gaspard {args:?}");
            }
            let _ = std::fs::remove_dir_all(low);
            let _ = std::fs::remove_file(low);
        }
        assert!(
            !r.stderr.contains("panicked"),
            "{what}: gaspard {args:?} panicked: {}",
            r.stderr
        );
        let Some(code) = r.code else {
            panic!(
                "{what}: gaspard {args:?} was killed by a signal: {}",
                r.stderr
            );
        };
        assert!(
            code == 0 || r.stderr.contains("error"),
            "{what}: gaspard {args:?} exits {code} without a clear message: {:?}",
            r.stderr
        );
        let _ = std::fs::remove_dir_all(out);
        let _ = std::fs::remove_file(out);
    }
}

#[test]
fn damaged_payloads_with_right_checksums() {
    // Bytes of a chunk's payload changed and its checksum made right again,
    // as a faulty writer would leave them: the decoder, every analysis and
    // every export meet events no program made.
    use gaspard_format::chunk::{ChunkHeader, CHUNK_HEADER_LEN};
    let dir = copy("payload");
    let stream = files(&dir, "gst").remove(0);
    let file = name(&stream);
    let whole = std::fs::read(&stream).unwrap();
    let (_, chunks) = layout(&whole);
    let c = chunks[0];
    let h = ChunkHeader::parse(&whole[c..]).unwrap();
    let payload = c + CHUNK_HEADER_LEN..c + CHUNK_HEADER_LEN + h.payload_len as usize;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..12 {
        let mut b = whole.clone();
        for _ in 0..1 + round * 3 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = payload.start + (x as usize) % payload.len();
            b[at] = (x >> 32) as u8;
        }
        let head = h.to_bytes(&b[payload.clone()]);
        b[c..c + CHUNK_HEADER_LEN].copy_from_slice(&head);
        std::fs::write(&stream, &b).unwrap();
        let what = format!("{file}: payload damaged under a right checksum, round {round}");
        check(&dir, &what, &[]);
        check_other_commands(&dir, &what);
    }
    // And the other commands on damage of the other kinds.
    std::fs::write(&stream, &whole[..c + CHUNK_HEADER_LEN + 100]).unwrap();
    check_other_commands(&dir, "a stream cut inside its first chunk");
    std::fs::write(&stream, with_header_value(&whole, "pts_bytes", "0")).unwrap();
    check_other_commands(&dir, "a stream header with pts_bytes=0");
}
