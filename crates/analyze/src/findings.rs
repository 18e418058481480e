//! What slows the program: each thread's time split into computation,
//! synchronization and communication, and the findings about barriers
//! (time spent waiting at them, and load imbalance: a thread that arrives
//! last, epoch after epoch).

use rustc_hash::FxHashMap as HashMap;

use gaspard_format::kinds::{self, Class};
use serde::{Deserialize, Serialize};

use crate::intervals::{intervals, Interval};
use crate::summary::Identity;
use crate::trace::{Callsite, Stream, Trace};

/// One thread's time, split.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Breakdown {
    /// `host-pid` of the process.
    pub process: String,
    /// Stream number.
    pub stream: u32,
    /// First to last event, less the runtime's start-up and shutdown, ns.
    pub span_ns: u64,
    /// Time in neither synchronization nor communication.
    pub compute_ns: u64,
    /// Time in barriers, fences, locks, waits.
    pub sync_ns: u64,
    /// Time in gets, puts, messages, collectives.
    pub comm_ns: u64,
    /// Time inside parallel constructs: for an OpenMP thread, inside its
    /// implicit tasks (parallel regions); a process of an SPMD model (UPC,
    /// SHMEM, MPI, CAF) runs in parallel all along.
    pub parallel_ns: u64,
}

/// A source position.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Location {
    /// File.
    pub file: String,
    /// Line.
    pub line: u32,
}

/// A cause of slowness a person can act on.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// `barrier_wait`, `load_imbalance`, ...
    pub kind: String,
    /// Share of the threads' total time at stake (0..1).
    pub severity: f64,
    /// The threads concerned (`host-pid stream N`).
    pub threads: Vec<String>,
    /// Where in the source, when known.
    pub location: Option<Location>,
    /// What was found and what to try.
    pub message: String,
}

/// Whether a kind starts or ends a runtime (init, finalize): its time is the
/// runtime's, not the program's.
pub(crate) fn is_startup(kind: u16) -> bool {
    // By kind number, the names looked at once.
    static STARTUP: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
    let table = STARTUP.get_or_init(|| {
        let mut v = Vec::new();
        for k in kinds::all_kinds() {
            let startup = k.name.starts_with("GASP_")
                && (k.name.ends_with("_INIT")
                    || k.name.ends_with("_INIT_THREAD")
                    || k.name.ends_with("_FINALIZE"));
            if startup {
                let i = k.id as usize;
                v.resize(v.len().max(i + 1), false);
                v[i] = true;
            }
        }
        v
    });
    table.get(kind as usize).copied().unwrap_or(false)
}

/// A thread's working time: first to last event, less the runtime's start-up
/// and shutdown (`shmem_init`, `MPI_Finalize`, ...).
pub fn active_span(s: &Stream) -> u64 {
    let span = match (s.events.first(), s.events.last()) {
        (Some(a), Some(b)) => b.t_ns.saturating_sub(a.t_ns),
        _ => 0,
    };
    span.saturating_sub(crate::intervals::derived(s).startup_ns)
}

fn class_of(kind: u16) -> Option<Class> {
    // By number (asked once or more per interval by several analyses).
    static CLASSES: std::sync::OnceLock<Vec<Option<Class>>> = std::sync::OnceLock::new();
    CLASSES.get_or_init(|| kinds::table(|k| k.map(|k| k.class)))[kind as usize]
}

/// An OpenMP thread's time inside parallel regions: in the implicit tasks of
/// their teams, nested ones counted once; the initial task (the program's
/// own, outside any region) is not one. libomp tells a worker thread that its
/// implicit task ended only when the next parallel region begins, so the last
/// region's never ends on a worker: a task still open at the end of the
/// stream counts until the stream's last event.
fn parallel_time(s: &Stream) -> u64 {
    let Some(task) = kinds::kind_by_name("GASP_OMP_IMPLICIT_TASK")
        .map(|k| k.id)
        .filter(|&k| crate::intervals::has_kind(s, k))
    else {
        return 0;
    };
    let mut p = Parallel::default();
    for e in s.events.iter().filter(|e| e.kind == task) {
        p.task(s, e);
    }
    p.finish(s.events.last().map(|e| e.t_ns))
}

/// [`parallel_time`], made as a thread's implicit tasks come in order.
#[derive(Debug, Default)]
struct Parallel {
    /// Per open task, whether it is a team's.
    open: Vec<bool>,
    /// How many of those are open, since when, and the time inside so far.
    teams: u32,
    from: u64,
    inside: u64,
}

impl Parallel {
    /// An implicit task's event `e` of `s`.
    fn task(&mut self, s: &Stream, e: &crate::trace::Event) {
        match e.phase {
            0 => {
                let team = !is_initial_task(s.args(e));
                self.open.push(team);
                if team {
                    if self.teams == 0 {
                        self.from = e.t_ns;
                    }
                    self.teams += 1;
                }
            }
            // An END without its START (a damaged stream) is passed over.
            1 if self.open.pop() == Some(true) => {
                self.teams -= 1;
                if self.teams == 0 {
                    self.inside += e.t_ns.saturating_sub(self.from);
                }
            }
            _ => {}
        }
    }

    /// The time inside, with the stream's last event at `last`.
    fn finish(mut self, last: Option<u64>) -> u64 {
        if self.teams > 0 {
            self.inside += last.unwrap_or(self.from).saturating_sub(self.from);
        }
        self.inside
    }
}

/// Whether an implicit task's START (words: actual parallelism, index, OMPT
/// task flags) is the initial task's. Traces without the flags: libomp gives
/// the initial task index 1 of 1, while a team's tasks are numbered from 0.
fn is_initial_task(words: &[u64]) -> bool {
    const OMPT_TASK_INITIAL: u64 = 1;
    match *words {
        [_, _, flags, ..] => flags & OMPT_TASK_INITIAL != 0,
        [actual, index] => index >= actual,
        _ => false,
    }
}

/// Each thread's time: the outermost synchronization and communication
/// intervals, the rest being computation.
pub fn breakdown(t: &Trace) -> Vec<Breakdown> {
    t.streams.iter().map(breakdown_of).collect()
}

/// One thread's time ([`breakdown`]).
pub fn breakdown_of(s: &Stream) -> Breakdown {
    let span = active_span(s);
    let w = walked(s);
    let parallel = (s.model == 5).then(|| parallel_time(s));
    split_of(s, span, parallel, w)
}

/// The time of stream `s`, whose working time is `span` and time in
/// parallel regions `parallel` (OpenMP), from its walk `w`.
fn split_of(s: &Stream, span: u64, parallel: Option<u64>, w: &Walked) -> Breakdown {
    let (sync, comm) = (w.sync_ns, w.comm_ns);
    Breakdown {
        process: s.process.clone(),
        stream: s.stream,
        parallel_ns: parallel.map_or(span, |p| p.min(span)),
        span_ns: span,
        compute_ns: span.saturating_sub(sync + comm),
        sync_ns: sync,
        comm_ns: comm,
    }
}

/// A barrier of a thread, as the merges need it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BarrierSpan {
    /// Arrival, ns.
    pub start: u64,
    /// Departure, ns.
    pub end: u64,
    /// Its callsite.
    pub callsite: u32,
}

/// What the breakdown, the barrier findings, the small transfers and the
/// load balance need of one stream ([`crate::summary`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Part {
    /// Its time, split.
    pub breakdown: Breakdown,
    /// Its barriers in order ([`barriers`]), with its work between
    /// consecutive ones: from leaving the one to arriving at the next, less
    /// the time in synchronization and communication (waiting inside
    /// communication, for a target slow to answer or a broadcast's root not
    /// there yet, is not work).
    pub barriers: crate::epochs::Epochs,
    /// When its OpenMP implicit tasks start, in order (none for a thread
    /// without them).
    pub region_starts: Vec<u64>,
    /// Its transfers per kind and callsite ([`transfers`]).
    pub transfers: Vec<Transfers>,
    /// Its time in constructs and regions ([`crate::balance::regions_of`]).
    pub regions: Vec<crate::balance::NamedRegion>,
}

impl Part {
    /// The part in the trace's times and numbers ([`crate::summary::Rebase`]).
    pub(crate) fn rebase(&mut self, r: &crate::summary::Rebase) {
        // Each time t made r.t(t), t.saturating_add(r.after).
        self.barriers.rebase(r.after, |c| r.site(c));
        for t in &mut self.region_starts {
            *t = r.t(*t);
        }
        for x in &mut self.transfers {
            x.site = r.site(x.site);
        }
        for g in &mut self.regions {
            g.rebase(r);
        }
    }

    /// The part of `s`, one of the streams of `t` (whose user events and
    /// texts name its regions).
    pub fn of(t: &Trace, s: &Stream) -> Part {
        let region_starts = match kinds::kind_by_name("GASP_OMP_IMPLICIT_TASK")
            .map(|k| k.id)
            .filter(|&k| crate::intervals::has_kind(s, k))
        {
            None => Vec::new(),
            Some(task) => {
                let mut v: Vec<u64> = s
                    .events
                    .iter()
                    .filter(|e| e.kind == task && e.phase == 0)
                    .map(|e| e.t_ns)
                    .collect();
                v.sort_unstable();
                v
            }
        };
        Part {
            breakdown: breakdown_of(s),
            barriers: epochs(s),
            region_starts,
            transfers: transfers(s).to_vec(),
            regions: crate::balance::named_regions(t, s),
        }
    }
}

