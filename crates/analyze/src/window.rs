//! A stream's events in windows: consecutive ranges of them, summarized
//! one after the other, so that a stream need not be held whole.
//!
//! Window `k` holds the stream's own events `a_k..a_{k+1}`, after the
//! STARTs still open at `a_k`, *carried*: given in an earlier window
//! already, here again in their order with their argument words, so that
//! the window's events match as the whole stream's do. Its intervals
//! ([`crate::intervals::intervals`]) are those it closes, each in the
//! window of its END, and, but in the last window, the STARTs it leaves
//! open, as intervals ending at [`OPEN`]. An interval whose START is
//! carried (`start_event < carried`) was given, open, in the window before.
//!
//! An analysis summarizes a stream window by window by walking each
//! window's intervals in START order: an interval given open lasts past
//! everything else in its window, and is given again, closed or still
//! open, first in the next ones. Its events are the window's own from
//! `carried` on. What it counts within an interval given open, as if that
//! were not there, counts if the interval is never closed (it is then not
//! one, as in the whole stream); an analysis whose walk carries what it
//! met gets the intervals of the kinds it looks at in START order, each
//! with its end, from a [`Resolver`].
//!
//! A stream whose STARTs are not in time order (its clock went backwards)
//! has its intervals sorted by start: it is summarized whole.

use rustc_hash::FxHashMap as HashMap;

use crate::summary::Summarizer;
use crate::trace::Stream;

/// Where a [`Stream`]'s events lie in the whole stream when they are one
/// of its windows; the default is a whole stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Window {
    /// How many events at the front are carried STARTs, given in an
    /// earlier window.
    pub(crate) carried: u32,
    /// Whether other windows follow.
    pub(crate) more: bool,
    /// The place in the whole stream of its first own event...
    pub(crate) first: u64,
    /// ... and of each carried START.
    pub(crate) carried_at: Vec<u64>,
}

impl Stream {
    /// The events of this window that are its own (not carried).
    #[inline]
    pub(crate) fn own_events(&self) -> &[crate::trace::Event] {
        self.events
            .get(self.window.carried as usize..)
            .unwrap_or_default()
    }

    /// A stream of the same thread and file, without events: a window's
    /// start.
    pub(crate) fn like(&self) -> Stream {
        Stream {
            process: self.process.clone(),
            pid: self.pid,
            stream: self.stream,
            tid: self.tid,
            thread: self.thread,
            model: self.model,
            pts_bytes: self.pts_bytes,
            path: self.path.clone(),
            chunks: self.chunks,
            damaged: self.damaged,
            ..Default::default()
        }
    }

    /// The place in the whole stream of the window's event `i`.
    #[inline]
    pub(crate) fn place(&self, i: u32) -> u64 {
        let w = &self.window;
        match w.carried_at.get(i as usize) {
            Some(&at) => at,
            None => w.first + u64::from(i - w.carried),
        }
    }
}

/// `v` (what an analysis made of a stream's windows, each entry when first
/// met) in the order of `firsts`, the place of each entry's first START
/// (those past its end last): the order the whole stream meets them in.
pub(crate) fn by_first<T>(v: Vec<T>, firsts: &[u64]) -> Vec<T> {
    let mut all: Vec<(u64, T)> = v
        .into_iter()
        .enumerate()
        .map(|(i, x)| (firsts.get(i).copied().unwrap_or(u64::MAX), x))
        .collect();
    all.sort_by_key(|a| a.0);
    all.into_iter().map(|a| a.1).collect()
}

/// The end of an interval whose START its window leaves open.
pub(crate) const OPEN: u64 = u64::MAX;

/// How many events a window holds when streams are summarized window by
/// window: `GASPARD_WINDOW_EVENTS`, when set to a number (0 or unset:
/// streams are summarized whole).
pub(crate) fn events_per_window() -> Option<usize> {
    static EVERY: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| {
        std::env::var("GASPARD_WINDOW_EVENTS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
    })
}

