//! Shared objects and their blocks, epoch by epoch: SVMview's page analyses
//! carried from DSM pages to the blocks of PGAS shared objects.
//!
//! Every one-sided access that names a shared object (an OpenSHMEM put, get
//! or atomic on a symmetric allocation; an MPI put, get or accumulate on a
//! window; a coarray put or get) is an access by its initiating thread to the
//! bytes `[offset, offset + n)` of that object's part on the target (its
//! *home*). Objects are cut into blocks of `block_size` bytes (a page by
//! default) and time into *epochs*, the intervals between a thread's
//! barriers. For each block and epoch the analysis knows who read and who
//! wrote it, which gives:
//!
//! - **false sharing**: a block written by two or more threads in the same
//!   epoch at non-overlapping offsets (the writers-per-block counts are
//!   SVMview's false-sharing counters);
//! - **producer-consumer**: a block written in one epoch and read by many
//!   other threads in a later one, before it is written again: every reader
//!   fetches the same data from one home, where a broadcast would send it
//!   once.
//!
//! A local store does not go through the runtime and is not seen: a program
//! that writes its own part with plain stores shows no writer for it.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use gaspard_format::kinds::{self, Class};
use serde::{Deserialize, Serialize};

use crate::findings::{barriers, location_in, Finding, Location};
use crate::intervals::{intervals, with_events, Which};
use crate::matrix::rank;
use crate::objects::Objects;
use crate::summary::Identity;
use crate::trace::{Callsite, Stream, Trace};

/// Default block size: a page.
pub const DEFAULT_BLOCK_SIZE: u64 = 4096;

/// One stream's part of the block analysis: its one-sided accesses to shared
/// objects, in the order it made them, in its process's model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// The objects it accesses, first met first.
    pub objects: Vec<Object>,
    /// Its accesses, first made first. An access made again (same object,
    /// home, bytes, direction, epoch and callsite) is counted in the first.
    pub accesses: Vec<Access>,
}

/// A shared object as one stream sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Object {
    /// `SHMEM`, `MPI` or `CAF`.
    pub model: String,
    /// Order among its process's shared objects (the same on every process).
    pub ordinal: u32,
    /// The name its first access gives.
    pub name: String,
    /// Bytes of its largest part the stream's accesses give.
    pub size: u64,
}

/// Accesses of one stream to the same bytes of a shared object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Access {
    /// Object index in [`Part::objects`].
    pub object: u32,
    /// The rank, PE or image (from 0) holding the bytes.
    pub home: u32,
    /// First byte in the home's part.
    pub offset: u64,
    /// Bytes, at least one.
    pub len: u64,
    /// Whether it writes.
    pub write: bool,
    /// Whether it reads.
    pub read: bool,
    /// Epoch (the stream's barriers and fences passed before it).
    pub epoch: u32,
    /// Callsite of its first one.
    pub callsite: u32,
    /// How many times it was made.
    pub count: u64,
    /// Time in them, ns.
    pub time_ns: u64,
}

/// A shared object, named by the line that allocated it, with its traffic.
#[derive(Debug, Clone, Serialize)]
pub struct ObjectInfo {
    /// The allocating source line (or the object's order).
    pub name: String,
    /// `SHMEM`, `MPI` or `CAF`.
    pub model: String,
    /// Bytes of its largest part.
    pub size: u64,
    /// Ranks (PEs, images from 0) of the matrices.
    pub ranks: usize,
    /// Accesses from row (initiator's rank) to column (home): operations.
    pub ops: Vec<Vec<u64>>,
    /// Bytes.
    pub bytes: Vec<Vec<u64>>,
    /// Time in the accesses, ns.
    pub time_ns: Vec<Vec<u64>>,
    /// Accesses to the initiator's own part (the diagonal).
    pub local_ops: u64,
    /// Accesses to another's part.
    pub remote_ops: u64,
}

/// Who read and who wrote one block in one epoch.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BlockEpoch {
    /// Object index in [`Blocks::objects`].
    pub object: u32,
    /// The rank, PE or image (from 0) holding the block.
    pub home: u32,
    /// Block number in the home's part.
    pub block: u64,
    /// Epoch (barriers passed before the accesses).
    pub epoch: u32,
    /// Threads (indices in [`Blocks::threads`]) that read it.
    pub readers: Vec<usize>,
    /// Threads that wrote it.
    pub writers: Vec<usize>,
}

/// A block written by several threads at disjoint offsets in the same epochs.
#[derive(Debug, Clone, Serialize)]
pub struct SharedBlock {
    /// Object index.
    pub object: u32,
    /// Home rank.
    pub home: u32,
    /// Block number.
    pub block: u64,
    /// Epochs in which it was falsely shared.
    pub epochs: u32,
    /// Write accesses per thread in those epochs (a row of the writers-per-block matrix).
    pub writes: Vec<u64>,
    /// Time in those writes, ns.
    pub time_ns: u64,
    /// Where the writes come from.
    pub locations: Vec<Location>,
}

/// A block produced by some threads and consumed by many others.
#[derive(Debug, Clone, Serialize)]
pub struct ProducedBlock {
    /// Object index.
    pub object: u32,
    /// Home rank.
    pub home: u32,
    /// Block number.
    pub block: u64,
    /// Produced by its owner with stores the runtime does not see (no
    /// visible write, read by many others all of a sudden).
    pub by_owner: bool,
    /// Times it was produced then read by many.
    pub times: u32,
    /// Most readers in one epoch.
    pub readers: usize,
    /// Time in the consuming reads, ns.
    pub time_ns: u64,
    /// Where the consuming reads come from.
    pub locations: Vec<Location>,
}

/// The block analysis of a trace.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Blocks {
    /// Bytes per block.
    pub block_size: u64,
    /// Thread names, as findings name them.
    pub threads: Vec<String>,
    /// Shared objects accessed.
    pub objects: Vec<ObjectInfo>,
    /// Accesses seen.
    pub accesses: u64,
    /// Per block and epoch, readers and writers (blocks with accesses only).
    #[serde(skip)]
    pub epochs: Vec<BlockEpoch>,
    /// Falsely shared blocks, most epochs first.
    pub false_sharing: Vec<SharedBlock>,
    /// Produced-then-consumed blocks, most times first.
    pub producer_consumer: Vec<ProducedBlock>,
}

