//! The timeline of every thread, summarised for any zoom level.
//!
//! Each thread's START/END intervals ("spans") are kept in lanes by nesting
//! depth; within a lane, spans follow one another, so the spans of a time
//! window are found by binary search. For views too wide to show every
//! span, a pyramid of pixel-sized bins (the busy fraction and the kind class
//! that takes most of each bin's time, the innermost span counting) answers
//! in time proportional to the pixels asked for, not to the events.

use rayon::prelude::*;
use rustc_hash::FxHashMap as HashMap;
use serde_json::Value;
use std::fmt::Write as _;

use gaspard_analyze::intervals::intervals;
use gaspard_analyze::scan::{Overview, Quick};
use gaspard_analyze::trace::{Stream, Trace};
use gaspard_format::kinds::{self, Class};

/// Class names, by class number (0 is time in no span: computation).
pub const CLASSES: [&str; 9] = [
    "compute", "sync", "comm", "memory", "work", "program", "cache", "function", "user",
];

/// Bins of the finest pyramid level over the whole trace.
pub(crate) const FINEST_BINS: usize = 1 << 15;
/// Lanes kept apart; deeper spans share the last one.
const MAX_LANES: usize = 16;

/// One interval of one thread.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    /// START time, ns.
    pub start: u64,
    /// END time, ns.
    pub end: u64,
    /// Index in [`Timeline::names`].
    pub name: u32,
    /// Callsite index of the trace.
    pub site: u32,
    /// Index of the START event in its stream.
    pub event: u32,
    /// Class number (4 bits), lane (4 bits) and the row of the thread on
    /// the other side of a communication (24 bits, [`NO_PEER`] when
    /// unknown): [`Span::class`], [`Span::depth`], [`Span::peer`].
    bits: u32,
}

/// The peer row of [`Span`]s whose peer is unknown (rows are fewer: each
/// keeps a pyramid of `FINEST_BINS` bins and more).
const NO_PEER: u32 = (1 << 24) - 1;

// Every thread keeps one per interval: no padding.
const _: () = assert!(std::mem::size_of::<Span>() == 32);
const _: () = assert!(CLASSES.len() <= 16 && MAX_LANES <= 16);

impl Span {
    /// A span in lane 0.
    fn new(
        start: u64,
        end: u64,
        class: u8,
        name: u32,
        site: u32,
        event: u32,
        peer: Option<u32>,
    ) -> Span {
        let peer = peer.filter(|&p| p < NO_PEER).unwrap_or(NO_PEER);
        Span {
            start,
            end,
            name,
            site,
            event,
            bits: (class as u32 & 0xf) | peer << 8,
        }
    }

    /// Class number (index in [`CLASSES`]).
    pub fn class(&self) -> u8 {
        (self.bits & 0xf) as u8
    }

    /// Lane (nesting depth, capped).
    pub fn depth(&self) -> u8 {
        (self.bits >> 4 & 0xf) as u8
    }

    fn set_depth(&mut self, depth: u8) {
        self.bits = (self.bits & !0xf0) | (depth as u32 & 0xf) << 4;
    }

    /// Thread (row) on the other side of a communication, if known.
    pub fn peer(&self) -> Option<u32> {
        let p = self.bits >> 8;
        (p != NO_PEER).then_some(p)
    }
}

#[derive(Debug, Default)]
struct Lane {
    /// Indices in the thread's spans, by start.
    spans: Vec<u32>,
    /// Largest end among `spans[..=i]`.
    max_end: Vec<u64>,
}

/// One thread's spans, lanes and pyramid.
#[derive(Debug)]
pub struct ThreadLine {
    /// How findings name the thread.
    pub name: String,
    /// Its spans, by start.
    pub spans: Vec<Span>,
    lanes: Vec<Lane>,
    /// Level k has `FINEST_BINS >> k` bins of (class, busy 0..255).
    levels: Vec<Vec<[u8; 2]>>,
}

