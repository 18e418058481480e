//! The profile: per event name, per callsite and per thread, how many, how
//! long and how many bytes.

use rustc_hash::FxHashMap as HashMap;

use gaspard_format::kinds;
use serde::{Deserialize, Serialize};

use rayon::prelude::*;

use crate::trace::{Event, Stream, Trace};

/// Statistics of one group of events.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct Stats {
    /// Event name (kind or user event).
    pub name: String,
    /// Occurrences: a START/END pair counts once, an ATOMIC once.
    pub count: u64,
    /// Total time between START and END, in ns: the time within at least
    /// one of them on each thread (a recursive function's time counts once,
    /// in its outermost call), summed over threads.
    pub total_ns: u64,
    /// Mean of the intervals (each call's own START to END).
    pub mean_ns: f64,
    /// Shortest interval.
    pub min_ns: u64,
    /// Longest interval.
    pub max_ns: u64,
    /// Bytes moved (gets, puts, bulk copies, collectives, allocations).
    pub bytes: u64,
    #[serde(skip)]
    pub(crate) intervals: u64,
    /// The sum of the intervals, nested ones included (for the mean).
    #[serde(skip)]
    pub(crate) sum_ns: u64,
}

/// What names an event: its kind, its user event, or for a function its
/// signature.
type Key = (u16, Option<u32>, Option<u32>);

fn key_of(e: &Event) -> Key {
    let func = (e.user().is_none() && e.kind == kinds::C_FUNC && e.text != crate::trace::NO_TEXT)
        .then_some(e.text);
    (e.kind, e.user(), func)
}

/// The name of a key, as [`crate::dump::event_name`] gives it.
fn key_name(t: &Trace, (kind, user, func): Key) -> String {
    match (user, func.and_then(|f| t.texts.get(f as usize))) {
        (Some(u), _) => t.user_events[u as usize].name.clone(),
        (None, Some(f)) => format!("GASP_C_FUNC {f}"),
        (None, None) => {
            kinds::kind(kind).map_or_else(|| format!("kind_{kind}"), |k| k.name.to_string())
        }
    }
}

/// The callsite of a profile row: its index among the trace's callsites,
/// or past their end for callsites only profiles know (see [`site_of`]).
fn site_index(
    t: &Trace,
    extra: &[(Option<String>, u32)],
    r: &gaspard_format::profile::ProfileRow,
) -> u32 {
    let same = |c: &crate::trace::Callsite| c.file == r.file && c.line == r.line;
    match t.callsites.iter().position(same) {
        Some(i) => i as u32,
        None => {
            u32::MAX
                - extra
                    .iter()
                    .position(|(f, l)| *f == r.file && *l == r.line)
                    .unwrap_or(0) as u32
        }
    }
}