/// The kinds that read or write a shared object, and where its address is.
#[derive(Clone, Copy)]
enum Target {
    /// An address argument in a symmetric allocation.
    Addr(&'static str),
    /// An MPI window and displacement.
    Window,
    /// A coarray and offset.
    Coarray,
}

fn access_kind(name: &str) -> Option<(bool, bool, Target)> {
    if let Some(rest) = name.strip_prefix("GASP_SHMEM_") {
        if rest.contains("ATOMIC") {
            let fetch = rest.contains("FETCH") || rest.contains("SWAP");
            return Some((
                !rest.ends_with("ATOMIC_FETCH"),
                fetch,
                Target::Addr("target"),
            ));
        }
        if rest.contains("PUT") || rest.ends_with("_P") {
            return Some((true, false, Target::Addr("dest")));
        }
        if rest.contains("GET") || rest.ends_with("_G") {
            return Some((false, true, Target::Addr("source")));
        }
        return None;
    }
    match name {
        "GASP_MPI_PUT" | "GASP_MPI_RPUT" | "GASP_MPI_ACCUMULATE" | "GASP_MPI_RACCUMULATE" => {
            Some((true, false, Target::Window))
        }
        "GASP_MPI_GET" | "GASP_MPI_RGET" => Some((false, true, Target::Window)),
        "GASP_MPI_GET_ACCUMULATE"
        | "GASP_MPI_RGET_ACCUMULATE"
        | "GASP_MPI_FETCH_AND_OP"
        | "GASP_MPI_COMPARE_AND_SWAP" => Some((true, true, Target::Window)),
        "GASP_CAF_PUT" => Some((true, false, Target::Coarray)),
        "GASP_CAF_GET" => Some((false, true, Target::Coarray)),
        _ => None,
    }
}

/// A kind's access: whether it is a coarray kind, whether it writes, whether
/// it reads, and where its target is.
type KindAccess = (bool, bool, bool, Target);

/// By kind number, for the communication kinds that access shared data:
/// whether the kind is a coarray one, and its [`access_kind`] (found once;
/// the names are compared for every interval otherwise).
fn accesses() -> &'static [Option<KindAccess>] {
    static TABLE: std::sync::OnceLock<Vec<Option<KindAccess>>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        kinds::table(|k| {
            let k = k.filter(|k| k.class == Class::Comm)?;
            let (write, read, target) = access_kind(k.name)?;
            Some((k.name.starts_with("GASP_CAF_"), write, read, target))
        })
    })
}

/// The kinds [`accesses`] knows, by number: a stream with none of them has
/// no access to look for among its intervals.
fn access_kinds() -> &'static [bool] {
    static TABLE: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| accesses().iter().map(Option::is_some).collect())
}

impl Part {
    /// The part in the trace's numbers ([`crate::summary::Rebase`]).
    pub(crate) fn rebase(&mut self, r: &crate::summary::Rebase) {
        for a in &mut self.accesses {
            a.callsite = r.site(a.callsite);
        }
    }

    /// The part of `s`, whose process's shared objects are in `objects`.
    pub fn of(s: &Stream, objects: &Objects) -> Part {
        // Whether it holds coarray events, from the kinds it has (not a
        // pass over its events).
        let caf = crate::summary::caf_kinds()
            .iter()
            .any(|&k| crate::intervals::has_kind(s, k));
        let rank = rank(s);
        if !caf && rank.is_none() {
            return Part::default();
        }
        let mut b = Builder::new(caf);
        let ends: Vec<u64> = barriers(s).iter().map(|b| b.end).collect();
        b.feed(s, objects, &ends);
        b.finish(rank)
    }
}

/// A stream's [`Part`] made window by window ([`crate::window`]).
pub(crate) struct Builder {
    /// Whether the stream holds coarray events (its accesses are then the
    /// coarray ones, and its epochs end at its barriers only).
    caf: bool,
    fence: Option<u16>,
    /// The ends of its barriers and fences so far, in order.
    ends: Vec<u64>,
    /// How many of `ends` are at or before the last access's START.
    epoch_at: usize,
    part: Part,
    /// Its objects by ordinal: where each is in `part.objects`.
    ids: HashMap<u32, u32>,
    /// The accesses met, by what they are: where each is in `part.accesses`.
    seen: HashMap<Same, usize>,
    /// Windows only: the place of the first START of each access, and
    /// whether one was met after one that starts later.
    firsts: Vec<u64>,
    unsorted: bool,
}

/// What makes two accesses the same ([`Builder::seen`]): object, home,
/// offset, length, write, read, epoch and callsite.
type Same = (u32, u32, u64, u64, bool, bool, u32, u32);

impl Builder {
    /// For the windows of a stream; `caf`: whether it holds coarray events.
    pub(crate) fn new(caf: bool) -> Builder {
        Builder {
            caf,
            fence: kinds::kind_by_name("GASP_MPI_WIN_FENCE").map(|k| k.id),
            ends: Vec::new(),
            epoch_at: 0,
            part: Part::default(),
            ids: HashMap::default(),
            seen: HashMap::default(),
            firsts: Vec::new(),
            unsorted: false,
        }
    }