/// `s` (a whole stream) cut into windows of `every` events of its own
/// (the last one fewer), each with the STARTs open at its beginning
/// carried ([`Window`]).
pub(crate) fn split(s: &Stream, every: usize) -> Vec<Stream> {
    let every = every.max(1);
    let n = s.events.len();
    // The STARTs open so far, per kind and user event, as the matching
    // keeps them.
    let mut open: HashMap<(u16, Option<u32>), Vec<u32>> = HashMap::default();
    let mut out = Vec::with_capacity(n.div_ceil(every).max(1));
    let mut from = 0;
    loop {
        let to = (from + every).min(n);
        let mut carried: Vec<u32> = open.values().flatten().copied().collect();
        carried.sort_unstable();
        let mut w = s.like();
        w.window = Window {
            carried: carried.len() as u32,
            more: to < n,
            first: from as u64,
            carried_at: carried.iter().map(|&i| u64::from(i)).collect(),
        };
        let indices = carried.iter().map(|&i| i as usize).chain(from..to);
        for i in indices {
            let e = &s.events[i];
            let (args_at, nargs) = w.keep_args(s.args(e));
            w.events.push(crate::trace::Event {
                args_at,
                nargs,
                ..e.clone()
            });
        }
        for (i, e) in s.events[from..to].iter().enumerate() {
            let stack = open.entry((e.kind, e.user())).or_default();
            match e.phase {
                0 => stack.push((from + i) as u32),
                1 => {
                    stack.pop();
                }
                _ => {}
            }
        }
        out.push(w);
        if to >= n {
            return out;
        }
        from = to;
    }
}

/// The intervals of some kinds of a stream, from its windows in turn, in
/// START order and with their events, as the whole stream gives them: an
/// interval given open is held, with those of the kinds that start after
/// it, until a window closes it (or the stream ends: never closed, it is
/// left out). For an analysis whose walk over a stream's intervals carries
/// what it met: the kinds it looks at should be short (calls), so that
/// little is held.
pub(crate) struct Resolver {
    /// The kinds given, by number.
    kinds: &'static [bool],
    /// The intervals not given yet, in START order.
    held: Vec<Held>,
}

/// An interval held by a [`Resolver`].
struct Held {
    /// Its START's place in the stream.
    place: u64,
    iv: crate::intervals::Interval,
    start: (crate::trace::Event, Vec<u64>),
    /// Its END, once closed.
    end: Option<(crate::trace::Event, Vec<u64>)>,
}

impl Resolver {
    /// For the intervals of kinds `kinds` (by number).
    pub(crate) fn new(kinds: &'static [bool]) -> Resolver {
        Resolver {
            kinds,
            held: Vec::new(),
        }
    }

    /// The intervals window `w` (the next of its stream) lets be given,
    /// as a stream of theirs: each one's START and END (with their argument
    /// words), its intervals them in START order (none when it gives none).
    pub(crate) fn feed(&mut self, w: &Stream) -> Option<Stream> {
        // A window of none of the kinds, with nothing held: nothing to give
        // (most windows of most streams, for the calls' kinds).
        if self.held.is_empty() && !crate::intervals::has_any_kind(w, self.kinds) {
            return None;
        }
        let event = |i: u32| {
            let e = &w.events[i as usize];
            (e.clone(), w.args(e).to_vec())
        };
        for iv in crate::intervals::intervals(w) {
            if !self.kinds[iv.kind as usize] {
                continue;
            }
            let closed = iv.end != OPEN;
            if iv.start_event < w.window.carried {
                // Held since given open.
                if closed {
                    let place = w.place(iv.start_event);
                    if let Some(h) = self.held.iter_mut().find(|h| h.place == place) {
                        h.iv.end = iv.end;
                        h.end = Some(event(iv.end_event));
                    }
                }
                continue;
            }
            self.held.push(Held {
                place: w.place(iv.start_event),
                iv: *iv,
                start: event(iv.start_event),
                end: closed.then(|| event(iv.end_event)),
            });
        }
        let ready = self
            .held
            .iter()
            .position(|h| h.end.is_none())
            .unwrap_or(self.held.len());
        let given: Vec<Held> = self.held.drain(..ready).collect();
        (!given.is_empty()).then(|| stream_of(w, given))
    }

