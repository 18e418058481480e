//! Wait states: time a thread loses in a communication or synchronization
//! call because another thread is not there yet.
//!
//! **Two-sided MPI.** Every send (`MPI_Send`, `MPI_Ssend`, `MPI_Bsend`,
//! `MPI_Rsend`, their `MPI_I*` forms, the send of `MPI_Sendrecv`) is matched
//! to its receive (`MPI_Recv`, `MPI_Irecv`, the receive of `MPI_Sendrecv`) by
//! (source rank, destination rank, tag), in order, as MPI's non-overtaking
//! rule matches them. Ranks are those of `MPI_COMM_WORLD`, as recorded by each
//! process's `MPI_Init`; the communicator is not recorded, so messages on
//! different communicators between the same ranks with the same tag are taken
//! for one stream of messages. A wildcard source or tag is resolved from the
//! status the receive completes with (`MPI_Recv`, `MPI_Wait`; `MPI_Wait`'s
//! status gives the source's rank in the receive's communicator, the world
//! rank on `MPI_COMM_WORLD`); an unresolved wildcard takes the earliest sent
//! message it can match. The tag of `MPI_Sendrecv`'s receive is not recorded
//! and taken as a wildcard. Receives from and sends to `MPI_PROC_NULL` are
//! left out.
//!
//! A non-blocking request completes at the `MPI_Wait` given its handle, or at
//! an `MPI_Waitall` of `count` requests, taken to be the thread's `count` most
//! recently started requests not yet completed (`MPI_Waitall` does not record
//! which); `MPI_Test`/`MPI_Testall` returning true complete requests without
//! waiting; the requests of `MPI_Waitany`/`MPI_Waitsome` are not known, so
//! their receives are matched but their waiting is not measured.
//!
//! - `late_sender`: a receive blocked because the matching send started later:
//!   in the blocking call (`MPI_Recv`, `MPI_Sendrecv`, or the `MPI_Wait` /
//!   `MPI_Waitall` completing an `MPI_Irecv`), the time from its start to the
//!   send's start (or to its own end, if sooner). The finding is at the
//!   blocking call's line: for `MPI_Irecv` + `MPI_Wait`, the `MPI_Wait`.
//! - `late_receiver`: a blocking send (`MPI_Send`, `MPI_Ssend`, or the
//!   `MPI_Wait` / `MPI_Waitall` completing an `MPI_Isend` / `MPI_Issend`) that
//!   did not end before the receiver posted its receive (a synchronous send,
//!   or a large message under rendezvous): the time from its start to the
//!   posting of the receive. A send that ended before the receive was posted
//!   (buffered, eager) waited for nobody. The send of `MPI_Sendrecv` is not
//!   measured (its call is the receive's).
//!
//! A call completing several requests waits once: the larger of its waits is
//! kept. The waits are summed per blocking call's source line; a line is a
//! finding when its wait is at least [`WAIT_SHARE`] of the time of the
//! threads waiting there.
//!
//! **One-sided.** `MPI_Win_fence` is a barrier over a window: per fence epoch,
//! each rank waits from its arrival until the last one arrives. Fences are
//! grouped across processes by window, windows being numbered in each process
//! in the order they are created (the same windows on every process, as the
//! collective creation makes them); a window on which the processes do not
//! call the same number of fences is left out. Their waiting is a
//! `barrier_wait` finding at the same threshold as barriers, at the fence
//! line where the rank waiting most waits most, naming the rank whose late
//! arrivals make the others wait longest. The time in the other one-sided
//! completion and synchronization calls (`MPI_Win_lock`/`unlock`/`flush*`/
//! `start`/`complete`/`wait`, `shmem_quiet`, `shmem_fence`,
//! `shmem_*_wait_until`) is reported per source line in the report's `waits`
//! section, not as a finding: it mixes the completion of the thread's own
//! operations with waiting for others.
//!
//! **All-to-all collectives.** No rank leaves `MPI_Allreduce`,
//! `MPI_Allgather` or `MPI_Alltoall` (no PE an OpenSHMEM reduction
//! `shmem_*_to_all`, `shmem_collect`, `shmem_fcollect`, `shmem_alltoall`)
//! before the last one arrives: the k-th
//! call of such a collective on each rank that makes it is one epoch, as a
//! fence, each rank waiting from its arrival to the last arrival (pattern
//! `collective`; a `barrier_wait` finding at the same threshold, when its
//! calls also wait [`COLLECTIVE_MIN_WAIT_NS`] on average, with the
//! nonblocking call as advice). The communicator (the active set) is not
//! recorded: a collective whose ranks make different numbers of calls is
//! left out.
//!
//! **Rooted collectives.** The others wait for the root of a one-to-all
//! collective (`MPI_Bcast`, `MPI_Scatter`, `shmem_broadcast32/64`): each
//! waits from its arrival to the root's (pattern `late_broadcast`, as
//! Scalasca names it). The root of an all-to-one collective (`MPI_Reduce`,
//! `MPI_Gather`) waits for the last of the others to arrive (pattern
//! `early_reduce`). The k-th call on each rank is one epoch, as for the
//! all-to-all ones, and an epoch counts only when every rank or PE of the
//! communicator (active set) made it and one of them is its root. Their
//! waiting is a `late_sender` finding (the root sends late, or the others
//! send late to the root) at the same threshold as the two-sided patterns,
//! when the calls wait [`COLLECTIVE_MIN_WAIT_NS`] on average.
//!
//! [`waits`] gives every wait-state source line (pattern, call, location,
//! calls, waits, wait, longest wait, the threads that waited, their share of
//! time, partners). A finding's threads are the threads that waited there.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;

use gaspard_format::kinds;
use serde::{Deserialize, Serialize};

use crate::findings::{location_in, Finding, Location};
use crate::intervals::intervals;
use crate::objects::Objects;
use crate::summary::Identity;
use crate::trace::{Callsite, Stream, Trace};

/// A line is a finding when its waiting takes at least this share of the
/// working time of the threads waiting there (as barrier waiting and lock
/// contention).
pub const WAIT_SHARE: f64 = 0.05;

/// Waiting in an all-to-all collective is a finding only when its calls wait
/// at least this long on average, ns (more than such a call takes on its own
/// between processes of one machine).
pub const COLLECTIVE_MIN_WAIT_NS: f64 = 2_000.0;

/// One source line where threads wait.
#[derive(Debug, Clone, Serialize)]
pub struct WaitSite {
    /// `late_sender`, `late_receiver`, `fence` (waiting at `MPI_Win_fence`
    /// for the last rank), `collective` (waiting in an all-to-all collective,
    /// [`all_to_all_kinds`], for the last rank or PE) or
    /// `synchronization` (time in a one-sided completion or synchronization
    /// call).
    pub pattern: String,
    /// The waiting call (`GASP_MPI_RECV`, `GASP_MPI_WAIT`, ...).
    pub call: String,
    /// The coarray operation the call is made for (`GASP_CAF_GET`, ...),
    /// when the runtime makes it inside one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub within: Option<String>,
    /// Its source line.
    pub location: Option<Location>,
    /// Calls at this line (for the two-sided patterns: those completing a
    /// matched receive, or a matched blocking send).
    pub calls: u64,
    /// Calls that waited.
    pub waits: u64,
    /// Time waited, ns.
    pub wait_ns: u64,
    /// Longest single wait, ns.
    pub max_ns: u64,
    /// The threads that waited here.
    pub threads: Vec<String>,
    /// `wait_ns` over the working time of these threads.
    pub share: f64,
    /// Who they wait for, most waited for first: the senders (`late_sender`),
    /// the receivers (`late_receiver`), the ranks arriving last (`fence`).
    pub partners: Vec<String>,
}

/// The wait-state findings (`late_sender`, `late_receiver`, and fence
/// waiting as `barrier_wait`) of an analysis, from the identities of its
/// streams and the trace's callsites. `total_time` is all threads' working
/// time.
pub fn wait_findings(
    a: &Analysis,
    ids: &[Identity],
    callsites: &[Callsite],
    total_time: u64,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for site in &a.sites {
        let Some(f) = a.finding(ids, callsites, site, total_time) else {
            continue;
        };
        out.push(f);
    }
    out.extend(a.fence_findings(ids, callsites, total_time));
    out
}

/// Every source line where threads wait, most waiting first: of an
/// analysis, from the identities of its streams and the trace's callsites.
pub fn wait_sites(a: &Analysis, ids: &[Identity], callsites: &[Callsite]) -> Vec<WaitSite> {
    let mut out: Vec<WaitSite> = a.sites.iter().map(|s| a.site(ids, callsites, s)).collect();
    out.sort_by(|a, b| {
        b.wait_ns
            .cmp(&a.wait_ns)
            .then(a.pattern.cmp(&b.pattern))
            .then(a.call.cmp(&b.call))
    });
    out
}

/// A blocking call of a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Blocking {
    kind: u16,
    site: u32,
    from: u64,
    to: u64,
}

/// A message a stream sends (from its process's rank). Ranks and tags are
/// C `int`s: a word outside their range (a damaged one) is taken as the
/// nearest that is in it ([`int32`]). Kept for every message of the trace
/// until the matching: 24 bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sent {
    dst: i32,
    tag: i32,
    start: u64,
    site: u32,
    /// The stream's call ([`Part::calls`]) it blocks in until the message
    /// is received, if any.
    call: CallOf,
}

/// A receive a stream posts (to its process's rank): 24 bytes, as a
/// [`Sent`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Posted {
    /// Negative: any source (-2: none, left out).
    src: i32,
    /// Negative: any tag.
    tag: i32,
    post: u64,
    site: u32,
    /// The stream's call ([`Part::calls`]) it blocks in until the message
    /// is there, if known.
    call: CallOf,
}

const _: () = assert!(std::mem::size_of::<Sent>() == 24 && std::mem::size_of::<Posted>() == 24);

/// A call of a stream's part ([`Part::calls`]), or none, in four bytes:
/// a stream holds fewer than `u32::MAX` events
/// ([`crate::trace::MAX_STREAM_EVENTS`]), so fewer calls. Sent between
/// processes as an `Option<u32>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Option<u32>", into = "Option<u32>")]
struct CallOf(u32);

impl CallOf {
    fn get(self) -> Option<u32> {
        (self.0 != u32::MAX).then_some(self.0)
    }
}

impl From<Option<u32>> for CallOf {
    fn from(c: Option<u32>) -> CallOf {
        CallOf(c.unwrap_or(u32::MAX))
    }
}

impl From<CallOf> for Option<u32> {
    fn from(c: CallOf) -> Option<u32> {
        c.get()
    }
}