    /// Adds window `s` (the next of its stream; whole, or a window), whose
    /// process's shared objects are in `objects` and whose barriers end at
    /// `barrier_ends` (in order).
    pub(crate) fn feed(&mut self, s: &Stream, objects: &Objects, barrier_ends: &[u64]) {
        let caf = self.caf;
        let windowed = s.window != crate::window::Window::default();
        // Epochs end at barriers and at MPI fences.
        let from = self.ends.len();
        self.ends.extend_from_slice(barrier_ends);
        if !caf {
            self.ends.extend(
                intervals(s)
                    .iter()
                    .filter(|i| Some(i.kind) == self.fence && i.end != crate::window::OPEN)
                    .map(|i| i.end),
            );
        }
        if !self.ends[from..].is_sorted() || self.ends[..from].last() > self.ends.get(from) {
            self.ends.sort_unstable();
        }
        if !crate::intervals::has_any_kind(s, access_kinds()) {
            // (Most streams: their events are not looked at.)
            return;
        }
        let ends = &self.ends;
        let part = &mut self.part;
        let mut names = crate::objects::ArgNames::new(s);
        let mut epoch_at = self.epoch_at;
        // The process's objects, found once (not by its name per access).
        let allocations = objects.allocations_of(&s.process);
        let mut windows: HashMap<u64, Option<&crate::objects::Window>> = HashMap::default();
        for (iv, start) in with_events(s, Which::Start, true) {
            let Some((coarray, write, read, target)) = accesses()[iv.kind as usize] else {
                continue;
            };
            if caf != coarray || iv.end == crate::window::OPEN {
                continue;
            }
            let a = names.of(s, start);
            let len = a.get("nbytes").copied().unwrap_or(0);
            let (home, ordinal, name, size, offset) = match target {
                Target::Addr(arg) => {
                    let (Some(&pe), Some(&addr)) = (a.get("pe"), a.get(arg)) else {
                        continue;
                    };
                    let Some((alloc, off)) = allocations.and_then(|a| a.find(addr, iv.start))
                    else {
                        continue;
                    };
                    (pe, alloc.ordinal, &alloc.name, alloc.size, off)
                }
                Target::Window | Target::Coarray => {
                    let (home, win, disp) = if caf {
                        let image = a.get("image").copied().unwrap_or(0);
                        (
                            image.wrapping_sub(1),
                            a.get("coarray").copied().unwrap_or(0),
                            a.get("offset").copied().unwrap_or(0),
                        )
                    } else {
                        (
                            a.get("target").copied().unwrap_or(u64::MAX),
                            a.get("win").copied().unwrap_or(0),
                            a.get("disp").copied().unwrap_or(0),
                        )
                    };
                    let w = *windows
                        .entry(win)
                        .or_insert_with(|| objects.window(&s.process, win));
                    let Some(w) = w else {
                        continue;
                    };
                    let unit = if caf { 1 } else { w.disp_unit };
                    (home, w.ordinal, &w.name, w.size, disp.saturating_mul(unit))
                }
            };
            if home > u32::MAX as u64 {
                continue;
            }
            let next = part.objects.len() as u32;
            let object = *self.ids.entry(ordinal).or_insert_with(|| {
                part.objects.push(Object {
                    model: String::new(),
                    ordinal,
                    name: name.clone(),
                    size,
                });
                next
            });
            let o = &mut part.objects[object as usize];
            o.size = o.size.max(size);
            let (home, len) = (home as u32, len.max(1));
            // The epoch: how many ends are at or before the START, walked on
            // from the previous access's (STARTs come in order; a search
            // where one goes back).
            if epoch_at > 0 && ends[epoch_at - 1] > iv.start {
                epoch_at = ends.partition_point(|&e| e <= iv.start);
            }
            while epoch_at < ends.len() && ends[epoch_at] <= iv.start {
                epoch_at += 1;
            }
            let epoch = epoch_at as u32;
            let time_ns = iv.end.saturating_sub(iv.start);
            let same = (object, home, offset, len, write, read, epoch, iv.callsite);
            let place = if windowed { s.place(iv.start_event) } else { 0 };
            match self.seen.get(&same) {
                Some(&at) => {
                    let a = &mut part.accesses[at];
                    a.count += 1;
                    a.time_ns += time_ns;
                    if windowed && place < self.firsts[at] {
                        self.firsts[at] = place;
                        self.unsorted = true;
                    }
                }
                None => {
                    self.seen.insert(same, part.accesses.len());
                    if windowed {
                        self.unsorted |= self.firsts.last().is_some_and(|&f| f > place);
                        self.firsts.push(place);
                    }
                    part.accesses.push(Access {
                        object,
                        home,
                        offset,
                        len,
                        write,
                        read,
                        epoch,
                        callsite: iv.callsite,
                        count: 1,
                        time_ns,
                    });
                }
            }
        }
        self.epoch_at = epoch_at;
    }

    /// The part of the windows given, whose process's rank is `rank`.
    pub(crate) fn finish(self, rank: Option<crate::matrix::Rank>) -> Part {
        let model: &'static str = if self.caf {
            "CAF"
        } else {
            match rank {
                Some(r) => r.model,
                None => return Part::default(),
            }
        };
        let mut part = self.part;
        if self.unsorted {
            // Accesses first made first, objects first met first.
            let mut accesses = crate::window::by_first(part.accesses, &self.firsts);
            let mut renumber: HashMap<u32, u32> = HashMap::default();
            let mut objects = Vec::with_capacity(part.objects.len());
            for a in &mut accesses {
                let next = objects.len() as u32;
                a.object = *renumber.entry(a.object).or_insert_with(|| {
                    objects.push(part.objects[a.object as usize].clone());
                    next
                });
            }
            part = Part { objects, accesses };
        }
        for o in &mut part.objects {
            o.model = model.to_string();
        }
        part
    }
}

/// How many of the other threads must read a produced block for it to count
/// as consumed by many: at least two, and at least half of the others.
fn many(readers: usize, threads: usize) -> bool {
    readers >= 2 && 2 * readers >= threads.saturating_sub(1)
}

/// Analyses the shared objects of `t` in blocks of `block_size` bytes.
pub fn analyse(t: &Trace, block_size: u64) -> Blocks {
    let ids: Vec<Identity> = t.streams.iter().map(Identity::of).collect();
    let parts: Vec<Part> = t.streams.iter().map(|s| Part::of(s, &t.objects)).collect();
    merge(
        &ids,
        &t.callsites,
        &parts.iter().collect::<Vec<_>>(),
        block_size,
    )
}

