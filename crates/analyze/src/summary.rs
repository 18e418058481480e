//! The report as a merge of per-stream parts.
//!
//! Each analysis is split in two: a *part* computed from one stream alone
//! (and from what its own process tells: its MPI rank, its shared objects,
//! its binaries' mappings), and a *merge* of the parts of every stream in
//! stream order. A merge knows of the streams only their [`Identity`] and
//! the trace's callsites, never their events: the parts can be made where
//! the streams are read (by the ranks of `gaspard report --mpi`, or one
//! stream after another with each dropped once summarized) and merged where
//! the report is written.

use serde::{Deserialize, Serialize};

use gaspard_format::kinds;

use crate::matrix::Rank;
use crate::trace::Stream;

/// What every merge may know of a stream besides its parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    /// `host-pid` of its process.
    pub process: String,
    /// Stream number within the process.
    pub stream: u32,
    /// Order of the thread within its process.
    pub thread: u32,
    /// `gasp_model_t`.
    pub model: u32,
    /// How findings name it ([`crate::findings::thread_name`]).
    pub name: String,
    /// Its process's rank or PE, from this stream's start-up event
    /// ([`crate::matrix::rank`]).
    pub rank: Option<Rank>,
    /// Its working time ([`crate::findings::active_span`]).
    pub active_span: u64,
    /// Whether it holds coarray events (`GASP_CAF_*`).
    pub caf: bool,
    /// Whether it holds only C events (functions, allocations), user events
    /// and the tool's own: a thread of a plain C program, not of an SPMD one.
    #[serde(default)]
    pub c_only: bool,
    /// Its events.
    pub events: u64,
}

impl Identity {
    /// The identity of `s`.
    pub fn of(s: &Stream) -> Identity {
        let mut b = IdentityBuilder::new(s);
        b.feed(s);
        b.finish()
    }
}

/// A stream's [`Identity`] and lost events, made window by window
/// ([`crate::window`]).
#[derive(Debug)]
pub(crate) struct IdentityBuilder {
    id: Identity,
    /// Its rank, once a window gave its start-up.
    rank: Option<Option<Rank>>,
    /// The kinds of its events, a bit each.
    kinds: Vec<u64>,
    /// Its time in start-up and shutdown.
    startup_ns: u64,
    /// The times of its first and last events.
    first: Option<u64>,
    last: Option<u64>,
    /// The events it says were lost.
    lost: u64,
}

impl IdentityBuilder {
    /// For the windows of `s`.
    pub(crate) fn new(s: &Stream) -> IdentityBuilder {
        IdentityBuilder {
            id: Identity {
                process: s.process.clone(),
                stream: s.stream,
                thread: s.thread,
                model: s.model,
                name: String::new(),
                rank: None,
                active_span: 0,
                caf: false,
                c_only: false,
                events: 0,
            },
            rank: None,
            kinds: Vec::new(),
            startup_ns: 0,
            first: None,
            last: None,
            lost: 0,
        }
    }

    /// Adds window `s` (the next of its stream).
    pub(crate) fn feed(&mut self, s: &Stream) {
        let own = s.own_events();
        self.id.events += own.len() as u64;
        if let (None, Some(e)) = (self.first, own.first()) {
            self.first = Some(e.t_ns);
        }
        if let Some(e) = own.last() {
            self.last = Some(e.t_ns);
        }
        if self.rank.is_none() {
            self.rank = crate::matrix::rank_in(s);
        }
        let d = crate::intervals::derived(s);
        self.startup_ns = self.startup_ns.saturating_add(d.startup_ns);
        if self.kinds.is_empty() {
            self.kinds = d.kinds.clone();
        } else {
            for (a, b) in self.kinds.iter_mut().zip(&d.kinds) {
                *a |= b;
            }
        }
        // Looked for only in a window that has such events.
        if crate::intervals::has_kind(s, kinds::GASPARD_LOST) {
            self.lost = own
                .iter()
                .filter(|e| e.kind == kinds::GASPARD_LOST)
                .map(|e| s.args(e).first().copied().unwrap_or(0))
                .fold(self.lost, u64::saturating_add);
        }
    }

    /// The identity of the windows given, and the events they say were lost.
    pub(crate) fn finish(self) -> Identity {
        self.finish_with_lost().0
    }