/// A stream's [`Part`] made window by window ([`crate::window`]).
pub(crate) struct Builder {
    /// The stream, without events.
    stream: Stream,
    walk: Walk,
    /// The times of its first and last events, and its time in start-up
    /// and shutdown.
    first: Option<u64>,
    last: Option<u64>,
    startup_ns: u64,
    task: Option<u16>,
    parallel: Parallel,
    region_starts: Vec<u64>,
}

impl Builder {
    /// For the windows of `s`; `packs`: whether its barriers may be packed
    /// as they are known (not in a stream with a coarray `sync all`, whose
    /// barriers are known only at its end: [`syncs_all`]).
    pub(crate) fn new(s: &Stream, packs: bool) -> Builder {
        let mut walk = Walk::new(s);
        walk.packs = packs;
        Builder {
            stream: s.like(),
            walk,
            first: None,
            last: None,
            startup_ns: 0,
            task: kinds::kind_by_name("GASP_OMP_IMPLICIT_TASK").map(|k| k.id),
            parallel: Parallel::default(),
            region_starts: Vec::new(),
        }
    }

    /// Adds window `s` (the next of its stream), one of the streams of `t`
    /// (whose user events and texts name its regions).
    pub(crate) fn feed(&mut self, t: &Trace, s: &Stream) {
        let own = s.own_events();
        if let (None, Some(e)) = (self.first, own.first()) {
            self.first = Some(e.t_ns);
        }
        if let Some(e) = own.last() {
            self.last = Some(e.t_ns);
        }
        self.startup_ns = self
            .startup_ns
            .saturating_add(crate::intervals::derived(s).startup_ns);
        if let Some(task) = self.task.filter(|&k| crate::intervals::has_kind(s, k)) {
            for e in own.iter().filter(|e| e.kind == task) {
                if e.phase == 0 {
                    self.region_starts.push(e.t_ns);
                }
                self.parallel.task(s, e);
            }
        }
        self.walk.feed(t, s);
    }

    /// The part of the windows given.
    pub(crate) fn finish(mut self) -> Part {
        let span = match (self.first, self.last) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        }
        .saturating_sub(self.startup_ns);
        let parallel = (self.stream.model == 5).then(|| self.parallel.finish(self.last));
        let mut w = self.walk.finish();
        let packed = w.packed.take();
        self.region_starts.sort_unstable();
        Part {
            breakdown: split_of(&self.stream, span, parallel, &w),
            barriers: epochs_from(packed, &w),
            region_starts: self.region_starts,
            regions: w
                .regions
                .iter()
                .zip(&w.region_names)
                .map(|(r, name)| r.named(name.clone()))
                .collect(),
            transfers: w.transfers,
        }
    }
}

/// Asks for the events a walk over the intervals `ivs` of `s` reads for
/// the intervals ahead of the `j`-th (as `crate::intervals::with_events`
/// does): a region's START, a transfer's END and its argument words. A
/// stream's events and intervals are arrays of megabytes: each would be a
/// cache miss away when read.
#[inline(always)]
fn prefetch_ahead(s: &Stream, ivs: &[Interval], j: usize, roles: &[u8]) {
    if let Some(a) = ivs.get(j + crate::intervals::AHEAD) {
        let r = roles[a.kind as usize];
        if r & REGION != 0 {
            if let Some(e) = s.events.get(a.start_event as usize) {
                crate::intervals::prefetch(e);
            }
        }
        if r & COMM != 0 {
            if let Some(e) = s.events.get(a.end_event as usize) {
                crate::intervals::prefetch(e);
            }
        }
    }
    if let Some(a) = ivs.get(j + crate::intervals::ARGS_AHEAD) {
        if roles[a.kind as usize] & COMM != 0 {
            if let Some(w) = s
                .events
                .get(a.end_event as usize)
                .and_then(|e| s.args(e).first())
            {
                crate::intervals::prefetch(w);
            }
        }
    }
}

/// Barrier-like kinds: all threads of a group enter and leave together.
const BARRIERS: [&str; 8] = [
    "GASP_UPC_BARRIER",
    "GASP_UPC_WAIT",
    "GASP_SHMEM_BARRIER_ALL",
    "GASP_SHMEM_SYNC_ALL",
    "GASP_MPI_BARRIER",
    "GASP_CAF_SYNC_ALL",
    "GASP_OMP_BARRIER",
    "GASP_OMP_IMPLICIT_BARRIER",
];

/// A load imbalance is reported when one thread works longer than the others
/// between consecutive barriers, on average by at least this share of the time
/// between barriers.
const IMBALANCE_THRESHOLD: f64 = 0.20;

/// ...and by at least this much time: a few microseconds per epoch is the
/// scale of scheduling and timer noise (a process sharing its core with
/// another), not of work a user could move.
const IMBALANCE_MIN_EPOCH_NS: f64 = 5_000.0;

/// How findings name a thread: `PE 2 (host-pid stream 0)`, `rank 1 (...)`,
/// or `host-pid stream N` where the model has no ranks.
pub fn thread_name(s: &Stream) -> String {
    crate::scan::thread_name(crate::matrix::rank(s), &s.process, s.stream)
}

/// A thread's barriers in order: a CAF image's `sync all`, not the MPI
/// barrier below it. Found once per stream (several analyses ask), in the
/// walk of [`walked`].
pub fn barriers(s: &Stream) -> &[Interval] {
    &walked(s).barriers
}

/// Whether stream `s` (whole) holds a coarray `sync all`: its barriers are
/// then those, not the MPI barriers the runtime makes them of.
pub(crate) fn syncs_all(s: &Stream) -> bool {
    let caf_sync = kinds::kind_by_name("GASP_CAF_SYNC_ALL").map(|k| k.id);
    intervals(s).iter().any(|iv| Some(iv.kind) == caf_sync)
}

/// The ends of the barriers window `s` closes ([`barriers`]), in START
/// order; `syncs_all`: whether its stream holds a coarray `sync all`
/// ([`syncs_all`]).
pub(crate) fn barrier_ends(s: &Stream, syncs_all: bool) -> Vec<u64> {
    let barrier = barrier_kinds();
    let mpi_barrier = kinds::kind_by_name("GASP_MPI_BARRIER").map(|k| k.id);
    intervals(s)
        .iter()
        .filter(|iv| barrier[iv.kind as usize] && iv.end != crate::window::OPEN)
        .filter(|iv| !syncs_all || Some(iv.kind) != mpi_barrier)
        .map(|iv| iv.end)
        .collect()
}

/// Whether a kind is a barrier, by number.
fn barrier_kinds() -> &'static [bool] {
    static TABLE: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut v = vec![false; 1 << 16];
        for k in BARRIERS.iter().filter_map(|n| kinds::kind_by_name(n)) {
            v[k.id as usize] = true;
        }
        v
    })
}

/// What the time split, the barriers, the epochs' work, the small transfers
/// and the regions need of a stream's intervals, found in one walk over them
/// ([`walked`]) rather than one each.
#[derive(Debug, Clone, Default)]
pub(crate) struct Walked {
    /// The outermost synchronization intervals' time ([`breakdown_of`])...
    sync_ns: u64,
    /// ... and the communication intervals'.
    comm_ns: u64,
    /// [`barriers`].
    barriers: Vec<Interval>,
    /// Per barrier, the time spent in synchronization and communication
    /// before its start and before its end ([`Union::upto`]): the busy time
    /// between two barriers is the difference ([`Part::barriers`]).
    busy_at: Vec<[u64; 2]>,
    /// [`transfers`].
    transfers: Vec<Transfers>,
    /// [`crate::balance::regions_of`].
    pub(crate) regions: Vec<crate::balance::RegionTime>,
    /// Their names, when made window by window (their events are gone).
    region_names: Vec<String>,
    /// Made window by window: the barriers before `barriers`, packed, with
    /// the union's length up to the last one's end ([`Walk::pack`]).
    packed: Option<(crate::epochs::Packer, u64)>,
}

/// What the walk over a stream's intervals does with those of a kind, a bit
/// each ([`roles`]).
const SYNC: u8 = 1;
const COMM: u8 = 2;
const BARRIER: u8 = 4;
const REGION: u8 = 8;

/// Each kind's roles in [`walk`], by number.
fn roles() -> &'static [u8] {
    static ROLES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    ROLES.get_or_init(|| {
        let (barrier, region) = (barrier_kinds(), crate::balance::region_kinds());
        (0..=u16::MAX)
            .map(|k| {
                let class = match class_of(k) {
                    Some(Class::Sync) => SYNC,
                    Some(Class::Comm) => COMM,
                    _ => 0,
                };
                let b = if barrier[k as usize] { BARRIER } else { 0 };
                let r = if region[k as usize] { REGION } else { 0 };
                class | b | r
            })
            .collect()
    })
}

/// [`Walked`] of `s`, computed when first asked for.
pub(crate) fn walked(s: &Stream) -> &Walked {
    crate::intervals::derived(s).walked.get_or_init(|| walk(s))
}

fn walk(s: &Stream) -> Walked {
    let mut w = Walk::new(s);
    w.feed_with::<false>(s);
    w.finish()
}

