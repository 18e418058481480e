//! A damaged trace is read up to the damage, and the reader says exactly what is missing.

use std::path::PathBuf;

use gaspard_format::chunk::{file_header, ChunkHeader, CHUNK_HEADER_LEN};
use gaspard_format::codec::{Encoder, Resolver, UserDef};
use gaspard_format::kinds;
use gaspard_format::manifest::{Manifest, StreamEntry};
use gaspard_format::raw::{RawHeader, PHASE_END, PHASE_START};

struct Names;
impl Resolver for Names {
    fn string_at(&mut self, _ptr: u64) -> Vec<u8> {
        b"prog.c".to_vec()
    }
    fn user_event(&mut self, _id: u64) -> Option<UserDef> {
        None
    }
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gaspard-damage-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
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
            let h = RawHeader {
                ts,
                kind: kinds::UPC_GET,
                phase: if i % 2 == 0 { PHASE_START } else { PHASE_END },
                flags: 0,
                nwords: 5,
                line: 10 + seq,
                col: 0,
                file: 0x1234,
            };
            let mut w = h.pack().to_vec();
            w.extend_from_slice(&[1, 0x10, 0, 0, 8]);
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
    let m = Manifest {
        host: "h".into(),
        pid: 7,
        clock: "monotonic".into(),
        clock_refs: vec![(1000, 1000)],
        pts_bytes: 16,
        streams: vec![StreamEntry {
            id: 0,
            file: "h-7-0.gst".into(),
            ..Default::default()
        }],
        status: "complete".into(),
        events: u64::from(chunks) * 20,
        ..Default::default()
    };
    std::fs::write(dir.join("h-7.manifest"), m.to_text()).unwrap();
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
    assert!(
        t.problems.iter().any(|p| p.contains("damaged bytes")),
        "{:?}",
        t.problems
    );
    assert!(
        t.problems
            .iter()
            .any(|p| p.contains("chunks 1..1 are missing")),
        "{:?}",
        t.problems
    );
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
    assert!(
        t.problems
            .iter()
            .any(|p| p.contains("not a gaspard stream file")),
        "{:?}",
        t.problems
    );
    assert!(
        t.problems
            .iter()
            .any(|p| p.contains("not a gaspard manifest")),
        "{:?}",
        t.problems
    );
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
    assert!(
        t.problems
            .iter()
            .any(|p| p.contains("h-7-5.gst is not listed in its manifest")),
        "{:?}",
        t.problems
    );
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
    assert!(
        t.problems
            .iter()
            .any(|p| p.contains("40 of the 40 events its manifest counts are missing")),
        "{:?}",
        t.problems
    );
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
    }
    for at in 0..whole.len() {
        let mut b = whole.clone();
        b[at] ^= 0x5a;
        std::fs::write(&path, &b).unwrap();
        let t = gaspard_analyze::trace::read(&d).unwrap();
        // A flip in the text of the header may only change a value; a
        // flip anywhere else must be noticed.
        if t.problems.is_empty() {
            assert_eq!(t.events(), 60, "flip at {at}");
            assert!(at < 16 + 64, "flip at {at} goes unnoticed");
        }
    }
}
