//! Reading and analysing a trace with several processes (MPI ranks)
//! sharing its stream files, or one process at a time
//! ([`report_by_process`]).
//!
//! Every rank lists the trace directory and reads the manifests (small),
//! then reads, checks and decodes the stream files of its share of the
//! recorded processes (all the streams of a process go to one rank: its
//! clock is fitted to all of them, and what the analyses ask of a process,
//! its MPI rank, its shared objects, its locks, is found from its own
//! streams; processes are shared so that every rank gets about as many
//! bytes). The ranks then meet four times, each time sending rank 0 what
//! it needs of their streams, never the events themselves:
//!
//! 1. each stream file's head ([`trace::Head`]: what was wrong with it, who
//!    it is, its callsites, user events and texts); rank 0 places them in
//!    the trace and numbers callsites, user events and texts as one process
//!    reading every file would, and sends each rank its numbers and the
//!    trace's tables;
//! 2. each rank renumbers its streams, adds their coarray events and
//!    corrects their clocks: the corrections and each stream's first event
//!    go to rank 0, which finds the trace's start and sends it;
//! 3. each rank makes its times relative to the start and summarizes every
//!    stream ([`crate::summary::StreamSummary`]: its profile and its part of
//!    every analysis), which goes to rank 0 with what the problems of a
//!    stream need;
//! 4. rank 0 merges the summaries into the report.
//!
//! Reading one process at a time (`low_memory`), a rank does steps 2 and 3
//! with the process's own numbering and times as it reads each process,
//! before step 1, and after step 2 renumbers and shifts each summary to the
//! trace's numbers and start ([`Provisional`]).
//!
//! The report is the same as one process computes from the whole trace
//! (the same code makes the parts and merges them, in the same order). The
//! transport is given by the caller ([`Transport`]): the `gaspard` command
//! implements it over MPI.

use std::path::{Path, PathBuf};

use gaspard_format::chunk::ChunkHeader;
use gaspard_format::codec::UserDef;
use serde::{Deserialize, Serialize};

use rayon::prelude::*;
use rustc_hash::FxHashMap as HashMap;

