//! A trace directory, read into memory.

use rayon::prelude::*;
use rustc_hash::FxHashMap as HashMap;
use std::path::{Path, PathBuf};

use gaspard_format::chunk::ChunkHeader;
use gaspard_format::codec::UserDef;
use gaspard_format::manifest::Manifest;

/// Errors that stop reading a trace altogether.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The directory cannot be read.
    #[error("cannot read trace directory {path}: {source}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Nothing in the directory looks like a gaspard trace.
    #[error("{0} holds no gaspard trace (no .manifest or .gst files)")]
    Empty(PathBuf),
    /// The stream files could not be read (by the ranks sharing them).
    #[error("{0}")]
    Parts(String),
}

/// A source position, resolved to strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct Callsite {
    /// File name, if known.
    pub file: Option<String>,
    /// Line, 0 when unknown.
    pub line: u32,
    /// Column, 0 when unknown.
    pub col: u32,
}

/// [`Event`]s without a string argument.
pub(crate) const NO_TEXT: u32 = u32::MAX;

/// [`Event`]s that are not user events.
pub(crate) const NO_USER: u32 = u32::MAX;

/// One event with its time in nanoseconds and its arguments.
///
/// Its fields lie in this order (`repr(C)`): its kind, phase, flags and
/// callsite make one word, and its text and user event another, each read
/// at once where an analysis takes them together ([`crate::shape::of`]).
#[derive(Debug, Clone)]
#[repr(C)]
pub struct Event {
    /// Nanoseconds since the trace's earliest process start.
    pub t_ns: u64,
    /// Canonical kind.
    pub kind: u16,
    /// 0 START, 1 END, 2 ATOMIC.
    pub phase: u8,
    /// `raw::FLAG_*`.
    pub flags: u8,
    /// Index into [`Trace::callsites`].
    pub callsite: u32,
    /// Where its argument words are in its stream's ([`Stream::args`];
    /// strings of `Str` arguments already resolved in `text_args`).
    pub(crate) args_at: u32,
    /// How many argument words it has.
    pub(crate) nargs: u32,
    /// Its string argument (a function's signature), index into
    /// [`Trace::texts`], or [`NO_TEXT`] ([`Trace::text`] gives it).
    pub(crate) text: u32,
    /// For user events, index into [`Trace::user_events`], else
    /// [`NO_USER`] ([`Event::user`] gives it).
    pub(crate) user: u32,
}

// Every stream holds one per event: no padding.
const _: () = assert!(std::mem::size_of::<Event>() == 32);

impl Event {
    /// For a user event, its index into [`Trace::user_events`].
    #[inline]
    pub fn user(&self) -> Option<u32> {
        (self.user != NO_USER).then_some(self.user)
    }
}

/// A stream: one context (thread and model) of one process.
#[derive(Debug, Clone, Default)]
pub struct Stream {
    /// `host-pid` of its process.
    pub process: String,
    /// Process id.
    pub pid: u32,
    /// Stream number within the process.
    pub stream: u32,
    /// Kernel thread id.
    pub tid: u64,
    /// Order of the thread within its process.
    pub thread: u32,
    /// `gasp_model_t`.
    pub model: u32,
    /// Bytes of each pointer-to-shared argument.
    pub pts_bytes: u32,
    /// The file it was read from.
    pub path: PathBuf,
    /// Its events in recorded order.
    pub events: Vec<Event>,
    /// The argument words of its events, one after the other (an event's are
    /// [`Stream::args`]): no allocation per event.
    pub(crate) arg_words: Vec<u64>,
    /// Chunks read intact.
    pub chunks: u32,
    /// True when the stream ends early or lost chunks.
    pub damaged: bool,
    /// Its START/END intervals and what is derived from them, computed once
    /// when first asked for ([`crate::intervals::intervals`]); cleared by
    /// [`Stream::events_changed`].
    pub(crate) intervals: std::sync::OnceLock<crate::intervals::Derived>,
    /// Where its events lie in the stream when they are a window of it
    /// ([`crate::window`]); the default for a whole stream.
    pub(crate) window: crate::window::Window,
}

impl Stream {
    /// The argument words of `e`, one of this stream's events.
    #[inline]
    pub fn args(&self, e: &Event) -> &[u64] {
        let at = e.args_at as usize;
        self.arg_words.get(at..at + e.nargs as usize).unwrap_or(&[])
    }

    /// Keeps `words` as the arguments of an event to be made: (where, how many).
    pub(crate) fn keep_args(&mut self, words: &[u64]) -> (u32, u32) {
        keep_args(&mut self.arg_words, words)
    }

    /// To be called after changing `events`: what was derived from them is
    /// computed again when next asked for.
    pub fn events_changed(&mut self) {
        self.intervals = std::sync::OnceLock::new();
    }
}

#[cfg(test)]
impl Stream {
    /// A stream without events, for tests: thread `stream` of `process`
    /// in model `model`, with pointers-to-shared of `pts_bytes`.
    pub(crate) fn empty(process: &str, stream: u32, model: u32, pts_bytes: u32) -> Stream {
        Stream {
            process: process.into(),
            pid: 1,
            stream,
            tid: u64::from(stream),
            thread: stream,
            model,
            pts_bytes,
            path: Default::default(),
            events: Vec::new(),
            arg_words: Vec::new(),
            chunks: 1,
            damaged: false,
            intervals: Default::default(),
            window: Default::default(),
        }
    }

    /// Adds an event with the argument words `args` (tests).
    pub(crate) fn push(&mut self, t_ns: u64, kind: u16, phase: u8, callsite: u32, args: &[u64]) {
        let (args_at, nargs) = self.keep_args(args);
        self.events.push(Event {
            t_ns,
            kind,
            phase,
            flags: 0,
            callsite,
            args_at,
            nargs,
            text: NO_TEXT,
            user: NO_USER,
        });
    }

    /// Adds an event with its arguments named (the others 0), laid out as
    /// the format lays out `kind`'s (tests).
    pub(crate) fn push_named(
        &mut self,
        t_ns: u64,
        kind: u16,
        phase: u8,
        callsite: u32,
        args: &[(&str, u64)],
    ) {
        let pts_words = (self.pts_bytes as usize).div_ceil(8);
        let words: Vec<u64> = gaspard_format::codec::arg_layout(kind, phase, pts_words, 0)
            .iter()
            .flat_map(|&(n, _, w)| {
                let v = args.iter().find(|a| a.0 == n).map_or(0, |a| a.1);
                std::iter::repeat_n(v, w)
            })
            .collect();
        self.push(t_ns, kind, phase, callsite, &words);
    }
}

/// Keeps `words` at the end of `arg_words`: (where, how many).
#[inline(always)]
fn keep_args(arg_words: &mut Vec<u64>, words: &[u64]) -> (u32, u32) {
    let at = arg_words.len() as u32;
    gaspard_format::codec::push_words(arg_words, words);
    (at, words.len() as u32)
}

/// Keeps user event `id`'s words, `words`, at the end of `arg_words` (its
/// id first): (where, how many).
fn keep_user_args(arg_words: &mut Vec<u64>, id: u64, words: &[u64]) -> (u32, u32) {
    let at = arg_words.len() as u32;
    arg_words.push(id);
    gaspard_format::codec::push_words(arg_words, words);
    (at, words.len() as u32 + 1)
}

/// A process's summary.
#[derive(Debug, Clone, Default)]
pub struct Process {
    /// `host-pid`.
    pub name: String,
    /// Its manifest, if readable.
    pub manifest: Option<Manifest>,
}

/// A whole trace.
#[derive(Debug, Default)]
pub struct Trace {
    /// The directory.
    pub dir: PathBuf,
    /// Processes, by name.
    pub processes: Vec<Process>,
    /// Streams, ordered by process then stream number.
    pub streams: Vec<Stream>,
    /// Callsites referred to by events.
    pub callsites: Vec<Callsite>,
    /// User events referred to by events.
    pub user_events: Vec<UserDef>,
    /// Everything that was wrong while reading.
    pub problems: Vec<String>,
    /// Symmetric allocations and windows, for (object, offset).
    pub objects: crate::objects::Objects,
    /// The string arguments of events (function signatures), each once.
    pub texts: Vec<String>,
    /// Profiles of processes recorded in profile-only mode, by process name.
    pub profiles: Vec<(String, gaspard_format::profile::ProfileFile)>,
    /// The clock corrections applied, one per process that measured its
    /// clock against the reference's ([`crate::clocksync`]).
    pub clock_sync: Vec<crate::clocksync::Correction>,
}

impl Trace {
    /// The string argument of `e` (a function's signature), if it has one.
    pub fn text(&self, e: &Event) -> Option<&str> {
        self.texts.get(e.text as usize).map(String::as_str)
    }
    /// Events lost as the manifests count them.
    pub(crate) fn lost_by_manifests(&self) -> u64 {
        self.processes
            .iter()
            .filter_map(|p| p.manifest.as_ref())
            .map(|m| m.lost)
            .fold(0, u64::saturating_add)
    }
    /// Events lost as counted by the processes (memory cap, failed writes).
    pub fn lost_events(&self) -> u64 {
        let mut lost = self.lost_by_manifests();
        // Losses recorded in the streams themselves (GASPARD_LOST) when a manifest is missing.
        for p in &self.processes {
            if p.manifest.is_none() {
                for s in self.streams.iter().filter(|s| s.process == p.name) {
                    for e in &s.events {
                        if e.kind == gaspard_format::kinds::GASPARD_LOST {
                            lost = lost.saturating_add(s.args(e).first().copied().unwrap_or(0));
                        }
                    }
                }
            }
        }
        lost
    }
    /// Unknown tags the processes ignored.
    pub fn unknown_tags(&self) -> u64 {
        self.processes
            .iter()
            .filter_map(|p| p.manifest.as_ref())
            .map(|m| m.unknown_tags)
            .sum()
    }
    /// Events read (and, for processes recorded in profile-only mode, the
    /// events their profiles count).
    pub fn events(&self) -> u64 {
        self.streams
            .iter()
            .map(|s| s.events.len() as u64)
            .sum::<u64>()
            + self.profiled_events()
    }
    /// The events the profiles of profile-only processes count.
    pub(crate) fn profiled_events(&self) -> u64 {
        self.profiles
            .iter()
            .flat_map(|(_, f)| &f.streams)
            .map(|s| s.events)
            .sum::<u64>()
    }
}

/// A process's clock: ticks to nanoseconds.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub(crate) struct Clock {
    t0: u64,
    n0: u64,
    slope: f64,
}

impl Clock {
    /// The clock through the first and last references; with only one,
    /// ticking at `slope` ns per tick.
    fn fit(mut refs: Vec<(u64, u64)>, slope: f64) -> Clock {
        refs.sort_unstable();
        refs.dedup();
        match (refs.first(), refs.last()) {
            (Some(&(t0, n0)), Some(&(t1, n1))) if t1 > t0 && n1 > n0 => Clock {
                t0,
                n0,
                slope: (n1 - n0) as f64 / (t1 - t0) as f64,
            },
            (Some(&(t0, n0)), _) => Clock { t0, n0, slope },
            _ => Clock {
                t0: 0,
                n0: 0,
                slope: 1.0,
            },
        }
    }
    /// Whether a later time in ticks is never an earlier one in ns
    /// ([`Clock::ns_u64`] of a clock that does not go backwards).
    pub(crate) fn keeps_order(&self) -> bool {
        self.slope > 0.0 && self.slope.is_finite()
    }

    /// [`Clock::ns`], kept within `u64` (times before the clock's start
    /// are 0).
    #[inline]
    pub(crate) fn ns_u64(&self, t: u64) -> u64 {
        // The same as clamping `ns`, in 64 bits where the product holds.
        let d = if t >= self.t0 {
            (t - self.t0) as f64
        } else {
            -((self.t0 - t) as f64)
        };
        let x = d * self.slope;
        if x.abs() < 9_223_372_036_854_775_808.0 {
            let off = x as i64;
            return if off >= 0 {
                self.n0.saturating_add(off as u64)
            } else {
                self.n0.saturating_sub(off.unsigned_abs())
            };
        }
        self.ns(t).clamp(0, u64::MAX as i128) as u64
    }

    /// `n0 + (t - t0) * slope`, in integer ns (as `i128` arithmetic gives
    /// it, the sum saturating), with the conversions between floating
    /// point and 128-bit integers, slow, only where 64 bits do not hold the
    /// values: the conversions round the same way (to nearest for the
    /// difference, towards zero for the product).
    #[inline]
    pub(crate) fn ns(&self, t: u64) -> i128 {
        let d = if t >= self.t0 {
            (t - self.t0) as f64
        } else {
            -((self.t0 - t) as f64)
        };
        let x = d * self.slope;
        let off = if x.abs() < 9_223_372_036_854_775_808.0 {
            x as i64 as i128
        } else {
            x as i128
        };
        // Saturating: a clock gone wild (a slope of 1e30) gives the latest
        // time, not one wrapped around.
        (self.n0 as i128).saturating_add(off)
    }
}

/// How a stream's ticks are made ns from a base ([`Times::of`]), decided
/// once per stream rather than per event.
#[derive(Debug, Clone, Copy)]
enum Times {
    /// On a clock, where every tick of the stream gives a time that needs
    /// no clamping: `(t - t0) * slope`, plus `add` (the clock's `n0` less
    /// the base, wrapping), in plain 64-bit arithmetic.
    Linear { t0: u64, slope: f64, add: u64 },
    /// Without a clock, every tick at or after the base: `t - base`.
    Plain(u64),
    /// Otherwise: [`Clock::ns_u64`] (or the tick itself without a clock),
    /// less the base, saturating.
    General(Option<Clock>, u64),
}

impl Times {
    /// For a stream on `clock` whose ticks lie within `ticks` (earliest,
    /// latest; `None`: not known), made ns from `base`.
    fn of(clock: Option<Clock>, ticks: Option<(u64, u64)>, base: u64) -> Times {
        let general = Times::General(clock, base);
        let Some((lo, hi)) = ticks else {
            return general;
        };
        let Some(c) = clock else {
            return if lo >= base {
                Times::Plain(base)
            } else {
                general
            };
        };
        // Ticks at or after the clock's start, and not so far after it that
        // their difference leaves i64: each is then made f64 the same way as
        // an unsigned one. With a slope above 0, a later tick never gives
        // an earlier time (rounding keeps the order), so that when the
        // earliest and the latest give times with no clamping (a product
        // within i64, a sum within u64, at or after the base), every tick
        // between them does too.
        if !c.keeps_order() || lo < c.t0 || hi - c.t0 > i64::MAX as u64 {
            return general;
        }
        let off = |t: u64| {
            let x = (t - c.t0) as f64 * c.slope;
            (x < 9_223_372_036_854_775_808.0).then_some(x as i64 as u64)
        };
        match (off(lo), off(hi)) {
            (Some(a), Some(b)) if c.n0.checked_add(b).is_some() && c.n0 + a >= base => {
                Times::Linear {
                    t0: c.t0,
                    slope: c.slope,
                    add: c.n0.wrapping_sub(base),
                }
            }
            _ => general,
        }
    }

