//! Shared objects: the symmetric allocations of OpenSHMEM programs and the
//! windows of MPI programs, so that an address (or a window displacement)
//! becomes (object, offset). An object is named by the source line that
//! allocated it.

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

/// One argument of events, by name, as [`arg`] gives it, with where it is
/// among the words found once per kind, phase and flags (one stream's).
pub(crate) struct ArgOf {
    name: &'static str,
    pts_words: usize,
    /// Kinds, phases and flags met, and where: a stream has few, so a short
    /// list walked in order finds them faster than a map (transfers of two
    /// kinds in turn would miss a single remembered one every time).
    seen: Vec<((u16, u8, u8), Option<usize>)>,
    /// Those met after the list is full.
    more: HashMap<(u16, u8, u8), Option<usize>>,
}

impl ArgOf {
    /// Kinds, phases and flags kept in [`ArgOf::seen`].
    const SEEN: usize = 16;

    /// The argument `name` of the events of `s`.
    pub(crate) fn new(s: &Stream, name: &'static str) -> ArgOf {
        ArgOf {
            name,
            pts_words: (s.pts_bytes as usize).div_ceil(8),
            seen: Vec::with_capacity(Self::SEEN),
            more: HashMap::default(),
        }
    }

    /// `e`'s argument, one of the stream's events.
    pub(crate) fn get(&mut self, s: &Stream, e: &Event) -> Option<u64> {
        let key = (e.kind, e.phase, e.flags);
        let at = match self.seen.iter().find(|(k, _)| *k == key) {
            Some(&(_, at)) => at,
            None => self.locate(key),
        };
        s.args(e).get(at?).copied()
    }

    /// Where the argument is in events of `key`'s kind, phase and flags
    /// (found once, then remembered).
    #[cold]
    fn locate(&mut self, key: (u16, u8, u8)) -> Option<usize> {
        if let Some(&at) = self.more.get(&key) {
            return at;
        }
        let (kind, phase, flags) = key;
        let mut found = None;
        let mut at = 0;
        for (n, _, w) in arg_layout(kind, phase, self.pts_words, flags) {
            if n == self.name {
                found = Some(at);
                break;
            }
            at += w;
        }
        if self.seen.len() < Self::SEEN {
            self.seen.push((key, found));
        } else {
            self.more.insert(key, found);
        }
        found
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

impl Objects {
    /// Finds the objects the streams allocate.
    pub fn build(streams: &[Stream], sites: &[Callsite]) -> Objects {
        // The kinds looked at below, a flag each by number: most events are
        // of none of them and are passed over without comparing names.
        static WANTED: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
        let wanted = WANTED.get_or_init(|| {
            let mut v = vec![false; 1 << 16];
            for name in [
                "GASP_SHMEM_MALLOC",
                "GASP_SHMEM_CALLOC",
                "GASP_SHMEM_REALLOC",
                "GASP_SHMEM_FREE",
                "GASP_MPI_WIN_ALLOCATE",
                "GASP_MPI_WIN_CREATE",
            ] {
                if let Some(k) = kinds::kind_by_name(name) {
                    v[k.id as usize] = true;
                }
            }
            v
        });
        let mut o = Objects::default();
        for s in streams {
            let mut open: Option<String> = None;
            let mut count: u32 = 0;
            for e in &s.events {
                if !wanted[e.kind as usize] {
                    continue;
                }
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
                            o.allocations
                                .entry(s.process.clone())
                                .or_default()
                                .push(Allocation {
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
        o
    }

    fn free(&mut self, process: &str, ptr: u64, t: u64) {
        if let Some(v) = self.allocations.get_mut(process) {
            if let Some(a) = v
                .iter_mut()
                .rev()
                .find(|a| a.base == ptr && a.to == u64::MAX)
            {
                a.to = t;
            }
        }
    }

    /// The allocation holding `addr` at time `t` in `process`, and the offset in it.
    pub fn find(&self, process: &str, addr: u64, t: u64) -> Option<(&str, u64)> {
        self.find_allocation(process, addr, t)
            .map(|(a, off)| (a.name.as_str(), off))
    }

    /// The allocation holding `addr` at time `t` in `process`, and the offset in it.
    pub fn find_allocation(&self, process: &str, addr: u64, t: u64) -> Option<(&Allocation, u64)> {
        self.allocations
            .get(process)?
            .iter()
            .find(|a| a.from <= t && t <= a.to && a.base <= addr && addr - a.base < a.size.max(1))
            .map(|a| (a, addr - a.base))
    }

    /// The window `win` of `process`.
    pub fn window(&self, process: &str, win: u64) -> Option<&Window> {
        self.windows.get(&(process.to_string(), win))
    }
}