/// The callsites of the profiles that no event has, in a fixed order.
fn profile_sites(t: &Trace) -> Vec<(Option<String>, u32)> {
    let mut v: Vec<(Option<String>, u32)> = t
        .profiles
        .iter()
        .flat_map(|(_, f)| f.rows.iter().map(|r| (r.file.clone(), r.line)))
        .filter(|(f, l)| !t.callsites.iter().any(|c| &c.file == f && c.line == *l))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// A callsite index as [`site_index`] makes it: file and line.
fn site_of(t: &Trace, extra: &[(Option<String>, u32)], site: u32) -> (Option<String>, u32) {
    match t.callsites.get(site as usize) {
        Some(c) => (c.file.clone(), c.line),
        None => extra
            .get((u32::MAX - site) as usize)
            .cloned()
            .unwrap_or((None, 0)),
    }
}

impl Stats {
    fn from_row(r: &gaspard_format::profile::ProfileRow) -> Stats {
        Stats {
            name: r.name.clone(),
            count: r.count,
            total_ns: r.total_ns,
            mean_ns: if r.intervals > 0 {
                r.sum_ns as f64 / r.intervals as f64
            } else {
                0.0
            },
            min_ns: r.min_ns,
            max_ns: r.max_ns,
            bytes: r.bytes,
            intervals: r.intervals,
            sum_ns: r.sum_ns,
        }
    }

    fn merge(&mut self, o: &Stats) {
        self.count += o.count;
        self.bytes = self.bytes.saturating_add(o.bytes);
        if o.intervals > 0 {
            if self.intervals == 0 || o.min_ns < self.min_ns {
                self.min_ns = o.min_ns;
            }
            self.max_ns = self.max_ns.max(o.max_ns);
            self.total_ns = self.total_ns.saturating_add(o.total_ns);
            self.sum_ns = self.sum_ns.saturating_add(o.sum_ns);
            self.intervals += o.intervals;
            self.mean_ns = self.sum_ns as f64 / self.intervals as f64;
        }
    }

    /// Adds one interval of `d` ns, of which `new` ns are not within an
    /// earlier one of the same statistics on the thread (see
    /// [`Stats::total_ns`]); [`Stats::set_mean`] gives the mean once they
    /// are all in.
    fn add_interval(&mut self, d: u64, new: u64) {
        if self.intervals == 0 || d < self.min_ns {
            self.min_ns = d;
        }
        self.max_ns = self.max_ns.max(d);
        self.total_ns = self.total_ns.saturating_add(new);
        self.sum_ns = self.sum_ns.saturating_add(d);
        self.intervals += 1;
    }

    fn set_mean(&mut self) {
        if self.intervals > 0 {
            self.mean_ns = self.sum_ns as f64 / self.intervals as f64;
        }
    }
}

/// Per-callsite statistics.
#[derive(Debug, Clone, Serialize)]
pub struct SiteStats {
    /// File, if known.
    pub file: Option<String>,
    /// Line.
    pub line: u32,
    /// The statistics.
    #[serde(flatten)]
    pub stats: Stats,
}

/// Per-thread statistics.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadStats {
    /// `host-pid` of the process.
    pub process: String,
    /// Stream number.
    pub stream: u32,
    /// Thread order in the process.
    pub thread: u32,
    /// Events recorded.
    pub events: u64,
    /// Span from first to last event, ns.
    pub span_ns: u64,
    /// Statistics per event name.
    pub by_event: Vec<Stats>,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Trace directory.
    pub trace: String,
    /// Events read.
    pub events: u64,
    /// Events the recorder had to drop or could not write.
    pub lost_events: u64,
    /// Unknown tags ignored while recording.
    pub unknown_tags: u64,
    /// Threads (streams).
    pub threads: usize,
    /// Processes.
    pub processes: usize,
    /// Per event name, most time first.
    pub by_event: Vec<Stats>,
    /// Per event name and callsite, most time first.
    pub by_callsite: Vec<SiteStats>,
    /// Per thread.
    pub by_thread: Vec<ThreadStats>,
    /// Each thread's time: computation, synchronization, communication.
    pub breakdown: Vec<crate::findings::Breakdown>,
    /// What slows the program, most severe first.
    pub findings: Vec<crate::findings::Finding>,
    /// Who talks to whom, per model (MPI, OpenSHMEM).
    pub communication: Vec<crate::matrix::Matrix>,
    /// Shared objects in blocks: false sharing, producer-consumer.
    pub blocks: crate::blocks::Blocks,
    /// Load balance: barrier arrival spreads, imbalance per construct and region.
    pub balance: crate::balance::Balance,
    /// Where threads wait for one another (late senders and receivers,
    /// fences, one-sided synchronization), most waiting first.
    pub waits: Vec<crate::waitstates::WaitSite>,
    /// Per lock: acquisitions, waiting, holding, threads, most waiting first.
    pub locks: Vec<crate::locks::LockStats>,
    /// Problems met while reading.
    pub problems: Vec<String>,
    /// How the clocks of processes were synchronized, one line per process.
    pub clock_sync: Vec<String>,
}

/// Bytes an event moves, from its size argument.
fn bytes_of(s: &Stream, e: &Event) -> u64 {
    if e.user().is_some() {
        return 0;
    }
    gaspard_format::codec::bytes_moved(
        e.kind,
        e.phase,
        (s.pts_bytes as usize).div_ceil(8),
        e.flags,
        s.args(e),
    )
}

fn sort(v: &mut [Stats]) {
    v.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(b.count.cmp(&a.count))
            .then(a.name.cmp(&b.name))
    });
}

/// One stream's profile: its thread's statistics, and its statistics per
/// (name, callsite number).
pub(crate) type StreamProfile = (ThreadStats, HashMap<(String, u32), Stats>);

/// One stream's profile as a summary holds it: the statistics per (name,
/// callsite number) in a list, in the order they are merged.
pub type ProfilePart = (ThreadStats, Vec<((String, u32), Stats)>);

/// [`ProfilePart`] as sent between processes: with the number of intervals
/// behind each statistic, which the report leaves out and merging needs.
pub(crate) mod sent {
    use super::{ProfilePart, Stats, ThreadStats};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    type Sent = (
        String,
        u32,
        u32,
        u64,
        u64,
        Vec<(Stats, u64, u64)>,
        Vec<((String, u32), Stats, u64, u64)>,
    );

    /// Writes `p` with its interval counts.
    pub(crate) fn serialize<S: Serializer>(p: &ProfilePart, s: S) -> Result<S::Ok, S::Error> {
        let (th, sites) = p;
        let sent: Sent = (
            th.process.clone(),
            th.stream,
            th.thread,
            th.events,
            th.span_ns,
            th.by_event
                .iter()
                .map(|st| (st.clone(), st.intervals, st.sum_ns))
                .collect(),
            sites
                .iter()
                .map(|(k, st)| (k.clone(), st.clone(), st.intervals, st.sum_ns))
                .collect(),
        );
        sent.serialize(s)
    }

    /// Reads a profile written by [`serialize`].
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ProfilePart, D::Error> {
        let (process, stream, thread, events, span_ns, by_event, sites): Sent =
            Sent::deserialize(d)?;
        let with = |(mut st, n, sum): (Stats, u64, u64)| {
            st.intervals = n;
            st.sum_ns = sum;
            st
        };
        Ok((
            ThreadStats {
                process,
                stream,
                thread,
                events,
                span_ns,
                by_event: by_event.into_iter().map(with).collect(),
            },
            sites
                .into_iter()
                .map(|(k, st, n, sum)| (k, with((st, n, sum))))
                .collect(),
        ))
    }
}

/// Kinds below this are found in a table rather than a map.
const DENSE_KINDS: usize = 2048;