/// Every thread's timeline.
#[derive(Debug)]
pub struct Timeline {
    /// First event, ns.
    pub t0: u64,
    /// Last event, ns.
    pub t1: u64,
    /// Rows, in stream order.
    pub threads: Vec<ThreadLine>,
    /// Span names.
    pub names: Vec<String>,
    /// Whether the spans are unknown, only the pyramids there (a timeline
    /// from the view index): every answer is columns alone.
    pub coarse: bool,
}

fn class_of(kind: u16, user: bool) -> u8 {
    if user {
        return 8;
    }
    match kinds::kind(kind).map(|k| k.class) {
        Some(Class::Sync) => 1,
        Some(Class::Comm) => 2,
        Some(Class::Memory) => 3,
        Some(Class::Work) => 4,
        Some(Class::Program) | None => 5,
        Some(Class::Cache) => 6,
        Some(Class::Function) => 7,
        Some(Class::User) => 8,
    }
}

/// gaspard's own events (start-up, measurement on/off, losses, clock
/// measurements), not the program's.
fn is_tool(kind: u16) -> bool {
    matches!(
        kind,
        kinds::GASPARD_INIT
            | kinds::GASPARD_MEASUREMENT
            | kinds::GASPARD_LOST
            | kinds::GASPARD_CLOCK_SYNC
    )
}

/// The other side of a communication event, as a rank.
fn peer_rank(s: &Stream, e: &gaspard_analyze::trace::Event) -> Option<u64> {
    use gaspard_analyze::objects::arg;
    arg(s, e, "pe")
        .or_else(|| arg(s, e, "peer"))
        .or_else(|| arg(s, e, "target"))
}

impl Timeline {
    /// Builds the timeline of a trace.
    pub fn build(t: &Trace) -> Timeline {
        let t0 = t
            .streams
            .iter()
            .filter_map(|s| s.events.first().map(|e| e.t_ns))
            .min()
            .unwrap_or(0);
        let t1 = t
            .streams
            .iter()
            .filter_map(|s| s.events.last().map(|e| e.t_ns))
            .max()
            .unwrap_or(t0)
            .max(t0 + 1);
        // Row of each (model, rank): the first stream of that rank's process.
        let ranks: Vec<Option<gaspard_analyze::matrix::Rank>> = t
            .streams
            .iter()
            .map(gaspard_analyze::matrix::rank)
            .collect();
        let mut row_of_rank: HashMap<(&str, usize), u32> = HashMap::default();
        for (i, r) in ranks.iter().enumerate() {
            if let Some(r) = r {
                row_of_rank.entry((r.model, r.me)).or_insert(i as u32);
            }
        }
        let mut names: Vec<String> = Vec::new();
        let mut name_ids: HashMap<String, u32> = HashMap::default();
        let mut key_ids: HashMap<(u16, Option<u32>), u32> = HashMap::default();
        let mut threads = Vec::with_capacity(t.streams.len());
        for (si, s) in t.streams.iter().enumerate() {
            let mut spans = Vec::with_capacity(intervals(s).len());
            for iv in intervals(s) {
                if is_tool(iv.kind) {
                    continue;
                }
                let e = &s.events[iv.start_event as usize];
                let name = if e.kind == kinds::C_FUNC && e.user().is_none() {
                    let n = gaspard_analyze::dump::event_name(t, e);
                    let next = names.len() as u32;
                    *name_ids.entry(n.clone()).or_insert_with(|| {
                        names.push(n);
                        next
                    })
                } else {
                    let next = names.len() as u32;
                    *key_ids.entry((e.kind, e.user())).or_insert_with(|| {
                        names.push(gaspard_analyze::dump::event_name(t, e));
                        next
                    })
                };
                let class = class_of(iv.kind, e.user().is_some());
                let peer = if class == 2 {
                    ranks[si].and_then(|r| {
                        let p = peer_rank(s, &s.events[iv.end_event as usize])?;
                        row_of_rank.get(&(r.model, p as usize)).copied()
                    })
                } else {
                    None
                };
                spans.push(Span::new(
                    iv.start,
                    iv.end.max(iv.start),
                    class,
                    name,
                    iv.callsite,
                    iv.start_event,
                    peer,
                ));
            }
            threads.push(ThreadLine::new(
                gaspard_analyze::findings::thread_name(s),
                spans,
                t0,
                t1,
            ));
        }
        Timeline {
            t0,
            t1,
            threads,
            names,
            coarse: false,
        }
    }