    /// [`IdentityBuilder::finish`], with the events lost.
    pub(crate) fn finish_with_lost(self) -> (Identity, u64) {
        let mut id = self.id;
        let has = |k: u16| {
            self.kinds
                .get(k as usize / 64)
                .is_some_and(|w| w & (1 << (k % 64)) != 0)
        };
        id.rank = self.rank.flatten();
        id.name = crate::scan::thread_name(id.rank, &id.process, id.stream);
        id.caf = caf_kinds().iter().any(|&k| has(k));
        id.c_only = id.model == 0 && c_only(&self.kinds);
        let span = match (self.first, self.last) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        id.active_span = span.saturating_sub(self.startup_ns);
        (id, self.lost)
    }
}

/// Whether kinds (a bit each) are only C events (`GASP_C_*`), user events
/// and the tool's own (`GASPARD_*`): with the UPC model's context where C
/// events go, a thread of a plain C program.
fn c_only(kind_bits: &[u64]) -> bool {
    kind_bits.iter().enumerate().all(|(w, &bits)| {
        (0..64u32).filter(|b| bits & (1u64 << b) != 0).all(|b| {
            let k = (w * 64 + b as usize) as u16;
            matches!(
                k,
                kinds::C_FUNC | kinds::C_MALLOC | kinds::C_REALLOC | kinds::C_FREE
            ) || kinds::kind(k).is_some_and(|i| i.name.starts_with("GASPARD_"))
        })
    })
}

/// The coarray kinds (`GASP_CAF_*`), by number.
pub(crate) fn caf_kinds() -> &'static [u16] {
    static CAF: std::sync::OnceLock<Vec<u16>> = std::sync::OnceLock::new();
    CAF.get_or_init(|| {
        kinds::all_kinds()
            .filter(|k| k.name.starts_with("GASP_CAF_"))
            .map(|k| k.id)
            .collect()
    })
}

/// Everything the report needs of one stream, made from it alone.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamSummary {
    /// Who it is.
    pub id: Identity,
    /// Its time split, its barriers, transfers and regions.
    pub findings: crate::findings::Part,
    /// Its row of the communication matrices.
    pub matrix: crate::matrix::Part,
    /// Its two-sided messages, fences and one-sided synchronization.
    pub waits: crate::waitstates::Part,
    /// Its lock acquisitions and holds.
    pub locks: crate::locks::Part,
    /// Its accesses to shared objects.
    pub blocks: crate::blocks::Part,
    /// Its profile: statistics per event name and per callsite.
    #[serde(with = "crate::profile::sent")]
    pub profile: crate::profile::ProfilePart,
    /// The events it says were lost (`GASPARD_LOST`), counted for a process
    /// without a manifest.
    pub lost: u64,
}

/// What the parts of a stream need to know of its process, found once for
/// every process of a trace (process by process: a trace holding only some
/// processes gives the same for them).
#[derive(Debug)]
pub struct Context {
    /// Each process's MPI rank.
    pub waits: crate::waitstates::Context,
    /// Each process's binaries (where its global locks are).
    pub locks: rustc_hash::FxHashMap<String, crate::locks::Context>,
}

impl Context {
    /// The context of every process of `t`.
    pub fn of(t: &crate::trace::Trace) -> Context {
        Context {
            waits: crate::waitstates::Context::of(t),
            locks: crate::locks::Context::all(t),
        }
    }
}

impl StreamSummary {
    /// The summary of `s`, one of the streams of `t`, whose context is `cx`.
    pub fn of(t: &crate::trace::Trace, cx: &Context, s: &Stream) -> StreamSummary {
        // Cut in windows ([`crate::window`]) when `GASPARD_WINDOW_EVENTS`
        // asks for it (a stream whose STARTs are not in time order, its
        // clock having gone backwards, is summarized whole: its intervals
        // are sorted).
        if let Some(n) = crate::window::events_per_window()
            .filter(|&n| n < s.events.len() && crate::intervals::derived(s).in_order)
        {
            let facts = Facts::of(s);
            return StreamSummary::of_windows(t, cx, &facts, &crate::window::split(s, n));
        }
        let none = crate::locks::Context::default();
        let (id, lost) = {
            let mut b = IdentityBuilder::new(s);
            b.feed(s);
            b.finish_with_lost()
        };
        StreamSummary {
            profile: {
                let mut b = crate::profile::Builder::new(s);
                b.feed(s);
                b.part(t)
            },
            lost,
            id,
            findings: crate::findings::Part::of(t, s),
            matrix: crate::matrix::Part::of(s),
            waits: crate::waitstates::Part::of(s, &cx.waits, &t.objects),
            blocks: crate::blocks::Part::of(s, &t.objects),
            locks: crate::locks::Part::of(s, &t.objects, cx.locks.get(&s.process).unwrap_or(&none)),
        }
    }

