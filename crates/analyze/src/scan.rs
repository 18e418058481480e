//! A first look at a trace, fast: every thread's START/END intervals,
//! decoded straight from the stream files into spans, without keeping the
//! events.
//!
//! The browser view shows the timeline of a [`Quick`] first, and the one
//! of the whole trace afterwards when the two differ ([`Quick::is_whole`]).
//! Times (clocks fitted and synchronised, from the trace's start),
//! callsites (the source lines of code addresses included,
//! [`crate::symbolize`]), names, ranks and peers are those the whole trace
//! gives, except for what its reader adds on top: coarray operations
//! ([`crate::caf`]). Event numbers are positions in the stream file, which
//! the whole trace keeps unless coarray operations are added.

use rayon::prelude::*;
use rustc_hash::FxHashMap as HashMap;
use std::path::Path;

use gaspard_format::chunk::{ChunkHeader, CHUNK_HEADER_LEN};
use gaspard_format::codec::{self, Sink, UserDef};
use gaspard_format::kinds::{self, Class};

use crate::matrix::Rank;
use crate::trace::{Callsite, Clock, TraceError, MAX_T_NS};

/// One closed START/END interval of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuickSpan {
    /// Canonical kind.
    pub kind: u16,
    /// True for a user event.
    pub user: bool,
    /// START time, ns since the trace's start.
    pub start: u64,
    /// END time (never before `start`).
    pub end: u64,
    /// Index in [`Quick::names`].
    pub name: u32,
    /// Index in [`Quick::callsites`] (of the START).
    pub callsite: u32,
    /// Position of the START event in its stream.
    pub start_event: u32,
    /// For a communication, the rank or PE on the other side (the END
    /// event's `pe`, `peer` or `target` argument), else [`NO_PEER`]
    /// ([`QuickSpan::peer`] gives it).
    peer: u64,
}

/// [`QuickSpan`]s without a peer (an argument of `u64::MAX`, -1, names no
/// rank either).
const NO_PEER: u64 = u64::MAX;

// Kept for every interval of every thread until the view's timeline is
// built: no more padding than the fields need.
const _: () = assert!(std::mem::size_of::<QuickSpan>() == 40);

impl QuickSpan {
    /// For a communication, the rank or PE on the other side, if known.
    pub fn peer(&self) -> Option<u64> {
        (self.peer != NO_PEER).then_some(self.peer)
    }
}

/// One thread (stream) of a [`Quick`].
#[derive(Debug, Clone)]
pub struct QuickStream {
    /// `host-pid` of its process.
    pub process: String,
    /// Stream number within the process.
    pub stream: u32,
    /// How findings name the thread ([`crate::findings::thread_name`]).
    pub name: String,
    /// Its process's rank or PE, from its start-up event.
    pub rank: Option<Rank>,
    /// Its events.
    pub events: u64,
    /// Time of its first and last events.
    pub first_last: Option<(u64, u64)>,
    /// Its intervals, by START position.
    pub spans: Vec<QuickSpan>,
}

/// Every thread's intervals.
#[derive(Debug, Default)]
pub struct Quick {
    /// Streams ordered as [`crate::trace::Trace::streams`] are.
    pub streams: Vec<QuickStream>,
    /// Callsites referred to by spans.
    pub callsites: Vec<Callsite>,
    /// Span names: kind, user event, or `GASP_C_FUNC <signature>`.
    pub names: Vec<String>,
}

impl Quick {
    /// The times of the first and last events of all streams, if any.
    pub fn span(&self) -> Option<(u64, u64)> {
        let firsts = self.streams.iter().filter_map(|s| s.first_last);
        let t0 = firsts.clone().map(|f| f.0).min()?;
        let t1 = firsts.map(|f| f.1).max()?;
        Some((t0, t1))
    }

    /// Events read.
    pub fn events(&self) -> u64 {
        self.streams.iter().map(|s| s.events).sum()
    }

    /// Whether reading the whole trace in `dir` would give the same spans:
    /// no process that may be a Coarray Fortran one, whose MPI calls the
    /// reader may turn into coarray operations (its maps name libgfortran).
    pub fn is_whole(&self, dir: &Path) -> bool {
        let mut processes: Vec<&str> = self.streams.iter().map(|s| s.process.as_str()).collect();
        processes.dedup();
        !processes.iter().any(|p| {
            std::fs::read_to_string(dir.join(format!("{p}.maps")))
                .map(|m| m.contains("libgfortran"))
                .unwrap_or(false)
        })
    }
}

/// What one stream file gives before its events are decoded.
struct Opened {
    stream: crate::trace::Stream,
    data: crate::trace::FileBytes,
    /// Intact chunks: header, and where the payload is in `data`.
    chunks: Vec<(ChunkHeader, usize, usize)>,
}

/// Reads the intervals of every thread of the trace in `dir`. Damaged
/// parts are skipped (the whole trace's reader says what they are).
pub fn scan(dir: &Path) -> Result<Quick, TraceError> {
    let listing = crate::trace::list(dir)?;
    // Chunks first (checksums checked): every process's clock is fitted to
    // the references of all its chunks before any time is converted.
    let opened: Vec<Opened> = listing.streams.par_iter().filter_map(|p| open(p)).collect();
    let clocks = crate::trace::fit_clocks(
        &listing.refs,
        opened.iter().flat_map(|o| {
            let p = o.stream.process.as_str();
            std::iter::once((p, None)).chain(o.chunks.iter().map(move |c| (p, Some(&c.0))))
        }),
    );
    let progress = crate::trace::progress_bar(&listing.streams, 1);
    let scanned: Vec<Scanned> = opened
        .into_par_iter()
        .map(|o| {
            let clock = &clocks[&o.stream.process];
            let bytes = o.data.len() as u64;
            let s = scan_stream(o, clock);
            if let Some(pb) = &progress {
                pb.inc(bytes);
            }
            s
        })
        .collect();
    if let Some(pb) = progress {
        pb.finish_and_clear();
    }
    Ok(merge(listing.trace, scanned))
}

fn open(path: &Path) -> Option<Opened> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    let data = crate::trace::FileBytes::mapped(path)?;
    let mut chunks = Vec::new();
    let base = data.as_ptr() as usize;
    let walk = gaspard_format::stream::walk(&name, &data, |h, payload| {
        chunks.push((*h, payload.as_ptr() as usize - base, payload.len()));
        Ok(())
    })
    .ok()?;
    let stream = crate::trace::new_stream(path, &name, &walk.header, &mut Vec::new());
    Some(Opened {
        stream,
        data,
        chunks,
    })
}

/// One stream, scanned: times are absolute ns of its process's clock,
/// callsites and names numbered by the stream.
struct Scanned {
    stream: crate::trace::Stream,
    events: u64,
    first_last: Option<(u64, u64)>,
    rank: Option<Rank>,
    spans: Vec<QuickSpan>,
    /// Spans whose callsite is a code address: (span, address).
    codeptrs: Vec<(usize, u64)>,
    sites: Vec<Callsite>,
    names: Vec<Name>,
    /// Arguments of its clock measurements.
    sync: Vec<[u64; 4]>,
}

/// What a span is named by, before user events get their trace-wide names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Name {
    Kind(u16),
    /// A user event: its id, and its definition where the stream has it.
    User(u64, Option<String>),
    Function(String),
}

