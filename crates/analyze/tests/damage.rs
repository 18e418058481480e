//! A damaged trace is read up to the damage, and the reader says exactly what is missing.

use std::path::PathBuf;

use gaspard_format::chunk::{file_header, ChunkHeader, CHUNK_HEADER_LEN};
use gaspard_format::codec::{Encoder, Resolver, UserDef};
use gaspard_format::kinds;
use gaspard_format::manifest::{Manifest, StreamEntry};
use gaspard_format::raw::RawHeader;

struct Names;
impl Resolver for Names {
    fn string_at(&mut self, _ptr: u64) -> Vec<u8> {
        b"prog.c".to_vec()
    }
    fn user_event(&mut self, _id: u64) -> Option<UserDef> {
        None
    }
}

mod common;

fn tmpdir(name: &str) -> common::Scratch {
    common::tmpdir("damage", name)
}

/// Writes one process with one stream of `chunks` chunks of 10 GET pairs each.
/// Returns the stream path and the byte offset where each chunk starts.
fn write_trace(dir: &std::path::Path, chunks: u32) -> (PathBuf, Vec<usize>) {
    let mut bytes = file_header(&[
        ("stream", "0".into()),
        ("host", "h".into()),
        ("pid", "7".into()),
        ("pts_bytes", "16".into()),
    ]);
    let mut offsets = Vec::new();
    let mut ts = 1_000u64;
    for seq in 0..chunks {
        let mut enc = Encoder::new();
        for i in 0..20u64 {
            ts += 100;
            let w = common::get(ts, i % 2 == 0, 10 + seq, 0x1234, 8);
            enc.push(&w, &mut Names).unwrap();
        }
        let (chunk, _) = enc.finish(ChunkHeader {
            stream: 0,
            seq,
            ref_ticks: ts,
            ref_ns: ts,
            ..Default::default()
        });
        offsets.push(bytes.len());
        bytes.extend_from_slice(&chunk);
    }
    let path = dir.join("h-7-0.gst");
    std::fs::write(&path, &bytes).unwrap();
    common::write_manifest(dir, 7, &["h-7-0.gst".into()], u64::from(chunks) * 20);
    (path, offsets)
}

#[test]
fn intact_trace_reads_whole() {
    let d = tmpdir("intact");
    write_trace(&d, 3);
    let t = gaspard_analyze::trace::read(&d).unwrap();
    assert_eq!(t.events(), 60);
    assert!(t.problems.is_empty(), "{:?}", t.problems);
    let lines: Vec<u32> = t.streams[0]
        .events
        .iter()
        .map(|e| t.callsites[e.callsite as usize].line)
        .collect();
    assert_eq!(lines[0], 10);
    assert_eq!(lines[59], 12);
    assert_eq!(
        t.callsites[t.streams[0].events[0].callsite as usize]
            .file
            .as_deref(),
        Some("prog.c")
    );
}

#[test]
fn corrupt_chunk_is_skipped_and_named() {
    let d = tmpdir("corrupt");
    let (path, off) = write_trace(&d, 3);
    let mut b = std::fs::read(&path).unwrap();
    b[off[1] + CHUNK_HEADER_LEN + 5] ^= 0xff;
    std::fs::write(&path, &b).unwrap();
    let t = gaspard_analyze::trace::read(&d).unwrap();
    assert_eq!(t.events(), 40, "chunks 0 and 2 survive");
    assert!(t.streams[0].damaged);
    assert!(
        t.problems
            .iter()
            .any(|p| p.contains("chunk 1") && p.contains("checksum") && p.contains("20 events")),
        "{:?}",
        t.problems
    );
}

#[test]
fn truncated_stream_is_read_to_the_cut() {
    let d = tmpdir("trunc");
    let (path, off) = write_trace(&d, 3);
    let b = std::fs::read(&path).unwrap();
    std::fs::write(&path, &b[..off[2] + CHUNK_HEADER_LEN + 3]).unwrap();
    let t = gaspard_analyze::trace::read(&d).unwrap();
    assert_eq!(t.events(), 40);
    assert!(
        t.problems
            .iter()
            .any(|p| p.contains("truncated") && p.contains("chunk 2") && p.contains("20 events")),
        "{:?}",
        t.problems
    );
}

#[test]
fn garbage_between_chunks_is_skipped() {
    let d = tmpdir("garbage");
    let (path, off) = write_trace(&d, 3);
    let mut b = std::fs::read(&path).unwrap();
    // Overwrite chunk 1's header: the reader must find chunk 2 and report chunk 1 missing.
    b[off[1]..off[1] + 8].copy_from_slice(b"XXXXXXXX");
    std::fs::write(&path, &b).unwrap();
    let t = gaspard_analyze::trace::read(&d).unwrap();
    assert_eq!(t.events(), 40);
    common::says(&t, &["damaged bytes"]);
    common::says(&t, &["chunks 1..1 are missing"]);
}