/// `v` (a rank or tag: a C `int`) in 32 bits, the nearest that fits when
/// it does not (a damaged word).
fn int32(v: i64) -> i32 {
    v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
}

/// A stream's time in the one-sided synchronization calls of one kind at
/// one callsite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyncTime {
    kind: u16,
    site: u32,
    /// The coarray operation (`GASP_CAF_*`) the calls are made in, 0 when none.
    #[serde(default)]
    within: u16,
    calls: u64,
    /// Calls that took time.
    waits: u64,
    wait_ns: u64,
    max_ns: u64,
}

/// A stream's call, message or receive, read where it is in the stream's
/// part: (stream, its place in the part's list). A stream holds fewer
/// than 2^32 events ([`crate::trace::MAX_STREAM_EVENTS`]), so fewer of
/// these. The merge keeps no copy of them: a program sending millions of
/// messages is merged in the memory of its parts and of these.
type Ref = (u32, u32);

/// A call's largest wait, as a late sender (with the message it waited
/// for) or as a late receiver (with the receive): of the largest, a late
/// sender's before a late receiver's, and of those the first met. The
/// report names one wait per call, that one: 16 bytes per call rather than
/// the largest of each kind.
#[derive(Clone, Copy)]
struct Most {
    wait: u64,
    /// The message or receive; [`Most::NONE`]'s when none was met. Its
    /// stream's [`LATE_RECEIVER`] bit says which.
    at: Ref,
}

/// In the stream of [`Most::at`]: the bit saying it is a receive (the call
/// waited as a late receiver). A trace holds far fewer than 2^31 streams.
const LATE_RECEIVER: u32 = 1 << 31;

impl Most {
    const NONE: Most = Most {
        wait: 0,
        at: (u32::MAX, u32::MAX),
    };

    /// A wait of `wait` for `at`: a receive when `receiver` (a late
    /// receiver's wait), else a message (a late sender's).
    #[inline]
    fn add(&mut self, wait: u64, at: Ref, receiver: bool) {
        let mine = self.at.0 & LATE_RECEIVER != 0;
        if self.at == Most::NONE.at || wait > self.wait || (wait == self.wait && mine && !receiver)
        {
            let side = if receiver { LATE_RECEIVER } else { 0 };
            *self = Most {
                wait,
                at: (at.0 | side, at.1),
            };
        }
    }

    /// The wait, the message or receive, and whether it is a receive.
    fn get(self) -> Option<(u64, Ref, bool)> {
        (self.at != Most::NONE.at).then_some((
            self.wait,
            (self.at.0 & !LATE_RECEIVER, self.at.1),
            self.at.0 & LATE_RECEIVER != 0,
        ))
    }
}

/// The place of each of `list`'s items in `stream`.
fn refs(stream: usize, list: usize) -> impl Iterator<Item = Ref> {
    (0..list as u32).map(move |i| (stream as u32, i))
}

/// A request not yet completed: its send or receive in the stream's part.
#[derive(Debug)]
enum Pending {
    Send(usize, bool),
    Recv(usize),
}

/// One waiting source line, in the making.
#[derive(Debug)]
struct Site {
    pattern: &'static str,
    kind: u16,
    site: u32,
    /// The coarray operation the calls are made in (0: none).
    within: u16,
    calls: u64,
    waits: u64,
    wait_ns: u64,
    max_ns: u64,
    /// Threads that waited.
    threads: Vec<usize>,
    /// Partner thread -> time waited for it.
    partners: HashMap<usize, u64>,
    /// Partner's source line -> time waited for it.
    partner_sites: HashMap<u32, u64>,
    /// The partner and partner's line of the last waits, and the time
    /// waited for them not yet added to `partners` and `partner_sites`
    /// ([`Site::settle`]): the same partner at the same line, call after
    /// call, mostly.
    pending: Option<(usize, u32, u64)>,
}

/// One fence: from, to, callsite.
pub type Fence = (u64, u64, u32);

/// One rank's fences on a window: its stream, then each fence in order
/// (as its part has them: not copied).
type Member<'p> = (usize, &'p [Fence]);

/// One call of a rooted collective: from, to, callsite, whether the calling
/// rank or PE is its root, and how many ranks or PEs take part.
pub type RootedCall = (u64, u64, u32, bool, u64);

/// One rank's calls of a rooted collective: its stream, then each call in
/// order (as its part has them).
type RootedMember<'p> = (usize, &'p [RootedCall]);

/// How a rooted collective moves its data ([`rooted_kinds`]).
const ONE_TO_ALL: u8 = 1;
const ALL_TO_ONE: u8 = 2;

/// The rooted collectives, by kind number: [`ONE_TO_ALL`] (the root's data
/// to every rank or PE: `MPI_Bcast`, `MPI_Scatter`, `shmem_broadcast32`,
/// `shmem_broadcast64`), [`ALL_TO_ONE`] (every rank's data to the root:
/// `MPI_Reduce`, `MPI_Gather`), else 0.
fn rooted_kinds() -> &'static [u8] {
    static KINDS: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        let mut v = vec![0u8; 1 << 16];
        for (name, how) in [
            ("GASP_MPI_BCAST", ONE_TO_ALL),
            ("GASP_MPI_SCATTER", ONE_TO_ALL),
            ("GASP_SHMEM_BROADCAST32", ONE_TO_ALL),
            ("GASP_SHMEM_BROADCAST64", ONE_TO_ALL),
            ("GASP_MPI_REDUCE", ALL_TO_ONE),
            ("GASP_MPI_GATHER", ALL_TO_ONE),
        ] {
            if let Some(k) = kinds::kind_by_name(name) {
                v[k.id as usize] = how;
            }
        }
        v
    })
}

/// A fence epoch group: one window's fences on each of its ranks; or the
/// calls of one all-to-all collective ([`all_to_all_kinds`]) on each rank or
/// PE that makes them, which none leaves before the last one arrives.
#[derive(Debug)]
struct FenceGroup {
    /// The members' streams.
    members: Vec<usize>,
    /// How many calls each made.
    epochs: usize,
    what: Synchronizing,
    /// Per member: its waiting, the epochs it arrived last at, the waiting
    /// of the others it caused by arriving last, and its waiting at each of
    /// its callsites.
    wait: Vec<u64>,
    last_count: Vec<usize>,
    caused: Vec<u64>,
    lines: Vec<HashMap<u32, u64>>,
}

/// What a [`FenceGroup`]'s epochs are.
#[derive(Debug, Clone)]
enum Synchronizing {
    /// The fences of the window named so.
    Window(String),
    /// The calls of the collective of this kind, made in the coarray
    /// operation of the second kind (0: none).
    Collective(u16, u16),
}

/// The MPI collectives that no rank leaves before every rank has arrived
/// (all-to-all: each result depends on every rank's data).
const ALL_TO_ALL: [&str; 3] = [
    "GASP_MPI_ALLREDUCE",
    "GASP_MPI_ALLGATHER",
    "GASP_MPI_ALLTOALL",
];

/// Whether a kind is an all-to-all collective: [`ALL_TO_ALL`], and the
/// OpenSHMEM reductions (`shmem_*_to_all`), `shmem_collect*`,
/// `shmem_fcollect*` and `shmem_alltoall*`, by number.
fn all_to_all_kinds() -> &'static [bool] {
    static KINDS: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        let mut v = vec![false; 1 << 16];
        for k in kinds::all_kinds() {
            let shmem = k.name.strip_prefix("GASP_SHMEM_").is_some_and(|n| {
                n.ends_with("_TO_ALL")
                    || n.starts_with("COLLECT")
                    || n.starts_with("FCOLLECT")
                    || n.starts_with("ALLTOALL")
            });
            v[k.id as usize] = shmem || ALL_TO_ALL.contains(&k.name);
        }
        v
    })
}

/// The blocking calls, messages and fences of a trace, matched.
#[derive(Debug)]
pub struct Analysis {
    /// Per stream, its process's rank in `MPI_COMM_WORLD`.
    ranks: Vec<Option<i64>>,
    sites: Vec<Site>,
    fences: Vec<FenceGroup>,
}

fn kind_name(k: u16) -> &'static str {
    kinds::kind(k).map_or("?", |k| k.name)
}

/// What the two-sided matching makes of an interval of a kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TwoSided {
    /// Nothing.
    Other,
    /// A send that blocks until received (`MPI_Send`, `MPI_Ssend`).
    Send,
    /// A send that does not wait for its receive (`MPI_Bsend`, `MPI_Rsend`).
    Buffered,
    /// A nonblocking send whose completion may wait for its receive
    /// (`MPI_Isend`, `MPI_Issend`)...
    Isend,
    /// ... or may not (`MPI_Ibsend`, `MPI_Irsend`).
    IsendBuffered,
    Recv,
    Irecv,
    Sendrecv,
    Wait,
    Waitall,
    Testall,
    Test,
    WinCreate,
    WinFence,
}

/// [`TwoSided`] by kind number, from the kinds' names (found once).
fn two_sided_kinds() -> &'static [TwoSided] {
    static KINDS: std::sync::OnceLock<Vec<TwoSided>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        kinds::table(|k| match k.map_or("?", |k| k.name) {
            "GASP_MPI_SEND" | "GASP_MPI_SSEND" => TwoSided::Send,
            "GASP_MPI_BSEND" | "GASP_MPI_RSEND" => TwoSided::Buffered,
            "GASP_MPI_ISEND" | "GASP_MPI_ISSEND" => TwoSided::Isend,
            "GASP_MPI_IBSEND" | "GASP_MPI_IRSEND" => TwoSided::IsendBuffered,
            "GASP_MPI_RECV" => TwoSided::Recv,
            "GASP_MPI_IRECV" => TwoSided::Irecv,
            "GASP_MPI_SENDRECV" => TwoSided::Sendrecv,
            "GASP_MPI_WAIT" => TwoSided::Wait,
            "GASP_MPI_WAITALL" => TwoSided::Waitall,
            "GASP_MPI_TESTALL" => TwoSided::Testall,
            "GASP_MPI_TEST" => TwoSided::Test,
            "GASP_MPI_WIN_CREATE" | "GASP_MPI_WIN_ALLOCATE" | "GASP_MPI_WIN_CREATE_DYNAMIC" => {
                TwoSided::WinCreate
            }
            "GASP_MPI_WIN_FENCE" => TwoSided::WinFence,
            _ => TwoSided::Other,
        })
    })
}

/// A recorded `Int` argument as a signed number.
fn int(a: &crate::objects::Named<'_>, name: &str) -> Option<i64> {
    a.get(name).map(|&v| v as i64)
}

