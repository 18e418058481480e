//! Locks: per lock, how often it is taken, how long threads wait to take it,
//! how long it is held, and by how many threads it is contended.
//!
//! | lock | waiting to take it | holding it |
//! |---|---|---|
//! | OpenMP lock, nest lock, critical section, ordered | acquire to acquired | acquired to release |
//! | UPC lock (`upc_lock`, `upc_lock_attempt` that succeeds) | the acquiring call | its end to the start of `upc_unlock` |
//! | OpenSHMEM lock (`shmem_set_lock`) | the acquiring call | its end to the start of `shmem_clear_lock` |
//! | coarray lock (`lock`) | the acquiring call | not known (no unlock event) |
//!
//! An OpenMP lock is named by its wait id and belongs to its process; the
//! other locks are shared by the processes and named the same way on every
//! process: a lock in a symmetric allocation by the allocation's source line
//! and the offset in it (`app.c:12+0x0`); a global or static variable
//! (`static long lock;` of an OpenSHMEM program), whose address differs from
//! process to process in a position-independent program, by its binary and
//! its offset in it (`app+0x4048`), for an address just above one of the
//! process's executable mappings (`<process>.maps`) and within its binary's
//! loadable segments (from its file; within [`IMAGE_SPAN`] of its start when
//! the file cannot be read); any other (the heap's) by its address. A
//! thread *waited* for a lock when another thread held it while it was
//! acquiring it: that acquisition is contended and the thread counts among the
//! lock's waiters.

use rustc_hash::FxHashMap as HashMap;

use gaspard_format::kinds;
use serde::{Deserialize, Serialize};

use crate::findings::{location_in, Finding, Location};
use crate::intervals::intervals;
use crate::objects::{arg, Objects};
use crate::pairs::Pairs;
use crate::summary::Identity;
use crate::trace::{Callsite, Stream, Trace};

/// One lock's numbers.
#[derive(Debug, Clone, Serialize)]
pub struct LockStats {
    /// The lock: its id or address in hex, or `binary+offset`.
    pub lock: String,
    /// Where it is taken (the first acquisition's source line).
    pub location: Option<Location>,
    /// Acquisitions.
    pub acquisitions: u64,
    /// Acquisitions made while another thread held the lock.
    pub contended: u64,
    /// Time spent acquiring it, ns.
    pub wait_ns: u64,
    /// Time it was held, ns (`null` when releases are not recorded).
    pub hold_ns: Option<u64>,
    /// The threads taking it.
    pub threads: Vec<String>,
    /// How many distinct threads had to wait for another one holding it.
    pub waiters: usize,
}

/// A lock is contended when its waiting takes at least this share of the
/// working time of the threads using it.
const LOCK_SHARE: f64 = 0.05;

/// How far past the start of a binary's first mapping its data (and so a
/// global lock) may lie, when its file cannot tell.
pub const IMAGE_SPAN: u64 = 256 << 20;

/// What a stream's process tells about its locks: the process's binaries
/// (from `<process>.maps`), which name its global locks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Context {
    /// The binaries, in the order first mapped.
    pub images: Vec<Image>,
}

/// One binary mapped in a process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    /// Where its file's offset 0 is mapped.
    pub base: u64,
    /// Where its first executable mapping starts.
    pub start: u64,
    /// Its file name.
    pub name: String,
    /// How far past `base` it reaches (its loadable segments, from its file;
    /// [`IMAGE_SPAN`] when the file cannot be read): the heap, which may
    /// begin right after a program's data, is not its image.
    pub span: u64,
}

/// How far past its base the image of the binary at `path` reaches: the
/// end of its last loadable segment from the start of its first (pages
/// whole), as its ELF program headers tell. Read once per file (by its
/// path, size and time of change) in the life of the program: a report
/// reads its processes one at a time, and they mostly run the same
/// binaries (mapped and unmapped again for each, they cost more than
/// reading a short process's events).
fn image_span(path: &str) -> Option<u64> {
    type Spans = HashMap<(String, u64, Option<std::time::SystemTime>), Option<u64>>;
    static SPANS: std::sync::LazyLock<std::sync::Mutex<Spans>> =
        std::sync::LazyLock::new(Default::default);
    let meta = std::fs::metadata(path).ok()?;
    let key = (path.to_string(), meta.len(), meta.modified().ok());
    let spans = || SPANS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&span) = spans().get(&key) {
        return span;
    }
    let span = std::fs::File::open(path)
        .ok()
        .and_then(|f| read_image_span(&f));
    spans().insert(key, span);
    span
}

/// [`image_span`] of the open binary `file`.
fn read_image_span(file: &std::fs::File) -> Option<u64> {
    use object::{Object, ObjectSegment};
    // SAFETY: a read-only private mapping of a binary, read while the report
    // runs; a binary changed under it meanwhile gives wrong bounds, not
    // unsafety (`object` checks every offset against the mapping's length).
    let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
    let elf = object::File::parse(&*map).ok()?;
    let (lo, hi) = elf
        .segments()
        .filter(|s| s.size() > 0)
        .fold((u64::MAX, 0u64), |(lo, hi), s| {
            (
                lo.min(s.address()),
                hi.max(s.address().saturating_add(s.size())),
            )
        });
    (lo < hi).then(|| hi - (lo & !0xfff))
}

impl Context {
    /// The context of `process`, one of the trace's processes (none when it
    /// is not one of them or its maps cannot be read).
    pub fn of(t: &Trace, process: &str) -> Context {
        Context::of_cached(t, process, &mut HashMap::default())
    }