/// The walk over a stream's intervals that makes its [`Walked`], fed the
/// whole stream or its windows in turn ([`crate::window`]).
///
/// An interval a window leaves open is known only by its START until a
/// later window closes it: while synchronization and communication
/// intervals (barriers among them) are so given open, what the time split
/// and the union are given is kept, in START order, and given them once
/// they are closed, each with its end (one never closed is not an
/// interval: it is left out). Transfers and regions are listed in the
/// order of their first START in the stream.
pub(crate) struct Walk {
    sync_ns: u64,
    comm_ns: u64,
    covered_until: u64,
    /// The union of the synchronization and communication intervals, and
    /// per barrier its length up to the barrier's start and end.
    union: Union,
    barriers: Vec<Interval>,
    /// What the union is given while intervals given open are not closed
    /// (whose ends it needs), in START order.
    deferred: Option<Deferred>,
    /// Windows only: the place of each barrier's START, and whether a
    /// barrier closed after one that starts later.
    barrier_places: Vec<u64>,
    unsorted: bool,
    /// Windows only: whether barriers are packed as they are known
    /// ([`Walk::pack`]), and those packed, with the union's length up to
    /// the last one's end.
    packs: bool,
    packed: Option<(crate::epochs::Packer, u64)>,
    has_caf: bool,
    caf_sync: Option<u16>,
    mpi_barrier: Option<u16>,
    transfers: TransferTally,
    regions: crate::balance::Regions,
    /// Windows only: the place of the first START of each transfer and
    /// region entry, and each region's name.
    firsts: Option<Firsts>,
}

/// What [`Walk`] gives its time split and its union while synchronization
/// and communication intervals (barriers among them) given open are not
/// closed: kept in START order, and given once they all are, each with its
/// end (or not given, if never closed: it is not an interval), in the same
/// order.
#[derive(Default)]
struct Deferred {
    ops: Vec<UnionOp>,
    /// The ends of those closed since given open, by their START's place.
    ends: HashMap<u64, u64>,
    /// How many are given open and not closed.
    open: usize,
}

/// One thing given to the time split and the union ([`Deferred`]).
enum UnionOp {
    /// A synchronization or communication interval: its start, end and
    /// roles.
    Add(u64, u64, u8),
    /// One given open: its START's place, its start and roles.
    Open(u64, u64, u8),
    /// A barrier: its start and end.
    Barrier(u64, u64),
    /// A barrier given open: its START's place and its start.
    BarrierOpen(u64, u64),
    /// A barrier given open before, closed: its START's place and its end.
    BarrierClose(u64, u64),
}

/// [`Walk::firsts`].
#[derive(Default)]
struct Firsts {
    transfers: Vec<u64>,
    regions: Vec<u64>,
    names: Vec<String>,
}

impl Walk {
    /// For the intervals of `s` (its first window).
    pub(crate) fn new(s: &Stream) -> Walk {
        Walk {
            sync_ns: 0,
            comm_ns: 0,
            covered_until: 0,
            union: Union::new(),
            barriers: Vec::new(),
            deferred: None,
            barrier_places: Vec::new(),
            packs: false,
            packed: None,
            unsorted: false,
            has_caf: false,
            caf_sync: kinds::kind_by_name("GASP_CAF_SYNC_ALL").map(|k| k.id),
            mpi_barrier: kinds::kind_by_name("GASP_MPI_BARRIER").map(|k| k.id),
            transfers: TransferTally::new(s),
            regions: crate::balance::Regions::new(),
            firsts: None,
        }
    }

    /// Adds window `s` (the next of its stream), whose regions `t` names.
    pub(crate) fn feed(&mut self, t: &Trace, s: &Stream) {
        let firsts = self.firsts.get_or_insert_with(Firsts::default);
        let (transfers, regions) = (firsts.transfers.len(), firsts.regions.len());
        self.feed_with::<true>(s);
        self.pack();
        // The entries the window made, each by its first START in it.
        let firsts = self.firsts.get_or_insert_with(Firsts::default);
        for &x in &self.transfers.made_at[transfers..] {
            firsts.transfers.push(s.place(x));
        }
        for r in &self.regions.made()[regions..] {
            firsts.regions.push(s.place(r.start_event));
            firsts.names.push(crate::dump::event_name(
                t,
                &s.events[r.start_event as usize],
            ));
        }
    }

    /// The walk of the intervals of `s`: with `WINDOW`, a window's, with
    /// intervals given open and carried ones.
    fn feed_with<const WINDOW: bool>(&mut self, s: &Stream) {
        let roles = roles();
        let ivs = intervals(s);
        let carried = s.window.carried;
        // (A window is in the caches already.)
        let ahead = !WINDOW && s.events.len() > crate::intervals::IN_CACHE_EVENTS;
        for (j, iv) in ivs.iter().enumerate() {
            if ahead {
                prefetch_ahead(s, ivs, j, roles);
            }
            let r = roles[iv.kind as usize];
            if r == 0 {
                continue;
            }
            if WINDOW && (iv.start_event < carried || iv.end == crate::window::OPEN) {
                self.across(s, iv, r);
                continue;
            }
            if r & (SYNC | COMM) != 0 {
                // The time split counts the outermost intervals; the epochs'
                // work subtracts their union.
                match &mut self.deferred {
                    Some(d) if WINDOW => d.ops.push(UnionOp::Add(iv.start, iv.end, r)),
                    _ => {
                        self.split(iv.start, iv.end, r);
                        self.union.add(iv.start, iv.end);
                    }
                }
            }
            if r & BARRIER != 0 {
                self.has_caf |= Some(iv.kind) == self.caf_sync;
                match &mut self.deferred {
                    Some(d) if WINDOW => d.ops.push(UnionOp::Barrier(iv.start, iv.end)),
                    _ => self.union.barrier(iv.start, iv.end),
                }
                if WINDOW {
                    self.barrier_places.push(s.place(iv.start_event));
                }
                self.barriers.push(*iv);
            }
            if r & COMM != 0 {
                self.transfers.add(s, iv, &s.events[iv.end_event as usize]);
            }
            if r & REGION != 0 {
                self.regions.add(iv, &s.events[iv.start_event as usize]);
            }
        }
    }

    /// Counts the synchronization or communication interval from `start`
    /// to `end`, of roles `r`, in the time split if it is outermost.
    #[inline(always)]
    fn split(&mut self, start: u64, end: u64, r: u8) {
        if start >= self.covered_until {
            let d = end.saturating_sub(start);
            if r & SYNC != 0 {
                self.sync_ns += d;
            } else {
                self.comm_ns += d;
            }
            self.covered_until = end;
        }
    }

    /// An interval of a window that the window leaves open, or whose START
    /// is carried (given open before).
    #[cold]
    fn across(&mut self, s: &Stream, iv: &Interval, r: u8) {
        let place = s.place(iv.start_event);
        if iv.end == crate::window::OPEN {
            if iv.start_event < s.window.carried || r & (SYNC | COMM | BARRIER) == 0 {
                // Given open before, still open; or nothing the union waits
                // for (a region).
                return;
            }
            let d = self.deferred.get_or_insert_with(Deferred::default);
            if r & (SYNC | COMM) != 0 {
                d.ops.push(UnionOp::Open(place, iv.start, r));
                d.open += 1;
            }
            if r & BARRIER != 0 {
                d.ops.push(UnionOp::BarrierOpen(place, iv.start));
                d.open += 1;
            }
            return;
        }
        // Closed now, given open before: counted where it starts, outside
        // what it covers.
        if r & (SYNC | COMM | BARRIER) != 0 {
            // Given open, so that the union waits for it.
            if let Some(d) = &mut self.deferred {
                if r & (SYNC | COMM) != 0 {
                    d.ends.insert(place, iv.end);
                    d.open -= 1;
                }
                if r & BARRIER != 0 {
                    d.ops.push(UnionOp::BarrierClose(place, iv.end));
                    d.open -= 1;
                }
                if d.open == 0 {
                    self.undefer();
                }
            }
        }
        if r & BARRIER != 0 {
            self.has_caf |= Some(iv.kind) == self.caf_sync;
            self.unsorted |= self.barrier_places.last().is_some_and(|&p| p > place);
            self.barrier_places.push(place);
            self.barriers.push(*iv);
        }
        // An entry made by an earlier window may start earlier (an entry
        // made by this one is found its first START once it is walked).
        let firsts = self.firsts.get_or_insert_with(Firsts::default);
        if r & COMM != 0 {
            if let Some(i) = self.transfers.add(s, iv, &s.events[iv.end_event as usize]) {
                if let Some(f) = firsts.transfers.get_mut(i) {
                    *f = (*f).min(place);
                }
            }
        }
        if r & REGION != 0 {
            if let Some(i) = self.regions.add(iv, &s.events[iv.start_event as usize]) {
                if let Some(f) = firsts.regions.get_mut(i as usize) {
                    *f = (*f).min(place);
                }
            }
        }
    }

