//! Shared objects: the symmetric allocations of OpenSHMEM programs and the
//! windows of MPI programs, so that an address (or a window displacement)
//! becomes (object, offset). An object is named by the source line that
//! allocated it.

use rayon::prelude::*;
use rustc_hash::FxHashMap as HashMap;

use gaspard_format::codec::arg_layout;
use gaspard_format::kinds;

use crate::trace::{Callsite, Event, Stream};

/// One allocation, alive from `from` to `to` (ns).
#[derive(Debug, Clone)]
pub struct Allocation {
    /// First address.
    pub base: u64,
    /// Bytes.
    pub size: u64,
    /// When it was allocated.
    pub from: u64,
    /// When it was freed (`u64::MAX` if never).
    pub to: u64,
    /// The allocating source line, or the allocation's order.
    pub name: String,
    /// Order among the process's shared objects: symmetric allocations and
    /// windows are made collectively, in the same order on every process, so
    /// this names the same object everywhere.
    pub ordinal: u32,
}

/// An MPI window.
#[derive(Debug, Clone)]
pub struct Window {
    /// Allocating source line, or the window's order.
    pub name: String,
    /// Displacement unit in bytes.
    pub disp_unit: u64,
    /// Bytes in this process.
    pub size: u64,
    /// Order among the process's shared objects (see [`Allocation::ordinal`]).
    pub ordinal: u32,
}

/// The objects of every process.
#[derive(Debug, Default)]
pub struct Objects {
    allocations: HashMap<String, Vec<Allocation>>,
    windows: HashMap<(String, u64), Window>,
    /// Per process, its allocations not freed yet, by first address (the
    /// last made last).
    open: HashMap<String, HashMap<u64, Vec<usize>>>,
    /// Per process, its allocations by address ([`ByAddress`]).
    by_address: HashMap<String, ByAddress>,
}

/// One process's allocations ([`Objects::allocations_of`]).
#[derive(Debug, Clone, Copy)]
pub struct ProcessAllocations<'a> {
    made: &'a [Allocation],
    by_address: &'a ByAddress,
}

impl<'a> ProcessAllocations<'a> {
    /// [`Objects::find_allocation`] in this process.
    pub fn find(&self, addr: u64, t: u64) -> Option<(&'a Allocation, u64)> {
        let i = self.by_address.find(self.made, addr, t)?;
        let a = &self.made[i as usize];
        Some((a, addr - a.base))
    }
}

/// A process's allocations by address, for [`Objects::find_allocation`]:
/// a program may make thousands of objects and millions of accesses, too
/// many to look at every allocation for every access.
#[derive(Debug, Default)]
struct ByAddress {
    /// Its first addresses, each once, ascending.
    bases: Vec<u64>,
    /// For each, the furthest end (exclusive) of the allocations at this
    /// first address or a lower one: no allocation at or before `bases[i]`
    /// holds an address at or past `reach[i]`.
    reach: Vec<u64>,
    /// For each, its allocations in the order made.
    at: Vec<Vec<u32>>,
    /// For each, whether its allocations' lifetimes follow one another
    /// without overlapping (each freed before the next is made), as they do
    /// unless the program lost track of its memory or the trace is damaged:
    /// then at most one is alive at a time, found by bisection.
    in_turn: Vec<bool>,
}

impl ByAddress {
    fn new(v: &[Allocation]) -> ByAddress {
        let mut groups: std::collections::BTreeMap<u64, Vec<u32>> = Default::default();
        for (i, a) in v.iter().enumerate() {
            groups.entry(a.base).or_default().push(i as u32);
        }
        let mut out = ByAddress::default();
        let mut reach = 0u64;
        for (base, at) in groups {
            for &i in &at {
                let a = &v[i as usize];
                reach = reach.max(a.base.saturating_add(a.size.max(1)));
            }
            let in_turn = at.windows(2).all(|w| {
                let (a, b) = (&v[w[0] as usize], &v[w[1] as usize]);
                a.from <= a.to && a.to < b.from
            });
            out.bases.push(base);
            out.reach.push(reach);
            out.at.push(at);
            out.in_turn.push(in_turn);
        }
        out
    }

