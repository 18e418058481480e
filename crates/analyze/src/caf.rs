//! Coarray Fortran in coarray terms.
//!
//! OpenCoarrays runs coarrays on MPI one-sided communication, so a CAF
//! program is recorded at the MPI level. Here its MPI patterns are recognised
//! and the coarray operations added as GASP_CAF_* events, the MPI events
//! staying where they are:
//!
//! | MPI pattern | event |
//! |---|---|
//! | `MPI_Win_allocate` | `GASP_CAF_COARRAY` (each coarray) |
//! | lock + put(s) + unlock | `GASP_CAF_PUT` (image, coarray, offset, bytes) |
//! | lock + get(s) + unlock | `GASP_CAF_GET` |
//! | lock + accumulate + unlock | `GASP_CAF_EVENT_POST` |
//! | lock + compare_and_swap(s) + unlock | `GASP_CAF_LOCK` (lock, critical) |
//! | barrier | `GASP_CAF_SYNC_ALL` |
//! | sends and receives of tag 424242 with their waits | `GASP_CAF_SYNC_IMAGES` |
//! | allreduce sum / min / max / other | `GASP_CAF_CO_SUM` / `_CO_MIN` / `_CO_MAX` / `_CO_REDUCE` |
//! | bcast | `GASP_CAF_CO_BROADCAST` |
//!
//! A process is taken for a CAF program when it loaded the gfortran runtime
//! and created OpenCoarrays' dynamic window at start-up. The synchronization
//! the runtime does itself at the end of the program is left out.

use rustc_hash::FxHashMap as HashMap;
use std::path::Path;

use gaspard_format::kinds::{self, kind_by_name};

use crate::intervals::{with_events, Which};
use crate::objects::args_by_name;
use crate::trace::{Event, Stream};

/// OpenCoarrays' tag for `sync images`.
const SYNC_IMAGES_TAG: u64 = 424_242;

/// One MPI call: its kind, its START and END times, its START's callsite
/// (the program's line that called the coarray runtime: see
/// `gaspard_caf_caller`), its START arguments by name.
struct Call {
    name: &'static str,
    start: u64,
    end: u64,
    site: u32,
    args: HashMap<&'static str, u64>,
}

fn calls(s: &Stream) -> Vec<Call> {
    with_events(s, Which::Start, true)
        .filter_map(|(iv, start)| {
            let k = kinds::kind(iv.kind)?;
            if !k.name.starts_with("GASP_MPI_") {
                return None;
            }
            let mut args = args_by_name(s, start);
            if k.name == "GASP_MPI_WIN_ALLOCATE" {
                // The END of a window allocation carries the window and its base.
                args.extend(args_by_name(s, &s.events[iv.end_event as usize]));
            }
            Some(Call {
                name: k.name,
                start: iv.start,
                end: iv.end,
                site: start.callsite,
                args,
            })
        })
        .collect()
}

pub(crate) fn is_caf(dir: &Path, s: &Stream) -> bool {
    let gfortran = std::fs::read_to_string(dir.join(format!("{}.maps", s.process)))
        .map(|m| m.contains("libgfortran"))
        .unwrap_or(false);
    let dynamic = kind_by_name("GASP_MPI_WIN_CREATE_DYNAMIC").map(|k| k.id);
    gfortran && s.events.iter().any(|e| Some(e.kind) == dynamic)
}

/// Adds the coarray events of `s` when it is a stream of a CAF process, each
/// at the callsite of the first MPI call of its pattern.
pub fn recognise(dir: &Path, s: &mut Stream) {
    if !is_caf(dir, s) {
        return;
    }
    let added = coarray_events(s);
    // A stream holds at most MAX_STREAM_EVENTS events.
    if added.is_empty() || s.events.len() + added.len() > crate::trace::MAX_STREAM_EVENTS {
        return;
    }
    // Merge by time; at equal times a coarray START comes before the MPI calls
    // it stands for and a coarray END after them.
    let mut all: Vec<(u64, u8, Event)> = s.events.drain(..).map(|e| (e.t_ns, 1, e)).collect();
    for (mut e, args) in added {
        (e.args_at, e.nargs) = s.keep_args(&args);
        all.push((e.t_ns, if e.phase == 1 { 2 } else { 0 }, e));
    }
    all.sort_by_key(|(t, order, _)| (*t, *order));
    s.events = all.into_iter().map(|(_, _, e)| e).collect();
    s.events_changed();
}

/// An event to add, and its argument words (kept in its stream when added).
type Added = (Event, Vec<u64>);

fn event(kind: u16, phase: u8, t_ns: u64, args: Vec<u64>, site: u32) -> Added {
    let e = Event {
        t_ns,
        kind,
        phase,
        flags: 0,
        callsite: site,
        args_at: 0,
        nargs: 0,
        text: crate::trace::NO_TEXT,
        user: crate::trace::NO_USER,
    };
    (e, args)
}