use crate::clocksync::Correction;
use crate::profile::Report;
use crate::summary::{Context, StreamSummary};
use crate::trace::{
    self, Callsite, Head, Numbering, Stream, StreamHead, StreamIds, Trace, TraceError,
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
pub(crate) fn process_of(path: &Path) -> String {
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

/// The summaries of `streams`, the streams of some processes of `t` (all
/// the streams of each), given the trace's numbers and times, each with
/// where it was read from (`files[i]`: the index of stream `i`'s file) and
/// what its problems need (`late[i]`: its events put back from too far
/// after the trace's start).
fn summarize(
    t: &mut Trace,
    streams: Vec<Stream>,
    files: &[usize],
    late: &[u64],
) -> Vec<(Placed, StreamSummary)> {
    let placed: Vec<Placed> = streams
        .iter()
        .zip(files)
        .zip(late)
        .map(|((s, &file), &late)| Placed {
            file,
            process: s.process.clone(),
            stream: s.stream,
            damaged: s.damaged,
            last: s.events.last().map(|e| (e.t_ns, e.kind, e.phase)),
            late,
        })
        .collect();
    // A process without a manifest is one of the trace's all the same.
    for s in &streams {
        if !t.processes.iter().any(|p| p.name == s.process) {
            t.processes.push(trace::Process {
                name: s.process.clone(),
                manifest: None,
            });
        }
    }
    t.streams = streams;
    t.objects = crate::objects::Objects::build(&t.streams, &t.callsites);
    let cx = Context::of(t);
    let summaries: Vec<StreamSummary> = t
        .streams
        .par_iter()
        .map(|s| StreamSummary::of(t, &cx, s))
        .collect();
    t.streams = Vec::new();
    t.objects = Default::default();
    placed.into_iter().zip(summaries).collect()
}

/// A process's streams read once and summarized on their own, before the
/// trace's numbering and start are known: the summaries hold the process's
/// own numbers of callsites, user events and texts, and its times relative
/// to its own first event rather than to the trace's start
/// ([`Provisional::rebase`] makes them the whole trace's).
struct Provisional {
    /// The process's clock corrections and its streams' first events.
    clocks: Clocks,
    /// Its streams' summaries, with where they were read from (none when
    /// its events span more than [`trace::MAX_T_NS`]: they cannot all lie
    /// within that of the trace's start).
    summaries: Vec<(Placed, StreamSummary)>,
    /// Per stream read (in file order), the process's number of each of
    /// its file's callsites, user events and texts.
    ids: Vec<StreamIds>,
    /// How many callsites, user events and texts the process numbers.
    lens: (usize, usize, usize),
    /// Its earliest and latest event times (corrected, absolute ns).
    span: Option<(u64, u64)>,
    /// When each stream was summarized on its own ([`summarize_as_read`]):
    /// how much later than the process's earliest event each stream's first
    /// event is (the stream's times are from it, its numbers its file's,
    /// the callsites found from return addresses numbered from
    /// [`trace::FOUND_SITES`]), and how many callsites its file has (`ids`
    /// and `lens` are then not used).
    own: Option<Vec<(u64, usize)>>,
}

/// Reads nothing: renumbers, corrects and summarizes the streams of one
/// process (`bodies`, read from `files`, whose heads are `heads`), in the
/// process's own numbering and times. `tables`: the trace's directory and
/// processes.
fn summarize_alone(
    dir: &Path,
    tables: &Trace,
    files: &[usize],
    heads: &[Head],
    bodies: Vec<trace::Body>,
) -> Provisional {
    let read_files = read_of(files, heads);
    let mut tp = tables_of(tables);
    let read: Vec<&StreamHead> = heads.iter().filter_map(|h| h.stream.as_ref()).collect();
    let numbering = trace::number(&mut tp, &read);
    let lens = (tp.callsites.len(), tp.user_events.len(), tp.texts.len());
    // Without clock measurements (and with clocks that keep the order of
    // times), the span of the process's events is known from what the
    // reading saw, and their times are made ns from the earliest as they are
    // converted: no pass of its own for the span, the clock measurements
    // or the shift.
    let read_span = trace::span_read(&bodies)
        .filter(|span| span.is_none_or(|(lo, hi)| hi - lo <= trace::MAX_T_NS));
    if let Some(span) = read_span {
        let base = span.map_or(0, |(lo, _)| lo);
        let streams = trace::finish_bodies_from(dir, bodies, &numbering, true, base, true);
        let firsts = streams
            .iter()
            .filter_map(|s| Some((s.process.clone(), s.events.first()?.t_ns + base)))
            .collect();
        let late = vec![0; streams.len()];
        let summaries = summarize(&mut tp, streams, &read_files, &late);
        return Provisional {
            clocks: (Vec::new(), firsts),
            summaries,
            ids: numbering.ids,
            lens,
            span,
            own: None,
        };
    }
    let mut streams = trace::finish_bodies(dir, bodies, &numbering, true);
    let corrections = crate::clocksync::apply(&mut streams);
    let firsts = streams
        .iter()
        .filter_map(|s| Some((s.process.clone(), s.events.first()?.t_ns)))
        .collect();
    let span = streams
        .iter()
        .flat_map(|s| s.events.iter().map(|e| e.t_ns))
        .fold(None, |span: Option<(u64, u64)>, t| match span {
            Some((lo, hi)) => Some((lo.min(t), hi.max(t))),
            None => Some((t, t)),
        });
    // Summarized with times from the process's earliest event: as the
    // trace's start would make them, but for where they start.
    let summaries = match span {
        Some((lo, hi)) if hi - lo > trace::MAX_T_NS => Vec::new(),
        _ => {
            let lo = span.map_or(0, |(lo, _)| lo);
            let late = trace::shift(&mut streams, i128::from(lo));
            summarize(&mut tp, streams, &read_files, &late)
        }
    };
    Provisional {
        clocks: (corrections, firsts),
        summaries,
        ids: numbering.ids,
        lens,
        span,
        own: None,
    }
}

/// The stream files of one process, as the report reads them one process at
/// a time ([`summarize_as_read`], [`summarize_windowed`]).
#[derive(Clone, Copy)]
struct ProcessFiles<'a> {
    /// The trace's directory.
    dir: &'a Path,
    /// The trace's directory and processes ([`tables_of`]).
    tables: &'a Trace,
    /// The trace's numbers of the process's files, and their paths.
    files: &'a [usize],
    paths: &'a [PathBuf],
    /// The trace's clock references.
    refs: &'a trace::ClockRefs,
    /// What the bytes of the files read are added to.
    progress: Option<&'a indicatif::ProgressBar>,
}

/// [`summarize_alone`] of a process whose streams are read in windows of
/// `every` events rather than whole ([`crate::window`]), for the memory of
/// a few windows rather than all its events: a light first reading of its
/// files (`paths`, the trace's files `files`; `refs`: the trace's clock
/// references) gives their heads, its clock, numbering and clock
/// correction, the span of its events and what the analyses need before a
/// window (its rank, its shared objects); then each stream is read again
/// and summarized window by window. `None` when the process cannot be read
/// so (it is then read whole): it runs Coarray Fortran (whose coarray
/// operations are recognised in a whole stream's MPI calls), the times of a
/// stream go backwards, a stream names another process (damage), or its
/// events span more than [`trace::MAX_T_NS`].
fn summarize_windowed(p: ProcessFiles<'_>, every: usize) -> Option<(Vec<Head>, Provisional)> {
    let ProcessFiles {
        dir,
        tables,
        files,
        paths,
        refs,
        progress,
    } = p;
    let parts = trace::read_streams_shown(paths, refs, progress, trace::Reading::Ahead);
    let (heads, bodies) = trace::split_parts(dir, parts);
    // (Streams that name another process than their file, from damage,
    // are read whole with it: each process has its own clock correction.)
    let process = bodies.first().map(|b| b.0.process.as_str());
    let windowable = bodies.iter().all(|(s, clock, seen)| {
        seen.windowable()
            && clock.is_none_or(|c| c.keeps_order())
            && Some(s.process.as_str()) == process
            && !crate::caf::is_caf(dir, s)
    });
    if !windowable {
        return None;
    }
    // The clock correction, from the measurements the light reading kept
    // (their times in ns as the whole reading gives them), and the span of
    // the corrected times: the corrected times of the earliest and latest
    // events (a correction keeps the order of times).
    let mut light: Vec<Stream> = bodies.iter().map(trace::body_in_ns).collect();
    let corrections = crate::clocksync::apply(&mut light);
    let correction = corrections.first().filter(|_| crate::clocksync::enabled());
    if correction.is_some_and(|c| !c.keeps_order()) {
        return None;
    }
    let ends = trace::span_uncorrected(&bodies)?;
    let span = match correction {
        None => ends,
        Some(c) => ends.map(|(lo, hi)| (c.correct(lo), c.correct(hi))),
    };
    if span.is_some_and(|(lo, hi)| hi - lo > trace::MAX_T_NS) {
        return None;
    }
    let base = span.map_or(0, |(lo, _)| lo);
    let read_files = read_of(files, &heads);
    let mut tp = tables_of(tables);
    let read: Vec<&StreamHead> = heads.iter().filter_map(|h| h.stream.as_ref()).collect();
    let numbering = trace::number(&mut tp, &read);
    let lens = (tp.callsites.len(), tp.user_events.len(), tp.texts.len());
    let renumber = |i: usize| {
        trace::Renumber::new(
            read[i],
            &bodies[i],
            (base, correction),
            &numbering.ids[i],
            numbering.nowhere,
        )
    };
    // What the analyses need before a window, from what the light reading
    // kept, made as the whole reading makes it: the rank of each stream's
    // process (from its start-up), its shared objects and MPI rank, and
    // its binaries.
    tp.streams = bodies
        .iter()
        .enumerate()
        .map(|(i, (s, _, _))| {
            let mut s = s.clone();
            renumber(i).apply(&mut s.events, &s.arg_words);
            s.events_changed();
            s
        })
        .collect();
    for s in &tp.streams {
        if !tp.processes.iter().any(|p| p.name == s.process) {
            tp.processes.push(trace::Process {
                name: s.process.clone(),
                manifest: None,
            });
        }
    }
    tp.objects = crate::objects::Objects::build(&tp.streams, &tp.callsites);
    let cx = Context::of(&tp);
    let facts: Vec<crate::summary::Facts> = tp
        .streams
        .iter()
        .map(|s| crate::summary::Facts {
            rank: crate::matrix::rank(s),
            ..Default::default()
        })
        .collect();
    if let Some(pb) = progress {
        // The files are read a second time.
        pb.inc_length(bytes_of(paths));
    }
    let tp = &tp;
    let streams: Vec<_> = (0..read.len())
        .into_par_iter()
        .map(|i| {
            let head = read[i];
            let (data, like) = trace::open_stream(&head.path)?;
            if let Some(pb) = progress {
                pb.inc(data.len() as u64);
            }
            let sum = crate::summary::Summarizer::new(&cx, &tp.objects, &facts[i], &like);
            let placed = Placed {
                file: read_files[i],
                process: like.process.clone(),
                stream: like.stream,
                damaged: head.damaged,
                last: None,
                late: 0,
            };
            let mut w = crate::window::Summarize::new(tp, sum, renumber(i), like.like(), every);
            trace::read_windows(&head.path, &data, every, &mut w).0?;
            let first = w.first_t.map(|t| (like.process.clone(), t + base));
            let last = w.last;
            let summary = w
                .finish()
                .unwrap_or_else(|| StreamSummary::of(tp, &cx, &like));
            Some((Placed { last, ..placed }, summary, first))
        })
        .collect::<Option<_>>()?;
    let mut firsts = Vec::new();
    let mut summaries = Vec::new();
    for (placed, summary, first) in streams {
        firsts.extend(first);
        summaries.push((placed, summary));
    }
    Some((
        heads,
        Provisional {
            clocks: (corrections, firsts),
            summaries,
            ids: numbering.ids,
            lens,
            span,
            own: None,
        },
    ))
}

/// [`summarize_alone`] of a process whose streams are each read once and
/// summarized as they are read, in windows of `every` events, on their own:
/// in their files' numbering and with times from their first events
/// (each made the trace's by [`Provisional::rebase`]), so that no first
/// reading is needed and a process takes the memory of a few windows.
/// `None` when the process cannot be read so (it is then read as before):
/// a stream holds what the analyses of the process's streams need
/// beforehand ([`trace::Local::alone`]: clock measurements, a start-up,
/// shared objects, coarrays), times that go backwards or span more than
/// [`trace::MAX_T_NS`], a file damaged or that cannot be read, or streams
/// of another process. Events with a return address and no source
/// position get the source line of that address as they are read
/// ([`trace::Sources`]), when the trace has the process's maps.
fn summarize_as_read(p: ProcessFiles<'_>, every: usize) -> Option<(Vec<Head>, Provisional)> {
    let ProcessFiles {
        dir,
        tables,
        files,
        paths,
        refs,
        progress,
    } = p;
    let opened: Vec<(trace::FileBytes, Stream)> = paths
        .iter()
        .map(|p| trace::open_stream(p))
        .collect::<Option<_>>()?;
    let process = opened.first()?.1.process.clone();
    if opened.iter().any(|(_, s)| s.process != process) {
        return None;
    }
    // The process's clock, fitted to its chunks' references as the reading
    // finds them (checked below): from the chunk headers alone.
    let headers: Vec<Vec<ChunkHeader>> = opened
        .iter()
        .map(|(data, _)| gaspard_format::stream::chunk_headers(data))
        .collect();
    let p = process.as_str();
    let named = headers
        .iter()
        .flat_map(|hs| std::iter::once((p, None)).chain(hs.iter().map(move |h| (p, Some(h)))));
    let clock = trace::fit_clocks(refs, named).get(&process).copied();
    if clock.is_some_and(|c| !c.keeps_order()) {
        return None;
    }
    // What the analyses need before a window: none of the start-ups,
    // clock measurements and shared objects that would make it more.
    let mut tp = tables_of(tables);
    tp.streams = opened.iter().map(|(_, s)| s.like()).collect();
    if !tp.processes.iter().any(|p| p.name == process) {
        tp.processes.push(trace::Process {
            name: process.clone(),
            manifest: None,
        });
    }
    let cx = Context::of(&tp);
    let objects = crate::objects::Objects::default();
    let facts = crate::summary::Facts::default();
    let counted = std::sync::atomic::AtomicU64::new(0);
    // The source lines of return addresses, and the names of functions
    // known by their address, from the process's binaries (as the whole
    // reading finds them: [`trace::split_parts`], [`trace::number`]).
    let maps = dir.join(format!("{process}.maps")).is_file();
    let sym = std::sync::Mutex::new(None);
    let read: Option<Vec<_>> = opened
        .into_par_iter()
        .zip(paths.par_iter().zip(headers.par_iter()))
        .map(|((data, like), (path, headers))| {
            if let Some(pb) = progress {
                pb.inc(data.len() as u64);
                counted.fetch_add(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
            }
            let sum = crate::summary::Summarizer::new(&cx, &objects, &facts, &like);
            let sources = maps.then(|| trace::Sources::new(&sym, dir, &like));
            let mut w = crate::window::Summarize::alone(
                sum,
                (clock, sources, (&sym, dir)),
                like.like(),
                every,
            );
            let (read, problems) = trace::read_windows(path, &data, every, &mut w);
            let (s, read_headers, local) = read?;
            // (Anything wrong with the file: it is read as before, with
            // what is wrong said as that reading says it.)
            if w.stopped()
                || !problems.is_empty()
                || s.damaged
                || read_headers != *headers
                || local.sites.len() >= trace::FOUND_SITES as usize
            {
                return None;
            }
            let found = w
                .take_sources()
                .map(|f| f.finish(local.sites.len() as u32))
                .unwrap_or_default();
            let (base, events, last) = (w.base(), w.events(), w.last);
            let summary = w
                .finish()
                .unwrap_or_else(|| StreamSummary::of(&tp, &cx, &like));
            Some((s, local, base, events, last, summary, found))
        })
        .collect();
    let Some(read) = read else {
        if let Some(pb) = progress {
            // Read again.
            pb.inc_length(counted.into_inner());
        }
        return None;
    };
    // The span of the process's events: from each stream's first event to
    // its last (their times never go backwards).
    let span = read
        .iter()
        .filter_map(|r| Some((r.2?, r.2? + r.4?.0)))
        .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)));
    if span.is_some_and(|(lo, hi)| hi - lo > trace::MAX_T_NS) {
        if let Some(pb) = progress {
            pb.inc_length(counted.into_inner());
        }
        return None;
    }
    let lo = span.map_or(0, |s| s.0);
    let mut parts = Vec::with_capacity(read.len());
    let mut summaries = Vec::with_capacity(read.len());
    let mut firsts = Vec::new();
    let mut own = Vec::with_capacity(read.len());
    let mut founds = Vec::with_capacity(read.len());
    for ((s, local, base, events, last, summary, found), &file) in read.into_iter().zip(files) {
        summaries.push((
            Placed {
                file,
                process: s.process.clone(),
                stream: s.stream,
                damaged: false,
                last,
                late: 0,
            },
            summary,
        ));
        firsts.extend(base.map(|b| (s.process.clone(), b)));
        own.push((base.map_or(0, |b| b - lo), local.sites.len()));
        founds.push(found);
        parts.push(trace::StreamPart {
            problems: Vec::new(),
            stream: Some((s, local)),
            clock,
            counted: Some(events),
        });
    }
    let (mut heads, _) = trace::split_parts(dir, parts);
    for (h, (found, addresses)) in heads.iter_mut().zip(founds) {
        if let Some(h) = &mut h.stream {
            (h.found, h.addresses) = (found, addresses);
        }
    }
    Some((
        heads,
        Provisional {
            clocks: (Vec::new(), firsts),
            summaries,
            ids: Vec::new(),
            lens: (0, 0, 0),
            span,
            own: Some(own),
        },
    ))
}