/// [`analyse`] of the trace in `dir` read one process at a time
/// ([`crate::distributed::ByProcess`]): the same analysis, with one
/// process's events and every stream's accesses in memory rather than all
/// the events.
pub fn analyse_by_process(
    dir: &std::path::Path,
    block_size: u64,
) -> Result<Blocks, crate::trace::TraceError> {
    let r = crate::distributed::ByProcess::open(dir)?;
    r.plan(1);
    let (mut ids, mut parts) = (Vec::new(), Vec::new());
    for i in 0..r.processes() {
        let t = r.read(i);
        for s in &t.streams {
            ids.push(Identity::of(s));
            parts.push(Part::of(s, &t.objects));
        }
    }
    r.finish();
    Ok(merge(
        &ids,
        &r.tables().callsites,
        &parts.iter().collect::<Vec<_>>(),
        block_size,
    ))
}

/// One access of [`merge`]: stream `thread`'s access `a`, to object `object`
/// of [`Blocks::objects`].
struct Made<'a> {
    thread: usize,
    object: u32,
    a: &'a Access,
}

/// The block analysis, in blocks of `block_size` bytes, from every stream's
/// part (`parts[i]`: stream `i`'s); `sites` are the trace's callsites.
pub fn merge(ids: &[Identity], sites: &[Callsite], parts: &[&Part], block_size: u64) -> Blocks {
    let block_size = block_size.max(1);
    // Objects numbered as first met, stream after stream.
    let mut objects: Vec<ObjectInfo> = Vec::new();
    let mut numbers: HashMap<(&str, u32), u32> = HashMap::default();
    let mut accesses: Vec<Made> = Vec::new();
    let mut count = 0u64;
    for (si, p) in parts.iter().enumerate().take(ids.len()) {
        let global: Vec<u32> = p
            .objects
            .iter()
            .map(|o| {
                let next = objects.len() as u32;
                let object = *numbers
                    .entry((o.model.as_str(), o.ordinal))
                    .or_insert_with(|| {
                        objects.push(ObjectInfo {
                            name: o.name.clone(),
                            model: o.model.clone(),
                            size: o.size,
                            ranks: 0,
                            ops: Vec::new(),
                            bytes: Vec::new(),
                            time_ns: Vec::new(),
                            local_ops: 0,
                            remote_ops: 0,
                        });
                        next
                    });
                let g = &mut objects[object as usize];
                g.size = g.size.max(o.size);
                object
            })
            .collect();
        for a in &p.accesses {
            let Some(&object) = global.get(a.object as usize) else {
                continue;
            };
            count += a.count;
            accesses.push(Made {
                thread: si,
                object,
                a,
            });
        }
    }
    let threads: Vec<String> = ids.iter().map(|id| id.name.clone()).collect();
    // Each object's accesses, in order (found once: objects times accesses
    // would be too many).
    let mut of_object: Vec<Vec<usize>> = vec![Vec::new(); objects.len()];
    for (i, m) in accesses.iter().enumerate() {
        if let Some(v) = of_object.get_mut(m.object as usize) {
            v.push(i);
        }
    }
    // Each object's rank x rank traffic.
    let ranks: Vec<Option<crate::matrix::Rank>> = ids.iter().map(|id| id.rank).collect();
    for (oi, o) in objects.iter_mut().enumerate() {
        let mine = || of_object[oi].iter().map(|&i| &accesses[i]);
        let n = mine()
            .filter_map(|m| ranks.get(m.thread).copied().flatten().map(|r| r.size))
            .max()
            .unwrap_or(0);
        o.ranks = n;
        o.ops = vec![vec![0; n]; n];
        o.bytes = vec![vec![0; n]; n];
        o.time_ns = vec![vec![0; n]; n];
        for m in mine() {
            let Some(r) = ranks.get(m.thread).copied().flatten() else {
                continue;
            };
            let (from, to) = (r.me, m.a.home as usize);
            if to >= n {
                continue;
            }
            o.ops[from][to] += m.a.count;
            o.bytes[from][to] += m.a.len * m.a.count;
            o.time_ns[from][to] += m.a.time_ns;
            if from == to {
                o.local_ops += m.a.count;
            } else {
                o.remote_ops += m.a.count;
            }
        }
    }
    // Per (object, home, block), per epoch, the accesses touching it.
    type Key = (u32, u32, u64);
    let mut by_block: BTreeMap<Key, BTreeMap<u32, Vec<usize>>> = BTreeMap::new();
    for (i, m) in accesses.iter().enumerate() {
        let a = m.a;
        let first = a.offset / block_size;
        let last = (a.offset + a.len - 1) / block_size;
        for b in first..=last.min(first + (1 << 20)) {
            by_block
                .entry((m.object, a.home, b))
                .or_default()
                .entry(a.epoch)
                .or_default()
                .push(i);
        }
    }
    // The model's thread count, for "many readers": the threads accessing
    // objects of each model, found in one walk of the accesses.
    let mut threads_of: HashMap<&str, Vec<usize>> = HashMap::default();
    for m in &accesses {
        threads_of
            .entry(objects[m.object as usize].model.as_str())
            .or_default()
            .push(m.thread);
    }
    for v in threads_of.values_mut() {
        v.sort_unstable();
        v.dedup();
    }
    let groups: Vec<usize> = objects
        .iter()
        .map(|o| threads_of.get(o.model.as_str()).map_or(0, Vec::len))
        .collect();
    // The thread holding each rank's part, per model.
    let mut home_thread: HashMap<(&str, u32), usize> = HashMap::default();
    for (i, id) in ids.iter().enumerate() {
        if let Some(r) = id.rank {
            let model = if id.caf { "CAF" } else { r.model };
            home_thread.entry((model, r.me as u32)).or_insert(i);
        }
    }
    let loc = |site: u32| location_in(sites, Some(site));
    let mut epochs_out = Vec::new();
    let mut false_sharing = Vec::new();
    let mut producer_consumer = Vec::new();
    for (&(object, home, block), per_epoch) in &by_block {
        let lo = block * block_size;
        let hi = lo + block_size;
        let mut shared = SharedBlock {
            object,
            home,
            block,
            epochs: 0,
            writes: vec![0; ids.len()],
            time_ns: 0,
            locations: Vec::new(),
        };
        let mut produced = ProducedBlock {
            object,
            home,
            block,
            by_owner: false,
            times: 0,
            readers: 0,
            time_ns: 0,
            locations: Vec::new(),
        };
        // The writers of the last epoch that wrote the block, until it is consumed.
        let mut pending: Option<Vec<usize>> = None;
        // A block nobody writes through the runtime may still be written by
        // its owner with plain stores: then it counts as produced when many
        // others start reading it, at most twice (data read by many all
        // along is not told apart from a read-only table).
        let owner = home_thread
            .get(&(objects[object as usize].model.as_str(), home))
            .copied();
        let unwritten = per_epoch.values().flatten().all(|&i| !accesses[i].a.write);
        let mut owner_hot: Vec<(u32, Vec<usize>, &Vec<usize>)> = Vec::new();
        for (&epoch, list) in per_epoch {
            let mut readers: Vec<usize> = Vec::new();
            let mut writers: Vec<usize> = Vec::new();
            // Per writer, the byte ranges it wrote in this block.
            let mut ranges: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
            for &i in list {
                let (thread, a) = (accesses[i].thread, accesses[i].a);
                if a.read && !readers.contains(&thread) {
                    readers.push(thread);
                }
                if a.write {
                    if !writers.contains(&thread) {
                        writers.push(thread);
                    }
                    let r = (a.offset.max(lo), (a.offset + a.len).min(hi));
                    ranges.entry(thread).or_default().push(r);
                }
            }
            readers.sort_unstable();
            writers.sort_unstable();
            // False sharing: at least two writers whose bytes do not overlap
            // another writer's.
            let overlaps = |w: usize| {
                ranges[&w].iter().any(|&(a0, a1)| {
                    ranges
                        .iter()
                        .filter(|(&o, _)| o != w)
                        .flat_map(|(_, v)| v)
                        .any(|&(b0, b1)| a0 < b1 && b0 < a1)
                })
            };
            let disjoint: Vec<usize> = writers.iter().copied().filter(|&w| !overlaps(w)).collect();
            if disjoint.len() >= 2 {
                shared.epochs += 1;
                for &i in list {
                    let (thread, a) = (accesses[i].thread, accesses[i].a);
                    if a.write && disjoint.contains(&thread) {
                        shared.writes[thread] += a.count;
                        shared.time_ns += a.time_ns;
                        if let Some(l) = loc(a.callsite) {
                            if !shared.locations.contains(&l) {
                                shared.locations.push(l);
                            }
                        }
                    }
                }
            }
            // Producer-consumer: read by many others after being written.
            if let Some(producers) = &pending {
                let consumers: Vec<usize> = readers
                    .iter()
                    .copied()
                    .filter(|r| !producers.contains(r) && !writers.contains(r))
                    .collect();
                if many(consumers.len(), groups[object as usize]) {
                    produced.times += 1;
                    produced.readers = produced.readers.max(consumers.len());
                    for &i in list {
                        let (thread, a) = (accesses[i].thread, accesses[i].a);
                        if a.read && consumers.contains(&thread) {
                            produced.time_ns += a.time_ns;
                            if let Some(l) = loc(a.callsite) {
                                if !produced.locations.contains(&l) {
                                    produced.locations.push(l);
                                }
                            }
                        }
                    }
                    pending = None;
                }
            }
            if !writers.is_empty() {
                pending = Some(writers.clone());
            }
            if unwritten {
                let consumers: Vec<usize> = readers
                    .iter()
                    .copied()
                    .filter(|&r| Some(r) != owner)
                    .collect();
                if owner.is_some() && many(consumers.len(), groups[object as usize]) {
                    owner_hot.push((epoch, consumers, list));
                }
            }
            epochs_out.push(BlockEpoch {
                object,
                home,
                block,
                epoch,
                readers,
                writers,
            });
        }
        if owner_hot.len() <= 2 {
            for (k, (epoch, consumers, list)) in owner_hot.iter().enumerate() {
                if k > 0 && owner_hot[k - 1].0 + 1 == *epoch {
                    continue;
                }
                produced.times += 1;
                produced.by_owner = true;
                produced.readers = produced.readers.max(consumers.len());
                for &i in list.iter() {
                    let (thread, a) = (accesses[i].thread, accesses[i].a);
                    if a.read && consumers.contains(&thread) {
                        produced.time_ns += a.time_ns;
                        if let Some(l) = loc(a.callsite) {
                            if !produced.locations.contains(&l) {
                                produced.locations.push(l);
                            }
                        }
                    }
                }
            }
        }
        if shared.epochs > 0 {
            false_sharing.push(shared);
        }
        if produced.times > 0 {
            producer_consumer.push(produced);
        }
    }
    false_sharing.sort_by(|a, b| b.epochs.cmp(&a.epochs).then(b.time_ns.cmp(&a.time_ns)));
    producer_consumer.sort_by(|a, b| b.times.cmp(&a.times).then(b.time_ns.cmp(&a.time_ns)));
    Blocks {
        block_size,
        threads,
        objects,
        accesses: count,
        epochs: epochs_out,
        false_sharing,
        producer_consumer,
    }
}

