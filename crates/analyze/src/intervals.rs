//! START/END pairs of a thread's events, matched the way every analysis
//! matches them: per kind (and user event), innermost first.

use rustc_hash::FxHashMap as HashMap;

use crate::trace::{Event, Stream};

/// One closed interval on one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    /// Canonical kind.
    pub kind: u16,
    /// START time, ns.
    pub start: u64,
    /// END time, ns ([`crate::window::OPEN`] for a START left open in a
    /// window followed by others).
    pub end: u64,
    /// Callsite of the START.
    pub callsite: u32,
    /// Index of the START event in the stream (streams hold at most
    /// [`crate::trace::MAX_STREAM_EVENTS`]).
    pub start_event: u32,
    /// Index of the END event in the stream (`u32::MAX` when open).
    pub end_event: u32,
}

// Kept for every interval of every thread: no padding.
const _: () = assert!(std::mem::size_of::<Interval>() == 32);

/// The thread's intervals, by start time (an enclosing interval before those
/// it holds). Computed once per stream and kept.
pub fn intervals(s: &Stream) -> &[Interval] {
    &derived(s).intervals
}

/// Which event of an interval [`with_events`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The START.
    Start,
    /// The END.
    End,
}

/// How many intervals ahead of its use [`with_events`] asks for an event
/// (48 and 16 were the fastest of 16/8, 32/8, 48/16 and 64/24 on this
/// machine)...
pub(crate) const AHEAD: usize = 48;
/// ... and for its argument words: the event is read then, and should have
/// arrived.
pub(crate) const ARGS_AHEAD: usize = 16;

/// The thread's intervals ([`intervals`]), each with its START or END event,
/// as `which` says. An interval's event is a cache miss away (a stream's
/// events and its intervals are two arrays of megabytes), and the analyses
/// that read events interval by interval would wait for memory at each: here
/// each event is asked for [`AHEAD`] intervals before it is given and, with
/// `args`, its argument words [`ARGS_AHEAD`] intervals before. Walking the
/// 2.5 M intervals of a 5 M-event trace for its regions this way took 4x
/// less time than indexing the events.
pub fn with_events(
    s: &Stream,
    which: Which,
    args: bool,
) -> impl Iterator<Item = (&Interval, &Event)> + '_ {
    let ivs = intervals(s);
    let event = move |iv: &Interval| match which {
        Which::Start => iv.start_event,
        Which::End => iv.end_event,
    } as usize;
    // A window's events are in the caches already.
    let ahead = s.events.len() > IN_CACHE_EVENTS;
    ivs.iter().enumerate().filter_map(move |(j, iv)| {
        if let Some(e) = ivs
            .get(j + AHEAD)
            .filter(|_| ahead)
            .and_then(|a| s.events.get(event(a)))
        {
            prefetch(e);
        }
        if args && ahead {
            if let Some(e) = ivs.get(j + ARGS_AHEAD).and_then(|a| s.events.get(event(a))) {
                if let Some(w) = s.args(e).first() {
                    prefetch(w);
                }
            }
        }
        // An interval left open in a window ([`crate::window`]) has no END.
        Some((iv, s.events.get(event(iv))?))
    })
}

/// Streams of at most this many events (a window's: [`crate::window`])
/// are read without asking for their events ahead: they were just made,
/// and are in the caches.
pub(crate) const IN_CACHE_EVENTS: usize = 1 << 16;

/// Asks the processor to bring `x`'s cache line in, without waiting for it.
#[inline(always)]
pub(crate) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing the program sees, cannot
    // fault, and its address comes from a live reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (x as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// What is derived from a stream's events once, when first asked for.
#[derive(Debug, Clone, Default)]
pub(crate) struct Derived {
    /// Its intervals ([`intervals`]).
    pub(crate) intervals: Vec<Interval>,
    /// Their total time in the runtime's start-up and shutdown
    /// ([`crate::findings::active_span`]).
    pub(crate) startup_ns: u64,
    /// The kinds of its events, a bit each.
    pub(crate) kinds: Vec<u64>,
    /// Its time split, barriers, transfers and regions
    /// ([`crate::findings::walked`]), found when first asked for.
    pub(crate) walked: std::sync::OnceLock<crate::findings::Walked>,
    /// Whether its STARTs come in time order (else its intervals are sorted
    /// by start, and cannot be walked window by window: [`crate::window`]).
    pub(crate) in_order: bool,
}