/// How many events make a window when a process's streams are summarized
/// as they are read ([`summarize_as_read`]), unless `GASPARD_WINDOW_EVENTS`
/// says: a window's events (256 KiB) and what the analyses keep of them
/// stay in the processor's caches from one analysis to the next
/// (BENCHMARKS.md: 4,096 to 16,384 events did best).
const AS_READ_EVENTS: usize = 1 << 13;

/// How many events make a window when a process is read in windows
/// ([`summarize_windowed`]), unless `GASPARD_WINDOW_EVENTS` says: as many
/// as [`AS_READ_EVENTS`].
const WINDOW_EVENTS: usize = AS_READ_EVENTS;

/// A process whose stream files hold at least this many bytes is read in
/// windows (about 5 bytes an event on disk, some 75 in memory read whole),
/// unless `GASPARD_WINDOW_EVENTS` says (every process then is).
const WINDOWED_BYTES: u64 = 64 << 20;

/// How many events make a window when the process whose stream files are
/// `paths` is read in windows; `None` when it is read whole.
fn windows_of(paths: &[PathBuf]) -> Option<usize> {
    if let Some(every) = crate::window::events_per_window() {
        return Some(every);
    }
    (bytes_of(paths) >= WINDOWED_BYTES).then_some(WINDOW_EVENTS)
}