    /// Tick `t` (one of the stream's) in ns from the base.
    #[inline(always)]
    fn ns(&self, t: u64) -> u64 {
        match *self {
            Times::Linear { t0, slope, add } => Times::linear(t, t0, slope, add),
            Times::Plain(base) => t - base,
            Times::General(clock, base) => match clock {
                Some(c) => c.ns_u64(t),
                None => t,
            }
            .saturating_sub(base),
        }
    }

    /// [`Times::ns`] of a tick that may lie outside the stream's earliest
    /// and latest (its result then of no use), without overflowing.
    #[inline(always)]
    fn ns_unchecked(&self, t: u64) -> u64 {
        match *self {
            Times::Plain(base) => t.wrapping_sub(base),
            times => times.ns(t),
        }
    }

    /// [`Times::Linear`]'s ns of tick `t` (of no use, but without
    /// overflowing, for a tick before `t0`).
    #[inline(always)]
    fn linear(t: u64, t0: u64, slope: f64, add: u64) -> u64 {
        let x = t.wrapping_sub(t0) as i64 as f64 * slope;
        (truncate(x) as u64).wrapping_add(add)
    }
}

/// `x` truncated to an i64, as `as` truncates it when it is within i64
/// (the products of [`Times::linear`] for the stream's ticks: `Times::of`
/// chooses it so). Outside, no check: x86-64's conversion gives i64::MIN,
/// where `as` saturates, checking every product, and clamping first costs
/// a fifth of the pass. Only products of ticks outside the stream's, whose
/// times are of no use, are outside.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn truncate(x: f64) -> i64 {
    use std::arch::x86_64::{_mm_cvttsd_si64, _mm_set_sd};
    // SAFETY: SSE2, which these need, is part of every x86-64 processor.
    unsafe { _mm_cvttsd_si64(_mm_set_sd(x)) }
}

/// [`truncate`] elsewhere: as `as` does.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn truncate(x: f64) -> i64 {
    x as i64
}

/// Ns per tick of each host's clock, from the manifests that have two
/// references or more (the median of its processes'), for the processes
/// whose streams give only one (a process without its manifest, one chunk
/// long): the processes of one host read one clock.
fn host_slopes(manifest_refs: &ClockRefs) -> HashMap<String, f64> {
    let mut names: Vec<&String> = manifest_refs.keys().collect();
    names.sort();
    let mut by_host: HashMap<String, Vec<f64>> = HashMap::default();
    for name in names {
        let mut r = manifest_refs[name].clone();
        r.sort_unstable();
        r.dedup();
        if let (Some(&(t0, n0)), Some(&(t1, n1))) = (r.first(), r.last()) {
            if t1 > t0 && n1 > n0 {
                let host = name.rsplit_once('-').map_or(name.as_str(), |(h, _)| h);
                by_host
                    .entry(host.to_string())
                    .or_default()
                    .push((n1 - n0) as f64 / (t1 - t0) as f64);
            }
        }
    }
    by_host
        .into_iter()
        .map(|(h, mut v)| {
            v.sort_by(f64::total_cmp);
            (h, v[v.len() / 2])
        })
        .collect()
}

/// Reads a trace directory. Damage is reported in [`Trace::problems`], never fatal.
pub fn read(dir: &Path) -> Result<Trace, TraceError> {
    read_with(dir, |paths, refs| Ok(read_streams(paths, refs)))
}

/// What a trace directory holds, before its stream files are read: its
/// processes (with their manifests, and what was wrong with them), the
/// profiles of processes recorded in profile-only mode, every stream file
/// (sorted by name) and the clock references of each process's manifest.
pub(crate) struct Listing {
    pub(crate) trace: Trace,
    pub(crate) refs: ClockRefs,
    pub(crate) streams: Vec<PathBuf>,
    pub(crate) profiles: Vec<PathBuf>,
}

/// Lists a trace directory and reads its manifests and profiles.
pub(crate) fn list(dir: &Path) -> Result<Listing, TraceError> {
    let entries = std::fs::read_dir(dir).map_err(|e| TraceError::Dir {
        path: dir.to_path_buf(),
        source: e,
    })?;
    let mut manifests = Vec::new();
    let mut streams = Vec::new();
    let mut profiles = Vec::new();
    for e in entries.flatten() {
        let p = e.path();
        match p.extension().and_then(|x| x.to_str()) {
            Some("manifest") => manifests.push(p),
            Some("gst") => streams.push(p),
            Some("profile") => profiles.push(p),
            _ => {}
        }
    }
    if manifests.is_empty() && streams.is_empty() && profiles.is_empty() {
        return Err(TraceError::Empty(dir.to_path_buf()));
    }
    manifests.sort();
    streams.sort();
    let mut t = Trace {
        dir: dir.to_path_buf(),
        ..Default::default()
    };
    let mut refs: ClockRefs = HashMap::default();
    let mut sym: Option<crate::symbolize::Symbolizer> = None;
    for m in &manifests {
        let name = m
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let manifest = match std::fs::read(m)
            .map_err(|e| e.to_string())
            .and_then(|b| Manifest::parse(&String::from_utf8_lossy(&b)))
        {
            Ok(man) => {
                if man.status == "running" {
                    t.problems.push(format!(
                        "process {name}: the manifest says it is still running: it was killed before it could finish writing"
                    ));
                } else if man.status.is_empty() {
                    t.problems.push(format!(
                        "process {name}: its manifest has no status line: it was cut short or damaged"
                    ));
                } else if man.status.starts_with("crashed") {
                    t.problems.push(format!(
                        "process {name}: {}; what it recorded before was saved",
                        man.status
                    ));
                }
                refs.entry(name.clone())
                    .or_default()
                    .extend(&man.clock_refs);
                for n in &man.notes {
                    // Static functions and call sites by name and line, C++
                    // names demangled.
                    let n = if n.contains("+0x") || n.contains("function _Z") {
                        sym.get_or_insert_with(|| crate::symbolize::Symbolizer::new(dir))
                            .name_note(&name, n)
                    } else {
                        n.clone()
                    };
                    t.problems.push(format!("process {name}: {n}"));
                }
                Some(man)
            }
            Err(e) => {
                t.problems.push(format!("{}: {e}", m.display()));
                None
            }
        };
        t.processes.push(Process { name, manifest });
    }
    profiles.sort();
    for path in &profiles {
        let name = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        match std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|b| gaspard_format::profile::ProfileFile::parse(&String::from_utf8_lossy(&b)))
        {
            Ok(mut f) => {
                // Static functions named as in the events (see function_name),
                // rows without a file placed by their return address (see
                // find_sources).
                for r in &mut f.rows {
                    if let Some(text) = r.name.strip_prefix("GASP_C_FUNC ") {
                        let named = function_name(&mut sym, &t.dir, &name, text);
                        if named != text {
                            r.name = format!("GASP_C_FUNC {named}");
                        }
                    }
                    if r.file.is_none() && r.code != 0 {
                        if let Some((file, line)) = sym
                            .get_or_insert_with(|| crate::symbolize::Symbolizer::new(&t.dir))
                            .source_of_return_address(&name, r.code)
                        {
                            (r.file, r.line) = (Some(file), line);
                        }
                    }
                }
                t.problems.push(format!(
                    "process {name} was recorded in profile-only mode: its counts, times and bytes are in the profiles, \
                     but without its events there is no timeline, and it is left out of the other analyses"
                ));
                t.profiles.push((name, f));
            }
            Err(e) => t.problems.push(format!("{}: {e}", path.display())),
        }
    }
    Ok(Listing {
        trace: t,
        refs,
        streams,
        profiles,
    })
}

/// Reads a trace directory as [`read`] does, with the stream files read by
/// `stream_parts`: given every stream file (sorted by name) and the clock
/// references of each process's manifest, it returns what [`read_streams`]
/// would, in the same order.
pub fn read_with<F>(dir: &Path, stream_parts: F) -> Result<Trace, TraceError>
where
    F: FnOnce(&[PathBuf], &ClockRefs) -> Result<Vec<StreamPart>, String>,
{
    read_listed(dir, list(dir)?, stream_parts, true)
}

/// The streams of process `process` (`host-pid`) of the trace in `dir`,
/// read as [`read`] reads the whole trace but alone: their callsites, user
/// events and texts numbered among themselves, times from the process's
/// own first event, and no coarray operation added: events keep their
/// positions in their files, as [`crate::scan`] numbers them. For the
/// details of an event without reading the whole trace.
pub fn read_process(dir: &Path, process: &str) -> Result<Trace, TraceError> {
    let mut listing = list(dir)?;
    listing
        .streams
        .retain(|p| crate::distributed::process_of(p) == process);
    listing.trace.processes.retain(|p| p.name == process);
    listing.trace.profiles.clear();
    listing.profiles.clear();
    if listing.streams.is_empty() {
        return Err(TraceError::Parts(format!(
            "no stream file of process {process} in {}",
            dir.display()
        )));
    }
    read_listed(
        dir,
        listing,
        |paths, refs| Ok(read_streams(paths, refs)),
        false,
    )
}

/// [`read_with`] of the files of `listing`, with the coarray operations of
/// CAF processes added when `caf`.
fn read_listed<F>(
    dir: &Path,
    listing: Listing,
    stream_parts: F,
    caf: bool,
) -> Result<Trace, TraceError>
where
    F: FnOnce(&[PathBuf], &ClockRefs) -> Result<Vec<StreamPart>, String>,
{
    let parts = stream_parts(&listing.streams, &listing.refs).map_err(TraceError::Parts)?;
    let (heads, bodies) = split_parts(dir, parts);
    let Listing {
        trace: mut t,
        streams,
        profiles,
        ..
    } = listing;
    let numbering = place(&mut t, &streams, &profiles, &heads);
    let mut bodies = finish_bodies(dir, bodies, &numbering, caf);
    t.clock_sync = crate::clocksync::apply(&mut bodies);
    let firsts: Vec<(&str, u64)> = bodies
        .iter()
        .filter_map(|s| Some((s.process.as_str(), s.events.first()?.t_ns)))
        .collect();
    let base = trace_start(&t, &firsts);
    let late = shift(&mut bodies, base);
    for (s, &late) in bodies.iter().zip(&late) {
        late_problem(&mut t, &s.process, s.stream, late);
    }
    bodies.sort_by(|a, b| (a.process.as_str(), a.stream).cmp(&(b.process.as_str(), b.stream)));
    for st in &bodies {
        let last = st.events.last().map(|e| (e.t_ns, e.kind, e.phase));
        stop_problem(&mut t, &st.process, st.stream, st.damaged, last);
    }
    let recorded: Vec<&str> = bodies.iter().map(|s| s.process.as_str()).collect();
    killed_problems(&mut t, &recorded);
    for s in &mut bodies {
        s.events_changed();
    }
    t.streams = bodies;
    t.objects = crate::objects::Objects::build(&t.streams, &t.callsites);
    Ok(t)
}

/// What placing a stream in the trace needs to know of it, its events
/// left out: what was wrong with its file, and (when it could be read) who
/// it is and how its file numbers callsites, user events and texts.
#[derive(Debug, Clone)]
pub(crate) struct Head {
    /// What was wrong, in the order found.
    pub(crate) problems: Vec<String>,
    /// The stream, if its file could be read.
    pub(crate) stream: Option<StreamHead>,
}

/// A stream read, without its events ([`Head`]).
#[derive(Debug, Clone)]
pub(crate) struct StreamHead {
    pub(crate) process: String,
    pub(crate) path: PathBuf,
    pub(crate) damaged: bool,
    /// Its events as read.
    pub(crate) events: u64,
    /// Its file's callsites.
    pub(crate) sites: Vec<Callsite>,
    /// The callsites its events' return addresses gave (events without a
    /// source position of their own), first met first: numbered after
    /// `sites` by its events.
    pub(crate) found: Vec<Callsite>,
    /// Its file's user events.
    pub(crate) users: Vec<UserDef>,
    /// Its file's string arguments.
    pub(crate) texts: Vec<String>,
    /// The stream's callsite (its file's number) of each return address
    /// its events without a source position of their own carry, when a
    /// binary gives one (what reading it in windows gives its events).
    pub(crate) addresses: Addresses,
}

/// Return addresses and the callsites they give ([`StreamHead::addresses`]).
pub(crate) type Addresses = HashMap<u64, Option<u32>>;

/// A stream read, its events numbered by its file, with its process's clock
/// while their times are still in ticks.
pub(crate) type Body = (Stream, Option<Clock>, Seen);

/// The streams' heads (one per stream file, in order) and bodies (one per
/// stream read, in order), their events given the source positions of
/// their return addresses where they have none.
pub(crate) fn split_parts(dir: &Path, parts: Vec<StreamPart>) -> (Vec<Head>, Vec<Body>) {
    let codeptr = codeptr_kinds();
    // Streams with events that have a return address and no source position
    // (looked for only in a stream with a callsite without a file).
    let unplaced = |s: &Stream, local: &Local| {
        local.seen.codeptr()
            && local.sites.iter().any(|c| c.file.is_none())
            && s.events.iter().any(|e| {
                codeptr[e.kind as usize]
                    && local
                        .sites
                        .get(e.callsite as usize)
                        .is_some_and(|c| c.file.is_none())
            })
    };
    let wanted = parts
        .iter()
        .filter_map(|p| p.stream.as_ref())
        .any(|(s, l)| unplaced(s, l));
    let mut sym = wanted
        .then(|| crate::symbolize::Symbolizer::new(dir))
        .filter(|s| !s.is_empty());
    let mut heads = Vec::with_capacity(parts.len());
    let mut bodies = Vec::with_capacity(parts.len());
    for part in parts {
        let Some((mut s, local)) = part.stream else {
            heads.push(Head {
                problems: part.problems,
                stream: None,
            });
            continue;
        };
        let (mut found, mut addresses) = Default::default();
        let seen = local.seen;
        if let Some(sym) = sym.as_mut().filter(|_| unplaced(&s, &local)) {
            (found, addresses) = find_sources(sym, &mut s, &local.sites);
        }
        heads.push(Head {
            problems: part.problems,
            stream: Some(StreamHead {
                process: s.process.clone(),
                path: s.path.clone(),
                damaged: s.damaged,
                events: part.counted.unwrap_or(s.events.len() as u64),
                sites: local.sites,
                found,
                users: local.users,
                texts: local.texts,
                addresses,
            }),
        });
        bodies.push((s, part.clock, seen));
    }
    (heads, bodies)
}

