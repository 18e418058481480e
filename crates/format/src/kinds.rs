//! The canonical event kinds and the arguments each carries.
//!
//! Kind numbers are gaspard's own and are written to disk: they never depend
//! on the tag numbers of the runtime's `gasp_upc.h` (the C shim maps tags by
//! symbolic name). Bump [`crate::FORMAT_VERSION`] when you renumber a kind or
//! change its arguments; adding a kind at a new number is compatible.
//!
//! The same table is written in C in `crates/gasp/csrc/gasp_shim.c`; the
//! round-trip tests check that the two agree.

/// How one argument is stored and shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgType {
    /// A C `int` (also `upc_flag_t`, `upc_op_t`), stored sign-extended.
    Int,
    /// A `size_t`.
    Size,
    /// A local address (`void *`).
    Ptr,
    /// A pointer-to-shared (`gasp_upc_PTS_t *`): its bytes, or (thread, address) when resolved.
    Pts,
    /// A lock (`gasp_upc_lock_t *`): the bytes of its pointer-to-shared.
    Lock,
    /// A non-blocking handle (`gasp_upc_nb_handle_t`).
    Handle,
    /// A string the program keeps alive (function signature); interned in the trace.
    Str,
    /// A `gasp_upc_reduction_t`.
    Reduction,
    /// A `gasp_model_t`.
    Model,
    /// A timestamp in clock ticks (converted to nanoseconds when read).
    Ticks,
}

/// What a kind is about: drives the time breakdown of the analyses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// Barriers, fences, locks, waits.
    Sync,
    /// Gets, puts, bulk copies, collectives.
    Comm,
    /// Allocation and release of memory or locks.
    Memory,
    /// Work-sharing constructs.
    Work,
    /// Program start, exit, measurement control.
    Program,
    /// Runtime software cache.
    Cache,
    /// User functions.
    Function,
    /// User-defined events.
    User,
}

/// One canonical kind.
#[derive(Debug)]
pub struct KindInfo {
    /// Number on disk.
    pub id: u16,
    /// Symbolic name, as in the GASP specification.
    pub name: &'static str,
    /// Class of the kind.
    pub class: Class,
    /// Arguments of START and ATOMIC events.
    pub start: &'static [(&'static str, ArgType)],
    /// Arguments of END events.
    pub end: &'static [(&'static str, ArgType)],
}

use ArgType::*;
use Class::*;

const NAMED: &[(&str, ArgType)] = &[("named", Int), ("expr", Int)];
const ALLOC_S: &[(&str, ArgType)] = &[("nblocks", Size), ("nbytes", Size)];
const ALLOC_E: &[(&str, ArgType)] = &[("nblocks", Size), ("nbytes", Size), ("newshrd_ptr", Pts)];
const LCK: &[(&str, ArgType)] = &[("lck", Lock)];
const GET: &[(&str, ArgType)] = &[("is_relaxed", Int), ("dst", Ptr), ("src", Pts), ("n", Size)];
const GET_H: &[(&str, ArgType)] = &[
    ("is_relaxed", Int),
    ("dst", Ptr),
    ("src", Pts),
    ("n", Size),
    ("handle", Handle),
];
const PUT: &[(&str, ArgType)] = &[("is_relaxed", Int), ("dst", Pts), ("src", Ptr), ("n", Size)];
const PUT_H: &[(&str, ArgType)] = &[
    ("is_relaxed", Int),
    ("dst", Pts),
    ("src", Ptr),
    ("n", Size),
    ("handle", Handle),
];
const HANDLE: &[(&str, ArgType)] = &[("handle", Handle)];
const COLL: &[(&str, ArgType)] = &[
    ("dst", Pts),
    ("src", Pts),
    ("nbytes", Size),
    ("upc_flags", Int),
];
const PERMUTE: &[(&str, ArgType)] = &[
    ("dst", Pts),
    ("src", Pts),
    ("perm", Pts),
    ("nbytes", Size),
    ("upc_flags", Int),
];
const REDUCE: &[(&str, ArgType)] = &[
    ("dst", Pts),
    ("src", Pts),
    ("upc_op", Int),
    ("nelems", Size),
    ("blk_size", Size),
    ("func", Ptr),
    ("upc_flags", Int),
    ("type", Reduction),
];
const NONE: &[(&str, ArgType)] = &[];
const WORK: &[(&str, ArgType)] = &[("count", Size), ("codeptr", Ptr)];
const SINGLE: &[(&str, ArgType)] = &[("count", Size), ("codeptr", Ptr), ("executor", Int)];
const SYNC: &[(&str, ArgType)] = &[("region", Int), ("codeptr", Ptr)];
const MUTEX: &[(&str, ArgType)] = &[("wait_id", Size), ("codeptr", Ptr)];
const CAF_RMA: &[(&str, ArgType)] = &[
    ("image", Int),
    ("coarray", Ptr),
    ("offset", Size),
    ("nbytes", Size),
];
const CAF_AT: &[(&str, ArgType)] = &[("image", Int), ("coarray", Ptr), ("offset", Size)];
/// One clock synchronization with the reference process (rank or PE 0): the
/// round trip with the shortest time of a few, its local send and receive
/// times and the reference's time in between, all in nanoseconds of each
/// process's own clock; `at_end` is 0 at start-up, 1 before finalization.
const CLOCK_SYNC: &[(&str, ArgType)] = &[
    ("root", Int),
    ("send_ns", Size),
    ("remote_ns", Size),
    ("recv_ns", Size),
    ("at_end", Int),
];
const CAF_COLL: &[(&str, ArgType)] = &[("root_image", Int), ("nbytes", Size)];