/// The bytes of the files `paths`.
fn bytes_of(paths: &[PathBuf]) -> u64 {
    paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

impl Provisional {
    /// The summaries as the whole trace makes them, given the trace's start
    /// `base` and the trace's numbers of the process's files (`global`: per
    /// stream read, in file order; `nowhere`: the trace's callsite for
    /// events without one); `None` when some event of the process lies
    /// before the start or too far after it (its time is then clamped, not
    /// shifted, and the process must be read again).
    fn rebase(
        self,
        base: i128,
        global: &[StreamIds],
        nowhere: u32,
    ) -> Option<Vec<(Placed, StreamSummary)>> {
        // How much later than the trace's start the process's first event
        // is: its summaries' times are from that event.
        let mut after = 0;
        if let Some((lo, hi)) = self.span {
            let (lo, hi) = (i128::from(lo), i128::from(hi));
            if lo < base || hi - base > i128::from(trace::MAX_T_NS) {
                return None;
            }
            after = (lo - base) as u64;
        }
        if let Some(own) = &self.own {
            // Each stream in its own numbers and times.
            let mut out = self.summaries;
            for (((p, s), theirs), &(later, known)) in out.iter_mut().zip(global).zip(own) {
                let known = known.min(theirs.0.len());
                let r = crate::summary::Rebase {
                    after: after + later,
                    sites: theirs.0[..known].to_vec(),
                    users: theirs.1.clone(),
                    texts: theirs.2.clone(),
                    nowhere,
                    found: theirs.0[known..].to_vec(),
                };
                if let Some(last) = &mut p.last {
                    last.0 = r.t(last.0);
                }
                s.rebase(&r);
            }
            return Some(out);
        }
        let (sites, users, texts) = self.lens;
        // A callsite no file of the process gives (its own `nowhere`) is
        // the trace's `nowhere`.
        let mut r = crate::summary::Rebase {
            after,
            sites: vec![nowhere; sites],
            users: vec![trace::NO_USER; users],
            texts: vec![trace::NO_TEXT; texts],
            nowhere,
            found: Vec::new(),
        };
        for (mine, theirs) in self.ids.iter().zip(global) {
            let pairs = [
                (&mine.0, &theirs.0, &mut r.sites),
                (&mine.1, &theirs.1, &mut r.users),
                (&mine.2, &theirs.2, &mut r.texts),
            ];
            for (mine, theirs, to) in pairs {
                for (&m, &g) in mine.iter().zip(theirs) {
                    if let Some(slot) = to.get_mut(m as usize) {
                        *slot = g;
                    }
                }
            }
        }
        let mut out = self.summaries;
        for (p, s) in &mut out {
            if let Some(last) = &mut p.last {
                last.0 = r.t(last.0);
            }
            s.rebase(&r);
        }
        Some(out)
    }
}

/// The streams of a first, light reading with their times in ns, their
/// processes' clock corrections, and each stream's first event (process, time).
fn light_clocks(bodies: Vec<trace::Body>) -> (Vec<Stream>, Clocks) {
    let mut streams = trace::in_ns(bodies);
    let corrections = crate::clocksync::apply(&mut streams);
    let firsts = streams
        .iter()
        .filter_map(|s| Some((s.process.clone(), s.events.first()?.t_ns)))
        .collect();
    (streams, (corrections, firsts))
}

/// Of `files`, whose heads are `heads`, those whose stream could be read.
fn read_of(files: &[usize], heads: &[Head]) -> Vec<usize> {
    files
        .iter()
        .zip(heads)
        .filter(|(_, h)| h.stream.is_some())
        .map(|(&i, _)| i)
        .collect()
}

/// What summarizing streams needs of `t` (its directory, processes and
/// tables), without its streams.
fn tables_of(t: &Trace) -> Trace {
    Trace {
        dir: t.dir.clone(),
        processes: t.processes.clone(),
        callsites: t.callsites.clone(),
        user_events: t.user_events.clone(),
        texts: t.texts.clone(),
        ..Default::default()
    }
}

/// A user event as sent.
#[derive(Clone, Serialize, Deserialize)]
struct User {
    id: u64,
    name: String,
    desc: Option<String>,
    unreadable: Option<String>,
}

impl From<&UserDef> for User {
    fn from(u: &UserDef) -> User {
        User {
            id: u.id,
            name: u.name.clone(),
            desc: u.desc.clone(),
            unreadable: u.unreadable.clone(),
        }
    }
}

impl From<User> for UserDef {
    fn from(u: User) -> UserDef {
        UserDef {
            id: u.id,
            name: u.name,
            desc: u.desc,
            unreadable: u.unreadable,
        }
    }
}

/// A stream file's head as sent ([`trace::Head`]).
#[derive(Serialize, Deserialize)]
struct SentHead {
    problems: Vec<String>,
    stream: Option<SentStream>,
}

#[derive(Serialize, Deserialize)]
struct SentStream {
    process: String,
    path: String,
    damaged: bool,
    events: u64,
    sites: Vec<Callsite>,
    found: Vec<Callsite>,
    users: Vec<User>,
    texts: Vec<String>,
}

impl From<&Head> for SentHead {
    fn from(h: &Head) -> SentHead {
        SentHead {
            problems: h.problems.clone(),
            stream: h.stream.as_ref().map(|s| SentStream {
                process: s.process.clone(),
                path: s.path.to_string_lossy().into_owned(),
                damaged: s.damaged,
                events: s.events,
                sites: s.sites.clone(),
                found: s.found.clone(),
                users: s.users.iter().map(User::from).collect(),
                texts: s.texts.clone(),
            }),
        }
    }
}

impl From<SentHead> for Head {
    fn from(h: SentHead) -> Head {
        Head {
            problems: h.problems,
            stream: h.stream.map(|s| StreamHead {
                process: s.process,
                path: PathBuf::from(s.path),
                damaged: s.damaged,
                events: s.events,
                sites: s.sites,
                found: s.found,
                users: s.users.into_iter().map(UserDef::from).collect(),
                texts: s.texts,
                // (Needed only where the stream is read, not where it is
                // placed.)
                addresses: Default::default(),
            }),
        }
    }
}

/// What rank 0 sends each rank once the heads are placed: the trace's
/// numbers of the rank's streams (in its order) and the trace's tables.
#[derive(Serialize, Deserialize)]
struct Numbers {
    ids: Vec<StreamIds>,
    nowhere: u32,
    callsites: Vec<Callsite>,
    users: Vec<User>,
    texts: Vec<String>,
}

/// A process's (or rank's) clock corrections, and the first event of each
/// of its streams (its process, its time).
type Clocks = (Vec<Correction>, Vec<(String, u64)>);

/// What placing a stream among the others needs once summarized.
#[derive(Debug, Serialize, Deserialize)]
struct Placed {
    /// Its stream file's index.
    file: usize,
    process: String,
    stream: u32,
    damaged: bool,
    /// Its last event's time, kind and phase.
    last: Option<(u64, u16, u8)>,
    /// Its events stamped too far after the trace's start.
    late: u64,
}

fn encode<T: Serialize>(what: &T) -> Result<Vec<u8>, String> {
    postcard::to_stdvec(what).map_err(|e| format!("encoding: {e}"))
}

fn decode<T: for<'a> Deserialize<'a>>(bytes: &[u8], what: &str, from: usize) -> Result<T, String> {
    postcard::from_bytes(bytes).map_err(|e| format!("the {what} rank {from} sent: {e}"))
}

/// Sends `what` to rank 0 (on rank 0: nothing to send, `what` is kept).
fn to_root<T: Serialize>(tr: &dyn Transport, what: &T) -> Result<(), String> {
    tr.send_to_root(&encode(what)?)
}

/// On rank 0: what every other rank sent, in rank order.
fn from_ranks<T: for<'a> Deserialize<'a>>(
    tr: &dyn Transport,
    what: &str,
) -> Result<Vec<T>, String> {
    (1..tr.size())
        .map(|from| decode(&tr.recv_from(from)?, what, from))
        .collect()
}

/// The report on the trace in `dir`, computed with the ranks of `tr`:
/// `Some(report)` on rank 0, equal to [`crate::profile::report_with`] on
/// [`trace::read`]'s trace; `None` on the other ranks once their share is
/// sent.
///
/// With `low_memory`, each rank reads its stream files one process at a
/// time ([`report_by_process`]), rather than holding all its events.
pub fn report(
    dir: &Path,
    block_size: u64,
    tr: &dyn Transport,
    low_memory: bool,
) -> Result<Option<Report>, TraceError> {
    let parts = |e: String| TraceError::Parts(e);
    let listing = trace::list(dir)?;
    let (owner, mine, my_paths) = my_share(&listing.streams, tr);
    // This rank's files by process (in file order), read together or one
    // process at a time.
    let groups: Vec<Vec<usize>> = if low_memory {
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut group_of: HashMap<String, usize> = HashMap::default();
        for &i in &mine {
            let g = *group_of
                .entry(process_of(&listing.streams[i]))
                .or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                });
            groups[g].push(i);
        }
        groups
    } else {
        vec![mine.clone()]
    };
    // One bar for the reading of this rank's files.
    let progress = trace::progress_bar(&my_paths, 1);
    let read = |files: &[usize], reading: trace::Reading| {
        let paths: Vec<PathBuf> = files.iter().map(|&i| listing.streams[i].clone()).collect();
        let parts = trace::read_streams_shown(&paths, &listing.refs, progress.as_ref(), reading);
        trace::split_parts(dir, parts)
    };
    // The reading: the heads of this rank's files (in `mine`'s order), and,
    // one process at a time, each process's streams summarized in its own
    // numbering and times (its events then dropped); else the streams read.
    let mut heads_of: Vec<Option<Head>> = (0..listing.streams.len()).map(|_| None).collect();
    let mut early: Vec<Provisional> = Vec::new();
    let mut bodies = Vec::new();
    if low_memory {
        let processes = tables_of(&listing.trace);
        let first: Vec<_> = groups
            .par_iter()
            .map(|files| {
                let paths: Vec<PathBuf> =
                    files.iter().map(|&i| listing.streams[i].clone()).collect();
                let process = ProcessFiles {
                    dir,
                    tables: &processes,
                    files,
                    paths: &paths,
                    refs: &listing.refs,
                    progress: progress.as_ref(),
                };
                let every = crate::window::events_per_window().unwrap_or(AS_READ_EVENTS);
                if let Some(done) = summarize_as_read(process, every) {
                    return done;
                }
                if let Some(every) = windows_of(&paths) {
                    if let Some(done) = summarize_windowed(process, every) {
                        return done;
                    }
                    // Read again, whole.
                    if let Some(pb) = &progress {
                        pb.inc_length(bytes_of(&paths));
                    }
                }
                let (heads, bodies) = read(files, trace::Reading::Whole);
                let alone = summarize_alone(dir, &processes, files, &heads, bodies);
                (heads, alone)
            })
            .collect();
        for (files, (heads, e)) in groups.iter().zip(first) {
            for (&i, h) in files.iter().zip(heads) {
                heads_of[i] = Some(h);
            }
            early.push(e);
        }
    } else {
        let (heads, b) = read(&mine, trace::Reading::Whole);
        for (&i, h) in mine.iter().zip(heads) {
            heads_of[i] = Some(h);
        }
        bodies = b;
    }
    let heads: Vec<Head> = mine
        .iter()
        .map(|&i| {
            heads_of[i].take().unwrap_or(Head {
                problems: Vec::new(),
                stream: None,
            })
        })
        .collect();
    let read_files = read_of(&mine, &heads);
    let root = tr.rank() == 0;

    // 1. The heads to rank 0, which numbers callsites, user events and
    // texts and sends each rank its numbers.
    let mut t = listing.trace;
    let my_numbers: Numbers = if root {
        let mut all: Vec<Option<Head>> = (0..listing.streams.len()).map(|_| None).collect();
        for (&i, h) in mine.iter().zip(heads) {
            all[i] = Some(h);
        }
        for (r, sent) in from_ranks::<Vec<(usize, SentHead)>>(tr, "stream heads")
            .map_err(parts)?
            .into_iter()
            .enumerate()
        {
            for (i, h) in sent {
                match all.get_mut(i) {
                    Some(slot) if owner[i] == r + 1 && slot.is_none() => *slot = Some(h.into()),
                    _ => {
                        return Err(parts(format!(
                            "rank {} sent the head of stream file {i}, not one of its share",
                            r + 1
                        )))
                    }
                }
            }
        }
        let all: Vec<Head> = all
            .into_iter()
            .enumerate()
            .map(|(i, h)| h.ok_or_else(|| format!("no rank read {}", listing.streams[i].display())))
            .collect::<Result<_, _>>()
            .map_err(parts)?;
        let numbering = trace::place(&mut t, &listing.streams, &listing.profiles, &all);
        // Each rank's numbers: its streams read, in file order.
        let mut per_rank: Vec<Vec<StreamIds>> = vec![Vec::new(); tr.size()];
        let read_files = (0..all.len()).filter(|&i| all[i].stream.is_some());
        for (i, ids) in read_files.zip(numbering.ids) {
            per_rank[owner[i]].push(ids);
        }
        let users: Vec<User> = t.user_events.iter().map(User::from).collect();
        let mut per_rank = per_rank.into_iter();
        let mine = per_rank.next().unwrap_or_default();
        for (r, ids) in per_rank.enumerate() {
            let n = Numbers {
                ids,
                nowhere: numbering.nowhere,
                callsites: t.callsites.clone(),
                users: users.clone(),
                texts: t.texts.clone(),
            };
            tr.send_to(r + 1, &encode(&n).map_err(parts)?)
                .map_err(parts)?;
        }
        Numbers {
            ids: mine,
            nowhere: numbering.nowhere,
            callsites: Vec::new(),
            users: Vec::new(),
            texts: Vec::new(),
        }
    } else {
        let sent: Vec<(usize, SentHead)> = mine
            .iter()
            .copied()
            .zip(heads.iter().map(SentHead::from))
            .collect();
        to_root(tr, &sent).map_err(parts)?;
        decode(&tr.recv_from(0).map_err(parts)?, "numbers", 0).map_err(parts)?
    };
    let numbering = Numbering {
        ids: my_numbers.ids,
        nowhere: my_numbers.nowhere,
    };
    if !root {
        t.callsites = my_numbers.callsites;
        t.user_events = my_numbers.users.into_iter().map(UserDef::from).collect();
        t.texts = my_numbers.texts;
    }
    let mut streams = Vec::new();
    let (corrections, firsts) = if low_memory {
        let (mut c, mut f) = (Vec::new(), Vec::new());
        for p in &mut early {
            c.append(&mut p.clocks.0);
            f.append(&mut p.clocks.1);
        }
        (c, f)
    } else {
        streams = trace::finish_bodies(dir, bodies, &numbering, true);
        let corrections = crate::clocksync::apply(&mut streams);
        let firsts: Vec<(String, u64)> = streams
            .iter()
            .filter_map(|s| Some((s.process.clone(), s.events.first()?.t_ns)))
            .collect();
        (corrections, firsts)
    };

    // 2. Clock corrections and first events to rank 0, which finds the
    // trace's start.
    let base: i128 = if root {
        let mut all_corrections = corrections;
        let mut all_firsts = firsts;
        for (c, f) in from_ranks::<Clocks>(tr, "clock corrections").map_err(parts)? {
            all_corrections.extend(c);
            all_firsts.extend(f);
        }
        all_corrections.sort_by(|a, b| a.process.cmp(&b.process));
        t.clock_sync = all_corrections;
        let f: Vec<(&str, u64)> = all_firsts.iter().map(|(p, t)| (p.as_str(), *t)).collect();
        let base = trace::trace_start(&t, &f);
        let bytes = encode(&base).map_err(parts)?;
        for r in 1..tr.size() {
            tr.send_to(r, &bytes).map_err(parts)?;
        }
        base
    } else {
        to_root(tr, &(corrections, firsts)).map_err(parts)?;
        decode(&tr.recv_from(0).map_err(parts)?, "trace start", 0).map_err(parts)?
    };

    // 3. Every stream summarized, where it was read: one process at a time,
    // its summaries made the whole trace's, or, for a process with events
    // too early or too late for that, read again; or as read.
    let mine: Vec<(Placed, StreamSummary)> = if low_memory {
        // Each stream file's numbers, when it was read.
        let mut ids: HashMap<usize, StreamIds> =
            read_files.iter().copied().zip(numbering.ids).collect();
        let tables = tables_of(&t);
        let groups: Vec<(Vec<usize>, Vec<StreamIds>, Provisional)> = groups
            .into_iter()
            .zip(early)
            .map(|(files, early)| {
                let ids = files.iter().filter_map(|i| ids.remove(i)).collect();
                (files, ids, early)
            })
            .collect();
        groups
            .into_par_iter()
            .map(|(files, ids, early)| {
                if let Some(done) = early.rebase(base, &ids, numbering.nowhere) {
                    return done;
                }
                let (heads, bodies) = read(&files, trace::Reading::Whole);
                let read_files = read_of(&files, &heads);
                let numbering = Numbering {
                    ids,
                    nowhere: numbering.nowhere,
                };
                let mut streams = trace::finish_bodies(dir, bodies, &numbering, true);
                crate::clocksync::apply(&mut streams);
                let late = trace::shift(&mut streams, base);
                let mut tp = tables_of(&tables);
                summarize(&mut tp, streams, &read_files, &late)
            })
            .flatten()
            .collect()
    } else {
        let late = trace::shift(&mut streams, base);
        summarize(&mut t, streams, &read_files, &late)
    };
    if let Some(pb) = progress {
        pb.finish_and_clear();
    }
    if !root {
        to_root(tr, &mine).map_err(parts)?;
        return Ok(None);
    }

    // 4. Rank 0 places the summaries as the streams would be, and merges them.
    let mut all = mine;
    for v in from_ranks::<Vec<(Placed, StreamSummary)>>(tr, "summaries").map_err(parts)? {
        all.extend(v);
    }
    Ok(Some(merged(t, block_size, all)))
}