/// False sharing is reported when it happens in at least this many block-epochs...
const FS_MIN: u32 = 4;
/// ...making at least this share of the object's written block-epochs.
const FS_SHARE: f64 = 0.10;
/// Producer-consumer is reported for at least this many produced-then-consumed
/// blocks (its severity is the time of the consuming reads).
const PC_MIN: u32 = 4;

/// A home is a remote hot spot when the remote traffic to its part (bytes,
/// or operations where none move bytes) is at least this many times the mean
/// of the other homes'...
const HOT_FACTOR: f64 = 3.0;
/// ...and the remote accesses to it take at least this share of the
/// initiators' time.
const HOT_SHARE: f64 = 0.05;

/// `remote_hotspot`: one home of an object serving most of its remote
/// traffic, from several threads. The home is found by traffic, not by time:
/// homes served alike are not a hot spot because some of their accesses
/// were slow.
fn hotspot(ids: &[Identity], o: &ObjectInfo, total_time: u64) -> Option<Finding> {
    let n = o.ranks;
    if n < 3 {
        return None;
    }
    let remote =
        |m: &[Vec<u64>], c: usize| -> u64 { (0..n).filter(|&r| r != c).map(|r| m[r][c]).sum() };
    let by_bytes = (0..n).any(|c| remote(&o.bytes, c) > 0);
    let traffic: Vec<u64> = (0..n)
        .map(|c| remote(if by_bytes { &o.bytes } else { &o.ops }, c))
        .collect();
    let hot = (0..n).max_by_key(|&c| (traffic[c], std::cmp::Reverse(c)))?;
    let others = (traffic.iter().sum::<u64>() - traffic[hot]) as f64 / (n - 1) as f64;
    let time = remote(&o.time_ns, hot);
    let initiators: Vec<usize> = (0..n).filter(|&r| r != hot && o.ops[r][hot] > 0).collect();
    let streams: Vec<usize> = ids
        .iter()
        .enumerate()
        .filter(|(_, id)| id.rank.is_some_and(|r| initiators.contains(&r.me)))
        .map(|(i, _)| i)
        .collect();
    let their_time: u64 = streams
        .iter()
        .map(|&i| ids[i].active_span)
        .sum::<u64>()
        .max(1);
    let share = time as f64 / their_time as f64;
    if initiators.len() < 2
        || (traffic[hot] as f64) < HOT_FACTOR * others.max(1.0)
        || share < HOT_SHARE
    {
        return None;
    }
    let ops: u64 = initiators.iter().map(|&r| o.ops[r][hot]).sum();
    Some(Finding {
        kind: "remote_hotspot".into(),
        severity: time as f64 / total_time.max(1) as f64,
        threads: streams.iter().map(|&i| ids[i].name.clone()).collect(),
        location: None,
        message: format!(
            "{} threads access the part of {} held by {} {hot} remotely {ops} times, {:.1}% of their time ({:.3} ms), \
             {:.1}x the mean {} to the other homes: that one process serves them all. Spread the data \
             (another distribution), or fetch it once and share a copy (a broadcast).",
            initiators.len(),
            o.name,
            if o.model == "CAF" { "image (from 0)" } else if o.model == "SHMEM" { "PE" } else { "rank" },
            100.0 * share,
            time as f64 / 1e6,
            traffic[hot] as f64 / others.max(1.0),
            if by_bytes { "bytes" } else { "operations" }
        ),
    })
}