/// Whether `s` has events of kind `kind` (without looking at them all).
/// The kinds of `s`'s events, a bit each (kind `k`: bit `k % 64` of word
/// `k / 64`).
pub(crate) fn kind_bits(s: &Stream) -> &[u64] {
    &derived(s).kinds
}

/// Whether `s` has events of one of the kinds `wanted` says (by number).
pub(crate) fn has_any_kind(s: &Stream, wanted: &[bool]) -> bool {
    kind_bits(s)
        .iter()
        .enumerate()
        .filter(|(_, &b)| b != 0)
        .any(|(w, &b)| set_bits(b).any(|i| wanted.get(w * 64 + i).copied().unwrap_or(false)))
}

pub(crate) fn has_kind(s: &Stream, kind: u16) -> bool {
    let bits = &derived(s).kinds;
    bits[kind as usize / 64] & (1 << (kind % 64)) != 0
}

pub(crate) fn derived(s: &Stream) -> &Derived {
    s.intervals.get_or_init(|| derive(s))
}

/// What is derived from the events of `s`, in a pass over them.
fn derive(s: &Stream) -> Derived {
    let mut m = Matcher::new(s.events.len());
    m.keep_open = s.window.more;
    for (i, e) in s.events.iter().enumerate() {
        m.event(i, e);
    }
    m.done()
}

/// The kinds of start-ups and shutdowns ([`crate::findings::is_startup`]),
/// by number.
fn startup_kinds() -> &'static [u16] {
    static KINDS: std::sync::OnceLock<Vec<u16>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        (0..=u16::MAX)
            .filter(|&k| crate::findings::is_startup(k))
            .collect()
    })
}

/// Sets what is derived from the events of `s` to what `m`, fed every one
/// of them in order with their final times, found: the pass of
/// [`derived`] is then not made. For a reading that makes a pass over the
/// events anyway (to make their times ns), and matches them in it.
pub(crate) fn set_derived(s: &mut Stream, m: Matcher) {
    let d = m.done();
    // The same as a pass of its own gives (checked in debug builds, which
    // the tests run on every trace they read).
    #[cfg(debug_assertions)]
    {
        let again = derive(s);
        assert_eq!(d.intervals, again.intervals);
        assert_eq!(d.kinds, again.kinds);
        assert_eq!(d.startup_ns, again.startup_ns);
    }
    s.intervals = std::sync::OnceLock::from(d);
}

/// Matches STARTs and ENDs as a stream's events are given in order
/// ([`Matcher::event`]), into its intervals and the other things
/// [`Derived`] holds ([`Matcher::done`]).
pub(crate) struct Matcher {
    // Each START takes its place in `slots` at once, so that they are in
    // START order, and is filled in by its END. The open STARTs of a kind
    // (and user event) make a stack, a list through their slots: the top's
    // slot (plus one; 0: none) per kind below KINDS, per user event below
    // USERS, and for the other kinds in a map; an open slot's `end_event`
    // holds the slot under it (plus one).
    top_kind: Box<[u32; Matcher::KINDS]>,
    top_user: Vec<u32>,
    top_other: HashMap<(u16, Option<u32>), u32>,
    slots: Vec<Interval>,
    /// The kinds met, a bit each (tables of a fixed size: indexed by a
    /// kind, they need no bounds check).
    kinds: Box<[u64; KIND_WORDS]>,
    // STARTs not yet closed, and whether the STARTs came in time order so
    // far: most streams need neither the pass dropping unclosed intervals
    // nor the one checking their order.
    open: usize,
    in_order: bool,
    last_start: u64,
    /// Whether the STARTs left open are kept, as intervals without an end
    /// ([`crate::window::OPEN`]): in a window followed by others, where
    /// they may be closed.
    pub(crate) keep_open: bool,
}

/// The bits set in `bits`, lowest first (one step each, not one per bit).
pub(crate) fn set_bits(mut bits: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (bits != 0).then(|| {
            let b = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            b
        })
    })
}

/// Words of a table of kinds, a bit each.
const KIND_WORDS: usize = (u16::MAX as usize + 1) / 64;

/// A boxed table of `N` zeros (default values), of a size known to the
/// code that indexes it.
pub(crate) fn zeros<T: Copy + Default, const N: usize>() -> Box<[T; N]> {
    vec![T::default(); N]
        .into_boxed_slice()
        .try_into()
        .unwrap_or_else(|_| unreachable!("{N} entries"))
}

impl Matcher {
    const KINDS: usize = 2048;
    const USERS: usize = 4096;