/// What a stream's part needs to know of its process: the process's rank
/// in `MPI_COMM_WORLD`.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// Process -> its rank.
    ranks: HashMap<String, i64>,
}

impl Context {
    /// The context of every process of `t`, found process by process
    /// ([`mpi_rank`]).
    pub fn of(t: &Trace) -> Context {
        let mut by_process: HashMap<&str, Vec<&Stream>> = HashMap::default();
        for s in &t.streams {
            by_process.entry(&s.process).or_default().push(s);
        }
        let ranks = by_process
            .into_iter()
            .filter_map(|(p, streams)| Some((p.to_string(), mpi_rank(streams)?)))
            .collect();
        Context { ranks }
    }

    /// The rank of `process`, if it is an MPI process whose start was recorded.
    pub fn rank(&self, process: &str) -> Option<i64> {
        self.ranks.get(process).copied()
    }
}

/// An MPI process's rank in `MPI_COMM_WORLD`, from its streams (in stream
/// order; the last to record the END of `MPI_Init` gives it).
pub fn mpi_rank<'a>(streams: impl IntoIterator<Item = &'a Stream>) -> Option<i64> {
    streams
        .into_iter()
        .filter(|s| s.model == 3)
        .filter_map(|s| {
            let init = s.events.iter().find(|e| {
                e.phase == 1
                    && matches!(
                        kinds::kind(e.kind).map(|k| k.name),
                        Some("GASP_MPI_INIT" | "GASP_MPI_INIT_THREAD")
                    )
            })?;
            int(&crate::objects::ArgNames::new(s).of(s, init), "rank").filter(|&r| r >= 0)
        })
        .last()
}

/// A kind's class for [`Part::of`]: one-sided synchronization
/// ([`is_one_sided_sync`]), a coarray operation, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Other,
    Sync,
    Coarray,
}

/// Every kind's [`Class`], by number, found once: every interval of every
/// stream is asked.
fn classes() -> &'static [Class] {
    static KINDS: std::sync::OnceLock<Vec<Class>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        let mut v = vec![Class::Other; 1 << 16];
        for k in kinds::all_kinds() {
            v[k.id as usize] = if is_one_sided_sync(k.name) {
                Class::Sync
            } else if k.name.starts_with("GASP_CAF_") {
                Class::Coarray
            } else {
                Class::Other
            };
        }
        v
    })
}

/// Whether a kind is one [`Part::of`] looks at: of a [`Class`] other than
/// `Other`, all-to-all, rooted, or one of the two-sided calls, waits and
/// window calls of a stream with a rank.
pub(crate) fn wanted_kinds() -> &'static [bool] {
    static KINDS: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        let (class, all_to_all, rooted) = (classes(), all_to_all_kinds(), rooted_kinds());
        (0..1usize << 16)
            .map(|k| {
                class[k] != Class::Other
                    || all_to_all[k]
                    || rooted[k] != 0
                    || kinds::kind(k as u16).is_some_and(|i| TWO_SIDED.contains(&i.name))
            })
            .collect()
    })
}

/// The calls a stream with a rank is looked at for besides ([`Builder::feed`]).
const TWO_SIDED: [&str; 19] = [
    "GASP_MPI_SEND",
    "GASP_MPI_SSEND",
    "GASP_MPI_BSEND",
    "GASP_MPI_RSEND",
    "GASP_MPI_ISEND",
    "GASP_MPI_ISSEND",
    "GASP_MPI_IBSEND",
    "GASP_MPI_IRSEND",
    "GASP_MPI_RECV",
    "GASP_MPI_IRECV",
    "GASP_MPI_SENDRECV",
    "GASP_MPI_WAIT",
    "GASP_MPI_WAITALL",
    "GASP_MPI_TESTALL",
    "GASP_MPI_TEST",
    "GASP_MPI_WIN_CREATE",
    "GASP_MPI_WIN_ALLOCATE",
    "GASP_MPI_WIN_CREATE_DYNAMIC",
    "GASP_MPI_WIN_FENCE",
];

/// The one-sided calls whose time is listed as `synchronization`.
fn is_one_sided_sync(name: &str) -> bool {
    matches!(
        name,
        "GASP_MPI_WIN_LOCK"
            | "GASP_MPI_WIN_LOCK_ALL"
            | "GASP_MPI_WIN_UNLOCK"
            | "GASP_MPI_WIN_UNLOCK_ALL"
            | "GASP_MPI_WIN_FLUSH"
            | "GASP_MPI_WIN_FLUSH_ALL"
            | "GASP_MPI_WIN_FLUSH_LOCAL"
            | "GASP_MPI_WIN_FLUSH_LOCAL_ALL"
            | "GASP_MPI_WIN_START"
            | "GASP_MPI_WIN_COMPLETE"
            | "GASP_MPI_WIN_WAIT"
            | "GASP_SHMEM_QUIET"
            | "GASP_SHMEM_FENCE"
    ) || (name.starts_with("GASP_SHMEM_") && name.ends_with("_WAIT_UNTIL"))
}

/// One stream's part of the wait states: its time in one-sided
/// synchronization calls, its blocking calls, messages and receives (with
/// their completions already found: requests are the stream's own), its
/// fences per window and the names of the windows it creates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// Its process's rank in `MPI_COMM_WORLD` ([`Context`]); without it,
    /// only the one-sided synchronization time is kept.
    pub rank: Option<i64>,
    /// Its one-sided synchronization time per (kind, callsite), first met first.
    pub sync: Vec<SyncTime>,
    /// Its blocking calls, in order.
    pub calls: Vec<Blocking>,
    /// Its messages, in order.
    pub msgs: Vec<Sent>,
    /// Its receives, in order.
    pub recvs: Vec<Posted>,
    /// Its fences on each window (numbered in the order its process
    /// creates them), the windows first fenced first.
    pub fences: Vec<(u32, Vec<Fence>)>,
    /// Its calls of each all-to-all collective ([`all_to_all_kinds`]), by
    /// kind and the coarray operation they are made in (0: none), the first
    /// called first.
    #[serde(default)]
    pub collectives: Vec<((u16, u16), Vec<Fence>)>,
    /// Its calls of each rooted collective ([`rooted_kinds`]), by kind and
    /// the coarray operation they are made in (0: none), the first called
    /// first.
    #[serde(default)]
    pub rooted: Vec<((u16, u16), Vec<RootedCall>)>,
    /// The names of the windows it creates, in the order it creates them.
    pub windows: Vec<String>,
}

impl Part {
    /// The part in the trace's times and numbers ([`crate::summary::Rebase`]).
    pub(crate) fn rebase(&mut self, r: &crate::summary::Rebase) {
        for s in &mut self.sync {
            s.site = r.site(s.site);
        }
        for c in &mut self.calls {
            (c.from, c.to) = r.span((c.from, c.to));
            c.site = r.site(c.site);
        }
        for m in &mut self.msgs {
            m.start = r.t(m.start);
            m.site = r.site(m.site);
        }
        for p in &mut self.recvs {
            p.post = r.t(p.post);
            p.site = r.site(p.site);
        }
        let fences = self.fences.iter_mut().map(|(_, f)| f);
        for f in fences
            .chain(self.collectives.iter_mut().map(|(_, f)| f))
            .flatten()
        {
            (f.0, f.1) = r.span((f.0, f.1));
            f.2 = r.site(f.2);
        }
        for c in self.rooted.iter_mut().flat_map(|(_, c)| c) {
            (c.0, c.1) = r.span((c.0, c.1));
            c.2 = r.site(c.2);
        }
    }

    /// The part of `s`, whose process is in `ctx` and whose windows are in
    /// `objects`.
    pub fn of(s: &Stream, ctx: &Context, objects: &Objects) -> Part {
        let mut b = Builder::new(ctx.rank(&s.process), None);
        b.feed(s, objects);
        b.finish()
    }
}

/// A stream's [`Part`] made from its intervals of the kinds looked at
/// ([`wanted_kinds`]) in START order: the whole stream's, or in turn those
/// a [`crate::window::Resolver`] gives of its windows.
#[derive(Debug)]
pub(crate) struct Builder {
    part: Part,
    sync_at: HashMap<(u16, u32, u16), usize>,
    /// The coarray operations open around the interval: (end, kind).
    coarray: Vec<(u64, u16)>,
    pending: Vec<(u64, Pending)>,
    windows: HashMap<u64, usize>,
    /// An OpenSHMEM PE's collectives count as an MPI rank's do (whether
    /// the stream is a PE's, looked for at its first collective).
    pe: Option<bool>,
    /// Its rank or PE and how many there are, looked for at its first
    /// rooted collective ([`crate::matrix::rank`] of the stream).
    world: Option<Option<crate::matrix::Rank>>,
    /// Where the two-sided calls' arguments ([`CALL_ARGS`]) are, made at
    /// the first window.
    places: Option<crate::objects::Places>,
}

/// The arguments the two-sided matching reads of its calls, by name: for
/// [`crate::objects::Places::get`], each at its place here.
const CALL_ARGS: &[&str] = &["peer", "tag", "request", "source", "flag", "count", "win"];
const PEER: usize = 0;
const TAG: usize = 1;
const REQUEST: usize = 2;
const SOURCE: usize = 3;
const FLAG: usize = 4;
const COUNT: usize = 5;
const WIN: usize = 6;

impl Builder {
    /// For a stream whose process's rank in `MPI_COMM_WORLD` is `rank`
    /// ([`Context::rank`]), and whose own rank or PE is `world` (`None`:
    /// found in the stream fed, then whole).
    pub(crate) fn new(rank: Option<i64>, world: Option<Option<crate::matrix::Rank>>) -> Builder {
        Builder {
            part: Part {
                rank,
                ..Part::default()
            },
            sync_at: HashMap::default(),
            coarray: Vec::new(),
            pending: Vec::new(),
            windows: HashMap::default(),
            pe: world.map(|w| w.is_some_and(|r| r.model == "SHMEM")),
            world,
            places: None,
        }
    }

    /// The part of what was fed.
    pub(crate) fn finish(self) -> Part {
        let mut part = self.part;
        // Kept until every stream is read: without the room their growth
        // left (up to as much again).
        part.calls.shrink_to_fit();
        part.msgs.shrink_to_fit();
        part.recvs.shrink_to_fit();
        part
    }