/// Where the return address (`codeptr`) is among the argument words of a
/// stream's events, looked up once per (kind, phase, flags).
#[derive(Debug, Default)]
pub(crate) struct ReturnAddresses {
    /// Words of a pointer-to-shared in the stream's events.
    pts_words: usize,
    /// Where the return address is among an event's words, per kind, phase
    /// and pointers-to-shared resolved or not (what its place depends on:
    /// [`ReturnAddresses::slot`]), found when first asked:
    /// [`ReturnAddresses::UNKNOWN`] until then, [`ReturnAddresses::NONE`]
    /// for none. Looked up at every event of an OpenMP trace: a table, not
    /// a map (a hash and a probe per event).
    at: Vec<u8>,
}

impl ReturnAddresses {
    const UNKNOWN: u8 = u8::MAX;
    const NONE: u8 = u8::MAX - 1;

    /// For a stream whose pointers-to-shared take `pts_bytes`.
    fn new(pts_bytes: u64) -> ReturnAddresses {
        ReturnAddresses {
            pts_words: pts_bytes.div_ceil(8) as usize,
            at: Vec::new(),
        }
    }

    /// The entry of `at` of an event of `kind`, `phase` and `flags`: eight
    /// per kind, by phase (START and ATOMIC apart, though their layouts
    /// are one) and whether pointers-to-shared are resolved (the flag that
    /// moves the words).
    #[inline(always)]
    fn slot((kind, phase, flags): (u16, u8, u8)) -> usize {
        const _: () = assert!(gaspard_format::raw::FLAG_PTS_RESOLVED == 1);
        usize::from(kind) << 3 | usize::from(phase & 3) << 1 | usize::from(flags & 1)
    }

    /// The return address among `args`, the argument words of an event of
    /// `kind`, `phase` and `flags`, if it carries one.
    #[inline]
    fn of(&mut self, shape: (u16, u8, u8), args: &[u64]) -> Option<u64> {
        let at = self.word(shape)?;
        args.get(usize::from(at)).copied()
    }

    /// Where the return address is among the words of an event of `kind`,
    /// `phase` and `flags`, if its layout has one.
    #[inline(always)]
    fn word(&mut self, shape: (u16, u8, u8)) -> Option<u8> {
        let slot = Self::slot(shape);
        let at = match self.at.get(slot) {
            Some(&at) if at != Self::UNKNOWN => at,
            _ => self.find(shape, slot),
        };
        (at != Self::NONE).then_some(at)
    }

    /// [`ReturnAddresses::of`]'s place, found the first time.
    #[cold]
    #[inline(never)]
    fn find(&mut self, (kind, phase, flags): (u16, u8, u8), slot: usize) -> u8 {
        let word = gaspard_format::codec::codeptr_word(kind, phase, self.pts_words, flags);
        let at = word
            .and_then(|w| u8::try_from(w).ok())
            .filter(|&w| w < Self::NONE)
            .unwrap_or(Self::NONE);
        if self.at.len() <= slot {
            self.at.resize((slot | 7) + 1, Self::UNKNOWN);
        }
        self.at[slot] = at;
        at
    }

    /// The return address of `e` (its stream's argument words `words`) when
    /// it has no source position of its own (`fileless` of its callsite):
    /// what the binaries may place.
    #[inline(always)]
    fn unplaced(
        &mut self,
        e: &Event,
        words: &[u64],
        fileless: impl Fn(u32) -> bool,
    ) -> Option<u64> {
        // Where its kind, phase and flags put a return address (none for a
        // kind without one), then whether its callsite lacks a file.
        let at = self.word((e.kind, e.phase, e.flags))?;
        if u32::from(at) >= e.nargs || !fileless(e.callsite) {
            return None;
        }
        words.get(e.args_at as usize + usize::from(at)).copied()
    }
}

/// Gives the events of `s` that carry a code address (`codeptr`) and no
/// source position (in `sites`, its file's callsites) the source line of
/// that address, from the binaries' debug information: the callsites found,
/// first met first, numbered by the events after `sites`, and the callsite
/// of each address met.
fn find_sources(
    sym: &mut crate::symbolize::Symbolizer,
    s: &mut Stream,
    sites: &[Callsite],
) -> (Vec<Callsite>, Addresses) {
    let known = sites.len() as u32;
    let mut placer = Placer::new(s.pts_bytes);
    let process = &s.process;
    placer.place(&mut s.events, &s.arg_words, sites, known, |addr| {
        sym.source_of_return_address(process, addr)
    });
    placer.finish(known)
}

/// Return addresses given the source lines of their binaries, as a stream's
/// events come ([`find_sources`], [`Sources`]): the callsites found, first
/// met first, and the one of each address met.
struct Placer {
    addresses: ReturnAddresses,
    /// Each address met, and the number (from 0) of the callsite it gave.
    by_addr: Addresses,
    /// Whether each of the stream's callsites looked at so far has no
    /// file, and whether one of them has none (else no event needs
    /// placing).
    fileless_sites: Vec<bool>,
    fileless: bool,
    found: HashMap<Callsite, u32>,
    list: Vec<Callsite>,
    /// Addresses met lately and their callsites, as in `by_addr`, by a
    /// hash of the address.
    memo: Box<Memo>,
}

/// Entries of [`Placer::memo`].
const MEMO: usize = 64;

/// [`Placer::memo`]: per entry, an address and its callsite.
type Memo = [Option<(u64, Option<u32>)>; MEMO];

impl Placer {
    /// For a stream whose pointers-to-shared take `pts_bytes`.
    fn new(pts_bytes: u32) -> Placer {
        Placer {
            addresses: ReturnAddresses::new(u64::from(pts_bytes)),
            by_addr: HashMap::default(),
            fileless_sites: Vec::new(),
            fileless: false,
            found: HashMap::default(),
            list: Vec::new(),
            memo: Box::new([None; MEMO]),
        }
    }

    /// Gives the events of `events` (their words in `words`) that carry a
    /// return address and no source position (among `sites`, the stream's
    /// callsites so far) the callsite of that address, `first` plus its
    /// number among those found, when `source` (a file and line, or none)
    /// gives one.
    fn place(
        &mut self,
        events: &mut [Event],
        words: &[u64],
        sites: &[Callsite],
        first: u32,
        mut source: impl FnMut(u64) -> Option<(String, u32)>,
    ) {
        if let Some(new) = sites.get(self.fileless_sites.len()..) {
            self.fileless_sites
                .extend(new.iter().map(|c| c.file.is_none()));
            self.fileless |= new.iter().any(|c| c.file.is_none());
        }
        if !self.fileless {
            return;
        }
        // (Taken out while callsites are found: `find` needs all of self.)
        let fileless = std::mem::take(&mut self.fileless_sites);
        for e in events {
            let lacks = |c: u32| fileless.get(c as usize).copied().unwrap_or(false);
            let Some(addr) = self.addresses.unplaced(e, words, lacks) else {
                continue;
            };
            // A program's few return addresses come again and again (most
            // events come from a few call instructions): most are found in
            // the memo, without the map's hash and probe.
            let entry = (addr ^ addr >> 7) as usize % MEMO;
            let site = match self.memo[entry] {
                Some((a, site)) if a == addr => site,
                _ => {
                    let site = match self.by_addr.get(&addr) {
                        Some(&site) => site,
                        None => {
                            let site = self.find(source(addr));
                            self.by_addr.insert(addr, site);
                            site
                        }
                    };
                    self.memo[entry] = Some((addr, site));
                    site
                }
            };
            if let Some(j) = site {
                e.callsite = first + j;
            }
        }
        self.fileless_sites = fileless;
    }

    /// The number of the callsite of an address whose binary gives it
    /// `source`, if any.
    #[cold]
    fn find(&mut self, source: Option<(String, u32)>) -> Option<u32> {
        let (file, line) = source?;
        let c = Callsite {
            file: Some(file),
            line,
            col: 0,
        };
        let n = self.list.len() as u32;
        let list = &mut self.list;
        Some(*self.found.entry(c.clone()).or_insert_with(|| {
            list.push(c);
            n
        }))
    }

    /// The callsites found, first met first, and the callsite of each
    /// address met, numbered after the file's `known` callsites (as
    /// [`StreamHead::found`] and [`StreamHead::addresses`] have them).
    fn finish(self, known: u32) -> (Vec<Callsite>, Addresses) {
        let addresses = self
            .by_addr
            .into_iter()
            .map(|(a, site)| (a, site.map(|j| known + j)))
            .collect();
        (self.list, addresses)
    }
}

/// The number, in a stream summarized as it is read, of the first callsite
/// found from a return address ([`Sources`]); the others follow. Its file's
/// own callsites are numbered below (a file with more is read whole).
pub(crate) const FOUND_SITES: u32 = 1 << 31;

/// What gives the events of a stream summarized as it is read, window by
/// window, the source lines of their return addresses, as [`find_sources`]
/// gives them to a stream read whole: the same callsites found, in the same
/// order, but numbered from [`FOUND_SITES`] (its file's callsites are not
/// all known yet).
pub(crate) struct Sources<'a> {
    /// The process's binaries, looked at once an address needs them (shared
    /// by the process's streams).
    sym: &'a std::sync::Mutex<Option<crate::symbolize::Symbolizer>>,
    dir: &'a Path,
    process: String,
    placer: Placer,
}

impl<'a> Sources<'a> {
    /// For the stream `s` (without events) of a process whose binaries
    /// `sym` reads (from the maps in `dir`).
    pub(crate) fn new(
        sym: &'a std::sync::Mutex<Option<crate::symbolize::Symbolizer>>,
        dir: &'a Path,
        s: &Stream,
    ) -> Sources<'a> {
        Sources {
            sym,
            dir,
            process: s.process.clone(),
            placer: Placer::new(s.pts_bytes),
        }
    }

    /// Gives the events of `events` (their words in `words`) that carry a
    /// return address and no source position (among `sites`, the stream's
    /// callsites so far) the callsite of that address, when a binary gives
    /// one.
    pub(crate) fn place(&mut self, events: &mut [Event], words: &[u64], sites: &[Callsite]) {
        let (sym, dir, process) = (self.sym, self.dir, &self.process);
        self.placer
            .place(events, words, sites, FOUND_SITES, |addr| {
                let mut sym = sym.lock().unwrap_or_else(|e| e.into_inner());
                sym.get_or_insert_with(|| crate::symbolize::Symbolizer::new(dir))
                    .source_of_return_address(process, addr)
            });
    }

    /// The callsites found, first met first, and the callsite of each
    /// address met, numbered after the file's `known` callsites (as
    /// [`StreamHead::found`] and [`StreamHead::addresses`] have them).
    pub(crate) fn finish(self, known: u32) -> (Vec<Callsite>, Addresses) {
        self.placer.finish(known)
    }
}

/// The trace's number of each of a stream's callsites, user events and
/// texts.
pub(crate) type StreamIds = (Vec<u32>, Vec<u32>, Vec<u32>);

/// The trace's numbers of each stream's callsites, user events and texts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Numbering {
    /// Per stream read (in file order), its numbers.
    pub(crate) ids: Vec<StreamIds>,
    /// The callsite of events made by the reader (coarray events).
    pub(crate) nowhere: u32,
}

/// Places the streams of `heads` (one per file of `streams`, in order) in
/// `t`: what was wrong with their files, the processes without a manifest,
/// what the manifests say is missing, and the trace's callsites, user
/// events and texts, numbered in stream order.
pub(crate) fn place(
    t: &mut Trace,
    streams: &[PathBuf],
    profiles: &[PathBuf],
    heads: &[Head],
) -> Numbering {
    let mut skipped = Vec::new();
    let mut read: Vec<&StreamHead> = Vec::new();
    for (h, path) in heads.iter().zip(streams) {
        t.problems.extend(h.problems.iter().cloned());
        let Some(s) = &h.stream else {
            skipped.push(path.clone());
            continue;
        };
        if !t.processes.iter().any(|p| p.name == s.process) {
            t.problems.push(format!(
                "process {}: no manifest; its streams are read anyway",
                s.process
            ));
            t.processes.push(Process {
                name: s.process.clone(),
                manifest: None,
            });
        }
        read.push(s);
    }
    check_manifests(t, streams, &skipped, profiles, &read);
    number(t, &read)
}

/// Numbers the callsites, user events and texts of the streams `read` (in
/// that order) in `t`: each file's own callsites first, every file's, then
/// those found from return addresses, file by file.
pub(crate) fn number(t: &mut Trace, read: &[&StreamHead]) -> Numbering {
    let mut sites: HashMap<Callsite, u32> = HashMap::default();
    let mut users: HashMap<(String, u64), u32> = HashMap::default();
    let mut texts: HashMap<String, u32> = HashMap::default();
    let mut sym: Option<crate::symbolize::Symbolizer> = None;
    let mut numbering = Numbering::default();
    let dir = t.dir.clone();
    let mut site = |sym: &mut Option<_>, process: &str, c: &Callsite| {
        let n = sites.len() as u32;
        let c = with_full_name(sym, &dir, process, c).unwrap_or_else(|| c.clone());
        *sites.entry(c).or_insert(n)
    };
    for h in read {
        let site_ids: Vec<u32> = (h.sites.iter())
            .map(|c| site(&mut sym, &h.process, c))
            .collect();
        let user_ids: Vec<u32> = h
            .users
            .iter()
            .map(|def| {
                let n = t.user_events.len() as u32;
                let idx = *users.entry((h.process.clone(), def.id)).or_insert(n);
                if idx == n {
                    if let Some(why) = &def.unreadable {
                        t.problems.push(format!(
                            "user event '{}': its arguments were not recorded: {why}",
                            def.name
                        ));
                    }
                    t.user_events.push(def.clone());
                }
                idx
            })
            .collect();
        let text_ids: Vec<u32> = h
            .texts
            .iter()
            .map(|text| {
                let text = function_name(&mut sym, &t.dir, &h.process, text).into_owned();
                let n = t.texts.len() as u32;
                let idx = *texts.entry(text.clone()).or_insert(n);
                if idx == n {
                    t.texts.push(text);
                }
                idx
            })
            .collect();
        numbering.ids.push((site_ids, user_ids, text_ids));
    }
    for (h, ids) in read.iter().zip(&mut numbering.ids) {
        ids.0
            .extend(h.found.iter().map(|c| site(&mut sym, &h.process, c)));
    }
    numbering.nowhere = site(&mut sym, "", &Callsite::default());
    let mut site_list = vec![Callsite::default(); sites.len()];
    for (c, i) in sites {
        site_list[i as usize] = c;
    }
    t.callsites = site_list;
    numbering
}

