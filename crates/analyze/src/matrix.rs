//! Who talks to whom: per model, a rank × rank matrix of the communication
//! operations each rank starts, their bytes and their time.
//!
//! Ranks are MPI ranks (in MPI_COMM_WORLD; a Coarray Fortran image is its rank
//! plus one) and OpenSHMEM PEs, as the start-up event of each process records
//! them. An operation counts at (initiator, other side): the target of a put,
//! get or atomic, the peer of a message.

use gaspard_format::kinds::{self, Class};
use serde::Serialize;

use crate::intervals::{with_events, Which};
use crate::objects::args_by_name;
use crate::summary::Identity;
use crate::trace::{Stream, Trace};

/// The matrices of one model.
#[derive(Debug, Clone, Serialize)]
pub struct Matrix {
    /// `MPI` or `SHMEM`.
    pub model: String,
    /// Ranks (PEs).
    pub ranks: usize,
    /// Operations started by row towards column.
    pub ops: Vec<Vec<u64>>,
    /// Bytes.
    pub bytes: Vec<Vec<u64>>,
    /// Time in the operations, ns.
    pub time_ns: Vec<Vec<u64>>,
}

/// A process's place in its model: its MPI rank (in MPI_COMM_WORLD) or its
/// OpenSHMEM PE, from its start-up event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rank {
    /// `MPI` or `SHMEM`.
    pub model: &'static str,
    /// This process's rank or PE.
    pub me: usize,
    /// Ranks (PEs) in all.
    pub size: usize,
}

impl<'de> serde::Deserialize<'de> for Rank {
    /// A rank read back: its model is one of the two [`rank`] makes.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Rank, D::Error> {
        #[derive(serde::Deserialize)]
        struct Read {
            model: String,
            me: usize,
            size: usize,
        }
        let r = Read::deserialize(d)?;
        let model = ["MPI", "SHMEM"]
            .into_iter()
            .find(|m| *m == r.model)
            .ok_or_else(|| serde::de::Error::custom(format!("no model named {:?}", r.model)))?;
        Ok(Rank {
            model,
            me: r.me,
            size: r.size,
        })
    }
}

/// The model of a stream's process, its start-up kinds and the names of
/// their rank and size arguments.
fn start_up(model: u32) -> Option<(&'static str, [&'static str; 2], &'static str, &'static str)> {
    match model {
        3 => Some((
            "MPI",
            ["GASP_MPI_INIT", "GASP_MPI_INIT_THREAD"],
            "rank",
            "size",
        )),
        4 => Some((
            "SHMEM",
            ["GASP_SHMEM_INIT", "GASP_SHMEM_INIT"],
            "pe",
            "npes",
        )),
        _ => None,
    }
}

/// The rank of the process a stream belongs to, if its start-up was recorded.
pub fn rank(s: &Stream) -> Option<Rank> {
    rank_in(s).flatten()
}

/// The rank of the process of `s` as the first end of a start-up among the
/// events of `s` (from its window's own) gives it: `None` when they have
/// none, `Some(None)` when it gives no rank.
pub(crate) fn rank_in(s: &Stream) -> Option<Option<Rank>> {
    let Some((model, start_kind, rank_arg, size_arg)) = start_up(s.model) else {
        return Some(None);
    };
    let init = s.own_events().iter().find(|e| {
        e.phase == 1 && kinds::kind(e.kind).is_some_and(|k| start_kind.contains(&k.name))
    })?;
    let a = args_by_name(s, init);
    let rank = (|| {
        let (me, size) = (*a.get(rank_arg)? as usize, *a.get(size_arg)? as usize);
        (me < size).then_some(Rank { model, me, size })
    })();
    Some(rank)
}

/// One stream's part of the matrices: the operations it starts, per other
/// side (in rank order), in its process's model ([`rank`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Part {
    /// (other side, operations, bytes, time in ns).
    pub cells: Vec<(u32, u64, u64, u64)>,
}

impl Part {
    /// The part of `s`.
    pub fn of(s: &Stream) -> Part {
        let mut b = Builder::new(s);
        b.feed(s);
        b.finish()
    }
}

/// A stream's [`Part`], made window by window ([`crate::window`]).
#[derive(Debug)]
pub(crate) struct Builder {
    /// The process's rank, once a window gave its start-up.
    rank: Option<Option<Rank>>,
    /// Which kinds count: 1 for MPI's communication, 2 for OpenSHMEM's.
    mine: u8,
    /// Operations, bytes and time, per other side in the model's ranks.
    row: Vec<(u64, u64, u64)>,
    /// ... per other side, before the rank is known.
    before: rustc_hash::FxHashMap<u64, (u64, u64, u64)>,
    /// The other side of an operation and the bytes it moves: arguments of
    /// its END ([`SIDES`] and `nbytes`).
    args: crate::objects::Places,
}

/// The names of the other side of an operation (the first found), then of
/// the bytes it moves, among its END's arguments.
const ARGS: &[&str] = &["pe", "peer", "target", "nbytes"];
/// How many of [`ARGS`] name the other side.
const SIDES: usize = 3;