/// The report from the summaries of every stream of `t` (which holds the
/// rest: numbering, clock corrections, problems so far), each with where
/// it was read from: the problems of late and stopped streams in the order
/// one process reading the trace finds them, then the merges.
fn merged(mut t: Trace, block_size: u64, mut all: Vec<(Placed, StreamSummary)>) -> Report {
    all.sort_by_key(|(p, _)| p.file);
    for (p, _) in &all {
        trace::late_problem(&mut t, &p.process, p.stream, p.late);
    }
    all.sort_by(|(a, _), (b, _)| {
        (a.process.as_str(), a.stream).cmp(&(b.process.as_str(), b.stream))
    });
    for (p, _) in &all {
        trace::stop_problem(&mut t, &p.process, p.stream, p.damaged, p.last);
    }
    let recorded: Vec<&str> = all.iter().map(|(p, _)| p.process.as_str()).collect();
    trace::killed_problems(&mut t, &recorded);
    let summaries = all.into_iter().map(|(_, s)| s).collect();
    crate::profile::report_of(&t, block_size, summaries)
}

/// The report on the trace in `dir` with only a few processes' events in
/// memory at a time (as many as there are threads at work): the stream
/// files are read once, process by process, each stream summarized in its
/// process's own numbering of callsites, user events and texts and in its
/// own times; once the trace's numbering and start are known (from what
/// every process gave: each file's callsites, user events and texts, each
/// process's clock correction and first events), the summaries are
/// renumbered and shifted to them ([`Provisional::rebase`]), or, for a
/// process whose events the start would clamp, the process is read again.
/// The report is the same as [`crate::profile::report_with`] on
/// [`trace::read`]'s trace; memory holds the summaries (a stream's profile
/// and its part of every analysis), not the events.
pub fn report_by_process(dir: &Path, block_size: u64) -> Result<Report, TraceError> {
    report(dir, block_size, &Alone, true)?
        .ok_or_else(|| TraceError::Parts("no report from the only rank".into()))
}