/// `c` with the full name of its file, where the program of `process`
/// names it relatively and its debugging information in full
/// ([`Symbolizer::full_file_name`]): one name per file, whether a source
/// line comes from `__FILE__` or from a return address; `sym` is made when
/// first needed (for a relative name).
///
/// [`Symbolizer::full_file_name`]: crate::symbolize::Symbolizer::full_file_name
pub(crate) fn with_full_name(
    sym: &mut Option<crate::symbolize::Symbolizer>,
    dir: &Path,
    process: &str,
    c: &Callsite,
) -> Option<Callsite> {
    relative(c)?;
    let sym = sym.get_or_insert_with(|| crate::symbolize::Symbolizer::new(dir));
    with_full_name_in(sym, process, c)
}

/// [`with_full_name`] with a symbolizer at hand.
pub(crate) fn with_full_name_in(
    sym: &mut crate::symbolize::Symbolizer,
    process: &str,
    c: &Callsite,
) -> Option<Callsite> {
    let full = sym.full_file_name(process, relative(c)?)?;
    Some(Callsite {
        file: Some(full),
        ..c.clone()
    })
}

/// The file name of `c`, when relative.
fn relative(c: &Callsite) -> Option<&str> {
    (c.file.as_deref()).filter(|f| !f.is_empty() && !f.starts_with('/'))
}

/// A function's name as the trace gives it ([`Symbolizer::function_name`]);
/// `sym` is made when first needed.
///
/// [`Symbolizer::function_name`]: crate::symbolize::Symbolizer::function_name
pub(crate) fn function_name<'a>(
    sym: &mut Option<crate::symbolize::Symbolizer>,
    dir: &Path,
    process: &str,
    text: &'a str,
) -> std::borrow::Cow<'a, str> {
    if crate::symbolize::static_function(text).is_none() {
        return crate::symbolize::demangled(text).map_or(text.into(), Into::into);
    }
    sym.get_or_insert_with(|| crate::symbolize::Symbolizer::new(dir))
        .function_name(process, text)
}

/// Gives the streams read the trace's numbers (and their times in ns),
/// and adds the coarray events of CAF processes when `caf`.
pub(crate) fn finish_bodies(
    dir: &Path,
    bodies: Vec<Body>,
    numbering: &Numbering,
    caf: bool,
) -> Vec<Stream> {
    finish_bodies_from(dir, bodies, numbering, caf, 0, false)
}

/// [`finish_bodies`], with the streams' times in ns from `base` (no event
/// earlier than `base`: see [`span_read`]). With `final_times` (when
/// nothing changes the times made here), each stream's STARTs and ENDs are
/// matched in the same pass ([`crate::intervals::set_derived`]): the
/// analyses do not make a pass of their own for it.
pub(crate) fn finish_bodies_from(
    dir: &Path,
    bodies: Vec<Body>,
    numbering: &Numbering,
    caf: bool,
    base: u64,
    final_times: bool,
) -> Vec<Stream> {
    let mut streams: Vec<Stream> = bodies
        .into_par_iter()
        .zip(numbering.ids.par_iter())
        .map(|((mut s, clock, seen), (site_ids, user_ids, text_ids))| {
            let mut matcher = final_times.then(|| crate::intervals::Matcher::new(s.events.len()));
            // The reading's earliest and latest ticks are those of the
            // events (checked in debug builds, which the tests run).
            #[cfg(debug_assertions)]
            if let Some((lo, hi)) = seen.ticks {
                assert!(s.events.iter().all(|e| (lo..=hi).contains(&e.t_ns)));
            }
            let times = Times::of(clock, seen.ticks, base);
            // Most streams number as their process does (streams of one
            // program meet its callsites in the same order): their events
            // keep their numbers, and only their times are made ns. Every
            // event's numbers are the stream's own (its reading numbered
            // them, and drops the events of a chunk whose numbers it drops):
            // within `site_ids`, `user_ids` and `text_ids`.
            let same = |ids: &[u32]| ids.iter().enumerate().all(|(i, &n)| n == i as u32);
            let (sites, users, texts) = (
                site_ids.len() as u32,
                user_ids.len() as u32,
                text_ids.len() as u32,
            );
            if same(site_ids) && same(user_ids) && same(text_ids) {
                // The loop made for how times are made ns and whether the
                // events are matched, rather than asking at each event.
                macro_rules! keep_numbers {
                    ($ns:expr, $then:expr) => {
                        for (i, e) in s.events.iter_mut().enumerate() {
                            e.t_ns = $ns(e.t_ns);
                            debug_assert!(
                                e.callsite < sites
                                    && (e.user == NO_USER || e.user < users)
                                    && (e.text == NO_TEXT || e.text < texts)
                            );
                            $then(i, &*e);
                        }
                    };
                }
                match (times, matcher.as_mut()) {
                    (Times::Linear { t0, slope, add }, Some(m)) => {
                        keep_numbers!(|t| Times::linear(t, t0, slope, add), |i, e| m.event(i, e))
                    }
                    (_, mut m) => keep_numbers!(|t| times.ns(t), |i, e| {
                        if let Some(m) = m.as_deref_mut() {
                            m.event(i, e);
                        }
                    }),
                }
                if let Some(m) = matcher {
                    crate::intervals::set_derived(&mut s, m);
                }
                return s;
            }
            let ids = (&site_ids[..], &user_ids[..], &text_ids[..]);
            for (i, e) in s.events.iter_mut().enumerate() {
                e.t_ns = times.ns(e.t_ns);
                renumber_event(e, ids, numbering.nowhere);
                if let Some(m) = matcher.as_mut() {
                    m.event(i, e);
                }
            }
            if let Some(m) = matcher {
                crate::intervals::set_derived(&mut s, m);
            }
            s
        })
        .collect();
    if caf {
        for s in &mut streams {
            crate::caf::recognise(dir, s);
        }
    }
    streams
}

/// What [`finish_bodies_from`] does to each event of a stream, for a stream
/// read in windows: its callsite found from its return address (as
/// [`split_parts`] finds it), its time made ns from the base, and its
/// numbers the process's.
pub(crate) struct Renumber<'a> {
    times: Times,
    /// The process's clock correction, and the base its corrected times are
    /// made from (`times` then gives ns on the process's clock).
    corrected: Option<(&'a crate::clocksync::Correction, u64)>,
    ids: &'a StreamIds,
    nowhere: u32,
    /// Whether the stream numbers as its process does.
    same: bool,
    /// Its file's callsites and the callsite of each return address, when
    /// some events take their callsite from their return address.
    sources: Option<(&'a [Callsite], &'a Addresses)>,
    addresses: ReturnAddresses,
}

impl<'a> Renumber<'a> {
    /// For the stream of `head` (its light reading `body`, on its process's
    /// clock), its times made ns from `base` (corrected by `correction`
    /// first, as [`crate::clocksync::apply`] does, when given), numbered by
    /// its process as `ids` say (`nowhere`: the callsite of a number it does
    /// not give).
    pub(crate) fn new(
        head: &'a StreamHead,
        body: &Body,
        (base, correction): (u64, Option<&'a crate::clocksync::Correction>),
        ids: &'a StreamIds,
        nowhere: u32,
    ) -> Renumber<'a> {
        let (s, clock, seen) = body;
        let same = |ids: &[u32]| ids.iter().enumerate().all(|(i, &n)| n == i as u32);
        let from = if correction.is_some() { 0 } else { base };
        Renumber {
            times: Times::of(*clock, seen.ticks, from),
            corrected: correction.map(|c| (c, base)),
            ids,
            nowhere,
            same: same(&ids.0) && same(&ids.1) && same(&ids.2),
            sources: (!head.addresses.is_empty()).then_some((&head.sites[..], &head.addresses)),
            addresses: ReturnAddresses::new(u64::from(s.pts_bytes)),
        }
    }

    /// Renumbers `events` (their argument words in `words`).
    pub(crate) fn apply(&mut self, events: &mut [Event], words: &[u64]) {
        // Most streams: their times made ns, nothing else.
        if self.same && self.sources.is_none() && self.corrected.is_none() {
            match self.times {
                Times::Linear { t0, slope, add } => {
                    for e in events {
                        e.t_ns = Times::linear(e.t_ns, t0, slope, add);
                    }
                }
                times => {
                    for e in events {
                        e.t_ns = times.ns(e.t_ns);
                    }
                }
            }
            return;
        }
        let times = self.times;
        for e in events {
            e.t_ns = times.ns(e.t_ns);
            if let Some((c, base)) = self.corrected {
                e.t_ns = c.correct(e.t_ns).saturating_sub(base);
            }
            if let Some((sites, found)) = self.sources {
                let lacks = |c: u32| sites.get(c as usize).is_some_and(|c| c.file.is_none());
                let site = self.addresses.unplaced(e, words, lacks);
                if let Some(&Some(site)) = site.and_then(|a| found.get(&a)) {
                    e.callsite = site;
                }
            }
            if !self.same {
                let (sites, users, texts) = self.ids;
                renumber_event(e, (&sites[..], &users[..], &texts[..]), self.nowhere);
            }
        }
    }
}

/// The times of a stream summarized on its own as it is read, made ns
/// window by window ([`OwnTimes::apply`]) from its first event's time:
/// [`finish_bodies_from`]'s times, but for the base, when the stream's
/// times never go backwards.
#[derive(Debug, Clone)]
pub(crate) struct OwnTimes {
    clock: Option<Clock>,
    /// The stream's first event's time in ns on the clock.
    base: Option<u64>,
    /// The latest tick made ns.
    last: u64,
    /// Whether a time was earlier than the one before (nothing is made ns
    /// then).
    backwards: bool,
}

impl OwnTimes {
    /// For a stream on `clock` (which keeps the order of times).
    pub(crate) fn new(clock: Option<Clock>) -> OwnTimes {
        OwnTimes {
            clock,
            base: None,
            last: 0,
            backwards: false,
        }
    }

    /// Makes the ticks of `events` (the stream's next ones) ns from the
    /// stream's first event: false when a time is earlier than the one
    /// before (the times are then left as they are).
    pub(crate) fn apply(&mut self, events: &mut [Event]) -> bool {
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return !self.backwards;
        };
        let (lo, hi) = (first.t_ns, last.t_ns);
        if self.base.is_some() && lo < self.last || hi < lo {
            self.backwards = true;
            return false;
        }
        let clock = self.clock;
        let base = *self
            .base
            .get_or_insert_with(|| clock.map_or(lo, |c| c.ns_u64(lo)));
        self.last = hi;
        // Every tick of the window within (lo, hi), as the whole stream's
        // are made ns within its earliest and latest, when the times go
        // forward (checked in the same pass: when they do not, what was
        // made is not used).
        let mut prev = lo;
        let mut back = false;
        match Times::of(clock, Some((lo, hi)), base) {
            Times::Linear { t0, slope, add } => {
                for e in events.iter_mut() {
                    back |= e.t_ns < prev;
                    prev = e.t_ns;
                    e.t_ns = Times::linear(e.t_ns, t0, slope, add);
                }
            }
            times => {
                for e in events.iter_mut() {
                    back |= e.t_ns < prev;
                    prev = e.t_ns;
                    e.t_ns = times.ns_unchecked(e.t_ns);
                }
            }
        }
        self.backwards = back;
        !back
    }

    /// The stream's first event's time in ns on its clock (none before
    /// its first event).
    pub(crate) fn base(&self) -> Option<u64> {
        self.base
    }
}

/// Gives event `e`, numbered by its stream, the numbers `ids` give its
/// callsite, user event and text (`nowhere`: the callsite of a number they
/// do not give).
#[inline(always)]
fn renumber_event(e: &mut Event, (sites, users, texts): (&[u32], &[u32], &[u32]), nowhere: u32) {
    e.callsite = sites.get(e.callsite as usize).copied().unwrap_or(nowhere);
    if e.user != NO_USER {
        e.user = users.get(e.user as usize).copied().unwrap_or(NO_USER);
    }
    if e.text != NO_TEXT {
        e.text = texts.get(e.text as usize).copied().unwrap_or(NO_TEXT);
    }
}

/// The earliest and latest times, in ns on their clocks, of the events of
/// `bodies` (none without events), from what the reading saw: the times of
/// the earliest and latest ticks, each stream's clock keeping the order of
/// times. `None` when that cannot tell: a clock that does not (a damaged
/// one), or a clock measurement (the process's times are then corrected,
/// which is known only once its events are in ns).
pub(crate) fn span_read(bodies: &[Body]) -> Option<Option<(u64, u64)>> {
    if bodies.iter().any(|(_, _, seen)| seen.clock_sync()) {
        return None;
    }
    span_uncorrected(bodies)
}

/// [`span_read`], of the times before a clock correction.
pub(crate) fn span_uncorrected(bodies: &[Body]) -> Option<Option<(u64, u64)>> {
    let mut span: Option<(u64, u64)> = None;
    for (_, clock, seen) in bodies {
        if clock.as_ref().is_some_and(|c| !c.keeps_order()) {
            return None;
        }
        let Some((lo, hi)) = seen.ticks else {
            continue;
        };
        let ns = |t: u64| clock.as_ref().map_or(t, |c| c.ns_u64(t));
        let (lo, hi) = (ns(lo), ns(hi));
        span = Some(match span {
            Some((a, b)) => (a.min(lo), b.max(hi)),
            None => (lo, hi),
        });
    }
    Some(span)
}

/// The stream of `body` with its times in ns (as [`in_ns`] gives it).
pub(crate) fn body_in_ns((s, clock, _): &Body) -> Stream {
    let mut s = s.clone();
    to_ns(&mut s, *clock);
    s
}

/// Makes the times of `s` ns on `clock` (ticks).
fn to_ns(s: &mut Stream, clock: Option<Clock>) {
    if let Some(c) = clock {
        for e in &mut s.events {
            e.t_ns = c.ns_u64(e.t_ns);
        }
    }
}

/// The streams read with their times in ns, their events still numbered
/// by their files (enough for the clock corrections).
pub(crate) fn in_ns(bodies: Vec<Body>) -> Vec<Stream> {
    bodies
        .into_par_iter()
        .map(|(mut s, clock, _)| {
            to_ns(&mut s, clock);
            s
        })
        .collect()
}

