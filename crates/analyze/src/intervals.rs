//! START/END pairs of a thread's events, matched the way every analysis
//! matches them: per kind (and user event), innermost first.

use rustc_hash::FxHashMap as HashMap;

use crate::trace::Stream;

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
    /// Its barriers ([`crate::findings::barriers`]), found when first asked for.
    pub(crate) barriers: std::sync::OnceLock<Vec<Interval>>,
}

/// Whether `s` has events of kind `kind` (without looking at them all).
pub(crate) fn has_kind(s: &Stream, kind: u16) -> bool {
    let bits = &derived(s).kinds;
    bits[kind as usize / 64] & (1 << (kind % 64)) != 0
}

pub(crate) fn derived(s: &Stream) -> &Derived {
    s.intervals.get_or_init(|| {
        let (intervals, kinds) = compute(s);
        let startup_ns = intervals
            .iter()
            .filter(|i| crate::findings::is_startup(i.kind))
            .map(|i| i.end.saturating_sub(i.start))
            .sum();
        Derived {
            intervals,
            startup_ns,
            kinds,
            barriers: std::sync::OnceLock::new(),
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
    let mut open_other: HashMap<(u16, Option<u32>), Vec<usize>> = HashMap::default();
    // An interval whose END is not met keeps `end_event` at `u32::MAX` (no
    // event's index) and is dropped at the end.
    let starts = s.events.iter().filter(|e| e.phase == 0).count();
    let mut slots: Vec<Interval> = Vec::with_capacity(starts);
    let mut kinds = vec![0u64; (u16::MAX as usize + 1) / 64];
    for (i, e) in s.events.iter().enumerate() {
        kinds[e.kind as usize / 64] |= 1 << (e.kind % 64);
        if e.phase > 1 {
            continue;
        }
        let stack = if e.user().is_none() && (e.kind as usize) < KINDS {
            &mut open_kind[e.kind as usize]
        } else {
            open_other.entry((e.kind, e.user())).or_default()
        };
        if e.phase == 0 {
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
            let iv = &mut slots[slot];
            // An END stamped before its START (a clock that went
            // backwards) closes an empty interval: `end >= start` always.
            iv.end = e.t_ns.max(iv.start);
            iv.end_event = i as u32;
        }
    }
    let mut out = slots;
    out.retain(|iv| iv.end_event != u32::MAX);
    // Time that went backwards (another core's clock) can break START order.
    if !out.is_sorted_by_key(|i| i.start) {
        out.sort_by_key(|i| (i.start, std::cmp::Reverse(i.end)));
    }
    (out, kinds)
}