    /// Gives the union what it was kept from ([`Deferred`]): the intervals
    /// given open with their ends, those never closed left out.
    fn undefer(&mut self) {
        let Some(d) = self.deferred.take() else {
            return;
        };
        // The union's length up to the start of each barrier given open.
        let mut at_start: HashMap<u64, u64> = HashMap::default();
        for op in d.ops {
            match op {
                UnionOp::Add(a, b, r) => {
                    self.split(a, b, r);
                    self.union.add(a, b);
                }
                UnionOp::Open(place, a, r) => {
                    if let Some(&b) = d.ends.get(&place) {
                        self.split(a, b, r);
                        self.union.add(a, b);
                    }
                }
                UnionOp::Barrier(a, b) => self.union.barrier(a, b),
                UnionOp::BarrierOpen(place, a) => {
                    at_start.insert(place, self.union.upto(a));
                }
                UnionOp::BarrierClose(place, b) => {
                    let a = at_start.get(&place).copied().unwrap_or(0);
                    self.union.barrier_from(a, b);
                }
            }
        }
    }

    /// Packs the barriers known for good: those whose union lengths are
    /// answered, while nothing given open waits (what the union is given is
    /// not kept aside), their order is START order (nothing closed after a
    /// barrier that starts later) and none is to be left out (no coarray
    /// `sync all`). Those left are packed at the end.
    fn pack(&mut self) {
        if !self.packs
            || self.deferred.is_some()
            || self.unsorted
            || self.has_caf
            || self.barriers.len() != self.union.at.len()
        {
            return;
        }
        let n = self.union.answered();
        if n == 0 {
            return;
        }
        let (p, previous_end) = self.packed.get_or_insert_with(Default::default);
        for (iv, &[at_start, at_end]) in self.barriers.iter().zip(&self.union.at).take(n) {
            p.push(iv.into(), at_start.saturating_sub(*previous_end));
            *previous_end = at_end;
        }
        self.barriers.drain(..n);
        self.union.drop_first(n);
        let places = self.barrier_places.len().min(n);
        self.barrier_places.drain(..places);
    }

    /// What the walk found.
    fn finish(mut self) -> Walked {
        // (Those given open and never closed left out.)
        self.undefer();
        let mut busy_at = self.union.finish();
        let mut barriers = self.barriers;
        if self.unsorted {
            // In START order.
            let mut all: Vec<(u64, Interval, [u64; 2])> = (self.barrier_places.into_iter())
                .zip(barriers)
                .zip(busy_at)
                .map(|((p, iv), at)| (p, iv, at))
                .collect();
            all.sort_by_key(|b| b.0);
            (barriers, busy_at) = all.into_iter().map(|(_, iv, at)| (iv, at)).unzip();
        }
        // A CAF image's barriers are its `sync all`s, not the MPI barriers the
        // runtime makes them of.
        if self.has_caf {
            let mpi_barrier = self.mpi_barrier;
            let keep = |iv: &Interval| Some(iv.kind) != mpi_barrier;
            let mut at = barriers.iter().map(keep);
            busy_at.retain(|_| at.next().unwrap_or(false));
            barriers.retain(keep);
        }
        let mut transfers = self.transfers.v;
        let mut regions = self.regions.done();
        let mut region_names = Vec::new();
        if let Some(f) = self.firsts {
            // In the order of their first STARTs.
            transfers = crate::window::by_first(transfers, &f.transfers);
            let named = regions.into_iter().zip(f.names).collect();
            (regions, region_names) = crate::window::by_first(named, &f.regions)
                .into_iter()
                .unzip();
        }
        Walked {
            sync_ns: self.sync_ns,
            comm_ns: self.comm_ns,
            barriers,
            busy_at,
            transfers,
            regions,
            region_names,
            packed: self.packed,
        }
    }
}

/// A thread's barriers ([`barriers`]) and its computation between each two
/// consecutive ones ([`Part::barriers`]).
fn epochs(s: &Stream) -> crate::epochs::Epochs {
    epochs_of(walked(s))
}

/// The barriers of `w` and the computation between each two consecutive
/// ones.
fn epochs_of(w: &Walked) -> crate::epochs::Epochs {
    epochs_from(w.packed.clone(), w)
}

/// [`epochs_of`] `w`, after the barriers `packed` already (a walk made
/// window by window: [`Walk::pack`]).
fn epochs_from(packed: Option<(crate::epochs::Packer, u64)>, w: &Walked) -> crate::epochs::Epochs {
    // Before each barrier, the time in the union from the previous one's
    // end to its start (none when they overlap: the union's length up to a
    // time never decreases).
    let mut previous_end = packed.as_ref().map_or(0, |p| p.1);
    let barriers = w
        .barriers
        .iter()
        .zip(&w.busy_at)
        .map(|(iv, &[at_start, at_end])| {
            let busy = at_start.saturating_sub(previous_end);
            previous_end = at_end;
            (iv.into(), busy)
        });
    match packed {
        None => crate::epochs::Epochs::new(barriers),
        Some((mut p, _)) => {
            for (b, busy) in barriers {
                p.push(b, busy);
            }
            p.finish()
        }
    }
}

impl From<&Interval> for BarrierSpan {
    fn from(iv: &Interval) -> BarrierSpan {
        BarrierSpan {
            start: iv.start,
            end: iv.end,
            callsite: iv.callsite,
        }
    }
}

/// The union of a thread's synchronization and communication intervals,
/// made as they come in START order, and its length up to each barrier's
/// start and end, without keeping it: the length of what is closed (no
/// later interval can reach it) and the span still open.
#[derive(Debug)]
struct Union {
    /// The length of the union's spans before `open`.
    closed: u64,
    /// The last span, which a later interval may still lengthen.
    open: Option<(u64, u64)>,
    /// Per barrier, the union's length up to its start and up to its end
    /// ([`Walked::busy_at`]).
    at: Vec<[u64; 2]>,
    /// The barriers' ends not answered yet in `at` (with the barrier's
    /// number): answered before a span starts after them.
    asked: Vec<(u64, usize)>,
    /// The number of the barrier of `at[0]` (those before are dropped:
    /// [`Union::drop_first`]).
    base: usize,
    /// The earliest time of `asked` (`u64::MAX` when none).
    earliest: u64,
}

impl Union {
    fn new() -> Union {
        Union {
            closed: 0,
            open: None,
            at: Vec::new(),
            asked: Vec::new(),
            base: 0,
            earliest: u64::MAX,
        }
    }

    /// How many barriers of `at` (from its start) are answered.
    fn answered(&self) -> usize {
        self.asked
            .iter()
            .map(|&(_, k)| k - self.base)
            .min()
            .unwrap_or(self.at.len())
    }

    /// Drops the first `n` barriers of `at` (answered).
    fn drop_first(&mut self, n: usize) {
        self.at.drain(..n);
        self.base += n;
    }

    /// Adds the interval `[a, b]`, the next in START order; the lengths
    /// asked for up to `a` or before are answered first when it starts a
    /// span (which adds nothing up to `a`).
    #[inline(always)]
    fn add(&mut self, a: u64, b: u64) {
        match &mut self.open {
            Some((_, end)) if a < *end => *end = (*end).max(b),
            _ => {
                if self.earliest <= a {
                    self.settle(a);
                }
                if let Some((x, y)) = self.open {
                    self.closed += y - x;
                }
                self.open = Some((a, b));
            }
        }
    }

    /// A barrier from `start` to `end`, starting where the last interval
    /// added does (or after it).
    fn barrier(&mut self, start: u64, end: u64) {
        self.barrier_from(self.upto(start), end);
    }

    /// A barrier ending at `end`, with the union's length up to its start
    /// `at_start` (asked when it was its last interval).
    fn barrier_from(&mut self, at_start: u64, end: u64) {
        self.at.push([at_start, 0]);
        self.asked.push((end, self.base + self.at.len() - 1));
        self.earliest = self.earliest.min(end);
    }

    /// Per barrier, the union's length up to its start and its end.
    fn finish(mut self) -> Vec<[u64; 2]> {
        self.settle(u64::MAX);
        self.at
    }

    /// The union's length up to `t`, once every interval starting before
    /// `t` is added and no span starting after it.
    #[inline(always)]
    fn upto(&self, t: u64) -> u64 {
        self.closed + self.open.map_or(0, |(a, b)| b.min(t).saturating_sub(a))
    }

    /// Answers the lengths asked for up to `until` or before.
    #[cold]
    fn settle(&mut self, until: u64) {
        // Mostly one: the last barrier's end.
        if let [(t, k)] = self.asked[..] {
            if t <= until {
                self.at[k - self.base][1] = self.upto(t);
                self.asked.clear();
                self.earliest = u64::MAX;
            }
            return;
        }
        let (mut i, mut earliest) = (0, u64::MAX);
        while i < self.asked.len() {
            let (t, k) = self.asked[i];
            if t <= until {
                self.at[k - self.base][1] = self.upto(t);
                self.asked.swap_remove(i);
            } else {
                earliest = earliest.min(t);
                i += 1;
            }
        }
        self.earliest = earliest;
    }
}

/// Groups of threads that meet at the same barriers: the OpenMP threads of a
/// process; otherwise all the processes of a model. Streams in order.
pub fn barrier_groups(t: &Trace) -> Vec<Vec<usize>> {
    groups_by(t.streams.iter().map(|s| (s.model, s.process.as_str())))
}

/// [`barrier_groups`] of the streams of `ids`.
pub fn barrier_groups_of(ids: &[Identity]) -> Vec<Vec<usize>> {
    groups_by(ids.iter().map(|id| (id.model, id.process.as_str())))
}