fn coarray_events(s: &Stream) -> Vec<Added> {
    let id = |name: &str| kind_by_name(name).map(|k| k.id).unwrap_or(0);
    let calls = calls(s);
    let mut out = Vec::new();
    let pair = |out: &mut Vec<Added>, kind: u16, c: &Call, start: u64, end: u64, args: Vec<u64>| {
        out.push(event(kind, 0, start, args.clone(), c.site));
        out.push(event(kind, 1, end, args, c.site));
    };
    let arg = |c: &Call, n: &str| c.args.get(n).copied().unwrap_or(0);
    // The synchronization OpenCoarrays does itself when the program ends (sync
    // images, then a barrier) comes right before it frees the coarrays' windows.
    let first_free = calls
        .iter()
        .position(|c| c.name == "GASP_MPI_WIN_FREE")
        .unwrap_or(calls.len());
    // That is one barrier at most, with the sync images messages before it:
    // the program's own `sync all`s before them stay.
    let mut ending = first_free;
    let mut barriers = 0;
    while ending > 0 {
        let d = &calls[ending - 1];
        let barrier = d.name == "GASP_MPI_BARRIER";
        if barrier && barriers == 1 {
            break;
        }
        let sync = barrier
            || d.name.starts_with("GASP_MPI_WAIT")
            || (matches!(d.name, "GASP_MPI_SEND" | "GASP_MPI_IRECV")
                && arg(d, "tag") == SYNC_IMAGES_TAG);
        if !sync {
            break;
        }
        barriers += usize::from(barrier);
        ending -= 1;
    }
    let mut i = 0;
    while i < ending {
        let c = &calls[i];
        match c.name {
            "GASP_MPI_WIN_ALLOCATE" => {
                out.push(event(
                    id("GASP_CAF_COARRAY"),
                    2,
                    c.end,
                    vec![arg(c, "size"), arg(c, "win")],
                    c.site,
                ));
            }
            "GASP_MPI_BARRIER" => {
                pair(&mut out, id("GASP_CAF_SYNC_ALL"), c, c.start, c.end, vec![])
            }
            "GASP_MPI_ALLREDUCE" => {
                let k = match arg(c, "op") {
                    1 => "GASP_CAF_CO_SUM",
                    3 => "GASP_CAF_CO_MAX",
                    4 => "GASP_CAF_CO_MIN",
                    _ => "GASP_CAF_CO_REDUCE",
                };
                pair(
                    &mut out,
                    id(k),
                    c,
                    c.start,
                    c.end,
                    vec![0, arg(c, "nbytes")],
                );
            }
            "GASP_MPI_BCAST" => {
                let root = arg(c, "root") as i64 + 1;
                pair(
                    &mut out,
                    id("GASP_CAF_CO_BROADCAST"),
                    c,
                    c.start,
                    c.end,
                    vec![root as u64, arg(c, "nbytes")],
                );
            }
            "GASP_MPI_WIN_LOCK" => {
                let (target, win) = (arg(c, "target"), arg(c, "win"));
                let close = calls[i + 1..]
                    .iter()
                    .position(|d| {
                        d.name == "GASP_MPI_WIN_UNLOCK"
                            && arg(d, "win") == win
                            && arg(d, "target") == target
                    })
                    .map(|p| i + 1 + p);
                if let Some(j) = close {
                    let inner = &calls[i + 1..j];
                    let has = |n: &str| inner.iter().filter(|d| d.name == n).collect::<Vec<_>>();
                    let (puts, gets) = (has("GASP_MPI_PUT"), has("GASP_MPI_GET"));
                    let image = target + 1;
                    let rma = |v: &[&Call]| {
                        vec![
                            image,
                            win,
                            arg(v[0], "disp"),
                            v.iter().map(|d| arg(d, "nbytes")).sum::<u64>(),
                        ]
                    };
                    let (start, end) = (c.start, calls[j].end);
                    if !puts.is_empty() {
                        pair(&mut out, id("GASP_CAF_PUT"), c, start, end, rma(&puts));
                    } else if !gets.is_empty() {
                        pair(&mut out, id("GASP_CAF_GET"), c, start, end, rma(&gets));
                    } else if let Some(a) = has("GASP_MPI_ACCUMULATE").first() {
                        pair(
                            &mut out,
                            id("GASP_CAF_EVENT_POST"),
                            c,
                            start,
                            end,
                            vec![image, win, arg(a, "disp")],
                        );
                    } else if let Some(a) = has("GASP_MPI_COMPARE_AND_SWAP").first() {
                        pair(
                            &mut out,
                            id("GASP_CAF_LOCK"),
                            c,
                            start,
                            end,
                            vec![image, win, arg(a, "disp")],
                        );
                    }
                    i = j;
                }
            }
            "GASP_MPI_SEND" | "GASP_MPI_IRECV" if arg(c, "tag") == SYNC_IMAGES_TAG => {
                let mut j = i;
                let mut sends = 0;
                while j < calls.len() {
                    let d = &calls[j];
                    let tagged = matches!(d.name, "GASP_MPI_SEND" | "GASP_MPI_IRECV")
                        && arg(d, "tag") == SYNC_IMAGES_TAG;
                    let wait = d.name.starts_with("GASP_MPI_WAIT");
                    if !(tagged || wait) {
                        break;
                    }
                    if d.name == "GASP_MPI_SEND" {
                        sends += 1;
                    }
                    j += 1;
                }
                pair(
                    &mut out,
                    id("GASP_CAF_SYNC_IMAGES"),
                    c,
                    c.start,
                    calls[j - 1].end,
                    vec![sends],
                );
                i = j - 1;
            }
            _ => {}
        }
        i += 1;
    }
    out
}