struct ScanSink<'a> {
    clock: &'a Clock,
    pts_words: usize,
    model: u32,
    // Tables of the chunk being decoded.
    strings: HashMap<u32, String>,
    chunk_sites: HashMap<u32, codec::Callsite>,
    chunk_users: HashMap<u64, UserDef>,
    /// Chunk callsite id -> stream callsite number.
    site_of: HashMap<u32, u32>,
    // The stream's.
    sites: Vec<Callsite>,
    site_ids: HashMap<Callsite, u32>,
    names: Vec<Name>,
    name_ids: HashMap<Name, u32>,
    kind_names: Vec<u32>,
    user_names: HashMap<u64, u32>,
    /// Open STARTs per (kind, user event id).
    open: HashMap<(u16, u64), Vec<usize>>,
    open_kind: Vec<Vec<usize>>,
    /// Spans in START order, with the code address of the START when its
    /// callsite has no file (`u64::MAX` otherwise), and whether an END
    /// closed them.
    slots: Vec<QuickSpan>,
    /// Whether an END closed each slot.
    closed: Vec<bool>,
    /// Slots whose START gave a code address (and no callsite with a file).
    slot_codeptrs: Vec<(usize, u64)>,
    /// The last chunk callsite id met, and its stream number.
    last_site: Option<(u32, u32)>,
    /// Word offset of the code address of each (kind, phase, flags).
    codeptr_at: HashMap<(u16, u8, u8), Option<usize>>,
    /// Word offset of the peer argument of each (kind, flags) END.
    peer_at: HashMap<(u16, u8), Option<usize>>,
    /// The last (kind, flags) asked for, and its answer.
    last_peer_at: Option<(u16, u8, Option<usize>)>,
    events: u64,
    first: u64,
    last: u64,
    /// True until the process's rank is found (for MPI and OpenSHMEM).
    wants_rank: bool,
    rank: Option<Rank>,
    sync: Vec<[u64; 4]>,
    /// Chunk string id of a function's signature -> name number.
    function_names: HashMap<u32, u32>,
    /// Whether each kind is a communication, once asked.
    comm: Vec<Option<bool>>,
    /// For a window ([`Windows::window`]): the START and END positions
    /// taken from the chunks read in part...
    want: Option<(rustc_hash::FxHashSet<u64>, rustc_hash::FxHashSet<u64>)>,
    /// ...which the chunk being decoded is.
    filtering: bool,
}

/// Kinds whose open STARTs are kept in a vector rather than a map.
const DIRECT_KINDS: usize = 2048;

impl ScanSink<'_> {
    fn name(&mut self, n: Name) -> u32 {
        intern(&mut self.name_ids, &mut self.names, n)
    }

    fn site(&mut self, id: u32) -> u32 {
        if let Some((last, n)) = self.last_site {
            if last == id {
                return n;
            }
        }
        let n = self.site_of_chunk(id);
        self.last_site = Some((id, n));
        n
    }

    fn site_of_chunk(&mut self, id: u32) -> u32 {
        if let Some(&n) = self.site_of.get(&id) {
            return n;
        }
        let key = crate::trace::chunk_callsite(&self.chunk_sites, &self.strings, id);
        let n = intern(&mut self.site_ids, &mut self.sites, key);
        self.site_of.insert(id, n);
        n
    }

    /// Whether `kind` is a communication (kept per kind).
    #[inline]
    fn is_comm(&mut self, kind: u16) -> bool {
        let k = kind as usize;
        if k >= self.comm.len() {
            self.comm.resize(k + 1, None);
        }
        *self.comm[k].get_or_insert_with(|| {
            kinds::kind(kind).is_some_and(|k| matches!(k.class, Class::Comm))
        })
    }

    fn start_rank(&mut self, kind: u16, flags: u8, args: &[u64]) {
        let Some(names) = startup_kinds(self.model) else {
            return;
        };
        if !kinds::kind(kind).is_some_and(|k| names.contains(&k.name)) {
            return;
        }
        // The first start-up gives the rank, whether or not it can be read.
        self.rank = rank_of(self.model, self.pts_words, kind, flags, args);
    }

    /// The code address an event gives, if any (`codeptr` argument).
    fn codeptr(&mut self, kind: u16, phase: u8, flags: u8, args: &[u64]) -> Option<u64> {
        let pts_words = self.pts_words;
        let at = *self
            .codeptr_at
            .entry((kind, phase, flags))
            .or_insert_with(|| codec::codeptr_word(kind, phase, pts_words, flags));
        args.get(at?).copied()
    }

    fn peer(&mut self, kind: u16, flags: u8, args: &[u64]) -> Option<u64> {
        if let Some((k, f, at)) = self.last_peer_at {
            if (k, f) == (kind, flags) {
                return args.get(at?).copied();
            }
        }
        let pts_words = self.pts_words;
        let at = *self.peer_at.entry((kind, flags)).or_insert_with(|| {
            let layout = codec::arg_layout(kind, 1, pts_words, flags);
            ["pe", "peer", "target"].iter().find_map(|want| {
                let mut at = 0;
                for (n, _, w) in &layout {
                    if n == want {
                        return Some(at);
                    }
                    at += w;
                }
                None
            })
        });
        self.last_peer_at = Some((kind, flags, at));
        args.get(at?).copied()
    }
}

impl Sink for ScanSink<'_> {
    fn string(&mut self, id: u32, s: String) {
        self.strings.insert(id, s);
    }
    fn callsite(&mut self, id: u32, c: codec::Callsite) {
        self.chunk_sites.insert(id, c);
    }
    fn user(&mut self, def: UserDef) {
        self.chunk_users.insert(def.id, def);
    }
    #[inline(always)]
    fn event(&mut self, e: codec::Event, user: Option<u64>, args: &[u64]) {
        let index = self.events;
        self.events += 1;
        let t = self.clock.ns_u64(e.ts);
        if index == 0 {
            self.first = t;
        }
        self.last = t;
        if e.kind == kinds::GASPARD_CLOCK_SYNC && args.len() >= 4 {
            self.sync.push([args[0], args[1], args[2], args[3]]);
        }
        if e.phase == 1 && self.wants_rank {
            self.start_rank(e.kind, e.flags, args);
            self.wants_rank = self.rank.is_none();
        }
        if e.phase > 1 {
            return;
        }
        if self.filtering {
            let wanted = match &self.want {
                Some((starts, ends)) => {
                    if e.phase == 0 {
                        starts.contains(&index)
                    } else {
                        ends.contains(&index)
                    }
                }
                None => true,
            };
            if !wanted {
                return;
            }
        }
        let direct = user.is_none() && (e.kind as usize) < DIRECT_KINDS;
        if e.phase == 0 {
            let name = match user {
                Some(id) => match self.user_names.get(&id) {
                    Some(&n) => n,
                    None => {
                        let def = self.chunk_users.get(&id).map(|d| d.name.clone());
                        let n = self.name(Name::User(id, def));
                        self.user_names.insert(id, n);
                        n
                    }
                },
                None if e.kind == kinds::C_FUNC && !args.is_empty() => {
                    let id = args[0] as u32;
                    match self.function_names.get(&id) {
                        Some(&n) => n,
                        None => {
                            let sig = self.strings.get(&id).map_or("?", String::as_str);
                            let n = self.name(Name::Function(sig.to_string()));
                            self.function_names.insert(id, n);
                            n
                        }
                    }
                }
                None => {
                    let k = e.kind as usize;
                    if k >= self.kind_names.len() {
                        self.kind_names.resize(k + 1, u32::MAX);
                    }
                    if self.kind_names[k] == u32::MAX {
                        self.kind_names[k] = self.name(Name::Kind(e.kind));
                    }
                    self.kind_names[k]
                }
            };
            let callsite = self.site(e.callsite);
            let codeptr = if self.sites[callsite as usize].file.is_none() && user.is_none() {
                self.codeptr(e.kind, e.phase, e.flags, args)
            } else {
                None
            };
            let slot = self.slots.len();
            self.slots.push(QuickSpan {
                kind: e.kind,
                user: user.is_some(),
                start: t,
                end: t,
                name,
                callsite,
                start_event: index as u32,
                peer: NO_PEER,
            });
            self.closed.push(false);
            if let Some(addr) = codeptr {
                self.slot_codeptrs.push((slot, addr));
            }
            let stack = if direct {
                &mut self.open_kind[e.kind as usize]
            } else {
                self.open
                    .entry((e.kind, user.unwrap_or(u64::MAX)))
                    .or_default()
            };
            stack.push(slot);
        } else {
            let stack = if direct {
                &mut self.open_kind[e.kind as usize]
            } else {
                self.open
                    .entry((e.kind, user.unwrap_or(u64::MAX)))
                    .or_default()
            };
            let Some(slot) = stack.pop() else {
                return;
            };
            let comm = user.is_none() && self.is_comm(e.kind);
            let peer = if comm {
                self.peer(e.kind, e.flags, args)
            } else {
                None
            };
            let sp = &mut self.slots[slot];
            sp.end = t.max(sp.start);
            sp.peer = peer.unwrap_or(NO_PEER);
            self.closed[slot] = true;
        }
    }
}