#[test]
fn bad_inputs_give_clear_errors() {
    let missing = std::env::temp_dir().join("gaspard-no-such-dir-xyz");
    let e = gaspard_analyze::trace::read(&missing)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot read trace directory"), "{e}");
    let empty = tmpdir("empty");
    let e = gaspard_analyze::trace::read(&empty)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no gaspard trace"), "{e}");
    let d = tmpdir("notastream");
    std::fs::write(d.join("x-1-0.gst"), b"hello, this is not a trace").unwrap();
    std::fs::write(d.join("x-1.manifest"), b"not a manifest").unwrap();
    let t = gaspard_analyze::trace::read(&d).unwrap();
    assert_eq!(t.events(), 0);
    common::says(&t, &["not a gaspard stream file"]);
    common::says(&t, &["not a gaspard manifest"]);
}

#[test]
fn stream_cut_between_chunks_is_noticed() {
    // Every chunk that remains is whole: only the manifest's count can tell.
    let d = tmpdir("cutclean");
    let (path, off) = write_trace(&d, 3);
    let b = std::fs::read(&path).unwrap();
    std::fs::write(&path, &b[..off[2]]).unwrap();
    let t = gaspard_analyze::trace::read(&d).unwrap();
    assert_eq!(t.events(), 40);
    assert!(
        t.problems.iter().any(|p| p.contains("counts 60 events")
            && p.contains("hold 40")
            && p.contains("20 events are missing")),
        "{:?}",
        t.problems
    );
}

#[test]
fn manifest_and_streams_disagree() {
    // The listed file is gone, and a file the manifest does not list is there.
    let d = tmpdir("disagree");
    let (path, _) = write_trace(&d, 2);
    std::fs::rename(&path, d.join("h-7-5.gst")).unwrap();
    let t = gaspard_analyze::trace::read(&d).unwrap();
    assert_eq!(t.events(), 40, "the unlisted stream is read anyway");
    common::says(&t, &["h-7-5.gst is not listed in its manifest"]);
    // Now the stream is gone altogether.
    std::fs::remove_file(d.join("h-7-5.gst")).unwrap();
    let t = gaspard_analyze::trace::read(&d).unwrap();
    assert_eq!(t.events(), 0);
    assert!(
        t.problems.iter().any(|p| p
            .contains("stream 0 (h-7-0.gst) is listed in its manifest but its file is missing")),
        "{:?}",
        t.problems
    );
    common::says(&t, &["40 of the 40 events its manifest counts are missing"]);
}

#[test]
fn every_truncation_and_byte_flip_is_read_without_panic() {
    let d = tmpdir("everycut");
    let (path, _) = write_trace(&d, 3);
    let whole = std::fs::read(&path).unwrap();
    for cut in 0..whole.len() {
        std::fs::write(&path, &whole[..cut]).unwrap();
        let t = gaspard_analyze::trace::read(&d).unwrap();
        assert!(t.events() < 60, "cut at {cut}");
        assert!(!t.problems.is_empty(), "cut at {cut} goes unnoticed");
        // The quick scan reads what the reader reads.
        let q = gaspard_analyze::scan::scan(&d).unwrap();
        assert_eq!(q.events(), t.events(), "cut at {cut}");
    }
    for at in 0..whole.len() {
        let mut b = whole.clone();
        b[at] ^= 0x5a;
        std::fs::write(&path, &b).unwrap();
        let t = gaspard_analyze::trace::read(&d).unwrap();
        let q = gaspard_analyze::scan::scan(&d).unwrap();
        assert_eq!(q.events(), t.events(), "flip at {at}");
        // A flip in the text of the header may only change a value; a
        // flip anywhere else must be noticed.
        if t.problems.is_empty() {
            assert_eq!(t.events(), 60, "flip at {at}");
            assert!(at < 16 + 64, "flip at {at} goes unnoticed");
        }
    }
}

/// A small xorshift generator: the same events on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct Formats;
impl Resolver for Formats {
    fn string_at(&mut self, ptr: u64) -> Vec<u8> {
        format!("f{}.c", ptr % 5).into_bytes()
    }
    fn user_event(&mut self, id: u64) -> Option<UserDef> {
        let desc =
            ["%s %d %f", "%*.*f", "%-*s|%x", "%d", "%p %c", "%999999999d"][(id % 6) as usize];
        Some(UserDef {
            id,
            name: format!("ev{id}"),
            desc: Some(desc.into()),
            unreadable: None,
        })
    }
}