fn groups_by<'a>(streams: impl Iterator<Item = (u32, &'a str)>) -> Vec<Vec<usize>> {
    let mut groups: std::collections::BTreeMap<(u32, String), Vec<usize>> = Default::default();
    for (i, (model, process)) in streams.enumerate() {
        let key = if model == 5 {
            process.to_string()
        } else {
            String::new()
        };
        groups.entry((model, key)).or_default().push(i);
    }
    groups.into_values().collect()
}

/// All threads' working time (as the breakdown gives it), at least 1 ns.
pub fn total_time(ids: &[Identity]) -> u64 {
    ids.iter().map(|id| id.active_span).sum::<u64>().max(1)
}

/// The findings about barriers (`barrier_wait`, `load_imbalance`) and
/// small transfers (`small_messages`) from every stream's part
/// (`parts[i]`: stream `i`'s), in the order found.
pub fn merge(ids: &[Identity], sites: &[Callsite], parts: &[&Part]) -> Vec<Finding> {
    merge_passed(ids, sites, parts, &group_passes(ids, parts))
}

/// What one pass over the barriers of the threads of a group (of two or
/// more that meet at barriers) finds, for the findings ([`merge_passed`])
/// and the load balance ([`crate::balance::merge_passed`]): each thread's
/// packed barriers read once for both, epoch by epoch, and nothing kept per
/// epoch (a run with millions of barriers needs no more memory than one
/// with ten).
pub(crate) struct GroupPass {
    /// The group's streams.
    pub(crate) members: Vec<usize>,
    /// The barriers every thread of the group meets (the fewest of any).
    pub(crate) epochs: usize,
    /// The load balance's epochs: as far as the first thread's barriers go
    /// (all of them but in a damaged summary), each with its first thread
    /// to arrive (the first of the earliest) and its last (the last of the
    /// latest). Per thread, the epochs it arrived at last; the spreads
    /// (last arrival less first) summed, wrapping, and the widest.
    pub(crate) last_arrivals: Vec<u64>,
    pub(crate) spread_sum: u64,
    pub(crate) spread_max: u64,
    /// The widest epochs (up to [`crate::balance::WIDEST`]), widest first
    /// and by epoch where as wide.
    pub(crate) widest: Vec<Wide>,
    /// Per epoch, the latest arrival (0 where no barrier was read), summed;
    /// and the sum of every arrival.
    latest: u128,
    arrivals: u128,
    /// The earliest arrival at the first barrier and the latest at the
    /// last one.
    earliest_first: u64,
    latest_last: u64,
    /// Each thread's time in the barriers.
    pub(crate) wait: Vec<u64>,
    /// The epochs but the first that start a new OpenMP parallel region on
    /// some thread (a worker idles between regions: left out of the
    /// imbalance).
    new_regions: usize,
    /// Per thread, over the other epochs, its work (between barriers k - 1
    /// and k) less the others' mean, summed; and the epochs where it is more.
    lateness: Vec<f64>,
    late_epochs: Vec<usize>,
}

/// One of the widest epochs of a [`GroupPass`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wide {
    /// Its number.
    pub(crate) epoch: usize,
    /// Its last arrival less its first.
    pub(crate) spread: u64,
    /// The first thread to arrive and the last (members' places).
    pub(crate) first: usize,
    pub(crate) last: usize,
    /// The last thread's barrier callsite.
    pub(crate) site: u32,
}

impl PartialEq for Wide {
    fn eq(&self, other: &Wide) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Wide {}

impl PartialOrd for Wide {
    fn partial_cmp(&self, other: &Wide) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Widest first, then by epoch: an order of every epoch of a group, so that
/// those kept are the same however found. Greater is narrower (or as wide
/// and later): the top of a max-heap of them is the first to give up its
/// place.
impl Ord for Wide {
    fn cmp(&self, other: &Wide) -> std::cmp::Ordering {
        other
            .spread
            .cmp(&self.spread)
            .then(self.epoch.cmp(&other.epoch))
    }
}

/// The barriers of each of `members` (streams), in their order.
pub(crate) fn barriers_of<'a>(
    members: &[usize],
    parts: &[&'a Part],
) -> Vec<&'a crate::epochs::Epochs> {
    members.iter().map(|&i| &parts[i].barriers).collect()
}

/// One thread's barrier in an epoch, as [`group_passes`] holds it while it
/// reads the others'.
#[derive(Clone, Copy)]
struct Arrived {
    work: f64,
    /// Whether the thread's barriers went that far (a damaged summary's
    /// may not).
    read: bool,
}

/// The first thread to arrive at a barrier (the first of the earliest) and
/// the last (the last of the latest), with their arrivals (members' places
/// and times), and the last one's callsite.
struct Ends {
    first: (usize, u64),
    last: (usize, u64),
    site: u32,
}

/// The [`GroupPass`] of each group of `ids` (from [`barrier_groups_of`])
/// of two threads or more that meet at a barrier at least. Epoch by epoch,
/// each thread's barriers read on from where they were.
pub(crate) fn group_passes(ids: &[Identity], parts: &[&Part]) -> Vec<GroupPass> {
    let mut out = Vec::new();
    for members in barrier_groups_of(ids) {
        if members.len() < 2 {
            continue;
        }
        let per = barriers_of(&members, parts);
        let epochs = per.iter().map(|v| v.len()).min().unwrap_or(0);
        if epochs == 0 {
            continue;
        }
        let n = members.len();
        let mut g = GroupPass {
            members,
            epochs,
            last_arrivals: vec![0; n],
            spread_sum: 0,
            spread_max: 0,
            widest: Vec::new(),
            latest: 0,
            arrivals: 0,
            earliest_first: u64::MAX,
            latest_last: 0,
            wait: vec![0; n],
            new_regions: 0,
            lateness: vec![0.0; n],
            late_epochs: vec![0; n],
        };
        let mut widest = std::collections::BinaryHeap::with_capacity(crate::balance::WIDEST + 1);
        let mut reading: Vec<_> = per.iter().map(|v| v.iter_with_work()).collect();
        let region_starts: Vec<&[u64]> = g
            .members
            .iter()
            .map(|&i| &parts[i].region_starts[..])
            .collect();
        // The first region start at or after each thread's last barrier's
        // `after`, found again from where it was: a thread's barriers come
        // in time order (a binary search per barrier guessed most of its
        // steps wrong).
        let mut cursors = vec![(0u64, 0usize); n];
        let mut arrived = vec![
            Arrived {
                work: 0.0,
                read: false
            };
            n
        ];
        for k in 0..epochs {
            // The first thread to arrive and the last, with their arrivals
            // and the last's callsite: where the first thread has barrier k.
            let mut ends: Option<Ends> = None;
            let (mut latest, mut sum, mut new_region) = (0u64, 0f64, false);
            for (m, it) in reading.iter_mut().enumerate() {
                let Some(b) = it.next() else {
                    arrived[m].read = false;
                    continue;
                };
                let iv = b.span;
                if m == 0 {
                    ends = Some(Ends {
                        first: (0, iv.start),
                        last: (0, iv.start),
                        site: iv.callsite,
                    });
                } else if let Some(e) = &mut ends {
                    if iv.start < e.first.1 {
                        e.first = (m, iv.start);
                    }
                    if iv.start >= e.last.1 {
                        (e.last, e.site) = ((m, iv.start), iv.callsite);
                    }
                }
                latest = latest.max(iv.start);
                g.arrivals += u128::from(iv.start);
                g.wait[m] += iv.end.saturating_sub(iv.start);
                arrived[m] = Arrived {
                    work: b.work,
                    read: true,
                };
                if k == epochs - 1 {
                    g.latest_last = g.latest_last.max(iv.start);
                }
                if k == 0 {
                    g.earliest_first = g.earliest_first.min(iv.start);
                    continue;
                }
                sum += b.work;
                let starts = region_starts[m];
                if !starts.is_empty() {
                    let (from, to) = (b.after, iv.start);
                    let at = first_at_or_after(starts, from, &mut cursors[m]);
                    new_region |= starts.get(at).is_some_and(|&r| r <= to);
                }
            }
            g.latest += u128::from(latest);
            if let Some(Ends {
                first: (first, a),
                last: (last, b),
                site,
            }) = ends
            {
                g.last_arrivals[last] += 1;
                let spread = b - a;
                g.spread_sum = g.spread_sum.wrapping_add(spread);
                g.spread_max = g.spread_max.max(spread);
                let wide = Wide {
                    epoch: k,
                    spread,
                    first,
                    last,
                    site,
                };
                if widest.len() < crate::balance::WIDEST {
                    widest.push(wide);
                } else if let Some(mut narrowest) = widest.peek_mut() {
                    if wide < *narrowest {
                        *narrowest = wide;
                    }
                }
            }
            if k == 0 {
                continue;
            }
            if new_region {
                g.new_regions += 1;
                continue;
            }
            // Each thread's work in the epoch against the others' mean.
            for (m, a) in arrived.iter().enumerate() {
                if a.read {
                    let d = a.work - (sum - a.work) / (n - 1) as f64;
                    g.lateness[m] += d;
                    if d > 0.0 {
                        g.late_epochs[m] += 1;
                    }
                }
            }
        }
        g.widest = widest.into_sorted_vec();
        out.push(g);
    }
    out
}

/// Where the first of `sorted` at or after `from` is (as
/// `sorted.partition_point(|&r| r < from)`), `cursor` the place found for
/// the `from` asked before: walked on from there when `from` did not go
/// back, and searched for again when it did.
#[inline]
fn first_at_or_after(sorted: &[u64], from: u64, cursor: &mut (u64, usize)) -> usize {
    let (before, mut at) = *cursor;
    if from < before {
        at = sorted.partition_point(|&r| r < from);
    } else {
        while sorted.get(at).is_some_and(|&r| r < from) {
            at += 1;
        }
    }
    *cursor = (from, at);
    at
}

/// [`merge`], with the pass over each group's barriers made
/// ([`group_passes`]).
pub(crate) fn merge_passed(
    ids: &[Identity],
    sites: &[Callsite],
    parts: &[&Part],
    passes: &[GroupPass],
) -> Vec<Finding> {
    let total_time = total_time(ids);
    let mut out = Vec::new();
    for g in passes {
        let members = &g.members;
        let per = barriers_of(members, parts);
        let (epochs, n) = (g.epochs, members.len());
        let wait = &g.wait;
        let (first, last) = (g.earliest_first, g.latest_last);
        // The spread: the latest arrival less each arrival, summed; as the
        // sum of the differences in 64 bits gives it (wrapping).
        let spread_total = (g.latest * n as u128 - g.arrivals) as u64;
        let waited: u64 = wait.iter().sum();
        let group_time: u64 = members
            .iter()
            .map(|&i| ids[i].active_span)
            .sum::<u64>()
            .max(1);
        let names: Vec<String> = members.iter().map(|&i| ids[i].name.clone()).collect();
        let wait_share = waited as f64 / total_time as f64;
        if waited as f64 / group_time as f64 >= 0.05 {
            let worst = (0..n).max_by_key(|&m| wait[m]).unwrap();
            // Where it waits most: its barrier callsite with the most waiting.
            let mut at: HashMap<u32, u64> = HashMap::default();
            for iv in per[worst].iter() {
                *at.entry(iv.callsite).or_default() += iv.end.saturating_sub(iv.start);
            }
            let site = at.into_iter().max_by_key(|&(s, w)| (w, s)).map(|(s, _)| s);
            out.push(Finding {
                kind: "barrier_wait".into(),
                severity: wait_share,
                threads: names.clone(),
                location: location_in(sites, site),
                message: format!(
                    "{:.1}% of the time of these {n} threads is spent in {epochs} barriers; {} waits most ({:.3} ms). \
                     Fewer synchronizations (split-phase barriers, point-to-point or one-sided signalling) or more work between them would help.",
                    100.0 * waited as f64 / group_time as f64,
                    names[worst],
                    wait[worst] as f64 / 1e6
                ),
            });
        }
        // Load imbalance: one thread working longer than the others between
        // more than half of the pairs of barriers, on average by a good part
        // of the time between barriers (IMBALANCE_THRESHOLD) and by more than
        // noise (IMBALANCE_MIN_EPOCH_NS).
        let epoch_len = (last.saturating_sub(first) as f64 / (epochs.max(2) - 1) as f64).max(1.0);
        // Work between barriers: from leaving one to arriving at the next, on
        // the same thread, each thread's against the others' mean
        // ([`GroupPass::lateness`]).
        let used = epochs - 1 - g.new_regions;
        let imbalance_share = spread_total as f64 / group_time as f64;
        if used < 4 || imbalance_share < 0.05 {
            continue;
        }
        let (lateness, late_epochs) = (&g.lateness, &g.late_epochs);
        let epochs_used = used.max(1);
        let culprit = (0..n)
            .max_by(|&a, &b| lateness[a].total_cmp(&lateness[b]))
            .unwrap();
        let per_epoch = lateness[culprit] / epochs_used as f64;
        if late_epochs[culprit] * 2 > used
            && per_epoch / epoch_len >= IMBALANCE_THRESHOLD
            && per_epoch >= IMBALANCE_MIN_EPOCH_NS
        {
            // Where the late thread arrives from: its most frequent barrier callsite.
            let mut sites_count: HashMap<u32, usize> = HashMap::default();
            for iv in per[culprit].iter() {
                *sites_count.entry(iv.callsite).or_default() += 1;
            }
            let site = sites_count
                .into_iter()
                .max_by_key(|(_, c)| *c)
                .map(|(s, _)| s);
            let within = match excess_region(members, culprit, parts, lateness[culprit]) {
                Some(r) => format!(
                    " Most of the difference is in {} at {}: {:.3} ms on it, {:.3} ms on average on the others.",
                    r.name,
                    location_in(sites, Some(r.site)).map_or("?".into(), |l| format!("{}:{}", l.file, l.line)),
                    r.culprit_ns as f64 / 1e6,
                    r.others_ns / 1e6
                ),
                None => String::new(),
            };
            out.push(Finding {
                kind: "load_imbalance".into(),
                severity: spread_total as f64 / total_time as f64,
                threads: vec![names[culprit].clone()],
                location: location_in(sites, site),
                message: format!(
                    "{} works longer than the others between {} of {used} pairs of barriers, on average {:.3} ms more \
                     ({:.0}% of the time between barriers), and arrives last; the others wait {:.1}% of their time.{within} \
                     Give it less work (a different distribution or affinity), or let the others work meanwhile.",
                    names[culprit],
                    late_epochs[culprit],
                    per_epoch / 1e6,
                    100.0 * per_epoch / epoch_len,
                    100.0 * imbalance_share
                ),
            });
        }
    }
    out.extend(small_messages(ids, sites, parts, total_time));
    out
}

/// A construct or region where a late thread spends more time than the
/// others of its group ([`excess_region`]).
struct Excess<'a> {
    name: &'a str,
    site: u32,
    /// The late thread's time in it, ns.
    culprit_ns: u64,
    /// The others' mean time in it (0 for one that does not run it), ns.
    others_ns: f64,
}