/// A trace read one process at a time, for work that goes through every
/// event once (an export) without holding them all: [`ByProcess::open`]
/// reads every stream file a first time, lightly, for what the trace as a
/// whole needs (its numbering of callsites, user events and texts, its
/// clock corrections and its start), then [`ByProcess::read`] gives each
/// process's streams as [`trace::read`] gives them in the whole trace: the
/// same numbers, the same times, in the same order (by process and stream
/// number).
#[derive(Debug)]
pub struct ByProcess {
    dir: PathBuf,
    paths: Vec<PathBuf>,
    refs: trace::ClockRefs,
    /// What each reading reads: a process's stream files (several
    /// processes' when their damaged streams interleave) and the trace's
    /// numbers of those that could be read; in the whole trace's order of
    /// streams.
    groups: Vec<(Vec<usize>, Vec<StreamIds>)>,
    /// The programming models (`gasp_model_t`) of the streams.
    models: Vec<u32>,
    nowhere: u32,
    base: i128,
    tables: Trace,
    progress: Option<indicatif::ProgressBar>,
    /// The stream files' bytes (when there is a progress bar).
    bytes: u64,
}

impl ByProcess {
    /// Reads the trace in `dir` a first time, with a progress bar on big
    /// traces when stderr is a terminal ([`ByProcess::plan`]).
    pub fn open(dir: &Path) -> Result<ByProcess, TraceError> {
        let listing = trace::list(dir)?;
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        let mut group_of: HashMap<String, usize> = HashMap::default();
        for (i, p) in listing.streams.iter().enumerate() {
            let g = *group_of.entry(process_of(p)).or_insert_with(|| {
                groups.push((process_of(p), Vec::new()));
                groups.len() - 1
            });
            groups[g].1.push(i);
        }
        let progress = trace::progress_bar(&listing.streams, 1);
        let bytes = progress.as_ref().and_then(|p| p.length()).unwrap_or(0);
        let first: Vec<_> = groups
            .par_iter()
            .map(|(_, files)| {
                let paths: Vec<PathBuf> =
                    files.iter().map(|&i| listing.streams[i].clone()).collect();
                let parts = trace::read_streams_shown(
                    &paths,
                    &listing.refs,
                    progress.as_ref(),
                    trace::Reading::Light,
                );
                let (heads, bodies) = trace::split_parts(dir, parts);
                let (streams, (corrections, firsts)) = light_clocks(bodies);
                let who: Vec<(String, u32, u32)> = streams
                    .iter()
                    .map(|s| (s.process.clone(), s.stream, s.model))
                    .collect();
                (heads, corrections, firsts, who)
            })
            .collect();
        let mut heads_of: Vec<Option<Head>> = (0..listing.streams.len()).map(|_| None).collect();
        let (mut corrections, mut firsts) = (Vec::new(), Vec::new());
        // Each stream read: its file, process (as the stream says) and number.
        let mut who_of: Vec<(usize, String, u32)> = Vec::new();
        let mut models: Vec<u32> = Vec::new();
        for ((_, files), (heads, c, f, who)) in groups.iter().zip(first) {
            let read = read_of(files, &heads);
            for (i, (p, n, model)) in read.into_iter().zip(who) {
                who_of.push((i, p, n));
                if !models.contains(&model) {
                    models.push(model);
                }
            }
            for (&i, h) in files.iter().zip(heads) {
                heads_of[i] = Some(h);
            }
            corrections.extend(c);
            firsts.extend(f);
        }
        let heads: Vec<Head> = heads_of
            .into_iter()
            .map(|h| {
                h.unwrap_or(Head {
                    problems: Vec::new(),
                    stream: None,
                })
            })
            .collect();
        let all: Vec<usize> = (0..listing.streams.len()).collect();
        let read_files = read_of(&all, &heads);
        let mut t = listing.trace;
        let numbering = trace::place(&mut t, &listing.streams, &listing.profiles, &heads);
        let recorded: Vec<&str> = who_of.iter().map(|w| w.1.as_str()).collect();
        trace::killed_problems(&mut t, &recorded);
        corrections.sort_by(|a, b| a.process.cmp(&b.process));
        t.clock_sync = corrections;
        let f: Vec<(&str, u64)> = firsts.iter().map(|(p, t)| (p.as_str(), *t)).collect();
        let base = trace::trace_start(&t, &f);
        let mut ids: HashMap<usize, StreamIds> =
            read_files.iter().copied().zip(numbering.ids).collect();
        // The whole trace orders its streams by process and number, as the
        // streams say: a stream whose header names another process than its
        // file (damage) is read with its file's process (whose clock it
        // shares), and the processes whose streams interleave so are read
        // together, so that every reading gives a run of that order.
        who_of.sort_by(|a, b| (a.1.as_str(), a.2, a.0).cmp(&(b.1.as_str(), b.2, b.0)));
        let mut is_read = vec![false; listing.streams.len()];
        for &i in &read_files {
            is_read[i] = true;
        }
        let mut group_of = vec![usize::MAX; listing.streams.len()];
        let mut left: Vec<usize> = Vec::with_capacity(groups.len());
        for (g, (_, files)) in groups.iter().enumerate() {
            for &i in files {
                group_of[i] = g;
            }
            left.push(files.iter().filter(|&&i| is_read[i]).count());
        }
        let mut units: Vec<(Vec<usize>, Vec<StreamIds>)> = Vec::new();
        let (mut taken, mut open, mut unit) = (vec![false; groups.len()], 0usize, Vec::new());
        for (i, _, _) in &who_of {
            let g = group_of[*i];
            if !taken[g] {
                taken[g] = true;
                open += left[g];
                unit.push(g);
            }
            open -= 1;
            if open == 0 {
                let mut files: Vec<usize> = unit
                    .drain(..)
                    .flat_map(|g: usize| groups[g].1.clone())
                    .collect();
                files.sort_unstable();
                let ids = files.iter().filter_map(|i| ids.remove(i)).collect();
                units.push((files, ids));
            }
        }
        Ok(ByProcess {
            dir: dir.to_path_buf(),
            paths: listing.streams,
            refs: listing.refs,
            groups: units,
            models,
            nowhere: numbering.nowhere,
            base,
            tables: t,
            progress,
            bytes,
        })
    }

    /// The trace without its streams: its processes, callsites, user
    /// events, texts, clock corrections, and the problems found without
    /// reading the events (damaged or missing files, processes killed before
    /// their events reached the disk).
    pub fn tables(&self) -> &Trace {
        &self.tables
    }

    /// Says how many times [`ByProcess::read`] will go through every
    /// process, for the progress bar.
    pub fn plan(&self, readings: u64) {
        if let Some(pb) = &self.progress {
            pb.set_length(self.bytes.saturating_mul(1 + readings));
        }
    }

    /// Whether some stream is of programming model `model` (`gasp_model_t`).
    pub fn has_model(&self, model: u32) -> bool {
        self.models.contains(&model)
    }

    /// How many readings [`ByProcess::read`] takes: one per process with
    /// streams (fewer when a damaged stream names another process).
    pub fn processes(&self) -> usize {
        self.groups.len()
    }

    /// The streams of the `i`-th process, read whole: a trace holding them
    /// with the trace's tables and their shared objects, and as its problems
    /// those the whole trace finds in them (events stamped too late, records
    /// that stop). Its streams are those of [`trace::read`]'s trace for that
    /// process, in the same order, and come after those of the processes
    /// before.
    pub fn read(&self, i: usize) -> Trace {
        let mut t = tables_of(&self.tables);
        t.clock_sync = self.tables.clock_sync.clone();
        let Some((files, ids)) = self.groups.get(i) else {
            return t;
        };
        let paths: Vec<PathBuf> = files.iter().map(|&f| self.paths[f].clone()).collect();
        let parts = trace::read_streams_shown(
            &paths,
            &self.refs,
            self.progress.as_ref(),
            trace::Reading::Whole,
        );
        let (_, bodies) = trace::split_parts(&self.dir, parts);
        let numbering = Numbering {
            ids: ids.clone(),
            nowhere: self.nowhere,
        };
        let mut streams = trace::finish_bodies(&self.dir, bodies, &numbering, true);
        crate::clocksync::apply(&mut streams);
        let late = trace::shift(&mut streams, self.base);
        // The problems the whole trace would find in these streams.
        for (s, &late) in streams.iter().zip(&late) {
            trace::late_problem(&mut t, &s.process, s.stream, late);
        }
        streams.sort_by(|a, b| (a.process.as_str(), a.stream).cmp(&(b.process.as_str(), b.stream)));
        for s in &mut streams {
            let last = s.events.last().map(|e| (e.t_ns, e.kind, e.phase));
            trace::stop_problem(&mut t, &s.process, s.stream, s.damaged, last);
            s.events_changed();
        }
        t.streams = streams;
        t.objects = crate::objects::Objects::build(&t.streams, &t.callsites);
        t
    }

