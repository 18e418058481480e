//! Reading a trace with several processes (MPI ranks) sharing its stream
//! files.
//!
//! Every rank lists the trace directory and reads the manifests (small), then
//! reads, checks, decodes and converts the stream files of its share of the
//! recorded processes (all the streams of a process go to one rank: its
//! clock is fitted to all of them; processes are shared so that every rank
//! gets about as many bytes). The ranks other than the first send what they
//! read to the first, which puts the parts back in file order and goes on as
//! [`crate::trace::read`] does: the trace, and so the report, is the same
//! as read by one process.
//!
//! The transport is given by the caller ([`Transport`]): the `gaspard`
//! command implements it over MPI.

use std::path::{Path, PathBuf};

use gaspard_format::codec::UserDef;
use gaspard_format::varint::{self, Reader};

use rayon::prelude::*;
use rustc_hash::FxHashMap as HashMap;

use crate::profile::{PortableProfile, Report, Stats, ThreadStats};
use crate::trace::{
    self, Callsite, ClockRefs, Event, Local, Stream, StreamPart, TraceError, NO_TEXT, NO_USER,
};

/// How the ranks reach each other.
pub trait Transport {
    /// This rank, from 0.
    fn rank(&self) -> usize;
    /// How many ranks.
    fn size(&self) -> usize;
    /// Sends `bytes` to rank `to` (received there by [`Transport::recv_from`]
    /// this rank, in the order sent).
    fn send_to(&self, to: usize, bytes: &[u8]) -> Result<(), String>;
    /// Sends `bytes` to rank 0.
    fn send_to_root(&self, bytes: &[u8]) -> Result<(), String> {
        self.send_to(0, bytes)
    }
    /// Receives the next message rank `from` sent to this rank.
    fn recv_from(&self, from: usize) -> Result<Vec<u8>, String>;
}

/// The process a stream file belongs to: its name without `-STREAM.gst`.
fn process_of(path: &Path) -> String {
    let stem = path
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    match stem.rsplit_once('-') {
        Some((p, n)) if n.bytes().all(|b| b.is_ascii_digit()) => p.to_string(),
        _ => stem,
    }
}

/// Which rank reads each stream file: whole processes, the biggest first,
/// each to the rank with the fewest bytes so far (the same on every rank).
pub fn share(paths: &[PathBuf], ranks: usize) -> Vec<usize> {
    let ranks = ranks.max(1);
    // Each file's process (numbered in the order met), and each process's bytes.
    let mut number: HashMap<String, usize> = HashMap::default();
    let mut bytes: Vec<u64> = Vec::new();
    let process: Vec<usize> = paths
        .iter()
        .map(|p| {
            let n = number.len();
            let i = *number.entry(process_of(p)).or_insert(n);
            if i == bytes.len() {
                bytes.push(0);
            }
            bytes[i] += std::fs::metadata(p).map_or(0, |m| m.len());
            i
        })
        .collect();
    let mut order: Vec<usize> = (0..bytes.len()).collect();
    order.sort_by(|&a, &b| bytes[b].cmp(&bytes[a]).then(a.cmp(&b)));
    let mut load = vec![0u64; ranks];
    let mut owner = vec![0usize; bytes.len()];
    for i in order {
        let r = (0..ranks).min_by_key(|&r| (load[r], r)).unwrap_or(0);
        load[r] += bytes[i];
        owner[i] = r;
    }
    process.into_iter().map(|i| owner[i]).collect()
}

/// This rank's share of `paths`: which rank reads each file, and the
/// indices and paths of this rank's own.
fn my_share(paths: &[PathBuf], tr: &dyn Transport) -> (Vec<usize>, Vec<usize>, Vec<PathBuf>) {
    let owner = share(paths, tr.size());
    let mine: Vec<usize> = (0..paths.len())
        .filter(|&i| owner[i] == tr.rank())
        .collect();
    let my_paths = mine.iter().map(|&i| paths[i].clone()).collect();
    (owner, mine, my_paths)
}