impl Builder {
    /// For the windows of `s`.
    pub(crate) fn new(s: &Stream) -> Builder {
        Builder {
            rank: None,
            mine: match start_up(s.model) {
                Some(("MPI", ..)) => 1,
                Some(_) => 2,
                None => 0,
            },
            row: Vec::new(),
            before: Default::default(),
            args: crate::objects::Places::new(s, ARGS),
        }
    }

    /// Adds window `s` (the next of its stream).
    pub(crate) fn feed(&mut self, s: &Stream) {
        if self.rank.is_none() {
            self.rank = rank_in(s);
            if let Some(Some(r)) = self.rank {
                // (Kept only for sides of 0 or more.)
                for (o, c) in std::mem::take(&mut self.before) {
                    if (o as usize) < r.size {
                        add(&mut self.row, o as usize, c);
                    }
                }
            }
        }
        let size = match self.rank {
            Some(None) => return,
            Some(Some(r)) => Some(r.size),
            None => None,
        };
        if self.mine == 0 {
            return;
        }
        // By kind number: 1 for MPI's communication kinds, 2 for OpenSHMEM's
        // (found once; the names were compared for every interval).
        static MODEL_OF: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        let model_of = MODEL_OF.get_or_init(|| {
            kinds::table(|k| match k {
                Some(k) if k.class == Class::Comm && k.name.starts_with("GASP_MPI_") => 1,
                Some(k) if k.class == Class::Comm && k.name.starts_with("GASP_SHMEM_") => 2,
                _ => 0,
            })
        });
        let args = &mut self.args;
        for (iv, end) in with_events(s, Which::End, true) {
            if model_of[iv.kind as usize] != self.mine {
                continue;
            }
            let (at, words) = (args.of(end), s.args(end));
            let other = (0..SIDES).find_map(|i| args.get(at, i, words));
            let Some(other) = other.filter(|&o| (o as i64) >= 0) else {
                continue;
            };
            let c = (
                1,
                args.get(at, SIDES, words).unwrap_or(0),
                iv.end.saturating_sub(iv.start),
            );
            match size {
                Some(size) if (other as usize) < size => add(&mut self.row, other as usize, c),
                Some(_) => {}
                None => {
                    let at = self.before.entry(other).or_default();
                    *at = plus(*at, c);
                }
            }
        }
    }

    /// The part of the windows given.
    pub(crate) fn finish(self) -> Part {
        Part {
            cells: self
                .row
                .into_iter()
                .zip(0u32..)
                .filter(|(c, _)| c.0 > 0)
                .map(|((ops, bytes, time), o)| (o, ops, bytes, time))
                .collect(),
        }
    }
}

/// Adds `c` to the cell of `other` in `row`.
#[inline]
fn add(row: &mut Vec<(u64, u64, u64)>, other: usize, c: (u64, u64, u64)) {
    if row.len() <= other {
        row.resize(other + 1, (0, 0, 0));
    }
    row[other] = plus(row[other], c);
}

/// Two cells' operations, bytes and time, added.
#[inline]
fn plus(a: (u64, u64, u64), b: (u64, u64, u64)) -> (u64, u64, u64) {
    (a.0 + b.0, a.1.wrapping_add(b.1), a.2.wrapping_add(b.2))
}

/// The communication matrices of the trace's MPI and OpenSHMEM processes.
pub fn matrices(t: &Trace) -> Vec<Matrix> {
    let ids: Vec<Identity> = t.streams.iter().map(Identity::of).collect();
    let parts: Vec<Part> = t.streams.iter().map(Part::of).collect();
    merge(&ids, &parts.iter().collect::<Vec<_>>())
}

/// The matrices from every stream's part (`parts[i]`: stream `i`'s).
pub fn merge(ids: &[Identity], parts: &[&Part]) -> Vec<Matrix> {
    // Each model's size: the largest any of its streams gives.
    let mut sizes: Vec<(&'static str, usize)> = Vec::new();
    for r in ids.iter().filter_map(|id| id.rank) {
        match sizes.iter_mut().find(|(m, _)| *m == r.model) {
            Some((_, n)) => *n = (*n).max(r.size),
            None => sizes.push((r.model, r.size)),
        }
    }
    let mut out: Vec<Matrix> = Vec::new();
    for (id, part) in ids.iter().zip(parts) {
        let (Some(r), false) = (id.rank, part.cells.is_empty()) else {
            continue;
        };
        let at = match out.iter().position(|m| m.model == r.model) {
            Some(i) => i,
            None => {
                let n = sizes.iter().find(|(m, _)| *m == r.model).map_or(0, |x| x.1);
                out.push(Matrix {
                    model: r.model.to_string(),
                    ranks: n,
                    ops: vec![vec![0; n]; n],
                    bytes: vec![vec![0; n]; n],
                    time_ns: vec![vec![0; n]; n],
                });
                out.len() - 1
            }
        };
        let m = &mut out[at];
        for &(to, ops, bytes, time) in &part.cells {
            let to = to as usize;
            if r.me < m.ranks && to < m.ranks {
                m.ops[r.me][to] += ops;
                m.bytes[r.me][to] += bytes;
                m.time_ns[r.me][to] += time;
            }
        }
    }
    out.sort_by(|a, b| a.model.cmp(&b.model));
    out
}