    /// The timeline of a quick scan: the same as [`Timeline::build`] gives
    /// for the whole trace (but for what the whole trace's reader adds).
    pub fn from_quick(q: Quick) -> Timeline {
        let (t0, t1) = q.span().unwrap_or((0, 0));
        let t1 = t1.max(t0 + 1);
        let mut row_of_rank: HashMap<(&str, usize), u32> = HashMap::default();
        for (i, s) in q.streams.iter().enumerate() {
            if let Some(r) = s.rank {
                row_of_rank.entry((r.model, r.me)).or_insert(i as u32);
            }
        }
        // Each thread's scan is let go as soon as its line is built (the
        // memory goes to the next ones).
        let threads = q
            .streams
            .into_par_iter()
            .map(|s| {
                let mut spans = Vec::with_capacity(s.spans.len());
                spans.extend(
                    s.spans
                        .iter()
                        .filter(|sp| !is_tool(sp.kind))
                        .map(|sp| span_of_quick(sp, s.rank, &row_of_rank)),
                );
                drop(s.spans);
                ThreadLine::new(s.name, spans, t0, t1)
            })
            .collect();
        Timeline {
            t0,
            t1,
            threads,
            names: q.names,
            coarse: false,
        }
    }

    /// The timeline of an overview ([`gaspard_analyze::scan::overview`]
    /// with [`Timeline::overview_class`], `FINEST_BINS` bins): pyramids
    /// alone, as the view index's, those the whole trace's spans give but
    /// for rounding at the edges of bins.
    pub fn from_overview(o: Overview) -> Option<Timeline> {
        if o.bins != FINEST_BINS || o.classes != CLASSES.len() {
            return None;
        }
        let threads = o
            .streams
            .into_par_iter()
            .map(|s| (s.name, levels_of(s.bins)))
            .collect();
        Timeline::from_levels(o.t0, o.t1, Vec::new(), threads)
    }

    /// The class an overview counts an interval of `kind` in (as
    /// [`Timeline::build`] does), `None` for gaspard's own.
    pub fn overview_class(kind: u16, user: bool) -> Option<u8> {
        (user || !is_tool(kind)).then(|| class_of(kind, user))
    }