/// Where the late thread `culprit` (an index in `members`, the streams of a
/// group) does the work the others do not: the work-sharing construct or
/// user region (by name and callsite) in which its time exceeds the others'
/// mean the most, when that excess is at least half of `extra` (its extra
/// work between barriers, ns). Of constructs within one another, which
/// exceed by about as much, the one it spends least time in: the innermost.
fn excess_region<'a>(
    members: &[usize],
    culprit: usize,
    parts: &[&'a Part],
    extra: f64,
) -> Option<Excess<'a>> {
    let n = members.len();
    if n < 2 || extra <= 0.0 {
        return None;
    }
    // (name, callsite) -> each member's time in it.
    let mut times: HashMap<(&str, u32), Vec<u64>> = HashMap::default();
    for (m, &i) in members.iter().enumerate() {
        for r in &parts[i].regions {
            times
                .entry((r.name(), r.site()))
                .or_insert_with(|| vec![0; n])[m] += r.total();
        }
    }
    let found: Vec<Excess> = times
        .into_iter()
        .map(|((name, site), t)| {
            let others = (t.iter().sum::<u64>() - t[culprit]) as f64 / (n - 1) as f64;
            Excess {
                name,
                site,
                culprit_ns: t[culprit],
                others_ns: others,
            }
        })
        .collect();
    let excess = |r: &Excess| r.culprit_ns as f64 - r.others_ns;
    let best = found.iter().map(excess).fold(0.0, f64::max);
    if best < extra / 2.0 {
        return None;
    }
    found
        .into_iter()
        .filter(|r| excess(r) >= 0.8 * best)
        .min_by(|a, b| (a.culprit_ns, a.name, a.site).cmp(&(b.culprit_ns, b.name, b.site)))
}

/// Storms of small transfers from one callsite: at least this many...
const SMALL_COUNT: u64 = 1000;
/// ...of at most this many bytes on average...
const SMALL_BYTES: f64 = 256.0;
/// ...taking at least this share of the time of the threads that make them.
const SMALL_SHARE: f64 = 0.02;

/// Whether the kind named `kind` is a collective operation (a broadcast, a
/// reduction, a gather, a scatter, an all-to-all) rather than a transfer
/// between two threads.
fn is_collective(kind: &str) -> bool {
    kind.starts_with("GASP_UPC_ALL_")
        || kind.starts_with("GASP_CAF_CO_")
        || [
            "BCAST",
            "BROADCAST",
            "REDUCE",
            "TO_ALL",
            "GATHER",
            "SCATTER",
            "COLLECT",
            "ALLTOALL",
        ]
        .iter()
        .any(|w| kind.contains(w))
}

/// What to do about many small calls of the collective named `kind`: it
/// cannot be packed into one message, but its values can be combined into
/// one call on an array, it can be called less often, and an MPI one can
/// overlap with computation.
fn collective_advice(kind: &str) -> String {
    if let Some(f) = kind.strip_prefix("GASP_MPI_") {
        let f = f.to_ascii_lowercase();
        format!(
            "combine the values of several calls into one call on an array, call it less often (a convergence test every few \
             iterations), or overlap it with computation (MPI_I{f} and MPI_Wait)"
        )
    } else if kind.starts_with("GASP_SHMEM_") {
        "combine the values of several calls into one call on an array (its element count), or call it less often".into()
    } else if kind.starts_with("GASP_CAF_") {
        "apply it to a whole array at once instead of one value at a time, or call it less often"
            .into()
    } else {
        "apply it to arrays of values (its nelems argument) instead of one value at a time, or call it less often".into()
    }
}