    /// For a stream of `events` events.
    pub(crate) fn new(events: usize) -> Matcher {
        Matcher {
            top_kind: zeros(),
            top_user: Vec::new(),
            top_other: HashMap::default(),
            // At most one interval per two events, mostly: reserved at once
            // without a pass to count the STARTs (a stream's events are
            // megabytes to read).
            slots: Vec::with_capacity(events / 2 + 1),
            kinds: zeros(),
            open: 0,
            in_order: true,
            last_start: 0,
            keep_open: false,
        }
    }

    /// Event `e`, the `i`-th of its stream (with its final time).
    #[inline(always)]
    pub(crate) fn event(&mut self, i: usize, e: &Event) {
        // The kinds met, noted at STARTs, at ENDs without one, and at other
        // events: an END that closes a START is of a kind noted then.
        let kind_met =
            |kinds: &mut [u64; KIND_WORDS]| kinds[e.kind as usize / 64] |= 1 << (e.kind % 64);
        if e.phase > 1 {
            kind_met(&mut self.kinds);
            return;
        }
        let user = e.user as usize;
        let top = if e.user == crate::trace::NO_USER && (e.kind as usize) < Self::KINDS {
            &mut self.top_kind[e.kind as usize]
        } else if user < self.top_user.len() && e.kind == gaspard_format::kinds::GASPARD_USER {
            &mut self.top_user[user]
        } else {
            Self::top_of(&mut self.top_user, &mut self.top_other, e)
        };
        if e.phase == 0 {
            kind_met(&mut self.kinds);
            self.open += 1;
            self.in_order &= e.t_ns >= self.last_start;
            self.last_start = e.t_ns;
            self.slots.push(Interval {
                kind: e.kind,
                start: e.t_ns,
                end: u64::MAX,
                callsite: e.callsite,
                start_event: i as u32,
                end_event: *top,
            });
            // Streams hold at most u32::MAX events: a slot number plus one
            // holds in u32.
            *top = self.slots.len() as u32;
        } else if *top > 0 {
            self.open -= 1;
            let iv = &mut self.slots[*top as usize - 1];
            *top = iv.end_event;
            // An END stamped before its START (a clock that went
            // backwards) closes an empty interval: `end >= start` always.
            iv.end = e.t_ns.max(iv.start);
            iv.end_event = i as u32;
        } else {
            kind_met(&mut self.kinds);
        }
    }