impl<'a> ScanSink<'a> {
    fn new(clock: &'a Clock, stream: &crate::trace::Stream) -> ScanSink<'a> {
        ScanSink {
            clock,
            pts_words: (stream.pts_bytes as usize).div_ceil(8),
            model: stream.model,
            strings: HashMap::default(),
            chunk_sites: HashMap::default(),
            chunk_users: HashMap::default(),
            site_of: HashMap::default(),
            sites: Vec::new(),
            site_ids: HashMap::default(),
            names: Vec::new(),
            name_ids: HashMap::default(),
            kind_names: Vec::new(),
            user_names: HashMap::default(),
            open: HashMap::default(),
            open_kind: (0..DIRECT_KINDS).map(|_| Vec::new()).collect(),
            slots: Vec::new(),
            closed: Vec::new(),
            slot_codeptrs: Vec::new(),
            last_site: None,
            codeptr_at: HashMap::default(),
            peer_at: HashMap::default(),
            last_peer_at: None,
            events: 0,
            first: 0,
            last: 0,
            wants_rank: matches!(stream.model, 3 | 4),
            rank: None,
            function_names: HashMap::default(),
            comm: Vec::new(),
            sync: Vec::new(),
            want: None,
            filtering: false,
        }
    }

    /// Before each chunk: each chunk has tables of its own.
    fn begin_chunk(&mut self) {
        self.strings.clear();
        self.chunk_sites.clear();
        self.chunk_users.clear();
        self.site_of.clear();
        self.last_site = None;
        self.function_names.clear();
    }

    /// The stream scanned: its spans in START order, those never closed
    /// left out.
    fn finish(self, stream: crate::trace::Stream) -> Scanned {
        // In place, code addresses following their spans.
        let mut spans = self.slots;
        let closed = self.closed;
        let mut codeptrs = Vec::with_capacity(self.slot_codeptrs.len());
        let mut next_codeptr = self.slot_codeptrs.into_iter().peekable();
        let mut kept = 0;
        for slot in 0..spans.len() {
            let addr = match next_codeptr.peek() {
                Some(&(s, a)) if s == slot => {
                    next_codeptr.next();
                    Some(a)
                }
                _ => None,
            };
            if !closed[slot] {
                continue;
            }
            if let Some(a) = addr {
                codeptrs.push((kept, a));
            }
            spans[kept] = spans[slot];
            kept += 1;
        }
        spans.truncate(kept);
        // A rank out of range is no rank (as `matrix::rank` has it).
        let rank = self.rank.filter(|r| r.me < r.size);
        Scanned {
            stream,
            events: self.events,
            first_last: (self.events > 0).then_some((self.first, self.last)),
            rank,
            spans,
            codeptrs,
            sites: self.sites,
            names: self.names,
            sync: self.sync,
        }
    }
}

fn scan_stream(o: Opened, clock: &Clock) -> Scanned {
    let mut sink = ScanSink::new(clock, &o.stream);
    let expected: u64 = o.chunks.iter().map(|c| u64::from(c.0.events)).sum();
    sink.slots.reserve((expected / 2) as usize);
    sink.closed.reserve((expected / 2) as usize);
    for (h, at, len) in &o.chunks {
        // Events are numbered in `u32` (`QuickSpan::start_event`): past
        // MAX_STREAM_EVENTS the chunks are left out, as the whole trace's
        // reader leaves them out (and says so).
        if sink.events + u64::from(h.events) > crate::trace::MAX_STREAM_EVENTS as u64 {
            break;
        }
        sink.begin_chunk();
        // What cannot be decoded is left out here as by the whole trace's
        // reader (which says so).
        let _ = codec::decode_into(h, &o.data[*at..*at + *len], &mut sink);
    }
    sink.finish(o.stream)
}

/// Callsites and names numbered across streams, as a [`Quick`] has them.
#[derive(Default)]
struct Numbering {
    site_ids: HashMap<Callsite, u32>,
    name_ids: HashMap<String, u32>,
    callsites: Vec<Callsite>,
    names: Vec<String>,
}

/// A user event's name, by (process, id): the first definition met in the
/// process.
type UserDefs = HashMap<(String, u64), String>;

/// The number of `k` in `list` (indexed by `ids`), added at its end when
/// first met.
fn intern<K: Clone + Eq + std::hash::Hash>(
    ids: &mut HashMap<K, u32>,
    list: &mut Vec<K>,
    k: K,
) -> u32 {
    let n = list.len() as u32;
    match ids.entry(k) {
        std::collections::hash_map::Entry::Occupied(o) => *o.get(),
        std::collections::hash_map::Entry::Vacant(v) => {
            list.push(v.key().clone());
            *v.insert(n)
        }
    }
}

impl Numbering {
    fn site(&mut self, c: Callsite) -> u32 {
        intern(&mut self.site_ids, &mut self.callsites, c)
    }

    fn name(&mut self, text: String) -> u32 {
        intern(&mut self.name_ids, &mut self.names, text)
    }

    /// The user events defined in `streams`' names.
    fn user_defs<'a>(streams: impl Iterator<Item = (&'a str, &'a [Name])>) -> UserDefs {
        let mut defs = UserDefs::default();
        for (process, names) in streams {
            for n in names {
                if let Name::User(id, Some(def)) = n {
                    defs.entry((process.to_string(), *id))
                        .or_insert_with(|| def.clone());
                }
            }
        }
        defs
    }