/// The report on the trace in `dir`, computed with the ranks of `tr`:
/// `Some(report)` on rank 0, equal to [`crate::profile::report_with`] on
/// [`trace::read`]'s trace; `None` on the other ranks once their share is
/// sent.
///
/// Besides its streams, each rank sends the profile of each (computed on the
/// trace of its own processes: a profile depends on no other stream), which
/// rank 0 takes instead of computing it again: the streams first, then the
/// profiles, so that rank 0 decodes the one while the other is computed.
pub fn report(
    dir: &Path,
    block_size: u64,
    tr: &dyn Transport,
) -> Result<Option<Report>, TraceError> {
    if tr.rank() != 0 {
        // The streams go first, so that rank 0 decodes them while this rank
        // computes their profiles; the profiles follow.
        let mine = trace::read_with(dir, |paths, refs| {
            let (_, index, my_paths) = my_share(paths, tr);
            // Sent with their times in ns.
            let parts: Vec<_> = trace::read_streams(&my_paths, refs)
                .into_par_iter()
                .map(trace::StreamPart::in_ns)
                .collect();
            let mut out = Vec::new();
            encode(&index, &parts, &mut out);
            tr.send_to_root(&out)?;
            Ok(parts)
        })?;
        let profiles: Vec<PortableProfile> = mine
            .streams
            .par_iter()
            .map(|s| PortableProfile::of(&mine, s))
            .collect();
        drop(mine);
        let mut out = Vec::new();
        encode_profiles(&profiles, &mut out);
        tr.send_to_root(&out).map_err(TraceError::Parts)?;
        return Ok(None);
    }
    let t = trace::read_with(dir, |paths, refs| gather(paths, refs, tr))?;
    let mut profiles: HashMap<(String, u32), PortableProfile> = HashMap::default();
    for from in 1..tr.size() {
        let bytes = tr.recv_from(from).map_err(TraceError::Parts)?;
        let mut r = In(Reader::new(&bytes), bytes.len());
        let bad = |e: String| TraceError::Parts(format!("the profiles rank {from} sent: {e}"));
        for p in decode_profiles(&mut r).map_err(bad)? {
            profiles.insert((p.thread.process.clone(), p.thread.stream), p);
        }
        if r.remaining() != 0 {
            return Err(bad(format!("{} bytes left over", r.remaining())));
        }
    }
    let given = t
        .streams
        .iter()
        .map(|s| profiles.remove(&(s.process.clone(), s.stream)))
        .collect();
    Ok(Some(crate::profile::report_given(&t, block_size, given)))
}

fn gather(
    paths: &[PathBuf],
    refs: &ClockRefs,
    tr: &dyn Transport,
) -> Result<Vec<StreamPart>, String> {
    let (owner, mine, my_paths) = my_share(paths, tr);
    let parts = trace::read_streams(&my_paths, refs);
    let mut slots: Vec<Option<StreamPart>> = (0..paths.len()).map(|_| None).collect();
    for (i, p) in mine.into_iter().zip(parts) {
        slots[i] = Some(p);
    }
    for from in 1..tr.size() {
        let bytes = tr.recv_from(from)?;
        let bad = |e: String| format!("the streams rank {from} sent: {e}");
        let mut r = In(Reader::new(&bytes), bytes.len());
        for (i, p) in decode(&mut r).map_err(bad)? {
            match slots.get_mut(i) {
                Some(s) if owner[i] == from => *s = Some(p),
                _ => {
                    return Err(format!(
                        "rank {from} sent stream file {i}, not one of its share"
                    ))
                }
            }
        }
        if r.remaining() != 0 {
            return Err(bad(format!("{} bytes left over", r.remaining())));
        }
    }
    slots
        .into_iter()
        .enumerate()
        .map(|(i, p)| p.ok_or_else(|| format!("no rank read {}", paths[i].display())))
        .collect()
}

