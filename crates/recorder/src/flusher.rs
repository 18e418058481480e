//! The flusher thread: drains full buffers, encodes them into chunks, appends
//! them to the stream files, and keeps the manifest current.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::Duration;

use gaspard_format::chunk::{file_header, ChunkHeader};
use gaspard_format::codec::{Encoder, Resolver, UserDef};
use gaspard_format::manifest::Manifest;

use crate::clock;
use crate::process::Process;

/// A buffer of raw records, owned by one context or by the queue.
#[derive(Debug)]
pub(crate) struct Buffer {
    pub(crate) next: *mut Buffer,
    pub(crate) stream: u32,
    pub(crate) len: usize,
    pub(crate) words: Box<[u64]>,
}

/// Largest chunk payload before a chunk is cut.
const CHUNK_BYTES: usize = 1 << 20;

struct StreamOut {
    file: Option<File>,
    seq: u32,
    failed: bool,
}

struct ProcResolver<'a>(&'a Process);

impl Resolver for ProcResolver<'_> {
    fn string_at(&mut self, ptr: u64) -> Vec<u8> {
        // SAFETY: the pointer came from the program as a NUL-terminated string it
        // keeps alive (file names and function signatures are literals); reading
        // stops at 4096 bytes.
        unsafe {
            let p = ptr as *const libc::c_char;
            let n = libc::strnlen(p, 4096);
            std::slice::from_raw_parts(p.cast::<u8>(), n).to_vec()
        }
    }
    fn user_event(&mut self, id: u64) -> Option<UserDef> {
        // try_lock: after a crash the lock may be held by a thread that will never run again.
        for _ in 0..100 {
            if let Ok(users) = self.0.users.try_lock() {
                return users
                    .iter()
                    .find(|u| u64::from(u.id) == id)
                    .map(|u| UserDef {
                        id,
                        name: u.name.clone(),
                        desc: u.desc.clone(),
                        unreadable: u.unreadable.clone(),
                    });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        None
    }
}

pub(crate) fn run(p: &'static Process) {
    // SAFETY: gettid has no preconditions.
    p.flusher_tid.store(
        unsafe { libc::syscall(libc::SYS_gettid) } as i32,
        Ordering::Release,
    );
    let mut outs: HashMap<u32, StreamOut> = HashMap::new();
    loop {
        let requested = p.requested.load(Ordering::Acquire);
        let mut head = p.queue.swap(std::ptr::null_mut(), Ordering::Acquire);
        let mut batch = Vec::new();
        while !head.is_null() {
            batch.push(head);
            // SAFETY: buffers on the queue are owned by the queue until popped here.
            head = unsafe { (*head).next };
        }
        batch.reverse();
        let idle = batch.is_empty();
        for b in batch {
            // SAFETY: popped above; nobody else refers to it.
            let buf = unsafe { &*b };
            write_buffer(p, &mut outs, buf);
            p.recycle(b);
        }
        if requested > p.done.load(Ordering::Acquire) && p.queue.load(Ordering::Acquire).is_null() {
            for o in outs.values_mut() {
                if let Some(f) = o.file.as_mut() {
                    let _ = f.flush();
                }
            }
            let sig = crate::signals::CRASH_SIGNAL.load(Ordering::SeqCst);
            let status = if sig != 0 {
                format!("crashed {}", crate::signals::name(sig))
            } else if p.finalizing.load(Ordering::Acquire) {
                "complete".to_string()
            } else {
                "running".to_string()
            };
            write_manifest(p, &status);
            p.done.store(requested, Ordering::Release);
        } else if idle {
            std::thread::park_timeout(Duration::from_millis(5));
        }
    }
}

fn open_stream(p: &Process, id: u32) -> Result<File, String> {
    let entry = p
        .streams
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|s| s.id == id)
        .cloned()
        .ok_or_else(|| format!("stream {id} is not registered"))?;
    let path = p.dir.join(&entry.file);
    let mut f =
        File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let header = file_header(&[
        ("stream", id.to_string()),
        ("host", p.host.clone()),
        ("pid", p.pid.to_string()),
        ("model", entry.model.to_string()),
        ("tid", entry.tid.to_string()),
        ("thread", entry.thread.to_string()),
        ("pts_bytes", p.pts_bytes.to_string()),
        (
            "clock",
            if clock::is_tsc() { "tsc" } else { "monotonic" }.to_string(),
        ),
    ]);
    f.write_all(&header)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(f)
}

