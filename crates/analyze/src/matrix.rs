//! Who talks to whom: per model, a rank × rank matrix of the communication
//! operations each rank starts, their bytes and their time.
//!
//! Ranks are MPI ranks (in MPI_COMM_WORLD; a Coarray Fortran image is its rank
//! plus one) and OpenSHMEM PEs, as the start-up event of each process records
//! them. An operation counts at (initiator, other side): the target of a put,
//! get or atomic, the peer of a message.

use rustc_hash::FxHashMap as HashMap;

use gaspard_format::kinds::{self, Class};
use serde::Serialize;

use crate::intervals::{with_events, Which};
use crate::objects::args_by_name;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// `MPI` or `SHMEM`.
    pub model: &'static str,
    /// This process's rank or PE.
    pub me: usize,
    /// Ranks (PEs) in all.
    pub size: usize,
}

/// The rank of the process a stream belongs to, if its start-up was recorded.
pub fn rank(s: &Stream) -> Option<Rank> {
    let (model, start_kind, rank_arg, size_arg) = match s.model {
        3 => (
            "MPI",
            ["GASP_MPI_INIT", "GASP_MPI_INIT_THREAD"],
            "rank",
            "size",
        ),
        4 => (
            "SHMEM",
            ["GASP_SHMEM_INIT", "GASP_SHMEM_INIT"],
            "pe",
            "npes",
        ),
        _ => return None,
    };
    let init = s.events.iter().find(|e| {
        e.phase == 1 && kinds::kind(e.kind).is_some_and(|k| start_kind.contains(&k.name))
    })?;
    let a = args_by_name(s, init);
    let (me, size) = (*a.get(rank_arg)? as usize, *a.get(size_arg)? as usize);
    (me < size).then_some(Rank { model, me, size })
}

/// The communication matrices of the trace's MPI and OpenSHMEM processes.
pub fn matrices(t: &Trace) -> Vec<Matrix> {
    let mut by_model: HashMap<&'static str, Vec<(usize, usize, u64, u64)>> = HashMap::default();
    let mut sizes: HashMap<&'static str, usize> = HashMap::default();
    for s in &t.streams {
        let Some(Rank { model, me, size }) = rank(s) else {
            continue;
        };
        let prefix = if model == "MPI" {
            "GASP_MPI_"
        } else {
            "GASP_SHMEM_"
        };
        let n = sizes.entry(model).or_default();
        *n = (*n).max(size);
        for (iv, end) in with_events(s, Which::End, true) {
            let Some(k) = kinds::kind(iv.kind) else {
                continue;
            };
            if k.class != Class::Comm || !k.name.starts_with(prefix) {
                continue;
            }
            let a = args_by_name(s, end);
            let other = a.get("pe").or(a.get("peer")).or(a.get("target")).copied();
            let Some(other) = other.filter(|&o| (o as i64) >= 0 && (o as usize) < size) else {
                continue;
            };
            let bytes = a.get("nbytes").copied().unwrap_or(0);
            by_model.entry(model).or_default().push((
                me,
                other as usize,
                bytes,
                iv.end.saturating_sub(iv.start),
            ));
        }
    }
    let mut out: Vec<Matrix> = by_model
        .into_iter()
        .map(|(model, cells)| {
            let n = sizes[model];
            let mut m = Matrix {
                model: model.to_string(),
                ranks: n,
                ops: vec![vec![0; n]; n],
                bytes: vec![vec![0; n]; n],
                time_ns: vec![vec![0; n]; n],
            };
            for (from, to, bytes, time) in cells {
                m.ops[from][to] += 1;
                m.bytes[from][to] += bytes;
                m.time_ns[from][to] += time;
            }
            m
        })
        .collect();
    out.sort_by(|a, b| a.model.cmp(&b.model));
    out
}