    /// A stream's spans with times from the trace's start and callsites
    /// and names numbered here (source lines of code addresses found as
    /// the whole trace's reader finds them).
    #[allow(clippy::too_many_arguments)]
    fn spans(
        &mut self,
        process: &str,
        spans: Vec<QuickSpan>,
        sites: Vec<Callsite>,
        names: Vec<Name>,
        codeptrs: &[(usize, u64)],
        user_defs: &UserDefs,
        time: &Timebase,
        sym: &mut crate::symbolize::Symbolizer,
    ) -> Vec<QuickSpan> {
        let sites: Vec<u32> = sites
            .into_iter()
            .map(|c| self.site(crate::trace::with_full_name_in(sym, process, &c).unwrap_or(c)))
            .collect();
        let names: Vec<u32> = names
            .into_iter()
            .map(|n| {
                let text = match n {
                    Name::Kind(k) => {
                        kinds::kind(k).map_or_else(|| format!("kind_{k}"), |k| k.name.to_string())
                    }
                    Name::User(id, _) => user_defs
                        .get(&(process.to_string(), id))
                        .cloned()
                        .unwrap_or_else(|| format!("user_event_{id}")),
                    Name::Function(sig) => {
                        format!("GASP_C_FUNC {}", sym.function_name(process, &sig))
                    }
                };
                self.name(text)
            })
            .collect();
        let mut spans: Vec<QuickSpan> = spans
            .into_iter()
            .map(|sp| QuickSpan {
                start: time.at(process, sp.start),
                end: time.at(process, sp.end),
                name: names[sp.name as usize],
                callsite: sites[sp.callsite as usize],
                ..sp
            })
            .collect();
        for &(i, addr) in codeptrs {
            if let Some((file, line)) = sym.source_of_return_address(process, addr) {
                spans[i].callsite = self.site(Callsite {
                    file: Some(file),
                    line,
                    col: 0,
                });
            }
        }
        spans
    }
}

/// Numbers callsites and names trace-wide, corrects the clocks and puts
/// every time after the trace's start, as the whole trace's reader does.
fn merge(mut t: crate::trace::Trace, scanned: Vec<Scanned>) -> Quick {
    let user_defs = Numbering::user_defs(
        scanned
            .iter()
            .map(|s| (s.stream.process.as_str(), s.names.as_slice())),
    );
    let inputs: Vec<ClockInput<'_>> = scanned
        .iter()
        .map(|s| (s.stream.process.as_str(), s.sync.as_slice(), s.first_last))
        .collect();
    let time = Timebase::new(&mut t, &inputs);
    drop(inputs);
    let mut sym = crate::symbolize::Symbolizer::new(&t.dir);
    let mut numbering = Numbering::default();
    let mut streams = Vec::with_capacity(scanned.len());
    for s in scanned {
        let process = s.stream.process.clone();
        let spans = numbering.spans(
            &process,
            s.spans,
            s.sites,
            s.names,
            &s.codeptrs,
            &user_defs,
            &time,
            &mut sym,
        );
        let name = thread_name(s.rank, &process, s.stream.stream);
        streams.push(QuickStream {
            first_last: s
                .first_last
                .map(|(f, l)| (time.at(&process, f), time.at(&process, l))),
            process,
            stream: s.stream.stream,
            name,
            rank: s.rank,
            events: s.events,
            spans,
        });
    }
    streams.sort_by(|a, b| (a.process.as_str(), a.stream).cmp(&(b.process.as_str(), b.stream)));
    Quick {
        streams,
        callsites: numbering.callsites,
        names: numbering.names,
    }
}

/// One thread of an [`Overview`].
#[derive(Debug, Clone)]
pub struct OverviewStream {
    /// `host-pid` of its process.
    pub process: String,
    /// Stream number within the process.
    pub stream: u32,
    /// How findings name the thread (as [`QuickStream::name`]).
    pub name: String,
    /// Its events.
    pub events: u64,
    /// Busy time per (bin, class): `bins[b * classes + c]` is the share of
    /// bin `b` of [`Overview::t0`]..[`Overview::t1`] that the innermost
    /// interval of class `c` took (0..1, summed over classes at most 1 but
    /// for rounding).
    pub bins: Vec<f32>,
}

/// Every thread's busy time per class, in bins over the whole run, without
/// the intervals themselves: what the whole trace's timeline shows at a
/// coarse resolution, read from every event but decoding only their kinds,
/// phases and times ([`overview`]).
#[derive(Debug, Default)]
pub struct Overview {
    /// First event, ns since the trace's start (as the timeline's `t0`).
    pub t0: u64,
    /// Last event (as the timeline's `t1`: after `t0`).
    pub t1: u64,
    /// Bins over `[t0, t1]`.
    pub bins: usize,
    /// Classes per bin.
    pub classes: usize,
    /// Streams ordered as [`Quick::streams`] are.
    pub streams: Vec<OverviewStream>,
    /// What reading a window of the trace alone needs.
    pub windows: Windows,
}

/// Bins of a stream's own time span that its pass counts busy time in,
/// all streams together, at most (each has at most [`LOCAL_BINS_MAX`]).
const LOCAL_BINS_ALL: usize = 1 << 21;
/// Bins of one stream's own time span, at most.
const LOCAL_BINS_MAX: usize = 1 << 18;

/// The busy time of every thread of the trace in `dir`, per class, in
/// `bins` bins over the whole run: the same intervals as [`scan`] finds
/// (START/END matched per kind and user event, the innermost one counting,
/// those never closed left out), without their names, callsites or
/// arguments. `class` gives the class (below `classes`) of an interval of a
/// kind (and whether it is a user event), `None` for those not counted.
///
/// Each stream is read once (twice when some of its intervals are never
/// closed), its time counted in bins of its own span, then put on the
/// whole run's bins once the clocks are corrected: the bins agree with
/// those computed from the intervals within one bin of the stream's own
/// at each edge (from `1/131072` of its span with 8 streams or fewer, to
/// `1/256` with 8192 or more: 2 M bins in all), the busy time of each
/// thread and class in all of them within rounding.
pub fn overview<F>(
    dir: &Path,
    bins: usize,
    classes: usize,
    class: F,
) -> Result<Overview, TraceError>
where
    F: Fn(u16, bool) -> Option<u8> + Sync,
{
    let bins = bins.max(1);
    let classes = classes.max(1);
    let listing = crate::trace::list(dir)?;
    let opened: Vec<Opened> = listing.streams.par_iter().filter_map(|p| open(p)).collect();
    let clocks = crate::trace::fit_clocks(
        &listing.refs,
        opened.iter().flat_map(|o| {
            let p = o.stream.process.as_str();
            std::iter::once((p, None)).chain(o.chunks.iter().map(move |c| (p, Some(&c.0))))
        }),
    );
    let local = (LOCAL_BINS_ALL / opened.len().max(1)).clamp(256, LOCAL_BINS_MAX);
    let passed: Vec<Passed> = opened
        .into_par_iter()
        .map(|o| {
            let clock = &clocks[&o.stream.process];
            pass_stream(o, clock, local, classes, &class)
        })
        .collect();
    Ok(place(listing.trace, passed, &clocks, bins, classes))
}