/// The statistics of one stream per [`Key`] and per (key, callsite), each
/// in a slot found without hashing for most events: a table by kind for
/// plain kinds, and the last callsite of each key.
#[derive(Default)]
struct Slots {
    keys: Vec<Key>,
    by_key: Vec<Stats>,
    /// Slot of each plain kind (no user event, not a function), plus one; 0: none yet.
    by_kind: Vec<u32>,
    other: HashMap<Key, u32>,
    /// The last key found in `other` and its slot (a user event's START is
    /// mostly followed by its END).
    last_other: Option<(Key, u32)>,
    /// Per key slot, its last two callsites and their (key, callsite)
    /// slots, the latest first (a START and its END often have callsites
    /// of their own, one line apart; two calls of a kind alternate).
    last_site: Vec<[(u32, u32); 2]>,
    sites: Vec<((Key, u32), Stats)>,
    /// The key slot of each (key, callsite) slot.
    site_key: Vec<u32>,
    site_slots: HashMap<u64, u32>,
}

impl Slots {
    fn key_slot(&mut self, e: &Event) -> usize {
        let plain =
            e.user().is_none() && e.kind != kinds::C_FUNC && (e.kind as usize) < DENSE_KINDS;
        if plain {
            if self.by_kind.is_empty() {
                self.by_kind = vec![0; DENSE_KINDS];
            }
            let at = self.by_kind[e.kind as usize];
            if at > 0 {
                return at as usize - 1;
            }
        } else {
            let key = key_of(e);
            if let Some((last, at)) = self.last_other {
                if last == key {
                    return at as usize;
                }
            }
            if let Some(&at) = self.other.get(&key) {
                self.last_other = Some((key, at));
                return at as usize;
            }
        }
        let at = self.keys.len() as u32;
        let key = key_of(e);
        if plain {
            self.by_kind[e.kind as usize] = at + 1;
        } else {
            self.other.insert(key, at);
        }
        self.keys.push(key);
        self.by_key.push(Stats::default());
        self.last_site.push([(0, u32::MAX); 2]);
        at as usize
    }

    fn site_slot(&mut self, key: usize, callsite: u32) -> usize {
        let [(last, at), (before, at_before)] = self.last_site[key];
        if at != u32::MAX && last == callsite {
            return at as usize;
        }
        if at_before != u32::MAX && before == callsite {
            self.last_site[key] = [(before, at_before), (last, at)];
            return at_before as usize;
        }
        let n = self.sites.len() as u32;
        let at = *self
            .site_slots
            .entry((key as u64) << 32 | callsite as u64)
            .or_insert(n);
        if at == n {
            self.sites
                .push(((self.keys[key], callsite), Stats::default()));
            self.site_key.push(key as u32);
        }
        self.last_site[key] = [(callsite, at), self.last_site[key][0]];
        at as usize
    }
}

/// The bytes events move ([`bytes_of`]), with where a kind's size argument
/// is found once per kind, phase and flags rather than once per event.
struct BytesOf {
    pts_words: usize,
    /// By `kind << 4 | phase << 2 | flags`: the size argument's word, or
    /// [`BytesOf::NONE`]. Asked for once per shape of events ([`Scan`]):
    /// a map of the few met rather than a table of every kind.
    at: HashMap<u32, u16>,
}

impl BytesOf {
    const NONE: u16 = u16::MAX - 1;
    const SLOW: u16 = u16::MAX - 2;

    fn new(s: &Stream) -> BytesOf {
        BytesOf {
            pts_words: (s.pts_bytes as usize).div_ceil(8),
            at: HashMap::default(),
        }
    }

    /// Where the size argument of events like `e` is: a word of their
    /// arguments, [`BytesOf::NONE`] (they move none), or [`BytesOf::SLOW`]
    /// (to be found by [`bytes_of`] for each).
    fn word(&mut self, e: &Event) -> u16 {
        if e.user().is_some() {
            return Self::NONE;
        }
        if (e.kind as usize) >= DENSE_KINDS || e.phase > 3 || e.flags > 3 {
            return Self::SLOW;
        }
        let i = u32::from(e.kind) << 4 | u32::from(e.phase) << 2 | u32::from(e.flags);
        let pts_words = self.pts_words;
        *self.at.entry(i).or_insert_with(|| {
            gaspard_format::codec::bytes_arg(e.kind, e.phase, pts_words, e.flags)
                .and_then(|w| u16::try_from(w).ok())
                .filter(|&w| w < Self::SLOW)
                .unwrap_or(Self::NONE)
        })
    }
}

/// The slot of the tool's own events, left out of the profile.
const TOOL: u32 = u32::MAX;

/// Whether a kind is the tool's own, left out of the profile.
fn tool_kind(k: u16) -> bool {
    matches!(
        k,
        kinds::GASPARD_INIT
            | kinds::GASPARD_MEASUREMENT
            | kinds::GASPARD_LOST
            | kinds::GASPARD_CLOCK_SYNC
    )
}

/// The counting of a stream's events in the slots of their (key, callsite).
struct Scan {
    slots: Slots,
    words: BytesOf,
    /// Each shape's (key, callsite) slot and where its size argument is,
    /// found once per shape rather than asked of `slots` and `words` for
    /// every event.
    shapes: crate::shape::Table<(u32, u16)>,
}