    /// Adds the intervals of `s` (the whole stream, or those a resolver gave
    /// of its next window), whose process's windows are in `objects`.
    pub(crate) fn feed(&mut self, s: &Stream, objects: &Objects) {
        let rank = self.part.rank;
        let Part {
            sync,
            calls,
            msgs,
            recvs,
            fences,
            collectives,
            rooted,
            windows: window_names,
            ..
        } = &mut self.part;
        let (sync_at, coarray, pending, windows) = (
            &mut self.sync_at,
            &mut self.coarray,
            &mut self.pending,
            &mut self.windows,
        );
        let (pe, world) = (&mut self.pe, &mut self.world);
        let places = (self.places).get_or_insert_with(|| crate::objects::Places::new(s, CALL_ARGS));
        let class = classes();
        let all_to_all = all_to_all_kinds();
        let rooted_kind = rooted_kinds();
        let mut names = crate::objects::ArgNames::new(s);
        let wanted = wanted_kinds();
        let two_sided = two_sided_kinds();
        for iv in intervals(s) {
            // Most intervals of most streams: none of the kinds looked at.
            if !wanted[iv.kind as usize] {
                continue;
            }
            let c = class[iv.kind as usize];
            while coarray.last().is_some_and(|&(end, _)| end < iv.end) {
                coarray.pop();
            }
            if c == Class::Coarray {
                coarray.push((iv.end, iv.kind));
            }
            if c == Class::Sync {
                let within = coarray.last().map_or(0, |&(_, k)| k);
                let i = *sync_at
                    .entry((iv.kind, iv.callsite, within))
                    .or_insert_with(|| {
                        sync.push(SyncTime {
                            kind: iv.kind,
                            site: iv.callsite,
                            within,
                            calls: 0,
                            waits: 0,
                            wait_ns: 0,
                            max_ns: 0,
                        });
                        sync.len() - 1
                    });
                let w = iv.end.saturating_sub(iv.start);
                let st = &mut sync[i];
                st.calls += 1;
                st.waits += u64::from(w > 0);
                st.wait_ns += w;
                st.max_ns = st.max_ns.max(w);
                continue;
            }
            if all_to_all[iv.kind as usize]
                && (rank.is_some()
                    || *pe.get_or_insert_with(|| {
                        crate::matrix::rank(s).is_some_and(|r| r.model == "SHMEM")
                    }))
            {
                let call = (iv.start, iv.end, iv.callsite);
                let key = (iv.kind, coarray.last().map_or(0, |&(_, k)| k));
                match collectives.iter_mut().find(|c| c.0 == key) {
                    Some(c) => c.1.push(call),
                    None => collectives.push((key, vec![call])),
                }
                continue;
            }
            if rooted_kind[iv.kind as usize] != 0 {
                let shmem = kind_name(iv.kind).starts_with("GASP_SHMEM_");
                let Some(w) = world
                    .get_or_insert_with(|| crate::matrix::rank(s))
                    .filter(|w| (w.model == "SHMEM") == shmem)
                else {
                    continue;
                };
                let me = w.me as i64;
                let (sa, _) = names.pair(
                    s,
                    &s.events[iv.start_event as usize],
                    &s.events[iv.end_event as usize],
                );
                // An MPI root is numbered in its communicator: only calls on
                // a communicator of every rank are kept (MPI_COMM_WORLD, or
                // one as big). An OpenSHMEM root is numbered in the active
                // set `pe_start`, `log_stride`, `pe_size`.
                let (root, size) = if shmem {
                    let (start, stride) = (int(&sa, "pe_start"), int(&sa, "log_stride"));
                    let root = match (int(&sa, "root"), start, stride) {
                        (Some(r), Some(p), Some(l)) if (0..63).contains(&l) => {
                            r.checked_shl(l as u32).and_then(|x| x.checked_add(p))
                        }
                        _ => None,
                    };
                    (root, int(&sa, "pe_size"))
                } else {
                    let size = int(&sa, "comm_size").filter(|&n| n == w.size as i64);
                    (int(&sa, "root"), size)
                };
                if let (Some(root), Some(size)) = (root, size.filter(|&n| n > 0)) {
                    let call = (iv.start, iv.end, iv.callsite, root == me, size as u64);
                    let key = (iv.kind, coarray.last().map_or(0, |&(_, k)| k));
                    match rooted.iter_mut().find(|c| c.0 == key) {
                        Some(c) => c.1.push(call),
                        None => rooted.push((key, vec![call])),
                    }
                }
                continue;
            }
            if rank.is_none() {
                continue;
            }
            let what = two_sided[iv.kind as usize];
            if what == TwoSided::Other {
                continue;
            }
            // Its START's and END's arguments, as recorded `Int`s (signed).
            let (se, ee) = (
                &s.events[iv.start_event as usize],
                &s.events[iv.end_event as usize],
            );
            let (sp, ep) = (places.of(se), places.of(ee));
            let (sw, ew) = (s.args(se), s.args(ee));
            let places = &*places;
            let sa = |name: usize| places.get(sp, name, sw).map(|v| v as i64);
            let ea = |name: usize| places.get(ep, name, ew).map(|v| v as i64);
            let mut call = || {
                calls.push(Blocking {
                    kind: iv.kind,
                    site: iv.callsite,
                    from: iv.start,
                    to: iv.end,
                });
                calls.len() as u32 - 1
            };
            let msg = |call: Option<u32>| Sent {
                dst: int32(sa(PEER).unwrap_or(-1)),
                tag: int32(sa(TAG).unwrap_or(-1)),
                start: iv.start,
                site: iv.callsite,
                call: call.into(),
            };
            let recv = |src: i64, tag: i64, call: Option<u32>| Posted {
                src: int32(src),
                tag: int32(tag),
                post: iv.start,
                site: iv.callsite,
                call: call.into(),
            };
            // (Every kind named here is among [`TWO_SIDED`]: the others are
            // not looked at.)
            match what {
                TwoSided::Send => {
                    let c = call();
                    msgs.push(msg(Some(c)));
                }
                TwoSided::Buffered => msgs.push(msg(None)),
                TwoSided::Isend | TwoSided::IsendBuffered => {
                    msgs.push(msg(None));
                    let may_block = what == TwoSided::Isend;
                    if let Some(req) = ea(REQUEST) {
                        pending.push((req as u64, Pending::Send(msgs.len() - 1, may_block)));
                    }
                }
                TwoSided::Recv => {
                    // The END carries the actual source and tag.
                    let src = ea(PEER).unwrap_or(-2);
                    if src >= 0 {
                        let c = call();
                        recvs.push(recv(src, ea(TAG).unwrap_or(-1), Some(c)));
                    }
                }
                TwoSided::Irecv => {
                    let src = sa(PEER).unwrap_or(-2);
                    recvs.push(recv(src, sa(TAG).unwrap_or(-1), None));
                    if let Some(req) = ea(REQUEST) {
                        pending.push((req as u64, Pending::Recv(recvs.len() - 1)));
                    }
                }
                TwoSided::Sendrecv => {
                    let c = call();
                    msgs.push(msg(None));
                    recvs.push(recv(sa(SOURCE).unwrap_or(-2), -1, Some(c)));
                }
                TwoSided::Wait => {
                    let Some(req) = sa(REQUEST).map(|r| r as u64) else {
                        continue;
                    };
                    if let Some(i) = pending.iter().rposition(|p| p.0 == req) {
                        let (_, p) = pending.remove(i);
                        let c = call();
                        let status = (ea(SOURCE), ea(TAG));
                        complete(msgs, recvs, p, Some(c), status);
                    }
                }
                TwoSided::Waitall | TwoSided::Testall => {
                    let done = what == TwoSided::Waitall || ea(FLAG) == Some(1);
                    let n = sa(COUNT).unwrap_or(0).max(0) as usize;
                    if done && n > 0 {
                        let c = (what == TwoSided::Waitall).then(&mut call);
                        let from = pending.len().saturating_sub(n);
                        for (_, p) in pending.drain(from..) {
                            complete(msgs, recvs, p, c, (None, None));
                        }
                    }
                }
                TwoSided::Test if ea(FLAG) == Some(1) => {
                    if let Some(req) = sa(REQUEST).map(|r| r as u64) {
                        if let Some(i) = pending.iter().rposition(|p| p.0 == req) {
                            let (_, p) = pending.remove(i);
                            complete(msgs, recvs, p, None, (None, None));
                        }
                    }
                }
                TwoSided::WinCreate => {
                    if let Some(w) = ea(WIN).map(|w| w as u64) {
                        let created = window_names.len();
                        windows.insert(w, created);
                        window_names.push(
                            objects
                                .window(&s.process, w)
                                .map_or(format!("window {}", created + 1), |w| w.name.clone()),
                        );
                    }
                }
                TwoSided::WinFence => {
                    let Some(&w) = windows.get(&sa(WIN).map_or(0, |w| w as u64)) else {
                        continue;
                    };
                    let fence = (iv.start, iv.end, iv.callsite);
                    match fences.iter_mut().find(|f| f.0 as usize == w) {
                        Some(f) => f.1.push(fence),
                        None => fences.push((w as u32, vec![fence])),
                    }
                }
                _ => {}
            }
        }
    }
}

/// The wait states from every stream's part (`parts[i]`: stream `i`'s).
pub fn merge(parts: &[&Part]) -> Analysis {
    let mut sites: Vec<Site> = Vec::new();
    let mut sync_sites: HashMap<(u16, u32, u16), usize> = HashMap::default();
    // Fences per window order: each stream's, in stream order.
    let mut fences: HashMap<usize, Vec<Member>> = HashMap::default();
    // A window's name: the first stream's to create it.
    let mut window_names: HashMap<usize, String> = HashMap::default();
    // Calls of each all-to-all collective: each stream's, in stream order.
    let mut collectives: HashMap<(u16, u16), Vec<Member>> = HashMap::default();
    let mut rooted: HashMap<(u16, u16), Vec<RootedMember>> = HashMap::default();
    for (si, p) in parts.iter().enumerate() {
        for st in &p.sync {
            let i = *sync_sites
                .entry((st.kind, st.site, st.within))
                .or_insert_with(|| {
                    sites.push(Site::new("synchronization", st.kind, st.site, st.within));
                    sites.len() - 1
                });
            sites[i].add_many(si, st);
        }
        for (w, f) in &p.fences {
            fences.entry(*w as usize).or_default().push((si, f));
        }
        for (k, c) in &p.collectives {
            collectives.entry(*k).or_default().push((si, c));
        }
        for (k, c) in &p.rooted {
            rooted.entry(*k).or_default().push((si, c));
        }
        for (w, name) in p.windows.iter().enumerate() {
            window_names.entry(w).or_insert_with(|| name.clone());
        }
    }
    let mut a = Analysis {
        ranks: parts.iter().map(|p| p.rank).collect(),
        sites,
        fences: Vec::new(),
    };
    a.two_sided(parts);
    let mut groups: Vec<(usize, Vec<Member>)> = fences.into_iter().collect();
    groups.sort_by_key(|g| g.0);
    for (w, members) in groups {
        let name = window_names
            .get(&w)
            .cloned()
            .unwrap_or_else(|| format!("window {}", w + 1));
        a.fence_group(&members, Synchronizing::Window(name));
    }
    let mut groups: Vec<((u16, u16), Vec<Member>)> = collectives.into_iter().collect();
    groups.sort_by_key(|g| g.0);
    for ((k, within), members) in groups {
        a.fence_group(&members, Synchronizing::Collective(k, within));
    }
    let mut groups: Vec<((u16, u16), Vec<RootedMember>)> = rooted.into_iter().collect();
    groups.sort_by_key(|g| g.0);
    for ((k, within), members) in groups {
        a.rooted_group(k, within, &members);
    }
    for site in &mut a.sites {
        site.settle();
    }
    a
}