/// The aggregate call to use instead of many small ones, by model.
fn aggregate_advice(kind: &str) -> &'static str {
    if kind.starts_with("GASP_SHMEM_") {
        "gather the data into one buffer and use one shmem_putmem/shmem_getmem (or the _nbi forms and one shmem_quiet)"
    } else if kind.starts_with("GASP_MPI_") {
        "pack the data and send one message (or use a derived datatype), or put it in one MPI_Put with one flush"
    } else if kind.starts_with("GASP_CAF_") {
        "copy whole array sections (a(i:j)[k]) instead of elements"
    } else {
        "use upc_memput/upc_memget on whole blocks instead of element accesses"
    }
}

/// One thread's transfers of one kind from one callsite.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Transfers {
    site: u32,
    kind: u16,
    count: u64,
    bytes: u64,
    time: u64,
}

/// A thread's transfers (communication intervals with a size), per kind
/// and callsite in the order first met. Computed once per stream, in the
/// walk of [`walked`].
pub(crate) fn transfers(s: &Stream) -> &[Transfers] {
    &walked(s).transfers
}

/// [`transfers`], made as a stream's intervals come in order.
struct TransferTally {
    v: Vec<Transfers>,
    /// The START (in its window) of the interval that made each entry.
    made_at: Vec<u32>,
    /// Where each (callsite, kind) is in `v`.
    far: HashMap<(u32, u16), usize>,
    nbytes: crate::objects::ArgOf,
    n: crate::objects::ArgOf,
    /// Per shape of END (at its interval's callsite): the words of its
    /// `nbytes` and `n` arguments ([`crate::objects::ArgOf::word`]), and
    /// its entry of `v` once made ([`TransferTally::NO_ENTRY`] before).
    shapes: crate::shape::Table<(u16, u16, u32)>,
}

impl TransferTally {
    /// A stream has a few callsites of transfers, mostly: looked for among
    /// the first ones, then in a map.
    const NEAR: usize = 8;

    /// A shape's entry of `v` before it is made.
    const NO_ENTRY: u32 = u32::MAX;

    fn new(s: &Stream) -> TransferTally {
        TransferTally {
            v: Vec::new(),
            made_at: Vec::new(),
            far: HashMap::default(),
            nbytes: crate::objects::ArgOf::new(s, "nbytes"),
            n: crate::objects::ArgOf::new(s, "n"),
            shapes: crate::shape::Table::new(),
        }
    }

    /// Adds `iv`, a communication interval of `s` whose END is `end`: its
    /// entry, if it moves bytes.
    #[inline(always)]
    fn add(&mut self, s: &Stream, iv: &Interval, end: &crate::trace::Event) -> Option<usize> {
        use crate::objects::word_of;
        let shape = crate::shape::at_site(end, iv.callsite);
        let (nbytes, n, entry) = match self.shapes.get(shape) {
            Some(x) => x,
            None => {
                let x = (self.nbytes.word(end), self.n.word(end), Self::NO_ENTRY);
                self.shapes.set(shape, x);
                x
            }
        };
        let words = s.args(end);
        let bytes = word_of(words, nbytes).or_else(|| word_of(words, n))?;
        if entry != Self::NO_ENTRY {
            self.count(entry as usize, bytes, iv);
            return Some(entry as usize);
        }
        let i = self.entry(iv);
        self.shapes.set(shape, (nbytes, n, i as u32));
        self.count(i, bytes, iv);
        Some(i)
    }

    /// The entry of `v` of `iv`'s callsite and kind, made when first met.
    fn entry(&mut self, iv: &Interval) -> usize {
        let key = (iv.callsite, iv.kind);
        let v = &mut self.v;
        let near = v[..v.len().min(Self::NEAR)]
            .iter()
            .position(|x| (x.site, x.kind) == key);
        // Every key is in the map, the first ones too.
        let i = near.unwrap_or_else(|| {
            *self.far.entry(key).or_insert_with(|| {
                self.made_at.push(iv.start_event);
                v.push(Transfers {
                    site: key.0,
                    kind: key.1,
                    count: 0,
                    bytes: 0,
                    time: 0,
                });
                v.len() - 1
            })
        });
        i
    }

    /// Counts `iv`, moving `bytes`, in entry `i`.
    #[inline(always)]
    fn count(&mut self, i: usize, bytes: u64, iv: &Interval) {
        let x = &mut self.v[i];
        x.count += 1;
        x.bytes = x.bytes.saturating_add(bytes);
        x.time = x.time.saturating_add(iv.end.saturating_sub(iv.start));
    }
}

/// `small_messages`: one callsite sending many small transfers.
fn small_messages(
    ids: &[Identity],
    sites: &[Callsite],
    parts: &[&Part],
    total_time: u64,
) -> Vec<Finding> {
    // (callsite, kind) -> (count, bytes, time, threads' total span, threads)
    type Tally = (u64, u64, u64, Vec<usize>);
    let mut tally: HashMap<(u32, u16), Tally> = HashMap::default();
    for (si, part) in parts.iter().enumerate() {
        for x in &part.transfers {
            let entry = tally.entry((x.site, x.kind)).or_default();
            entry.0 += x.count;
            entry.1 = entry.1.saturating_add(x.bytes);
            entry.2 = entry.2.saturating_add(x.time);
            entry.3.push(si);
        }
    }
    let span = |i: usize| ids[i].active_span;
    let mut out = Vec::new();
    for ((site, kind), (count, bytes, time, threads)) in tally {
        let mean = bytes as f64 / count.max(1) as f64;
        let their_time: u64 = threads.iter().map(|&i| span(i)).sum::<u64>().max(1);
        let share = time as f64 / their_time as f64;
        if count < SMALL_COUNT || mean > SMALL_BYTES || share < SMALL_SHARE {
            continue;
        }
        let name = kinds::kind(kind).map_or("?", |k| k.name);
        out.push(Finding {
            kind: "small_messages".into(),
            severity: time as f64 / total_time as f64,
            threads: threads.iter().map(|&i| ids[i].name.clone()).collect(),
            location: location_in(sites, Some(site)),
            message: format!(
                "{count} {name} of {mean:.0} bytes on average take {:.1}% of the time of the {} making them \
                 ({:.3} ms); {}.",
                100.0 * share,
                match threads.len() {
                    1 => "thread".to_string(),
                    n => format!("{n} threads"),
                },
                time as f64 / 1e6,
                if is_collective(name) {
                    collective_advice(name)
                } else {
                    aggregate_advice(name).to_string()
                }
            ),
        });
    }
    out
}

/// Where callsite `callsite` of `sites` is, when known.
pub fn location_in(sites: &[Callsite], callsite: Option<u32>) -> Option<Location> {
    let c = sites.get(callsite? as usize)?;
    Some(Location {
        file: c.file.clone()?,
        line: c.line,
    })
}

#[cfg(test)]
mod tests {
    use super::{first_at_or_after, Union};

    /// The place of the first region start at or after a time, found with
    /// a cursor, is the binary search's, whatever the times asked.
    #[test]
    fn a_cursor_finds_what_a_binary_search_finds() {
        // Times asked in order, with repeats, going back, and past both ends.
        let sorted = [3u64, 5, 5, 9, 20, 21, 40];
        let asked = [0u64, 3, 4, 5, 5, 6, 21, 2, 9, 10, 40, 41, 100, 20, 0, 39];
        for start in 0..asked.len() {
            let mut cursor = (0, 0);
            for &from in &asked[start..] {
                assert_eq!(
                    first_at_or_after(&sorted, from, &mut cursor),
                    sorted.partition_point(|&r| r < from),
                    "asked {from} from {start}"
                );
            }
        }
        let mut cursor = (0, 0);
        assert_eq!(first_at_or_after(&[], 7, &mut cursor), 0);
    }