impl Scan {
    /// For the events of `s`.
    fn new(s: &Stream) -> Scan {
        Scan {
            slots: Slots::default(),
            words: BytesOf::new(s),
            shapes: crate::shape::Table::new(),
        }
    }

    /// The slot of `e` and where its size argument is.
    #[inline(always)]
    fn slot(&mut self, e: &Event) -> (u32, u16) {
        let shape = crate::shape::of(e);
        match self.shapes.get(shape) {
            Some(v) => v,
            None => {
                // Slots are made as their shapes are first met, in the same
                // order as without the table.
                let v = if tool_kind(e.kind) {
                    (TOOL, BytesOf::NONE)
                } else {
                    let key = self.slots.key_slot(e);
                    (
                        self.slots.site_slot(key, e.callsite) as u32,
                        self.words.word(e),
                    )
                };
                self.shapes.set(shape, v);
                v
            }
        }
    }

    /// The slot of `e` and where its size argument is; counted in the slot.
    #[inline(always)]
    fn count(&mut self, s: &Stream, e: &Event) -> u32 {
        // An END of a plain kind met before counts nothing (no size: see
        // `codec::bytes_arg`): its key is there, and a callsite where only
        // ENDs happen has nothing of its own (a row the report leaves out).
        // Its slot is not looked at (an interval's is its START's).
        if e.phase == 1
            && e.user == crate::trace::NO_USER
            && e.kind != kinds::C_FUNC
            && self
                .slots
                .by_kind
                .get(e.kind as usize)
                .is_some_and(|&at| at > 0)
        {
            return TOOL;
        }
        let (site, word) = self.slot(e);
        if site == TOOL {
            return site;
        }
        let bytes = match word {
            BytesOf::NONE => 0,
            BytesOf::SLOW => bytes_of(s, e),
            w => s.args(e).get(w as usize).copied().unwrap_or(0),
        };
        let st = &mut self.slots.sites[site as usize].1;
        if e.phase != 1 {
            st.count += 1;
        }
        // Saturating: a damaged size argument may be anything.
        st.bytes = st.bytes.saturating_add(bytes);
        site
    }
}

/// A stream's profile, made window by window ([`crate::window`]): each
/// event counted in the slot of its (key, callsite), then each interval in
/// its START's slot.
pub(crate) struct Builder {
    counting: Scan,
    /// Per key, what its intervals covered so far ([`Covered`]).
    by_key: Vec<Covered>,
    process: String,
    stream: u32,
    thread: u32,
    events: u64,
    /// The times of the stream's first and last events.
    first: Option<u64>,
    last: Option<u64>,
    /// Each event's (key, callsite) slot in the window being fed (kept from
    /// window to window, so that it is allocated once).
    site_of_event: Vec<u32>,
}

impl Builder {
    /// For the windows of `s`.
    pub(crate) fn new(s: &Stream) -> Builder {
        Builder {
            counting: Scan::new(s),
            by_key: Vec::new(),
            process: s.process.clone(),
            stream: s.stream,
            thread: s.thread,
            events: 0,
            first: None,
            last: None,
            site_of_event: Vec::new(),
        }
    }

    /// Adds window `s` (the next of its stream).
    pub(crate) fn feed(&mut self, s: &Stream) {
        let carried = s.window.carried as usize;
        let own = s.own_events();
        self.events += own.len() as u64;
        if let (None, Some(e)) = (self.first, own.first()) {
            self.first = Some(e.t_ns);
        }
        if let Some(e) = own.last() {
            self.last = Some(e.t_ns);
        }
        // Each event's (key, callsite) slot, for its interval to find again:
        // a carried START's was counted in an earlier window.
        let mut site_of_event = std::mem::take(&mut self.site_of_event);
        site_of_event.clear();
        site_of_event.extend(s.events[..carried].iter().map(|e| self.counting.slot(e).0));
        site_of_event.extend(own.iter().map(|e| self.counting.count(s, e)));
        let slots = &mut self.counting.slots;
        self.by_key.resize_with(slots.keys.len(), Covered::default);
        for iv in crate::intervals::intervals(s) {
            // The slot of its START (whose key and callsite are the
            // interval's): none for the tool's own kinds.
            let site = site_of_event[iv.start_event as usize];
            if site == TOOL {
                continue;
            }
            let site = site as usize;
            let k = &mut self.by_key[slots.site_key[site] as usize];
            if k.open.is_empty() && iv.end != crate::window::OPEN {
                // Most intervals (those of a whole stream, all): closed, and
                // within none of their key given open by a window before.
                let c = &mut k.covered;
                let d = iv.end.saturating_sub(iv.start);
                let new = if iv.start >= *c {
                    d
                } else {
                    iv.end.saturating_sub(*c)
                };
                *c = (*c).max(iv.end);
                slots.sites[site].1.add_interval(d, new);
                continue;
            }
            let levels = &mut k.open;
            // Given open before: its level.
            let given = if (iv.start_event as usize) < carried {
                let place = s.place(iv.start_event);
                levels.iter().position(|l| l.place == place)
            } else {
                None
            };
            if iv.end == crate::window::OPEN {
                if given.is_none() {
                    let covered = levels.last().map_or(k.covered, |l| l.covered);
                    levels.push(Level {
                        place: s.place(iv.start_event),
                        covered,
                        pending: HashMap::default(),
                    });
                }
                continue;
            }
            // Closed: within the ones still open after those it closes,
            // which end later (what it covers is theirs), or not.
            if let Some(i) = given {
                levels.truncate(i);
            }
            let d = iv.end.saturating_sub(iv.start);
            let c = match levels.last_mut() {
                Some(l) => &mut l.covered,
                None => &mut k.covered,
            };
            let new = if iv.start >= *c {
                d
            } else {
                iv.end.saturating_sub(*c)
            };
            *c = (*c).max(iv.end);
            match levels.last_mut() {
                Some(l) => {
                    let p = l.pending.entry(site as u32).or_default();
                    *p = p.saturating_add(new);
                    slots.sites[site].1.add_interval(d, 0);
                }
                None => slots.sites[site].1.add_interval(d, new),
            }
        }
        self.site_of_event = site_of_event;
    }