/// The two-sided matching of every stream's messages and receives: per
/// stream, per blocking call of its part, its largest wait ([`Most`]).
/// Messages match per (source, destination, tag) in the order they are sent
/// (as early: stream by stream, each's in order); receives take them in the
/// order they are posted at each destination, each the first message it can
/// match (for any source or tag, the earliest sent of those that could come
/// first).
fn matched(parts: &[&Part]) -> Vec<Vec<Most>> {
    let msg = |(s, i): Ref| &parts[s as usize].msgs[i as usize];
    let recv = |(s, i): Ref| &parts[s as usize].recvs[i as usize];
    // A call a message or receive names; none past the stream's calls (a
    // damaged summary's).
    let call = |(s, i): Ref| parts[s as usize].calls.get(i as usize);
    // A message's source, and a receive's destination: its stream's rank.
    let rank = |(s, _): Ref| parts[s as usize].rank.unwrap_or(-1);
    // Messages per (source, destination, tag), in the order they are
    // sent (as early: stream by stream, each's in order).
    let mut order: Vec<Ref> = (parts.iter().enumerate())
        .flat_map(|(si, p)| refs(si, p.msgs.len()))
        .filter(|&m| msg(m).dst >= 0)
        .collect();
    order.sort_by_key(|&m| (msg(m).start, m.0));
    let mut queues: HashMap<(i64, i64, i64), VecDeque<Ref>> = HashMap::default();
    let mut keys_to: HashMap<i64, Vec<(i64, i64)>> = HashMap::default();
    for m in order {
        let key = (rank(m), i64::from(msg(m).dst), i64::from(msg(m).tag));
        let q = queues.entry(key).or_default();
        if q.is_empty()
            && !keys_to
                .get(&key.1)
                .is_some_and(|k| k.contains(&(key.0, key.2)))
        {
            keys_to.entry(key.1).or_default().push((key.0, key.2));
        }
        q.push_back(m);
    }
    // Receives in the order they are posted, each taking the first
    // message it can match.
    let mut rorder: Vec<Ref> = (parts.iter().enumerate())
        .flat_map(|(si, p)| refs(si, p.recvs.len()))
        .filter(|&r| recv(r).src >= -1)
        .collect();
    rorder.sort_by_key(|&r| (rank(r), recv(r).post, r.0));
    // Per stream, per blocking call: its largest wait.
    let mut waits: Vec<Vec<Most>> = parts
        .iter()
        .map(|p| vec![Most::NONE; p.calls.len()])
        .collect();
    for r in rorder {
        let (rv, dst) = (recv(r), rank(r));
        let (src, tag) = (i64::from(rv.src), i64::from(rv.tag));
        let key = if src >= 0 && tag >= 0 {
            Some((src, dst, tag))
        } else {
            keys_to
                .get(&dst)
                .into_iter()
                .flatten()
                .filter(|(s, tg)| (src < 0 || *s == src) && (tag < 0 || *tg == tag))
                .map(|&(s, tg)| (s, dst, tg))
                .filter_map(|k| Some((queues.get(&k)?.front().map(|&m| msg(m).start)?, k)))
                .min()
                .map(|(_, k)| k)
        };
        let Some(m) = key.and_then(|k| queues.get_mut(&k)?.pop_front()) else {
            continue;
        };
        let sent = msg(m);
        if let Some((c, cl)) = (rv.call.get()).and_then(|c| Some(((r.0, c), call((r.0, c))?))) {
            let w = sent.start.min(cl.to).saturating_sub(cl.from);
            waits[c.0 as usize][c.1 as usize].add(w, m, false);
        }
        if let Some((c, cl)) = (sent.call.get()).and_then(|c| Some(((m.0, c), call((m.0, c))?))) {
            let w = if rv.post > cl.from && cl.to >= rv.post {
                rv.post - cl.from
            } else {
                0
            };
            waits[c.0 as usize][c.1 as usize].add(w, r, true);
        }
    }
    waits
}

impl Analysis {
    /// The wait states of `t`: the merge of its streams' parts (the report
    /// makes the parts in its pass over the streams).
    #[cfg(test)]
    pub(crate) fn run(t: &Trace) -> Analysis {
        let ctx = Context::of(t);
        let parts: Vec<Part> = t
            .streams
            .iter()
            .map(|s| Part::of(s, &ctx, &t.objects))
            .collect();
        merge(&parts.iter().collect::<Vec<_>>())
    }