    /// [`Context::of`], with the spans of the binaries already read in
    /// `spans` (by path).
    fn of_cached(t: &Trace, process: &str, spans: &mut HashMap<String, Option<u64>>) -> Context {
        if !t.processes.iter().any(|p| p.name == process) {
            return Context::default();
        }
        let Ok(text) = std::fs::read_to_string(t.dir.join(format!("{process}.maps"))) else {
            return Context::default();
        };
        let mut v: Vec<Image> = Vec::new();
        for l in text.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (Some(range), Some(offset), Some(path)) = (f.first(), f.get(2), f.get(5)) else {
                continue;
            };
            let (Some(start), Some(offset)) = (
                range
                    .split_once('-')
                    .and_then(|(a, _)| u64::from_str_radix(a, 16).ok()),
                u64::from_str_radix(offset, 16).ok(),
            ) else {
                continue;
            };
            let name = path.rsplit('/').next().unwrap_or(path).to_string();
            let base = start.saturating_sub(offset);
            match v.iter_mut().find(|i| i.name == name) {
                Some(i) => {
                    i.base = i.base.min(base);
                    i.start = i.start.min(start);
                }
                None => v.push(Image {
                    base,
                    start,
                    name,
                    span: spans
                        .entry(path.to_string())
                        .or_insert_with(|| image_span(path))
                        .unwrap_or(IMAGE_SPAN),
                }),
            }
        }
        Context { images: v }
    }

    /// The context of every process of the trace that has streams in it, by
    /// process name (read one process at a time, the trace holds every
    /// process but the streams of one).
    pub fn all(t: &Trace) -> HashMap<String, Context> {
        let mut out: HashMap<String, Context> = HashMap::default();
        let mut spans = HashMap::default();
        for s in &t.streams {
            if !out.contains_key(&s.process) {
                out.insert(
                    s.process.clone(),
                    Context::of_cached(t, &s.process, &mut spans),
                );
            }
        }
        out
    }
}

/// A shared lock's key: (object, offset) for an address in a symmetric
/// allocation, (binary, offset) for an address in a binary's image, else
/// ("", address).
fn shared_lock(
    objects: &Objects,
    cx: &Context,
    process: &str,
    addr: u64,
    time: u64,
) -> (String, u64) {
    if let Some((object, offset)) = objects.find(process, addr, time) {
        return (object.to_string(), offset);
    }
    in_image(cx, addr).unwrap_or((String::new(), addr))
}

/// The binary whose image holds `addr` (its data, past its first
/// executable mapping) and the offset from its start.
fn in_image(cx: &Context, addr: u64) -> Option<(String, u64)> {
    cx.images
        .iter()
        .filter(|i| i.start <= addr && addr - i.base < i.span)
        .max_by_key(|i| i.start)
        .map(|i| (i.name.clone(), addr - i.base))
}

/// Gives the locks in a binary's data (`binary+0xOFFSET`) the name of their
/// variable, from the binary's symbol table, before that name:
/// `lock (shlock+0x4018)`; OpenMP's critical sections are `omp critical`
/// (all unnamed ones share one lock), `omp critical(NAME)` and `omp
/// reduction`. `dir` is the trace's directory, with its processes' maps.
pub fn name_locks(dir: &std::path::Path, locks: &mut [LockStats]) {
    if !locks
        .iter()
        .any(|l| crate::symbolize::static_function(&l.lock).is_some())
    {
        return;
    }
    let mut sym = crate::symbolize::Symbolizer::new(dir);
    for l in locks {
        let Some((module, offset)) = crate::symbolize::static_function(&l.lock) else {
            continue;
        };
        if let Some(var) = sym.data_symbol(module, offset) {
            l.lock = format!("{} ({})", variable_name(&var), l.lock);
        }
    }
}

/// What an OpenMP lock of the kind `kind` is taken by, as the report names it.
fn omp_construct(kind: u16) -> &'static str {
    match kinds::kind(kind).map(|k| k.name) {
        Some("GASP_OMP_CRITICAL") => "omp critical",
        Some("GASP_OMP_ORDERED") => "omp ordered",
        Some("GASP_OMP_NEST_LOCK") => "omp_nest_lock",
        _ => "omp_lock",
    }
}

/// How a lock's variable is named: OpenMP's critical sections (the
/// compiler's `.gomp_critical_user_NAME.var`) by their construct, C++ names
/// demangled, others as they are.
fn variable_name(symbol: &str) -> String {
    match symbol
        .strip_prefix(".gomp_critical_user_")
        .and_then(|n| n.strip_suffix(".var"))
    {
        Some("") => "omp critical".into(),
        Some(".reduction") => "omp reduction".into(),
        Some(name) => format!("omp critical({name})"),
        None => crate::symbolize::demangled(symbol).unwrap_or_else(|| symbol.to_string()),
    }
}

/// One lock as one stream takes and releases it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PartLock {
    /// The lock: (process, wait id) for an OpenMP lock, (process, address)
    /// for a coarray lock, else [`shared_lock`]'s key.
    pub key: (String, u64),
    /// Its name and the callsite of the stream's first acquisition of it
    /// (`None` when the stream only releases it).
    pub first: Option<(String, u32)>,
    /// Acquisitions: (acquiring from, acquired at), in order.
    pub acquires: Pairs,
    /// Holds: (from, to), in the order of their releases.
    pub holds: Pairs,
    /// How many of `holds`, the first ones, are released before the stream's
    /// first acquisition of the lock: they count only when an earlier stream took
    /// it.
    pub early: u32,
    /// Whether its releases are recorded, as the stream's OpenMP
    /// acquisitions or its holds after `early` tell.
    pub releases_known: bool,
}

/// One stream's part of the locks: the locks it takes, in the order it
/// first takes them, then those it only releases.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// Its locks.
    pub locks: Vec<PartLock>,
}

/// One stream's acquisitions and holds of a lock, as the merge reads them
/// from its part (not copied: a program taking a lock millions of times
/// is merged in the memory of its parts).
struct Taken<'p> {
    /// The stream.
    thread: usize,
    /// (acquiring from, acquired at).
    acquires: &'p Pairs,
    /// (from, to), but the first so many.
    holds: (&'p Pairs, usize),
}