    /// The first made (lowest index) of the allocations holding `addr` at
    /// time `t`.
    fn find(&self, v: &[Allocation], addr: u64, t: u64) -> Option<u32> {
        let holds = |i: u32| {
            let a = &v[i as usize];
            a.from <= t && t <= a.to && a.base <= addr && addr - a.base < a.size.max(1)
        };
        let mut best: Option<u32> = None;
        let p = self.bases.partition_point(|&b| b <= addr);
        for g in (0..p).rev() {
            if self.reach[g] <= addr {
                break;
            }
            let at = &self.at[g];
            let found = if self.in_turn[g] {
                // Lifetimes one after the other: the first ending at `t` or
                // later is the only one that may be alive at `t`.
                let k = at.partition_point(|&i| v[i as usize].to < t);
                at.get(k).copied().filter(|&i| holds(i))
            } else {
                at.iter().copied().find(|&i| holds(i))
            };
            if let Some(i) = found {
                best = Some(best.map_or(i, |b| b.min(i)));
            }
        }
        best
    }
}

/// An event's arguments by name.
pub fn args_by_name(s: &Stream, e: &Event) -> HashMap<&'static str, u64> {
    let mut out = HashMap::default();
    let mut at = 0;
    for (n, _, w) in arg_layout(e.kind, e.phase, (s.pts_bytes as usize).div_ceil(8), e.flags) {
        if let Some(&v) = s.args(e).get(at) {
            out.insert(n, v);
        }
        at += w;
    }
    out
}

/// What was found for each kind, phase and flags of a stream's events
/// met, in the order met: a short list walked in order (a stream has few),
/// and those past [`ByKey::SEEN`] found by map too.
#[derive(Debug)]
struct ByKey<T> {
    seen: Vec<(Key, T)>,
    more: HashMap<Key, usize>,
}

type Key = (u16, u8, u8);

impl<T> ByKey<T> {
    /// Kinds, phases and flags looked for in order.
    const SEEN: usize = 16;

    fn new() -> ByKey<T> {
        ByKey {
            seen: Vec::new(),
            more: HashMap::default(),
        }
    }

    /// The place of what was found for events like `e` (of its kind, phase
    /// and flags), made by `make` when first met.
    #[inline]
    fn index(&mut self, e: &Event, make: impl FnOnce(Key) -> T) -> usize {
        let key = (e.kind, e.phase, e.flags);
        match self.seen[..self.seen.len().min(Self::SEEN)]
            .iter()
            .position(|(k, _)| *k == key)
        {
            Some(i) => i,
            None => self.locate(key, make),
        }
    }

    #[cold]
    fn locate(&mut self, key: Key, make: impl FnOnce(Key) -> T) -> usize {
        if let Some(&i) = self.more.get(&key) {
            return i;
        }
        self.seen.push((key, make(key)));
        let i = self.seen.len() - 1;
        if i >= Self::SEEN {
            self.more.insert(key, i);
        }
        i
    }

    /// What was found at place `i` ([`ByKey::index`]).
    #[inline]
    fn get(&self, i: usize) -> Option<&T> {
        self.seen.get(i).map(|(_, t)| t)
    }
}

/// The arguments of events of `key`'s kind, phase and flags (a stream's of
/// `pts_words`-word pointers-to-shared): each name and its first word.
fn names_of((kind, phase, flags): Key, pts_words: usize) -> Vec<(&'static str, usize)> {
    let mut at = 0;
    let mut names = Vec::new();
    for (n, _, w) in arg_layout(kind, phase, pts_words, flags) {
        names.push((n, at));
        at += w;
    }
    names
}

/// The arguments of events by name, as [`args_by_name`] gives them, without
/// a map per event: each kind's (phase's, flags') names and places are found
/// once per stream and kept.
#[derive(Debug)]
pub struct ArgNames {
    pts_words: usize,
    /// Per kind, phase and flags met, their (name, word) list.
    names: ByKey<Vec<(&'static str, usize)>>,
}

/// One event's arguments by name ([`ArgNames::of`]).
#[derive(Debug, Clone, Copy)]
pub struct Named<'a> {
    names: &'a [(&'static str, usize)],
    words: &'a [u64],
}

impl Named<'_> {
    /// The argument `name`, as the map of [`args_by_name`] holds it (the
    /// last of that name whose word the event has).
    pub fn get(&self, name: &str) -> Option<&u64> {
        self.names
            .iter()
            .rev()
            .find(|&&(n, at)| n == name && at < self.words.len())
            .map(|&(_, at)| &self.words[at])
    }
}