macro_rules! kinds {
    ($($konst:ident = $id:expr, $name:expr, $class:expr, $start:expr, $end:expr;)*) => {
        $(
            #[doc = concat!("`", $name, "`")]
            pub const $konst: u16 = $id;
        )*
        /// Every canonical kind, in number order.
        pub static KINDS: &[KindInfo] = &[
            $(KindInfo { id: $id, name: $name, class: $class, start: $start, end: $end },)*
        ];
    };
}

kinds! {
    // The C events' STARTs (and the ENDs of functions and frees) end with a
    // `codeptr` (the call's return address) when gaspard's own hooks and
    // wrappers record them (`gaspard cc --profile`); a runtime's
    // `gasp_event_notify` gives the specification's arguments only, and the
    // word is absent.
    C_FUNC = 1, "GASP_C_FUNC", Function, &[("funcsig", Str), ("codeptr", Ptr)],
        &[("funcsig", Str), ("codeptr", Ptr)];
    C_MALLOC = 2, "GASP_C_MALLOC", Memory, &[("nbytes", Size), ("codeptr", Ptr)],
        &[("nbytes", Size), ("returnptr", Ptr)];
    C_REALLOC = 3, "GASP_C_REALLOC", Memory, &[("ptr", Ptr), ("size", Size), ("codeptr", Ptr)],
        &[("ptr", Ptr), ("size", Size), ("returnptr", Ptr)];
    C_FREE = 4, "GASP_C_FREE", Memory, &[("ptr", Ptr), ("codeptr", Ptr)], &[("ptr", Ptr), ("codeptr", Ptr)];

    UPC_COLLECTIVE_EXIT = 16, "GASP_UPC_COLLECTIVE_EXIT", Program, &[("status", Int)], &[("status", Int)];
    UPC_NONCOLLECTIVE_EXIT = 17, "GASP_UPC_NONCOLLECTIVE_EXIT", Program, &[("status", Int)], &[("status", Int)];
    UPC_NOTIFY = 18, "GASP_UPC_NOTIFY", Sync, NAMED, NAMED;
    UPC_WAIT = 19, "GASP_UPC_WAIT", Sync, NAMED, NAMED;
    UPC_BARRIER = 20, "GASP_UPC_BARRIER", Sync, NAMED, NAMED;
    UPC_FENCE = 21, "GASP_UPC_FENCE", Sync, NONE, NONE;
    UPC_FORALL = 22, "GASP_UPC_FORALL", Work, NONE, NONE;
    UPC_GLOBAL_ALLOC = 23, "GASP_UPC_GLOBAL_ALLOC", Memory, ALLOC_S, ALLOC_E;
    UPC_ALL_ALLOC = 24, "GASP_UPC_ALL_ALLOC", Memory, ALLOC_S, ALLOC_E;
    UPC_ALLOC = 25, "GASP_UPC_ALLOC", Memory, &[("nbytes", Size)], &[("nbytes", Size), ("newshrd_ptr", Pts)];
    UPC_FREE = 26, "GASP_UPC_FREE", Memory, &[("shrd_ptr", Pts)], &[("shrd_ptr", Pts)];
    UPC_GLOBAL_LOCK_ALLOC = 27, "GASP_UPC_GLOBAL_LOCK_ALLOC", Memory, NONE, LCK;
    UPC_ALL_LOCK_ALLOC = 28, "GASP_UPC_ALL_LOCK_ALLOC", Memory, NONE, LCK;
    UPC_LOCK_FREE = 29, "GASP_UPC_LOCK_FREE", Memory, LCK, LCK;
    UPC_LOCK = 30, "GASP_UPC_LOCK", Sync, LCK, LCK;
    UPC_LOCK_ATTEMPT = 31, "GASP_UPC_LOCK_ATTEMPT", Sync, LCK, &[("lck", Lock), ("result", Int)];
    UPC_UNLOCK = 32, "GASP_UPC_UNLOCK", Sync, LCK, LCK;
    UPC_MEMCPY = 33, "GASP_UPC_MEMCPY", Comm, &[("dst", Pts), ("src", Pts), ("n", Size)],
        &[("dst", Pts), ("src", Pts), ("n", Size)];
    UPC_MEMGET = 34, "GASP_UPC_MEMGET", Comm, &[("dst", Ptr), ("src", Pts), ("n", Size)],
        &[("dst", Ptr), ("src", Pts), ("n", Size)];
    UPC_MEMPUT = 35, "GASP_UPC_MEMPUT", Comm, &[("dst", Pts), ("src", Ptr), ("n", Size)],
        &[("dst", Pts), ("src", Ptr), ("n", Size)];
    UPC_MEMSET = 36, "GASP_UPC_MEMSET", Comm, &[("dst", Pts), ("c", Int), ("n", Size)],
        &[("dst", Pts), ("c", Int), ("n", Size)];
    UPC_GET = 37, "GASP_UPC_GET", Comm, GET, GET;
    UPC_PUT = 38, "GASP_UPC_PUT", Comm, PUT, PUT;
    UPC_NB_GET_INIT = 39, "GASP_UPC_NB_GET_INIT", Comm, GET, GET_H;
    UPC_NB_GET_DATA = 40, "GASP_UPC_NB_GET_DATA", Comm, HANDLE, HANDLE;
    UPC_NB_PUT_INIT = 41, "GASP_UPC_NB_PUT_INIT", Comm, PUT, PUT_H;
    UPC_NB_PUT_DATA = 42, "GASP_UPC_NB_PUT_DATA", Comm, HANDLE, HANDLE;
    UPC_NB_SYNC = 43, "GASP_UPC_NB_SYNC", Comm, HANDLE, HANDLE;
    UPC_CACHE_MISS = 44, "GASP_UPC_CACHE_MISS", Cache, &[("n", Size), ("n_lines", Size)], NONE;
    UPC_CACHE_HIT = 45, "GASP_UPC_CACHE_HIT", Cache, &[("n", Size)], NONE;
    UPC_CACHE_INVALIDATE = 46, "GASP_UPC_CACHE_INVALIDATE", Cache, &[("n_dirty", Size)], NONE;
    UPC_ALL_BROADCAST = 47, "GASP_UPC_ALL_BROADCAST", Comm, COLL, COLL;
    UPC_ALL_SCATTER = 48, "GASP_UPC_ALL_SCATTER", Comm, COLL, COLL;
    UPC_ALL_GATHER = 49, "GASP_UPC_ALL_GATHER", Comm, COLL, COLL;
    UPC_ALL_GATHER_ALL = 50, "GASP_UPC_ALL_GATHER_ALL", Comm, COLL, COLL;
    UPC_ALL_EXCHANGE = 51, "GASP_UPC_ALL_EXCHANGE", Comm, COLL, COLL;
    UPC_ALL_PERMUTE = 52, "GASP_UPC_ALL_PERMUTE", Comm, PERMUTE, PERMUTE;
    UPC_ALL_REDUCE = 53, "GASP_UPC_ALL_REDUCE", Comm, REDUCE, REDUCE;
    UPC_ALL_PREFIX_REDUCE = 54, "GASP_UPC_ALL_PREFIX_REDUCE", Comm, REDUCE, REDUCE;

    OMP_THREAD = 64, "GASP_OMP_THREAD", Program, &[("thread_type", Int)], NONE;
    OMP_PARALLEL = 65, "GASP_OMP_PARALLEL", Work,
        &[("requested_parallelism", Size), ("flags", Int), ("codeptr", Ptr)],
        &[("flags", Int), ("codeptr", Ptr)];
    OMP_IMPLICIT_TASK = 66, "GASP_OMP_IMPLICIT_TASK", Work,
        &[("actual_parallelism", Size), ("index", Size), ("flags", Int), ("codeptr", Ptr)],
        NONE;
    OMP_LOOP = 67, "GASP_OMP_LOOP", Work, WORK, WORK;
    OMP_SECTIONS = 68, "GASP_OMP_SECTIONS", Work, WORK, WORK;
    OMP_SINGLE = 69, "GASP_OMP_SINGLE", Work, SINGLE, SINGLE;
    OMP_WORKSHARE = 70, "GASP_OMP_WORKSHARE", Work, WORK, WORK;
    OMP_DISTRIBUTE = 71, "GASP_OMP_DISTRIBUTE", Work, WORK, WORK;
    OMP_TASKLOOP = 72, "GASP_OMP_TASKLOOP", Work, WORK, WORK;
    OMP_BARRIER = 73, "GASP_OMP_BARRIER", Sync, SYNC, SYNC;
    OMP_IMPLICIT_BARRIER = 74, "GASP_OMP_IMPLICIT_BARRIER", Sync, SYNC, SYNC;
    OMP_TASKWAIT = 75, "GASP_OMP_TASKWAIT", Sync, SYNC, SYNC;
    OMP_TASKGROUP = 76, "GASP_OMP_TASKGROUP", Sync, SYNC, SYNC;
    OMP_REDUCTION = 77, "GASP_OMP_REDUCTION", Sync, SYNC, SYNC;
    OMP_SYNC_WAIT = 78, "GASP_OMP_SYNC_WAIT", Sync, SYNC, SYNC;
    OMP_LOCK = 79, "GASP_OMP_LOCK", Sync, MUTEX, MUTEX;
    OMP_NEST_LOCK = 80, "GASP_OMP_NEST_LOCK", Sync, MUTEX, MUTEX;
    OMP_CRITICAL = 81, "GASP_OMP_CRITICAL", Sync, MUTEX, MUTEX;
    OMP_ORDERED = 82, "GASP_OMP_ORDERED", Sync, MUTEX, MUTEX;
    OMP_ATOMIC = 83, "GASP_OMP_ATOMIC", Sync, MUTEX, MUTEX;
    OMP_MUTEX_ACQUIRED = 84, "GASP_OMP_MUTEX_ACQUIRED", Sync,
        &[("mutex", Int), ("wait_id", Size), ("codeptr", Ptr)], NONE;
    OMP_TASK_CREATE = 85, "GASP_OMP_TASK_CREATE", Work,
        &[("flags", Int), ("has_dependences", Int), ("codeptr", Ptr)], NONE;
    OMP_TASK_SCHEDULE = 86, "GASP_OMP_TASK_SCHEDULE", Work, &[("prior_status", Int)], NONE;
    OMP_MASKED = 87, "GASP_OMP_MASKED", Work, &[("codeptr", Ptr)], &[("codeptr", Ptr)];
    OMP_FLUSH = 88, "GASP_OMP_FLUSH", Sync, &[("codeptr", Ptr)], NONE;
    OMP_SCOPE = 89, "GASP_OMP_SCOPE", Work, WORK, WORK;

    CAF_COARRAY = 96, "GASP_CAF_COARRAY", Memory, &[("size", Size), ("coarray", Ptr)], NONE;
    CAF_PUT = 97, "GASP_CAF_PUT", Comm, CAF_RMA, CAF_RMA;
    CAF_GET = 98, "GASP_CAF_GET", Comm, CAF_RMA, CAF_RMA;
    CAF_SYNC_ALL = 99, "GASP_CAF_SYNC_ALL", Sync, NONE, NONE;
    CAF_SYNC_IMAGES = 100, "GASP_CAF_SYNC_IMAGES", Sync, &[("images", Size)], &[("images", Size)];
    CAF_LOCK = 101, "GASP_CAF_LOCK", Sync, CAF_AT, CAF_AT;
    CAF_EVENT_POST = 102, "GASP_CAF_EVENT_POST", Sync, CAF_AT, CAF_AT;
    CAF_CO_SUM = 103, "GASP_CAF_CO_SUM", Comm, CAF_COLL, CAF_COLL;
    CAF_CO_MIN = 104, "GASP_CAF_CO_MIN", Comm, CAF_COLL, CAF_COLL;
    CAF_CO_MAX = 105, "GASP_CAF_CO_MAX", Comm, CAF_COLL, CAF_COLL;
    CAF_CO_REDUCE = 106, "GASP_CAF_CO_REDUCE", Comm, CAF_COLL, CAF_COLL;
    CAF_CO_BROADCAST = 107, "GASP_CAF_CO_BROADCAST", Comm, CAF_COLL, CAF_COLL;

    GASPARD_INIT = 256, "GASPARD_INIT", Program, &[("model", Model)], NONE;
    GASPARD_MEASUREMENT = 257, "GASPARD_MEASUREMENT", Program, &[("on", Int)], NONE;
    GASPARD_USER = 258, "GASPARD_USER", User, NONE, NONE;
    GASPARD_LOST = 259, "GASPARD_LOST", Program, &[("events", Size), ("first", Ticks), ("last", Ticks)], NONE;
    GASPARD_CLOCK_SYNC = 260, "GASPARD_CLOCK_SYNC", Program, CLOCK_SYNC, NONE;
}