    /// The top of the stack of `e`'s kind and user event, for a user event
    /// or a kind past the table of kinds: in `top_user` or `top_other`.
    #[inline(never)]
    fn top_of<'a>(
        top_user: &'a mut Vec<u32>,
        top_other: &'a mut HashMap<(u16, Option<u32>), u32>,
        e: &Event,
    ) -> &'a mut u32 {
        match e.user() {
            Some(u)
                if (u as usize) < Self::USERS && e.kind == gaspard_format::kinds::GASPARD_USER =>
            {
                let u = u as usize;
                if u >= top_user.len() {
                    top_user.resize(u + 1, 0);
                }
                &mut top_user[u]
            }
            user => top_other.entry((e.kind, user)).or_default(),
        }
    }

    /// What was derived from the events given.
    pub(crate) fn done(self) -> Derived {
        let in_order = self.in_order;
        let (intervals, kinds) = self.intervals();
        // Most streams have no start-up or shutdown event: their intervals
        // are not walked for them (the few start-up kinds looked up, not
        // every kind met: a window's matching is made for a few thousand
        // events).
        let any_startup = startup_kinds()
            .iter()
            .any(|&k| kinds[k as usize / 64] & (1 << (k % 64)) != 0);
        let startup_ns = if any_startup {
            intervals
                .iter()
                .filter(|i| crate::findings::is_startup(i.kind) && i.end != crate::window::OPEN)
                .map(|i| i.end.saturating_sub(i.start))
                .sum()
        } else {
            0
        };
        Derived {
            intervals,
            startup_ns,
            kinds,
            walked: std::sync::OnceLock::new(),
            in_order,
        }
    }

    /// The intervals closed, in START order, and the kinds of the events
    /// (with the STARTs left open, with [`Matcher::keep_open`]).
    fn intervals(self) -> (Vec<Interval>, Vec<u64>) {
        let mut out = self.slots;
        if self.open > 0 {
            // The STARTs left open: no END. A kind with STARTs was noted in
            // `kinds` at each of them: only its top is looked at.
            let top_kind = &self.top_kind;
            let kinds = &self.kinds;
            let noted =
                (0..Self::KINDS / 64).flat_map(|w| set_bits(kinds[w]).map(move |b| w * 64 + b));
            let tops = noted
                .map(|k| &top_kind[k])
                .chain(&self.top_user)
                .chain(self.top_other.values());
            for &top in tops {
                let mut at = top;
                while at > 0 {
                    let iv = &mut out[at as usize - 1];
                    at = iv.end_event;
                    iv.end_event = u32::MAX;
                }
            }
            if !self.keep_open {
                out.retain(|iv| iv.end_event != u32::MAX);
            }
        }
        // Time that went backwards (another core's clock) can break START
        // order (of the intervals kept: checked again when the STARTs were
        // not in order).
        if !self.in_order && !out.is_sorted_by_key(|i| i.start) {
            out.sort_by_key(|i| (i.start, std::cmp::Reverse(i.end)));
        }
        let kinds: Box<[u64]> = self.kinds;
        (out, kinds.into_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Stream;

    /// The intervals as matching STARTs and ENDs on a stack per kind and
    /// user event gives them, the plain way, in START order.
    fn plain(s: &Stream) -> Vec<(u16, u64, u64, u32, u32, u32)> {
        let mut open: HashMap<(u16, Option<u32>), Vec<usize>> = HashMap::default();
        type Iv = (u16, u64, u64, u32, u32, u32);
        let mut out: Vec<Option<Iv>> = Vec::new();
        for (i, e) in s.events.iter().enumerate() {
            let stack = open.entry((e.kind, e.user())).or_default();
            match e.phase {
                0 => {
                    stack.push(out.len());
                    out.push(None);
                    let at = out.len() - 1;
                    out[at] = Some((e.kind, e.t_ns, u64::MAX, e.callsite, i as u32, u32::MAX));
                }
                1 => {
                    if let Some(at) = stack.pop() {
                        let iv = out[at].as_mut().unwrap();
                        iv.2 = e.t_ns.max(iv.1);
                        iv.5 = i as u32;
                    }
                }
                _ => {}
            }
        }
        let mut v: Vec<_> = out
            .into_iter()
            .flatten()
            .filter(|iv| iv.5 != u32::MAX)
            .collect();
        if !v.is_sorted_by_key(|iv| iv.1) {
            v.sort_by_key(|iv| (iv.1, std::cmp::Reverse(iv.2)));
        }
        v
    }

    /// Nested and interleaved kinds, user events, kinds past the table,
    /// STARTs never closed (under closed ones too) and ENDs without a START:
    /// the same intervals as the plain matching, seed after seed.
    #[test]
    fn matching_on_linked_stacks_is_plain_matching() {
        let mut next = crate::testing::below(0x2545_f491_4f6c_dd1d);
        for seed in 0..200 {
            let mut s = Stream::empty("h-1", 0, 0, 16);
            let mut t = 0u64;
            for _ in 0..(50 + seed * 3) {
                let mut kind =
                    [3u16, 4, 5, 3000, gaspard_format::kinds::GASPARD_USER][next(5) as usize];
                let mut phase = [0u8, 0, 1, 1, 2][next(5) as usize];
                // Now and then, a kind met only in ENDs, or only in events
                // of neither phase.
                match next(60) {
                    0 => (kind, phase) = (6, 1),
                    1 => (kind, phase) = (7, 2),
                    _ => {}
                }
                // Now and then, a clock that goes backwards.
                t = if next(20) == 0 {
                    t.saturating_sub(5)
                } else {
                    t + next(3)
                };
                s.push(t, kind, phase, next(4) as u32, &[]);
                if kind == gaspard_format::kinds::GASPARD_USER {
                    let e = s.events.last_mut().unwrap();
                    e.user = next(3) as u32;
                }
            }
            let got: Vec<_> = intervals(&s)
                .iter()
                .map(|iv| {
                    (
                        iv.kind,
                        iv.start,
                        iv.end,
                        iv.callsite,
                        iv.start_event,
                        iv.end_event,
                    )
                })
                .collect();
            assert_eq!(got, plain(&s), "seed {seed}");
            // The kinds noted are those of the events, every one.
            let mut kinds = vec![0u64; (u16::MAX as usize + 1) / 64];
            for e in &s.events {
                kinds[e.kind as usize / 64] |= 1 << (e.kind % 64);
            }
            assert_eq!(kind_bits(&s), &kinds[..], "seed {seed}");
        }
    }
}