struct Lock<'p> {
    name: String,
    site: u32,
    /// Per stream that takes or releases it, in stream order.
    taken: Vec<Taken<'p>>,
    releases_known: bool,
}

/// A list of pairs in order of a key ([`in_order`]): read as packed (but
/// the first so many), or sorted in a copy.
enum Ordered<'p> {
    Packed(&'p Pairs, usize),
    Sorted(Vec<(u64, u64)>),
}

impl Ordered<'_> {
    fn iter(&self) -> OrderedIter<'_> {
        match self {
            Ordered::Packed(p, skip) => OrderedIter::Packed(p.iter().skip(*skip)),
            Ordered::Sorted(v) => OrderedIter::Sorted(v.iter()),
        }
    }
}

/// The pairs of an [`Ordered`], in order.
enum OrderedIter<'a> {
    Packed(std::iter::Skip<crate::pairs::Iter<'a>>),
    Sorted(std::slice::Iter<'a, (u64, u64)>),
}

impl Iterator for OrderedIter<'_> {
    type Item = (u64, u64);

    #[inline]
    fn next(&mut self) -> Option<(u64, u64)> {
        match self {
            OrderedIter::Packed(i) => i.next(),
            OrderedIter::Sorted(i) => i.next().copied(),
        }
    }
}

/// Each of `lists` (pairs, the first so many left out) ordered by the `key`
/// of its pairs: a list already in order read as it is, another sorted
/// (stably) in a copy. With the time from each pair's first to its second,
/// summed.
fn in_order<'p>(
    lists: impl Iterator<Item = (&'p Pairs, usize)>,
    key: fn(&(u64, u64)) -> u64,
) -> (Vec<Ordered<'p>>, u64) {
    let mut total = 0u64;
    let lists = lists
        .map(|(l, skip)| {
            let list = Ordered::Packed(l, skip);
            let (mut sorted, mut before) = (true, 0);
            for p in list.iter() {
                total = total.wrapping_add(p.1.saturating_sub(p.0));
                sorted &= key(&p) >= before;
                before = key(&p);
            }
            if sorted {
                list
            } else {
                let mut l: Vec<(u64, u64)> = list.iter().collect();
                l.sort_by_key(key);
                Ordered::Sorted(l)
            }
        })
        .collect();
    (lists, total)
}

/// The pairs of lists each in order of `key` (from [`in_order`]), in that
/// order across them, as a stable sort of their concatenation gives them:
/// as early and as far, the earlier list's first. Each with its list's
/// place.
struct Merged<'a> {
    lists: Vec<OrderedIter<'a>>,
    key: fn(&(u64, u64)) -> u64,
    /// Each list's next pair.
    heads: Vec<(u64, u64)>,
    /// The key of each list's next pair, and the list: the least first.
    next: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>>,
}

impl<'a> Merged<'a> {
    fn new(lists: &'a [Ordered<'_>], key: fn(&(u64, u64)) -> u64) -> Self {
        let mut lists: Vec<OrderedIter<'a>> = lists.iter().map(Ordered::iter).collect();
        let mut heads = vec![(0, 0); lists.len()];
        let mut next = std::collections::BinaryHeap::with_capacity(lists.len());
        for (i, l) in lists.iter_mut().enumerate() {
            if let Some(p) = l.next() {
                heads[i] = p;
                next.push(std::cmp::Reverse((key(&p), i)));
            }
        }
        Merged {
            lists,
            key,
            heads,
            next,
        }
    }

    /// The key of the next pair.
    fn peek(&self) -> Option<u64> {
        self.next.peek().map(|r| r.0 .0)
    }
}

impl Iterator for Merged<'_> {
    type Item = (usize, (u64, u64));

    fn next(&mut self) -> Option<(usize, (u64, u64))> {
        let mut top = self.next.peek_mut()?;
        let i = top.0 .1;
        let pair = self.heads[i];
        match self.lists[i].next() {
            // The list's next pair in its place: sifted down once.
            Some(p) => {
                self.heads[i] = p;
                *top = std::cmp::Reverse(((self.key)(&p), i));
            }
            None => {
                std::collections::binary_heap::PeekMut::pop(top);
            }
        }
        Some((i, pair))
    }
}

fn ids(names: &[&str]) -> Vec<u16> {
    names
        .iter()
        .filter_map(|n| kinds::kind_by_name(n).map(|k| k.id))
        .collect()
}

/// The kinds of lock events, by number.
struct Kinds {
    acquired: Option<u16>,
    omp_mutex: Vec<u16>,
    acquiring: Vec<u16>,
    attempt: Option<u16>,
    releasing: Vec<u16>,
    /// Whether a kind takes part, by number: most events do not.
    involved: Vec<bool>,
    /// Whether a kind is a call that takes or releases a lock, by number.
    calls: Vec<bool>,
}

/// The calls that take or release a lock, by number: their intervals are
/// given to [`Builder::feed_calls`] in START order.
pub(crate) fn call_kinds() -> &'static [bool] {
    &lock_kinds().calls
}

fn lock_kinds() -> &'static Kinds {
    static KINDS: std::sync::OnceLock<Kinds> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        let acquired = kinds::kind_by_name("GASP_OMP_MUTEX_ACQUIRED").map(|k| k.id);
        let omp_mutex = ids(&[
            "GASP_OMP_LOCK",
            "GASP_OMP_NEST_LOCK",
            "GASP_OMP_CRITICAL",
            "GASP_OMP_ORDERED",
        ]);
        let acquiring = ids(&["GASP_UPC_LOCK", "GASP_SHMEM_SET_LOCK", "GASP_CAF_LOCK"]);
        let attempt = kinds::kind_by_name("GASP_UPC_LOCK_ATTEMPT").map(|k| k.id);
        let releasing = ids(&["GASP_UPC_UNLOCK", "GASP_SHMEM_CLEAR_LOCK"]);
        let mut involved = vec![false; 1 << 16];
        for &k in omp_mutex
            .iter()
            .chain(&acquiring)
            .chain(&releasing)
            .chain(&acquired)
            .chain(&attempt)
        {
            involved[k as usize] = true;
        }
        let mut calls = vec![false; 1 << 16];
        for &k in acquiring.iter().chain(&releasing).chain(&attempt) {
            calls[k as usize] = true;
        }
        Kinds {
            calls,
            acquired,
            omp_mutex,
            acquiring,
            attempt,
            releasing,
            involved,
        }
    })
}