    /// A timeline of pyramids alone (as [`ThreadLine::levels`] gives them,
    /// one thread by (name, levels)), without spans: its answers are
    /// columns, from the finest level when the view is finer still.
    /// `None` when the levels are not those of a pyramid over `[t0, t1]`.
    pub fn from_levels(
        t0: u64,
        t1: u64,
        names: Vec<String>,
        threads: Vec<(String, Vec<Vec<[u8; 2]>>)>,
    ) -> Option<Timeline> {
        if t1 <= t0 {
            return None;
        }
        let threads = threads
            .into_iter()
            .map(|(name, levels)| {
                let mut bins = FINEST_BINS;
                for (k, level) in levels.iter().enumerate() {
                    if level.len() != bins
                        || level.iter().any(|b| b[0] as usize >= CLASSES.len())
                        || (bins == 1) != (k + 1 == levels.len())
                    {
                        return None;
                    }
                    bins /= 2;
                }
                if levels.is_empty() {
                    return None;
                }
                Some(ThreadLine {
                    name,
                    spans: Vec::new(),
                    lanes: Vec::new(),
                    levels,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Timeline {
            t0,
            t1,
            threads,
            names,
            coarse: true,
        })
    }

    /// The view of `[a, b)` at `width` pixels: per thread, columns of
    /// (class, busy) and the spans, as many whole lanes as fit in `limit`
    /// spans per thread; JSON text (written directly: a view may carry
    /// hundreds of thousands of spans), with `extra` (`"key":value,...`)
    /// among its first fields.
    pub fn window_json(&self, a: u64, b: u64, width: usize, limit: usize, extra: &str) -> String {
        let width = width.clamp(1, 8192);
        let b = b.max(a.saturating_add(1));
        // On the calling thread: the thread pool may be busy reading the
        // whole trace, and an answer must not wait for it.
        let parts: Vec<String> = self
            .threads
            .iter()
            .map(|th| {
                let mut out = String::new();
                // Without spans, the page draws the columns.
                let limit = if self.coarse { None } else { Some(limit) };
                th.window_into(th, &mut out, self.t0, self.t1, a, b, width, limit);
                out
            })
            .collect();
        answer(extra, a, b, width, &parts)
    }

    /// [`Timeline::window_json`] with the spans of `w`, a window of the
    /// trace read from its chunks ([`gaspard_analyze::scan::Windows::window`],
    /// streams in this timeline's row order, `ranks` their processes'),
    /// the columns from this timeline's pyramids. The answer carries the
    /// window's own span names and callsites (`names`, `sites`), which its
    /// spans refer to, and `"exact":true`.
    #[allow(clippy::too_many_arguments)]
    pub fn window_json_read(
        &self,
        w: gaspard_analyze::scan::Window,
        ranks: &[Option<gaspard_analyze::matrix::Rank>],
        a: u64,
        b: u64,
        width: usize,
        limit: usize,
        extra: &str,
    ) -> String {
        let width = width.clamp(1, 8192);
        let b = b.max(a.saturating_add(1));
        let mut row_of_rank: HashMap<(&str, usize), u32> = HashMap::default();
        for (i, r) in ranks.iter().enumerate() {
            if let Some(r) = r {
                row_of_rank.entry((r.model, r.me)).or_insert(i as u32);
            }
        }
        let mut parts = Vec::with_capacity(self.threads.len());
        for (i, th) in self.threads.iter().enumerate() {
            let rank = ranks.get(i).copied().flatten();
            let spans: Vec<Span> = w
                .streams
                .get(i)
                .map(|v| v.as_slice())
                .unwrap_or_default()
                .iter()
                .filter(|sp| !is_tool(sp.kind))
                .map(|sp| span_of_quick(sp, rank, &row_of_rank))
                .collect();
            let line = ThreadLine::lanes_of(th.name.clone(), spans);
            let mut out = String::new();
            th.window_into(&line, &mut out, self.t0, self.t1, a, b, width, Some(limit));
            parts.push(out);
        }
        let sites: Vec<Value> = w
            .callsites
            .iter()
            .map(|c| serde_json::json!([c.file, c.line]))
            .collect();
        let extra = format!(
            "{extra}\"exact\":true,\"names\":{},\"sites\":{},",
            serde_json::to_string(&w.names).unwrap_or_else(|_| "[]".into()),
            serde_json::to_string(&sites).unwrap_or_else(|_| "[]".into()),
        );
        answer(&extra, a, b, width, &parts)
    }

    /// [`Timeline::window_json`], parsed.
    pub fn window(&self, a: u64, b: u64, width: usize, limit: usize) -> Value {
        serde_json::from_str(&self.window_json(a, b, width, limit, "")).unwrap_or(Value::Null)
    }
}

impl ThreadLine {
    fn new(name: String, spans: Vec<Span>, t0: u64, t1: u64) -> ThreadLine {
        let mut line = ThreadLine::lanes_of(name, spans);
        line.levels = pyramid(&line.spans, t0, t1);
        line
    }

    /// A thread's spans in lanes, without a pyramid.
    fn lanes_of(name: String, mut spans: Vec<Span>) -> ThreadLine {
        // By start, an enclosing span before those it holds, then in event
        // order (spans come in START order, mostly sorted already).
        sort_nearly_sorted(&mut spans, |s: &Span| {
            (s.start, std::cmp::Reverse(s.end), s.event)
        });
        // Depth: spans still open when this one starts.
        let mut open: Vec<u64> = Vec::new();
        let mut per_lane = [0usize; MAX_LANES];
        for sp in spans.iter_mut() {
            while open.last().is_some_and(|&e| e <= sp.start) {
                open.pop();
            }
            // Ends not properly nested: drop those that ended anyway.
            open.retain(|&e| e > sp.start);
            let d = open.len().min(MAX_LANES - 1);
            sp.set_depth(d as u8);
            per_lane[d] += 1;
            open.push(sp.end);
        }
        let used = per_lane.iter().rposition(|&n| n > 0).map_or(0, |d| d + 1);
        let mut lanes: Vec<Lane> = per_lane[..used]
            .iter()
            .map(|&n| Lane {
                spans: Vec::with_capacity(n),
                max_end: Vec::with_capacity(n),
            })
            .collect();
        for (i, sp) in spans.iter().enumerate() {
            let lane = &mut lanes[sp.depth() as usize];
            let m = lane.max_end.last().copied().unwrap_or(0).max(sp.end);
            lane.spans.push(i as u32);
            lane.max_end.push(m);
        }
        ThreadLine {
            name,
            spans,
            lanes,
            levels: Vec::new(),
        }
    }

    /// Its pyramid: level k has `FINEST_BINS >> k` bins of (class number,
    /// busy share 0..255).
    pub fn levels(&self) -> &[Vec<[u8; 2]>] {
        &self.levels
    }

    /// [`ThreadLine::window_into`], parsed.
    #[cfg(test)]
    fn window(&self, t0: u64, t1: u64, a: u64, b: u64, width: usize, limit: usize) -> Value {
        let mut out = String::new();
        self.window_into(self, &mut out, t0, t1, a, b, width, Some(limit));
        serde_json::from_str(&out).unwrap()
    }

    /// One thread's part of a timeline answer: columns from this line's
    /// pyramid, spans from `spans_of`'s lanes (this line's own, or a window
    /// read from the trace).
    #[allow(clippy::too_many_arguments)]
    fn window_into(
        &self,
        spans_of: &ThreadLine,
        out: &mut String,
        t0: u64,
        t1: u64,
        a: u64,
        b: u64,
        width: usize,
        limit: Option<usize>,
    ) {
        // Columns from the coarsest level whose bins are no wider than a pixel.
        let px = (b - a) as f64 / width as f64;
        let total = (t1 - t0) as f64;
        let mut level = 0;
        while level + 1 < self.levels.len() && total / (self.levels[level + 1].len() as f64) <= px {
            level += 1;
        }
        let bins = &self.levels[level];
        let bin_w = total / bins.len() as f64;
        let mut cls = Vec::with_capacity(width);
        let mut busy = Vec::with_capacity(width);
        for x in 0..width {
            let from = a as f64 + x as f64 * px - t0 as f64;
            let to = from + px;
            let lo = (from / bin_w).floor().max(0.0) as usize;
            let hi = ((to / bin_w).ceil().max(0.0) as usize).min(bins.len());
            let mut weight = [0u32; CLASSES.len()];
            let (mut sum, mut n) = (0u32, 0u32);
            for bin in bins.iter().take(hi).skip(lo) {
                weight[bin[0] as usize] += bin[1] as u32;
                sum += bin[1] as u32;
                n += 1;
            }
            let c = (0..CLASSES.len()).max_by_key(|&c| weight[c]).unwrap_or(0);
            cls.push(if sum == 0 { 0 } else { c });
            busy.push(sum.checked_div(n).unwrap_or(0));
        }
        // Spans: whole lanes, outermost first, while they fit.
        let ranges: Vec<(usize, usize)> = spans_of
            .lanes
            .iter()
            .map(|l| {
                let lo = l.max_end.partition_point(|&m| m <= a);
                let hi = l
                    .spans
                    .partition_point(|&i| spans_of.spans[i as usize].start < b);
                (lo, hi.max(lo))
            })
            .collect();
        let mut spans = String::new();
        // No limit: the spans are not known, the answer is incomplete.
        let mut complete = limit.is_some();
        let limit = limit.unwrap_or(0);
        let mut count = 0;
        for (lane, &(lo, hi)) in spans_of.lanes.iter().zip(&ranges) {
            if count + (hi - lo) > limit {
                complete = false;
                break;
            }
            count += hi - lo;
            for &i in &lane.spans[lo..hi] {
                let s = &spans_of.spans[i as usize];
                if s.end < a {
                    continue;
                }
                if !spans.is_empty() {
                    spans.push(',');
                }
                let _ = write!(
                    spans,
                    "[{},{},{},{},{},{},{},{}]",
                    s.start,
                    s.end,
                    s.class(),
                    s.depth(),
                    s.name,
                    s.site,
                    s.event,
                    s.peer().map_or(-1, |p| p as i64)
                );
            }
        }
        fn list<T: std::fmt::Display>(v: &[T]) -> String {
            let mut t = String::with_capacity(v.len() * 4);
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    t.push(',');
                }
                let _ = write!(t, "{x}");
            }
            t
        }
        let _ = write!(
            out,
            "{{\"name\":{},\"level\":{level},\"cls\":[{}],\"busy\":[{}],\"complete\":{complete},\"lanes\":{},\"spans\":[{spans}]}}",
            serde_json::to_string(&self.name).unwrap_or_else(|_| "\"\"".into()),
            list(&cls),
            list(&busy),
            spans_of.lanes.len(),
        );
    }
}

/// A timeline answer: `extra` (`"key":value,...`), the window and each
/// thread's part.
fn answer(extra: &str, a: u64, b: u64, width: usize, parts: &[String]) -> String {
    let mut out =
        String::with_capacity(parts.iter().map(String::len).sum::<usize>() + extra.len() + 128);
    let _ = write!(
        out,
        "{{{extra}\"t0\":{a},\"t1\":{b},\"width\":{width},\"threads\":["
    );
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(p);
    }
    out.push_str("]}");
    out
}