    /// The pass over a group's barriers, epoch by epoch with nothing kept
    /// per epoch, finds what a plain reading of every epoch finds: the
    /// widest epochs (many of them as wide), the last arrivals, the spreads,
    /// each thread's lateness; with epochs left out where a parallel region
    /// starts, and with one thread's barriers cut short.
    #[test]
    fn one_pass_finds_what_every_epoch_read_finds() {
        use super::{group_passes, BarrierSpan, Part};
        use crate::epochs::{Barrier, Epochs};
        use crate::summary::Identity;
        use crate::trace::{Stream, Trace};
        let t = Trace::default();
        let n = 4;
        let streams: Vec<Stream> = (0..n).map(|i| Stream::empty("host-1", i, 1, 16)).collect();
        let ids: Vec<Identity> = streams.iter().map(Identity::of).collect();
        // Thread m arrives at barrier k at k * 1000 ns and 0 to 300 more,
        // from a small generator: the spreads are mostly one of a few.
        let mut next = crate::testing::below(12345);
        let epochs = 300u64;
        let mut arrivals = vec![vec![0u64; epochs as usize]; n as usize];
        for k in 0..epochs {
            for a in &mut arrivals {
                a[k as usize] = k * 1000 + 100 * next(4);
            }
        }
        let whole: Vec<Part> = streams
            .iter()
            .enumerate()
            .map(|(m, s)| Part {
                barriers: Epochs::new(arrivals[m].iter().enumerate().map(|(k, &start)| {
                    let span = BarrierSpan {
                        start,
                        end: k as u64 * 1000 + 500,
                        callsite: (k % 3) as u32,
                    };
                    (span, (k as u64 * 7 + m as u64) % 50)
                })),
                // Thread 1 starts a region before some barriers.
                region_starts: match m {
                    1 => (0..epochs)
                        .filter(|k| k % 17 == 5)
                        .map(|k| k * 1000 - 250)
                        .collect(),
                    _ => Vec::new(),
                },
                ..Part::of(&t, s)
            })
            .collect();
        let check = |parts: &[Part]| {
            let refs: Vec<&Part> = parts.iter().collect();
            let passes = group_passes(&ids, &refs);
            assert_eq!(passes.len(), 1);
            let g = &passes[0];
            assert_eq!(g.epochs, epochs as usize);
            let read: Vec<Vec<Barrier>> = parts
                .iter()
                .map(|p| p.barriers.iter_with_work().collect())
                .collect();
            let mut wides = Vec::new();
            let mut last_arrivals = vec![0u64; n as usize];
            let mut lateness = vec![0f64; n as usize];
            let mut late_epochs = vec![0usize; n as usize];
            for k in 0..epochs as usize {
                let here: Vec<usize> = (0..n as usize).filter(|&m| read[m].len() > k).collect();
                if here.first() == Some(&0) {
                    let at = |m: usize| read[m][k].span.start;
                    let earliest = here.iter().map(|&m| at(m)).min().unwrap();
                    let latest = here.iter().map(|&m| at(m)).max().unwrap();
                    let first = *here.iter().find(|&&m| at(m) == earliest).unwrap();
                    let last = *here.iter().rev().find(|&&m| at(m) == latest).unwrap();
                    last_arrivals[last] += 1;
                    wides.push((
                        latest - earliest,
                        k,
                        first,
                        last,
                        read[last][k].span.callsite,
                    ));
                }
                let starts_region = |m: usize| {
                    let b = &read[m][k];
                    parts[m]
                        .region_starts
                        .iter()
                        .any(|&r| b.after <= r && r <= b.span.start)
                };
                if k == 0 || here.iter().any(|&m| starts_region(m)) {
                    continue;
                }
                let mut sum = 0.0;
                for &m in &here {
                    sum += read[m][k].work;
                }
                for &m in &here {
                    let d = read[m][k].work - (sum - read[m][k].work) / (n - 1) as f64;
                    lateness[m] += d;
                    late_epochs[m] += usize::from(d > 0.0);
                }
            }
            assert_eq!(g.spread_sum, wides.iter().map(|w| w.0).sum::<u64>());
            assert_eq!(g.spread_max, wides.iter().map(|w| w.0).max().unwrap_or(0));
            wides.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            wides.truncate(crate::balance::WIDEST);
            let found: Vec<_> = g
                .widest
                .iter()
                .map(|w| (w.spread, w.epoch, w.first, w.last, w.site))
                .collect();
            assert_eq!(found, wides);
            assert_eq!(g.last_arrivals, last_arrivals);
            assert_eq!(g.lateness, lateness);
            assert_eq!(g.late_epochs, late_epochs);
            assert!(g.new_regions > 0);
        };
        check(&whole);
        for who in [0, 2] {
            for cut in [0, 40, 700, 1500] {
                let mut parts = whole.clone();
                parts[who].barriers = whole[who].barriers.cut(cut);
                check(&parts);
            }
        }
    }

    /// A summary whose barriers are cut short (a damaged message of
    /// `gaspard report --mpi`) is merged as far as its barriers go, by the
    /// findings and the load balance alike, without a panic; whole, the
    /// thread arriving last everywhere is found so.
    #[test]
    fn barriers_cut_short_are_merged_as_far_as_they_go() {
        use super::{merge, BarrierSpan, Part};
        use crate::epochs::Epochs;
        use crate::summary::Identity;
        use crate::trace::{Stream, Trace};
        let t = Trace::default();
        let streams: Vec<Stream> = (0..3).map(|i| Stream::empty("host-1", i, 1, 16)).collect();
        let ids: Vec<Identity> = streams.iter().map(Identity::of).collect();
        // Thread m arrives at barrier k at k us + m * 100 ns (thread 2
        // last), and all leave together.
        let epochs = |m: u64| {
            Epochs::new((0..40u32).map(u64::from).map(move |k| {
                let span = BarrierSpan {
                    start: k * 1000 + m * 100,
                    end: k * 1000 + 400,
                    callsite: 0,
                };
                (span, 0)
            }))
        };
        let whole: Vec<Part> = streams
            .iter()
            .zip(0..)
            .map(|(s, m)| Part {
                barriers: epochs(m),
                ..Part::of(&t, s)
            })
            .collect();
        let refs: Vec<&Part> = whole.iter().collect();
        // The threads' time is all in barriers: a barrier wait, thread 0
        // waiting most.
        let waits = |found: Vec<super::Finding>| {
            found
                .into_iter()
                .find(|f| f.kind == "barrier_wait")
                .map(|f| f.message)
                .unwrap_or_default()
        };
        let said = waits(merge(&ids, &[], &refs));
        assert!(
            said.contains("these 3 threads is spent in 40 barriers"),
            "{said}"
        );
        assert!(
            said.contains(&format!("{} waits most", ids[0].name)),
            "{said}"
        );
        let b = crate::balance::merge(&ids, &[], &refs);
        assert_eq!(b.barriers.len(), 1);
        assert_eq!(b.barriers[0].epochs, 40);
        assert_eq!(b.barriers[0].last_arrivals, vec![0, 0, 40]);
        assert_eq!(b.barriers[0].wait_ns, vec![400 * 40, 300 * 40, 200 * 40]);
        for who in 0..3 {
            for cut in 0..whole[who].barriers.byte_len() {
                let mut parts = whole.clone();
                parts[who].barriers = whole[who].barriers.cut(cut);
                let refs: Vec<&Part> = parts.iter().collect();
                let said = waits(merge(&ids, &[], &refs));
                assert!(said.contains("in 40 barriers"), "{said}");
                let b = crate::balance::merge(&ids, &[], &refs);
                // Each thread's wait counts the barriers read of it.
                let read = parts[who].barriers.iter().count() as u64;
                assert!(read < 40);
                assert_eq!(b.barriers[0].wait_ns[who], (400 - 100 * who as u64) * read);
            }
        }
    }

    #[test]
    fn collectives_get_their_own_advice() {
        use super::{aggregate_advice, collective_advice, is_collective};
        for k in [
            "GASP_MPI_ALLREDUCE",
            "GASP_MPI_BCAST",
            "GASP_MPI_ALLGATHER",
            "GASP_SHMEM_LONG_SUM_TO_ALL",
            "GASP_SHMEM_BROADCAST64",
            "GASP_SHMEM_FCOLLECT32",
            "GASP_SHMEM_ALLTOALL64",
            "GASP_CAF_CO_SUM",
            "GASP_UPC_ALL_REDUCE",
        ] {
            assert!(is_collective(k), "{k}");
        }
        for k in [
            "GASP_MPI_SEND",
            "GASP_MPI_PUT",
            "GASP_MPI_GET_ACCUMULATE",
            "GASP_SHMEM_LONG_P",
            "GASP_SHMEM_PUTMEM",
            "GASP_CAF_GET",
            "GASP_UPC_GET",
            "GASP_UPC_MEMPUT",
        ] {
            assert!(!is_collective(k), "{k}");
        }
        let a = collective_advice("GASP_MPI_ALLREDUCE");
        assert!(a.contains("MPI_Iallreduce"), "{a}");
        assert!(!a.contains("MPI_Put"), "{a}");
        assert!(aggregate_advice("GASP_MPI_SEND").contains("MPI_Put"));
    }

    /// The length of the union of `spans` within `[from, to]`, counted ns
    /// by ns.
    fn slowly(spans: &[(u64, u64)], from: u64, to: u64) -> u64 {
        (from..to)
            .filter(|&t| spans.iter().any(|&(a, b)| a <= t && t < b))
            .count() as u64
    }

    #[test]
    fn busy_time_between_barriers() {
        // Intervals in START order (some within others, some touching,
        // some empty), and barriers among them; the time between a
        // barrier's end and the next one's start that the union covers.
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for _ in 0..2000 {
            let mut ivs: Vec<(u64, u64, bool)> = (0..next(12) + 1)
                .map(|_| {
                    let a = next(60);
                    (a, a + next(15), next(3) == 0)
                })
                .collect();
            ivs.sort_by_key(|&(a, b, _)| (a, std::cmp::Reverse(b)));
            let mut union = Union::new();
            let mut barriers = Vec::new();
            for &(a, b, barrier) in &ivs {
                union.add(a, b);
                if barrier {
                    union.barrier(a, b);
                    barriers.push((a, b));
                }
            }
            let at = union.finish();
            let spans: Vec<(u64, u64)> = ivs.iter().map(|&(a, b, _)| (a, b)).collect();
            for k in 1..barriers.len() {
                let (from, to) = (barriers[k - 1].1, barriers[k].0);
                assert_eq!(
                    at[k][0].saturating_sub(at[k - 1][1]),
                    slowly(&spans, from, to),
                    "{ivs:?}: barrier {k}"
                );
            }
        }
    }
}