/// One stream's pass: its busy time in bins of its own span, in ticks of
/// its process's clock (converted once, at the end).
struct Passed {
    /// Its chunks, times in ns of its process's clock.
    chunks: Vec<WindowChunk>,
    /// [`WindowStream::crossing`].
    crossing: Vec<(u64, u64)>,
    stream: crate::trace::Stream,
    events: u64,
    /// Times of its first and last events, ns of its process's clock.
    first_last: Option<(u64, u64)>,
    rank: Option<Rank>,
    sync: Vec<[u64; 4]>,
    /// Its own span, `[lo, hi]` ticks, in bins of `1 << shift` ticks from `lo`.
    lo: u64,
    hi: u64,
    shift: u32,
    /// Ticks of busy time per (bin, class).
    bins: Vec<u64>,
}

/// What [`overview`] keeps of a thread while it reads it.
struct PassSink<'a, F> {
    class: &'a F,
    classes: usize,
    pts_words: usize,
    model: u32,
    /// Class of each system kind, once asked: `UNKNOWN`, `UNCOUNTED` or
    /// the class.
    kind_class: Vec<u8>,
    /// Class of user events (`UNCOUNTED` when not counted).
    user_class: u8,
    /// Kinds whose START gives the process's rank.
    rank_kinds: [u16; 2],
    wants_rank: bool,
    rank: Option<Rank>,
    sync: Vec<[u64; 4]>,
    events: u64,
    first: u64,
    last: u64,
    /// Positions of STARTs left out (never closed), ascending.
    skip: Vec<u64>,
    next_skip: usize,
    /// Open STARTs per system kind, and per (kind, user event id): (slot,
    /// position).
    open_kind: Vec<Vec<(u32, u64)>>,
    open: HashMap<(u16, u64), Vec<(u32, u64)>>,
    /// Intervals open now, by START.
    active: Vec<Active>,
    /// Each chunk's first event and the START positions of the intervals
    /// open when it begins ([`Windows`]).
    marks: Vec<(u64, Vec<u64>)>,
    /// END position of each interval open at the beginning of a chunk, by
    /// START position.
    crossing: HashMap<u64, u64>,
    /// The earliest and latest time (ticks) of each chunk's events, and of
    /// the chunk being read (time may go back within a chunk).
    ranges: Vec<(u64, u64)>,
    range: (u64, u64),
    next_slot: u32,
    /// Time (ticks, as all times here) up to which busy time is counted.
    now: u64,
    lo: u64,
    hi: u64,
    /// Bins are `1 << shift` ticks wide, `(hi - lo) >> shift` the last one.
    shift: u32,
    bins: Vec<u64>,
}

/// An interval open in an [`overview`]'s pass.
struct Active {
    slot: u32,
    class: u8,
    /// Position of its START.
    start: u64,
    /// Whether a chunk began while it was open.
    crossed: bool,
}

const UNKNOWN: u8 = u8::MAX;
const UNCOUNTED: u8 = u8::MAX - 1;

impl<F: Fn(u16, bool) -> Option<u8>> PassSink<'_, F> {
    #[inline]
    fn class_of(&mut self, kind: u16, user: bool) -> u8 {
        if user {
            return self.user_class;
        }
        let k = kind as usize;
        if k >= self.kind_class.len() {
            self.kind_class.resize(k + 1, UNKNOWN);
        }
        if self.kind_class[k] == UNKNOWN {
            self.kind_class[k] = match (self.class)(kind, false) {
                Some(c) if (c as usize) < self.classes => c,
                _ => UNCOUNTED,
            };
        }
        self.kind_class[k]
    }

    /// Counts the time from `now` to `t` for the innermost open interval.
    #[inline]
    fn advance(&mut self, t: u64) {
        if t <= self.now {
            return;
        }
        if let Some(a) = self.active.last() {
            self.add(self.now, t, a.class);
        }
        self.now = t;
    }

    /// Marks the beginning of a chunk: its first event, and the intervals
    /// open.
    fn begin_chunk(&mut self) {
        let open = self
            .active
            .iter_mut()
            .map(|a| {
                a.crossed = true;
                a.start
            })
            .collect();
        self.marks.push((self.events, open));
        self.range = (u64::MAX, 0);
    }

    /// Marks the end of a chunk: the times of its events.
    fn end_chunk(&mut self) {
        self.ranges.push(self.range);
    }

    #[inline]
    fn add(&mut self, from: u64, to: u64, class: u8) {
        let from = from.clamp(self.lo, self.hi) - self.lo;
        let to = to.clamp(self.lo, self.hi) - self.lo;
        if to <= from {
            return;
        }
        let (bf, bg) = ((from >> self.shift) as usize, (to >> self.shift) as usize);
        let (c, n) = (class as usize, self.classes);
        if bf == bg {
            self.bins[bf * n + c] += to - from;
            return;
        }
        self.bins[bf * n + c] += ((bf as u64 + 1) << self.shift) - from;
        for b in bf + 1..bg {
            self.bins[b * n + c] += 1 << self.shift;
        }
        self.bins[bg * n + c] += to - ((bg as u64) << self.shift);
    }
}

impl<F: Fn(u16, bool) -> Option<u8>> Sink for PassSink<'_, F> {
    fn string(&mut self, _: u32, _: String) {}
    fn callsite(&mut self, _: u32, _: codec::Callsite) {}
    fn user(&mut self, _: UserDef) {}

    #[inline(always)]
    fn wants_args(&mut self, kind: u16) -> bool {
        kind == kinds::GASPARD_CLOCK_SYNC || (self.wants_rank && self.rank_kinds.contains(&kind))
    }

    #[inline(always)]
    fn event(&mut self, e: codec::Event, user: Option<u64>, args: &[u64]) {
        let index = self.events;
        self.events += 1;
        let t = e.ts;
        if index == 0 {
            self.first = t;
            self.now = t;
        }
        self.range = (self.range.0.min(t), self.range.1.max(t));
        self.last = t;
        if e.kind == kinds::GASPARD_CLOCK_SYNC && args.len() >= 4 {
            self.sync.push([args[0], args[1], args[2], args[3]]);
        }
        if e.phase == 1 && self.wants_rank && self.rank_kinds.contains(&e.kind) {
            self.rank = rank_of(self.model, self.pts_words, e.kind, e.flags, args);
            self.wants_rank = false;
        }
        if e.phase > 1 {
            return;
        }
        let class = self.class_of(e.kind, user.is_some());
        if class == UNCOUNTED {
            return;
        }
        let direct = user.is_none() && (e.kind as usize) < DIRECT_KINDS;
        if e.phase == 0 {
            if self.skip.get(self.next_skip) == Some(&index) {
                self.next_skip += 1;
                return;
            }
            self.advance(t);
            let slot = self.next_slot;
            self.next_slot = self.next_slot.wrapping_add(1);
            let stack = if direct {
                &mut self.open_kind[e.kind as usize]
            } else {
                self.open
                    .entry((e.kind, user.unwrap_or(u64::MAX)))
                    .or_default()
            };
            stack.push((slot, index));
            self.active.push(Active {
                slot,
                class,
                start: index,
                crossed: false,
            });
        } else {
            let stack = if direct {
                &mut self.open_kind[e.kind as usize]
            } else {
                self.open
                    .entry((e.kind, user.unwrap_or(u64::MAX)))
                    .or_default()
            };
            let Some((slot, _)) = stack.pop() else {
                return;
            };
            self.advance(t);
            if let Some(p) = self.active.iter().rposition(|a| a.slot == slot) {
                let a = self.active.remove(p);
                if a.crossed {
                    self.crossing.insert(a.start, index);
                }
            }
        }
    }
}