#[path = "mpi_kinds.rs"]
mod mpi_kinds;
#[path = "shmem_kinds.rs"]
mod shmem_kinds;
pub use mpi_kinds::{FIRST as MPI_FIRST, MPI_KINDS};
pub use shmem_kinds::{FIRST as SHMEM_FIRST, SHMEM_KINDS};

/// The kind tables with their first numbers, in number order.
fn tables() -> [(u16, &'static [KindInfo]); 3] {
    [
        (0, KINDS),
        (SHMEM_FIRST, SHMEM_KINDS),
        (MPI_FIRST, MPI_KINDS),
    ]
}

/// Every kind by number, made once: analyses look kinds up per event.
#[inline]
fn by_id() -> &'static [Option<&'static KindInfo>] {
    static TABLE: std::sync::OnceLock<Vec<Option<&'static KindInfo>>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let max = all_kinds().map(|k| k.id as usize).max().unwrap_or(0);
        let mut v = vec![None; max + 1];
        for (_, table) in tables() {
            for k in table {
                v[k.id as usize] = Some(k);
            }
        }
        v
    })
}

/// Looks a kind up by its number.
#[inline]
pub fn kind(id: u16) -> Option<&'static KindInfo> {
    by_id().get(id as usize).copied().flatten()
}

/// A table by kind number (every `u16`) of what `f` says of each kind
/// (`None`: no kind has that number), for per-event lookups without names.
pub fn table<T>(f: impl FnMut(Option<&'static KindInfo>) -> T) -> Vec<T> {
    (0..=u16::MAX).map(kind).map(f).collect()
}

/// Looks a kind up by its symbolic name.
pub fn kind_by_name(name: &str) -> Option<&'static KindInfo> {
    static NAMES: std::sync::OnceLock<std::collections::HashMap<&'static str, &'static KindInfo>> =
        std::sync::OnceLock::new();
    NAMES
        .get_or_init(|| all_kinds().map(|k| (k.name, k)).collect())
        .get(name)
        .copied()
}