/// The timeline's span of a quick scan's (or a window's) span of a thread
/// of `rank`: its peer's row found by rank.
fn span_of_quick(
    sp: &gaspard_analyze::scan::QuickSpan,
    rank: Option<gaspard_analyze::matrix::Rank>,
    row_of_rank: &HashMap<(&str, usize), u32>,
) -> Span {
    let class = class_of(sp.kind, sp.user);
    let peer = if class == 2 {
        rank.and_then(|r| {
            let p = sp.peer()?;
            row_of_rank.get(&(r.model, p as usize)).copied()
        })
    } else {
        None
    };
    Span::new(
        sp.start,
        sp.end.max(sp.start),
        class,
        sp.name,
        sp.callsite,
        sp.start_event,
        peer,
    )
}

/// Sorts `v` by `key`, fast when it is nearly sorted already (as spans
/// are, in START order: only equal times may be out of order): an insertion
/// sort while it moves few elements, an ordinary sort otherwise.
fn sort_nearly_sorted<T: Copy, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    let mut budget = v.len().saturating_mul(4);
    for i in 1..v.len() {
        if key(&v[i - 1]) <= key(&v[i]) {
            continue;
        }
        let x = v[i];
        let kx = key(&x);
        let mut j = i;
        while j > 0 && key(&v[j - 1]) > kx {
            v[j] = v[j - 1];
            j -= 1;
            budget = budget.saturating_sub(1);
        }
        v[j] = x;
        if budget == 0 {
            v.sort_unstable_by_key(key);
            return;
        }
    }
}

