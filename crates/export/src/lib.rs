//! Writes a gaspard trace in the formats other tools read: OTF2 (Vampir,
//! Scalasca), Perfetto's protobuf trace (ui.perfetto.dev) and Parquet tables
//! (DuckDB, pandas, Spark).
//!
//! All three start from the same view of the trace ([`Model`]): each thread's
//! START/END intervals, and for the MPI and OpenSHMEM ones the operation each
//! stands for (message, one-sided access, atomic, collective) with its peer,
//! bytes and shared object.

use std::path::Path;

use anyhow::{bail, Context, Result};
use gaspard_analyze::intervals::intervals;
use gaspard_analyze::matrix::rank;
use gaspard_analyze::objects::{ArgNames, Named};
use gaspard_analyze::trace::Trace;
use gaspard_format::kinds::{self, Class};
use rustc_hash::FxHashMap as HashMap;

pub mod otf2;
pub mod parquet;
pub mod perfetto;

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// An OTF2 archive (a directory holding `traces.otf2`).
    Otf2,
    /// A Perfetto protobuf trace (one file).
    Perfetto,
    /// A directory holding `events.parquet` and `communication.parquet`.
    Parquet,
}

/// A kind's model (1 MPI, 2 OpenSHMEM) and class.
type KindOp = (u8, Option<OpClass>);

/// By kind number, the kinds whose intervals are operations: 1 for MPI's,
/// 2 for OpenSHMEM's, with their class (found once; [`classify`] compares
/// names).
fn ops_by_kind() -> &'static [Option<KindOp>] {
    static TABLE: std::sync::OnceLock<Vec<Option<KindOp>>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        kinds::table(|k| {
            let k = k?;
            let model = if k.name.starts_with("GASP_MPI_") {
                1
            } else if k.name.starts_with("GASP_SHMEM_") {
                2
            } else {
                return None;
            };
            let class = classify(k.name);
            (class.is_some() || k.class == Class::Comm).then_some((model, class))
        })
    })
}

/// An interval's arguments by name: its END's where the END has them, else
/// its START's (as a map of the START's extended by the END's gives them).
struct Merged<'a> {
    first: Named<'a>,
    then: Named<'a>,
}

impl Merged<'_> {
    fn get(&self, name: &str) -> Option<&u64> {
        self.then.get(name).or_else(|| self.first.get(name))
    }
}

/// What one operation of a message-passing or one-sided model is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpClass {
    /// A blocking send.
    Send,
    /// A blocking receive.
    Recv,
    /// A send and a receive (`MPI_Sendrecv`).
    SendRecv,
    /// A non-blocking send, completed by a later call ([`Op::completion`]).
    Isend,
    /// A non-blocking receive, completed by a later call.
    Irecv,
    /// A one-sided write (put, accumulate).
    Put,
    /// A one-sided read.
    Get,
    /// A remote atomic; `fetch` when it returns a value.
    Atomic {
        /// The old value comes back.
        fetch: bool,
    },
    /// A collective operation: 0 barrier, 1 broadcast, 2 gather, 3 scatter,
    /// 4 allgather, 5 alltoall, 6 allreduce, 7 reduce.
    Collective(u32),
}

impl OpClass {
    /// One-sided (put, get, atomic).
    pub fn is_rma(self) -> bool {
        matches!(self, OpClass::Put | OpClass::Get | OpClass::Atomic { .. })
    }
}