/// The kinds whose START gives a process of `model` its rank (MPI) or PE
/// (OpenSHMEM).
fn startup_kinds(model: u32) -> Option<[&'static str; 2]> {
    match model {
        3 => Some(["GASP_MPI_INIT", "GASP_MPI_INIT_THREAD"]),
        4 => Some(["GASP_SHMEM_INIT", "GASP_SHMEM_INIT"]),
        _ => None,
    }
}

/// How findings name a thread of `process` ([`crate::findings::thread_name`]).
pub(crate) fn thread_name(rank: Option<Rank>, process: &str, stream: u32) -> String {
    match rank {
        Some(r) => format!(
            "{} {} ({} stream {})",
            if r.model == "SHMEM" { "PE" } else { "rank" },
            r.me,
            process,
            stream
        ),
        None => format!("{process} stream {stream}"),
    }
}

/// The rank a start-up event (`kind`, of [`startup_kinds`]) gives, read
/// or not (`me` past `size` then).
fn rank_of(model: u32, pts_words: usize, kind: u16, flags: u8, args: &[u64]) -> Option<Rank> {
    let (rank_arg, size_arg) = match model {
        3 => ("rank", "size"),
        4 => ("pe", "npes"),
        _ => return None,
    };
    let (mut me, mut size, mut at) = (None, None, 0);
    for (n, _, w) in codec::arg_layout(kind, 1, pts_words, flags) {
        if n == rank_arg {
            me = args.get(at).copied();
        } else if n == size_arg {
            size = args.get(at).copied();
        }
        at += w;
    }
    Some(Rank {
        model: if model == 3 { "MPI" } else { "SHMEM" },
        me: me.unwrap_or(u64::MAX) as usize,
        size: size.unwrap_or(0) as usize,
    })
}

fn pass_stream<F: Fn(u16, bool) -> Option<u8>>(
    o: Opened,
    clock: &Clock,
    local: usize,
    classes: usize,
    class: &F,
) -> Passed {
    let ns = |ts: u64| clock.ns_u64(ts);
    // The stream's span from its chunk headers (events out of it, if the
    // clock went back, count at its edges).
    let lo = o.chunks.iter().map(|c| c.0.base_ts).min().unwrap_or(0);
    let hi = o
        .chunks
        .iter()
        .map(|c| c.0.last_ts)
        .max()
        .unwrap_or(lo)
        .max(lo.saturating_add(1));
    let mut shift = 0;
    while (hi - lo) >> shift >= local as u64 {
        shift += 1;
    }
    let nbins = ((hi - lo) >> shift) as usize + 1;
    let rank_kinds = startup_kinds(o.stream.model)
        .unwrap_or(["", ""])
        .map(|n| kinds::kind_by_name(n).map_or(u16::MAX, |k| k.id));
    let user_class = match class(kinds::GASPARD_USER, true) {
        Some(c) if (c as usize) < classes => c,
        _ => UNCOUNTED,
    };
    let run = |skip: Vec<u64>| {
        let mut sink = PassSink {
            class,
            classes,
            pts_words: (o.stream.pts_bytes as usize).div_ceil(8),
            model: o.stream.model,
            kind_class: Vec::new(),
            user_class,
            rank_kinds,
            wants_rank: matches!(o.stream.model, 3 | 4),
            rank: None,
            sync: Vec::new(),
            events: 0,
            first: 0,
            last: 0,
            skip,
            next_skip: 0,
            open_kind: (0..DIRECT_KINDS).map(|_| Vec::new()).collect(),
            open: HashMap::default(),
            active: Vec::new(),
            marks: Vec::with_capacity(o.chunks.len()),
            crossing: HashMap::default(),
            ranges: Vec::with_capacity(o.chunks.len()),
            range: (u64::MAX, 0),
            next_slot: 0,
            now: 0,
            lo,
            hi,
            shift,
            bins: vec![0u64; nbins * classes],
        };
        for (h, at, len) in &o.chunks {
            sink.begin_chunk();
            // What cannot be decoded is left out, as by the other readers.
            let _ = codec::decode_into(h, &o.data[*at..*at + *len], &mut sink);
            sink.end_chunk();
        }
        sink
    };
    let mut sink = run(Vec::new());
    // Intervals never closed are no intervals: read again without them.
    let mut unclosed: Vec<u64> = sink
        .open_kind
        .iter()
        .chain(sink.open.values())
        .flat_map(|s| s.iter().map(|&(_, at)| at))
        .collect();
    if !unclosed.is_empty() {
        unclosed.sort_unstable();
        sink = run(unclosed);
    }
    let rank = sink.rank.filter(|r| r.me < r.size);
    // Where each chunk is, for reading a window of the stream alone (the
    // chunks the quick scan reads: event numbers are `u32`).
    let mut chunks = Vec::with_capacity(o.chunks.len());
    for (((h, at, len), (first, open)), range) in o.chunks.iter().zip(sink.marks).zip(sink.ranges) {
        if first + u64::from(h.events) > crate::trace::MAX_STREAM_EVENTS as u64 {
            break;
        }
        // The times of its events (none: its header's).
        let (from, to) = if range.0 <= range.1 {
            range
        } else {
            (h.base_ts, h.last_ts)
        };
        chunks.push(WindowChunk {
            at: (at - CHUNK_HEADER_LEN) as u64,
            len: *len as u32,
            seq: h.seq,
            events: h.events,
            first,
            open,
            from: ns(from),
            to: ns(to),
        });
    }
    let mut crossing: Vec<(u64, u64)> = sink.crossing.into_iter().collect();
    crossing.sort_unstable();
    Passed {
        chunks,
        crossing,
        stream: o.stream,
        events: sink.events,
        first_last: (sink.events > 0).then_some((ns(sink.first), ns(sink.last))),
        rank,
        sync: sink.sync,
        lo,
        hi,
        shift,
        bins: sink.bins,
    }
}

/// What reading a window of a trace alone needs, found by [`overview`]:
/// where each stream's chunks are, their times, and for each chunk its
/// first event and the intervals open when it begins. [`Windows::window`]
/// then reads only the chunks a window needs, and finds there the spans the
/// quick scan ([`scan`]) finds in the whole trace. [`Windows::to_bytes`]
/// keeps it (in the browser view's index).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Windows {
    /// Ordered as [`Overview::streams`] are.
    streams: Vec<WindowStream>,
    clocks: HashMap<String, Clock>,
    time: Timebase,
    #[serde(skip)]
    dir: std::path::PathBuf,
    /// Source lines of code addresses (made when first needed).
    #[serde(skip)]
    sym: std::sync::Mutex<Option<crate::symbolize::Symbolizer>>,
}

/// One stream of [`Windows`].
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct WindowStream {
    /// Its file's name in the trace directory.
    file: String,
    process: String,
    stream: u32,
    model: u32,
    pts_bytes: u32,
    /// Its process's rank or PE and their number, from its start-up event.
    rank: Option<(usize, usize)>,
    chunks: Vec<WindowChunk>,
    /// (START, END) positions of the intervals open at the beginning of a
    /// chunk, by START.
    crossing: Vec<(u64, u64)>,
}