/// Makes the streams' times relative to `base` (stream by stream, in
/// parallel): how many events of each lie too far after it (put at the
/// latest time kept).
pub(crate) fn shift(streams: &mut [Stream], base: i128) -> Vec<u64> {
    streams
        .par_iter_mut()
        .map(|s| {
            // What was derived from the times before is made again.
            s.events_changed();
            let mut late = 0u64;
            // The same in 64 bits, for a base within them (always, but for
            // a clock gone wild).
            if let Ok(b) = u64::try_from(base) {
                for e in &mut s.events {
                    let t = e.t_ns.saturating_sub(b);
                    if t > MAX_T_NS {
                        late += 1;
                    }
                    e.t_ns = t.min(MAX_T_NS);
                }
                return late;
            }
            for e in &mut s.events {
                let t = e.t_ns as i128 - base;
                if t > MAX_T_NS as i128 {
                    late += 1;
                }
                e.t_ns = t.clamp(0, MAX_T_NS as i128) as u64;
            }
            late
        })
        .collect()
}

/// The problem of a stream with `late` events too far after the trace's start.
pub(crate) fn late_problem(t: &mut Trace, process: &str, stream: u32, late: u64) {
    if late > 0 {
        t.problems.push(format!(
            "process {process} stream {stream}: {late} events are stamped more than {} days after the trace's start \
             (damaged clock data); they are put at that time",
            MAX_T_NS / 86_400_000_000_000
        ));
    }
}

/// Where the record of a stream stops, when its process did not end
/// normally or the stream is damaged (`last`: its last event's time, kind
/// and phase).
pub(crate) fn stop_problem(
    t: &mut Trace,
    process: &str,
    stream: u32,
    damaged: bool,
    last: Option<(u64, u16, u8)>,
) {
    let ended = t
        .processes
        .iter()
        .find(|p| p.name == process)
        .and_then(|p| p.manifest.as_ref())
        .is_some_and(|m| m.status == "complete");
    if ended && !damaged {
        return;
    }
    match last {
        Some((t_ns, kind, phase)) => {
            t.problems.push(format!(
            "process {process} stream {stream}: the record stops at {:.3} ms (last event: {} {})",
            t_ns as f64 / 1e6,
            gaspard_format::kinds::kind(kind).map_or("user event", |k| k.name),
            ["START", "END", "ATOMIC"].get(phase as usize).unwrap_or(&"?")
        ))
        }
        None => t.problems.push(format!(
            "process {process} stream {stream}: nothing recorded"
        )),
    }
}

/// The processes killed before any of their events reached the disk
/// (`recorded`: the process of each stream read).
pub(crate) fn killed_problems(t: &mut Trace, recorded: &[&str]) {
    let mut out = Vec::new();
    for p in &t.processes {
        let killed = p.manifest.as_ref().is_some_and(|m| m.status == "running");
        if killed && !recorded.contains(&p.name.as_str()) {
            out.push(format!(
                "process {}: nothing it recorded reached the disk (a process killed outright, by SIGKILL, \
                 cannot write the events it still held in memory)",
                p.name
            ));
        }
    }
    t.problems.extend(out);
}

/// Where the trace starts, in absolute nanoseconds (clock corrections
/// applied): the earliest process start its manifest gives, or the first
/// event of a process without manifest if earlier. `firsts` holds the first
/// event's time of each stream that has events, with its process.
pub(crate) fn trace_start(t: &Trace, firsts: &[(&str, u64)]) -> i128 {
    let base = t
        .processes
        .iter()
        .filter_map(|p| {
            let first = p.manifest.as_ref()?.clock_refs.first()?.1;
            Some(match t.clock_sync.iter().find(|c| c.process == p.name) {
                Some(c) if crate::clocksync::enabled() => c.correct(first),
                _ => first,
            })
        })
        .min();
    // A process without its manifest may have started before every process
    // that has one: its first event then starts the trace.
    let unlisted = firsts
        .iter()
        .filter(|(process, _)| {
            !t.processes
                .iter()
                .any(|p| p.name == *process && p.manifest.is_some())
        })
        .map(|&(_, first)| first)
        .min();
    let base = match (base, unlisted) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    base.map(i128::from)
        .or_else(|| firsts.iter().map(|&(_, first)| first as i128).min())
        .unwrap_or(0)
}

/// Says where the manifests and the stream files disagree: a stream the
/// manifest lists whose file is gone, a file it does not list, or fewer
/// events than it counts when no stream said it was damaged (a stream cut
/// exactly between two chunks looks whole).
fn check_manifests(
    t: &mut Trace,
    streams: &[PathBuf],
    skipped: &[PathBuf],
    profiles: &[PathBuf],
    read: &[&StreamHead],
) {
    let file_name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    let present: std::collections::HashSet<String> =
        streams.iter().filter_map(|p| file_name(p)).collect();
    let profiled: std::collections::HashSet<String> = profiles
        .iter()
        .filter_map(|f| f.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    let mut by_process: HashMap<&str, Vec<&StreamHead>> = HashMap::default();
    for r in read {
        by_process.entry(r.process.as_str()).or_default().push(r);
    }
    for p in &t.processes {
        let Some(m) = &p.manifest else { continue };
        if profiled.contains(&p.name) || m.status == "running" {
            continue;
        }
        let mine = by_process.remove(p.name.as_str()).unwrap_or_default();
        let listed: std::collections::HashSet<&str> =
            m.streams.iter().map(|e| e.file.as_str()).collect();
        for s in &mine {
            let f = file_name(&s.path).unwrap_or_default();
            if !listed.contains(f.as_str()) {
                t.problems.push(format!(
                    "process {}: stream file {f} is not listed in its manifest",
                    p.name
                ));
            }
        }
        let n: u64 = mine.iter().map(|s| s.events).sum();
        if n >= m.events {
            continue;
        }
        let missing = m.events - n;
        // A context that never wrote a buffer has no file: a listed file
        // that is gone matters only when events are missing.
        let gone: Vec<_> = m
            .streams
            .iter()
            .filter(|e| !present.contains(&e.file))
            .collect();
        for e in &gone {
            t.problems.push(format!(
                "process {}: stream {} ({}) is listed in its manifest but its file is missing: \
                 the events of its thread {} are lost",
                p.name, e.id, e.file, e.thread
            ));
        }
        let reported = !gone.is_empty()
            || mine.iter().any(|s| s.damaged)
            || skipped
                .iter()
                .filter_map(|p| file_name(p))
                .any(|f| listed.contains(f.as_str()));
        if gone.is_empty() && !reported {
            t.problems.push(format!(
                "process {}: its manifest counts {} events but its streams hold {n}: \
                 {missing} events are missing (a stream file was cut short between two chunks)",
                p.name, m.events
            ));
        } else if !gone.is_empty() {
            t.problems.push(format!(
                "process {}: {missing} of the {} events its manifest counts are missing",
                p.name, m.events
            ));
        }
    }
}

/// What the reader does with events of each kind, a bit each
/// ([`KindClass`]), by kind number: one look-up per event instead of
/// comparisons with several kinds.
fn kind_classes() -> &'static [u8] {
    static CLASSES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    CLASSES.get_or_init(|| {
        let codeptr = codeptr_kinds();
        (0..1usize << 16)
            .map(|k| {
                let kind = k as u16;
                let mut c = 0;
                let name = gaspard_format::kinds::kind(kind).map_or("", |k| k.name);
                if kind == gaspard_format::kinds::GASPARD_CLOCK_SYNC
                    || FACT_KINDS.contains(&name)
                    || crate::objects::OBJECT_KINDS.contains(&name)
                {
                    c |= KindClass::LIGHT_KEEP;
                }
                if c != 0 || codeptr[k] || kind == gaspard_format::kinds::C_FUNC {
                    c |= KindClass::LIGHT_ARGS;
                }
                if kind == gaspard_format::kinds::C_FUNC
                    || kind == gaspard_format::kinds::GASPARD_USER
                {
                    c |= KindClass::NAMED;
                }
                if kind == gaspard_format::kinds::GASPARD_CLOCK_SYNC {
                    c |= KindClass::CLOCK_SYNC;
                }
                if codeptr[k] {
                    c |= KindClass::CODEPTR;
                }
                if name.starts_with("GASP_CAF_") {
                    c |= KindClass::CAF;
                }
                c
            })
            .collect()
    })
}

/// The bits of [`kind_classes`].
struct KindClass;

impl KindClass {
    /// Its arguments are decoded in a light reading (a function's
    /// signature, a clock measurement, a return address, [`FACT_KINDS`]).
    const LIGHT_ARGS: u8 = 1;
    /// Its events are all kept in a light reading, with their arguments
    /// (clock measurements, [`FACT_KINDS`], the shared objects'); of those
    /// that carry a return
    /// address, the first of each address is.
    const LIGHT_KEEP: u8 = 2;
    /// Its events name a text or a user event ([`Local::number`]).
    const NAMED: u8 = 4;
    /// A clock measurement (`GASPARD_CLOCK_SYNC`).
    const CLOCK_SYNC: u8 = 8;
    /// Its events may carry a return address (`codeptr`).
    const CODEPTR: u8 = 16;
    /// A coarray operation (`GASP_CAF_*`), whose analyses need the whole
    /// stream.
    const CAF: u8 = 32;
}

/// Kinds whose events tell a stream's analyses what they need to know
/// before its first window when it is read in windows
/// ([`crate::summary::Facts`], the MPI rank), besides the shared objects'
/// ([`crate::objects::OBJECT_KINDS`]): a start-up that gives a rank, a
/// dynamic window (which makes a Coarray Fortran process). A light reading
/// keeps them.
const FACT_KINDS: [&str; 4] = [
    "GASP_MPI_INIT",
    "GASP_MPI_INIT_THREAD",
    "GASP_SHMEM_INIT",
    "GASP_MPI_WIN_CREATE_DYNAMIC",
];

/// Kinds whose events may carry a return address (`codeptr`), by number.
fn codeptr_kinds() -> &'static [bool] {
    static KINDS: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        let mut v = vec![false; 1 << 16];
        for k in gaspard_format::kinds::all_kinds() {
            v[k.id as usize] = k.start.iter().chain(k.end).any(|(n, _)| *n == "codeptr");
        }
        v
    })
}

/// Each process's clock references (ticks, ns) from its manifest.
pub type ClockRefs = HashMap<String, Vec<(u64, u64)>>;

/// One stream file, read: what was wrong with it, and its stream (times in
/// ns on its process's clock, callsites and user events numbered by the
/// stream itself) unless nothing could be read.
#[derive(Debug)]
pub struct StreamPart {
    /// What was wrong, in the order found.
    pub problems: Vec<String>,
    /// The stream, with its own numbering of callsites and user events.
    pub(crate) stream: Option<(Stream, Local)>,
    /// Its process's clock while its events' times are still in ticks
    /// ([`crate::trace::read`] gives them in ns as it renumbers them, in
    /// the same pass over the events).
    pub(crate) clock: Option<Clock>,
    /// Its events, when it was read light ([`Reading::Light`]: not all
    /// kept).
    pub(crate) counted: Option<u64>,
}

/// Reads, decodes and converts stream files, in parallel. Every stream file
/// of a process must be among `paths` (a process's clock is fitted to the
/// references of all its streams). The parts come in the order of `paths`.
pub fn read_streams(paths: &[PathBuf], manifest_refs: &ClockRefs) -> Vec<StreamPart> {
    let progress = progress_bar(paths, 1);
    let parts = read_streams_shown(paths, manifest_refs, progress.as_ref(), Reading::Whole);
    if let Some(pb) = progress {
        pb.finish_and_clear();
    }
    parts
}

/// [`read_streams`], with the bytes of each file read added to `progress`.
pub(crate) fn read_streams_shown(
    paths: &[PathBuf],
    manifest_refs: &ClockRefs,
    progress: Option<&indicatif::ProgressBar>,
    reading: Reading,
) -> Vec<StreamPart> {
    // Each stream file is read and decoded on its own, in parallel; what was
    // wrong with it is reported in file order.
    let read: Vec<_> = paths
        .par_iter()
        .map_init(ChunkDefs::default, |defs, path| {
            let mut problems = Vec::new();
            let r = read_stream(path, defs, &mut problems, reading);
            if let Some(pb) = progress {
                pb.inc(std::fs::metadata(path).map_or(0, |m| m.len()));
            }
            (r, problems)
        })
        .collect();
    let clocks = fit_clocks(
        manifest_refs,
        read.iter()
            .filter_map(|(r, _)| r.as_ref())
            .flat_map(|(s, chunks, _, _)| {
                let p = s.process.as_str();
                std::iter::once((p, None)).chain(chunks.iter().map(move |c| (p, Some(c))))
            }),
    );
    // Events, read with their times in ticks, keep them: they are given
    // their times in ns with the clock of their process by whoever reads
    // the part.
    read.into_iter()
        .map(|(r, problems)| {
            let clock = r
                .as_ref()
                .and_then(|(s, _, _, _)| clocks.get(&s.process).copied());
            let counted = r.as_ref().and_then(|r| r.3);
            StreamPart {
                problems,
                stream: r.map(|(s, _, local, _)| (s, local)),
                clock,
                counted,
            }
        })
        .collect()
}

/// The clock of each process named in `chunks`, fitted to the references
/// of its manifest and of all its chunks (`chunks` names the process of
/// each stream, and of each of its chunks).
pub(crate) fn fit_clocks<'a>(
    manifest_refs: &ClockRefs,
    chunks: impl Iterator<Item = (&'a str, Option<&'a ChunkHeader>)>,
) -> HashMap<String, Clock> {
    let mut refs: ClockRefs = HashMap::default();
    for (process, c) in chunks {
        if !refs.contains_key(process) {
            let r = manifest_refs.get(process).cloned().unwrap_or_default();
            refs.insert(process.to_string(), r);
        }
        if let (Some(r), Some(c)) = (refs.get_mut(process), c) {
            r.push((c.ref_ticks, c.ref_ns));
        }
    }
    let slopes = host_slopes(manifest_refs);
    refs.into_iter()
        .map(|(k, v)| {
            let host = k.rsplit_once('-').map_or(k.as_str(), |(h, _)| h);
            let slope = slopes.get(host).copied().unwrap_or(1.0);
            (k, Clock::fit(v, slope))
        })
        .collect()
}

/// A progress bar on stderr for reading big traces (at least
/// [`PROGRESS_BYTES`] of stream files), when stderr is a terminal, for
/// files read `times` times.
pub(crate) fn progress_bar(streams: &[PathBuf], times: u64) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    let total: u64 = streams
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum::<u64>()
        .saturating_mul(times);
    if total < PROGRESS_BYTES || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new(total);
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "reading {bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Some(pb)
}

/// Traces with this many bytes of streams show a progress bar while read.
const PROGRESS_BYTES: u64 = 64 << 20;