fn broadcast_advice(model: &str) -> &'static str {
    match model {
        "SHMEM" => "shmem_broadcast (or a put to each reader)",
        "CAF" => "co_broadcast",
        "MPI" => "MPI_Bcast",
        _ => "upc_all_broadcast",
    }
}

/// The `remote_hotspot`, `false_sharing` and `producer_consumer` findings of
/// `t`, one per object.
pub fn findings(t: &Trace, b: &Blocks, total_time: u64) -> Vec<Finding> {
    let ids: Vec<Identity> = t.streams.iter().map(Identity::of).collect();
    findings_of(&ids, b, total_time)
}

/// The `remote_hotspot`, `false_sharing` and `producer_consumer` findings,
/// one per object, of the streams `ids` whose block analysis is `b`.
pub fn findings_of(ids: &[Identity], b: &Blocks, total_time: u64) -> Vec<Finding> {
    let total_time = total_time.max(1);
    let mut out = Vec::new();
    let thread_time =
        |ts: &[usize]| -> u64 { ts.iter().map(|&i| ids[i].active_span).sum::<u64>().max(1) };
    for (oi, o) in b.objects.iter().enumerate() {
        out.extend(hotspot(ids, o, total_time));
        let oi = oi as u32;
        // False sharing.
        let fs: Vec<&SharedBlock> = b.false_sharing.iter().filter(|s| s.object == oi).collect();
        let fs_epochs: u32 = fs.iter().map(|s| s.epochs).sum();
        let written = b
            .epochs
            .iter()
            .filter(|e| e.object == oi && !e.writers.is_empty())
            .count()
            .max(1);
        if fs_epochs >= FS_MIN && fs_epochs as f64 / written as f64 >= FS_SHARE {
            let mut writers: Vec<usize> = (0..ids.len())
                .filter(|&w| fs.iter().any(|s| s.writes[w] > 0))
                .collect();
            writers.sort_unstable();
            let time: u64 = fs.iter().map(|s| s.time_ns).sum();
            let top: Vec<String> = fs
                .iter()
                .take(3)
                .map(|s| {
                    format!(
                        "block {} of its part on {} ({} epochs)",
                        s.block, s.home, s.epochs
                    )
                })
                .collect();
            out.push(Finding {
                kind: "false_sharing".into(),
                severity: time as f64 / total_time as f64,
                threads: writers.iter().map(|&w| b.threads[w].clone()).collect(),
                location: fs.iter().find_map(|s| s.locations.first().cloned()),
                message: format!(
                    "{} of {} blocks of {} bytes of {} are written by two or more threads at disjoint offsets in the same epoch \
                     ({fs_epochs} times; {:.3} ms of writes; e.g. {}). Pad each thread's data to a multiple of {} bytes, \
                     or distribute the object so that each block has one writer.",
                    fs.len(),
                    b.epochs
                        .iter()
                        .filter(|e| e.object == oi)
                        .map(|e| (e.home, e.block))
                        .collect::<std::collections::BTreeSet<_>>()
                        .len(),
                    b.block_size,
                    o.name,
                    time as f64 / 1e6,
                    top.join(", "),
                    b.block_size
                ),
            });
        }
        // Producer-consumer.
        let pc: Vec<&ProducedBlock> = b
            .producer_consumer
            .iter()
            .filter(|p| p.object == oi)
            .collect();
        let times: u32 = pc.iter().map(|p| p.times).sum();
        if times < PC_MIN {
            continue;
        }
        let time: u64 = pc.iter().map(|p| p.time_ns).sum();
        let mut readers: Vec<usize> = b
            .epochs
            .iter()
            .filter(|e| e.object == oi)
            .flat_map(|e| e.readers.iter().copied())
            .collect();
        readers.sort_unstable();
        readers.dedup();
        let share = time as f64 / thread_time(&readers) as f64;
        let most = pc.iter().map(|p| p.readers).max().unwrap_or(0);
        out.push(Finding {
            kind: "producer_consumer".into(),
            severity: time as f64 / total_time as f64,
            threads: readers.iter().map(|&r| b.threads[r].clone()).collect(),
            location: pc.iter().find_map(|p| p.locations.first().cloned()),
            message: format!(
                "{times} times a block of {} written in one epoch{} is read by up to {most} other threads in a later one \
                 ({} blocks; the reads take {:.1}% of the readers' time, {:.3} ms): every reader fetches the same data from \
                 one home. Broadcast it once it is produced ({}), and let readers use their copy.",
                o.name,
                if pc.iter().all(|p| p.by_owner) {
                    " (by its owner, with stores the runtime does not see)"
                } else {
                    ""
                },
                pc.len(),
                100.0 * share,
                time as f64 / 1e6,
                broadcast_advice(&o.model)
            ),
        });
    }
    out
}