/// Every kind: the core ones, then the OpenSHMEM and MPI ones.
pub fn all_kinds() -> impl Iterator<Item = &'static KindInfo> {
    KINDS
        .iter()
        .chain(SHMEM_KINDS.iter())
        .chain(MPI_KINDS.iter())
}

/// Names of the `gasp_model_t` values.
pub fn model_name(model: u64) -> &'static str {
    match model {
        0 => "UPC",
        1 => "TITANIUM",
        2 => "CAF",
        3 => "MPI",
        4 => "SHMEM",
        5 => "OMP",
        _ => "UNKNOWN",
    }
}

/// Names of the `gasp_upc_reduction_t` values.
pub fn reduction_name(r: u64) -> &'static str {
    const NAMES: [&str; 11] = [
        "GASP_UPC_REDUCTION_C",
        "GASP_UPC_REDUCTION_UC",
        "GASP_UPC_REDUCTION_S",
        "GASP_UPC_REDUCTION_US",
        "GASP_UPC_REDUCTION_I",
        "GASP_UPC_REDUCTION_UI",
        "GASP_UPC_REDUCTION_L",
        "GASP_UPC_REDUCTION_UL",
        "GASP_UPC_REDUCTION_F",
        "GASP_UPC_REDUCTION_D",
        "GASP_UPC_REDUCTION_LD",
    ];
    NAMES
        .get(r as usize)
        .copied()
        .unwrap_or("GASP_UPC_REDUCTION_UNKNOWN")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_sorted_and_unique() {
        for (first, table) in tables() {
            assert!(table.first().is_none_or(|k| k.id >= first));
            for w in table.windows(2) {
                assert!(w[0].id < w[1].id, "{} before {}", w[0].name, w[1].name);
            }
        }
        assert!(KINDS.last().unwrap().id < SHMEM_FIRST);
        assert!(SHMEM_KINDS.last().unwrap().id < MPI_FIRST);
        assert_eq!(
            kind_by_name("GASP_MPI_PUT").map(|k| kind(k.id).unwrap().name),
            Some("GASP_MPI_PUT")
        );
        assert!(kind_by_name("GASP_MPI_WIN_FENCE").is_some());
        let mut names: Vec<_> = all_kinds().map(|k| k.name).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
        assert_eq!(
            kind_by_name("GASP_SHMEM_PUTMEM").map(|k| kind(k.id).unwrap().name),
            Some("GASP_SHMEM_PUTMEM")
        );
        assert!(kind_by_name("GASP_SHMEM_LONG_ATOMIC_FETCH_ADD").is_some());
        assert!(kind_by_name("GASP_SHMEM_BARRIER_ALL").is_some());
    }

    /// Checks that every `#define PREFIX... N` of a header names the kind numbered N.
    fn header_matches(h: &str, prefix: &str) -> usize {
        let mut seen = 0;
        for line in h.lines() {
            let mut f = line.split_whitespace();
            if f.next() != Some("#define") {
                continue;
            }
            let (Some(name), Some(num)) = (f.next(), f.next()) else {
                continue;
            };
            if !name.starts_with(prefix) {
                continue;
            }
            let num: u16 = num.trim_end_matches('u').parse().unwrap();
            assert_eq!(kind_by_name(name).map(|k| k.id), Some(num), "{name}");
            seen += 1;
        }
        seen
    }

    #[test]
    fn the_extension_headers_match() {
        let count = |p: &str| all_kinds().filter(|k| k.name.starts_with(p)).count();
        for (h, p) in [
            (include_str!("../../gasp/include/gasp_omp.h"), "GASP_OMP_"),
            (
                include_str!("../../gasp/include/gasp_shmem.h"),
                "GASP_SHMEM_",
            ),
            (include_str!("../../gasp/include/gasp_mpi.h"), "GASP_MPI_"),
        ] {
            assert_eq!(header_matches(h, p), count(p), "{p}");
        }
    }

    #[test]
    fn lookup() {
        assert_eq!(kind(UPC_MEMGET).unwrap().name, "GASP_UPC_MEMGET");
        assert_eq!(kind_by_name("GASP_UPC_PUT").unwrap().id, UPC_PUT);
        assert!(kind(999).is_none());
    }
}