    /// Takes the progress bar off the terminal.
    pub fn finish(&self) {
        if let Some(pb) = &self.progress {
            pb.finish_and_clear();
        }
    }
}

/// One process alone: no other rank to reach.
struct Alone;

impl Transport for Alone {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn send_to(&self, to: usize, _: &[u8]) -> Result<(), String> {
        Err(format!("no rank {to}: this process is alone"))
    }
    fn recv_from(&self, from: usize) -> Result<Vec<u8>, String> {
        Err(format!("no rank {from}: this process is alone"))
    }
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

    /// A process [`write_process`] writes.
    struct Spec {
        pid: u32,
        model: u32,
        streams: u32,
        chunks: u32,
        /// The kinds of its events, drawn at random.
        kinds: Vec<u16>,
        /// Events each stream starts with: (kind, phase, argument words).
        prologue: Vec<(u16, u8, Vec<u64>)>,
        /// Whether it measures its clock (at its start and end, 2 ms ahead
        /// then 2.001 ms).
        measures: bool,
        /// Whether its clock goes back once.
        backwards: bool,
        /// A kind whose events are all STARTs, never closed (a runtime
        /// that misuses the interface).
        unclosed: Option<u16>,
    }

    /// UPC events: gets, split barriers, forall loops, functions and user
    /// events.
    fn upc_kinds() -> Vec<u16> {
        use gaspard_format::kinds;
        vec![
            kinds::UPC_GET,
            kinds::UPC_NOTIFY,
            kinds::UPC_WAIT,
            kinds::UPC_FORALL,
            kinds::C_FUNC,
            kinds::GASPARD_USER,
        ]
    }

    /// The number of the kind named `name`.
    fn kind(name: &str) -> u16 {
        gaspard_format::kinds::kind_by_name(name).unwrap().id
    }