    /// What is still held once the last window is given, those never
    /// closed left out.
    pub(crate) fn finish(&mut self, w: &Stream) -> Option<Stream> {
        let rest: Vec<Held> = std::mem::take(&mut self.held)
            .into_iter()
            .filter(|h| h.end.is_some())
            .collect();
        (!rest.is_empty()).then(|| stream_of(w, rest))
    }
}

/// A stream like `w` whose events are the STARTs and ENDs of `given` and
/// whose intervals are them, in order.
fn stream_of(w: &Stream, given: Vec<Held>) -> Stream {
    let mut s = w.like();
    // Two events each, with their words.
    s.events.reserve(2 * given.len());
    let words = given
        .iter()
        .map(|h| h.start.1.len() + h.end.as_ref().map_or(0, |e| e.1.len()));
    s.arg_words.reserve(words.sum());
    let mut intervals = Vec::with_capacity(given.len());
    let mut kinds = vec![0u64; (u16::MAX as usize + 1) / 64];
    for h in given {
        let Some(end) = h.end else { continue };
        let mut iv = h.iv;
        for (which, (e, words)) in [(0, h.start), (1, end)] {
            kinds[e.kind as usize / 64] |= 1 << (e.kind % 64);
            let (args_at, nargs) = s.keep_args(&words);
            let at = s.events.len() as u32;
            s.events.push(crate::trace::Event {
                args_at,
                nargs,
                ..e
            });
            if which == 0 {
                iv.start_event = at;
            } else {
                iv.end_event = at;
            }
        }
        intervals.push(iv);
    }
    s.intervals = std::sync::OnceLock::from(crate::intervals::Derived {
        intervals,
        startup_ns: 0,
        kinds,
        walked: std::sync::OnceLock::new(),
        in_order: true,
    });
    s
}

/// How many STARTs a window may carry before the rest of its stream is
/// one window ([`Summarize`]), unless a window holds more (a few in the
/// tests, so that they meet it).
const MOST_CARRIED: usize = if cfg!(test) { 16 } else { 1 << 16 };

/// A stream read in windows ([`crate::trace::read_windows`]) and
/// summarized as they come: each window's events renumbered, then given to
/// the stream's [`Summarizer`], the STARTs it leaves open carried into the
/// next one.
pub(crate) struct Summarize<'a> {
    sum: Summarizer<'a>,
    /// How its events are given their numbers and times.
    made: Made<'a>,
    /// The stream, without events.
    like: Stream,
    /// How many events a window holds besides those it carries.
    every: usize,
    /// The window to come: the places of the STARTs it carries, and the
    /// place of its first own event.
    carried_at: Vec<u64>,
    first: u64,
    /// The stream's first event's time, and its last event (time, kind,
    /// phase).
    pub(crate) first_t: Option<u64>,
    pub(crate) last: Option<(u64, u16, u8)>,
}

/// How the events of a stream read in windows get their numbers and
/// times ([`Summarize`]).
enum Made<'a> {
    /// As its process numbers them (its trace `t`, the process's tables)
    /// and from its process's first event, known from a first reading.
    Renumbered(&'a crate::trace::Trace, crate::trace::Renumber<'a>),
    /// On its own ([`Summarize::alone`]): its file's numbers, and times
    /// from its first event.
    Alone {
        times: crate::trace::OwnTimes,
        /// The callsites, user events and texts its file numbered so far.
        tables: Box<crate::trace::Trace>,
        /// Whether it turned out to need its process read first: its
        /// windows are then dropped.
        stopped: bool,
        /// What finds the source lines of its return addresses, when the
        /// trace has its process's maps.
        sources: Option<crate::trace::Sources<'a>>,
        /// What names its functions as the trace's numbering does
        /// ([`crate::trace::function_name`]): the process's binaries (shared
        /// by its streams) and the trace's directory.
        names: Names<'a>,
    },
}

/// The binaries of a process, read once a name needs them, and the trace's
/// directory ([`Summarize::alone`]).
pub(crate) type Names<'a> = (
    &'a std::sync::Mutex<Option<crate::symbolize::Symbolizer>>,
    &'a std::path::Path,
);