/// Bins of busy time per class, innermost span counting, at every level.
fn pyramid(spans: &[Span], t0: u64, t1: u64) -> Vec<Vec<[u8; 2]>> {
    let n = CLASSES.len();
    let total = (t1 - t0) as f64;
    let bin_w = total / FINEST_BINS as f64;
    let mut acc = vec![0f32; FINEST_BINS * n];
    let mut add = |from: u64, to: u64, class: u8| {
        if to <= from {
            return;
        }
        let f = (from.saturating_sub(t0)) as f64 / bin_w;
        let g = (to.saturating_sub(t0)) as f64 / bin_w;
        // floor and ceil of values never negative, without a libm call.
        let gi = g as usize;
        let (lo, hi) = (
            f as usize,
            (gi + usize::from((gi as f64) < g)).min(FINEST_BINS),
        );
        for bin in lo.min(FINEST_BINS)..hi {
            let o = (g.min(bin as f64 + 1.0) - f.max(bin as f64)).max(0.0);
            acc[bin * n + class as usize] += o as f32;
        }
    };
    // Sweep the span boundaries in time order, ends first at equal times.
    let mut ends: Vec<(u64, u32)> = spans
        .iter()
        .enumerate()
        .map(|(i, s)| (s.end, i as u32))
        .collect();
    sort_nearly_sorted(&mut ends, |&e| e);
    let mut active: Vec<u32> = Vec::new();
    let (mut si, mut ei) = (0, 0);
    let mut now = t0;
    while si < spans.len() || ei < ends.len() {
        let take_end = ei < ends.len() && (si >= spans.len() || ends[ei].0 <= spans[si].start);
        let at = if take_end {
            ends[ei].0
        } else {
            spans[si].start
        };
        if let Some(&top) = active.last() {
            add(now, at, spans[top as usize].class());
        }
        now = at;
        if take_end {
            let id = ends[ei].1;
            if let Some(p) = active.iter().rposition(|&x| x == id) {
                active.remove(p);
            }
            ei += 1;
        } else {
            // An empty span's end came first (ends first at equal times):
            // it takes no time, and is not left open.
            if spans[si].end > spans[si].start {
                active.push(si as u32);
            }
            si += 1;
        }
    }
    levels_of(acc)
}

