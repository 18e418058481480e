//! The flusher thread: drains full buffers, encodes them into chunks, appends
//! them to the stream files, and keeps the manifest current.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::Duration;

use gaspard_format::chunk::{file_header, ChunkHeader};
use gaspard_format::manifest::Manifest;

use crate::clock;
use crate::process::Process;

/// A chunk's payload, written by one context's encoder; owned by the context
/// or by the queue.
#[derive(Debug)]
pub(crate) struct Buffer {
    pub(crate) next: *mut Buffer,
    pub(crate) stream: u32,
    /// Payload bytes written.
    pub(crate) len: usize,
    /// Events in the payload, and the first and last timestamps.
    pub(crate) events: u32,
    pub(crate) base_ts: u64,
    pub(crate) last_ts: u64,
    /// Bytes of `bytes` mapped in ahead of the writer (see
    /// [`Process::populate_fresh`]).
    pub(crate) populated: usize,
    pub(crate) bytes: Box<[u8]>,
}

struct StreamOut {
    file: Option<File>,
    seq: u32,
    failed: bool,
}

pub(crate) fn run(p: &'static Process) {
    // SAFETY: gettid has no preconditions.
    p.flusher_tid.store(
        unsafe { libc::syscall(libc::SYS_gettid) } as i32,
        Ordering::Release,
    );
    make_reserve(p);
    // The manifest of a process at work, for a trace cut short before its
    // end; a process already ending writes its final one at once.
    if p.requested.load(Ordering::Acquire) == 0 {
        write_manifest(p, "running");
    }
    let mut outs: HashMap<u32, StreamOut> = HashMap::new();
    let mut agg = crate::aggregate::Aggregates::default();
    loop {
        // Read before looking for work, so that a wake-up after the look is not missed.
        let seq = p.wake_seq.load(Ordering::Acquire);
        let requested = p.requested.load(Ordering::Acquire);
        p.populate_fresh();
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
            if p.profile_only {
                fold_buffer(p, &mut agg, buf);
            } else {
                write_buffer(p, &mut outs, buf);
            }
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
            if p.profile_only {
                write_profile(p, &mut agg);
            }
            write_manifest(p, &status);
            p.done.store(requested, Ordering::Release);
            p.done_seq.fetch_add(1, Ordering::Release);
            crate::process::futex_wake(&p.done_seq);
        } else if idle {
            // Every hand-over wakes this thread (a full buffer, the exit, a
            // fatal signal): the timeout is only a safety net.
            crate::process::futex_wait(&p.wake_seq, seq, 200_000_000);
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
    if p.flush_delay_ms > 0 {
        // In steps, so that the end of the program cuts the wait short: a
        // delay longer than the run holds every buffer until then.
        let until =
            clock::monotonic_ns().saturating_add(p.flush_delay_ms.saturating_mul(1_000_000));
        while !p.finalizing.load(Ordering::Relaxed) && clock::monotonic_ns() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let payload = &buf.bytes[..buf.len.min(buf.bytes.len())];
    let events = u64::from(buf.events);
    let (ref_ticks, ref_ns) = clock::reference_pair();
    let header = ChunkHeader {
        version: gaspard_format::FORMAT_VERSION as u16,
        stream: buf.stream,
        seq: out.seq,
        events: buf.events,
        base_ts: buf.base_ts,
        last_ts: buf.last_ts,
        ref_ticks,
        ref_ns,
        ..Default::default()
    };
    let head = header.to_bytes(payload);
    out.seq += 1;
    if out.failed {
        p.lost.fetch_add(events, Ordering::Relaxed);
        return;
    }
    if out.file.is_none() {
        match open_stream(p, buf.stream) {
            Ok(f) => out.file = Some(f),
            Err(e) => {
                fail(p, out, events, e);
                return;
            }
        }
    }
    let f = out.file.as_mut().expect("opened above");
    if let Err(e) = f.write_all(&head).and_then(|_| f.write_all(payload)) {
        fail(
            p,
            out,
            events,
            format!("stream {}: write failed: {e}", buf.stream),
        );
        return;
    }
    p.events.fetch_add(events, Ordering::Relaxed);
}

/// Profile-only mode: the buffer goes into the profile, not to the disk.
fn fold_buffer(p: &Process, agg: &mut crate::aggregate::Aggregates, buf: &Buffer) {
    let payload = &buf.bytes[..buf.len.min(buf.bytes.len())];
    let header = ChunkHeader {
        version: gaspard_format::FORMAT_VERSION as u16,
        stream: buf.stream,
        events: buf.events,
        base_ts: buf.base_ts,
        last_ts: buf.last_ts,
        ..Default::default()
    };
    agg.fold(p, buf.stream, &header, payload);
    p.events.fetch_add(u64::from(buf.events), Ordering::Relaxed);
}

/// Writes `<prefix>.profile` (atomically: a new file renamed over the old).
fn write_profile(p: &Process, agg: &mut crate::aggregate::Aggregates) {
    for why in agg.problems.drain(..) {
        p.note(why);
    }
    let text = agg.file(p).to_text();
    let path = p.dir.join(format!("{}.profile", p.prefix));
    let tmp = p.dir.join(format!(".{}.profile.tmp", p.prefix));
    let write = || std::fs::write(&tmp, &text).and_then(|_| std::fs::rename(&tmp, &path));
    let r = write().or_else(|_| {
        release_reserve(p);
        write()
    });
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        eprintln!("gaspard: cannot write profile {}: {e}", path.display());
        p.note(format!("the profile could not be written: {e}"));
    }
}

fn fail(p: &Process, out: &mut StreamOut, events: u64, why: String) {
    eprintln!("gaspard: {why}; later events of this stream are counted as lost");
    p.note(why);
    out.failed = true;
    p.lost.fetch_add(events, Ordering::Relaxed);
}

/// Bytes set aside at start-up, so that the manifest and the memory map can
/// still be written when the disk fills up.
const RESERVE_BYTES: usize = 64 * 1024;

fn reserve_path(p: &Process) -> std::path::PathBuf {
    p.dir.join(format!(".{}.reserve", p.prefix))
}

/// Sets disk space aside for the final manifest (see [`RESERVE_BYTES`]):
/// allocated without writing where the file system can (no page of zeros
/// to write back), else written.
fn make_reserve(p: &Process) {
    use std::os::fd::AsRawFd;
    let Ok(f) = File::create(reserve_path(p)) else {
        return;
    };
    // SAFETY: fallocate on a file descriptor we own, with a valid length.
    let rc = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, RESERVE_BYTES as libc::off_t) };
    if rc != 0 {
        let _ = (&f).write_all(&vec![0u8; RESERVE_BYTES]);
    }
}