/// The operation a kind stands for, by its name.
pub fn classify(name: &str) -> Option<OpClass> {
    use OpClass::*;
    if let Some(rest) = name.strip_prefix("GASP_SHMEM_") {
        return Some(if rest.contains("ATOMIC") {
            Atomic {
                fetch: rest.contains("FETCH") || rest.contains("SWAP"),
            }
        } else if rest == "BARRIER_ALL" || rest == "SYNC_ALL" || rest == "BARRIER" {
            Collective(0)
        } else if rest.starts_with("BROADCAST") {
            Collective(1)
        } else if rest.starts_with("COLLECT") || rest.starts_with("FCOLLECT") {
            Collective(4)
        } else if rest.starts_with("ALLTOALL") {
            Collective(5)
        } else if rest.ends_with("_TO_ALL") {
            Collective(6)
        } else if rest.contains("PUT") || rest.ends_with("_P") {
            Put
        } else if rest.contains("GET") || rest.ends_with("_G") {
            Get
        } else {
            return None;
        });
    }
    Some(match name.strip_prefix("GASP_MPI_")? {
        "SEND" | "SSEND" | "BSEND" | "RSEND" => Send,
        "RECV" => Recv,
        "SENDRECV" => SendRecv,
        "ISEND" | "ISSEND" | "IBSEND" | "IRSEND" => Isend,
        "IRECV" => Irecv,
        "PUT" | "RPUT" | "ACCUMULATE" | "RACCUMULATE" => Put,
        "GET" | "RGET" => Get,
        "GET_ACCUMULATE" | "RGET_ACCUMULATE" | "FETCH_AND_OP" | "COMPARE_AND_SWAP" => {
            Atomic { fetch: true }
        }
        "BARRIER" => Collective(0),
        "BCAST" => Collective(1),
        "GATHER" => Collective(2),
        "SCATTER" => Collective(3),
        "ALLGATHER" => Collective(4),
        "ALLTOALL" => Collective(5),
        "ALLREDUCE" => Collective(6),
        "REDUCE" => Collective(7),
        _ => return None,
    })
}

/// Bytes of one element of an OpenSHMEM typed call, from its name.
fn element_bytes(name: &str) -> u64 {
    let rest = name.strip_prefix("GASP_SHMEM_").unwrap_or(name);
    for (p, b) in [
        ("LONGLONG", 8),
        ("LONG", 8),
        ("DOUBLE", 8),
        ("FLOAT", 4),
        ("INT", 4),
        ("SHORT", 2),
        ("CHAR", 1),
    ] {
        if rest.starts_with(p) {
            return b;
        }
    }
    for (s, b) in [("128", 16), ("64", 8), ("32", 4)] {
        if rest.contains(s) {
            return b;
        }
    }
    0
}

/// A shared object seen as an RMA window: a symmetric allocation or an MPI
/// window, the same on every process (they are made collectively, in order).
#[derive(Debug, Clone)]
pub struct Window {
    /// `MPI` or `SHMEM`.
    pub model: &'static str,
    /// The allocating source line, or a description.
    pub name: String,
}

/// One MPI or OpenSHMEM operation: a START/END interval of a rank's thread.
#[derive(Debug, Clone)]
pub struct Op {
    /// Index of the stream in [`Trace::streams`].
    pub stream: usize,
    /// Index of the START event.
    pub start_event: usize,
    /// Index of the END event.
    pub end_event: usize,
    /// START time, ns.
    pub t_start: u64,
    /// END time, ns.
    pub t_end: u64,
    /// The kind's name.
    pub name: &'static str,
    /// What it is, if it is one of the operations the formats have records for.
    pub class: Option<OpClass>,
    /// `MPI` or `SHMEM`.
    pub model: &'static str,
    /// The initiator's rank (PE).
    pub me: usize,
    /// The other side: the target of a one-sided access, the peer of a message.
    pub peer: Option<usize>,
    /// Message tag.
    pub tag: Option<u64>,
    /// Bytes moved (sent, for `MPI_Sendrecv`).
    pub bytes: u64,
    /// For `MPI_Sendrecv`: the source and bytes received.
    pub recv: Option<(usize, u64)>,
    /// Collective root.
    pub root: Option<usize>,
    /// Index into [`Model::windows`] of the shared object accessed.
    pub window: Option<usize>,
    /// Byte offset in that object.
    pub offset: Option<u64>,
    /// For a non-blocking send or receive: the call that completed it.
    pub completion: Option<Completion>,
}