    /// Matches sends to receives and measures the waits of both sides.
    fn two_sided(&mut self, parts: &[&Part]) {
        let msg = |(s, i): Ref| &parts[s as usize].msgs[i as usize];
        let recv = |(s, i): Ref| &parts[s as usize].recvs[i as usize];
        // A site per (late sender or receiver, kind, callsite); the last
        // two found asked first (a program's calls mostly come from few
        // lines, in turn: a send's, then a receive's).
        type SiteKey = (bool, u16, u32);
        let mut at: HashMap<SiteKey, usize> = HashMap::default();
        let mut recent: [Option<(SiteKey, usize)>; 2] = [None; 2];
        let mut site_of = |sites: &mut Vec<Site>, pattern: &'static str, call: &Blocking| {
            let key = (pattern == "late_receiver", call.kind, call.site);
            if let Some((_, i)) = recent.iter().flatten().find(|(k, _)| *k == key) {
                return *i;
            }
            let i = *at.entry(key).or_insert_with(|| {
                sites.push(Site::new(pattern, call.kind, call.site, 0));
                sites.len() - 1
            });
            recent = [Some((key, i)), recent[0]];
            i
        };
        // The calls in stream order, each's in order.
        let waited = (matched(parts).into_iter().enumerate()).flat_map(|(si, calls)| {
            calls
                .into_iter()
                .enumerate()
                .map(move |(i, w)| ((si, i), w))
        });
        for ((stream, i), most) in waited {
            let cl = &parts[stream].calls[i];
            // One wait per call: the larger of the two kinds.
            match most.get() {
                Some((w, m, false)) => {
                    let i = site_of(&mut self.sites, "late_sender", cl);
                    self.sites[i].add_call(stream, w, m.0 as usize, msg(m).site);
                }
                Some((w, rv, true)) => {
                    let i = site_of(&mut self.sites, "late_receiver", cl);
                    self.sites[i].add_call(stream, w, rv.0 as usize, recv(rv).site);
                }
                None => {}
            }
        }
    }

    /// A fence group's epochs: each member waits from its arrival to the last
    /// arrival. A group whose members made different numbers of calls (a
    /// collective on a communicator other than all ranks) is left out.
    fn fence_group(&mut self, members: &[Member], what: Synchronizing) {
        let n = members.len();
        let epochs = members.first().map_or(0, |m| m.1.len());
        if n < 2 || epochs == 0 || members.iter().any(|m| m.1.len() != epochs) {
            return;
        }
        let (pattern, kind, within) = match what {
            Synchronizing::Window(_) => (
                "fence",
                kinds::kind_by_name("GASP_MPI_WIN_FENCE").map_or(0, |k| k.id),
                0,
            ),
            Synchronizing::Collective(k, within) => ("collective", k, within),
        };
        let mut g = FenceGroup {
            members: members.iter().map(|m| m.0).collect(),
            epochs,
            what,
            wait: vec![0; n],
            last_count: vec![0; n],
            caused: vec![0; n],
            lines: vec![HashMap::default(); n],
        };
        let mut at: HashMap<u32, usize> = HashMap::default();
        // Per member, the callsite of its last call, its entry in `sites`,
        // and its waiting there not yet added to its `lines`: a member
        // calls from the same line epoch after epoch, mostly, and is then
        // not looked up in the maps again.
        let mut memo: Vec<Option<(u32, usize, u64)>> = vec![None; n];
        for k in 0..epochs {
            let last = (0..n).max_by_key(|&m| members[m].1[k].0).unwrap_or(0);
            let latest = members[last].1[k].0;
            g.last_count[last] += 1;
            for (m, (stream, f)) in members.iter().enumerate() {
                let (from, to, site) = f[k];
                let (i, pending) = match &mut memo[m] {
                    Some((s, i, pending)) if *s == site => (*i, pending),
                    entry => {
                        if let Some((s, _, w)) = entry.take() {
                            *g.lines[m].entry(s).or_default() += w;
                        }
                        let i = *at.entry(site).or_insert_with(|| {
                            self.sites.push(Site::new(pattern, kind, site, within));
                            self.sites.len() - 1
                        });
                        let (_, _, pending) = entry.insert((site, i, 0));
                        (i, pending)
                    }
                };
                let w = latest.min(to).saturating_sub(from);
                *pending += w;
                let (ls, lsite) = (members[last].0, members[last].1[k].2);
                self.sites[i].add_call(*stream, w, ls, lsite);
                g.wait[m] += w;
                g.caused[last] += w;
            }
        }
        for (m, entry) in memo.into_iter().enumerate() {
            if let Some((s, _, w)) = entry {
                *g.lines[m].entry(s).or_default() += w;
            }
        }
        self.fences.push(g);
    }

    /// A rooted collective's epochs ([`rooted_kinds`]): the k-th call on
    /// each of its ranks or PEs. An epoch counts when every rank or PE of
    /// the communicator made it (its size is the group's) and one of them
    /// is its root; the group is left out when they made different numbers
    /// of calls.
    fn rooted_group(&mut self, kind: u16, within: u16, members: &[RootedMember]) {
        let n = members.len();
        let epochs = members.first().map_or(0, |m| m.1.len());
        if n < 2 || epochs == 0 || members.iter().any(|m| m.1.len() != epochs) {
            return;
        }
        let one_to_all = rooted_kinds()[kind as usize] == ONE_TO_ALL;
        let pattern = if one_to_all {
            "late_broadcast"
        } else {
            "early_reduce"
        };
        let mut at: HashMap<u32, usize> = HashMap::default();
        let mut site_of = |sites: &mut Vec<Site>, site: u32| {
            *at.entry(site).or_insert_with(|| {
                sites.push(Site::new(pattern, kind, site, within));
                sites.len() - 1
            })
        };
        for k in 0..epochs {
            let mut roots = (0..n).filter(|&m| members[m].1[k].3);
            let (Some(r), None) = (roots.next(), roots.next()) else {
                continue;
            };
            if members.iter().any(|m| m.1[k].4 != n as u64) {
                continue;
            }
            let (root_stream, (root_from, root_to, root_site, ..)) =
                (members[r].0, members[r].1[k]);
            if one_to_all {
                // Each of the others waits from its arrival to the root's.
                for (m, (stream, calls)) in members.iter().enumerate() {
                    if m == r {
                        continue;
                    }
                    let (from, to, site, ..) = calls[k];
                    let w = root_from.min(to).saturating_sub(from);
                    let i = site_of(&mut self.sites, site);
                    self.sites[i].add_call(*stream, w, root_stream, root_site);
                }
            } else {
                // The root waits from its arrival to the last of the others'.
                let Some(last) = (0..n)
                    .filter(|&m| m != r)
                    .max_by_key(|&m| members[m].1[k].0)
                else {
                    continue;
                };
                let (last_from, _, last_site, ..) = members[last].1[k];
                let w = last_from.min(root_to).saturating_sub(root_from);
                let i = site_of(&mut self.sites, root_site);
                self.sites[i].add_call(root_stream, w, members[last].0, last_site);
            }
        }
    }

    fn rank_name(&self, ids: &[Identity], stream: usize) -> String {
        let name = &ids[stream].name;
        match self.ranks.get(stream).copied().flatten() {
            Some(r) if !name.starts_with("rank ") => format!("rank {r} ({name})"),
            _ => name.clone(),
        }
    }

    fn site(&self, ids: &[Identity], callsites: &[Callsite], s: &Site) -> WaitSite {
        let their_time: u64 = s
            .threads
            .iter()
            .map(|&i| ids[i].active_span)
            .sum::<u64>()
            .max(1);
        let mut partners: Vec<(usize, u64)> = s.partners.iter().map(|(&k, &v)| (k, v)).collect();
        partners.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        WaitSite {
            pattern: s.pattern.to_string(),
            call: kind_name(s.kind).to_string(),
            within: (s.within != 0).then(|| kind_name(s.within).to_string()),
            location: location_in(callsites, Some(s.site)),
            calls: s.calls,
            waits: s.waits,
            wait_ns: s.wait_ns,
            max_ns: s.max_ns,
            threads: s.threads.iter().map(|&i| ids[i].name.clone()).collect(),
            share: s.wait_ns as f64 / their_time as f64,
            partners: partners
                .iter()
                .map(|&(p, _)| self.rank_name(ids, p))
                .collect(),
        }
    }

    /// A `late_sender` or `late_receiver` finding for a line, when its waiting is worth it.
    fn finding(
        &self,
        ids: &[Identity],
        callsites: &[Callsite],
        s: &Site,
        total_time: u64,
    ) -> Option<Finding> {
        if !matches!(
            s.pattern,
            "late_sender" | "late_receiver" | "late_broadcast" | "early_reduce"
        ) {
            return None;
        }
        let w = self.site(ids, callsites, s);
        if w.share < WAIT_SHARE || w.wait_ns == 0 {
            return None;
        }
        let rooted = matches!(s.pattern, "late_broadcast" | "early_reduce");
        // As for the all-to-all collectives: a little waiting at each call
        // is the collective's own latency.
        if rooted && (w.wait_ns as f64) < COLLECTIVE_MIN_WAIT_NS * w.calls.max(1) as f64 {
            return None;
        }
        let waiting = match s.threads.as_slice() {
            [one] => format!(
                "{} waits {:.1}% of its time",
                self.rank_name(ids, *one),
                100.0 * w.share
            ),
            many => format!(
                "{} threads wait {:.1}% of their time",
                many.len(),
                100.0 * w.share
            ),
        };
        let partner = match w.partners.as_slice() {
            [] => "?".to_string(),
            [one] => one.clone(),
            [first, rest @ ..] => format!("{first} (and {} others)", rest.len()),
        };
        let partner_site = s
            .partner_sites
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .and_then(|(&site, _)| location_in(callsites, Some(site)))
            .map(|l| format!(" at {}:{}", l.file, l.line))
            .unwrap_or_default();
        let call = w.call.trim_start_matches("GASP_");
        let shmem = call.starts_with("SHMEM_");
        let call = if shmem {
            call.to_lowercase()
        } else {
            call_name(call)
        };
        let call = match s.within {
            k if k != 0 && rooted => format!("{call} (within {})", kind_name(k)),
            _ => call,
        };
        // MPI_Bcast -> MPI_Ibcast
        let nonblocking = format!(
            "MPI_I{}",
            kind_name(s.kind)
                .trim_start_matches("GASP_MPI_")
                .to_lowercase()
        );
        let (what, advice) = if s.pattern == "late_broadcast" {
            (
                format!(
                    "for the root, {partner}, which arrives late{partner_site} (late broadcast)"
                ),
                if shmem {
                    "Balance the work so that the root PE reaches the broadcast sooner, or let each PE \
                     get the data from the root (shmem_get) when it needs it."
                        .to_string()
                } else {
                    format!(
                        "Balance the work so that the root reaches the call sooner, or overlap the wait \
                         with work on the others ({nonblocking}, then MPI_Wait when the data is needed)."
                    )
                },
            )
        } else if s.pattern == "early_reduce" {
            (
                format!("as the root, for the others, {partner} arriving last{partner_site} (early reduce)"),
                format!(
                    "Balance the work before the call so that the others reach it sooner, or give the root \
                     other work meanwhile ({nonblocking}, then MPI_Wait when the result is needed)."
                ),
            )
        } else if s.pattern == "late_sender" {
            (
                format!("for messages that {partner} sends late{partner_site}"),
                "Post the receive early (MPI_Irecv) and do other work until it is needed, move the send earlier \
                 on the sender, or balance the work so that the sender reaches its send sooner."
                    .to_string(),
            )
        } else {
            (
                format!("until {partner} posts the matching receive{partner_site}"),
                "Post the receive earlier (MPI_Irecv before the receiver's computation), send without waiting \
                 (MPI_Isend, then MPI_Wait after other work; MPI_Send rather than MPI_Ssend), or balance the \
                 work so that the receiver gets there sooner."
                    .to_string(),
            )
        };
        Some(Finding {
            // The root sends late, or the others send late to the root.
            kind: if rooted { "late_sender" } else { s.pattern }.to_string(),
            severity: s.wait_ns as f64 / total_time.max(1) as f64,
            threads: w.threads.clone(),
            location: w.location.clone(),
            message: format!(
                "{waiting} ({:.3} ms, longest {:.3} ms) in {} of {} {call} here {what}. {advice}",
                w.wait_ns as f64 / 1e6,
                w.max_ns as f64 / 1e6,
                w.waits,
                w.calls,
            ),
        })
    }

    /// `barrier_wait` findings for fence groups whose waiting is worth it.
    fn fence_findings(
        &self,
        ids: &[Identity],
        callsites: &[Callsite],
        total_time: u64,
    ) -> Vec<Finding> {
        let mut out = Vec::new();
        for g in &self.fences {
            let (n, epochs) = (g.members.len(), g.epochs);
            let (wait, last_count, caused) = (&g.wait, &g.last_count, &g.caused);
            let waited: u64 = wait.iter().sum();
            let their_time: u64 = g
                .members
                .iter()
                .map(|&m| ids[m].active_span)
                .sum::<u64>()
                .max(1);
            let share = waited as f64 / their_time as f64;
            // A collective's own latency makes its callers arrive apart by a
            // little at each call: waiting is a finding when each call waits,
            // on average, more than that.
            let per_call = waited as f64 / (epochs * n) as f64;
            let noise = matches!(g.what, Synchronizing::Collective(..))
                && per_call < COLLECTIVE_MIN_WAIT_NS;
            if share < WAIT_SHARE || waited == 0 || noise {
                continue;
            }
            let worst = (0..n).max_by_key(|&m| wait[m]).unwrap_or(0);
            let late = (0..n).max_by_key(|&m| caused[m]).unwrap_or(0);
            // The fence line where the worst waiter waits most.
            let line = (g.lines[worst].iter())
                .map(|(&site, &w)| (site, w))
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                .map(|l| l.0);
            let (calls, advice, who) = match &g.what {
                Synchronizing::Window(w) => (
                    format!("MPI_Win_fence of window {w}"),
                    "Balance the work between fences, or synchronize only the ranks that communicate \
                     (MPI_Win_post/start/complete/wait, or passive target: MPI_Win_lock_all and MPI_Win_flush)."
                        .to_string(),
                    "ranks",
                ),
                Synchronizing::Collective(k, _) if kind_name(*k).starts_with("GASP_SHMEM_") => {
                    let call = kind_name(*k).trim_start_matches("GASP_").to_lowercase();
                    (
                        call.clone(),
                        format!(
                            "No PE leaves {call} before the last arrives: balance the work before it, or call it \
                             less often (several values in one call)."
                        ),
                        "PEs",
                    )
                }
                Synchronizing::Collective(k, within) => {
                    let call = call_name(kind_name(*k).trim_start_matches("GASP_"));
                    let call = match within {
                        0 => call,
                        w => format!("{call} (within {})", kind_name(*w)),
                    };
                    // MPI_Allreduce -> MPI_Iallreduce
                    let nonblocking = format!(
                        "MPI_I{}",
                        call.trim_start_matches("MPI_").to_lowercase()
                    );
                    (
                        call.clone(),
                        format!(
                            "No rank leaves {call} before the last arrives: balance the work before it, or overlap \
                             the wait with work ({nonblocking}, then MPI_Wait when the result is needed)."
                        ),
                        "ranks",
                    )
                }
            };
            out.push(Finding {
                kind: "barrier_wait".into(),
                severity: waited as f64 / total_time.max(1) as f64,
                threads: g.members.iter().map(|&m| ids[m].name.clone()).collect(),
                location: location_in(callsites, line),
                message: format!(
                    "{:.1}% of the time of these {n} {who} is spent in {epochs} {calls} waiting \
                     for the last to arrive: {} arrives last at {} of them, making the others wait {:.3} ms; {} waits \
                     most ({:.3} ms). {advice}",
                    100.0 * share,
                    self.rank_name(ids, g.members[late]),
                    last_count[late],
                    caused[late] as f64 / 1e6,
                    self.rank_name(ids, g.members[worst]),
                    wait[worst] as f64 / 1e6
                ),
            });
        }
        out
    }
}