    /// The summary of a stream of `t` from its windows `ws` in turn (the
    /// same as [`StreamSummary::of`] the whole stream), whose context is
    /// `cx` and of which `facts` are known beforehand.
    pub(crate) fn of_windows(
        t: &crate::trace::Trace,
        cx: &Context,
        facts: &Facts,
        ws: &[Stream],
    ) -> StreamSummary {
        let Some(first) = ws.first() else {
            return StreamSummary::of(t, cx, &Stream::default());
        };
        let mut b = Summarizer::new(cx, &t.objects, facts, first);
        for w in ws {
            b.feed(t, w);
        }
        b.finish(t)
    }
}

/// A stream's [`StreamSummary`], made window by window.
pub(crate) struct Summarizer<'a> {
    facts: Facts,
    objects: &'a crate::objects::Objects,
    locks_cx: &'a crate::locks::Context,
    id: IdentityBuilder,
    matrix: crate::matrix::Builder,
    profile: crate::profile::Builder,
    locks: crate::locks::Builder,
    findings: crate::findings::Builder,
    waits: crate::waitstates::Builder,
    resolver: crate::window::Resolver,
    /// The lock calls' intervals in START order.
    lock_calls: crate::window::Resolver,
    blocks: crate::blocks::Builder,
}

/// The lock context of a process whose binaries are not known.
static NO_LOCKS: std::sync::LazyLock<crate::locks::Context> =
    std::sync::LazyLock::new(crate::locks::Context::default);

impl<'a> Summarizer<'a> {
    /// For the windows of `s` (a stream of the trace whose context is `cx`
    /// and shared objects `objects`, of which `facts` are known beforehand).
    pub(crate) fn new(
        cx: &'a Context,
        objects: &'a crate::objects::Objects,
        facts: &Facts,
        s: &Stream,
    ) -> Summarizer<'a> {
        Summarizer {
            facts: *facts,
            objects,
            locks_cx: cx.locks.get(&s.process).unwrap_or(&NO_LOCKS),
            id: IdentityBuilder::new(s),
            matrix: crate::matrix::Builder::new(s),
            profile: crate::profile::Builder::new(s),
            locks: crate::locks::Builder::default(),
            findings: crate::findings::Builder::new(s, !facts.syncs_all),
            waits: crate::waitstates::Builder::new(cx.waits.rank(&s.process), Some(facts.rank)),
            resolver: crate::window::Resolver::new(crate::waitstates::wanted_kinds()),
            lock_calls: crate::window::Resolver::new(crate::locks::call_kinds()),
            blocks: crate::blocks::Builder::new(facts.caf),
        }
    }

    /// Adds window `w` (the next of its stream, one of the streams of `t`).
    pub(crate) fn feed(&mut self, t: &crate::trace::Trace, w: &Stream) {
        let objects = self.objects;
        self.id.feed(w);
        self.matrix.feed(w);
        self.profile.feed(w);
        self.locks.feed_omp(w, self.locks_cx);
        if let Some(calls) = self.lock_calls.feed(w) {
            self.locks.feed_calls(&calls, objects, self.locks_cx);
        }
        if !w.window.more {
            if let Some(calls) = self.lock_calls.finish(w) {
                self.locks.feed_calls(&calls, objects, self.locks_cx);
            }
        }
        self.findings.feed(t, w);
        if let Some(given) = self.resolver.feed(w) {
            self.waits.feed(&given, objects);
        }
        if !w.window.more {
            if let Some(rest) = self.resolver.finish(w) {
                self.waits.feed(&rest, objects);
            }
        }
        // (A stream of no rank, outside a coarray program, has none.)
        if self.facts.caf || self.facts.rank.is_some() {
            let ends = crate::findings::barrier_ends(w, self.facts.syncs_all);
            self.blocks.feed(w, objects, &ends);
        }
    }

    /// The summary of the windows given.
    pub(crate) fn finish(self, t: &crate::trace::Trace) -> StreamSummary {
        let (id, lost) = self.id.finish_with_lost();
        let rank = id.rank;
        StreamSummary {
            profile: self.profile.part(t),
            lost,
            id,
            findings: self.findings.finish(),
            matrix: self.matrix.finish(),
            waits: self.waits.finish(),
            blocks: self.blocks.finish(rank),
            locks: self.locks.finish(),
        }
    }
}