impl ArgNames {
    /// For the events of `s`.
    pub fn new(s: &Stream) -> ArgNames {
        ArgNames {
            pts_words: (s.pts_bytes as usize).div_ceil(8),
            names: ByKey::new(),
        }
    }

    /// The arguments of `e`, one of the events of `s`.
    pub fn of<'a>(&'a mut self, s: &'a Stream, e: &Event) -> Named<'a> {
        let i = self.index(e);
        self.named(i, s, e)
    }

    /// The arguments of `a` and of `b`, two of the events of `s`.
    pub fn pair<'a>(&'a mut self, s: &'a Stream, a: &Event, b: &Event) -> (Named<'a>, Named<'a>) {
        let (i, j) = (self.index(a), self.index(b));
        (self.named(i, s, a), self.named(j, s, b))
    }

    #[inline]
    fn index(&mut self, e: &Event) -> usize {
        let pts_words = self.pts_words;
        self.names.index(e, |key| names_of(key, pts_words))
    }

    #[inline]
    fn named<'a>(&'a self, i: usize, s: &'a Stream, e: &Event) -> Named<'a> {
        Named {
            names: self.names.get(i).map_or(&[], |n| n.as_slice()),
            words: s.args(e),
        }
    }
}

/// Where a few arguments of events are among their words, by name, as
/// [`Named::get`] finds each, found once per kind, phase and flags rather
/// than by comparing names for every event: [`Places::of`] an event, then
/// [`Places::get`] each of its arguments.
#[derive(Debug)]
pub(crate) struct Places {
    names: &'static [&'static str],
    pts_words: usize,
    /// Per kind, phase and flags met, each name's places among their
    /// words, the last first.
    places: ByKey<Vec<Vec<usize>>>,
}

impl Places {
    /// For the arguments `names` of the events of `s`.
    pub(crate) fn new(s: &Stream, names: &'static [&'static str]) -> Places {
        Places {
            names,
            pts_words: (s.pts_bytes as usize).div_ceil(8),
            places: ByKey::new(),
        }
    }

    /// Where the arguments of events like `e` (of its kind, phase and
    /// flags) are: for [`Places::get`].
    #[inline]
    pub(crate) fn of(&mut self, e: &Event) -> usize {
        let (names, pts_words) = (self.names, self.pts_words);
        self.places.index(e, |key| {
            let layout = names_of(key, pts_words);
            (names.iter())
                .map(|&name| {
                    (layout.iter().rev())
                        .filter(|(n, _)| *n == name)
                        .map(|&(_, at)| at)
                        .collect()
                })
                .collect()
        })
    }

    /// Argument `name` (its place among the names given) of an event whose
    /// arguments are where `at` ([`Places::of`]) says, and whose words are
    /// `words`: the last of that name that `words` holds.
    #[inline]
    pub(crate) fn get(&self, at: usize, name: usize, words: &[u64]) -> Option<u64> {
        let places = self.places.get(at)?.get(name)?;
        places.iter().find(|&&w| w < words.len()).map(|&w| words[w])
    }
}

/// One argument of an event, by name, without building the whole map.
pub fn arg(s: &Stream, e: &Event, name: &str) -> Option<u64> {
    let mut at = 0;
    for (n, _, w) in arg_layout(e.kind, e.phase, (s.pts_bytes as usize).div_ceil(8), e.flags) {
        if n == name {
            return s.args(e).get(at).copied();
        }
        at += w;
    }
    None
}

/// No word ([`ArgOf::word`] of an argument events do not have).
pub(crate) const NO_WORD: u16 = u16::MAX;

/// Word `w` ([`ArgOf::word`]) of `words`, if there.
#[inline(always)]
pub(crate) fn word_of(words: &[u64], w: u16) -> Option<u64> {
    if w == NO_WORD {
        return None;
    }
    words.get(w as usize).copied()
}

/// One argument of events, by name, as [`arg`] gives it, with where it is
/// among the words found once per kind, phase and flags (one stream's).
pub(crate) struct ArgOf {
    name: &'static str,
    pts_words: usize,
    /// Per kind, phase and flags met, the argument's word ([`word_of`]):
    /// a short list walked in order finds them faster than a map
    /// (transfers of two kinds in turn would miss a single remembered one
    /// every time).
    words: ByKey<u16>,
}