/// A stream's locks as it meets them, by key.
#[derive(Default)]
struct Met {
    locks: Vec<PartLock>,
    by_key: HashMap<(String, u64), usize>,
    /// By the id of its key, a lock of `by_key` ([`Met::at_of`]).
    by_id: HashMap<u64, usize>,
    /// The locks taken, in the order first taken.
    taken: Vec<usize>,
}

impl Met {
    /// The lock of `key`, taken by an acquisition at `site` under `name`:
    /// named when first taken.
    fn take(&mut self, key: (String, u64), name: String, site: u32) -> &mut PartLock {
        let i = self.at(key);
        self.take_at(i, || name, site)
    }

    /// [`Met::take`] of the lock of (`process`, `id`), named by `name`
    /// only when first taken.
    fn take_of(
        &mut self,
        process: &str,
        id: u64,
        name: impl FnOnce() -> String,
        site: u32,
    ) -> &mut PartLock {
        let i = self.at_of(process, id);
        self.take_at(i, name, site)
    }

    /// The `i`-th lock, taken at `site`: named by `name` when first taken.
    fn take_at(&mut self, i: usize, name: impl FnOnce() -> String, site: u32) -> &mut PartLock {
        if self.locks[i].first.is_none() {
            self.locks[i].first = Some((name(), site));
            self.taken.push(i);
        }
        &mut self.locks[i]
    }

    /// A hold of the lock of `key`, released at `to`.
    fn hold(&mut self, key: (String, u64), from: u64, to: u64) {
        let i = self.at(key);
        self.hold_at(i, from, to);
    }

    /// A hold of the `i`-th lock, released at `to`.
    fn hold_at(&mut self, i: usize, from: u64, to: u64) {
        let l = &mut self.locks[i];
        l.holds.push((from, to));
        if l.first.is_none() {
            l.early += 1;
        } else {
            l.releases_known = true;
        }
    }

    /// [`Met::at`] of (`process`, `id`), without making the key when the
    /// lock of `id` last met is that process's (a stream's OpenMP locks
    /// are all its process's).
    fn at_of(&mut self, process: &str, id: u64) -> usize {
        if let Some(&i) = self.by_id.get(&id) {
            if self.locks[i].key.0 == process {
                return i;
            }
        }
        let i = self.at((process.to_string(), id));
        self.by_id.insert(id, i);
        i
    }

    fn at(&mut self, key: (String, u64)) -> usize {
        if let Some(&i) = self.by_key.get(&key) {
            return i;
        }
        let i = self.locks.len();
        self.locks.push(PartLock {
            key: key.clone(),
            ..PartLock::default()
        });
        self.by_key.insert(key, i);
        i
    }

    fn part(mut self) -> Part {
        // Kept until every stream is read: without the room their growth
        // left (up to as much again).
        for l in &mut self.locks {
            l.acquires.shrink_to_fit();
            l.holds.shrink_to_fit();
        }
        let mut slots: Vec<Option<PartLock>> = self.locks.into_iter().map(Some).collect();
        let mut locks: Vec<PartLock> = self.taken.iter().filter_map(|&i| slots[i].take()).collect();
        locks.extend(slots.into_iter().flatten());
        Part { locks }
    }
}

impl Part {
    /// The part in the trace's times and numbers ([`crate::summary::Rebase`]).
    pub(crate) fn rebase(&mut self, r: &crate::summary::Rebase) {
        for l in &mut self.locks {
            if let Some((_, site)) = &mut l.first {
                *site = r.site(*site);
            }
            l.acquires.rebase(r.after);
            l.holds.rebase(r.after);
        }
    }

    /// The part of `s`, whose process's shared objects are among `objects`
    /// and whose process's context is `cx`.
    pub fn of(s: &Stream, objects: &Objects, cx: &Context) -> Part {
        let mut b = Builder::default();
        b.feed_omp(s, cx);
        b.feed_calls(s, objects, cx);
        b.finish()
    }
}

/// A stream's [`Part`] made window by window ([`crate::window`]): its
/// OpenMP locks from its events, in order, and the locks taken and released
/// by calls from its intervals, in START order; as for the whole stream,
/// the first before the second (whose acquisitions and holds come after).
#[derive(Default)]
pub(crate) struct Builder {
    /// The OpenMP locks.
    omp: Met,
    /// The locks of calls.
    calls: Met,
    /// OpenMP acquisitions under way: (wait id, acquire time, callsite, kind).
    acquiring_omp: Vec<(u64, u64, u32, u16)>,
    /// OpenMP locks held: (wait id, acquired time).
    held_omp: Vec<(u64, u64)>,
    /// Locks held after a call: (lock, since).
    held: Vec<(u64, u64)>,
    /// Where the OpenMP events' wait id is, once the stream is met.
    wait_id: Option<crate::objects::ArgOf>,
}