/// Where a non-blocking request completed: at the END of the `MPI_Wait`,
/// `MPI_Waitall`, `MPI_Test` or `MPI_Testall` that completed it, as the
/// wait-state analysis finds it (`MPI_Waitall` completes the thread's
/// `count` latest requests; the requests of `MPI_Waitany`/`MPI_Waitsome`
/// are not recorded, so those stay incomplete).
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    /// Index of the END event of the completing call in the stream.
    pub end_event: usize,
    /// Its time, ns.
    pub t: u64,
    /// For a receive: its source (from the `MPI_Wait` status, else as posted).
    pub source: Option<usize>,
    /// For a receive: its tag (likewise).
    pub tag: Option<u64>,
}

/// The trace as the exporters see it.
pub struct Model<'t> {
    /// The trace.
    pub trace: &'t Trace,
    /// MPI and OpenSHMEM operations with a peer, a root or a class.
    pub ops: Vec<Op>,
    /// Shared objects accessed one-sidedly.
    pub windows: Vec<Window>,
    /// Per model, ranks in all and the stream of each rank's first thread.
    pub ranks: HashMap<&'static str, Vec<Option<usize>>>,
    /// Per stream, its (model, rank).
    pub stream_rank: Vec<Option<(&'static str, usize)>>,
    /// Per stream, operation index by START event index.
    pub op_at: Vec<HashMap<usize, usize>>,
    /// Per stream, the non-blocking operations each END event completes.
    pub completed_at: Vec<HashMap<usize, Vec<usize>>>,
    /// MPI windows: index into [`Model::windows`] by (process, handle).
    pub win_index: HashMap<(String, u64), usize>,
}