/// `MPI_RECV` -> `MPI_Recv`.
fn call_name(upper: &str) -> String {
    let mut out = String::new();
    for (i, part) in upper.split('_').enumerate() {
        match i {
            0 => out.push_str(part),
            1 => {
                out.push('_');
                let mut c = part.chars();
                if let Some(f) = c.next() {
                    out.push(f);
                    out.push_str(&c.as_str().to_lowercase());
                }
            }
            _ => {
                out.push('_');
                out.push_str(&part.to_lowercase());
            }
        }
    }
    out
}

/// Completes a request: a receive learns its actual source and tag from the
/// status, when there is one; the waiting call becomes the blocking call.
fn complete(
    msgs: &mut [Sent],
    recvs: &mut [Posted],
    p: Pending,
    call: Option<u32>,
    status: (Option<i64>, Option<i64>),
) {
    match p {
        Pending::Send(m, may_block) => {
            if may_block {
                msgs[m].call = call.into();
            }
        }
        Pending::Recv(r) => {
            let rv = &mut recvs[r];
            rv.call = call.into();
            if rv.src < 0 {
                if let Some(s) = status.0 {
                    // A wildcard resolved, or MPI_PROC_NULL (negative: left out).
                    rv.src = if s >= 0 { int32(s) } else { -2 };
                }
            }
            if rv.tag < 0 {
                if let Some(tg) = status.1.filter(|&tg| tg >= 0) {
                    rv.tag = int32(tg);
                }
            }
        }
    }
}

impl Site {
    fn new(pattern: &'static str, kind: u16, site: u32, within: u16) -> Site {
        Site {
            pattern,
            kind,
            site,
            within,
            calls: 0,
            waits: 0,
            wait_ns: 0,
            max_ns: 0,
            threads: Vec::new(),
            partners: HashMap::default(),
            partner_sites: HashMap::default(),
            pending: None,
        }
    }

    fn add(&mut self, thread: usize, wait: u64) {
        self.calls += 1;
        if wait > 0 {
            self.waits += 1;
        }
        self.wait_ns += wait;
        self.max_ns = self.max_ns.max(wait);
        if wait > 0 && !self.threads.contains(&thread) {
            self.threads.push(thread);
        }
    }

    /// A stream's time in synchronization calls at this line.
    fn add_many(&mut self, thread: usize, st: &SyncTime) {
        self.calls += st.calls;
        self.waits += st.waits;
        self.wait_ns += st.wait_ns;
        self.max_ns = self.max_ns.max(st.max_ns);
        if st.waits > 0 && !self.threads.contains(&thread) {
            self.threads.push(thread);
        }
    }

    fn add_call(&mut self, thread: usize, wait: u64, partner: usize, partner_site: u32) {
        self.add(thread, wait);
        if wait > 0 {
            match &mut self.pending {
                Some((p, ps, w)) if *p == partner && *ps == partner_site => *w += wait,
                _ => {
                    self.settle();
                    self.pending = Some((partner, partner_site, wait));
                }
            }
        }
    }