fn put_stats(out: &mut Vec<u8>, st: &Stats) {
    put_str(out, &st.name);
    for v in [
        st.count,
        st.total_ns,
        st.min_ns,
        st.max_ns,
        st.bytes,
        st.intervals,
    ] {
        varint::put_u64(out, v);
    }
}

fn encode_profiles(profiles: &[PortableProfile], out: &mut Vec<u8>) {
    varint::put_u64(out, profiles.len() as u64);
    for p in profiles {
        let th = &p.thread;
        put_str(out, &th.process);
        for v in [th.stream as u64, th.thread as u64, th.events, th.span_ns] {
            varint::put_u64(out, v);
        }
        varint::put_u64(out, th.by_event.len() as u64);
        for st in &th.by_event {
            put_stats(out, st);
        }
        varint::put_u64(out, p.sites.len() as u64);
        for (name, c, st) in &p.sites {
            put_str(out, name);
            put_opt(out, &c.file);
            varint::put_u64(out, c.line as u64);
            varint::put_u64(out, c.col as u64);
            put_stats(out, st);
        }
    }
}

fn get_stats(r: &mut In<'_>) -> Result<Stats, String> {
    let name = r.str()?;
    let (count, total_ns, min_ns, max_ns, bytes, intervals) =
        (r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?);
    Ok(Stats {
        name,
        count,
        total_ns,
        // As computed where the intervals were added.
        mean_ns: if intervals > 0 {
            total_ns as f64 / intervals as f64
        } else {
            0.0
        },
        min_ns,
        max_ns,
        bytes,
        intervals,
    })
}

fn decode_profiles(r: &mut In<'_>) -> Result<Vec<PortableProfile>, String> {
    let n = r.count()?;
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let process = r.str()?;
        let (stream, thread, events, span_ns) = (r.u32()?, r.u32()?, r.u64()?, r.u64()?);
        let by_event = (0..r.count()?)
            .map(|_| get_stats(r))
            .collect::<Result<Vec<_>, _>>()?;
        let mut sites = Vec::new();
        for _ in 0..r.count()? {
            let name = r.str()?;
            let c = Callsite {
                file: r.opt()?,
                line: r.u32()?,
                col: r.u32()?,
            };
            sites.push((name, c, get_stats(r)?));
        }
        v.push(PortableProfile {
            thread: ThreadStats {
                process,
                stream,
                thread,
                events,
                span_ns,
                by_event,
            },
            sites,
        });
    }
    Ok(v)
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    varint::put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn put_opt(out: &mut Vec<u8>, s: &Option<String>) {
    match s {
        None => out.push(0),
        Some(s) => {
            out.push(1);
            put_str(out, s);
        }
    }
}

/// Encodes the parts read (with the index of each in the list of stream files).
fn encode(index: &[usize], parts: &[StreamPart], out: &mut Vec<u8>) {
    varint::put_u64(out, parts.len() as u64);
    for (&i, part) in index.iter().zip(parts) {
        varint::put_u64(out, i as u64);
        varint::put_u64(out, part.problems.len() as u64);
        for p in &part.problems {
            put_str(out, p);
        }
        let Some((s, local)) = &part.stream else {
            out.push(0);
            continue;
        };
        out.push(1);
        put_str(out, &s.process);
        for v in [
            s.pid as u64,
            s.stream as u64,
            s.tid,
            s.thread as u64,
            s.model as u64,
        ] {
            varint::put_u64(out, v);
        }
        varint::put_u64(out, s.pts_bytes as u64);
        put_str(out, &s.path.to_string_lossy());
        varint::put_u64(out, s.chunks as u64);
        out.push(s.damaged as u8);
        varint::put_u64(out, local.sites.len() as u64);
        for c in &local.sites {
            put_opt(out, &c.file);
            varint::put_u64(out, c.line as u64);
            varint::put_u64(out, c.col as u64);
        }
        varint::put_u64(out, local.users.len() as u64);
        for u in &local.users {
            varint::put_u64(out, u.id);
            put_str(out, &u.name);
            put_opt(out, &u.desc);
            put_opt(out, &u.unreadable);
        }
        varint::put_u64(out, local.texts.len() as u64);
        for t in &local.texts {
            put_str(out, t);
        }
        varint::put_u64(out, s.events.len() as u64);
        let mut last = 0u64;
        for e in &s.events {
            varint::put_i64(out, e.t_ns.wrapping_sub(last) as i64);
            last = e.t_ns;
            varint::put_u64(out, e.kind as u64);
            out.push(e.phase);
            out.push(e.flags);
            varint::put_u64(out, e.callsite as u64);
            varint::put_u64(out, e.user().map_or(0, |u| u as u64 + 1));
            let args = s.args(e);
            varint::put_u64(out, args.len() as u64);
            for &a in args {
                varint::put_u64(out, a);
            }
            varint::put_u64(
                out,
                if e.text == NO_TEXT {
                    0
                } else {
                    e.text as u64 + 1
                },
            );
        }
    }
}