/// Callsites and user events of one stream, numbered in the order it meets
/// them.
#[derive(Debug, Default)]
pub(crate) struct Local {
    pub(crate) sites: Vec<Callsite>,
    site_ids: HashMap<Callsite, u32>,
    pub(crate) users: Vec<UserDef>,
    user_ids: HashMap<u64, u32>,
    /// String arguments, numbered in the order the stream meets them.
    pub(crate) texts: Vec<String>,
    text_ids: HashMap<String, u32>,
    /// Where the argument words of the last event of each kind (below
    /// [`SHARED_ARG_KINDS`]) are: an event with the same words (an END
    /// repeating its START's, a loop repeating a call) shares them.
    last_args: Vec<(u32, u32)>,
    /// The last user event numbered (its id, its number), looked for
    /// before `user_ids`: a user event's START is mostly followed by its
    /// END or by the same event again.
    last_user: Option<(u64, u32)>,
    /// What the reading saw of the events kept.
    pub(crate) seen: Seen,
    /// Where the return address is among the words of its events (a light
    /// reading, which looks for them).
    return_addresses: ReturnAddresses,
    /// The (return address, callsite) pairs met (a light reading keeps the
    /// first event of each).
    addresses: rustc_hash::FxHashSet<(u64, u32)>,
}

/// What the reading saw of a stream's events: the earliest and latest of
/// their times, in ticks, and the [`KindClass`] bits of their kinds, or'ed
/// (a light reading: of every event, kept or not; else of those kept, but
/// for the times of a reading in windows, whose sink has them), and
/// (a light reading) whether a time was ever earlier than the one before.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Seen {
    ticks: Option<(u64, u64)>,
    classes: u8,
    /// The time of the last event, in ticks (a light reading).
    last: u64,
    /// Whether some event's time was earlier than the one before (a light
    /// reading).
    backwards: bool,
}

impl Seen {
    /// Adds what a chunk's conversion saw (`lo > hi`: no event).
    fn add(&mut self, lo: u64, hi: u64, classes: u8) {
        if lo <= hi {
            self.ticks = Some(match self.ticks {
                Some((a, b)) => (a.min(lo), b.max(hi)),
                None => (lo, hi),
            });
        }
        self.classes |= classes;
    }

    /// Whether the events' times never go backwards and none of them is a
    /// coarray operation: what reading the stream in windows needs (known
    /// of a light reading).
    pub(crate) fn windowable(&self) -> bool {
        !self.backwards && self.classes & KindClass::CAF == 0
    }

    /// Whether some event is a clock measurement.
    pub(crate) fn clock_sync(&self) -> bool {
        self.classes & KindClass::CLOCK_SYNC != 0
    }

    /// Whether some event may carry a return address.
    fn codeptr(&self) -> bool {
        self.classes & KindClass::CODEPTR != 0
    }
}

/// Kinds whose events may share their argument words with the previous
/// event of the kind.
const SHARED_ARG_KINDS: usize = 2048;

/// The definitions of the chunk being converted, met before the events that
/// use them (both encoders write a definition before its first use in a
/// chunk; an id not defined yet reads as no callsite, string or user event
/// definition), and the stream's number of each of its callsites. Kept from
/// chunk to chunk (cleared) so that its tables are allocated once.
#[derive(Debug, Default)]
pub(crate) struct ChunkDefs {
    strings: HashMap<u32, String>,
    callsites: HashMap<u32, gaspard_format::codec::Callsite>,
    users: HashMap<u64, UserDef>,
    /// The stream's number of each callsite id below [`DENSE_SITES`], plus
    /// one (0: not met yet in this chunk).
    dense_sites: Vec<u32>,
    /// The same for larger ids.
    far_sites: HashMap<u32, u32>,
}

/// Callsite ids below this are numbered through a table.
const DENSE_SITES: usize = 1 << 16;

impl ChunkDefs {
    fn clear(&mut self) {
        self.strings.clear();
        self.callsites.clear();
        self.users.clear();
        self.dense_sites.clear();
        self.far_sites.clear();
    }

    /// The stream's number of callsite `id` of the chunk.
    #[inline(always)]
    fn site(&mut self, id: u32, local: &mut Local) -> u32 {
        // Met before in the chunk (most events): one look.
        match self.dense_sites.get(id as usize) {
            Some(&n) if n > 0 => n - 1,
            _ => self.site_first(id, local),
        }
    }

    /// [`ChunkDefs::site`] of a callsite not met yet in the chunk, or past
    /// [`DENSE_SITES`].
    #[inline(never)]
    fn site_first(&mut self, id: u32, local: &mut Local) -> u32 {
        let at = id as usize;
        if at < DENSE_SITES {
            if at >= self.dense_sites.len() {
                self.dense_sites.resize(at + 1, 0);
            }
            match self.dense_sites[at] {
                0 => {
                    let site = self.stream_site(id, local);
                    self.dense_sites[at] = site + 1;
                    site
                }
                n => n - 1,
            }
        } else {
            match self.far_sites.get(&id) {
                Some(&n) => n,
                None => {
                    let site = self.stream_site(id, local);
                    self.far_sites.insert(id, site);
                    site
                }
            }
        }
    }

    /// The stream's number of callsite `id`, numbered when first met.
    #[cold]
    fn stream_site(&self, id: u32, local: &mut Local) -> u32 {
        let key = chunk_callsite(&self.callsites, &self.strings, id);
        let n = local.sites.len() as u32;
        *local.site_ids.entry(key.clone()).or_insert_with(|| {
            local.sites.push(key);
            n
        })
    }
}

/// Callsite `id` of a chunk, its file name looked up among the chunk's
/// strings (no callsite, or no file, when not defined).
pub(crate) fn chunk_callsite(
    callsites: &HashMap<u32, gaspard_format::codec::Callsite>,
    strings: &HashMap<u32, String>,
    id: u32,
) -> Callsite {
    let cs = callsites.get(&id).copied().unwrap_or_default();
    Callsite {
        file: if cs.file == 0 {
            None
        } else {
            strings.get(&cs.file).cloned()
        },
        line: cs.line,
        col: cs.col,
    }
}

/// Adds the events of a chunk to a stream's `events` (their argument words
/// to its `arg_words`) as the chunk is decoded, with their times in ticks
/// (`t_ns` is in ns once the stream's clock is known), and callsite and user
/// event numbers of the stream's own (renumbered by the reader in stream
/// order). `LIGHT`: for [`Reading::Light`] (and [`Reading::Ahead`]);
/// `CHECK`: whether the chunk could pass [`MAX_STREAM_EVENTS`] events or
/// argument words (each event is checked then; most chunks cannot);
/// `WINDOW`: reading in windows ([`read_windows`]).
struct Convert<'a, const LIGHT: bool, const CHECK: bool, const WINDOW: bool> {
    events: &'a mut Vec<Event>,
    arg_words: &'a mut Vec<u64>,
    local: &'a mut Local,
    defs: &'a mut ChunkDefs,
    /// Set when an event would pass [`MAX_STREAM_EVENTS`] events or
    /// argument words: it and the chunk's later events are not kept.
    full: bool,
    /// Light (`LIGHT`), for what the trace as a whole needs of a stream
    /// ([`Reading::Light`]): every event numbers callsites, texts and user
    /// events, and only the first event, clock measurements and the first
    /// event of each return address and callsite are kept; the others are
    /// counted in `seen`.
    seen: &'a mut u64,
    /// How many events a light reading reads.
    limit: u64,
    /// [`kind_classes`], looked up once per chunk.
    classes: &'static [u8],
    /// Reading in windows: how many events `events` holds when its window
    /// is full (`usize::MAX` otherwise), and what takes each window.
    cap: usize,
    windows: Option<&'a mut dyn WindowSink>,
    /// The earliest and latest times of the events kept, in ticks, and
    /// their kinds' classes, or'ed ([`Seen`]).
    lo: u64,
    hi: u64,
    kept_classes: u8,
}

impl Local {
    /// The stream's numbers of the text of a function event (`first`: its
    /// signature's string id among the chunk's `strings`) or of the user
    /// event of a user event (`first`: its id, defined among `users`),
    /// numbered when first met. Other kinds have neither (most events:
    /// answered without a call).
    #[inline(always)]
    fn number(
        &mut self,
        strings: &HashMap<u32, String>,
        users: &HashMap<u64, UserDef>,
        kind: u16,
        class: u8,
        first: Option<u64>,
    ) -> (u32, u32) {
        if class & KindClass::NAMED == 0 {
            return (NO_TEXT, NO_USER);
        }
        // The user event of the one before (a START's END, mostly).
        if let (Some(id), Some((last, n))) = (first, self.last_user) {
            if kind == gaspard_format::kinds::GASPARD_USER && last == id {
                return (NO_TEXT, n);
            }
        }
        self.number_named(strings, users, kind, first)
    }

    /// [`Local::number`] of a function or user event.
    #[inline(never)]
    fn number_named(
        &mut self,
        strings: &HashMap<u32, String>,
        users: &HashMap<u64, UserDef>,
        kind: u16,
        first: Option<u64>,
    ) -> (u32, u32) {
        let local = self;
        let (mut text, mut user) = (NO_TEXT, NO_USER);
        if kind == gaspard_format::kinds::C_FUNC {
            if let Some(id) = first {
                let sig = strings.get(&(id as u32)).map_or("?", |s| s.as_str());
                text = match local.text_ids.get(sig) {
                    Some(&n) => n,
                    None => {
                        let n = local.texts.len() as u32;
                        local.texts.push(sig.to_string());
                        local.text_ids.insert(sig.to_string(), n);
                        n
                    }
                };
            }
        } else if kind == gaspard_format::kinds::GASPARD_USER {
            if let Some(id) = first {
                if let Some((last, n)) = local.last_user {
                    if last == id {
                        return (text, n);
                    }
                }
                let n = local.users.len() as u32;
                user = *local.user_ids.entry(id).or_insert_with(|| {
                    local.users.push(users.get(&id).cloned().unwrap_or(UserDef {
                        id,
                        name: format!("user_event_{id}"),
                        desc: None,
                        unreadable: None,
                    }));
                    n
                });
                local.last_user = Some((id, user));
            }
        }
        (text, user)
    }
}

impl<const LIGHT: bool, const CHECK: bool, const WINDOW: bool> Convert<'_, LIGHT, CHECK, WINDOW> {
    /// Hands the full window to the sink (another event follows), before
    /// an event is kept: the events it leaves begin the next one.
    #[cold]
    #[inline(never)]
    fn next_window(&mut self) {
        let Some(sink) = self.windows.as_deref_mut() else {
            self.cap = usize::MAX;
            return;
        };
        let codeptr = (self.kept_classes | self.local.seen.classes) & KindClass::CODEPTR != 0;
        let info = WindowInfo {
            more: true,
            local: self.local,
            codeptr,
        };
        self.cap = sink.window(self.events, self.arg_words, info);
        // The words the last events of each kind were kept with are no
        // longer where it says: an event shares the words kept before it only
        // once they are compared.
        self.local.last_args.fill((0, u32::MAX));
    }

    /// The [`KindClass`] bits of `kind`.
    #[inline(always)]
    fn class(&self, kind: u16) -> u8 {
        // The table has a byte for every u16.
        self.classes.get(kind as usize).copied().unwrap_or(0)
    }

    /// Keeps `e`, of a kind of class `class`, in the stream's numbers
    /// (`site`, its text and user event `names`), its argument words at
    /// `args` (where, how many), and notes its time and class ([`Seen`]).
    #[inline(always)]
    fn keep(
        &mut self,
        e: gaspard_format::codec::Event,
        class: u8,
        site: u32,
        (args_at, nargs): (u32, u32),
        (text, user): (u32, u32),
    ) {
        // (Read in windows, the times are the sink's: the earliest and
        // latest are not used.)
        if !WINDOW {
            self.lo = self.lo.min(e.ts);
            self.hi = self.hi.max(e.ts);
        }
        self.kept_classes |= class;
        self.events.push(Event {
            t_ns: e.ts,
            kind: e.kind,
            phase: e.phase,
            flags: e.flags,
            callsite: site,
            args_at,
            nargs,
            text,
            user,
        });
    }
}

impl<const LIGHT: bool, const CHECK: bool, const WINDOW: bool> gaspard_format::codec::Sink
    for Convert<'_, LIGHT, CHECK, WINDOW>
{
    fn string(&mut self, id: u32, s: String) {
        self.defs.strings.insert(id, s);
    }
    fn callsite(&mut self, id: u32, c: gaspard_format::codec::Callsite) {
        self.defs.callsites.insert(id, c);
    }
    fn user(&mut self, def: UserDef) {
        self.defs.users.insert(def.id, def);
    }
    #[inline(always)]
    fn wants_args(&mut self, kind: u16) -> bool {
        !LIGHT || self.class(kind) & KindClass::LIGHT_ARGS != 0
    }

    #[inline]
    fn event_same_args(&mut self, e: gaspard_format::codec::Event, words: &[u64]) {
        if WINDOW && self.events.len() >= self.cap {
            self.next_window();
        }
        // The previous event of the kind in the chunk was kept with the same
        // words, and `last_args` holds where (every kind below
        // SHARED_ARG_KINDS): they are shared without comparing them. The
        // light reading does not keep every event; a function's first word
        // names it (numbered by `event`).
        let class = self.class(e.kind);
        let named = class & KindClass::NAMED != 0;
        match self.local.last_args.get(e.kind as usize) {
            Some(&(at, n)) if !LIGHT && !CHECK && !named && n as usize == words.len() => {
                let site = self.defs.site(e.callsite, self.local);
                self.keep(e, class, site, (at, n), (NO_TEXT, NO_USER));
            }
            _ => self.event(e, None, words),
        }
    }

    #[inline]
    fn event(&mut self, e: gaspard_format::codec::Event, user_id: Option<u64>, words: &[u64]) {
        if WINDOW && self.events.len() >= self.cap {
            self.next_window();
        }
        let site = self.defs.site(e.callsite, self.local);
        let class = self.class(e.kind);
        if LIGHT {
            if self.full || *self.seen >= self.limit {
                self.full = true;
                return;
            }
            *self.seen += 1;
            // Every event's time and kind is seen, kept or not.
            self.lo = self.lo.min(e.ts);
            self.hi = self.hi.max(e.ts);
            self.kept_classes |= class;
            let order = &mut self.local.seen;
            order.backwards |= e.ts < order.last;
            order.last = e.ts;
            let keep = *self.seen == 1
                || class & KindClass::LIGHT_KEEP != 0
                || (class & KindClass::CODEPTR != 0 && self.local.new_address(&e, site, words));
            if !keep {
                let first = user_id.or_else(|| words.first().copied());
                let d = &*self.defs;
                self.local
                    .number(&d.strings, &d.users, e.kind, class, first);
                return;
            }
        }
        // A user event's words are its id, then those given.
        let n = words.len() + usize::from(user_id.is_some());
        if CHECK
            && (self.full
                || self.events.len() >= MAX_STREAM_EVENTS
                || self.arg_words.len() + n > MAX_STREAM_EVENTS)
        {
            self.full = true;
            return;
        }
        let first = user_id.or_else(|| words.first().copied());
        let local = &mut *self.local;
        let (text, user) = local.number(&self.defs.strings, &self.defs.users, e.kind, class, first);
        let arg_words = &mut *self.arg_words;
        let (args_at, nargs) = match (local.last_args.get_mut(e.kind as usize), user_id) {
            // A system kind's words given again are the previous ones of
            // its kind (the encoder said so, `event_same_args`): those given
            // here differ from them, but at a chunk's start.
            (Some(last), None) => {
                *last = keep_args(arg_words, words);
                *last
            }
            // A user event's are compared with the last kept (every user
            // event is of one kind), without being put together first.
            (Some(last), Some(u)) => {
                let (at, kept_n) = *last;
                let kept = arg_words.get(at as usize..(at + kept_n) as usize);
                let same = kept.is_some_and(|k| {
                    k.split_first().is_some_and(|(&id, rest)| {
                        id == u && gaspard_format::codec::same_words(rest, words)
                    })
                });
                if !same {
                    *last = keep_user_args(arg_words, u, words);
                }
                *last
            }
            (None, None) => keep_args(arg_words, words),
            (None, Some(u)) => keep_user_args(arg_words, u, words),
        };
        self.keep(e, class, site, (args_at, nargs), (text, user));
    }
}