/// The shared objects section of the text report: per object, its accesses,
/// then the falsely shared blocks with their writers-per-block counts and the
/// produced-then-consumed blocks.
pub fn to_text(b: &Blocks, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    if b.objects.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nShared objects ({} accesses, blocks of {} bytes)",
        b.accesses, b.block_size
    )?;
    for (oi, o) in b.objects.iter().enumerate() {
        let oi = oi as u32;
        let mine = b.epochs.iter().filter(|e| e.object == oi);
        let blocks = mine
            .clone()
            .map(|e| (e.home, e.block))
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let fs: Vec<&SharedBlock> = b.false_sharing.iter().filter(|s| s.object == oi).collect();
        let pc = b
            .producer_consumer
            .iter()
            .filter(|p| p.object == oi)
            .count();
        writeln!(
            out,
            "  {} ({}, {} bytes per part): {} blocks accessed, {} falsely shared, {} produced then read by many",
            o.name, o.model, o.size, blocks, fs.len(), pc
        )?;
        if fs.is_empty() {
            continue;
        }
        let writers: Vec<usize> = (0..b.threads.len())
            .filter(|&w| fs.iter().any(|s| s.writes[w] > 0))
            .collect();
        writeln!(
            out,
            "    writes per falsely shared block (home:block, epochs; then per writer):"
        )?;
        for s in fs.iter().take(10) {
            let row: Vec<String> = writers
                .iter()
                .filter(|&&w| s.writes[w] > 0)
                .map(|&w| format!("{}={}", b.threads[w], s.writes[w]))
                .collect();
            writeln!(
                out,
                "    {}:{} ({} epochs): {}",
                s.home,
                s.block,
                s.epochs,
                row.join(", ")
            )?;
        }
        if fs.len() > 10 {
            writeln!(out, "    ... {} more in the JSON report", fs.len() - 10)?;
        }
    }
    Ok(())
}

/// Everything, per-epoch detail included, as JSON.
pub fn to_json(b: &Blocks) -> serde_json::Value {
    let mut v = serde_json::to_value(b).unwrap_or_default();
    v["epochs"] = serde_json::to_value(&b.epochs).unwrap_or_default();
    v
}

