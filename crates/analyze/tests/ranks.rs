//! The report shared among ranks ([`gaspard_analyze::distributed`]), with
//! ranks that are threads of this test: the report is the one a single
//! process computes, whatever the number of ranks and however they read;
//! a rank that sends nonsense makes an error, never a hang.

use std::path::Path;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;

use gaspard_analyze::distributed::{self, Transport};
use gaspard_format::chunk::{file_header, ChunkHeader};
use gaspard_format::codec::{Encoder, Resolver, UserDef};

/// Names every file after its process: the callsites differ from process
/// to process, and the trace numbers them in file order.
struct Names(u32);
impl Resolver for Names {
    fn string_at(&mut self, ptr: u64) -> Vec<u8> {
        format!("p{}-{ptr:x}.c", self.0).into_bytes()
    }
    fn user_event(&mut self, _id: u64) -> Option<UserDef> {
        None
    }
}

mod common;

/// Writes process `pid` (host `h`): `streams` streams of `gets` GET pairs
/// each, from a few lines of two files, with or without its manifest.
fn write_process(dir: &Path, pid: u32, streams: u32, gets: u64, manifest: bool) {
    let mut files = Vec::new();
    for stream in 0..streams {
        let mut bytes = file_header(&[
            ("stream", stream.to_string()),
            ("host", "h".into()),
            ("pid", pid.to_string()),
            ("pts_bytes", "16".into()),
        ]);
        let mut ts = 1_000 + u64::from(pid) * 37;
        let mut enc = Encoder::new();
        for i in 0..gets * 2 {
            ts += 100 + (i * u64::from(pid + stream)) % 70;
            let line = 10 + ((i / 2) % 3) as u32 + stream;
            let w = common::get(ts, i % 2 == 0, line, 0x1000 + (i / 2) % 2, 8 * (1 + i % 4));
            enc.push(&w, &mut Names(pid)).unwrap();
        }
        let (chunk, _) = enc.finish(ChunkHeader {
            stream,
            seq: 0,
            ref_ticks: ts,
            ref_ns: ts,
            ..Default::default()
        });
        bytes.extend_from_slice(&chunk);
        let file = format!("h-{pid}-{stream}.gst");
        std::fs::write(dir.join(&file), &bytes).unwrap();
        files.push(file);
    }
    if manifest {
        common::write_manifest(dir, pid, &files, u64::from(streams) * gets * 2);
    }
}

/// A trace of five processes of one to three streams, one of them without
/// its manifest and one with a stream file cut short.
fn trace(name: &str) -> common::Scratch {
    let d = common::tmpdir("ranks", name);
    for pid in 1..=5 {
        write_process(&d, pid, 1 + pid % 3, 40 + u64::from(pid) * 7, pid != 4);
    }
    let cut = d.join("h-2-1.gst");
    let len = std::fs::metadata(&cut).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&cut)
        .unwrap()
        .set_len(len - 40)
        .unwrap();
    d
}

/// One rank of a job whose ranks are threads: a channel from every rank to
/// every other.
struct Rank {
    rank: usize,
    to: Vec<Sender<Vec<u8>>>,
    from: Vec<Mutex<Receiver<Vec<u8>>>>,
    /// The first message this rank sends, replaced by these bytes.
    garble: Mutex<Option<Vec<u8>>>,
}

impl Transport for Rank {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.to.len()
    }
    fn send_to(&self, to: usize, bytes: &[u8]) -> Result<(), String> {
        let bytes = self.garble.lock().unwrap().take().unwrap_or(bytes.to_vec());
        self.to[to]
            .send(bytes)
            .map_err(|_| format!("rank {to} is gone"))
    }
    fn recv_from(&self, from: usize) -> Result<Vec<u8>, String> {
        self.from[from]
            .lock()
            .unwrap()
            .recv()
            .map_err(|_| format!("rank {from} is gone"))
    }
}

/// The ranks of a job of `size`.
fn job(size: usize) -> Vec<Rank> {
    // senders[from][to], receivers[to][from]
    let mut senders: Vec<Vec<Sender<Vec<u8>>>> = (0..size).map(|_| Vec::new()).collect();
    let mut receivers: Vec<Vec<Mutex<Receiver<Vec<u8>>>>> = (0..size).map(|_| Vec::new()).collect();
    for from in senders.iter_mut() {
        for to in receivers.iter_mut() {
            let (s, r) = channel();
            from.push(s);
            to.push(Mutex::new(r));
        }
    }
    senders
        .into_iter()
        .zip(receivers)
        .enumerate()
        .map(|(rank, (to, from))| Rank {
            rank,
            to,
            from,
            garble: Mutex::new(None),
        })
        .collect()
}

/// Runs every rank of `ranks` on the trace in `dir`: what each returned.
fn run(
    dir: &Path,
    ranks: Vec<Rank>,
    low_memory: bool,
) -> Vec<Result<Option<gaspard_analyze::profile::Report>, String>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = ranks
            .into_iter()
            .map(|r| {
                s.spawn(move || {
                    distributed::report(dir, 4096, &r, low_memory).map_err(|e| e.to_string())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn ranks_report_what_one_process_reports() {
    let d = trace("same");
    let t = gaspard_analyze::trace::read(&d).unwrap();
    assert!(t.streams.len() >= 9, "{} streams", t.streams.len());
    common::says(&t, &["no manifest"]);
    common::says(&t, &["h-2 stream 1", "h-2-1.gst"]);
    let whole = serde_json::to_string(&gaspard_analyze::profile::report_with(&t, 4096)).unwrap();
    let by_process = distributed::report_by_process(&d, 4096).unwrap();
    assert_eq!(serde_json::to_string(&by_process).unwrap(), whole);
    for size in 1..=4 {
        for low_memory in [false, true] {
            let out = run(&d, job(size), low_memory);
            for (rank, r) in out.iter().enumerate() {
                let r = r.as_ref().unwrap_or_else(|e| panic!("rank {rank}: {e}"));
                assert_eq!(r.is_some(), rank == 0, "rank {rank} of {size}");
            }
            let report = out[0].as_ref().unwrap().as_ref().unwrap();
            assert_eq!(
                serde_json::to_string(report).unwrap(),
                whole,
                "{size} ranks, low memory {low_memory}"
            );
        }
    }
}

#[test]
fn a_rank_sending_nonsense_is_an_error_not_a_hang() {
    let d = trace("nonsense");
    for garbage in [vec![], vec![0xff; 3], vec![1, 200, 7, 7, 7]] {
        let ranks = job(3);
        *ranks[2].garble.lock().unwrap() = Some(garbage.clone());
        let out = run(&d, ranks, false);
        let e = out[0]
            .as_ref()
            .err()
            .unwrap_or_else(|| panic!("{garbage:?}: rank 0 took it"));
        assert!(e.contains("rank 2 sent"), "{garbage:?}: {e}");
        // The other ranks learn that rank 0 is gone instead of waiting for it.
        for (rank, r) in out.iter().enumerate().skip(1) {
            assert!(r.is_err(), "{garbage:?}: rank {rank} went on");
        }
    }
}