impl<'a> Summarize<'a> {
    /// For stream `like` (without events) of `t`, its windows summarized by
    /// `sum` after `renumber`, `every` events each.
    pub(crate) fn new(
        t: &'a crate::trace::Trace,
        sum: Summarizer<'a>,
        renumber: crate::trace::Renumber<'a>,
        like: Stream,
        every: usize,
    ) -> Summarize<'a> {
        Summarize::with(sum, Made::Renumbered(t, renumber), like, every)
    }

    /// For stream `like` (without events) read on its own, before the rest
    /// of its process is known: its windows summarized by `sum` in its
    /// file's numbering and with times from its first event (`clock`: its
    /// process's, which keeps the order of times), `every` events each. It
    /// stops ([`Summarize::stopped`]) at the first chunk that holds what the
    /// analyses of the process's streams need beforehand
    /// ([`crate::trace::Local::alone`]), or where its times go backwards.
    pub(crate) fn alone(
        sum: Summarizer<'a>,
        (clock, sources, names): (
            Option<crate::trace::Clock>,
            Option<crate::trace::Sources<'a>>,
            Names<'a>,
        ),
        like: Stream,
        every: usize,
    ) -> Summarize<'a> {
        let made = Made::Alone {
            times: crate::trace::OwnTimes::new(clock),
            tables: Box::default(),
            stopped: false,
            sources,
            names,
        };
        Summarize::with(sum, made, like, every)
    }

    fn with(sum: Summarizer<'a>, made: Made<'a>, like: Stream, every: usize) -> Summarize<'a> {
        Summarize {
            sum,
            made,
            like,
            every,
            carried_at: Vec::new(),
            first: 0,
            first_t: None,
            last: None,
        }
    }

    /// The stream's summary, once its last window is given (`None` when it
    /// had no events).
    pub(crate) fn finish(self) -> Option<crate::summary::StreamSummary> {
        self.last?;
        Some(match &self.made {
            Made::Renumbered(t, _) => self.sum.finish(t),
            Made::Alone { tables, .. } => self.sum.finish(tables),
        })
    }

    /// What found the source lines of the return addresses of a stream
    /// read on its own, taken out.
    pub(crate) fn take_sources(&mut self) -> Option<crate::trace::Sources<'a>> {
        match &mut self.made {
            Made::Alone { sources, .. } => sources.take(),
            Made::Renumbered(..) => None,
        }
    }

    /// Whether the stream read on its own had to stop: it needs its
    /// process read first.
    pub(crate) fn stopped(&self) -> bool {
        matches!(self.made, Made::Alone { stopped: true, .. })
    }

    /// How many events of its own the windows gave.
    pub(crate) fn events(&self) -> u64 {
        self.first
    }

    /// Of a stream read on its own, its first event's time in ns on its
    /// process's clock (its times are from it).
    pub(crate) fn base(&self) -> Option<u64> {
        match &self.made {
            Made::Alone { times, .. } => times.base(),
            Made::Renumbered(..) => None,
        }
    }
}

/// Adds to `tables` what `local` (of a stream of `process`) numbered since,
/// its functions named as the trace names them (`names`).
fn sync_tables(
    tables: &mut crate::trace::Trace,
    local: &crate::trace::Local,
    (sym, dir): Names<'_>,
    process: &str,
) {
    if let Some(new) = local.sites.get(tables.callsites.len()..) {
        tables.callsites.extend_from_slice(new);
    }
    if let Some(new) = local.users.get(tables.user_events.len()..) {
        tables.user_events.extend_from_slice(new);
    }
    if let Some(new) = local.texts.get(tables.texts.len()..) {
        if !new.is_empty() {
            let mut sym = sym.lock().unwrap_or_else(|e| e.into_inner());
            for text in new {
                let name = crate::trace::function_name(&mut sym, dir, process, text);
                tables.texts.push(name.into_owned());
            }
        }
    }
}

