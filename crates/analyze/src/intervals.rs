//! START/END pairs of a thread's events, matched the way every analysis
//! matches them: per kind (and user event), innermost first.

use rustc_hash::FxHashMap as HashMap;

use crate::trace::{Event, Stream};

/// One closed interval on one thread.
#[derive(Debug, Clone, Copy)]
pub struct Interval {
    /// Canonical kind.
    pub kind: u16,
    /// START time, ns.
    pub start: u64,
    /// END time, ns.
    pub end: u64,
    /// Callsite of the START.
    pub callsite: u32,
    /// Index of the START event in the stream (streams hold at most
    /// [`crate::trace::MAX_STREAM_EVENTS`]).
    pub start_event: u32,
    /// Index of the END event in the stream.
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
    ivs.iter().enumerate().map(move |(j, iv)| {
        if let Some(e) = ivs.get(j + AHEAD).and_then(|a| s.events.get(event(a))) {
            prefetch(e);
        }
        if args {
            if let Some(e) = ivs.get(j + ARGS_AHEAD).and_then(|a| s.events.get(event(a))) {
                if let Some(w) = s.args(e).first() {
                    prefetch(w);
                }
            }
        }
        (iv, &s.events[event(iv)])
    })
}

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
    kinds: Vec<u64>,
    /// Its time split, barriers, transfers and regions
    /// ([`crate::findings::walked`]), found when first asked for.
    pub(crate) walked: std::sync::OnceLock<crate::findings::Walked>,
    /// Its work between consecutive barriers ([`crate::findings::epoch_work`]).
    pub(crate) epoch_work: std::sync::OnceLock<Vec<f64>>,
}

/// Whether `s` has events of kind `kind` (without looking at them all).
/// The kinds of `s`'s events, a bit each (kind `k`: bit `k % 64` of word
/// `k / 64`).
pub(crate) fn kind_bits(s: &Stream) -> &[u64] {
    &derived(s).kinds
}

pub(crate) fn has_kind(s: &Stream, kind: u16) -> bool {
    let bits = &derived(s).kinds;
    bits[kind as usize / 64] & (1 << (kind % 64)) != 0
}

pub(crate) fn derived(s: &Stream) -> &Derived {
    s.intervals.get_or_init(|| {
        let (intervals, kinds) = compute(s);
        // Most streams have no start-up or shutdown event: their intervals
        // are not walked for them.
        let any_startup = kinds.iter().enumerate().any(|(w, &bits)| {
            bits != 0
                && (0..64u16)
                    .filter(|b| bits & (1 << b) != 0)
                    .any(|b| crate::findings::is_startup(w as u16 * 64 + b))
        });
        let startup_ns = if any_startup {
            intervals
                .iter()
                .filter(|i| crate::findings::is_startup(i.kind))
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
            epoch_work: std::sync::OnceLock::new(),
        }
    })
}

/// The stream's intervals, and the kinds of its events ([`Derived`]).
fn compute(s: &Stream) -> (Vec<Interval>, Vec<u64>) {
    // Open STARTs per kind (kinds below KINDS directly, user events and
    // larger kinds in a map); each START takes its place in `out` at once,
    // so that `out` is in START order, and is filled in by its END.
    const KINDS: usize = 2048;
    let mut open_kind: Vec<Vec<usize>> = vec![Vec::new(); KINDS];
    // User events' (by user event below USERS) and the other kinds' (in a map).
    const USERS: usize = 4096;
    let mut open_user: Vec<Vec<usize>> = Vec::new();
    let mut open_other: HashMap<(u16, Option<u32>), Vec<usize>> = HashMap::default();
    // An interval whose END is not met keeps `end_event` at `u32::MAX` (no
    // event's index) and is dropped at the end.
    // At most one interval per two events, mostly: reserved at once without
    // a pass to count the STARTs (a stream's events are megabytes to read).
    let mut slots: Vec<Interval> = Vec::with_capacity(s.events.len() / 2 + 1);
    let mut kinds = vec![0u64; (u16::MAX as usize + 1) / 64];
    // STARTs not yet closed, and whether the STARTs came in time order so
    // far: most streams need neither the pass dropping unclosed intervals
    // nor the one checking their order.
    let mut open = 0usize;
    let (mut in_order, mut last_start) = (true, 0u64);
    for (i, e) in s.events.iter().enumerate() {
        kinds[e.kind as usize / 64] |= 1 << (e.kind % 64);
        if e.phase > 1 {
            continue;
        }
        let stack = match e.user() {
            None if (e.kind as usize) < KINDS => &mut open_kind[e.kind as usize],
            Some(u) if (u as usize) < USERS && e.kind == gaspard_format::kinds::GASPARD_USER => {
                let u = u as usize;
                if u >= open_user.len() {
                    open_user.resize(u + 1, Vec::new());
                }
                &mut open_user[u]
            }
            user => open_other.entry((e.kind, user)).or_default(),
        };
        if e.phase == 0 {
            open += 1;
            in_order &= e.t_ns >= last_start;
            last_start = e.t_ns;
            stack.push(slots.len());
            slots.push(Interval {
                kind: e.kind,
                start: e.t_ns,
                end: u64::MAX,
                callsite: e.callsite,
                start_event: i as u32,
                end_event: u32::MAX,
            });
        } else if let Some(slot) = stack.pop() {
            open -= 1;
            let iv = &mut slots[slot];
            // An END stamped before its START (a clock that went
            // backwards) closes an empty interval: `end >= start` always.
            iv.end = e.t_ns.max(iv.start);
            iv.end_event = i as u32;
        }
    }
    let mut out = slots;
    if open > 0 {
        out.retain(|iv| iv.end_event != u32::MAX);
    }
    // Time that went backwards (another core's clock) can break START order
    // (of the intervals kept: checked again when the STARTs were not in order).
    if !in_order && !out.is_sorted_by_key(|i| i.start) {
        out.sort_by_key(|i| (i.start, std::cmp::Reverse(i.end)));
    }
    (out, kinds)
}