    /// The profile of the windows given, and its statistics per (name,
    /// callsite); `t` names their keys.
    fn finish(self, t: &Trace) -> StreamProfile {
        let mut slots = self.counting.slots;
        // The intervals never closed are not intervals: the time new within
        // them is.
        for l in self.by_key.iter().flat_map(|k| &k.open) {
            for (&site, &new) in &l.pending {
                let st = &mut slots.sites[site as usize].1;
                st.total_ns = st.total_ns.saturating_add(new);
            }
        }
        // Each key's statistics from those of its callsites (saturating sums
        // of non-negative numbers do not depend on their order).
        for ((_, st), &key) in slots.sites.iter_mut().zip(&slots.site_key) {
            st.set_mean();
            slots.by_key[key as usize].merge(st);
        }
        let mine = slots.keys.into_iter().zip(slots.by_key);
        let sites = slots.sites;
        let mut by_site: HashMap<(String, u32), Stats> = HashMap::default();
        for ((key, site), st) in sites {
            by_site
                .entry((key_name(t, key), site))
                .or_default()
                .merge(&st);
        }
        let mut named: HashMap<String, Stats> = HashMap::default();
        for (key, st) in mine {
            named.entry(key_name(t, key)).or_default().merge(&st);
        }
        let mut v: Vec<Stats> = named
            .into_iter()
            .map(|(name, mut st)| {
                st.name = name;
                st
            })
            .collect();
        sort(&mut v);
        let thread = ThreadStats {
            process: self.process,
            stream: self.stream,
            thread: self.thread,
            events: self.events,
            span_ns: match (self.first, self.last) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => 0,
            },
            by_event: v,
        };
        (thread, by_site)
    }

    /// [`ProfilePart`] of the windows given; `t` names their keys.
    pub(crate) fn part(self, t: &Trace) -> ProfilePart {
        let (thread, sites) = self.finish(t);
        (thread, sites.into_iter().collect())
    }
}

/// What the intervals of a key covered so far ([`Builder`]).
#[derive(Default)]
struct Covered {
    /// The end of the time covered by its intervals: they come by start
    /// time, so that the part of one past that end is new (all of it, but
    /// for a call within another of the same function: recursion), and
    /// counts in its callsite's total.
    covered: u64,
    /// Its intervals given open by a window and not closed since,
    /// outermost first.
    open: Vec<Level>,
}

/// An interval given open by a window ([`Builder`]).
#[derive(Debug)]
struct Level {
    /// Its START's place in the stream.
    place: u64,
    /// The end of the time covered so far by the intervals of its key
    /// within it, as if it were not there.
    covered: u64,
    /// The time new within it, as if it were not there, by (key, callsite)
    /// slot: counted if it is never closed.
    pending: HashMap<u32, u64>,
}

/// One stream's profile, and its statistics per (name, callsite).
#[cfg(test)]
fn stream_profile(t: &Trace, s: &Stream) -> StreamProfile {
    let mut b = Builder::new(s);
    b.feed(s);
    b.finish(t)
}

/// Computes the report, with blocks of one page.
pub fn report(t: &Trace) -> Report {
    report_with(t, crate::blocks::DEFAULT_BLOCK_SIZE)
}

/// Computes the report, cutting shared objects in blocks of `block_size` bytes.
pub fn report_with(t: &Trace, block_size: u64) -> Report {
    // Each stream on its own (in parallel), then merged in stream order:
    // its profile and what the other analyses ask of it are computed
    // while its events and intervals are in the processor's caches.
    let cx = crate::summary::Context::of(t);
    let summaries: Vec<crate::summary::StreamSummary> = t
        .streams
        .par_iter()
        .map(|s| crate::summary::StreamSummary::of(t, &cx, s))
        .collect();
    report_of(t, block_size, summaries)
}