impl Local {
    /// Whether the events read so far let their stream be summarized on its
    /// own as it is read, before the rest of its process is known: none is
    /// a clock measurement, a start-up, a dynamic window or a shared
    /// object's event (what the light reading keeps for the analyses of the
    /// process's streams: [`KindClass::LIGHT_KEEP`]), nor a coarray
    /// operation.
    pub(crate) fn alone(&self) -> bool {
        self.seen.classes & (KindClass::LIGHT_KEEP | KindClass::CAF) == 0
    }

    /// Whether `e` (its callsite `site`, its argument `words`) is the
    /// first event of its return address and callsite (one without a
    /// return address is not kept): those that give the stream's callsites
    /// found from return addresses ([`find_sources`]) in the same order as
    /// all of them do.
    fn new_address(&mut self, e: &gaspard_format::codec::Event, site: u32, words: &[u64]) -> bool {
        match self.return_addresses.of((e.kind, e.phase, e.flags), words) {
            Some(addr) => self.addresses.insert((addr, site)),
            None => false,
        }
    }

    /// What it holds, to go back to with [`Local::truncate`].
    fn lens(&self) -> (usize, usize, usize) {
        (self.sites.len(), self.users.len(), self.texts.len())
    }

    /// Forgets what was numbered since `lens`.
    fn truncate(&mut self, (sites, users, texts): (usize, usize, usize)) {
        self.last_user = None;
        for s in self.sites.drain(sites..) {
            self.site_ids.remove(&s);
        }
        for u in self.users.drain(users..) {
            self.user_ids.remove(&u.id);
        }
        for t in self.texts.drain(texts..) {
            self.text_ids.remove(&t);
        }
    }
}

/// One stream file, read: its stream with its times in ticks, the headers
/// of its chunks (with their clock references) and its own numbering of
/// callsites and user events.
type ReadStream = (Stream, Vec<ChunkHeader>, Local, Option<u64>);

/// How [`read_streams_shown`] reads stream files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Every event kept.
    Whole,
    /// For what the trace as a whole needs of each stream ([`Head`], clock
    /// corrections, first events): every event counted and numbering
    /// callsites, texts and user events, but only the first one, the clock
    /// measurements and the events with a code address kept, with their
    /// arguments (the others' arguments are not decoded). Files too big for
    /// it are read whole.
    Light,
    /// [`Reading::Light`] whatever the file's size and with no most events
    /// read: the first look at a stream read in windows afterwards (which
    /// has no most events: [`crate::window`]).
    Ahead,
}

/// Events are placed at most this many nanoseconds (52 days) after the
/// trace's start: later ones come from damaged clock data, and sums of times
/// over threads stay far from overflowing.
pub const MAX_T_NS: u64 = 1 << 52;

/// Most events a stream holds (their indices, and those of their argument
/// words, are `u32`: [`crate::intervals::Interval::start_event`],
/// [`Event`]'s `args_at`); a stream file with more is read up to there.
pub const MAX_STREAM_EVENTS: usize = u32::MAX as usize;

/// Largest pointer-to-shared a stream header may give (a raw record holds at
/// most 255 argument words).
const MAX_PTS_BYTES: u64 = 256;
/// What the recorder writes unless built for another runtime.
const DEFAULT_PTS_BYTES: u64 = 16;

/// Field `key` of a stream file's header, as a number (0 when it is not one).
fn header_number(header: &gaspard_format::chunk::FileHeader, key: &str) -> u64 {
    header
        .get(key)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
}

/// The size of a pointer-to-shared a stream file's header gives, if a
/// runtime can have it.
fn pts_bytes(header: &gaspard_format::chunk::FileHeader) -> Option<u64> {
    let n = header_number(header, "pts_bytes");
    (n > 0 && n <= MAX_PTS_BYTES).then_some(n)
}

/// A stream without events, described by its file's header (`name` names
/// the file in the problems).
pub(crate) fn new_stream(
    path: &Path,
    name: &str,
    header: &gaspard_format::chunk::FileHeader,
    problems: &mut Vec<String>,
) -> Stream {
    let num = |k: &str| header_number(header, k);
    let pts_bytes = pts_bytes(header).unwrap_or_else(|| {
        problems.push(format!(
            "{name}: its header gives pointers-to-shared of {} bytes, which no runtime has \
             (the header is damaged); read as {DEFAULT_PTS_BYTES}",
            num("pts_bytes")
        ));
        DEFAULT_PTS_BYTES
    });
    let host = header
        .get("host")
        .unwrap_or("unknown")
        .replace(['/', ' '], "_");
    Stream {
        process: format!("{host}-{}", num("pid")),
        pid: num("pid") as u32,
        stream: num("stream") as u32,
        tid: num("tid"),
        thread: num("thread") as u32,
        model: num("model") as u32,
        pts_bytes: pts_bytes as u32,
        path: path.to_path_buf(),
        events: Vec::new(),
        arg_words: Vec::new(),
        chunks: 0,
        damaged: false,
        intervals: Default::default(),
        window: Default::default(),
    }
}

/// What a sink is told of a window beside its events
/// ([`WindowSink::window`]).
pub(crate) struct WindowInfo<'a> {
    /// Whether other events follow.
    pub(crate) more: bool,
    /// The stream's numbering so far.
    pub(crate) local: &'a Local,
    /// Whether some event read so far may carry a return address.
    pub(crate) codeptr: bool,
}

/// What reading a stream in windows does with them ([`read_windows`]).
pub(crate) trait WindowSink {
    /// Takes a window: `events` (with their argument words in `words`),
    /// those the sink left there last time first, then the stream's next
    /// ones, with their times in ticks and the stream's own numbers of
    /// callsites, user events and texts, and what `info` says. Leaves in
    /// `events` and `words` those the next window begins with, and gives
    /// how many events make it full.
    fn window(&mut self, events: &mut Vec<Event>, words: &mut Vec<u64>, info: WindowInfo) -> usize;

    /// Whether to read on, after each chunk (`local`: what the reading
    /// numbered and saw so far): the chunks after one it says no to are
    /// not decoded.
    fn read_on(&mut self, _local: &Local) -> bool {
        true
    }
}

/// A stream file's name, for its problems.
fn file_name(path: &Path) -> String {
    path.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// A stream file's bytes: read, or mapped when big, and then given back
/// to the system as they are decoded ([`FileBytes::release`]), so that
/// reading a big file holds a few pages of it, not all.
pub(crate) enum FileBytes {
    Read(Vec<u8>),
    Mapped(memmap2::Mmap),
}

/// Stream files of at least this many bytes are mapped. Smaller ones are
/// read whole: mapping a file of a few pages and giving them back costs
/// more than reading it (each unmapping interrupts the process's other
/// threads to drop their stale page-table entries), and a process's
/// streams, all opened at once, hold at most this much each.
const MAP_BYTES: u64 = 256 << 10;

/// How many bytes of a mapped file are decoded between two givings back.
const RELEASE_BYTES: usize = 8 << 20;

impl std::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Read(v) => v,
            FileBytes::Mapped(m) => m,
        }
    }
}

impl FileBytes {
    /// The bytes of the file at `path`: mapped when big, to be read in
    /// order and given back ([`FileBytes::release`]).
    fn open(path: &Path) -> std::io::Result<FileBytes> {
        use std::io::Read;
        let mut f = std::fs::File::open(path)?;
        let len = f.metadata()?.len();
        if len >= MAP_BYTES {
            if let Some(m) = FileBytes::map(&f, false) {
                // (Only a hint.)
                let _ = m.advise(memmap2::Advice::Sequential);
                return Ok(FileBytes::Mapped(m));
            }
        }
        // (A file still being written may have grown since.)
        let mut v = Vec::with_capacity(usize::try_from(len).unwrap_or(0).saturating_add(1));
        f.read_to_end(&mut v)?;
        Ok(FileBytes::Read(v))
    }

    /// The bytes of the file at `path`, mapped and read in at once
    /// (read where it cannot be mapped): for a file read here and there
    /// (the quick scan's).
    pub(crate) fn mapped(path: &Path) -> Option<FileBytes> {
        let f = std::fs::File::open(path).ok()?;
        match FileBytes::map(&f, true) {
            Some(m) => Some(FileBytes::Mapped(m)),
            None => std::fs::read(path).ok().map(FileBytes::Read),
        }
    }

    /// `f` mapped (its pages read in at once with `populate`).
    fn map(f: &std::fs::File, populate: bool) -> Option<memmap2::Mmap> {
        let mut options = memmap2::MmapOptions::new();
        if populate {
            options.populate();
        }
        // SAFETY: stream files are only ever appended to (by the recorder),
        // never cut or rewritten, so the mapped bytes stay valid while they
        // are read; their content is checked (checksums) like any other
        // input.
        unsafe { options.map(f) }.ok()
    }

    /// Gives the pages of a mapped file before byte `upto` back to the
    /// system (read from the file again if touched again).
    fn release(&self, upto: usize) {
        if let FileBytes::Mapped(m) = self {
            let len = upto.min(m.len()) & !0xfff;
            if len > 0 {
                // SAFETY: the map is read-only and private: a page given
                // back is read again from the file, unchanged, if touched
                // again (no write made to it is lost); nothing else is
                // changed. (Only a hint: its failure changes nothing.)
                let _ =
                    unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, 0, len) };
            }
        }
    }
}

/// A stream file read to be read in windows: its bytes and its stream,
/// without events (`None` when it cannot be read, or its header).
pub(crate) fn open_stream(path: &Path) -> Option<(FileBytes, Stream)> {
    let data = FileBytes::open(path).ok()?;
    let header = gaspard_format::chunk::parse_file_header(&data).ok()?;
    let s = new_stream(path, &file_name(path), &header, &mut Vec::new());
    Some((data, s))
}

/// A stream file read in windows ([`read_windows`]): its stream without
/// events, its chunk headers and its own numbering.
pub(crate) type WindowsRead = (Stream, Vec<ChunkHeader>, Local);

/// Reads the stream file at `path`, whose bytes are `data` ([`open_stream`]),
/// in windows of `every` events handed to `sink` in turn (each but the first
/// after the events the last one left), the last one when the stream ends:
/// as [`read_streams`] reads it whole, but for a stream too long for that
/// ([`MAX_STREAM_EVENTS`]), read whole here. Gives the stream read (without
/// its events: `sink` had them), its chunk headers and numbering, and what
/// was wrong with the file.
pub(crate) fn read_windows(
    path: &Path,
    data: &FileBytes,
    every: usize,
    sink: &mut dyn WindowSink,
) -> (Option<WindowsRead>, Vec<String>) {
    let mut defs = ChunkDefs::default();
    let every = every.clamp(1, MAX_WINDOW_EVENTS);
    let mut problems = Vec::new();
    let read = read_data(
        path,
        data,
        &mut defs,
        &mut problems,
        Reading::Whole,
        Some((sink, every)),
    );
    (read.map(|(s, h, l, _)| (s, h, l)), problems)
}

/// Decodes a chunk into `sink`: a function of its own for each kind of
/// conversion, the decoder and the conversion inlined in it.
#[inline(never)]
fn decode_chunk<const LIGHT: bool, const CHECK: bool, const WINDOW: bool>(
    h: &ChunkHeader,
    payload: &[u8],
    sink: &mut Convert<'_, LIGHT, CHECK, WINDOW>,
) -> Result<(), gaspard_format::codec::DecodeError> {
    gaspard_format::codec::decode_into(h, payload, sink)
}

/// Most events a window holds (its own, besides the STARTs it carries).
const MAX_WINDOW_EVENTS: usize = 1 << 26;

/// Reads one stream file, chunk by chunk, resynchronising after damage.
/// Each chunk is converted as it is decoded (`defs`: its definitions, the
/// tables used again from chunk to chunk and file to file).
fn read_stream(
    path: &Path,
    defs: &mut ChunkDefs,
    problems: &mut Vec<String>,
    reading: Reading,
) -> Option<ReadStream> {
    let data = match FileBytes::open(path) {
        Ok(d) => d,
        Err(e) => {
            problems.push(format!("{}: cannot read: {e}", file_name(path)));
            return None;
        }
    };
    read_data(path, &data, defs, problems, reading, None)
}