impl Builder {
    /// Adds the OpenMP locks of window `s` (the next of its stream), whose
    /// process's context is `cx`.
    pub(crate) fn feed_omp(&mut self, s: &Stream, cx: &Context) {
        let k = lock_kinds();
        if !k
            .omp_mutex
            .iter()
            .any(|&k| crate::intervals::has_kind(s, k))
        {
            return;
        }
        let met = &mut self.omp;
        // OpenMP: acquire (START) .. acquired (ATOMIC) .. release (END), by wait id.
        let (acquiring_omp, held_omp) = (&mut self.acquiring_omp, &mut self.held_omp);
        let wait_at = self
            .wait_id
            .get_or_insert_with(|| crate::objects::ArgOf::new(s, "wait_id"));
        for e in s
            .own_events()
            .iter()
            .filter(|e| k.involved[e.kind as usize])
        {
            let mut wait_id = || crate::objects::word_of(s.args(e), wait_at.word(e)).unwrap_or(0);
            if k.omp_mutex.contains(&e.kind) && e.phase == 0 {
                acquiring_omp.push((wait_id(), e.t_ns, e.callsite, e.kind));
            } else if Some(e.kind) == k.acquired {
                let id = wait_id();
                if let Some(i) = acquiring_omp.iter().rposition(|p| p.0 == id) {
                    let (_, start, site, kind) = acquiring_omp.remove(i);
                    // By its construct, and its binary when it is in one's
                    // data (libomp's locks are mostly on its heap).
                    let name = || match in_image(cx, id) {
                        Some((binary, off)) => format!("{binary}+{off:#x}"),
                        None => format!("{} {id:#x}", omp_construct(kind)),
                    };
                    let l = met.take_of(&s.process, id, name, site);
                    l.releases_known = true;
                    l.acquires.push((start, e.t_ns));
                    held_omp.push((id, e.t_ns));
                }
            } else if k.omp_mutex.contains(&e.kind) && e.phase == 1 {
                let id = wait_id();
                if let Some(i) = held_omp.iter().rposition(|p| p.0 == id) {
                    let (_, from) = held_omp.remove(i);
                    // Taken above by this stream: never early.
                    let i = met.at_of(&s.process, id);
                    met.hold_at(i, from, e.t_ns);
                }
            }
        }
    }

    /// Adds the locks taken and released by the calls of `s`: a whole
    /// stream, or the intervals of the calls of its windows in START order
    /// ([`crate::window::Resolver`] of [`call_kinds`]), whose process's
    /// shared objects are among `objects` and whose process's context is
    /// `cx`.
    pub(crate) fn feed_calls(&mut self, s: &Stream, objects: &Objects, cx: &Context) {
        let k = lock_kinds();
        let calls = k.acquiring.iter().chain(&k.releasing).chain(&k.attempt);
        if !calls.into_iter().any(|&k| crate::intervals::has_kind(s, k)) {
            return;
        }
        // Locks taken by a call (the call is the wait) and released by another.
        // Locks of other processes are the same lock when the model shares them.
        let key = |id: u64, time: u64| {
            if s.model == 5 {
                (s.process.clone(), id)
            } else {
                shared_lock(objects, cx, &s.process, id, time)
            }
        };
        let lock_arg = |ev: usize| {
            let e = &s.events[ev];
            arg(s, e, "lock")
                .or_else(|| arg(s, e, "lck"))
                .or_else(|| arg(s, e, "coarray"))
                .unwrap_or(0)
        };
        let (met, held) = (&mut self.calls, &mut self.held);
        for iv in intervals(s)
            .iter()
            .filter(|iv| k.involved[iv.kind as usize] && iv.end != crate::window::OPEN)
        {
            if !k.acquiring.contains(&iv.kind)
                && Some(iv.kind) != k.attempt
                && !k.releasing.contains(&iv.kind)
            {
                continue;
            }
            let id = lock_arg(iv.start_event as usize);
            let taken = k.acquiring.contains(&iv.kind)
                || (Some(iv.kind) == k.attempt
                    && arg(s, &s.events[iv.end_event as usize], "result") == Some(1));
            if taken {
                let (object, off) = key(id, iv.start);
                let name = if object.is_empty() || s.model == 5 {
                    format!("{id:#x}")
                } else {
                    format!("{object}+{off:#x}")
                };
                let l = met.take((object, off), name, iv.callsite);
                l.acquires.push((iv.start, iv.end));
                held.push((id, iv.end));
            } else if k.releasing.contains(&iv.kind) {
                if let Some(i) = held.iter().rposition(|h| h.0 == id) {
                    let (_, from) = held.remove(i);
                    // The release may name another lock than the acquisition
                    // did (another allocation at its time).
                    met.hold(key(id, iv.start), from, iv.start);
                }
            }
        }
    }

    /// The part of the windows given: the OpenMP locks' acquisitions and
    /// holds before the calls', in the order the locks are first taken.
    pub(crate) fn finish(self) -> Part {
        let Builder { mut omp, calls, .. } = self;
        if calls.locks.is_empty() {
            return omp.part();
        }
        // A lock the calls take or release that OpenMP took: taken first
        // there, so that none of its holds is early.
        let mut calls_part = calls.part();
        for l in &mut calls_part.locks {
            if let Some(&i) = omp.by_key.get(&l.key) {
                let o = &mut omp.locks[i];
                if o.first.is_none() {
                    o.first = l.first.take();
                    if o.first.is_some() {
                        omp.taken.push(i);
                    }
                    o.early += l.early;
                } else {
                    l.early = 0;
                }
                o.acquires.append(&mut l.acquires);
                o.holds.append(&mut l.holds);
                o.releases_known |= l.releases_known;
            } else {
                let i = omp.locks.len();
                omp.by_key.insert(l.key.clone(), i);
                if l.first.is_some() {
                    omp.taken.push(i);
                }
                omp.locks.push(std::mem::take(l));
            }
        }
        omp.part()
    }
}

/// Every lock's numbers, most waiting first.
pub fn locks(t: &Trace) -> Vec<LockStats> {
    let contexts = Context::all(t);
    let none = Context::default();
    let parts: Vec<Part> = t
        .streams
        .iter()
        .map(|s| Part::of(s, &t.objects, contexts.get(&s.process).unwrap_or(&none)))
        .collect();
    if parts.iter().all(|p| p.locks.is_empty()) {
        return Vec::new();
    }
    let ids: Vec<Identity> = t.streams.iter().map(Identity::of).collect();
    merge(&ids, &t.callsites, &parts.iter().collect::<Vec<_>>())
}