struct In<'a>(Reader<'a>, usize);

impl In<'_> {
    fn remaining(&self) -> usize {
        self.1.saturating_sub(self.0.pos())
    }
    fn u64(&mut self) -> Result<u64, String> {
        self.0.u64().map_err(|_| "truncated".to_string())
    }
    fn u32(&mut self) -> Result<u32, String> {
        u32::try_from(self.u64()?).map_err(|_| "a number out of range".to_string())
    }
    /// A count of items of at least one byte each: never more than the bytes left.
    fn count(&mut self) -> Result<usize, String> {
        let n = self.u64()?;
        let left = self.remaining() as u64;
        if n > left {
            return Err(format!("a count of {n} with {left} bytes left"));
        }
        Ok(n as usize)
    }
    fn byte(&mut self) -> Result<u8, String> {
        self.0.byte().map_err(|_| "truncated".to_string())
    }
    fn str(&mut self) -> Result<String, String> {
        let n = self.count()?;
        let b = self.0.bytes(n).map_err(|_| "truncated".to_string())?;
        String::from_utf8(b.to_vec()).map_err(|_| "a string that is not UTF-8".to_string())
    }
    fn opt(&mut self) -> Result<Option<String>, String> {
        Ok(match self.byte()? {
            0 => None,
            _ => Some(self.str()?),
        })
    }
}