/// [`read_stream`] of the file's bytes `data`; in windows given to `sink`
/// (with how many events each holds) when given one (its events then not
/// in the stream given).
fn read_data(
    path: &Path,
    data: &FileBytes,
    defs: &mut ChunkDefs,
    problems: &mut Vec<String>,
    reading: Reading,
    mut windows: Option<(&mut dyn WindowSink, usize)>,
) -> Option<ReadStream> {
    let name = file_name(path);
    // Sized once from the chunk headers: no copy as they grow, no memory
    // touched for nothing.
    let announced = match &windows {
        // A window holds the STARTs it carries besides its own events (a
        // few, mostly): room for an eighth more, so that the second window
        // does not copy the first's room to twice its size.
        Some((_, every)) => every.saturating_add(every / 8),
        None => gaspard_format::stream::announced_in(data).min(MAX_STREAM_EVENTS),
    };
    // Read light only where its argument words could not pass
    // MAX_STREAM_EVENTS (which the light reading does not count): at most
    // 256 words an event (a user event's id, and 255 words).
    let light = reading == Reading::Ahead
        || (reading == Reading::Light
            && (announced as u64).saturating_mul(256) <= MAX_STREAM_EVENTS as u64);
    let limit = if reading == Reading::Ahead {
        u64::MAX
    } else {
        MAX_STREAM_EVENTS as u64
    };
    let mut seen = 0u64;
    let mut events = Vec::with_capacity(if light { 64 } else { announced });
    // Events keep about one argument word each (those equal to the previous
    // ones of their kind are shared): reserved for 1.25, grown past it.
    let mut arg_words = Vec::with_capacity(if light { 0 } else { announced + announced / 4 });
    let mut local = Local::default();
    if light {
        // Where return addresses are depends on the size of pointers to
        // shared (a header that cannot be read stops the reading below).
        local.return_addresses = ReturnAddresses::new(
            gaspard_format::chunk::parse_file_header(data).map_or(DEFAULT_PTS_BYTES, |h| {
                pts_bytes(&h).unwrap_or(DEFAULT_PTS_BYTES)
            }),
        );
    }
    let mut headers = Vec::new();
    // Chunks left out past MAX_STREAM_EVENTS events (or argument words).
    let mut left_out = 0u32;
    let mut cap = windows.as_ref().map_or(usize::MAX, |w| w.1);
    let windowed = windows.is_some();
    // Where the file's bytes start, and where they were given back up to.
    let (start, mut released) = (data.as_ptr() as usize, 0usize);
    // Whether the sink of the windows said to read no further.
    let mut stopped = false;
    let walked = gaspard_format::stream::walk(&name, data, |h, payload| {
        if stopped {
            return Ok(());
        }
        // Those before this chunk are decoded (the walk goes forward).
        let done = payload.as_ptr() as usize - start;
        if done >= released + RELEASE_BYTES {
            data.release(done);
            released = done;
        }
        if left_out > 0 {
            left_out += 1;
            return Ok(());
        }
        defs.clear();
        if local.last_args.is_empty() {
            local.last_args = vec![(0, 0); SHARED_ARG_KINDS];
        }
        let before = (events.len(), arg_words.len(), local.lens());
        let seen_before = seen;
        // An event takes two bytes at least (its record and its time), and
        // has at most 256 argument words (a user event's id, and 255 words).
        let roomy = events.len().saturating_add(payload.len()) <= MAX_STREAM_EVENTS
            && arg_words
                .len()
                .saturating_add(payload.len().saturating_mul(256))
                <= MAX_STREAM_EVENTS;
        macro_rules! convert {
            ($light:literal, $check:literal, $window:literal) => {{
                let mut sink = Convert::<$light, $check, $window> {
                    events: &mut events,
                    arg_words: &mut arg_words,
                    local: &mut local,
                    defs: &mut *defs,
                    full: false,
                    seen: &mut seen,
                    limit,
                    classes: kind_classes(),
                    lo: u64::MAX,
                    hi: 0,
                    kept_classes: 0,
                    cap,
                    windows: windows.as_mut().map(|w| &mut *w.0 as &mut dyn WindowSink),
                };
                let decoded = decode_chunk(h, payload, &mut sink);
                cap = sink.cap;
                (decoded, sink.full, (sink.lo, sink.hi, sink.kept_classes))
            }};
        }
        let (decoded, full, (lo, hi, classes)) = match (light, roomy) {
            (true, _) => convert!(true, true, false),
            (false, true) if windowed => convert!(false, false, true),
            (false, true) => convert!(false, false, false),
            (false, false) if windowed => convert!(false, true, true),
            (false, false) => convert!(false, true, false),
        };
        if !full {
            local.seen.add(lo, hi, classes);
        }
        if let Some((sink, _)) = windows.as_mut() {
            stopped = !sink.read_on(&local);
        }
        if full {
            // The chunk is left out whole, and every chunk after it.
            seen = seen_before;
            events.truncate(before.0);
            arg_words.truncate(before.1);
            local.truncate(before.2);
            left_out = 1;
            return Ok(());
        }
        headers.push(*h);
        decoded
    });
    let file = match walked {
        Ok(f) => f,
        Err(e) => {
            problems.push(format!("{name}: {e}; stream skipped"));
            return None;
        }
    };
    if let Some((sink, _)) = windows {
        // The last window.
        if !events.is_empty() {
            let info = WindowInfo {
                more: false,
                local: &local,
                codeptr: local.seen.codeptr(),
            };
            sink.window(&mut events, &mut arg_words, info);
        }
        events = Vec::new();
        arg_words = Vec::new();
    }
    let mut s = new_stream(path, &name, &file.header, problems);
    // Words that grew past what was reserved (by doubling) are copied to
    // their size (the allocator keeps a block shrunk by less than half as
    // it is); a reserve used to three quarters or more is kept.
    if arg_words.capacity() - arg_words.len() > arg_words.len() / 3 {
        arg_words = arg_words.to_vec();
    }
    s.events = events;
    s.arg_words = arg_words;
    s.chunks = headers.len() as u32;
    s.damaged = file.damaged || left_out > 0;
    problems.extend(file.problems);
    if left_out > 0 {
        problems.push(format!(
            "{name}: more than {MAX_STREAM_EVENTS} events (or argument words); \
             its last {left_out} chunks are left out"
        ));
    }
    Some((s, headers, local, light.then_some(seen)))
}

#[cfg(test)]
mod tests {
    use super::Clock;

    /// Times as the 128-bit formula gives them (None where it overflows).
    fn ns_i128(c: &Clock, t: u64) -> Option<i128> {
        (c.n0 as i128).checked_add(((t as i128 - c.t0 as i128) as f64 * c.slope) as i128)
    }

    #[test]
    fn shifting_times_is_the_128_bit_formula() {
        use super::{shift, Stream, MAX_T_NS};
        let times = [
            0u64,
            1,
            999,
            1000,
            1001,
            MAX_T_NS,
            MAX_T_NS + 1000,
            u64::MAX - 1,
            u64::MAX,
        ];
        let bases = [
            -5i128,
            0,
            1000,
            MAX_T_NS as i128,
            u64::MAX as i128,
            u64::MAX as i128 + 5,
        ];
        for base in bases {
            let mut s = Stream::empty("h-1", 0, 1, 8);
            for &t in &times {
                s.push(t, 1, 2, 0, &[]);
            }
            let late = shift(std::slice::from_mut(&mut s), base);
            let want: Vec<u64> = times
                .iter()
                .map(|&t| (t as i128 - base).clamp(0, MAX_T_NS as i128) as u64)
                .collect();
            let want_late = times
                .iter()
                .filter(|&&t| t as i128 - base > MAX_T_NS as i128)
                .count() as u64;
            let got: Vec<u64> = s.events.iter().map(|e| e.t_ns).collect();
            assert_eq!(got, want, "base {base}");
            assert_eq!(late, vec![want_late], "base {base}");
        }
    }

    /// Clock slopes of every kind, in ns per tick: about one, a TSC's,
    /// tiny, huge, and those of damaged clocks (not above 0, not finite).
    const SLOPES: [f64; 12] = [
        1.0,
        0.999_999_7,
        1.000_000_3,
        0.416_666_666_666_666_7,
        2.5,
        1e-9,
        1e9,
        1e30,
        -1.0,
        0.0,
        f64::NAN,
        f64::INFINITY,
    ];

    use crate::testing::xorshift;

    #[test]
    fn clock_conversion_is_the_128_bit_one() {
        let times = [
            0u64,
            1,
            1 << 20,
            (1 << 53) - 1,
            (1 << 53) + 1,
            (1 << 62) + 12_345,
            1 << 63,
            u64::MAX - 1,
            u64::MAX,
        ];
        let mut random = xorshift(0x9e37_79b9_7f4a_7c15);
        for &slope in &SLOPES {
            for &t0 in &times {
                for &n0 in &[0u64, 1_000_000_007, 1 << 62, u64::MAX] {
                    let c = Clock { t0, n0, slope };
                    let mut ts: Vec<u64> = times.to_vec();
                    ts.extend((0..200).map(|_| t0.wrapping_add(random() >> (random() % 64))));
                    ts.extend((0..200).map(|_| t0.wrapping_sub(random() >> (random() % 64))));
                    for t in ts {
                        if let Some(want) = ns_i128(&c, t) {
                            assert_eq!(c.ns(t), want, "t0 {t0} n0 {n0} slope {slope} t {t}");
                        }
                        let clamped = c.ns(t).clamp(0, u64::MAX as i128) as u64;
                        assert_eq!(c.ns_u64(t), clamped, "t0 {t0} n0 {n0} slope {slope} t {t}");
                    }
                }
            }
        }
    }

    /// A stream's times made ns the fast way ([`super::Times::of`]) are
    /// those of the clock less the base, saturating, for every tick within
    /// the stream's earliest and latest: clocks of every kind, ranges of
    /// ticks around the clock's start and the limits, bases below, at and
    /// above the times.
    #[test]
    fn a_streams_times_are_the_clocks_less_the_base() {
        use super::Times;
        let mut random = xorshift(0x2545_f491_4f6c_dd1d);
        let (mut linear, mut checked) = (0, 0);
        for &slope in &SLOPES {
            for t0 in [0u64, 1 << 20, 1 << 62, u64::MAX - 5] {
                for n0 in [0u64, 1_000_000_007, 1 << 62, u64::MAX - 1000] {
                    for _ in 0..40 {
                        let c = Clock { t0, n0, slope };
                        let a = t0.wrapping_add(random() >> (random() % 64));
                        let b = a.wrapping_add(random() >> (random() % 64));
                        let (lo, hi) = (a.min(b), a.max(b));
                        let ts: Vec<u64> = [lo, hi]
                            .into_iter()
                            .chain(
                                (0..20).map(|_| lo + random() % (hi - lo).saturating_add(1).max(1)),
                            )
                            .map(|t| t.min(hi))
                            .collect();
                        let at = |t: u64| c.ns_u64(t);
                        for base in [
                            0,
                            at(lo),
                            at(lo).saturating_sub(3),
                            at(lo).saturating_add(3),
                            at(hi),
                        ] {
                            for clock in [Some(c), None] {
                                let times = Times::of(clock, Some((lo, hi)), base);
                                linear += matches!(times, Times::Linear { .. }) as usize;
                                for &t in &ts {
                                    let want =
                                        clock.map_or(t, |c| c.ns_u64(t)).saturating_sub(base);
                                    assert_eq!(
                                        times.ns(t),
                                        want,
                                        "{c:?} lo {lo} hi {hi} base {base} t {t} {times:?}"
                                    );
                                    checked += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        // The fast way was taken, and often.
        assert!(linear > 1000 && checked > 100_000, "{linear} {checked}");
    }

    /// Placing return addresses gives what looking each one up does: many
    /// addresses sharing the memo's entries, some without a source line,
    /// events of callsites with a file left alone, over several calls (as
    /// windows come), and the callsites numbered first met first.
    #[test]
    fn return_addresses_placed_as_looked_up_one_by_one() {
        use super::{Addresses, Callsite, Placer, Stream};
        let kind = gaspard_format::kinds::kind_by_name("GASP_OMP_BARRIER")
            .expect("a kind with a return address")
            .id;
        let word = gaspard_format::codec::codeptr_word(kind, 0, 1, 0).expect("its codeptr");
        let sites = vec![
            Callsite::default(),
            Callsite {
                file: Some("a.c".into()),
                line: 3,
                col: 0,
            },
        ];
        // Three addresses in a row (64 bytes apart) share a line; every
        // seventh has none.
        let source = |addr: u64| {
            let line = addr / 192;
            (!addr.is_multiple_of(7)).then(|| (format!("f{}.c", line % 5), line as u32))
        };
        let mut s = Stream::empty("p", 0, 5, 8);
        let mut seed = 7u64;
        for i in 0..4000u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // A few hundred addresses, 64 apart (as call instructions are).
            let addr = 0x40_0000 + (seed >> 33) % 300 * 64;
            let mut words = vec![0u64; word + 1];
            words[word] = addr;
            s.push(i, kind, 0, (i % 5 == 0) as u32, &words);
        }
        let before = s.events.clone();
        let mut placer = Placer::new(8);
        let (events, words) = (&mut s.events, &s.arg_words);
        let half = events.len() / 2;
        let (a, b) = events.split_at_mut(half);
        placer.place(a, words, &sites, 10, source);
        placer.place(b, words, &sites, 10, source);
        let (found, addresses) = placer.finish(10);
        // One by one: each line numbered when first met.
        let mut want_found: Vec<Callsite> = Vec::new();
        let mut want_addresses = Addresses::default();
        for (e, old) in s.events.iter().zip(&before) {
            let addr = s.arg_words[old.args_at as usize + word];
            let want = if old.callsite == 1 {
                1
            } else {
                match source(addr) {
                    Some((file, line)) => {
                        let c = Callsite {
                            file: Some(file),
                            line,
                            col: 0,
                        };
                        let j = match want_found.iter().position(|f| *f == c) {
                            Some(j) => j,
                            None => {
                                want_found.push(c);
                                want_found.len() - 1
                            }
                        } as u32;
                        want_addresses.insert(addr, Some(10 + j));
                        10 + j
                    }
                    None => {
                        want_addresses.insert(addr, None);
                        0
                    }
                }
            };
            assert_eq!(e.callsite, want, "address {addr:#x}");
        }
        assert_eq!(found, want_found);
        assert_eq!(addresses, want_addresses);
        assert!(want_found.len() > 64, "more lines than the memo holds");
        assert!(
            want_found.len() < want_addresses.len(),
            "addresses sharing lines"
        );
    }

    /// The table of where return addresses are gives what the layouts of
    /// the kinds give, whatever the phase, the flags and the order asked.
    #[test]
    fn return_addresses_are_where_the_layouts_say() {
        let args: Vec<u64> = (100..116).collect();
        let kinds: Vec<u16> = gaspard_format::kinds::all_kinds()
            .map(|k| k.id)
            .chain([0, 7, u16::MAX])
            .collect();
        let mut carrying = 0;
        for pts_bytes in [8, 16, 24] {
            let mut ra = super::ReturnAddresses::new(pts_bytes);
            for round in 0..2 {
                for &kind in kinds.iter().rev().skip(round) {
                    for phase in 0..3 {
                        for flags in [0u8, 1, 2, 3, 0xff] {
                            let want = gaspard_format::codec::codeptr_word(
                                kind,
                                phase,
                                pts_bytes.div_ceil(8) as usize,
                                flags,
                            )
                            .and_then(|i| args.get(i).copied());
                            carrying += usize::from(want.is_some());
                            assert_eq!(
                                ra.of((kind, phase, flags), &args),
                                want,
                                "kind {kind} phase {phase} flags {flags}"
                            );
                        }
                    }
                }
            }
        }
        assert!(carrying > 0);
    }
}