/// Every lock's numbers, most waiting first, from every stream's part
/// (`parts[i]`: stream `i`'s).
pub fn merge(ids: &[Identity], sites: &[Callsite], parts: &[&Part]) -> Vec<LockStats> {
    // The locks in the order first taken (streams in order), kept in a map
    // as the whole trace's: locks of equal waiting and name come out in the
    // map's order.
    let mut locks: HashMap<(String, u64), Lock> = HashMap::default();
    for (si, part) in parts.iter().enumerate() {
        for pl in &part.locks {
            // Holds before the stream's first acquisition count when an
            // earlier stream took the lock.
            let (l, holds) = match locks.get_mut(&pl.key) {
                Some(l) => {
                    l.releases_known |= pl.early > 0;
                    (l, (&pl.holds, 0))
                }
                None => {
                    let Some((name, site)) = &pl.first else {
                        continue;
                    };
                    let l = locks.entry(pl.key.clone()).or_insert_with(|| Lock {
                        name: name.clone(),
                        site: *site,
                        taken: Vec::new(),
                        releases_known: false,
                    });
                    (l, (&pl.holds, pl.early as usize))
                }
            };
            l.releases_known |= pl.releases_known;
            l.taken.push(Taken {
                thread: si,
                acquires: &pl.acquires,
                holds,
            });
        }
    }
    let mut out: Vec<LockStats> = locks.into_values().map(|l| stats(ids, sites, l)).collect();
    out.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.lock.cmp(&b.lock)));
    out
}

fn stats(ids: &[Identity], sites: &[Callsite], l: Lock) -> LockStats {
    // Every acquisition in the order it completes, and every hold in the
    // order it starts (streams in order where as early).
    let (acquires, wait_ns) = in_order(l.taken.iter().map(|t| (t.acquires, 0)), |a| a.1);
    let (holds, hold_ns) = in_order(l.taken.iter().map(|t| t.holds), |h| h.0);
    let thread: Vec<usize> = l.taken.iter().map(|t| t.thread).collect();
    let mut started = Merged::new(&holds, |h| h.0);
    // The last two holds started before the acquisition's end: (thread, to).
    let mut last_two: [Option<(usize, u64)>; 2] = [None; 2];
    let mut contended = 0;
    let mut waiters: Vec<usize> = Vec::new();
    for (i, (from, to)) in Merged::new(&acquires, |a| a.1) {
        while started.peek().is_some_and(|h| h < to) {
            let (j, (_, held_to)) = started.next().expect("peeked");
            last_two = [Some((thread[j], held_to)), last_two[0]];
        }
        // The hold just before this acquisition completed: still held by
        // another thread after this one started acquiring?
        let mine = thread[i];
        let blocked = last_two
            .iter()
            .flatten()
            .any(|&(h, held_to)| h != mine && held_to > from);
        if blocked {
            contended += 1;
            if !waiters.contains(&mine) {
                waiters.push(mine);
            }
        }
    }
    let mut threads: Vec<usize> = l
        .taken
        .iter()
        .filter(|t| !t.acquires.is_empty())
        .map(|t| t.thread)
        .collect();
    threads.dedup();
    LockStats {
        lock: l.name,
        location: location_in(sites, Some(l.site)),
        acquisitions: l.taken.iter().map(|t| t.acquires.len() as u64).sum(),
        contended,
        wait_ns,
        hold_ns: l.releases_known.then_some(hold_ns),
        threads: threads.iter().map(|&i| ids[i].name.clone()).collect(),
        waiters: waiters.len(),
    }
}