fn write_buffer(p: &Process, outs: &mut HashMap<u32, StreamOut>, buf: &Buffer) {
    let out = outs.entry(buf.stream).or_insert_with(|| StreamOut {
        file: None,
        seq: 0,
        failed: false,
    });
    let words = &buf.words[..buf.len.min(buf.words.len())];
    let mut res = ProcResolver(p);
    let mut enc = Encoder::new();
    let mut at = 0;
    while at < words.len() {
        match enc.push(&words[at..], &mut res) {
            Some(n) => at += n,
            None => {
                p.note(format!(
                    "stream {}: a record was cut at the end of a buffer",
                    buf.stream
                ));
                break;
            }
        }
        if enc.len() >= CHUNK_BYTES {
            write_chunk(p, out, buf.stream, &mut enc);
        }
    }
    if !enc.is_empty() {
        write_chunk(p, out, buf.stream, &mut enc);
    }
}

fn write_chunk(p: &Process, out: &mut StreamOut, stream: u32, enc: &mut Encoder) {
    let events = u64::from(enc.events());
    let header = ChunkHeader {
        stream,
        seq: out.seq,
        ref_ticks: clock::now_ticks(),
        ref_ns: clock::monotonic_ns(),
        ..Default::default()
    };
    let (bytes, _) = enc.finish(header);
    out.seq += 1;
    if out.failed {
        p.lost.fetch_add(events, Ordering::Relaxed);
        return;
    }
    if out.file.is_none() {
        match open_stream(p, stream) {
            Ok(f) => out.file = Some(f),
            Err(e) => {
                fail(p, out, events, e);
                return;
            }
        }
    }
    let f = out.file.as_mut().expect("opened above");
    if let Err(e) = f.write_all(&bytes) {
        fail(
            p,
            out,
            events,
            format!("stream {stream}: write failed: {e}"),
        );
        return;
    }
    p.events.fetch_add(events, Ordering::Relaxed);
}

fn fail(p: &Process, out: &mut StreamOut, events: u64, why: String) {
    eprintln!("gaspard: {why}; later events of this stream are counted as lost");
    p.note(why);
    out.failed = true;
    p.lost.fetch_add(events, Ordering::Relaxed);
}

pub(crate) fn write_manifest(p: &Process, status: &str) {
    let mut unknown = 0;
    for i in 0..p.contexts() {
        // SAFETY: a published slot; a racy read of a counter is fine here.
        unknown += unsafe {
            std::ptr::read_volatile(std::ptr::addr_of!((*crate::ctx_slot(i)).unknown_tags))
        };
    }
    let m = Manifest {
        host: p.host.clone(),
        pid: p.pid,
        command: p.command.clone(),
        start_unix_ns: p.start_unix_ns,
        clock: if clock::is_tsc() { "tsc" } else { "monotonic" }.into(),
        clock_refs: vec![p.clock_ref, (clock::now_ticks(), clock::monotonic_ns())],
        realtime_ref: p.realtime_ref,
        pts_bytes: p.pts_bytes,
        streams: p.streams.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        status: status.into(),
        events: p.events.load(Ordering::Relaxed),
        lost: p.lost.load(Ordering::Relaxed),
        unknown_tags: unknown,
        notes: p.notes.lock().unwrap_or_else(|e| e.into_inner()).clone(),
    };
    let path = p.dir.join(format!("{}.manifest", p.prefix));
    let tmp = p.dir.join(format!(".{}.manifest.tmp", p.prefix));
    let r = std::fs::write(&tmp, m.to_text()).and_then(|_| std::fs::rename(&tmp, &path));
    if let Err(e) = r {
        eprintln!("gaspard: cannot write manifest {}: {e}", path.display());
    }
}