fn decode(r: &mut In<'_>) -> Result<Vec<(usize, StreamPart)>, String> {
    let n = r.count()?;
    let mut parts = Vec::with_capacity(n);
    for _ in 0..n {
        let i = r.u64()? as usize;
        let np = r.count()?;
        let problems = (0..np).map(|_| r.str()).collect::<Result<Vec<_>, _>>()?;
        if r.byte()? == 0 {
            parts.push((
                i,
                StreamPart {
                    problems,
                    stream: None,
                    clock: None,
                },
            ));
            continue;
        }
        let process = r.str()?;
        let (pid, stream, tid, thread, model) = (r.u32()?, r.u32()?, r.u64()?, r.u32()?, r.u32()?);
        let pts_bytes = r.u32()?;
        let path = PathBuf::from(r.str()?);
        let chunks = r.u32()?;
        let damaged = r.byte()? != 0;
        let mut local = Local::default();
        for _ in 0..r.count()? {
            local.sites.push(Callsite {
                file: r.opt()?,
                line: r.u32()?,
                col: r.u32()?,
            });
        }
        for _ in 0..r.count()? {
            local.users.push(UserDef {
                id: r.u64()?,
                name: r.str()?,
                desc: r.opt()?,
                unreadable: r.opt()?,
            });
        }
        for _ in 0..r.count()? {
            let t = r.str()?;
            local.texts.push(t);
        }
        let ne = r.count()?;
        if ne > trace::MAX_STREAM_EVENTS {
            return Err(format!("a stream of {ne} events"));
        }
        let mut events = Vec::with_capacity(ne);
        let mut arg_words: Vec<u64> = Vec::new();
        let mut last = 0u64;
        for _ in 0..ne {
            let t_ns = last.wrapping_add(r.0.i64().map_err(|_| "truncated".to_string())? as u64);
            last = t_ns;
            let kind = u16::try_from(r.u64()?).map_err(|_| "a kind out of range".to_string())?;
            let phase = r.byte()?;
            let flags = r.byte()?;
            let callsite = r.u32()?;
            if callsite as usize >= local.sites.len() {
                return Err(format!("callsite {callsite} of {}", local.sites.len()));
            }
            let user = match r.u64()? {
                0 => None,
                u => Some(
                    u32::try_from(u - 1).map_err(|_| "a user event out of range".to_string())?,
                ),
            };
            if user.is_some_and(|u| u as usize >= local.users.len()) {
                return Err("a user event out of range".to_string());
            }
            let na = r.count()?;
            if arg_words.len() + na > trace::MAX_STREAM_EVENTS {
                return Err("too many argument words".to_string());
            }
            let args_at = arg_words.len() as u32;
            for _ in 0..na {
                arg_words.push(r.u64()?);
            }
            let text = match r.u64()? {
                0 => NO_TEXT,
                n if n as usize <= local.texts.len() => (n - 1) as u32,
                _ => return Err("a string argument out of range".to_string()),
            };
            events.push(Event {
                t_ns,
                kind,
                phase,
                flags,
                callsite,
                args_at,
                nargs: na as u32,
                text,
                user: user.unwrap_or(NO_USER),
            });
        }
        let s = Stream {
            process,
            pid,
            stream,
            tid,
            thread,
            model,
            pts_bytes,
            path,
            events,
            arg_words,
            chunks,
            damaged,
            intervals: Default::default(),
        };
        parts.push((
            i,
            StreamPart {
                problems,
                stream: Some((s, local)),
                clock: None,
            },
        ));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_are_never_split_and_bytes_are_shared() {
        let d = std::env::temp_dir().join(format!("gaspard-share-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let mut paths = Vec::new();
        for (p, n, len) in [
            ("h-10", 0, 1000),
            ("h-10", 1, 1000),
            ("h-11", 0, 1500),
            ("h-12", 0, 400),
            ("h-13", 0, 300),
        ] {
            let f = d.join(format!("{p}-{n}.gst"));
            std::fs::write(&f, vec![0u8; len]).unwrap();
            paths.push(f);
        }
        let owner = share(&paths, 2);
        assert_eq!(owner[0], owner[1], "one process, one rank");
        // 2000 (h-10) to one rank, then 1500 + 400 + 300 (h-11, h-12, h-13) to the other ... balanced.
        let load = |r: usize| -> u64 {
            paths
                .iter()
                .zip(&owner)
                .filter(|(_, &o)| o == r)
                .map(|(p, _)| std::fs::metadata(p).unwrap().len())
                .sum()
        };
        assert_eq!(load(0) + load(1), 4200);
        assert!(load(0).abs_diff(load(1)) <= 400, "{} {}", load(0), load(1));
        assert!(share(&paths, 1).iter().all(|&o| o == 0));
        assert_eq!(process_of(Path::new("/x/vm-12-3.gst")), "vm-12");
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn parts(bytes: &[u8]) -> Result<Vec<(usize, StreamPart)>, String> {
        let mut r = In(Reader::new(bytes), bytes.len());
        let p = decode(&mut r)?;
        decode_profiles(&mut r)?;
        match r.remaining() {
            0 => Ok(p),
            n => Err(format!("{n} left")),
        }
    }

    #[test]
    fn damaged_messages_are_refused() {
        assert!(parts(&[]).is_err());
        assert!(parts(&[5]).is_err());
        let mut out = Vec::new();
        encode(&[], &[], &mut out);
        encode_profiles(&[], &mut out);
        assert!(parts(&out).unwrap().is_empty());
        out.push(7);
        assert!(parts(&out).is_err());
    }
}