/// What numbers things across the parts of a trace exported one process at
/// a time ([`export_by_process`]): the RMA windows, numbered as the whole
/// trace's model numbers them.
#[derive(Debug, Default)]
pub struct Shared {
    /// The windows so far.
    pub windows: Vec<Window>,
    window_ids: HashMap<(&'static str, Option<u32>), usize>,
}

impl Shared {
    /// The window of `key` ((model, ordinal of its object)), numbered when first met.
    fn window(&mut self, key: (&'static str, Option<u32>), name: impl FnOnce() -> String) -> usize {
        let next = self.windows.len();
        *self.window_ids.entry(key).or_insert_with(|| {
            self.windows.push(Window {
                model: key.0,
                name: name(),
            });
            next
        })
    }

    /// Numbers every MPI window the streams of `trace` make, accessed or
    /// not, in the order made; returns each one's number by (process, handle).
    pub fn add_mpi_windows(&mut self, trace: &Trace) -> Vec<((String, u64), usize)> {
        let mut out = Vec::new();
        for s in trace.streams.iter().filter(|s| s.model == 3) {
            for e in s.events.iter().filter(|e| e.phase == 1) {
                let Some(k) = kinds::kind(e.kind) else {
                    continue;
                };
                if k.name != "GASP_MPI_WIN_ALLOCATE" && k.name != "GASP_MPI_WIN_CREATE" {
                    continue;
                }
                let Some(handle) = gaspard_analyze::objects::arg(s, e, "win") else {
                    continue;
                };
                let Some(w) = trace.objects.window(&s.process, handle) else {
                    continue;
                };
                let id = self.window(("MPI", Some(w.ordinal)), || w.name.clone());
                out.push(((s.process.clone(), handle), id));
            }
        }
        out
    }
}

/// Per model, each rank's first stream, from the streams of `trace`, the
/// first of which is stream `first` of the whole trace.
pub fn add_ranks(
    ranks: &mut HashMap<&'static str, Vec<Option<usize>>>,
    trace: &Trace,
    first: usize,
) {
    for (si, s) in trace.streams.iter().enumerate() {
        let Some(r) = rank(s) else {
            continue;
        };
        let slots = ranks.entry(r.model).or_default();
        if slots.len() < r.size {
            slots.resize(r.size, None);
        }
        if slots[r.me].is_none() {
            slots[r.me] = Some(first + si);
        }
    }
}

impl<'t> Model<'t> {
    /// Builds the model of a trace.
    pub fn new(trace: &'t Trace) -> Model<'t> {
        Model::with_shared(trace, &mut Shared::default())
    }

    /// Builds the model of a trace (or of some processes of one, numbering
    /// windows in `shared`).
    pub fn with_shared(trace: &'t Trace, shared: &mut Shared) -> Model<'t> {
        let mut m = Model {
            trace,
            ops: Vec::new(),
            windows: Vec::new(),
            ranks: HashMap::default(),
            stream_rank: Vec::with_capacity(trace.streams.len()),
            op_at: vec![HashMap::default(); trace.streams.len()],
            completed_at: vec![HashMap::default(); trace.streams.len()],
            win_index: HashMap::default(),
        };
        m.win_index.extend(shared.add_mpi_windows(trace));
        add_ranks(&mut m.ranks, trace, 0);
        for (si, s) in trace.streams.iter().enumerate() {
            let Some(r) = rank(s) else {
                m.stream_rank.push(None);
                continue;
            };
            m.stream_rank.push(Some((r.model, r.me)));
            let mine = if r.model == "MPI" { 1 } else { 2 };
            let mut names = ArgNames::new(s);
            let allocations = trace.objects.allocations_of(&s.process);
            for iv in intervals(s) {
                let Some((model, class)) = ops_by_kind()[iv.kind as usize] else {
                    continue;
                };
                if model != mine {
                    continue;
                }
                let Some(k) = kinds::kind(iv.kind) else {
                    continue;
                };
                let start = &s.events[iv.start_event as usize];
                // END arguments where the END has them (the actual source of
                // a receive), else those of the START.
                let (sa, ea) = names.pair(s, start, &s.events[iv.end_event as usize]);
                let a = Merged {
                    first: sa,
                    then: ea,
                };
                let in_range = |v: Option<&u64>| {
                    v.copied()
                        .filter(|&o| (o as i64) >= 0 && (o as usize) < r.size)
                        .map(|o| o as usize)
                };
                let peer = in_range(a.get("pe").or(a.get("peer")).or(a.get("target")));
                let root = in_range(a.get("root").or(a.get("PE_root")));
                if peer.is_none()
                    && !matches!(
                        class,
                        Some(OpClass::Collective(_) | OpClass::Irecv | OpClass::Isend)
                    )
                {
                    continue;
                }
                let bytes = a
                    .get("nbytes")
                    .copied()
                    .unwrap_or_else(|| element_bytes(k.name));
                let recv = (class == Some(OpClass::SendRecv))
                    .then(|| {
                        in_range(a.get("source"))
                            .map(|src| (src, a.get("recv_nbytes").copied().unwrap_or(0)))
                    })
                    .flatten();
                // The shared object, as the block analysis finds it.
                let (mut window, mut offset) = (None, None);
                if class.is_some_and(OpClass::is_rma) {
                    let found = if r.model == "SHMEM" {
                        let addr_arg = if class == Some(OpClass::Get) {
                            "source"
                        } else if class.is_some_and(|c| matches!(c, OpClass::Atomic { .. })) {
                            "target"
                        } else {
                            "dest"
                        };
                        a.get(addr_arg).and_then(|&addr| {
                            allocations?
                                .find(addr, iv.start)
                                .map(|(al, off)| (al.ordinal, al.name.clone(), off))
                        })
                    } else {
                        a.get("win").and_then(|&win| {
                            trace.objects.window(&s.process, win).map(|w| {
                                let disp = a.get("disp").copied().unwrap_or(0);
                                (w.ordinal, w.name.clone(), disp.saturating_mul(w.disp_unit))
                            })
                        })
                    };
                    let key = (r.model, found.as_ref().map(|f| f.0));
                    let id = shared.window(key, || match &found {
                        Some((_, name, _)) => name.clone(),
                        None => format!("{} memory not allocated by the program", r.model),
                    });
                    window = Some(id);
                    offset = found.map(|f| f.2);
                }
                m.op_at[si].insert(iv.start_event as usize, m.ops.len());
                m.ops.push(Op {
                    stream: si,
                    start_event: iv.start_event as usize,
                    end_event: iv.end_event as usize,
                    t_start: iv.start,
                    t_end: iv.end,
                    name: k.name,
                    class,
                    model: r.model,
                    me: r.me,
                    peer,
                    tag: a.get("tag").copied(),
                    bytes,
                    recv,
                    root,
                    window,
                    offset,
                    completion: None,
                });
            }
            if r.model == "MPI" {
                m.complete_requests(si);
            }
        }
        m.windows = shared.windows.clone();
        m
    }

    /// Finds where each non-blocking send and receive of stream `si` completes.
    fn complete_requests(&mut self, si: usize) {
        let trace = self.trace;
        let s = &trace.streams[si];
        let size = self.ranks.get("MPI").map_or(0, Vec::len);
        let mut pending: Vec<(u64, usize)> = Vec::new();
        let mut names = ArgNames::new(s);
        for iv in intervals(s) {
            let Some(rest) = kinds::kind(iv.kind).and_then(|k| k.name.strip_prefix("GASP_MPI_"))
            else {
                continue;
            };
            let (sa, ea) = names.pair(
                s,
                &s.events[iv.start_event as usize],
                &s.events[iv.end_event as usize],
            );
            let flag = ea.get("flag").copied() == Some(1);
            let by_handle = |pending: &mut Vec<(u64, usize)>| -> Vec<usize> {
                sa.get("request")
                    .and_then(|h| pending.iter().rposition(|p| p.0 == *h))
                    .map(|i| vec![pending.remove(i).1])
                    .unwrap_or_default()
            };
            let latest = |pending: &mut Vec<(u64, usize)>| -> Vec<usize> {
                let n = (sa.get("count").copied().unwrap_or(0) as usize).min(pending.len());
                pending.drain(pending.len() - n..).map(|p| p.1).collect()
            };
            let done = match rest {
                "ISEND" | "ISSEND" | "IBSEND" | "IRSEND" | "IRECV" => {
                    if let (Some(&op), Some(&h)) = (
                        self.op_at[si].get(&(iv.start_event as usize)),
                        ea.get("request"),
                    ) {
                        pending.push((h, op));
                    }
                    continue;
                }
                "WAIT" => by_handle(&mut pending),
                "TEST" if flag => by_handle(&mut pending),
                "WAITALL" => latest(&mut pending),
                "TESTALL" if flag => latest(&mut pending),
                _ => continue,
            };
            let single = rest == "WAIT" || rest == "TEST";
            for op in done {
                let o = &mut self.ops[op];
                let status_source = ea
                    .get("source")
                    .filter(|_| single)
                    .copied()
                    .filter(|&v| (v as i64) >= 0 && (v as usize) < size)
                    .map(|v| v as usize);
                let status_tag = ea
                    .get("tag")
                    .filter(|_| single)
                    .copied()
                    .filter(|&v| (v as i64) >= 0);
                o.completion = Some(Completion {
                    end_event: iv.end_event as usize,
                    t: iv.end,
                    source: status_source.or(o.peer),
                    tag: status_tag.or(o.tag),
                });
                self.completed_at[si]
                    .entry(iv.end_event as usize)
                    .or_default()
                    .push(op);
            }
        }
    }

    /// Sends matched to receives: (send op, receive op), in order per
    /// (model, source, destination, tag), as MPI matches them.
    pub fn messages(&self) -> Vec<(usize, usize)> {
        messages_of(&self.ops)
    }

    /// The stream of `rank`'s first thread in `model`.
    pub fn rank_stream(&self, model: &str, rank: usize) -> Option<usize> {
        self.ranks.get(model)?.get(rank).copied().flatten()
    }
}

/// Of `ops`, the sends matched to receives: (send op, receive op), in order
/// per (model, source, destination, tag), as MPI matches them.
pub fn messages_of(ops: &[Op]) -> Vec<(usize, usize)> {
    type Key = (&'static str, usize, usize, u64);
    let mut sends: HashMap<Key, std::collections::VecDeque<usize>> = HashMap::default();
    let mut recvs: Vec<(Key, u64, usize)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let tag = op.tag.unwrap_or(0);
        match op.class {
            Some(OpClass::Send | OpClass::SendRecv | OpClass::Isend) => {
                if let Some(p) = op.peer {
                    sends
                        .entry((op.model, op.me, p, tag))
                        .or_default()
                        .push_back(i);
                }
            }
            Some(OpClass::Recv) => {
                if let Some(p) = op.peer {
                    recvs.push(((op.model, p, op.me, tag), op.t_start, i));
                }
            }
            Some(OpClass::Irecv) => {
                // Matched in the order posted, with the source and tag it
                // completed with.
                if let Some(Completion {
                    source: Some(p),
                    tag: Some(ctag),
                    ..
                }) = op.completion
                {
                    recvs.push(((op.model, p, op.me, ctag), op.t_start, i));
                }
            }
            _ => {}
        }
        if let (Some(OpClass::SendRecv), Some((src, _))) = (op.class, op.recv) {
            recvs.push(((op.model, src, op.me, tag), op.t_start, i));
        }
    }
    // Sends and receives each in the order they were posted.
    for q in sends.values_mut() {
        q.make_contiguous().sort_by_key(|&i| (ops[i].t_start, i));
    }
    recvs.sort_by_key(|r| (r.1, r.2));
    let mut out = Vec::new();
    for (key, _, r) in recvs {
        if let Some(s) = sends.get_mut(&key).and_then(|q| q.pop_front()) {
            out.push((s, r));
        }
    }
    out
}

/// What a process of `model` is called: `PE` (OpenSHMEM) or `rank`.
fn rank_word(model: &str) -> &'static str {
    if model == "SHMEM" {
        "PE"
    } else {
        "rank"
    }
}

/// A process's name in exported traces: `rank 1 (host-pid)`, `PE 2
/// (host-pid)`, or `host-pid` without a rank.
pub(crate) fn process_name(process: &str, rank: Option<(&str, usize)>) -> String {
    match rank {
        Some((model, me)) => format!("{} {me} ({process})", rank_word(model)),
        None => process.to_string(),
    }
}

/// A thread's name in exported traces: `rank 1`, `PE 2`, with the thread
/// number when a process has more than one, else `host-pid thread N`.
pub fn location_name(m: &Model, si: usize) -> String {
    let s = &m.trace.streams[si];
    match m.stream_rank[si] {
        Some((model, me)) => {
            let who = rank_word(model);
            if s.thread == 0 {
                format!("{who} {me}")
            } else {
                format!("{who} {me} thread {}", s.thread)
            }
        }
        None => format!("{} thread {}", s.process, s.thread),
    }
}

/// Refuses to replace `out` unless `force`; with `force`, removes it.
pub fn prepare_output(out: &Path, force: bool) -> Result<()> {
    if out.exists() || out.symlink_metadata().is_ok() {
        if !force {
            bail!(
                "{} already exists: choose another output or pass --force to replace it",
                out.display()
            );
        }
        let meta = out.symlink_metadata()?;
        if meta.is_dir() {
            std::fs::remove_dir_all(out)
        } else {
            std::fs::remove_file(out)
        }
        .with_context(|| format!("cannot remove {}", out.display()))?;
    }
    Ok(())
}

/// Counts of what an export wrote.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    /// Lines to show the user.
    pub lines: Vec<String>,
}

/// Writes `trace` to `out` in `format` (refusing to replace `out` without `force`).
pub fn export(trace: &Trace, format: Format, out: &Path, force: bool) -> Result<Summary> {
    prepare_output(out, force)?;
    let model = Model::new(trace);
    let progress = progress_bar(trace);
    let r = match format {
        Format::Otf2 => otf2::write(&model, out, &progress),
        Format::Perfetto => perfetto::write(&model, out, &progress),
        Format::Parquet => parquet::write(&model, out, &progress),
    };
    progress.finish_and_clear();
    r
}

/// Writes the trace in `dir` to `out` in `format` reading one process at a
/// time (refusing to replace `out` without `force`): the same
/// output as [`export`] of the whole trace. The stream files are read two or
/// three times: once lightly for what the trace as a whole needs (its
/// numbering and start), once for what the processes tell each other (ranks
/// and MPI windows; for Perfetto, also event names, tracks and the
/// operations its flows link; skipped for OTF2 and Parquet when no stream is
/// of MPI or OpenSHMEM), once to write each process's events. Memory holds
/// two processes' events at most (the next one is read while one is
/// written), and for Perfetto every MPI and OpenSHMEM operation.
pub fn export_by_process(dir: &Path, format: Format, out: &Path, force: bool) -> Result<Summary> {
    let r = gaspard_analyze::distributed::ByProcess::open(dir)?;
    if r.processes() == 0 {
        bail!(
            "{} holds no events to export (its processes were recorded in profile-only mode: see `gaspard report`)",
            dir.display()
        );
    }
    // Only MPI and OpenSHMEM processes have ranks; only MPI ones windows
    // made apart from their accesses.
    let perfetto = format == Format::Perfetto;
    let second = perfetto || r.has_model(3) || r.has_model(4);
    r.plan(if second { 2 } else { 1 });
    // What numbering across processes needs: every rank's first stream and
    // every MPI window, in the whole trace's order; Perfetto's first packets
    // and flows.
    let mut shared = Shared::default();
    let mut ranks: HashMap<&'static str, Vec<Option<usize>>> = HashMap::default();
    let mut plan = perfetto::Plan::default();
    let mut first = 0;
    if second {
        each_process(&r, |t| {
            shared.add_mpi_windows(&t);
            add_ranks(&mut ranks, &t, first);
            first += t.streams.len();
            if perfetto {
                plan.add_part(&Model::with_shared(&t, &mut Shared::default()));
            }
            Ok(())
        })?;
    }
    prepare_output(out, force)?;
    enum Writer {
        Otf2(Box<otf2::Writer>),
        Parquet(Box<parquet::Writer>),
        Perfetto(Box<perfetto::Writer>),
    }
    let models: Vec<&str> = ranks.keys().copied().collect();
    let mut w = match format {
        Format::Otf2 => Writer::Otf2(Box::new(otf2::Writer::open(out, &models)?)),
        Format::Parquet => Writer::Parquet(Box::new(parquet::Writer::open(out)?)),
        Format::Perfetto => Writer::Perfetto(Box::new(perfetto::Writer::create(
            out,
            plan,
            r.tables(),
            &ranks,
        )?)),
    };
    let hidden = indicatif::ProgressBar::hidden();
    let mut problems = r.tables().problems.len();
    each_process(&r, |t| {
        problems += t.problems.len();
        let m = Model::with_shared(&t, &mut shared);
        match &mut w {
            Writer::Otf2(w) => w.write_part(&m, &hidden),
            Writer::Parquet(w) => w.write_part(&m, &ranks, &hidden),
            Writer::Perfetto(w) => w.write_part(&m, &hidden),
        }
    })?;
    r.finish();
    if problems > 0 {
        eprintln!(
            "gaspard: note: the trace has {problems} problem(s), exported as read (`gaspard report` lists them)"
        );
    }
    match w {
        Writer::Otf2(w) => w.finish(&shared.windows, &ranks),
        Writer::Parquet(w) => w.finish(),
        Writer::Perfetto(w) => w.finish(),
    }
}

/// Calls `f` with each process of `r` in order, the next one read (on
/// another thread) while `f` works on the one before: at most two
/// processes' events in memory. Stops at `f`'s first error.
fn each_process(
    r: &gaspard_analyze::distributed::ByProcess,
    mut f: impl FnMut(Trace) -> Result<()>,
) -> Result<()> {
    std::thread::scope(|scope| {
        // A rendezvous: the reader hands a process over, then reads the next.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Trace>(0);
        scope.spawn(move || {
            for i in 0..r.processes() {
                if tx.send(r.read(i)).is_err() {
                    return; // the writer stopped
                }
            }
        });
        for t in rx {
            f(t)?;
        }
        Ok(())
    })
}

/// A progress bar over the streams, shown on big traces when stderr is a terminal.
fn progress_bar(trace: &Trace) -> indicatif::ProgressBar {
    let events: u64 = trace.streams.iter().map(|s| s.events.len() as u64).sum();
    if events < 2_000_000 {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(events);
    pb.set_style(
        indicatif::ProgressStyle::with_template("exporting {bar:40} {pos}/{len} events")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    pb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_operations() {
        use OpClass::*;
        for (name, want) in [
            ("GASP_MPI_SEND", Some(Send)),
            ("GASP_MPI_SSEND", Some(Send)),
            ("GASP_MPI_RECV", Some(Recv)),
            ("GASP_MPI_IRECV", Some(Irecv)),
            ("GASP_MPI_ISSEND", Some(Isend)),
            ("GASP_MPI_WAITALL", None),
            ("GASP_MPI_SENDRECV", Some(SendRecv)),
            ("GASP_MPI_ACCUMULATE", Some(Put)),
            ("GASP_MPI_RGET", Some(Get)),
            ("GASP_MPI_COMPARE_AND_SWAP", Some(Atomic { fetch: true })),
            ("GASP_MPI_ALLREDUCE", Some(Collective(6))),
            ("GASP_MPI_WIN_FENCE", None),
            ("GASP_SHMEM_PUTMEM_NBI", Some(Put)),
            ("GASP_SHMEM_DOUBLE_P", Some(Put)),
            ("GASP_SHMEM_LONG_G", Some(Get)),
            ("GASP_SHMEM_GET64", Some(Get)),
            ("GASP_SHMEM_INT_ATOMIC_INC", Some(Atomic { fetch: false })),
            ("GASP_SHMEM_LONG_ATOMIC_SWAP", Some(Atomic { fetch: true })),
            ("GASP_SHMEM_BARRIER_ALL", Some(Collective(0))),
            ("GASP_SHMEM_FCOLLECT64", Some(Collective(4))),
            ("GASP_SHMEM_DOUBLE_SUM_TO_ALL", Some(Collective(6))),
            ("GASP_SHMEM_QUIET", None),
            ("GASP_SHMEM_SET_LOCK", None),
            ("GASP_UPC_PUT", None),
        ] {
            assert_eq!(classify(name), want, "{name}");
        }
        // Every kind the tables name as such exists.
        for k in kinds::all_kinds() {
            if let Some(OpClass::Put | OpClass::Get) = classify(k.name) {
                assert_eq!(k.class, Class::Comm, "{}", k.name);
            }
        }
    }

    #[test]
    fn element_sizes() {
        assert_eq!(element_bytes("GASP_SHMEM_LONGLONG_P"), 8);
        assert_eq!(element_bytes("GASP_SHMEM_SHORT_G"), 2);
        assert_eq!(element_bytes("GASP_SHMEM_PUT32"), 4);
        assert_eq!(element_bytes("GASP_SHMEM_GET128_NBI"), 16);
    }

    #[test]
    fn output_is_replaced_only_when_forced() {
        let dir = std::env::temp_dir().join(format!("gaspard-export-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/f"), b"x").unwrap();
        let err = prepare_output(&dir, false).unwrap_err().to_string();
        assert!(
            err.contains("already exists") && err.contains("--force"),
            "{err}"
        );
        assert!(dir.join("sub/f").exists());
        prepare_output(&dir, true).unwrap();
        assert!(!dir.exists());
        prepare_output(&dir, false).unwrap();
    }
}