/// What summarizing a stream window by window needs to know of it
/// beforehand: from the whole stream ([`Facts::of`]), or, for a stream read
/// in windows, from the events its light first reading keeps (its
/// start-up; a Coarray Fortran process is read whole).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Facts {
    /// Whether it holds coarray events.
    pub(crate) caf: bool,
    /// Whether it holds a coarray `sync all` ([`crate::findings::syncs_all`]).
    pub(crate) syncs_all: bool,
    /// Its process's rank or PE, from its start-up ([`crate::matrix::rank`]).
    pub(crate) rank: Option<Rank>,
}

impl Facts {
    /// The facts of `s`, a whole stream.
    pub(crate) fn of(s: &Stream) -> Facts {
        Facts {
            caf: caf_kinds()
                .iter()
                .any(|&k| crate::intervals::has_kind(s, k)),
            syncs_all: crate::findings::syncs_all(s),
            rank: crate::matrix::rank(s),
        }
    }
}

/// What turns the summary of a stream made from its process alone (its
/// events numbered by the process, their times relative to the process's
/// first event) into the one made in the whole trace: where that event is
/// from the trace's start, and the trace's number of each of the process's
/// callsites, user events and texts.
///
/// The parts of a stream are the same either way when every event of the
/// process lies within [`crate::trace::MAX_T_NS`] after the trace's start:
/// the analyses compare and subtract times, and look callsites, user events
/// and texts up by number, so that shifting every time by the same amount
/// and renumbering commute with them.
#[derive(Debug)]
pub(crate) struct Rebase {
    /// How much later than the trace's start the process's first event is
    /// (the process's times are from that event).
    pub(crate) after: u64,
    /// The trace's number of each of the process's callsites.
    pub(crate) sites: Vec<u32>,
    /// ... of each of its user events.
    pub(crate) users: Vec<u32>,
    /// ... of each of its texts.
    pub(crate) texts: Vec<u32>,
    /// The trace's callsite for a number the process does not have.
    pub(crate) nowhere: u32,
    /// The trace's number of each callsite found from a return address,
    /// numbered [`crate::trace::FOUND_SITES`] on (a stream summarized as it
    /// is read, before its file's callsites are all known).
    pub(crate) found: Vec<u32>,
}

impl Rebase {
    /// A time of the process, made relative to the trace's start.
    #[inline]
    pub(crate) fn t(&self, t: u64) -> u64 {
        t.saturating_add(self.after)
    }

    /// The trace's number of the process's callsite `site`.
    #[inline]
    pub(crate) fn site(&self, site: u32) -> u32 {
        let (table, at) = match site.checked_sub(crate::trace::FOUND_SITES) {
            Some(j) => (&self.found, j),
            None => (&self.sites, site),
        };
        table.get(at as usize).copied().unwrap_or(self.nowhere)
    }

    /// The trace's number of the process's user event `user`.
    pub(crate) fn user(&self, user: u32) -> u32 {
        self.users
            .get(user as usize)
            .copied()
            .unwrap_or(crate::trace::NO_USER)
    }

    /// The trace's number of the process's text `text`.
    pub(crate) fn text(&self, text: u32) -> u32 {
        self.texts
            .get(text as usize)
            .copied()
            .unwrap_or(crate::trace::NO_TEXT)
    }

    /// Shifts both times of an interval.
    pub(crate) fn span(&self, (from, to): (u64, u64)) -> (u64, u64) {
        (self.t(from), self.t(to))
    }
}

impl StreamSummary {
    /// The summary as the whole trace makes it, from the one its process
    /// alone made ([`Rebase`]).
    pub(crate) fn rebase(&mut self, r: &Rebase) {
        self.findings.rebase(r);
        self.waits.rebase(r);
        self.locks.rebase(r);
        self.blocks.rebase(r);
        for ((_, site), _) in &mut self.profile.1 {
            *site = r.site(*site);
        }
    }
}