impl ArgOf {
    /// The argument `name` of the events of `s`.
    pub(crate) fn new(s: &Stream, name: &'static str) -> ArgOf {
        ArgOf {
            name,
            pts_words: (s.pts_bytes as usize).div_ceil(8),
            words: ByKey::new(),
        }
    }

    /// Where the argument is among the words of events like `e` (of its
    /// kind, phase and flags), as a [`word_of`] index.
    pub(crate) fn word(&mut self, e: &Event) -> u16 {
        let (name, pts_words) = (self.name, self.pts_words);
        let i = self.words.index(e, |key| {
            (names_of(key, pts_words).iter())
                .find(|(n, _)| *n == name)
                .and_then(|&(_, w)| u16::try_from(w).ok())
                .filter(|&w| w != NO_WORD)
                .unwrap_or(NO_WORD)
        });
        self.words.get(i).copied().unwrap_or(NO_WORD)
    }
}

fn site_name(sites: &[Callsite], e: &Event, fallback: String) -> String {
    match sites.get(e.callsite as usize) {
        Some(Callsite {
            file: Some(f),
            line,
            ..
        }) => {
            let short = f.rsplit('/').next().unwrap_or(f);
            format!("{short}:{line}")
        }
        _ => fallback,
    }
}

/// The kinds whose events make and free shared objects ([`Objects::build`]).
pub(crate) const OBJECT_KINDS: [&str; 6] = [
    "GASP_SHMEM_MALLOC",
    "GASP_SHMEM_CALLOC",
    "GASP_SHMEM_REALLOC",
    "GASP_SHMEM_FREE",
    "GASP_MPI_WIN_ALLOCATE",
    "GASP_MPI_WIN_CREATE",
];

impl Objects {
    /// Finds the objects the streams allocate.
    pub fn build(streams: &[Stream], sites: &[Callsite]) -> Objects {
        // The kinds looked at below, a flag each by number: most events are
        // of none of them and are passed over without comparing names.
        static WANTED: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
        let wanted = WANTED.get_or_init(|| {
            let mut v = vec![false; 1 << 16];
            for name in OBJECT_KINDS {
                if let Some(k) = kinds::kind_by_name(name) {
                    v[k.id as usize] = true;
                }
            }
            v
        });
        // Where those events are, stream by stream in parallel (the events
        // are read once, the objects then made in stream order), looked for
        // only in a stream that has events of such kinds (the kinds of its
        // events are known with its intervals, which every analysis needs).
        let hits: Vec<Vec<u32>> = streams
            .par_iter()
            .map(|s| {
                if !crate::intervals::has_any_kind(s, wanted) {
                    return Vec::new();
                }
                (0u32..)
                    .zip(&s.events)
                    .filter(|(_, e)| wanted[e.kind as usize])
                    .map(|(i, _)| i)
                    .collect()
            })
            .collect();
        let mut o = Objects::default();
        for (s, hits) in streams.iter().zip(&hits) {
            let mut open: Option<String> = None;
            let mut count: u32 = 0;
            for e in hits.iter().map(|&i| &s.events[i as usize]) {
                let Some(k) = kinds::kind(e.kind) else {
                    continue;
                };
                match (k.name, e.phase) {
                    ("GASP_SHMEM_MALLOC" | "GASP_SHMEM_CALLOC" | "GASP_SHMEM_REALLOC", 0) => {
                        if k.name == "GASP_SHMEM_REALLOC" {
                            let a = args_by_name(s, e);
                            o.free(&s.process, a.get("ptr").copied().unwrap_or(0), e.t_ns);
                        }
                        count += 1;
                        open = Some(site_name(sites, e, format!("shmem allocation {count}")));
                    }
                    ("GASP_SHMEM_MALLOC" | "GASP_SHMEM_CALLOC" | "GASP_SHMEM_REALLOC", 1) => {
                        let a = args_by_name(s, e);
                        let base = a.get("ptr").or(a.get("newptr")).copied().unwrap_or(0);
                        let size = match k.name {
                            "GASP_SHMEM_CALLOC" => a
                                .get("count")
                                .copied()
                                .unwrap_or(0)
                                .saturating_mul(a.get("size").copied().unwrap_or(0)),
                            _ => a.get("size").copied().unwrap_or(0),
                        };
                        if base != 0 {
                            let name = open
                                .take()
                                .unwrap_or_else(|| format!("shmem allocation {count}"));
                            let made = o.allocations.entry(s.process.clone()).or_default();
                            o.open
                                .entry(s.process.clone())
                                .or_default()
                                .entry(base)
                                .or_default()
                                .push(made.len());
                            made.push(Allocation {
                                base,
                                size,
                                from: e.t_ns,
                                to: u64::MAX,
                                name,
                                // An END without its START (damage) has no count of its own.
                                ordinal: count.saturating_sub(1),
                            });
                        }
                    }
                    ("GASP_SHMEM_FREE", 0) => {
                        let a = args_by_name(s, e);
                        o.free(&s.process, a.get("ptr").copied().unwrap_or(0), e.t_ns);
                    }
                    ("GASP_MPI_WIN_ALLOCATE" | "GASP_MPI_WIN_CREATE", 1) => {
                        let a = args_by_name(s, e);
                        count += 1;
                        let name = site_name(sites, e, format!("window {count}"));
                        o.windows.insert(
                            (s.process.clone(), a.get("win").copied().unwrap_or(0)),
                            Window {
                                name,
                                disp_unit: a.get("disp_unit").copied().unwrap_or(1).max(1),
                                size: a.get("size").copied().unwrap_or(0),
                                ordinal: count.saturating_sub(1),
                            },
                        );
                    }
                    _ => {}
                }
            }
        }
        o.by_address = o
            .allocations
            .iter()
            .map(|(p, v)| (p.clone(), ByAddress::new(v)))
            .collect();
        o.open = HashMap::default();
        o
    }

