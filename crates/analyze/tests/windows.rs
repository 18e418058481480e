//! Windows of a trace read alone ([`gaspard_analyze::scan::Windows`]) give
//! the quick scan's spans exactly, on a stream written here whose intervals
//! cross many chunks (one spans them all, others nest in it, of the same
//! kind) and whose time goes back inside chunks and from one chunk to the
//! next.

use gaspard_analyze::scan::{overview, scan, Quick, QuickSpan, Windows};
use gaspard_format::chunk::{file_header, ChunkHeader};
use gaspard_format::codec::{Encoder, Resolver, UserDef};

#[allow(dead_code)] // The other tests use the rest.
mod common;

struct Files;
impl Resolver for Files {
    fn string_at(&mut self, ptr: u64) -> Vec<u8> {
        format!("f{ptr:x}.c").into_bytes()
    }
    fn user_event(&mut self, _id: u64) -> Option<UserDef> {
        None
    }
}

/// Writes one stream of `chunks` chunks: a GET open from the first event
/// to the last, and in it pairs of GETs, some nested in another; in every
/// third chunk the clock goes back 10 us once (before the chunk's first
/// event, and its latest event not its last), and every fifth chunk starts
/// 1 us before the previous one ended.
fn write(dir: &std::path::Path, chunks: u32) -> u64 {
    let mut bytes = file_header(&[
        ("stream", "0".into()),
        ("host", "h".into()),
        ("pid", "7".into()),
        ("pts_bytes", "16".into()),
    ]);
    let mut ts = 10_000u64;
    let mut events = 0u64;
    for c in 0..chunks {
        let mut enc = Encoder::new();
        let push = |enc: &mut Encoder, ts: u64, start: bool, line: u32| {
            let w = common::get(ts, start, line, 0x1000 + u64::from(line % 3), 8);
            enc.push(&w, &mut Files).unwrap();
        };
        if c % 5 == 4 {
            ts -= 1_000;
        }
        if c == 0 {
            push(&mut enc, ts, true, 1);
        }
        for i in 0..40u32 {
            ts += 100;
            if c % 3 == 2 && i == 35 {
                ts -= 10_000;
            }
            push(&mut enc, ts, true, 10 + i % 4);
            if i % 5 == 0 {
                ts += 30;
                push(&mut enc, ts, true, 20);
                ts += 30;
                push(&mut enc, ts, false, 21);
            }
            ts += 50;
            push(&mut enc, ts, false, 11);
        }
        if c == chunks - 1 {
            ts += 10;
            push(&mut enc, ts, false, 2);
        }
        events += u64::from(enc.events());
        let (chunk, _) = enc.finish(ChunkHeader {
            stream: 0,
            seq: c,
            ref_ticks: ts,
            ref_ns: ts,
            ..Default::default()
        });
        bytes.extend_from_slice(&chunk);
    }
    std::fs::write(dir.join("h-7-0.gst"), &bytes).unwrap();
    common::write_manifest(dir, 7, &["h-7-0.gst".to_string()], events);
    events
}

fn described(
    sp: &QuickSpan,
    q_names: &[String],
    sites: &[gaspard_analyze::trace::Callsite],
) -> String {
    format!(
        "{} [{}, {}] event {} {} {:?} {:?}",
        sp.kind,
        sp.start,
        sp.end,
        sp.start_event,
        q_names[sp.name as usize],
        sites[sp.callsite as usize],
        sp.peer()
    )
}

fn spans_in(q: &Quick, a: u64, b: u64) -> Vec<String> {
    q.streams[0]
        .spans
        .iter()
        .filter(|sp| sp.end >= a && sp.start < b)
        .map(|sp| described(sp, &q.names, &q.callsites))
        .collect()
}

#[test]
fn windows_when_time_goes_back() {
    let dir = common::tmpdir("windows", "back");
    let events = write(&dir, 12);
    let q = scan(&dir).unwrap();
    assert_eq!(q.events(), events);
    let o = overview(&dir, 64, 1, |_, _| Some(0)).unwrap();
    let w = Windows::from_bytes(&dir, &o.windows.to_bytes()).unwrap();
    let spans = &q.streams[0].spans;
    assert!(spans.len() > 500, "{} spans", spans.len());
    let (t0, t1) = q.streams[0].first_last.unwrap();
    // The outer GET spans the run.
    assert!(spans.iter().any(|sp| sp.start == t0 && sp.end == t1));
    let mut partial = 0;
    let step = (t1 - t0) / 97;
    for i in 0..100 {
        for width in [1, 150, 700, 5_000, 20_000] {
            let a = t0 + step * i;
            let b = a + width;
            let got = w.window(a, b).unwrap();
            let have: Vec<String> = got.streams[0]
                .iter()
                .map(|sp| described(sp, &got.names, &got.callsites))
                .collect();
            assert_eq!(have, spans_in(&q, a, b), "window [{a}, {b})");
            if got.events < events {
                partial += 1;
            }
        }
    }
    assert!(partial > 300, "{partial} windows read in part");
    // A chunk changed since (its checksum no longer holds): no window that
    // needs it, rather than wrong spans; the others still read.
    let f = dir.join("h-7-0.gst");
    let mut b = std::fs::read(&f).unwrap();
    let magic = gaspard_format::chunk::CHUNK_MAGIC;
    let sixth = (0..b.len() - 4)
        .filter(|&i| &b[i..i + 4] == magic)
        .nth(6)
        .unwrap();
    b[sixth + gaspard_format::chunk::CHUNK_HEADER_LEN + 20] ^= 0xff;
    std::fs::write(&f, &b).unwrap();
    // Chunk 6 holds events 577 to 672 (97 in the first chunk, 96 in the
    // next ones).
    let middle = spans
        .iter()
        .find(|sp| (600..650).contains(&sp.start_event))
        .unwrap()
        .start;
    assert!(w.window(middle, middle + 10).is_none());
    assert!(w.window(t0, t0 + 10).is_some());
    assert!(w.window(t1 - 10, t1).is_some());
}
