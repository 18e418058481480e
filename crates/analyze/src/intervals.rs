//! START/END pairs of a thread's events, matched the way every analysis
//! matches them: per kind (and user event), innermost first.

use std::collections::HashMap;

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
    /// Index of the START event in the stream.
    pub start_event: usize,
    /// Index of the END event in the stream.
    pub end_event: usize,
}

/// The thread's intervals, by start time (an enclosing interval before those it holds).
pub fn intervals(s: &Stream) -> Vec<Interval> {
    let mut open: HashMap<(u16, Option<u32>), Vec<usize>> = HashMap::new();
    let mut out = Vec::new();
    for (i, e) in s.events.iter().enumerate() {
        match e.phase {
            0 => open.entry((e.kind, e.user)).or_default().push(i),
            1 => {
                if let Some(j) = open.get_mut(&(e.kind, e.user)).and_then(|v| v.pop()) {
                    let st = &s.events[j];
                    out.push(Interval {
                        kind: e.kind,
                        start: st.t_ns,
                        end: e.t_ns,
                        callsite: st.callsite,
                        start_event: j,
                        end_event: i,
                    });
                }
            }
            _ => {}
        }
    }
    out.sort_by_key(|i| (i.start, std::cmp::Reverse(i.end)));
    out
}