/// The report from the summaries of the streams of `t` (in order), whose
/// streams themselves are not looked at (and may not be there: the ranks
/// of `gaspard report --mpi` send summaries, not streams). `t` gives the
/// rest: directory, processes, callsites, profiles of profile-only
/// processes, problems, clock corrections.
pub(crate) fn report_of(
    t: &Trace,
    block_size: u64,
    summaries: Vec<crate::summary::StreamSummary>,
) -> Report {
    let ids: Vec<crate::summary::Identity> = summaries.iter().map(|s| s.id.clone()).collect();
    let finding_parts: Vec<&crate::findings::Part> =
        summaries.iter().map(|s| &s.findings).collect();
    let matrix_parts: Vec<&crate::matrix::Part> = summaries.iter().map(|s| &s.matrix).collect();
    let wait_parts: Vec<&crate::waitstates::Part> = summaries.iter().map(|s| &s.waits).collect();
    let lock_parts: Vec<&crate::locks::Part> = summaries.iter().map(|s| &s.locks).collect();
    let block_parts: Vec<&crate::blocks::Part> = summaries.iter().map(|s| &s.blocks).collect();
    let mut by_event: HashMap<String, Stats> = HashMap::default();
    let mut by_site: HashMap<(String, u32), Stats> = HashMap::default();
    let mut by_thread = Vec::new();
    for sm in &summaries {
        let (thread, sites) = &sm.profile;
        for st in &thread.by_event {
            by_event.entry(st.name.clone()).or_default().merge(st);
        }
        for (key, st) in sites {
            by_site.entry(key.clone()).or_default().merge(st);
        }
        by_thread.push(thread.clone());
    }
    // Processes recorded in profile-only mode.
    let extra = profile_sites(t);
    for (process, f) in &t.profiles {
        for ps in &f.streams {
            let mut named: HashMap<String, Stats> = HashMap::default();
            for r in f.rows.iter().filter(|r| r.stream == ps.id) {
                let st = Stats::from_row(r);
                named.entry(r.name.clone()).or_default().merge(&st);
                by_site
                    .entry((r.name.clone(), site_index(t, &extra, r)))
                    .or_default()
                    .merge(&st);
            }
            let mut v: Vec<Stats> = named
                .into_iter()
                .map(|(name, mut st)| {
                    by_event.entry(name.clone()).or_default().merge(&st);
                    st.name = name;
                    st
                })
                .collect();
            sort(&mut v);
            by_thread.push(ThreadStats {
                process: process.clone(),
                stream: ps.id,
                thread: ps.thread,
                events: ps.events,
                span_ns: ps.span_ns,
                by_event: v,
            });
        }
    }
    for (name, st) in by_event.iter_mut() {
        st.name = name.clone();
    }
    let mut ev: Vec<Stats> = by_event.into_values().collect();
    sort(&mut ev);
    // A site where only ENDs happen (a critical section's END a line after its
    // START, which takes the interval) has nothing of its own: not listed.
    let mut sites: Vec<SiteStats> = by_site
        .into_iter()
        .filter(|(_, st)| st.count > 0 || st.intervals > 0 || st.bytes > 0)
        .map(|((name, site), mut stats)| {
            stats.name = name;
            let (file, line) = site_of(t, &extra, site);
            SiteStats { file, line, stats }
        })
        .collect();
    sites.sort_by(|a, b| {
        b.stats
            .total_ns
            .cmp(&a.stats.total_ns)
            .then(a.stats.name.cmp(&b.stats.name))
            .then(a.line.cmp(&b.line))
    });
    // The analyses are independent of one another: in parallel (the
    // findings use the locks and wait states, found once).
    let mut breakdown: Vec<crate::findings::Breakdown> =
        finding_parts.iter().map(|p| p.breakdown.clone()).collect();
    // A plain C program of one thread runs sequentially (its events are in
    // the UPC model's context, whose processes are otherwise parallel all
    // along).
    for (b, id) in breakdown.iter_mut().zip(&ids) {
        if id.c_only && ids.iter().filter(|o| o.process == id.process).count() == 1 {
            b.parallel_ns = 0;
        }
    }
    let callsites = &t.callsites;
    let ((blocks, communication), (balance, waits, locks, mut findings)) = rayon::join(
        || {
            rayon::join(
                || crate::blocks::merge(&ids, callsites, &block_parts, block_size),
                || crate::matrix::merge(&ids, &matrix_parts),
            )
        },
        || {
            let ((analysis, locks), passes) = rayon::join(
                || {
                    rayon::join(
                        || crate::waitstates::merge(&wait_parts),
                        || {
                            let mut locks = crate::locks::merge(&ids, callsites, &lock_parts);
                            crate::locks::name_locks(&t.dir, &mut locks);
                            locks
                        },
                    )
                },
                // Each thread's barriers read once, for the load balance
                // and the findings.
                || crate::findings::group_passes(&ids, &finding_parts),
            );
            let (balance, (waits, findings)) = rayon::join(
                || crate::balance::merge_passed(&ids, callsites, &finding_parts, &passes),
                || {
                    rayon::join(
                        || crate::waitstates::wait_sites(&analysis, &ids, callsites),
                        || {
                            let total_time = crate::findings::total_time(&ids);
                            let mut out = crate::findings::merge_passed(
                                &ids,
                                callsites,
                                &finding_parts,
                                &passes,
                            );
                            out.extend(crate::locks::contention_in(&ids, &locks, total_time));
                            out.extend(crate::waitstates::wait_findings(
                                &analysis, &ids, callsites, total_time,
                            ));
                            out
                        },
                    )
                },
            );
            (balance, waits, locks, findings)
        },
    );
    let total_time: u64 = breakdown.iter().map(|b| b.span_ns).sum();
    findings.extend(crate::blocks::findings_of(&ids, &blocks, total_time));
    findings.sort_by(|a, b| b.severity.total_cmp(&a.severity).then(a.kind.cmp(&b.kind)));
    Report {
        trace: t.dir.display().to_string(),
        events: ids.iter().map(|id| id.events).sum::<u64>() + t.profiled_events(),
        lost_events: t.lost_by_manifests().saturating_add(
            summaries
                .iter()
                .filter(|sm| {
                    t.processes
                        .iter()
                        .any(|p| p.name == sm.id.process && p.manifest.is_none())
                })
                .map(|sm| sm.lost)
                .fold(0, u64::saturating_add),
        ),
        unknown_tags: t.unknown_tags(),
        threads: summaries.len()
            + t.profiles
                .iter()
                .map(|(_, f)| f.streams.len())
                .sum::<usize>(),
        processes: t.processes.len(),
        by_event: ev,
        by_callsite: sites,
        by_thread,
        breakdown,
        findings,
        communication,
        blocks,
        balance,
        waits,
        locks,
        problems: t.problems.clone(),
        clock_sync: t
            .clock_sync
            .iter()
            .map(crate::clocksync::describe)
            .collect(),
    }
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// The report as text.
pub fn to_text(r: &Report, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(out, "gaspard report: {}", r.trace)?;
    writeln!(
        out,
        "{}, {} in {}, {} lost, {} ignored",
        crate::count(r.events, "event", "events"),
        crate::count(r.threads as u64, "thread", "threads"),
        crate::count(r.processes as u64, "process", "processes"),
        r.lost_events,
        crate::count(r.unknown_tags, "unknown tag", "unknown tags")
    )?;
    for p in &r.problems {
        writeln!(out, "note: {p}")?;
    }
    for c in &r.clock_sync {
        writeln!(out, "clock: {c}")?;
    }
    writeln!(out, "\nFindings")?;
    if r.findings.is_empty() && r.threads <= 1 {
        writeln!(
            out,
            "  none: one thread has no one to wait for or share data with; the profile below shows where its time goes"
        )?;
    } else if r.findings.is_empty() {
        writeln!(
            out,
            "  none: no waiting, imbalance, contention or communication pattern worth acting on"
        )?;
    }
    for f in &r.findings {
        let at = f
            .location
            .as_ref()
            .map(|l| format!(" at {}:{}", l.file, l.line))
            .unwrap_or_default();
        writeln!(
            out,
            "  [{:.1}%] {}{at}: {}",
            100.0 * f.severity,
            f.kind,
            f.message
        )?;
    }
    waits_and_locks_text(r, out)?;
    writeln!(
        out,
        "\nTime per thread (computation / synchronization / communication)"
    )?;
    for b in &r.breakdown {
        let pct = |x: u64| 100.0 * x as f64 / b.span_ns.max(1) as f64;
        writeln!(
            out,
            "  {} stream {}: {} = {:.1}% compute, {:.1}% sync, {:.1}% comm; {:.1}% parallel, {:.1}% sequential",
            b.process,
            b.stream,
            fmt_ns(b.span_ns as f64),
            pct(b.compute_ns),
            pct(b.sync_ns),
            pct(b.comm_ns),
            pct(b.parallel_ns),
            100.0 - pct(b.parallel_ns)
        )?;
    }
    // Columns as wide as the names and places shown (within bounds: a
    // longer one overflows its column rather than widening every row).
    let shown = || {
        r.by_event
            .iter()
            .chain(r.by_callsite.iter().take(20).map(|s| &s.stats))
            .chain(r.by_thread.iter().flat_map(|t| t.by_event.iter().take(10)))
    };
    let name_w = shown()
        .map(|s| s.name.chars().count())
        .filter(|&n| n <= 48)
        .max()
        .unwrap_or(0)
        .max(30);
    let where_of = |s: &SiteStats| match &s.file {
        Some(f) => format!("{f}:{}", s.line),
        None => "-".into(),
    };
    let where_w = r
        .by_callsite
        .iter()
        .take(20)
        .map(|s| where_of(s).chars().count())
        .filter(|&n| n <= 60)
        .max()
        .unwrap_or(0)
        .max(5);
    let header = format!(
        "{:<name_w$} {:>9} {:>12} {:>11} {:>11} {:>11} {:>12}",
        "event", "count", "total", "mean", "min", "max", "bytes"
    );
    // A total below the calls' times added holds calls within calls of the
    // same name (recursion), counted once: marked, and said under the tables.
    let nested = std::cell::Cell::new(false);
    let row = |s: &Stats| {
        let mark = if s.sum_ns > s.total_ns {
            nested.set(true);
            "*"
        } else {
            ""
        };
        format!(
            "{:<name_w$} {:>9} {:>12} {:>11} {:>11} {:>11} {:>12}",
            s.name,
            s.count,
            format!("{}{mark}", fmt_ns(s.total_ns as f64)),
            fmt_ns(s.mean_ns),
            fmt_ns(s.min_ns as f64),
            fmt_ns(s.max_ns as f64),
            s.bytes
        )
    };
    for m in &r.communication {
        if m.ranks > 16 {
            writeln!(
                out,
                "\nCommunication ({}): {} ranks, in the JSON report",
                m.model, m.ranks
            )?;
            continue;
        }
        writeln!(
            out,
            "\nCommunication ({}): bytes from row to column (operations)",
            m.model
        )?;
        write!(out, "{:>6}", "")?;
        for c in 0..m.ranks {
            write!(out, " {:>16}", c)?;
        }
        writeln!(out)?;
        for r in 0..m.ranks {
            write!(out, "{r:>6}")?;
            for c in 0..m.ranks {
                write!(
                    out,
                    " {:>16}",
                    format!("{} ({})", m.bytes[r][c], m.ops[r][c])
                )?;
            }
            writeln!(out)?;
        }
    }
    crate::balance::to_text(&r.balance, out)?;
    crate::blocks::to_text(&r.blocks, out)?;
    writeln!(out, "\nBy event\n{header}")?;
    for s in &r.by_event {
        writeln!(out, "{}", row(s))?;
    }
    writeln!(
        out,
        "\nBy callsite (top 20)\n{:<where_w$} {header}",
        "where"
    )?;
    for s in r.by_callsite.iter().take(20) {
        writeln!(out, "{:<where_w$} {}", where_of(s), row(&s.stats))?;
    }
    writeln!(out, "\nBy thread")?;
    for th in &r.by_thread {
        writeln!(
            out,
            "{} stream {} (thread {}): {} events over {}",
            th.process,
            th.stream,
            th.thread,
            th.events,
            fmt_ns(th.span_ns as f64)
        )?;
        for s in th.by_event.iter().take(10) {
            writeln!(out, "  {}", row(s))?;
        }
    }
    if nested.get() {
        writeln!(
            out,
            "\n* calls made within calls of the same name (recursion) count once in the total, in the outermost;\n  the mean, min and max are per call"
        )?;
    }
    Ok(())
}

/// The report's waits (top 10) and locks (top 10) as text.
fn waits_and_locks_text(r: &Report, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let at = |l: &Option<crate::findings::Location>| match l {
        Some(l) => format!("{}:{}", l.file, l.line),
        None => "-".into(),
    };
    let waits: Vec<_> = r.waits.iter().filter(|w| w.wait_ns > 0).collect();
    if !waits.is_empty() {
        writeln!(out, "\nWaits (top 10): pattern, call, where, time waited")?;
    }
    for w in waits.iter().take(10) {
        writeln!(
            out,
            "  {} {}{} at {}: {} in {} of {} ({:.1}% of {} time)",
            w.pattern,
            w.call,
            w.within
                .as_ref()
                .map_or(String::new(), |c| format!(" within {c}")),
            at(&w.location),
            fmt_ns(w.wait_ns as f64),
            w.waits,
            crate::count(w.calls, "call", "calls"),
            100.0 * w.share,
            crate::whose(w.threads.len() as u64, "thread", "threads")
        )?;
    }
    if !r.locks.is_empty() {
        writeln!(out, "\nLocks (top 10)")?;
    }
    for l in r.locks.iter().take(10) {
        let hold = l.hold_ns.map_or("?".into(), |h| fmt_ns(h as f64));
        writeln!(
            out,
            "  {} at {}: {} ({} contended), waiting {}, held {}, {}, {}",
            l.lock,
            at(&l.location),
            crate::count(l.acquisitions, "acquisition", "acquisitions"),
            l.contended,
            fmt_ns(l.wait_ns as f64),
            hold,
            crate::count(l.threads.len() as u64, "thread", "threads"),
            crate::count(l.waiters as u64, "waiter", "waiters")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More shapes of events than a shape table has entries, met in turn so
    /// that they keep pushing each other out: every callsite still gets its
    /// own counts, bytes and intervals, and the tool's own events none.
    #[test]
    fn many_shapes_keep_their_own_statistics() {
        let put = kinds::UPC_MEMPUT;
        let sites = 3 * crate::shape::ENTRIES as u32;
        let mut s = Stream::empty("h-1", 0, 0, 16);
        let mut t = 0;
        for round in 0..3u64 {
            for site in 0..sites {
                let n = u64::from(site) + round;
                s.push_named(t, put, 0, site, &[("n", n)]);
                s.push_named(t + u64::from(site % 7) + 1, put, 1, site, &[("n", n)]);
                s.push(t + 10, kinds::GASPARD_INIT, 2, site, &[0]);
                t += 20;
            }
        }
        let (thread, by_site) = stream_profile(&Trace::default(), &s);
        let name = "GASP_UPC_MEMPUT".to_string();
        for site in 0..sites {
            let st = &by_site[&(name.clone(), site)];
            let d = u64::from(site % 7) + 1;
            assert_eq!(st.count, 3, "site {site}");
            assert_eq!(st.bytes, 3 * u64::from(site) + 3, "site {site}");
            assert_eq!((st.intervals, st.sum_ns, st.total_ns), (3, 3 * d, 3 * d));
            assert_eq!((st.min_ns, st.max_ns), (d, d), "site {site}");
        }
        assert_eq!(by_site.len(), sites as usize, "no row for GASPARD_INIT");
        assert_eq!(thread.by_event.len(), 1);
        assert_eq!(thread.by_event[0].count, 3 * u64::from(sites));
    }
}