/// `lock_contention`: a lock whose waiting takes at least `LOCK_SHARE` (5%) of
/// the working time of the threads using it, with at least two threads
/// taking it and one of them waiting for another; from the [`locks`] of the
/// streams of `ids`.
pub fn contention_in(ids: &[Identity], locks: &[LockStats], total_time: u64) -> Vec<Finding> {
    let mut out = Vec::new();
    for l in locks {
        let their_time: u64 = ids
            .iter()
            .filter(|id| l.threads.contains(&id.name))
            .map(|id| id.active_span)
            .sum::<u64>()
            .max(1);
        let share = l.wait_ns as f64 / their_time as f64;
        if l.threads.len() < 2 || l.waiters == 0 || share < LOCK_SHARE {
            continue;
        }
        let held = match l.hold_ns {
            Some(h) => format!(
                "; it is held {:.3} ms in all ({:.3} ms per acquisition)",
                h as f64 / 1e6,
                h as f64 / 1e6 / l.acquisitions.max(1) as f64
            ),
            None => String::new(),
        };
        out.push(Finding {
            kind: "lock_contention".into(),
            severity: l.wait_ns as f64 / total_time as f64,
            threads: l.threads.clone(),
            location: l.location.clone(),
            message: format!(
                "{} threads wait {:.1}% of their time ({:.3} ms over {} acquisitions) for lock {}; {} of them \
                 waited while another held it ({} contended acquisitions){held}. Hold it for less time (move work \
                 out of the critical section), split it, or use atomics or reductions instead.",
                l.threads.len(),
                100.0 * share,
                l.wait_ns as f64 / 1e6,
                l.acquisitions,
                l.lock,
                l.waiters,
                l.contended,
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {

    /// A lock found by its id and process is the one its full key finds,
    /// whichever process met the id last, and is named once.
    #[test]
    fn locks_by_id_are_those_of_their_process() {
        let mut met = super::Met::default();
        let a = met.at_of("h-1", 7);
        let b = met.at_of("h-2", 7);
        assert_ne!(a, b);
        assert_eq!(met.at_of("h-1", 7), a);
        assert_eq!(met.at(("h-2".to_string(), 7)), b);
        assert_eq!(met.at_of("h-2", 7), b);
        assert_eq!(met.at_of("h-1", 8), met.at(("h-1".to_string(), 8)));
        let mut named = 0;
        for _ in 0..3 {
            met.take_of(
                "h-1",
                7,
                || {
                    named += 1;
                    "L".to_string()
                },
                5,
            );
        }
        assert_eq!(named, 1);
        assert_eq!(met.locks[a].first, Some(("L".to_string(), 5)));
        assert_eq!(met.taken, vec![a]);
        assert_eq!(met.locks.len(), 3);
    }

    /// Streams' acquisitions and holds merged in place count what a plain
    /// reading counts: every hold in one list sorted (stably) by its start,
    /// each acquisition against the last two holds started before it
    /// completed. With many equal times, lists out of order (OpenMP's then
    /// the calls'), a stream that only releases, and early holds.
    #[test]
    fn contention_merged_in_place_is_as_counted_over_every_hold() {
        use super::{merge, Part, PartLock};
        use crate::summary::Identity;
        use crate::trace::Stream;
        let n = 4;
        let streams: Vec<Stream> = (0..n).map(|i| Stream::empty("h-1", i, 1, 16)).collect();
        let ids: Vec<Identity> = streams.iter().map(Identity::of).collect();
        let mut next = crate::testing::below(99);
        for round in 0..30 {
            let parts: Vec<Part> = (0..n)
                .map(|m| {
                    let mut pl = PartLock {
                        key: ("h-1".into(), 7),
                        first: (m != 3).then(|| ("lock".to_string(), 0)),
                        releases_known: true,
                        ..PartLock::default()
                    };
                    let (mut t, mut acquires, mut holds) = (0, Vec::new(), Vec::new());
                    for _ in 0..(if m == 3 { 5 } else { 60 }) {
                        // Times on a coarse grid: many equal.
                        t += 10 * next(4);
                        let (from, to) = (t, t + 10 * next(3));
                        let end = to + 10 + 10 * next(3);
                        if m != 3 {
                            acquires.push((from, to));
                        }
                        holds.push((to, end));
                        t = end;
                    }
                    // Out of order: the tail's acquisitions and holds first.
                    if round % 3 == 1 && m == 1 {
                        acquires.rotate_left(40);
                        holds.rotate_left(40);
                    }
                    pl.acquires = acquires.into_iter().collect();
                    pl.holds = holds.into_iter().collect();
                    pl.early = if m == 0 { (round % 4) as u32 } else { 0 };
                    Part { locks: vec![pl] }
                })
                .collect();
            let refs: Vec<&Part> = parts.iter().collect();
            let got = merge(&ids, &[], &refs);
            assert_eq!(got.len(), 1);
            // The plain reading.
            let mut holds: Vec<(usize, u64, u64)> = Vec::new();
            let mut acquires: Vec<(usize, u64, u64)> = Vec::new();
            for (m, p) in parts.iter().enumerate() {
                let pl = &p.locks[0];
                let skip = if m == 0 { pl.early as usize } else { 0 };
                holds.extend(pl.holds.iter().skip(skip).map(|(a, b)| (m, a, b)));
                acquires.extend(pl.acquires.iter().map(|(a, b)| (m, a, b)));
            }
            holds.sort_by_key(|h| h.1);
            let mut contended = 0;
            let mut waiters = std::collections::BTreeSet::new();
            for &(m, from, to) in &acquires {
                let before = holds.partition_point(|h| h.1 < to);
                if holds[..before]
                    .iter()
                    .rev()
                    .take(2)
                    .any(|h| h.0 != m && h.2 > from)
                {
                    contended += 1;
                    waiters.insert(m);
                }
            }
            let l = &got[0];
            assert_eq!(l.contended, contended, "round {round}");
            assert!(contended > 0 && contended < acquires.len() as u64);
            assert_eq!(l.waiters, waiters.len());
            assert_eq!(l.acquisitions, acquires.len() as u64);
            let wait: u64 = acquires.iter().map(|a| a.2 - a.1).sum();
            let held: u64 = holds.iter().map(|h| h.2 - h.1).sum();
            assert_eq!((l.wait_ns, l.hold_ns), (wait, Some(held)), "round {round}");
            assert_eq!(l.threads.len(), 3);
        }
        // A summary saying more early holds than it has (a damaged message
        // from another rank): none of them counts, and nothing panics.
        let damaged = Part {
            locks: vec![PartLock {
                key: ("h-1".into(), 7),
                first: Some(("lock".to_string(), 0)),
                acquires: [(0, 5)].into_iter().collect(),
                holds: [(5, 9)].into_iter().collect(),
                early: 3,
                releases_known: true,
            }],
        };
        let got = merge(&ids, &[], &[&damaged]);
        assert_eq!((got[0].acquisitions, got[0].hold_ns), (1, Some(0)));
    }

    #[test]
    fn lock_variables_are_named_as_the_source_names_them() {
        use super::variable_name;
        assert_eq!(variable_name(".gomp_critical_user_.var"), "omp critical");
        assert_eq!(
            variable_name(".gomp_critical_user_io.var"),
            "omp critical(io)"
        );
        assert_eq!(
            variable_name(".gomp_critical_user_.reduction.var"),
            "omp reduction"
        );
        assert_eq!(variable_name("_ZN6solver4lockE"), "solver::lock");
        assert_eq!(variable_name("lock"), "lock");
    }

    use super::*;
    use crate::trace::Process;

    /// The number of the kind named `name`.
    fn kind(name: &str) -> u16 {
        kinds::kind_by_name(name).unwrap().id
    }

    fn stream(
        process: &str,
        stream: u32,
        model: u32,
        events: &[(u64, u16, u8, Vec<u64>)],
    ) -> Stream {
        let mut s = Stream::empty(process, stream, model, 8);
        for (t_ns, kind, phase, args) in events {
            s.push(*t_ns, *kind, *phase, (*t_ns % 3) as u32, args);
        }
        s
    }

    /// A trace of two OpenSHMEM PEs taking a lock in turn, one of them with
    /// two more threads taking an OpenMP critical section, and a lock
    /// released after its allocation was freed.
    fn trace() -> Trace {
        let (set, clear) = (kind("GASP_SHMEM_SET_LOCK"), kind("GASP_SHMEM_CLEAR_LOCK"));
        let (critical, acquired) = (kind("GASP_OMP_CRITICAL"), kind("GASP_OMP_MUTEX_ACQUIRED"));
        let (malloc, free) = (kind("GASP_SHMEM_MALLOC"), kind("GASP_SHMEM_FREE"));
        let call = |k: u16, from: u64, to: u64, lock: u64| {
            [(from, k, 0, vec![lock, 0]), (to, k, 1, vec![lock, 0])]
        };
        let mut a: Vec<(u64, u16, u8, Vec<u64>)> = vec![
            (0, malloc, 0, vec![8, 0]),
            (1, malloc, 1, vec![8, 0x1000, 0]),
        ];
        a.extend(call(set, 10, 20, 0x1000));
        a.extend(call(clear, 50, 51, 0x1000));
        // Freed while held: the release names the lock by its address.
        a.extend(call(set, 60, 61, 0x1000));
        a.extend([
            (70, free, 0, vec![0x1000, 0]),
            (71, free, 1, vec![0x1000, 0]),
        ]);
        a.extend(call(clear, 80, 81, 0x1000));
        a.extend(call(set, 90, 91, 0x1000));
        a.extend(call(clear, 95, 96, 0x1000));
        let mut b: Vec<(u64, u16, u8, Vec<u64>)> = vec![
            (0, malloc, 0, vec![8, 0]),
            (1, malloc, 1, vec![8, 0x2000, 0]),
        ];
        b.extend(call(set, 15, 55, 0x2000));
        b.extend(call(clear, 57, 58, 0x2000));
        let omp = |from: u64, got: u64, to: u64| {
            [
                (from, critical, 0, vec![7, 0]),
                (got, acquired, 2, vec![3, 7, 0]),
                (to, critical, 1, vec![7, 0]),
            ]
        };
        let mut c: Vec<(u64, u16, u8, Vec<u64>)> = Vec::new();
        c.extend(omp(5, 30, 40));
        c.extend(omp(45, 46, 47));
        let mut d: Vec<(u64, u16, u8, Vec<u64>)> = Vec::new();
        d.extend(omp(6, 6, 31));
        // Not in an allocation of its process: the lock of address 0x1000.
        let mut e: Vec<(u64, u16, u8, Vec<u64>)> = Vec::new();
        e.extend(call(set, 100, 101, 0x1000));
        e.extend(call(clear, 102, 103, 0x1000));
        let mut t = Trace {
            streams: vec![
                stream("b", 1, 4, &e),
                stream("a", 0, 4, &a),
                stream("b", 0, 4, &b),
                stream("a", 1, 4, &c),
                stream("a", 2, 4, &d),
            ],
            processes: ["a", "b"]
                .map(|n| Process {
                    name: n.into(),
                    manifest: None,
                })
                .into(),
            callsites: vec![
                Callsite {
                    file: Some("app.c".into()),
                    line: 12,
                    col: 0,
                },
                Callsite {
                    file: Some("app.c".into()),
                    line: 20,
                    col: 0,
                },
                Callsite {
                    file: None,
                    line: 0,
                    col: 0,
                },
            ],
            ..Trace::default()
        };
        t.objects = Objects::build(&t.streams, &t.callsites);
        t
    }

    #[test]
    fn locks_of_a_small_trace() {
        let t = trace();
        let l = locks(&t);
        let got: Vec<_> = l
            .iter()
            .map(|l| {
                (
                    l.lock.as_str(),
                    l.acquisitions,
                    l.contended,
                    l.wait_ns,
                    l.hold_ns,
                    l.threads.len(),
                    l.waiters,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("app.c:12+0x0", 3, 1, 51, Some(32), 2, 1),
                ("omp critical 0x7", 3, 1, 26, Some(36), 2, 1),
                ("0x1000", 2, 0, 2, Some(24), 2, 0),
            ]
        );
        let f = contention_in(
            &t.streams.iter().map(Identity::of).collect::<Vec<_>>(),
            &l,
            100,
        );
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn parts_are_of_their_stream_alone() {
        let t = trace();
        let contexts = Context::all(&t);
        let ids: Vec<Identity> = t.streams.iter().map(Identity::of).collect();
        let parts: Vec<Part> = t
            .streams
            .iter()
            .map(|s| Part::of(s, &t.objects, &contexts[&s.process]))
            .collect();
        // Made in two halves, read back from JSON: the same merge.
        let halves: Vec<Part> = [&t.streams[..2], &t.streams[2..]]
            .iter()
            .flat_map(|h| {
                h.iter()
                    .map(|s| Part::of(s, &t.objects, &contexts[&s.process]))
                    .collect::<Vec<_>>()
            })
            .map(|p| serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap())
            .collect();
        assert_eq!(parts, halves);
        let merged = merge(&ids, &t.callsites, &halves.iter().collect::<Vec<_>>());
        assert_eq!(format!("{merged:?}"), format!("{:?}", locks(&t)));
        // The release after the free names another lock than its acquisition,
        // which the stream takes only later: it counts when an earlier stream
        // took that lock.
        assert_eq!(parts[1].locks.len(), 2);
        assert_eq!(parts[1].locks[1].first.as_ref().unwrap().0, "0x1000");
        assert_eq!(parts[1].locks[1].early, 1);
        let later = merge(
            &ids[1..],
            &t.callsites,
            &parts[1..].iter().collect::<Vec<_>>(),
        );
        assert_eq!((later[2].acquisitions, later[2].hold_ns), (1, Some(4)));
    }
}