    /// Adds the waits not yet added to `partners` and `partner_sites`.
    fn settle(&mut self) {
        if let Some((partner, partner_site, wait)) = self.pending.take() {
            *self.partners.entry(partner).or_default() += wait;
            *self.partner_sites.entry(partner_site).or_default() += wait;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A START/END pair: kind, START and END times, callsite, arguments by name.
    type Call<'a> = (&'a str, u64, u64, u32, &'a [(&'a str, i64)]);

    /// A stream of `process` made of `calls`, each argument given to both
    /// phases that have it.
    fn stream(process: &str, stream: u32, model: u32, calls: &[Call]) -> Stream {
        let mut s = Stream::empty(process, stream, model, 8);
        for &(name, from, to, callsite, args) in calls {
            let kind = kinds::kind_by_name(name).unwrap().id;
            let args: Vec<(&str, u64)> = args.iter().map(|&(n, v)| (n, v as u64)).collect();
            for (phase, t_ns) in [(0u8, from), (1, to)] {
                s.push_named(t_ns, kind, phase, callsite, &args);
            }
        }
        s
    }

    /// Two ranks: a late send, a late receive of an `MPI_Isend`, a fence
    /// the first rank waits at, and `MPI_Win_flush` on three threads.
    fn trace() -> Trace {
        let init = |rank| ("GASP_MPI_INIT", 0, 10, 0, [("rank", rank), ("size", 2)]);
        let (i0, i1) = (init(0), init(1));
        let r0: &[Call] = &[
            (i0.0, i0.1, i0.2, i0.3, &i0.4),
            ("GASP_MPI_WIN_CREATE", 20, 30, 0, &[("win", 7)]),
            ("GASP_MPI_SEND", 500, 510, 1, &[("peer", 1), ("tag", 5)]),
            ("GASP_MPI_WIN_FENCE", 1000, 1900, 3, &[("win", 7)]),
            ("GASP_MPI_WIN_FLUSH", 2000, 2100, 4, &[]),
            (
                "GASP_MPI_ISEND",
                2200,
                2210,
                0,
                &[("peer", 1), ("tag", 6), ("request", 42)],
            ),
            ("GASP_MPI_WAIT", 2300, 2900, 5, &[("request", 42)]),
            ("GASP_MPI_FINALIZE", 3000, 3010, 0, &[]),
        ];
        let r1: &[Call] = &[
            (i1.0, i1.1, i1.2, i1.3, &i1.4),
            ("GASP_MPI_WIN_CREATE", 20, 30, 0, &[("win", 9)]),
            ("GASP_MPI_RECV", 100, 600, 2, &[("peer", 0), ("tag", 5)]),
            ("GASP_MPI_WIN_FENCE", 1800, 1900, 3, &[("win", 9)]),
            (
                "GASP_MPI_IRECV",
                2600,
                2605,
                0,
                &[("peer", 0), ("tag", 6), ("request", 43)],
            ),
            ("GASP_MPI_WAIT", 2610, 2620, 6, &[("request", 43)]),
            ("GASP_MPI_FINALIZE", 3000, 3010, 0, &[]),
        ];
        let helper: &[Call] = &[
            ("GASP_MPI_WIN_FLUSH", 100, 150, 4, &[]),
            ("GASP_MPI_WIN_FLUSH", 200, 200, 4, &[]),
        ];
        let mut t = Trace {
            streams: vec![
                stream("h-1", 0, 3, r0),
                stream("h-2", 0, 3, r1),
                stream("h-2", 1, 2, helper),
            ],
            ..Trace::default()
        };
        t.callsites = callsites("a.c", 7);
        t
    }

    /// Callsites at lines 0 to `n - 1` of `file`.
    fn callsites(file: &str, n: u32) -> Vec<Callsite> {
        (0..n)
            .map(|line| Callsite {
                file: Some(file.into()),
                line,
                col: 0,
            })
            .collect()
    }

    /// A line's waits per partner and partner's line, the last ones kept
    /// apart as they come: the same sums as adding each wait at once,
    /// partners alternating, repeating, and waiting no time included.
    #[test]
    fn waits_per_partner_are_the_sums_of_each_call() {
        let mut site = Site::new("collective", 1, 2, 0);
        let (mut partners, mut lines): (HashMap<usize, u64>, HashMap<u32, u64>) =
            Default::default();
        let mut seed = 3u64;
        for i in 0..500u64 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let partner = if i % 50 < 25 {
                1
            } else {
                (seed >> 40) as usize % 3
            };
            let line = (seed >> 50) as u32 % 2 + 10 * partner as u32;
            let wait = (seed >> 20) % 4 * 100;
            site.add_call(partner, wait, partner, line);
            if wait > 0 {
                *partners.entry(partner).or_default() += wait;
                *lines.entry(line).or_default() += wait;
            }
        }
        site.settle();
        assert_eq!(site.partners, partners);
        assert_eq!(site.partner_sites, lines);
        assert!(partners.len() == 3 && lines.len() == 6);
    }

    #[test]
    fn parts_made_apart_merge_into_the_analysis() {
        let t = trace();
        let ids: Vec<Identity> = t.streams.iter().map(Identity::of).collect();
        let a = Analysis::run(&t);
        let waits = wait_sites(&a, &ids, &t.callsites);
        let got: Vec<(&str, u32, u64, u64)> = waits
            .iter()
            .map(|w| {
                (
                    w.pattern.as_str(),
                    w.location.as_ref().unwrap().line,
                    w.calls,
                    w.wait_ns,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("fence", 3, 2, 800),
                ("late_sender", 2, 1, 400),
                ("late_receiver", 5, 1, 300),
                ("synchronization", 4, 3, 150),
                ("late_receiver", 1, 1, 0),
                ("late_sender", 6, 1, 0),
            ]
        );
        assert_eq!(waits[1].partners, ["rank 0 (h-1 stream 0)"]);
        assert_eq!(waits[3].threads, ["rank 0 (h-1 stream 0)", "h-2 stream 1"]);
        assert_eq!(waits[3].max_ns, 100);

        // Each process's streams apart, from a trace of that process alone,
        // through serde.
        let mut parts: Vec<Part> = Vec::new();
        for p in ["h-1", "h-2"] {
            let alone = Trace {
                streams: t
                    .streams
                    .iter()
                    .filter(|s| s.process == p)
                    .cloned()
                    .collect(),
                ..Trace::default()
            };
            let ctx = Context::of(&alone);
            for s in &alone.streams {
                let part = Part::of(s, &ctx, &alone.objects);
                let text = serde_json::to_string(&part).unwrap();
                parts.push(serde_json::from_str(&text).unwrap());
            }
        }
        let b = merge(&parts.iter().collect::<Vec<_>>());
        let json = |w: &[WaitSite]| serde_json::to_string(w).unwrap();
        assert_eq!(json(&wait_sites(&b, &ids, &t.callsites)), json(&waits));
        let findings = |a: &Analysis| {
            serde_json::to_string(&wait_findings(a, &ids, &t.callsites, 10_000)).unwrap()
        };
        assert_eq!(findings(&b), findings(&a));
        assert!(findings(&a).contains("late_sender"));
        assert!(findings(&a).contains("barrier_wait"));
    }

    /// The matching of messages to receives finds, for every call, what a
    /// plain reading finds: each receive, in the order posted at its rank,
    /// takes the earliest sent of the messages still unmatched that it can
    /// take (by source, destination and tag where as early, then by stream
    /// and order). With receives from any source or of any tag, many equal
    /// times, a rank of two streams, sends and receives without a call or
    /// sharing one, and messages nobody receives.
    #[test]
    fn messages_match_as_a_plain_reading_matches_them() {
        // A call's largest late-sender and late-receiver waits, if any.
        type Waits = [Option<(u64, Ref)>; 2];
        let mut next = crate::testing::below(5);
        for round in 0..40 {
            // Streams of ranks 0, 1, 2 and 2 again.
            let ranks = [0i64, 1, 2, 2];
            let mut parts: Vec<Part> = ranks
                .iter()
                .map(|&r| Part {
                    rank: Some(r),
                    ..Part::default()
                })
                .collect();
            for p in parts.iter_mut() {
                for _ in 0..(20 + next(30)) {
                    let (from, to) = (10 * next(40), 10 * next(40));
                    let (from, to) = (from.min(to), from.max(to) + 5);
                    // No call, the call before (one waiting for several
                    // requests), or a call of its own.
                    let call = match next(4) {
                        0 => None,
                        1 if !p.calls.is_empty() => Some(p.calls.len() as u32 - 1),
                        _ => {
                            p.calls.push(Blocking {
                                kind: 0,
                                site: 0,
                                from,
                                to,
                            });
                            Some(p.calls.len() as u32 - 1)
                        }
                    };
                    let site = next(5) as u32;
                    if next(2) == 0 {
                        p.msgs.push(Sent {
                            dst: next(3) as i32,
                            tag: next(3) as i32,
                            start: from + 10 * next(2),
                            site,
                            call: call.into(),
                        });
                    } else {
                        p.recvs.push(Posted {
                            src: next(4) as i32 - 1,
                            tag: next(4) as i32 - 1,
                            post: from + 10 * next(2),
                            site,
                            call: call.into(),
                        });
                    }
                }
            }
            let refs: Vec<&Part> = parts.iter().collect();
            let got: Vec<Vec<_>> = matched(&refs)
                .iter()
                .map(|calls| calls.iter().map(|w| w.get()).collect())
                .collect();
            // The plain reading.
            let mut want: Vec<Vec<Waits>> = parts
                .iter()
                .map(|p| vec![[None; 2]; p.calls.len()])
                .collect();
            let mut add = |c: Ref, side: usize, w: u64, at: Ref| {
                let e = want[c.0 as usize][c.1 as usize][side].get_or_insert((0, at));
                if w > e.0 {
                    *e = (w, at);
                }
            };
            let mut recvs: Vec<Ref> = Vec::new();
            let mut msgs: Vec<Ref> = Vec::new();
            for (si, p) in parts.iter().enumerate() {
                recvs.extend((0..p.recvs.len() as u32).map(|i| (si as u32, i)));
                msgs.extend((0..p.msgs.len() as u32).map(|i| (si as u32, i)));
            }
            let sent = |m: Ref| &parts[m.0 as usize].msgs[m.1 as usize];
            let posted = |r: Ref| &parts[r.0 as usize].recvs[r.1 as usize];
            let rank = |x: Ref| ranks[x.0 as usize];
            recvs.retain(|&r| posted(r).src >= -1);
            recvs.sort_by_key(|&r| (rank(r), posted(r).post, r.0, r.1));
            let mut taken = vec![false; msgs.len()];
            let mut matches = 0;
            for r in recvs {
                let rv = posted(r);
                let best = (0..msgs.len())
                    .filter(|&j| !taken[j])
                    .filter(|&j| {
                        let (m, s) = (msgs[j], sent(msgs[j]));
                        i64::from(s.dst) == rank(r)
                            && (rv.src < 0 || i64::from(rv.src) == rank(m))
                            && (rv.tag < 0 || rv.tag == s.tag)
                    })
                    .min_by_key(|&j| {
                        let (m, s) = (msgs[j], sent(msgs[j]));
                        (s.start, (rank(m), s.dst, s.tag), m.0, m.1)
                    });
                let Some(j) = best else { continue };
                taken[j] = true;
                matches += 1;
                let (m, s) = (msgs[j], sent(msgs[j]));
                if let Some(c) = rv.call.get() {
                    let cl = &parts[r.0 as usize].calls[c as usize];
                    add((r.0, c), 0, s.start.min(cl.to).saturating_sub(cl.from), m);
                }
                if let Some(c) = s.call.get() {
                    let cl = &parts[m.0 as usize].calls[c as usize];
                    let w = if rv.post > cl.from && cl.to >= rv.post {
                        rv.post - cl.from
                    } else {
                        0
                    };
                    add((m.0, c), 1, w, r);
                }
            }
            assert!(matches > 10, "round {round}: {matches} matches");
            // One wait per call: the larger kind's, a late sender's when
            // as large.
            let want: Vec<Vec<_>> = want
                .iter()
                .map(|calls| {
                    calls
                        .iter()
                        .map(|&[s, r]| match (s, r) {
                            (Some(s), Some(r)) if s.0 >= r.0 => Some((s.0, s.1, false)),
                            (Some(s), None) => Some((s.0, s.1, false)),
                            (_, Some(r)) => Some((r.0, r.1, true)),
                            (None, None) => None,
                        })
                        .collect()
                })
                .collect();
            assert_eq!(got, want, "round {round}");
        }
    }

    /// A message or receive naming a call its stream does not have (a
    /// damaged summary from another rank) is matched without its call,
    /// not a panic.
    #[test]
    fn calls_past_the_streams_are_left_out() {
        let blocking = |from, to| Blocking {
            kind: 0,
            site: 0,
            from,
            to,
        };
        let sender = Part {
            rank: Some(0),
            calls: vec![blocking(0, 50)],
            msgs: vec![
                Sent {
                    dst: 1,
                    tag: 0,
                    start: 10,
                    site: 0,
                    call: Some(7).into(),
                },
                Sent {
                    dst: 1,
                    tag: 0,
                    start: 20,
                    site: 0,
                    call: Some(0).into(),
                },
            ],
            ..Part::default()
        };
        let receiver = Part {
            rank: Some(1),
            calls: vec![blocking(0, 100)],
            recvs: vec![
                Posted {
                    src: 0,
                    tag: 0,
                    post: 0,
                    site: 0,
                    call: Some(0).into(),
                },
                Posted {
                    src: 0,
                    tag: 0,
                    post: 30,
                    site: 0,
                    call: Some(9).into(),
                },
            ],
            ..Part::default()
        };
        let waits = matched(&[&sender, &receiver]);
        // The receiver's call waited for the first message; the sender's for
        // the second receive, posted at 30.
        assert_eq!(waits[1][0].get(), Some((10, (0, 0), false)));
        assert_eq!(waits[0][0].get(), Some((30, (1, 1), true)));
        assert_eq!(waits.iter().map(Vec::len).collect::<Vec<_>>(), [1, 1]);
    }

    #[test]
    fn rooted_collectives_wait_for_the_root_or_at_it() {
        // Three ranks: rank 0, the root, comes late to two broadcasts and
        // early to a reduction, where rank 2 comes last; a broadcast on a
        // communicator of two ranks is left out.
        let init = |rank| ("GASP_MPI_INIT", 0, 10, 0, [("rank", rank), ("size", 3)]);
        let bcast = [("root", 0), ("comm_size", 3), ("nbytes", 8)];
        let reduce = [("root", 0), ("comm_size", 3), ("nbytes", 8), ("op", 1)];
        let pair = [("root", 0), ("comm_size", 2), ("nbytes", 8)];
        // Times in units of 100 ns (the calls wait more than the
        // collectives' latency).
        let inits = [init(0), init(1), init(2)];
        let mut t = Trace::default();
        for (rank, b, (r0, r1)) in [
            (0, [(1000, 1010), (4000, 4010)], (2000, 2900)),
            (1, [(100, 1020), (3000, 4020)], (2100, 2110)),
            (2, [(500, 1030), (3500, 4030)], (2800, 2810)),
        ] {
            let i = &inits[rank];
            let mut calls: Vec<Call> = vec![(i.0, i.1, i.2, i.3, &i.4)];
            for (from, to) in b {
                calls.push(("GASP_MPI_BCAST", 100 * from, 100 * to, 3, &bcast));
            }
            calls.push(("GASP_MPI_REDUCE", 100 * r0, 100 * r1, 4, &reduce));
            if rank < 2 {
                let from = 100 * (5000 + 100 * rank as u64);
                calls.push(("GASP_MPI_BCAST", from, 600_000, 5, &pair));
            }
            t.streams.push(stream(&format!("h-{rank}"), 0, 3, &calls));
        }
        t.callsites = callsites("r.c", 6);
        let ids: Vec<Identity> = t.streams.iter().map(Identity::of).collect();
        let a = Analysis::run(&t);
        let waits = wait_sites(&a, &ids, &t.callsites);
        let got: Vec<(&str, u32, u64, u64, u64)> = waits
            .iter()
            .map(|w| {
                (
                    w.pattern.as_str(),
                    w.location.as_ref().unwrap().line,
                    w.calls,
                    w.waits,
                    w.wait_ns,
                )
            })
            .collect();
        // Broadcasts: rank 1 waits 900 then 1000, rank 2 500 then 500;
        // the reduction: the root waits from 2000 to rank 2's 2800.
        assert_eq!(
            got,
            [
                ("late_broadcast", 3, 4, 4, 290_000),
                ("early_reduce", 4, 1, 1, 80_000)
            ]
        );
        assert_eq!(waits[0].partners, ["rank 0 (h-0 stream 0)"]);
        assert_eq!(waits[1].partners, ["rank 2 (h-2 stream 0)"]);
        assert_eq!(waits[1].threads, ["rank 0 (h-0 stream 0)"]);
        let found = wait_findings(&a, &ids, &t.callsites, 1_000_000);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|f| f.kind == "late_sender"));
        let at = |line: u32| {
            found
                .iter()
                .find(|f| f.location.as_ref().unwrap().line == line)
                .unwrap()
        };
        let m = &at(3).message;
        assert!(
            m.contains("MPI_Bcast")
                && m.contains("for the root, rank 0")
                && m.contains("MPI_Ibcast"),
            "{m}"
        );
        let m = &at(4).message;
        assert!(
            m.contains("MPI_Reduce") && m.contains("rank 2 (h-2 stream 0) arriving last"),
            "{m}"
        );
    }
}