    /// Ends the last allocation at `ptr` not freed yet.
    fn free(&mut self, process: &str, ptr: u64, t: u64) {
        let Some(i) = self
            .open
            .get_mut(process)
            .and_then(|o| o.get_mut(&ptr))
            .and_then(Vec::pop)
        else {
            return;
        };
        if let Some(a) = self.allocations.get_mut(process).and_then(|v| v.get_mut(i)) {
            a.to = t;
        }
    }

    /// The allocation holding `addr` at time `t` in `process`, and the offset in it.
    pub fn find(&self, process: &str, addr: u64, t: u64) -> Option<(&str, u64)> {
        self.find_allocation(process, addr, t)
            .map(|(a, off)| (a.name.as_str(), off))
    }

    /// The allocation holding `addr` at time `t` in `process`, and the offset in it.
    pub fn find_allocation(&self, process: &str, addr: u64, t: u64) -> Option<(&Allocation, u64)> {
        self.allocations_of(process)?.find(addr, t)
    }

    /// The allocations of `process`, to look for many addresses in (the
    /// process found once).
    pub fn allocations_of(&self, process: &str) -> Option<ProcessAllocations<'_>> {
        Some(ProcessAllocations {
            made: self.allocations.get(process)?,
            by_address: self.by_address.get(process)?,
        })
    }

    /// The window `win` of `process`.
    pub fn window(&self, process: &str, win: u64) -> Option<&Window> {
        self.windows.get(&(process.to_string(), win))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_by_name_are_those_of_the_map() {
        // Every kind, phase and flags, with its words whole, cut short and
        // none, with pointers-to-shared of one and two words.
        for pts_bytes in [8, 16] {
            let mut s = Stream::empty("h-1", 0, 1, pts_bytes);
            let mut met = Vec::new();
            for k in kinds::all_kinds() {
                for phase in 0..3u8 {
                    for flags in 0..4u8 {
                        let words: usize =
                            arg_layout(k.id, phase, (pts_bytes as usize).div_ceil(8), flags)
                                .iter()
                                .map(|(_, _, w)| w)
                                .sum();
                        for n in [words, words / 2, 0] {
                            let args: Vec<u64> = (0..n as u64).map(|i| i * 7 + 1).collect();
                            s.push(0, k.id, phase, 0, &args);
                            s.events.last_mut().unwrap().flags = flags;
                            met.push(s.events.len() - 1);
                        }
                    }
                }
            }
            let mut names = ArgNames::new(&s);
            // A few arguments found where their kinds put them, as by name;
            // with more kinds, phases and flags than the list holds.
            const NAMES: &[&str] = &["pe", "peer", "target", "nbytes", "no such argument"];
            let mut places = Places::new(&s, NAMES);
            let mut found = 0;
            for i in met {
                let e = s.events[i].clone();
                let map = args_by_name(&s, &e);
                let named = names.of(&s, &e);
                for (n, _, _) in
                    arg_layout(e.kind, e.phase, (pts_bytes as usize).div_ceil(8), e.flags)
                {
                    assert_eq!(named.get(n), map.get(n), "{} {n}", e.kind);
                }
                assert_eq!(named.get("no such argument"), None);
                let words = s.args(&e);
                let at = places.of(&e);
                for (i, n) in NAMES.iter().enumerate() {
                    let got = places.get(at, i, words);
                    assert_eq!(got, named.get(n).copied(), "{} {n} {}", e.kind, words.len());
                    found += usize::from(got.is_some());
                }
            }
            let kinds = places.places.seen.len();
            assert!(kinds > ByKey::<()>::SEEN && found > 100, "{kinds} {found}");
        }
    }

    /// What `find_allocation` gives, by looking at every allocation.
    fn every(v: &[Allocation], addr: u64, t: u64) -> Option<u32> {
        v.iter()
            .position(|a| {
                a.from <= t && t <= a.to && a.base <= addr && addr - a.base < a.size.max(1)
            })
            .map(|i| i as u32)
    }

    fn alloc(base: u64, size: u64, from: u64, to: u64) -> Allocation {
        Allocation {
            base,
            size,
            from,
            to,
            name: String::new(),
            ordinal: 0,
        }
    }

    #[test]
    fn allocations_found_by_address_as_by_looking_at_all() {
        // A small generator, the same on every run.
        let mut next = crate::testing::below(0x9e37_79b9_7f4a_7c15);
        for case in 0..200 {
            let mut v = Vec::new();
            // Addresses used again after a free (lifetimes in turn), nested
            // and overlapping ranges, empty ones, and (one case in four)
            // lifetimes out of order, as only a damaged trace has them.
            let n = 1 + next(40);
            let mut t = 0;
            for _ in 0..n {
                let base = 4096 + 64 * next(20);
                let size = [0, 8, 64, 256, 4096][next(5) as usize];
                let from = if case % 4 == 0 { next(1000) } else { t };
                let to = if next(3) == 0 {
                    u64::MAX
                } else {
                    from + next(100)
                };
                t = from + next(50);
                v.push(alloc(base, size, from, to));
            }
            let ix = ByAddress::new(&v);
            for _ in 0..300 {
                let addr = 4000 + next(6000);
                let t = next(1200);
                assert_eq!(
                    ix.find(&v, addr, t),
                    every(&v, addr, t),
                    "case {case}: {addr} at {t} in {:?}",
                    v.iter()
                        .map(|a| (a.base, a.size, a.from, a.to))
                        .collect::<Vec<_>>()
                );
            }
        }
    }

    #[test]
    fn an_address_allocated_again_and_again_is_found_by_bisection() {
        // malloc and free in a loop: one address, a thousand lifetimes.
        let v: Vec<Allocation> = (0..1000)
            .map(|i| alloc(8192, 64 + i % 3, 10 * i, 10 * i + 5))
            .collect();
        let ix = ByAddress::new(&v);
        assert_eq!(ix.in_turn, vec![true]);
        for t in 0..10_010 {
            for addr in [8191, 8192, 8192 + 64, 8192 + 65, 8192 + 66] {
                assert_eq!(ix.find(&v, addr, t), every(&v, addr, t), "{addr} at {t}");
            }
        }
        assert_eq!(ix.find(&v, 8200, 4327), None);
        assert_eq!(ix.find(&v, 8200, 4321), Some(432));
    }

    #[test]
    fn a_free_ends_the_last_allocation_at_its_address() {
        let mut o = Objects::default();
        o.allocations.insert(
            "p".into(),
            vec![alloc(64, 8, 0, u64::MAX), alloc(64, 8, 5, u64::MAX)],
        );
        o.open
            .insert("p".into(), [(64u64, vec![0usize, 1])].into_iter().collect());
        o.free("p", 64, 10);
        o.free("p", 128, 11);
        let v = &o.allocations["p"];
        assert_eq!((v[0].to, v[1].to), (u64::MAX, 10));
        o.free("p", 64, 12);
        assert_eq!(o.allocations["p"][0].to, 12);
    }
}