/// Streams of events no program makes (any kind with any arguments, starts
/// without ends and ends without starts, time going backwards, thread and
/// object numbers out of range) but with right checksums: the reader and
/// every analysis take them without a panic.
#[test]
fn nonsense_with_right_checksums_never_panics() {
    let known: Vec<u16> = (0..4096u16).filter(|&k| kinds::kind(k).is_some()).collect();
    for seed in 1..=150u64 {
        let d = tmpdir(&format!("nonsense-{seed}"));
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed.wrapping_mul(0x2545_f491_4f6c_dd1d));
        let streams = 1 + rng.below(4) as u32;
        let mut entries = Vec::new();
        let mut total = 0u64;
        for stream in 0..streams {
            let mut bytes = file_header(&[
                ("stream", stream.to_string()),
                ("host", "h".into()),
                ("pid", "7".into()),
                ("thread", stream.to_string()),
                (
                    "pts_bytes",
                    ["16", "8", "24", "1"][rng.below(4) as usize].into(),
                ),
            ]);
            let mut ts = rng.below(1 << 40);
            for seq in 0..1 + rng.below(3) as u32 {
                let mut enc = Encoder::new();
                for _ in 0..rng.below(300) {
                    ts = match rng.below(20) {
                        0 => ts.saturating_sub(rng.below(1 << 20)),
                        1 => rng.next(),
                        _ => ts.saturating_add(rng.below(10_000)),
                    };
                    let kind = match rng.below(10) {
                        0 => kinds::GASPARD_USER,
                        1 => rng.below(1 << 16) as u16,
                        _ => known[rng.below(known.len() as u64) as usize],
                    };
                    // A user event always carries its id.
                    let nwords = (rng.below(12) as u8).max(u8::from(kind == kinds::GASPARD_USER));
                    let h = RawHeader {
                        ts,
                        kind,
                        phase: rng.below(3) as u8,
                        flags: rng.below(4) as u8,
                        nwords,
                        line: rng.below(50) as u32,
                        col: 0,
                        file: rng.below(3),
                    };
                    let mut w = h.pack().to_vec();
                    for _ in 0..nwords {
                        w.push(match rng.below(6) {
                            0 => rng.next(),
                            1 => u64::MAX - rng.below(3),
                            2 => 1 << rng.below(64),
                            _ => rng.below(8),
                        });
                    }
                    enc.push(&w, &mut Formats).unwrap();
                }
                total += u64::from(enc.events());
                let (chunk, _) = enc.finish(ChunkHeader {
                    stream,
                    seq,
                    ref_ticks: ts,
                    ref_ns: rng.next() >> rng.below(64),
                    ..Default::default()
                });
                bytes.extend_from_slice(&chunk);
            }
            let file = format!("h-7-{stream}.gst");
            std::fs::write(d.join(&file), &bytes).unwrap();
            entries.push(StreamEntry {
                id: stream,
                file,
                thread: stream,
                ..Default::default()
            });
        }
        let m = Manifest {
            host: "h".into(),
            pid: 7,
            clock: "tsc".into(),
            clock_refs: vec![(rng.next(), rng.next())],
            pts_bytes: 16,
            streams: entries,
            status: "complete".into(),
            events: total,
            ..Default::default()
        };
        std::fs::write(d.join("h-7.manifest"), m.to_text()).unwrap();
        let t = gaspard_analyze::trace::read(&d).unwrap();
        assert_eq!(
            t.events(),
            total,
            "seed {seed}: every event is read: {:?}",
            t.problems
        );
        // The dump, written as it is made, holds every event of every thread.
        let mut written = Vec::new();
        gaspard_analyze::dump::write_json(&t, &mut written).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&written).unwrap();
        let threads = v["threads"].as_array().unwrap();
        assert_eq!(threads.len(), t.streams.len(), "seed {seed}");
        for (th, s) in threads.iter().zip(&t.streams) {
            assert_eq!(
                th["events"].as_array().unwrap().len(),
                s.events.len(),
                "seed {seed}"
            );
        }
        assert_eq!(v["events"], total, "seed {seed}");
        gaspard_analyze::dump::to_text(&t, &mut std::io::sink()).unwrap();
        let r = gaspard_analyze::profile::report_with(&t, 4096);
        gaspard_analyze::profile::to_text(&r, &mut std::io::sink()).unwrap();
        // Read one process at a time, its summaries renumbered and shifted
        // (or, with events the trace's start clamps, read again): the same.
        let by_process = gaspard_analyze::distributed::report_by_process(&d, 4096).unwrap();
        assert_eq!(
            serde_json::to_string(&by_process).unwrap(),
            serde_json::to_string(&r).unwrap(),
            "seed {seed}"
        );
        let b = gaspard_analyze::blocks::analyse(&t, 64);
        let _ = gaspard_analyze::blocks::to_json(&b);
        gaspard_analyze::blocks::epochs_to_text(&b, &mut std::io::sink()).unwrap();
        let q = gaspard_analyze::scan::scan(&d).unwrap();
        assert_eq!(q.events(), total, "seed {seed}");
        let spans: usize = q.streams.iter().map(|s| s.spans.len()).sum();
        let intervals: usize = t
            .streams
            .iter()
            .map(|s| gaspard_analyze::intervals::intervals(s).len())
            .sum();
        assert_eq!(spans, intervals, "seed {seed}");
    }
}