/// One chunk of a [`WindowStream`].
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct WindowChunk {
    /// Offset of its header in the file.
    at: u64,
    /// Bytes of its payload.
    len: u32,
    seq: u32,
    events: u32,
    /// Position of its first event in the stream.
    first: u64,
    /// START positions of the intervals open when it begins.
    open: Vec<u64>,
    /// The earliest and latest times of its events (ns from the trace's
    /// start).
    from: u64,
    to: u64,
}

/// The spans of a time window of a trace ([`Windows::window`]).
#[derive(Debug, Default)]
pub struct Window {
    /// Per stream (ordered as [`Overview::streams`]), its spans that
    /// overlap the window (end at or after its start, start before its
    /// end), by START position, as the quick scan gives them.
    pub streams: Vec<Vec<QuickSpan>>,
    /// Callsites referred to by the spans.
    pub callsites: Vec<Callsite>,
    /// Span names.
    pub names: Vec<String>,
    /// Events decoded.
    pub events: u64,
}

/// The chunks one stream's part of a window needs.
struct Plan {
    /// Chunks to read, ascending.
    chunks: Vec<usize>,
    /// The chunks read whole: `lo..hi`; the others give only the STARTs
    /// and ENDs below.
    lo: usize,
    hi: usize,
    starts: rustc_hash::FxHashSet<u64>,
    ends: rustc_hash::FxHashSet<u64>,
}

impl Windows {
    /// Streams.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// Whether there is no stream.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// The process (`host-pid`) and stream number of each stream.
    pub fn rows(&self) -> Vec<(String, u32)> {
        self.streams
            .iter()
            .map(|s| (s.process.clone(), s.stream))
            .collect()
    }

    /// Each stream's process's rank or PE, from its start-up event (as
    /// [`QuickStream::rank`]).
    pub fn ranks(&self) -> Vec<Option<Rank>> {
        self.streams
            .iter()
            .map(|s| {
                s.rank.map(|(me, size)| Rank {
                    model: if s.model == 3 { "MPI" } else { "SHMEM" },
                    me,
                    size,
                })
            })
            .collect()
    }