impl crate::trace::WindowSink for Summarize<'_> {
    fn window(
        &mut self,
        events: &mut Vec<crate::trace::Event>,
        words: &mut Vec<u64>,
        info: crate::trace::WindowInfo,
    ) -> usize {
        let (more, local) = (info.more, info.local);
        let carried = self.carried_at.len().min(events.len());
        match &mut self.made {
            Made::Renumbered(_, renumber) => renumber.apply(&mut events[carried..], words),
            Made::Alone {
                times,
                tables,
                stopped,
                sources,
                names,
            } => {
                if *stopped || !times.apply(&mut events[carried..]) {
                    *stopped = true;
                    events.clear();
                    words.clear();
                    self.carried_at.clear();
                    return self.every;
                }
                sync_tables(tables, local, *names, &self.like.process);
                if let Some(sources) = sources.as_mut().filter(|_| info.codeptr) {
                    sources.place(&mut events[carried..], words, &tables.callsites);
                }
            }
        }
        let own = (events.len() - carried) as u64;
        if own > 0 {
            self.first_t.get_or_insert(events[carried].t_ns);
            self.last = events.last().map(|e| (e.t_ns, e.kind, e.phase));
        }
        let mut w = self.like.like();
        w.events = std::mem::take(events);
        w.arg_words = std::mem::take(words);
        w.window = Window {
            carried: carried as u32,
            more,
            first: self.first,
            carried_at: std::mem::take(&mut self.carried_at),
        };
        let t = match &self.made {
            Made::Renumbered(t, _) => t,
            Made::Alone { tables, .. } => &**tables,
        };
        self.sum.feed(t, &w);
        self.first += own;
        if !more {
            return usize::MAX;
        }
        // The STARTs it leaves open begin the next one, in their order.
        let mut open: Vec<u32> = crate::intervals::intervals(&w)
            .iter()
            .filter(|iv| iv.end == OPEN)
            .map(|iv| iv.start_event)
            .collect();
        open.sort_unstable();
        self.carried_at = open.iter().map(|&i| w.place(i)).collect();
        let mut kept = Vec::new();
        for &i in &open {
            let e = &w.events[i as usize];
            kept.extend_from_slice(w.args(e));
        }
        let (mut evs, mut ws) = (
            std::mem::take(&mut w.events),
            std::mem::take(&mut w.arg_words),
        );
        let mut at = 0u32;
        for (k, &i) in open.iter().enumerate() {
            let mut e = evs[i as usize].clone();
            e.args_at = at;
            at += e.nargs;
            evs[k] = e;
        }
        evs.truncate(open.len());
        ws.clear();
        ws.extend_from_slice(&kept);
        *events = evs;
        *words = ws;
        // STARTs never closed (a runtime that misuses the interface) would
        // be carried again and again: past a window's worth of them, the
        // rest of the stream is one window (the memory of the whole
        // reading, not its square).
        if open.len() > self.every.max(MOST_CARRIED) {
            return usize::MAX;
        }
        open.len() + self.every
    }

    fn read_on(&mut self, local: &crate::trace::Local) -> bool {
        match &mut self.made {
            Made::Renumbered(..) => true,
            Made::Alone { stopped, .. } => {
                *stopped |= !local.alone();
                !*stopped
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intervals::intervals;

    /// A stream of nested and interleaved kinds and user events, STARTs
    /// never closed and ENDs without a START.
    fn stream(seed: u64, n: usize) -> Stream {
        stream_of(
            seed,
            n,
            &[3, 4, 5, 3000, gaspard_format::kinds::GASPARD_USER],
        )
    }

    /// A trace whose user events 0, 1 and 2 are named `u0`, `u1`, `u2`.
    fn with_users() -> crate::trace::Trace {
        crate::trace::Trace {
            user_events: (0..3)
                .map(|id| gaspard_format::codec::UserDef {
                    id,
                    name: format!("u{id}"),
                    desc: None,
                    unreadable: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    /// [`stream`] of kinds `kinds`.
    fn stream_of(seed: u64, n: usize, kinds: &[u16]) -> Stream {
        let mut next = crate::testing::below(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut s = Stream::empty("h-1", 0, 0, 16);
        let mut t = 0;
        for i in 0..n {
            let kind = kinds[next(kinds.len() as u64) as usize];
            let phase = [0u8, 0, 1, 1, 2][next(5) as usize];
            t += next(3);
            s.push(t, kind, phase, next(4) as u32, &[next(9), i as u64]);
            if kind == gaspard_format::kinds::GASPARD_USER {
                s.events.last_mut().unwrap().user = next(3) as u32;
            }
        }
        s
    }

    /// Every interval of the whole stream is in exactly one window, the one
    /// of its END, with its START's event and its END's; the windows' own
    /// events are the stream's; an interval given open in a window is
    /// given again first in the next one (but in the last window, if it is
    /// never closed).
    #[test]
    fn windows_hold_the_streams_intervals_once() {
        for seed in 0..60 {
            let s = stream(seed, 40 + seed as usize * 7);
            let whole = intervals(&s).to_vec();
            for every in [1, 2, 3, 7, 50, 1000] {
                let ws = split(&s, every);
                let own: Vec<u64> = ws
                    .iter()
                    .flat_map(|w| w.own_events().iter().map(|e| e.t_ns))
                    .collect();
                assert_eq!(own, s.events.iter().map(|e| e.t_ns).collect::<Vec<_>>());
                let mut closed = Vec::new();
                let mut open_before: Vec<u64> = Vec::new();
                for (k, w) in ws.iter().enumerate() {
                    let carried = w.window.carried as usize;
                    assert_eq!(w.window.more, k + 1 < ws.len());
                    // The whole stream's index of each of the window's
                    // events: its second argument word.
                    let index = |i: usize| w.args(&w.events[i])[1] as usize;
                    for i in 0..w.events.len() {
                        assert_eq!(w.place(i as u32), index(i) as u64);
                    }
                    let ivs = intervals(w);
                    // The carried STARTs' intervals come first, those given
                    // open before.
                    let firsts: Vec<u64> = ivs
                        .iter()
                        .filter(|iv| (iv.start_event as usize) < carried)
                        .map(|iv| iv.start)
                        .collect();
                    // (In the last, those never closed are dropped, as
                    // in the whole stream.)
                    if w.window.more {
                        assert_eq!(firsts, open_before, "seed {seed} every {every} window {k}");
                    } else {
                        let mut rest = open_before.iter();
                        assert!(firsts.iter().all(|f| rest.any(|o| o == f)));
                    }
                    open_before.clear();
                    for iv in ivs {
                        if iv.end == OPEN {
                            assert!(w.window.more);
                            assert_eq!(iv.end_event, u32::MAX);
                            open_before.push(iv.start);
                            continue;
                        }
                        let (a, b) = (iv.start_event as usize, iv.end_event as usize);
                        assert!(b >= carried, "an END is the window's own");
                        closed.push((iv.kind, iv.start, iv.end, iv.callsite, index(a), index(b)));
                    }
                }
                closed.sort_by_key(|c| (c.4, c.5));
                let want: Vec<_> = whole
                    .iter()
                    .map(|iv| {
                        (
                            iv.kind,
                            iv.start,
                            iv.end,
                            iv.callsite,
                            iv.start_event as usize,
                            iv.end_event as usize,
                        )
                    })
                    .collect();
                let mut want_sorted = want.clone();
                want_sorted.sort_by_key(|c| (c.4, c.5));
                assert_eq!(closed, want_sorted, "seed {seed} every {every}");
            }
        }
    }

    /// The profile and identity of a stream made window by window are the
    /// whole stream's, whatever the windows: recursion (a kind within
    /// itself), STARTs never closed (under closed ones too), ENDs without a
    /// START, user events.
    #[test]
    fn the_profile_made_window_by_window_is_the_whole_streams() {
        let t = with_users();
        let json = |p: &crate::profile::ProfilePart| {
            let mut rows: Vec<String> =
                p.1.iter()
                    .map(|(k, st)| format!("{k:?} {}", serde_json::to_string(st).unwrap()))
                    .collect();
            rows.sort();
            (serde_json::to_string(&p.0).unwrap(), rows)
        };
        let mut windowed = 0;
        for seed in 0..80 {
            let s = stream(seed, 30 + seed as usize * 5);
            let whole = {
                let mut b = crate::profile::Builder::new(&s);
                b.feed(&s);
                json(&b.part(&t))
            };
            let id = crate::summary::Identity::of(&s);
            for every in [1, 2, 5, 13, 100] {
                let ws = split(&s, every);
                windowed += usize::from(ws.len() > 1);
                let mut b = crate::profile::Builder::new(&s);
                let mut ib = crate::summary::IdentityBuilder::new(&s);
                for w in &ws {
                    b.feed(w);
                    ib.feed(w);
                }
                assert_eq!(json(&b.part(&t)), whole, "seed {seed} every {every}");
                assert_eq!(ib.finish(), id, "seed {seed} every {every}");
            }
        }
        assert!(windowed > 300);
    }

    /// The findings' part of a stream made window by window is the whole
    /// stream's: barriers (nested, never closed), synchronization and
    /// communication within each other, transfers and regions first met in
    /// a later window than their first START.
    #[test]
    fn the_findings_made_window_by_window_are_the_whole_streams() {
        let id = |n: &str| gaspard_format::kinds::kind_by_name(n).unwrap().id;
        let kinds = [
            id("GASP_UPC_BARRIER"),
            id("GASP_MPI_BARRIER"),
            id("GASP_UPC_GET"),
            id("GASP_UPC_PUT"),
            id("GASP_UPC_LOCK"),
            id("GASP_UPC_FORALL"),
            id("GASP_OMP_LOOP"),
            gaspard_format::kinds::GASPARD_USER,
        ];
        let t = with_users();
        let mut windowed = 0;
        for seed in 0..120 {
            let mut s = stream_of(seed, 30 + seed as usize * 4, &kinds);
            s.model = 1;
            let whole = format!("{:?}", crate::findings::Part::of(&t, &s));
            for every in [1, 2, 3, 7, 19, 1000] {
                let ws = split(&s, every);
                windowed += usize::from(ws.len() > 1);
                let mut b = crate::findings::Builder::new(&s, !crate::findings::syncs_all(&s));
                for w in &ws {
                    b.feed(&t, w);
                }
                assert_eq!(
                    format!("{:?}", b.finish()),
                    whole,
                    "seed {seed} every {every}"
                );
            }
        }
        assert!(windowed > 500);
    }

    /// A resolver gives the intervals of its kinds as the whole stream has
    /// them, in START order, with their events and argument words, whatever
    /// the windows; those never closed left out.
    #[test]
    fn a_resolver_gives_the_whole_streams_intervals_in_order() {
        static KINDS: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
        let kinds = KINDS.get_or_init(|| {
            (0..=u16::MAX)
                .map(|k| k == 3 || k == 5 || k == 3000)
                .collect()
        });
        // Kind, start, end, and the START's and END's words.
        type Given = (u16, u64, u64, Vec<u64>, Vec<u64>);
        let of = |s: &Stream| -> Vec<Given> {
            intervals(s)
                .iter()
                .filter(|iv| kinds[iv.kind as usize])
                .map(|iv| {
                    let (a, b) = (
                        &s.events[iv.start_event as usize],
                        &s.events[iv.end_event as usize],
                    );
                    (
                        iv.kind,
                        iv.start,
                        iv.end,
                        s.args(a).to_vec(),
                        s.args(b).to_vec(),
                    )
                })
                .collect()
        };
        for seed in 0..60 {
            let s = stream(seed, 40 + seed as usize * 6);
            let whole = of(&s);
            for every in [1, 2, 5, 17, 1000] {
                let mut r = Resolver::new(kinds);
                let mut got = Vec::new();
                for w in split(&s, every) {
                    got.extend(r.feed(&w).iter().flat_map(of));
                    if !w.window.more {
                        got.extend(r.finish(&w).iter().flat_map(of));
                    }
                }
                assert_eq!(got, whole, "seed {seed} every {every}");
            }
        }
    }
}