/// Gives the space set aside back, for the manifest.
fn release_reserve(p: &Process) {
    let _ = std::fs::remove_file(reserve_path(p));
}

pub(crate) fn write_manifest(p: &Process, status: &str) {
    if status != "running" {
        release_reserve(p);
    }
    let (mut unknown, mut filtered) = (0, 0);
    for i in 0..p.contexts() {
        // SAFETY: a published slot; racy reads of counters are fine here.
        unsafe {
            unknown +=
                std::ptr::read_volatile(std::ptr::addr_of!((*crate::ctx_slot(i)).unknown_tags));
            filtered += std::ptr::read_volatile(std::ptr::addr_of!((*crate::ctx_slot(i)).filtered));
        }
    }
    let mut notes = p.notes.lock().unwrap_or_else(|e| e.into_inner()).clone();
    notes.extend(crate::filter::note(filtered));
    notes.extend(crate::source_notes());
    let m = Manifest {
        host: p.host.clone(),
        pid: p.pid,
        command: p.command.clone(),
        start_unix_ns: p.start_unix_ns,
        clock: if clock::is_tsc() { "tsc" } else { "monotonic" }.into(),
        clock_refs: vec![p.clock_ref, clock::reference_pair()],
        realtime_ref: p.realtime_ref,
        pts_bytes: p.pts_bytes,
        streams: p.streams.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        status: status.into(),
        events: p.events.load(Ordering::Relaxed),
        lost: p.lost.load(Ordering::Relaxed),
        unknown_tags: unknown,
        notes,
    };
    write_maps(p);
    let path = p.dir.join(format!("{}.manifest", p.prefix));
    let tmp = p.dir.join(format!(".{}.manifest.tmp", p.prefix));
    let text = m.to_text();
    let write = || std::fs::write(&tmp, &text).and_then(|_| std::fs::rename(&tmp, &path));
    // A full disk: use the space set aside at start-up.
    let r = write().or_else(|_| {
        release_reserve(p);
        write()
    });
    if let Err(e) = r {
        let _ = std::fs::remove_file(&tmp);
        eprintln!("gaspard: cannot write manifest {}: {e}", path.display());
    }
}

/// Keeps the process's executable file mappings (`<prefix>.maps`, in the
/// format of /proc/self/maps) so that the reader can turn code addresses
/// into source lines.
fn write_maps(p: &Process) {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return;
    };
    let keep: String = maps
        .lines()
        .filter(|l| {
            let mut f = l.split_whitespace();
            let perms = f.nth(1).unwrap_or("");
            perms.contains('x')
                && l.split_whitespace()
                    .nth(5)
                    .is_some_and(|path| path.starts_with('/'))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    // Written again only when a library came or went since.
    let mut written = p.maps_written.lock().unwrap_or_else(|e| e.into_inner());
    if written.as_deref() == Some(keep.as_str()) {
        return;
    }
    let path = p.dir.join(format!("{}.maps", p.prefix));
    let tmp = p.dir.join(format!(".{}.maps.tmp", p.prefix));
    let write = || std::fs::write(&tmp, &keep).and_then(|_| std::fs::rename(&tmp, &path));
    if write()
        .or_else(|_| {
            release_reserve(p);
            write()
        })
        .is_err()
    {
        let _ = std::fs::remove_file(&tmp);
        p.note("cannot write the process's memory map: code addresses stay unresolved".into());
    } else {
        *written = Some(keep);
    }
}