    /// Kept as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        postcard::to_stdvec(self).unwrap_or_default()
    }

    /// Those [`Windows::to_bytes`] kept, for the trace in `dir`.
    pub fn from_bytes(dir: &Path, b: &[u8]) -> Option<Windows> {
        let mut w: Windows = postcard::from_bytes(b).ok()?;
        w.dir = dir.to_path_buf();
        Some(w)
    }

    fn plan(s: &WindowStream, a: u64, b: u64) -> Plan {
        let n = s.chunks.len();
        let lo = s.chunks.iter().position(|c| c.to >= a).unwrap_or(n);
        let hi = s
            .chunks
            .iter()
            .rposition(|c| c.from < b)
            .map_or(0, |i| i + 1)
            .max(lo);
        let chunk_of = |pos: u64| {
            s.chunks
                .partition_point(|c| c.first + u64::from(c.events) <= pos)
                .min(n.saturating_sub(1))
        };
        let starts: rustc_hash::FxHashSet<u64> = s
            .chunks
            .get(lo)
            .map(|c| c.open.iter().copied().collect())
            .unwrap_or_default();
        let ends: rustc_hash::FxHashSet<u64> = s
            .chunks
            .get(hi)
            .map(|c| {
                c.open
                    .iter()
                    .filter_map(|p| {
                        let i = s.crossing.binary_search_by_key(p, |x| x.0).ok()?;
                        Some(s.crossing[i].1)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut chunks: Vec<usize> = starts
            .iter()
            .chain(&ends)
            .map(|&p| chunk_of(p))
            .chain(lo..hi)
            .collect();
        chunks.sort_unstable();
        chunks.dedup();
        Plan {
            chunks,
            lo,
            hi,
            starts,
            ends,
        }
    }

    /// Events the chunks of the window `[a, b)` (ns from the trace's start)
    /// hold: what [`Windows::window`] decodes.
    pub fn events_in(&self, a: u64, b: u64) -> u64 {
        self.streams
            .iter()
            .map(|s| {
                Windows::plan(s, a, b)
                    .chunks
                    .iter()
                    .map(|&c| u64::from(s.chunks[c].events))
                    .sum::<u64>()
            })
            .sum()
    }

    /// The spans that overlap `[a, b)` (ns from the trace's start), read
    /// from the chunks that hold them alone: the same as the quick scan
    /// gives. `None` when the trace's files cannot be read as they were
    /// (changed since, or gone).
    pub fn window(&self, a: u64, b: u64) -> Option<Window> {
        // One stream after another, on the calling thread: the machine's
        // cores are busy with the quick scan meanwhile (in parallel, the
        // windows of bench/view.sh took longer: 90 -> 122 ms).
        let mut parts = Vec::with_capacity(self.streams.len());
        let mut events = 0;
        for s in &self.streams {
            let clock = self.clocks.get(&s.process)?;
            let (scanned, n) = self.read(s, clock, a, b)?;
            events += n;
            parts.push(scanned);
        }
        let user_defs =
            Numbering::user_defs(parts.iter().map(|(p, s)| (p.as_str(), s.names.as_slice())));
        let mut numbering = Numbering::default();
        let mut sym = self.sym.lock().unwrap_or_else(|p| p.into_inner());
        let sym = sym.get_or_insert_with(|| crate::symbolize::Symbolizer::new(&self.dir));
        let streams = parts
            .into_iter()
            .map(|(process, s)| {
                let mut spans = numbering.spans(
                    &process,
                    s.spans,
                    s.sites,
                    s.names,
                    &s.codeptrs,
                    &user_defs,
                    &self.time,
                    sym,
                );
                spans.retain(|sp| sp.end >= a && sp.start < b);
                spans
            })
            .collect();
        Some(Window {
            streams,
            callsites: numbering.callsites,
            names: numbering.names,
            events,
        })
    }

    /// One stream's part of a window: its spans (times in ns of its
    /// process's clock) and the events decoded.
    fn read(
        &self,
        s: &WindowStream,
        clock: &Clock,
        a: u64,
        b: u64,
    ) -> Option<((String, Scanned), u64)> {
        use std::os::unix::fs::FileExt;
        let plan = Windows::plan(s, a, b);
        // A stream with nothing in the window needs no file.
        let file = if plan.chunks.is_empty() {
            None
        } else {
            Some(std::fs::File::open(self.dir.join(&s.file)).ok()?)
        };
        let stream = crate::trace::Stream {
            process: s.process.clone(),
            stream: s.stream,
            model: s.model,
            pts_bytes: s.pts_bytes,
            ..Default::default()
        };
        let mut sink = ScanSink::new(clock, &stream);
        sink.want = Some((plan.starts, plan.ends));
        let mut buf = Vec::new();
        let mut events = 0;
        for &c in &plan.chunks {
            let ch = &s.chunks[c];
            buf.resize(CHUNK_HEADER_LEN + ch.len as usize, 0);
            file.as_ref()?.read_exact_at(&mut buf, ch.at).ok()?;
            let (hb, payload) = buf.split_at(CHUNK_HEADER_LEN);
            let h = ChunkHeader::parse(hb)?;
            if h.seq != ch.seq || h.events != ch.events || !ChunkHeader::verify(hb, payload) {
                return None;
            }
            sink.events = ch.first;
            sink.filtering = !(plan.lo..plan.hi).contains(&c);
            sink.begin_chunk();
            let _ = codec::decode_into(&h, payload, &mut sink);
            events += u64::from(h.events);
        }
        Some(((s.process.clone(), sink.finish(stream)), events))
    }
}

/// What [`Timebase::new`] needs of a scanned stream: its process, its clock
/// synchronization samples, and the times of its first and last events (ns
/// of its process's clock).
type ClockInput<'a> = (&'a str, &'a [[u64; 4]], Option<(u64, u64)>);

/// The clock corrections of a scanned trace's processes and the trace's
/// start, as the whole trace's reader finds them: what puts a stream's times
/// on the trace's.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Timebase {
    /// Per process, when corrections are applied.
    corrections: HashMap<String, crate::clocksync::Correction>,
    /// The trace's start, ns.
    base: i128,
}

impl Timebase {
    /// Measures each process's correction (added to `t.clock_sync`, in name
    /// order) and the trace's start.
    fn new(t: &mut crate::trace::Trace, streams: &[ClockInput<'_>]) -> Timebase {
        let mut processes: Vec<&str> = streams.iter().map(|s| s.0).collect();
        processes.sort_unstable();
        processes.dedup();
        for p in processes {
            let samples = crate::clocksync::samples_of(
                streams
                    .iter()
                    .filter(|s| s.0 == p)
                    .flat_map(|s| s.1.iter().map(|a| a.as_slice())),
            );
            if let Some(c) = crate::clocksync::correction(p, &samples) {
                t.clock_sync.push(c);
            }
        }
        let corrections = if crate::clocksync::enabled() {
            t.clock_sync
                .iter()
                .map(|c| (c.process.clone(), c.clone()))
                .collect()
        } else {
            HashMap::default()
        };
        let mut time = Timebase {
            corrections,
            base: 0,
        };
        let firsts: Vec<(&str, u64)> = streams
            .iter()
            .filter_map(|&(p, _, fl)| Some((p, time.correct(p, fl?.0))))
            .collect();
        time.base = crate::trace::trace_start(t, &firsts);
        time
    }

    /// `v`, ns of `process`'s clock, corrected.
    fn correct(&self, process: &str, v: u64) -> u64 {
        match self.corrections.get(process) {
            Some(c) => c.correct(v),
            None => v,
        }
    }

    /// `v`, ns of `process`'s clock, in ns from the trace's start.
    fn at(&self, process: &str, v: u64) -> u64 {
        (self.correct(process, v) as i128 - self.base).clamp(0, MAX_T_NS as i128) as u64
    }
}

/// Corrects the clocks as [`merge`] does, and puts each stream's bins on
/// the whole run's.
fn place(
    mut t: crate::trace::Trace,
    passed: Vec<Passed>,
    clocks: &HashMap<String, Clock>,
    bins: usize,
    classes: usize,
) -> Overview {
    let inputs: Vec<ClockInput<'_>> = passed
        .iter()
        .map(|s| (s.stream.process.as_str(), s.sync.as_slice(), s.first_last))
        .collect();
    let time = Timebase::new(&mut t, &inputs);
    drop(inputs);
    let mut passed = passed;
    let mut window_streams: Vec<WindowStream> = passed
        .iter_mut()
        .map(|s| {
            let process = s.stream.process.as_str();
            let mut chunks = std::mem::take(&mut s.chunks);
            for c in &mut chunks {
                c.from = time.at(process, c.from);
                c.to = time.at(process, c.to);
            }
            WindowStream {
                file: s
                    .stream
                    .path
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                process: process.to_string(),
                stream: s.stream.stream,
                model: s.stream.model,
                pts_bytes: s.stream.pts_bytes,
                rank: s.rank.map(|r| (r.me, r.size)),
                chunks,
                crossing: std::mem::take(&mut s.crossing),
            }
        })
        .collect();
    window_streams
        .sort_by(|a, b| (a.process.as_str(), a.stream).cmp(&(b.process.as_str(), b.stream)));
    let at = |process: &str, v: u64| time.at(process, v);
    let spans: Vec<(u64, u64)> = passed
        .iter()
        .filter_map(|s| {
            let (f, l) = s.first_last?;
            Some((at(&s.stream.process, f), at(&s.stream.process, l)))
        })
        .collect();
    let t0 = spans.iter().map(|s| s.0).min().unwrap_or(0);
    let t1 = spans.iter().map(|s| s.1).max().unwrap_or(t0).max(t0 + 1);
    let bin_w = (t1 - t0) as f64 / bins as f64;
    let mut streams: Vec<OverviewStream> = passed
        .into_par_iter()
        .map(|s| {
            let process = s.stream.process.as_str();
            let mut out = vec![0f32; bins * classes];
            let clock = &clocks[process];
            // Ticks to ns of the run.
            let run_ns = |ticks: u64| {
                let ns = clock.ns_u64(ticks);
                at(process, ns) as f64 - t0 as f64
            };
            // ns of the run per tick (a drifting clock's ns are not quite
            // the run's).
            let start = run_ns(s.lo);
            let stretch = ((run_ns(s.hi) - start) / (s.hi - s.lo) as f64).max(0.0);
            for (b, row) in s.bins.chunks_exact(classes).enumerate() {
                if row.iter().all(|&x| x == 0) {
                    continue;
                }
                // The local bin's span on the whole run's time.
                let from = s.lo.saturating_add((b as u64) << s.shift);
                // (Linear, as the clock and its correction are: no
                // rounding to whole ns bin by bin.)
                let x0 = start + (from - s.lo) as f64 * stretch;
                let x1 = x0 + (1u64 << s.shift) as f64 * stretch;
                let (f, g) = (x0 / bin_w, (x1 / bin_w).max(x0 / bin_w));
                let lo = (f.max(0.0) as usize).min(bins - 1);
                let hi = ((g.max(0.0) as usize) + 1).min(bins);
                for bin in lo..hi {
                    // The share of the local bin in this bin.
                    let share = if g > f {
                        (g.min(bin as f64 + 1.0) - f.max(bin as f64)).max(0.0) / (g - f)
                    } else {
                        1.0
                    };
                    if share == 0.0 {
                        continue;
                    }
                    for (c, &ticks) in row.iter().enumerate() {
                        out[bin * classes + c] += (ticks as f64 * stretch * share / bin_w) as f32;
                    }
                }
            }
            let name = thread_name(s.rank, process, s.stream.stream);
            OverviewStream {
                process: s.stream.process.clone(),
                stream: s.stream.stream,
                name,
                events: s.events,
                bins: out,
            }
        })
        .collect();
    streams.sort_by(|a, b| (a.process.as_str(), a.stream).cmp(&(b.process.as_str(), b.stream)));
    let windows = Windows {
        streams: window_streams,
        clocks: clocks.iter().map(|(p, c)| (p.clone(), *c)).collect(),
        time,
        dir: t.dir.clone(),
        sym: std::sync::Mutex::new(None),
    };
    Overview {
        t0,
        t1,
        bins,
        classes,
        streams,
        windows,
    }
}