    /// Writes process `h-<pid>` into `dir` as `spec` says, each stream of
    /// chunks of about 60 events drawn from `seed` (some STARTs never
    /// closed, some ENDs without a START, nested and interleaved).
    fn write_process(dir: &Path, spec: &Spec, seed: u64) {
        use gaspard_format::chunk::{file_header, ChunkHeader};
        use gaspard_format::codec::{Encoder, Resolver, UserDef};
        use gaspard_format::kinds;
        use gaspard_format::raw::RawHeader;
        struct Names;
        impl Resolver for Names {
            fn string_at(&mut self, ptr: u64) -> Vec<u8> {
                format!("f{ptr:x}").into_bytes()
            }
            fn user_event(&mut self, id: u64) -> Option<UserDef> {
                Some(UserDef {
                    id,
                    name: format!("phase{id}"),
                    desc: Some("%d".into()),
                    unreadable: None,
                })
            }
        }
        let mut next = crate::testing::below(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let pid = spec.pid;
        let mut files = Vec::new();
        let mut total = 0u64;
        for stream in 0..spec.streams {
            let mut bytes = file_header(&[
                ("stream", stream.to_string()),
                ("thread", stream.to_string()),
                ("host", "h".into()),
                ("pid", pid.to_string()),
                ("model", spec.model.to_string()),
                ("pts_bytes", "16".into()),
            ]);
            let mut ts = 10_000_000u64;
            let record = |ts: u64, kind: u16, phase: u8, line: u32, file: u64, args: &[u64]| {
                RawHeader {
                    ts,
                    kind,
                    phase,
                    flags: 0,
                    nwords: args.len() as u8,
                    line,
                    col: 0,
                    file,
                }
                .record(args)
            };
            let sync = |ts: u64, ahead: u64| {
                let args = [0, ts - 10, ts - ahead, ts + 10];
                record(ts, kinds::GASPARD_CLOCK_SYNC, 2, 1, 0x40, &args)
            };
            for c in 0..spec.chunks {
                let mut enc = Encoder::new();
                if c == 0 {
                    for (kind, phase, args) in &spec.prologue {
                        ts += 10;
                        enc.push(&record(ts, *kind, *phase, 3, 0x40, args), &mut Names)
                            .unwrap();
                    }
                    if spec.measures && stream == 0 {
                        enc.push(&sync(ts, 2_000_000), &mut Names).unwrap();
                    }
                }
                for i in 0..60u64 {
                    ts += 1 + next(40);
                    if spec.backwards && stream == 0 && c == spec.chunks / 2 && i == 7 {
                        ts -= 3_000;
                    }
                    let kind = spec.kinds[next(spec.kinds.len() as u64) as usize];
                    let mut phase = [0u8, 0, 1, 1, 1][next(5) as usize];
                    if Some(kind) == spec.unclosed {
                        phase = 0;
                    }
                    let words: usize = gaspard_format::codec::arg_layout(kind, phase, 2, 0)
                        .iter()
                        .map(|&(_, _, n)| n)
                        .sum();
                    // Two sets of words a kind: an event often has those of
                    // the one before of its kind (kept once).
                    let set = 1 + next(2);
                    let mut args: Vec<u64> = (0..words as u64).map(|w| set * (w + 1)).collect();
                    if kind == kinds::GASPARD_USER {
                        args = vec![1 + next(3), next(100)];
                    }
                    if kind == kinds::C_FUNC {
                        args[0] = 0x100 * (1 + next(3));
                    }
                    let file = if next(9) == 0 { 0 } else { 0x40 + next(2) };
                    let w = record(ts, kind, phase, 10 + next(7) as u32, file, &args);
                    enc.push(&w, &mut Names).unwrap();
                }
                if spec.measures && stream == 0 && c + 1 == spec.chunks {
                    ts += 2_000_000;
                    enc.push(&sync(ts, 2_001_000), &mut Names).unwrap();
                }
                total += u64::from(enc.events());
                let (chunk, _) = enc.finish(ChunkHeader {
                    stream,
                    seq: c,
                    ref_ticks: ts,
                    ref_ns: ts,
                    ..Default::default()
                });
                bytes.extend_from_slice(&chunk);
            }
            let name = format!("h-{pid}-{stream}.gst");
            std::fs::write(dir.join(&name), &bytes).unwrap();
            files.push(name);
        }
        let m = gaspard_format::manifest::Manifest {
            host: "h".into(),
            pid,
            clock: "monotonic".into(),
            clock_refs: vec![(1000, 1000)],
            pts_bytes: 16,
            streams: files
                .iter()
                .zip(0u32..)
                .map(|(file, id)| gaspard_format::manifest::StreamEntry {
                    id,
                    file: file.clone(),
                    ..Default::default()
                })
                .collect(),
            status: "complete".into(),
            events: total,
            ..Default::default()
        };
        std::fs::write(dir.join(format!("h-{pid}.manifest")), m.to_text()).unwrap();
    }

    /// What [`summarize_alone`] or [`summarize_windowed`] gave, in words.
    fn described(heads: &[Head], p: &Provisional) -> Vec<String> {
        let mut v: Vec<String> = heads.iter().map(|h| format!("{h:?}")).collect();
        v.push(format!(
            "{:?} {:?} {:?} {:?}",
            p.clocks.1, p.ids, p.lens, p.span
        ));
        for (placed, s) in &p.summaries {
            v.push(format!(
                "{} {} {} {} {:?} {}",
                placed.file,
                placed.process,
                placed.stream,
                placed.damaged,
                placed.last,
                placed.late
            ));
            v.push(serde_json::to_string(s).unwrap());
        }
        v
    }

    /// A process read in windows of any size gives what it gives read
    /// whole: its streams' heads, numbering, clock correction, first
    /// events, span and summaries (a UPC process; an MPI process with its
    /// rank, windows, messages and clock measurements; an OpenSHMEM process
    /// with its allocations); one that cannot be (its clock goes back, or
    /// it runs Coarray Fortran) is not read so. A process whose streams
    /// need nothing of the rest of it beforehand (the UPC ones) is
    /// summarized as it is read, each stream on its own, with the same
    /// heads, span and, once made the trace's, summaries; the others are
    /// not.
    #[test]
    fn a_process_read_in_windows_is_the_process_read_whole() {
        let dir = std::env::temp_dir().join(format!("gaspard-windowed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let upc_spec = || Spec {
            pid: 7,
            model: 0,
            streams: 3,
            chunks: 9,
            kinds: upc_kinds(),
            prologue: Vec::new(),
            measures: false,
            backwards: false,
            unclosed: None,
        };
        let mpi_init = |rank: u64| {
            vec![
                (kind("GASP_MPI_INIT"), 0, vec![0x500]),
                (kind("GASP_MPI_INIT"), 1, vec![rank, 4, 0x500]),
            ]
        };
        let mpi_kinds: Vec<u16> = [
            "GASP_MPI_SEND",
            "GASP_MPI_RECV",
            "GASP_MPI_ISEND",
            "GASP_MPI_IRECV",
            "GASP_MPI_WAIT",
            "GASP_MPI_BARRIER",
            "GASP_MPI_WIN_CREATE",
            "GASP_MPI_PUT",
            "GASP_MPI_WIN_FENCE",
            "GASP_MPI_ALLREDUCE",
        ]
        .iter()
        .map(|n| kind(n))
        .collect();
        let shmem_kinds: Vec<u16> = [
            "GASP_SHMEM_MALLOC",
            "GASP_SHMEM_FREE",
            "GASP_SHMEM_PUTMEM",
            "GASP_SHMEM_GETMEM",
            "GASP_SHMEM_BARRIER_ALL",
            "GASP_SHMEM_QUIET",
            "GASP_SHMEM_SET_LOCK",
            "GASP_SHMEM_CLEAR_LOCK",
        ]
        .iter()
        .map(|n| kind(n))
        .collect();
        let specs = [
            (upc_spec(), true),
            (
                // Loops that never end: more STARTs left open than a window
                // carries.
                Spec {
                    pid: 12,
                    unclosed: Some(gaspard_format::kinds::UPC_FORALL),
                    ..upc_spec()
                },
                true,
            ),
            (
                Spec {
                    pid: 8,
                    streams: 2,
                    chunks: 5,
                    backwards: true,
                    ..upc_spec()
                },
                false,
            ),
            (
                Spec {
                    pid: 9,
                    model: 3,
                    streams: 2,
                    chunks: 6,
                    kinds: mpi_kinds.clone(),
                    prologue: mpi_init(2),
                    measures: true,
                    backwards: false,
                    unclosed: None,
                },
                true,
            ),
            (
                Spec {
                    pid: 10,
                    model: 4,
                    streams: 1,
                    chunks: 6,
                    kinds: shmem_kinds,
                    prologue: vec![
                        (kind("GASP_SHMEM_INIT"), 0, vec![0x500]),
                        (kind("GASP_SHMEM_INIT"), 1, vec![1, 4, 0x500]),
                    ],
                    measures: false,
                    backwards: false,
                    unclosed: None,
                },
                true,
            ),
            (
                // Coarray Fortran: gfortran's runtime over MPI, with a
                // dynamic window.
                Spec {
                    pid: 11,
                    model: 3,
                    streams: 1,
                    chunks: 3,
                    kinds: mpi_kinds,
                    prologue: [
                        mpi_init(0),
                        vec![(kind("GASP_MPI_WIN_CREATE_DYNAMIC"), 1, vec![1, 2, 3, 4])],
                    ]
                    .concat(),
                    measures: false,
                    backwards: false,
                    unclosed: None,
                },
                false,
            ),
        ];
        for (seed, (spec, _)) in specs.iter().enumerate() {
            write_process(&dir, spec, seed as u64 + 1);
        }
        std::fs::write(
            dir.join("h-11.maps"),
            "0-1 r-xp 0 0:0 0 /usr/lib/libgfortran.so.5\n",
        )
        .unwrap();
        let listing = trace::list(&dir).unwrap();
        let tables = tables_of(&listing.trace);
        for (spec, windowable) in &specs {
            let process = format!("h-{}", spec.pid);
            let files: Vec<usize> = (0..listing.streams.len())
                .filter(|&i| process_of(&listing.streams[i]) == process)
                .collect();
            let paths: Vec<PathBuf> = files.iter().map(|&i| listing.streams[i].clone()).collect();
            let process_files = ProcessFiles {
                dir: &dir,
                tables: &tables,
                files: &files,
                paths: &paths,
                refs: &listing.refs,
                progress: None,
            };
            let parts = trace::read_streams(&paths, &listing.refs);
            let (heads, bodies) = trace::split_parts(&dir, parts);
            let whole = summarize_alone(&dir, &tables, &files, &heads, bodies);
            assert_eq!(!whole.clocks.0.is_empty(), spec.measures, "{process}");
            let want = described(&heads, &whole);
            // Each stream summarized on its own as it is read: the same
            // heads, first events and span, and once made the trace's (a
            // start before the process's), the same summaries.
            let rebased = |heads: &[Head], p: Provisional| -> Vec<String> {
                let mut t = tables_of(&tables);
                let read: Vec<&StreamHead> =
                    heads.iter().filter_map(|h| h.stream.as_ref()).collect();
                let numbering = trace::number(&mut t, &read);
                let base = i128::from(p.span.map_or(0, |s| s.0)) - 5;
                let mut v: Vec<String> = heads.iter().map(|h| format!("{h:?}")).collect();
                v.push(format!("{:?} {:?}", p.clocks.1, p.span));
                let summaries = p.rebase(base, &numbering.ids, numbering.nowhere);
                for (placed, mut s) in summaries.unwrap() {
                    // (Barriers packed from other bases.)
                    s.findings.barriers = s.findings.barriers.repacked();
                    // (A stream's profile rows in its own numbering's order.)
                    s.profile.1.sort_by(|a, b| a.0.cmp(&b.0));
                    v.push(format!("{placed:?}"));
                    v.push(serde_json::to_string(&s).unwrap());
                }
                v
            };
            let want_rebased = rebased(&heads, whole);
            let alone = spec.prologue.is_empty() && !spec.measures && !spec.backwards;
            for every in [1, 2, 3, 7, 50, 100_000] {
                let as_read = summarize_as_read(process_files, every);
                let Some((heads, p)) = as_read else {
                    assert!(
                        !alone,
                        "{process} is read as it is read, in windows of {every}"
                    );
                    continue;
                };
                assert!(alone, "{process} is not read as it is read");
                assert_eq!(
                    rebased(&heads, p),
                    want_rebased,
                    "{process}, windows of {every}"
                );
            }
            for every in [1, 2, 3, 7, 50, 100_000] {
                let windowed = summarize_windowed(process_files, every);
                let Some((heads, p)) = windowed else {
                    assert!(!windowable, "{process} is not read in windows of {every}");
                    continue;
                };
                assert!(windowable, "{process} is read in windows");
                let got = described(&heads, &p);
                assert_eq!(got.len(), want.len());
                for (a, b) in got.iter().zip(&want) {
                    // (The first difference, not the whole summary.)
                    let at = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
                    let around = |s: &str| {
                        s.get(at.saturating_sub(80)..(at + 80).min(s.len()))
                            .unwrap_or("")
                            .to_string()
                    };
                    assert!(
                        a == b,
                        "{process}, windows of {every}: {} against {}",
                        around(a),
                        around(b)
                    );
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn damaged_messages_are_refused() {
        assert!(decode::<Vec<(usize, SentHead)>>(&[], "heads", 1).is_err());
        assert!(decode::<Vec<(usize, SentHead)>>(&[5], "heads", 1).is_err());
        let sent: Vec<(usize, SentHead)> = vec![(
            3,
            SentHead {
                problems: vec!["cut".into()],
                stream: None,
            },
        )];
        let bytes = encode(&sent).unwrap();
        let back: Vec<(usize, SentHead)> = decode(&bytes, "heads", 1).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].0, 3);
        assert!(decode::<Vec<(usize, SentHead)>>(&bytes[..bytes.len() - 1], "heads", 1).is_err());
        let err = decode::<Numbers>(&[9, 9, 9], "numbers", 2).err().unwrap();
        assert!(err.contains("the numbers rank 2 sent"), "{err}");
    }
}