/// Per block and epoch, readers and writers, as text.
pub fn epochs_to_text(b: &Blocks, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(out, "blocks of {} bytes; threads:", b.block_size)?;
    for (i, t) in b.threads.iter().enumerate() {
        writeln!(out, "  {i}: {t}")?;
    }
    for (i, o) in b.objects.iter().enumerate() {
        writeln!(
            out,
            "object {i}: {} ({}, {} bytes per part)",
            o.name, o.model, o.size
        )?;
    }
    writeln!(out, "object home block epoch readers writers")?;
    let list = |v: &[usize]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(",")
        }
    };
    for e in &b.epochs {
        writeln!(
            out,
            "{} {} {} {} {} {}",
            e.object,
            e.home,
            e.block,
            e.epoch,
            list(&e.readers),
            list(&e.writers)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call: time, kind, callsite, arguments.
    type Call<'a> = (u64, &'a str, u32, Vec<(&'a str, u64)>);

    /// The stream of OpenSHMEM PE `pe` (one process each) making `calls`,
    /// each a START and an END 5 ns later.
    fn stream(pe: u64, calls: &[Call]) -> Stream {
        let mut s = Stream::empty(&format!("host-{pe}"), 0, 4, 16);
        for (t, name, callsite, args) in calls {
            let kind = kinds::kind_by_name(name).unwrap().id;
            for phase in [0u8, 1] {
                s.push_named(t + 5 * phase as u64, kind, phase, *callsite, args);
            }
        }
        s
    }

    /// Four PEs: in epoch 0 each writes its own 8 bytes of block 0 on PE 0,
    /// twice (false sharing); in epoch 1 PE 0 writes block 1 of its part,
    /// which the three others read in epoch 2 (producer-consumer).
    fn trace() -> Trace {
        const BASE: u64 = 0x10000;
        let streams: Vec<Stream> = (0..4)
            .map(|pe| {
                let mut calls = vec![
                    (10, "GASP_SHMEM_INIT", 0, vec![("pe", pe), ("npes", 4)]),
                    (
                        20,
                        "GASP_SHMEM_MALLOC",
                        1,
                        vec![("size", 8192), ("ptr", BASE)],
                    ),
                ];
                for t in [100, 110] {
                    calls.push((
                        t,
                        "GASP_SHMEM_PUTMEM",
                        2,
                        vec![("pe", 0), ("dest", BASE + 8 * pe), ("nbytes", 8)],
                    ));
                }
                calls.push((200, "GASP_SHMEM_BARRIER_ALL", 0, vec![]));
                if pe == 0 {
                    calls.push((
                        300,
                        "GASP_SHMEM_PUTMEM",
                        4,
                        vec![("pe", 0), ("dest", BASE + 4096), ("nbytes", 64)],
                    ));
                }
                calls.push((400, "GASP_SHMEM_BARRIER_ALL", 0, vec![]));
                if pe != 0 {
                    calls.push((
                        500,
                        "GASP_SHMEM_GETMEM",
                        3,
                        vec![("pe", 0), ("source", BASE + 4096), ("nbytes", 64)],
                    ));
                }
                calls.push((600, "GASP_SHMEM_BARRIER_ALL", 0, vec![]));
                stream(pe, &calls)
            })
            .collect();
        let callsites: Vec<Callsite> = (0..5)
            .map(|i| Callsite {
                file: (i > 0).then(|| "a.c".to_string()),
                line: 10 * i,
                col: 0,
            })
            .collect();
        let objects = Objects::build(&streams, &callsites);
        Trace {
            streams,
            callsites,
            objects,
            ..Default::default()
        }
    }

    fn json(b: &Blocks) -> String {
        to_json(b).to_string()
    }

    #[test]
    fn false_sharing_and_producer_consumer() {
        let t = trace();
        let b = analyse(&t, DEFAULT_BLOCK_SIZE);
        assert_eq!(b.accesses, 12);
        assert_eq!(b.objects.len(), 1);
        assert_eq!(b.objects[0].name, "a.c:10");
        assert_eq!(b.objects[0].ops[1][0], 3);
        assert_eq!(b.objects[0].local_ops, 3);
        assert_eq!(b.objects[0].remote_ops, 9);
        assert_eq!(b.false_sharing.len(), 1);
        let fs = &b.false_sharing[0];
        assert_eq!((fs.home, fs.block, fs.epochs), (0, 0, 1));
        assert_eq!(fs.writes, vec![2, 2, 2, 2]);
        assert_eq!(fs.time_ns, 40);
        assert_eq!(b.producer_consumer.len(), 1);
        let pc = &b.producer_consumer[0];
        assert_eq!(
            (pc.block, pc.times, pc.readers, pc.by_owner),
            (1, 1, 3, false)
        );
        assert_eq!(pc.locations.len(), 1);
        assert_eq!(pc.locations[0].line, 30);
    }

    #[test]
    fn parts_are_the_streams_own() {
        let t = trace();
        let ids: Vec<Identity> = t.streams.iter().map(Identity::of).collect();
        let parts: Vec<Part> = t.streams.iter().map(|s| Part::of(s, &t.objects)).collect();
        // A repeated access is counted once, where first made.
        assert_eq!(parts[1].accesses.len(), 2);
        assert_eq!(parts[1].accesses[0].count, 2);
        assert_eq!(parts[1].accesses[0].time_ns, 10);
        // Each part is made from its stream and its process's objects alone,
        // and read back from JSON the same.
        for (i, s) in t.streams.iter().enumerate() {
            let own = Objects::build(std::slice::from_ref(s), &t.callsites);
            assert_eq!(Part::of(s, &own), parts[i]);
            let read: Part =
                serde_json::from_str(&serde_json::to_string(&parts[i]).unwrap()).unwrap();
            assert_eq!(read, parts[i]);
        }
        // Counting repeated accesses changes nothing: the same as every
        // access on its own.
        let single: Vec<Part> = parts
            .iter()
            .map(|p| Part {
                objects: p.objects.clone(),
                accesses: p
                    .accesses
                    .iter()
                    .flat_map(|a| {
                        (0..a.count).map(move |k| Access {
                            count: 1,
                            time_ns: if k == 0 { a.time_ns } else { 0 },
                            ..a.clone()
                        })
                    })
                    .collect(),
            })
            .collect();
        for bs in [1, 8, 64, DEFAULT_BLOCK_SIZE] {
            let whole = merge(&ids, &t.callsites, &parts.iter().collect::<Vec<_>>(), bs);
            let one = merge(&ids, &t.callsites, &single.iter().collect::<Vec<_>>(), bs);
            assert_eq!(json(&whole), json(&one));
        }
    }

    /// Four MPI ranks of 1 ms each, and an object whose traffic goes from
    /// row to column as `bytes` says, each operation taking `time` ns.
    fn object(bytes: [[u64; 4]; 4], time: [[u64; 4]; 4]) -> (Vec<Identity>, ObjectInfo) {
        let ids = (0..4)
            .map(|r| Identity {
                process: format!("host-{r}"),
                stream: 0,
                thread: 0,
                model: 0,
                name: format!("rank {r}"),
                rank: Some(crate::matrix::Rank {
                    model: "MPI",
                    me: r,
                    size: 4,
                }),
                active_span: 1_000_000,
                caf: false,
                c_only: false,
                events: 100,
            })
            .collect();
        let ops = bytes.map(|row| row.map(|b| b / 8)).map(Vec::from).to_vec();
        let o = ObjectInfo {
            name: "halo.c:20".into(),
            model: "MPI".into(),
            size: 8192,
            ranks: 4,
            ops,
            bytes: bytes.map(Vec::from).to_vec(),
            time_ns: time.map(Vec::from).to_vec(),
            local_ops: 0,
            remote_ops: 0,
        };
        (ids, o)
    }

    #[test]
    fn a_hot_spot_is_a_home_with_more_traffic_not_slower_accesses() {
        // A halo exchange: ranks 1 and 2 are served alike (two neighbours
        // each), though the accesses to rank 1 took ten times longer.
        let halo = [[0, 80, 0, 0], [80, 0, 80, 0], [0, 80, 0, 80], [0, 0, 80, 0]];
        let slow_to_1 = [
            [0, 100_000, 0, 0],
            [1_000, 0, 1_000, 0],
            [0, 100_000, 0, 1_000],
            [0, 0, 1_000, 0],
        ];
        let (ids, o) = object(halo, slow_to_1);
        assert!(hotspot(&ids, &o, 4_000_000).is_none());
        // Rank 0 serves the three others: a hot spot, however fast.
        let all_to_0 = [[0; 4], [800, 0, 0, 0], [800, 8, 0, 0], [800, 0, 8, 0]];
        let time = [
            [0; 4],
            [60_000, 0, 0, 0],
            [60_000, 100, 0, 0],
            [60_000, 0, 100, 0],
        ];
        let (ids, o) = object(all_to_0, time);
        let f = hotspot(&ids, &o, 4_000_000).expect("rank 0 serves everyone");
        assert_eq!(f.threads, vec!["rank 1", "rank 2", "rank 3"]);
        assert!(f.message.contains("held by rank 0"), "{}", f.message);
        assert!(
            f.message.contains("the mean bytes to the other homes"),
            "{}",
            f.message
        );
    }
}