/// The pyramid of the busy shares per (finest bin, class) `acc`
/// (`FINEST_BINS` rows of `CLASSES.len()`).
fn levels_of(acc: Vec<f32>) -> Vec<Vec<[u8; 2]>> {
    let n = CLASSES.len();
    let mut levels = Vec::new();
    let mut cur = acc;
    let mut bins = FINEST_BINS;
    loop {
        let mut level = Vec::with_capacity(bins);
        for row in cur.chunks_exact(n) {
            let mut sum = 0f32;
            // The class taking most of the bin (the last one on a tie), not
            // counting computation (class 0).
            let mut c = 1;
            for (x, &w) in row.iter().enumerate() {
                sum += w;
                if x >= 1 && w >= row[c] {
                    c = x;
                }
            }
            let busy = (sum.min(1.0) * 255.0).round() as u8;
            level.push([if busy == 0 { 0 } else { c as u8 }, busy]);
        }
        levels.push(level);
        if bins == 1 {
            break;
        }
        bins /= 2;
        let next: Vec<f32> = cur
            .chunks_exact(2 * n)
            .flat_map(|pair| {
                let (a, b) = pair.split_at(n);
                a.iter().zip(b).map(|(x, y)| (x + y) / 2.0)
            })
            .collect();
        cur = next;
    }
    levels
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn span(start: u64, end: u64, class: u8, event: u32) -> Span {
        Span::new(start, end, class, 0, 0, event, None)
    }

    /// A thread busy in [0, 1000): sync [0, 1000) holding comm [200, 400);
    /// then idle until 2000.
    fn line() -> ThreadLine {
        ThreadLine::new(
            "t".into(),
            vec![span(200, 400, 2, 1), span(0, 1000, 1, 0)],
            0,
            2000,
        )
    }

    #[test]
    fn nearly_sorted_and_shuffled_input_both_end_sorted() {
        let mut v: Vec<u64> = (0..1000).collect();
        v.swap(10, 11);
        v.swap(500, 502);
        sort_nearly_sorted(&mut v, |&x| x);
        assert!(v.is_sorted());
        // Far from sorted: the budget runs out, an ordinary sort finishes.
        let mut w: Vec<u64> = (0..1000).rev().collect();
        sort_nearly_sorted(&mut w, |&x| x);
        assert_eq!(w, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn lanes_by_nesting_depth() {
        let th = line();
        assert_eq!(th.spans[0].event, 0);
        assert_eq!(th.spans[0].depth(), 0);
        assert_eq!(th.spans[1].depth(), 1);
        assert_eq!(th.lanes.len(), 2);
    }

    #[test]
    fn columns_give_busy_share_and_main_class() {
        let th = line();
        let v = th.window(0, 2000, 0, 2000, 4, 100);
        // Columns of 500 ns: [0,500) busy, sync 300 vs comm 200 (innermost
        // counts); [500,1000) sync; then idle.
        assert_eq!(v["cls"], json!([1, 1, 0, 0]));
        assert_eq!(v["busy"], json!([255, 255, 0, 0]));
        let v = th.window(0, 2000, 200, 400, 2, 100);
        assert_eq!(v["cls"], json!([2, 2]));
        assert_eq!(v["busy"], json!([255, 255]));
        // Half of a column busy.
        let v = th.window(0, 2000, 0, 2000, 1, 100);
        assert_eq!(v["busy"], json!([128]));
    }

    #[test]
    fn an_empty_span_takes_no_time() {
        // An empty comm span inside a sync span, then idle time: the
        // columns after the sync span are idle.
        let th = ThreadLine::new(
            "t".into(),
            vec![span(0, 1000, 1, 0), span(500, 500, 2, 1)],
            0,
            2000,
        );
        let v = th.window(0, 2000, 0, 2000, 4, 100);
        assert_eq!(v["cls"], json!([1, 1, 0, 0]));
        assert_eq!(v["busy"], json!([255, 255, 0, 0]));
    }

    #[test]
    fn spans_of_a_window_whole_lanes_within_the_limit() {
        let th = line();
        let v = th.window(0, 2000, 500, 2000, 10, 100);
        // Only the outer span reaches past 500.
        let spans = v["spans"].as_array().unwrap();
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0][6], 0);
        assert_eq!(v["complete"], true);
        let v = th.window(0, 2000, 0, 2000, 10, 1);
        assert_eq!(v["spans"].as_array().unwrap().len(), 1);
        assert_eq!(v["complete"], false);
        let v = th.window(0, 2000, 1500, 2000, 10, 100);
        assert!(v["spans"].as_array().unwrap().is_empty());
    }

    #[test]
    fn many_spans_cost_no_more_than_the_limit() {
        // 100000 back-to-back spans: a whole-run view sends none of them,
        // a narrow one sends just those inside it.
        let spans: Vec<Span> = (0..100_000u64)
            .map(|i| span(i * 10, i * 10 + 5, 1 + (i % 2) as u8, i as u32))
            .collect();
        let th = ThreadLine::new("t".into(), spans, 0, 1_000_000);
        let v = th.window(0, 1_000_000, 0, 1_000_000, 100, 4000);
        assert!(v["spans"].as_array().unwrap().is_empty());
        assert_eq!(v["complete"], false);
        assert_eq!(v["busy"][0], 128);
        let v = th.window(0, 1_000_000, 500_000, 500_100, 100, 4000);
        let got: Vec<u64> = v["spans"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s[6].as_u64().unwrap())
            .collect();
        assert_eq!(got, (50_000..50_010).collect::<Vec<_>>());
    }
}
