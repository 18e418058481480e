#!/usr/bin/env python3
"""Generates gaspard's MPI events from one table:

  crates/format/src/mpi_kinds.rs   the kinds, their names and arguments
  crates/gasp/include/gasp_mpi.h   the same for GASP tools (names, numbers)
  crates/gasp/csrc/mpi_adapter.c   the PMPI wrappers (C, and Fortran for `use mpi`)

Run it again after changing the table, then `cargo fmt`: python3 scripts/gen-mpi.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_common import header_entry, kind_entry, write_header, write_kinds  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRST_KIND = 1024

P2P = [("peer", "Int"), ("tag", "Int"), ("nbytes", "Size")]
REQ = [("request", "Ptr")]
COLL = [("root", "Int"), ("nbytes", "Size"), ("comm_size", "Int")]
RMA = [("target", "Int"), ("disp", "Size"), ("nbytes", "Size"), ("win", "Ptr")]
WIN = [("win", "Ptr")]

# name, C parameters, class, START args [(name, type, C expr)], END args (list or None: same),
# extra C before the call, C expressions for END args computed after the call.
FUNCS = []


def f(name, params, cls, start, end=None, pre="", post=None):
    FUNCS.append(dict(name=name, params=params, cls=cls, start=start, end=end, pre=pre, post=post))


def a(name, typ, expr):
    return (name, typ, expr)


f("MPI_Init", "int *argc, char ***argv", "Program", [], [a("rank", "Int", "world_rank_self()"), a("size", "Int", "world_size()")])
f("MPI_Init_thread", "int *argc, char ***argv, int required, int *provided", "Program", [a("required", "Int", "required")],
  [a("rank", "Int", "world_rank_self()"), a("size", "Int", "world_size()")])
f("MPI_Finalize", "void", "Program", [])
for s in ["Send", "Ssend", "Bsend", "Rsend"]:
    f(f"MPI_{s}", "const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm", "Comm",
      [a("peer", "Int", "world_rank(comm, dest)"), a("tag", "Int", "tag"), a("nbytes", "Size", "type_bytes(datatype, count)")])
for s in ["Isend", "Issend", "Ibsend", "Irsend"]:
    f(f"MPI_{s}", "const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request", "Comm",
      [a("peer", "Int", "world_rank(comm, dest)"), a("tag", "Int", "tag"), a("nbytes", "Size", "type_bytes(datatype, count)")],
      end=[a("peer", "Int", ""), a("tag", "Int", ""), a("nbytes", "Size", ""), a("request", "Ptr", "H(*request)")])
f("MPI_Recv", "void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status", "Comm",
  [a("peer", "Int", "world_rank(comm, source)"), a("tag", "Int", "tag"), a("nbytes", "Size", "type_bytes(datatype, count)")],
  end=[a("peer", "Int", "world_rank(comm, st->MPI_SOURCE)"), a("tag", "Int", "st->MPI_TAG"), a("nbytes", "Size", "status_bytes(st, datatype)")],
  pre="MPI_Status own; MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;")
f("MPI_Irecv", "void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request", "Comm",
  [a("peer", "Int", "world_rank(comm, source)"), a("tag", "Int", "tag"), a("nbytes", "Size", "type_bytes(datatype, count)")],
  end=[a("peer", "Int", ""), a("tag", "Int", ""), a("nbytes", "Size", ""), a("request", "Ptr", "H(*request)")])
f("MPI_Sendrecv",
  "const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf, int recvcount, "
  "MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status", "Comm",
  [a("peer", "Int", "world_rank(comm, dest)"), a("tag", "Int", "sendtag"), a("nbytes", "Size", "type_bytes(sendtype, sendcount)"),
   a("source", "Int", "world_rank(comm, source)"), a("recv_nbytes", "Size", "type_bytes(recvtype, recvcount)")])
f("MPI_Wait", "MPI_Request *request, MPI_Status *status", "Sync", [a("request", "Ptr", "H(*request)")],
  end=[a("request", "Ptr", ""), a("source", "Int", "st->MPI_SOURCE"), a("tag", "Int", "st->MPI_TAG")],
  pre="MPI_Status own; MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;")
f("MPI_Waitall", "int count, MPI_Request array_of_requests[], MPI_Status *array_of_statuses", "Sync", [a("count", "Int", "count")])
f("MPI_Waitany", "int count, MPI_Request array_of_requests[], int *index, MPI_Status *status", "Sync", [a("count", "Int", "count")],
  end=[a("count", "Int", ""), a("index", "Int", "*index")])
f("MPI_Waitsome", "int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[], MPI_Status array_of_statuses[]",
  "Sync", [a("count", "Int", "incount")], end=[a("count", "Int", ""), a("completed", "Int", "*outcount")])
f("MPI_Test", "MPI_Request *request, int *flag, MPI_Status *status", "Sync", [a("request", "Ptr", "H(*request)")],
  end=[a("request", "Ptr", ""), a("flag", "Int", "*flag")])
f("MPI_Testall", "int count, MPI_Request array_of_requests[], int *flag, MPI_Status array_of_statuses[]", "Sync",
  [a("count", "Int", "count")], end=[a("count", "Int", ""), a("flag", "Int", "*flag")])
f("MPI_Barrier", "MPI_Comm comm", "Sync", [a("root", "Int", "-1"), a("nbytes", "Size", "0"), a("comm_size", "Int", "comm_size(comm)")])
f("MPI_Bcast", "void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm", "Comm",
  [a("root", "Int", "world_rank(comm, root)"), a("nbytes", "Size", "type_bytes(datatype, count)"), a("comm_size", "Int", "comm_size(comm)")])
f("MPI_Reduce", "const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm", "Comm",
  [a("root", "Int", "world_rank(comm, root)"), a("nbytes", "Size", "type_bytes(datatype, count)"), a("comm_size", "Int", "comm_size(comm)"),
   a("op", "Int", "op_code(op)")])
f("MPI_Allreduce", "const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm", "Comm",
  [a("root", "Int", "-1"), a("nbytes", "Size", "type_bytes(datatype, count)"), a("comm_size", "Int", "comm_size(comm)"),
   a("op", "Int", "op_code(op)")])
for name, root in [("Gather", True), ("Scatter", True), ("Allgather", False), ("Alltoall", False)]:
    params = ("const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, "
              "MPI_Datatype recvtype" + (", int root" if root else "") + ", MPI_Comm comm")
    f(f"MPI_{name}", params, "Comm",
      [a("root", "Int", "world_rank(comm, root)" if root else "-1"), a("nbytes", "Size", "type_bytes(sendtype, sendcount)"),
       a("comm_size", "Int", "comm_size(comm)")])
f("MPI_Win_create", "void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win", "Memory",
  [a("base", "Ptr", "H(base)"), a("size", "Size", "size"), a("disp_unit", "Int", "disp_unit")],
  end=[a("base", "Ptr", ""), a("size", "Size", ""), a("disp_unit", "Int", ""), a("win", "Ptr", "H(*win)")])
f("MPI_Win_allocate", "MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win", "Memory",
  [a("base", "Ptr", "0"), a("size", "Size", "size"), a("disp_unit", "Int", "disp_unit")],
  end=[a("base", "Ptr", "H(*(void **)baseptr)"), a("size", "Size", ""), a("disp_unit", "Int", ""), a("win", "Ptr", "H(*win)")])
f("MPI_Win_create_dynamic", "MPI_Info info, MPI_Comm comm, MPI_Win *win", "Memory", [],
  end=[a("win", "Ptr", "H(*win)")])
f("MPI_Win_attach", "MPI_Win win, void *base, MPI_Aint size", "Memory",
  [a("win", "Ptr", "H(win)"), a("base", "Ptr", "H(base)"), a("size", "Size", "size")])
f("MPI_Win_free", "MPI_Win *win", "Memory", [a("win", "Ptr", "H(*win)")], pre="forget_win(*win);")
for name in ["Put", "Get", "Accumulate", "Rput", "Rget", "Get_accumulate", "Fetch_and_op", "Compare_and_swap"]:
    if name in ("Put", "Rput"):
        params = ("const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, "
                  "MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win")
    elif name in ("Get", "Rget"):
        params = ("void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, "
                  "MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win")
    elif name == "Accumulate":
        params = ("const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, "
                  "MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win")
    elif name == "Get_accumulate":
        params = ("const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, void *result_addr, "
                  "int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp, "
                  "int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win")
    elif name == "Fetch_and_op":
        params = ("const void *origin_addr, void *result_addr, MPI_Datatype datatype, int target_rank, "
                  "MPI_Aint target_disp, MPI_Op op, MPI_Win win")
    else:
        params = ("const void *origin_addr, const void *compare_addr, void *result_addr, MPI_Datatype datatype, "
                  "int target_rank, MPI_Aint target_disp, MPI_Win win")
    if name.startswith("R"):
        params += ", MPI_Request *request"
    count = "type_bytes(datatype, 1)" if name in ("Fetch_and_op", "Compare_and_swap") else "type_bytes(target_datatype, target_count)"
    f(f"MPI_{name}", params, "Comm",
      [a("target", "Int", "win_world_rank(win, target_rank)"), a("disp", "Size", "(uint64_t)target_disp"),
       a("nbytes", "Size", count), a("win", "Ptr", "H(win)")])
f("MPI_Win_fence", "int assert, MPI_Win win", "Sync", [a("assert", "Int", "assert"), a("win", "Ptr", "H(win)")])
f("MPI_Win_lock", "int lock_type, int rank, int assert, MPI_Win win", "Sync",
  [a("lock_type", "Int", "lock_type"), a("target", "Int", "win_world_rank(win, rank)"), a("win", "Ptr", "H(win)")])
f("MPI_Win_unlock", "int rank, MPI_Win win", "Sync", [a("target", "Int", "win_world_rank(win, rank)"), a("win", "Ptr", "H(win)")])
for name in ["Win_lock_all"]:
    f(f"MPI_{name}", "int assert, MPI_Win win", "Sync", [a("win", "Ptr", "H(win)")])
for name in ["Win_unlock_all", "Win_flush_all", "Win_flush_local_all", "Win_sync"]:
    f(f"MPI_{name}", "MPI_Win win", "Sync", [a("win", "Ptr", "H(win)")])
for name in ["Win_flush", "Win_flush_local"]:
    f(f"MPI_{name}", "int rank, MPI_Win win", "Sync", [a("target", "Int", "win_world_rank(win, rank)"), a("win", "Ptr", "H(win)")])
for name in ["Win_post", "Win_start"]:
    f(f"MPI_{name}", "MPI_Group group, int assert, MPI_Win win", "Sync", [a("win", "Ptr", "H(win)")])
for name in ["Win_complete", "Win_wait"]:
    f(f"MPI_{name}", "MPI_Win win", "Sync", [a("win", "Ptr", "H(win)")])
f("MPI_Comm_free", "MPI_Comm *comm", "Memory", [], pre="forget_comm(*comm);")

# Fortran (`use mpi`, `include 'mpif.h'`): name, Fortran params, C body computing START args, END args.
FORTRAN = {
    "MPI_Init": ("MPI_Fint *ierr", "pmpi_init_(ierr)"),
    "MPI_Finalize": ("MPI_Fint *ierr", "pmpi_finalize_(ierr)"),
    "MPI_Send": ("void *buf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *dest, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *ierr",
                 "pmpi_send_(buf, count, datatype, dest, tag, comm, ierr)"),
    "MPI_Recv": ("void *buf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *source, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *status, MPI_Fint *ierr",
                 "pmpi_recv_(buf, count, datatype, source, tag, comm, status, ierr)"),
    "MPI_Barrier": ("MPI_Fint *comm, MPI_Fint *ierr", "pmpi_barrier_(comm, ierr)"),
    "MPI_Bcast": ("void *buf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr",
                  "pmpi_bcast_(buf, count, datatype, root, comm, ierr)"),
    "MPI_Allreduce": ("void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierr",
                      "pmpi_allreduce_(sendbuf, recvbuf, count, datatype, op, comm, ierr)"),
    "MPI_Reduce": ("void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype, MPI_Fint *op, MPI_Fint *root, MPI_Fint *comm, MPI_Fint *ierr",
                   "pmpi_reduce_(sendbuf, recvbuf, count, datatype, op, root, comm, ierr)"),
}
# START argument expressions of the Fortran wrappers (Fortran handles converted to C).
FORTRAN_ARGS = {
    "MPI_Init": [], "MPI_Finalize": [],
    "MPI_Send": ["world_rank(MPI_Comm_f2c(*comm), *dest)", "*tag", "type_bytes(MPI_Type_f2c(*datatype), *count)"],
    "MPI_Recv": ["world_rank(MPI_Comm_f2c(*comm), *source)", "*tag", "type_bytes(MPI_Type_f2c(*datatype), *count)"],
    "MPI_Barrier": ["-1", "0", "comm_size(MPI_Comm_f2c(*comm))"],
    "MPI_Bcast": ["world_rank(MPI_Comm_f2c(*comm), *root)", "type_bytes(MPI_Type_f2c(*datatype), *count)", "comm_size(MPI_Comm_f2c(*comm))"],
    "MPI_Allreduce": ["-1", "type_bytes(MPI_Type_f2c(*datatype), *count)", "comm_size(MPI_Comm_f2c(*comm))", "op_code(MPI_Op_f2c(*op))"],
    "MPI_Reduce": ["world_rank(MPI_Comm_f2c(*comm), *root)", "type_bytes(MPI_Type_f2c(*datatype), *count)", "comm_size(MPI_Comm_f2c(*comm))",
                   "op_code(MPI_Op_f2c(*op))"],
}

HELPERS = r'''/* libgaspard_mpi.so: MPI calls recorded as GASP_MPI_* events
 * (generated by scripts/gen-mpi.py; do not edit).
 *
 * Each wrapper records START, calls PMPI_*, records END. Peers are given as
 * ranks of MPI_COMM_WORLD (translated through a small cache per
 * communicator and window); sizes are in bytes. Fortran programs (`use mpi`)
 * call the Fortran bindings, which reach PMPI_* directly: the mpi_*_ wrappers
 * below catch them. A thread-local guard keeps calls MPI makes itself out of
 * the trace. Loaded with libgaspard.so (LD_PRELOAD, as `gaspard run` does). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

#define EXPORT __attribute__((visibility("default")))
#define MODEL_MPI 3u
#define H(x) (uint64_t)(uintptr_t)(x)

int gaspard_record_event(unsigned model, unsigned kind, unsigned phase, const char *file,
                         int line, const uint64_t *args, unsigned n);

/* Initial-exec: the library is loaded at start-up (LD_PRELOAD or linked),
 * and each wrapped call reads this without a call to __tls_get_addr. */
static __thread int inside __attribute__((tls_model("initial-exec")));

/* Coarray Fortran: the program's OpenCoarrays code (from libgaspard.so, found
 * once); an MPI call made from there is recorded at the program's line that
 * called the runtime (see gaspard_caf_caller). */
void gaspard_caf_range(uintptr_t *lo, uintptr_t *hi);
uint64_t gaspard_caf_caller(uintptr_t ra, uintptr_t lo, uintptr_t hi);
static uintptr_t caf_lo, caf_hi;

__attribute__((constructor)) static void find_caf(void) { gaspard_caf_range(&caf_lo, &caf_hi); }

/* The call site of a call returning to `ra`. */
static inline uint64_t site_of(void *ra) {
  uintptr_t a = (uintptr_t)ra;
  if (__builtin_expect(a - 1 - caf_lo < caf_hi - caf_lo, 0)) return gaspard_caf_caller(a, caf_lo, caf_hi);
  return a;
}

static inline int enter(void) {
  if (inside) return 0;
  inside = 1;
  return 1;
}

static inline void leave(void) { inside = 0; }

static int world_rank_self(void) {
  int r = -1, up = 0;
  PMPI_Initialized(&up);
  if (up) PMPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

static int world_size(void) {
  int s = 0, up = 0;
  PMPI_Initialized(&up);
  if (up) PMPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

static uint64_t type_bytes(MPI_Datatype t, int count) {
  int size = 0;
  if (t == MPI_DATATYPE_NULL || PMPI_Type_size(t, &size) != MPI_SUCCESS) return 0;
  return (uint64_t)size * (uint64_t)(count < 0 ? 0 : count);
}

static uint64_t status_bytes(const MPI_Status *st, MPI_Datatype t) {
  int count = 0;
  if (PMPI_Get_count(st, t, &count) != MPI_SUCCESS || count == MPI_UNDEFINED) return 0;
  return type_bytes(t, count);
}

/* The reduction: 1 sum, 2 prod, 3 max, 4 min, 5 land, 6 lor, 7 band, 8 bor, 0 other. */
static int op_code(MPI_Op op) {
  if (op == MPI_SUM) return 1;
  if (op == MPI_PROD) return 2;
  if (op == MPI_MAX) return 3;
  if (op == MPI_MIN) return 4;
  if (op == MPI_LAND) return 5;
  if (op == MPI_LOR) return 6;
  if (op == MPI_BAND) return 7;
  if (op == MPI_BOR) return 8;
  return 0;
}

static int comm_size(MPI_Comm comm) {
  int s = 0;
  if (comm != MPI_COMM_NULL) PMPI_Comm_size(comm, &s);
  return s;
}

/* World ranks of the members of communicators and windows, cached. */
#define RANK_CACHE 32
static struct {
  const void *handle;
  int size;
  int *world;
} rank_cache[RANK_CACHE];
static int rank_lock;

static int *world_ranks_of_group(MPI_Group group, int size) {
  int *local = malloc(sizeof(int) * (size_t)size), *world = malloc(sizeof(int) * (size_t)size);
  MPI_Group wg;
  if (!local || !world) {
    free(local), free(world);
    return NULL;
  }
  for (int i = 0; i < size; i++) local[i] = i;
  PMPI_Comm_group(MPI_COMM_WORLD, &wg);
  PMPI_Group_translate_ranks(group, size, local, wg, world);
  PMPI_Group_free(&wg);
  free(local);
  return world;
}

static int cached_rank(const void *handle, int rank, MPI_Group (*group_of)(const void *)) {
  if (rank < 0) return rank; /* MPI_ANY_SOURCE, MPI_PROC_NULL */
  while (__atomic_exchange_n(&rank_lock, 1, __ATOMIC_ACQUIRE)) {}
  int slot = -1, found = -1;
  for (int i = 0; i < RANK_CACHE; i++) {
    if (rank_cache[i].handle == handle) { found = i; break; }
    if (slot < 0 && !rank_cache[i].handle) slot = i;
  }
  if (found < 0) {
    MPI_Group g = group_of(handle);
    int size = 0;
    PMPI_Group_size(g, &size);
    int *world = world_ranks_of_group(g, size);
    PMPI_Group_free(&g);
    if (slot < 0) slot = (int)(((uintptr_t)handle >> 4) % RANK_CACHE), free(rank_cache[slot].world);
    rank_cache[slot].handle = handle;
    rank_cache[slot].size = world ? size : 0;
    rank_cache[slot].world = world;
    found = slot;
  }
  int r = rank < rank_cache[found].size ? rank_cache[found].world[rank] : rank;
  __atomic_store_n(&rank_lock, 0, __ATOMIC_RELEASE);
  return r;
}

static void forget(const void *handle) {
  while (__atomic_exchange_n(&rank_lock, 1, __ATOMIC_ACQUIRE)) {}
  for (int i = 0; i < RANK_CACHE; i++)
    if (rank_cache[i].handle == handle) {
      free(rank_cache[i].world);
      rank_cache[i].handle = NULL, rank_cache[i].world = NULL, rank_cache[i].size = 0;
    }
  __atomic_store_n(&rank_lock, 0, __ATOMIC_RELEASE);
}

static MPI_Group comm_group(const void *h) {
  MPI_Group g;
  PMPI_Comm_group((MPI_Comm)h, &g);
  return g;
}

static MPI_Group win_group(const void *h) {
  MPI_Group g;
  PMPI_Win_get_group((MPI_Win)h, &g);
  return g;
}

static int world_rank(MPI_Comm comm, int rank) {
  if (comm == MPI_COMM_WORLD || rank < 0) return rank;
  return cached_rank((const void *)comm, rank, comm_group);
}

static int win_world_rank(MPI_Win win, int rank) {
  return cached_rank((const void *)win, rank, win_group);
}

/* Clock synchronization (Cristian's algorithm): at the end of MPI_Init and
 * at the start of MPI_Finalize (inside their events), each rank that does not
 * share rank 0's clock sends rank 0 a few messages on a communicator of its
 * own; rank 0 answers each with its time. The round trip with the shortest
 * time is kept and recorded as a GASPARD_CLOCK_SYNC event (local send time,
 * rank 0's time, local receive time); the trace reader corrects each
 * process's times from its first and last. Ranks on rank 0's machine (the
 * same running kernel: gaspard_clock_domain) read its clock and measure
 * nothing, unless an artificial clock error or GASPARD_CLOCK_SYNC_ALL=1 says
 * otherwise: which ranks measure is settled once, by a broadcast of rank 0's
 * clock and a count at rank 0, which then answers that many ranks in the
 * order their messages come. */
uint64_t gaspard_clock_ns(void);
size_t gaspard_clock_domain(char *out, size_t cap);
#define K_CLOCK_SYNC 260u
#define SYNC_ROUNDS 8
#define SYNC_TAG 27301
#define CLOCK_DOMAIN 64
static MPI_Comm sync_comm = MPI_COMM_NULL;
/* -1: not settled yet; else whether this rank measures (rank 0: how many do). */
static int sync_measures = -1;

static void clock_sync(int at_end) {
  int up = 0, down = 0, rank = 0, size = 0;
  PMPI_Initialized(&up);
  PMPI_Finalized(&down);
  if (!up || down) return;
  if (sync_comm == MPI_COMM_NULL && PMPI_Comm_dup(MPI_COMM_WORLD, &sync_comm) != MPI_SUCCESS) {
    sync_comm = MPI_COMM_NULL;
    return;
  }
  PMPI_Comm_rank(sync_comm, &rank);
  PMPI_Comm_size(sync_comm, &size);
  if (sync_measures < 0) {
    char mine[CLOCK_DOMAIN] = {0}, root[CLOCK_DOMAIN] = {0};
    gaspard_clock_domain(mine, sizeof mine);
    if (rank == 0) memcpy(root, mine, sizeof root);
    PMPI_Bcast(root, (int)sizeof root, MPI_CHAR, 0, sync_comm);
    int measures = rank != 0 && (!mine[0] || !root[0] || strcmp(mine, root) != 0), count = 0;
    PMPI_Reduce(&measures, &count, 1, MPI_INT, MPI_SUM, 0, sync_comm);
    sync_measures = rank == 0 ? count : measures;
  }
  if (rank == 0) {
    for (int k = 0; k < sync_measures * SYNC_ROUNDS; k++) {
      uint64_t t = 0;
      MPI_Status st;
      PMPI_Recv(&t, 1, MPI_UINT64_T, MPI_ANY_SOURCE, SYNC_TAG, sync_comm, &st);
      t = gaspard_clock_ns();
      PMPI_Send(&t, 1, MPI_UINT64_T, st.MPI_SOURCE, SYNC_TAG, sync_comm);
    }
  } else if (sync_measures) {
    uint64_t best[5] = {0, 0, 0, 0, (uint64_t)at_end}, rtt = UINT64_MAX;
    for (int k = 0; k < SYNC_ROUNDS; k++) {
      uint64_t t = 0, s = gaspard_clock_ns();
      PMPI_Send(&s, 1, MPI_UINT64_T, 0, SYNC_TAG, sync_comm);
      PMPI_Recv(&t, 1, MPI_UINT64_T, 0, SYNC_TAG, sync_comm, MPI_STATUS_IGNORE);
      uint64_t e = gaspard_clock_ns();
      if (e >= s && e - s < rtt) rtt = e - s, best[1] = s, best[2] = t, best[3] = e;
    }
    if (rtt != UINT64_MAX) gaspard_record_event(MODEL_MPI, K_CLOCK_SYNC, 2, NULL, 0, best, 5);
  }
  if (at_end) PMPI_Comm_free(&sync_comm);
}

static void forget_comm(MPI_Comm comm) { forget((const void *)comm); }
static void forget_win(MPI_Win win) { forget((const void *)win); }

'''


def call_args(params):
    if params == "void":
        return ""
    return ", ".join(p.split()[-1].lstrip("*").split("[")[0] for p in params.split(","))


def main():
    kinds, chdr, cwrap = [], [], []
    idx = {}
    for i, fn in enumerate(FUNCS):
        kid = FIRST_KIND + i
        idx[fn["name"]] = kid
        gname = "GASP_" + fn["name"].upper()
        # Every event ends with the caller's code address (its source line, when read).
        start = [(n, t) for n, t, _ in fn["start"]] + [("codeptr", "Ptr")]
        end = ([(n, t) for n, t, _ in fn["end"]] if fn["end"] is not None else start[:-1]) + [("codeptr", "Ptr")]
        kinds.append(kind_entry(kid, gname, fn["cls"], start, end))
        chdr.extend(header_entry(fn['name'], gname, kid, start, end))
        n = len(fn["start"])
        # END arguments: recomputed where an expression is given, else kept from START.
        ends = fn["end"] if fn["end"] is not None else [(n, t, "") for n, t, _ in fn["start"]]
        m = len(ends)
        body = [f"EXPORT int {fn['name']}({fn['params']}) {{"]
        body.append(f"  uint64_t a[{max(n, m) + 1}] = {{0}};")
        body.append("  int rec = enter();")
        body.append("  uint64_t cp = rec ? site_of(__builtin_return_address(0)) : 0;")
        if fn["pre"]:
            body.append("  " + fn["pre"])
        if n:
            body.append("  if (rec) {")
            for j, (_, _, e) in enumerate(fn["start"]):
                body.append(f"    a[{j}] = (uint64_t)(int64_t)({e});")
            body.append(f"    a[{n}] = cp;")
            body.append(f"    gaspard_record_event(MODEL_MPI, {kid}u, 0, NULL, 0, a, {n + 1});")
            body.append("  }")
        else:
            body.append(f"  if (rec) {{ a[0] = cp; gaspard_record_event(MODEL_MPI, {kid}u, 0, NULL, 0, a, 1); }}")
        # Clock synchronization, inside the interval of the call that needs it.
        if fn["name"] == "MPI_Finalize":
            body.append("  if (rec) clock_sync(1);")
        cargs = call_args(fn["params"])
        if fn["pre"] and "MPI_Status *st" in fn["pre"]:
            cargs = cargs.replace("status", "st")
        body.append(f"  int r = P{fn['name']}({cargs});")
        if fn["name"] in ("MPI_Init", "MPI_Init_thread"):
            body.append("  if (rec && r == MPI_SUCCESS) clock_sync(0);")
        body.append("  if (rec) {")
        for j, (_, _, e) in enumerate(ends):
            if e:
                body.append(f"    a[{j}] = (uint64_t)(int64_t)({e});")
        body.append(f"    a[{m}] = cp;")
        body.append(f"    gaspard_record_event(MODEL_MPI, {kid}u, 1, NULL, 0, a, {m + 1});")
        body.append("    leave();")
        body.append("  }")
        body.append("  return r;")
        body.append("}")
        cwrap.append("\n".join(body))
    # Fortran
    fwrap = []
    for name, (params, call) in FORTRAN.items():
        kid = idx[name]
        lname = name.lower()
        args = FORTRAN_ARGS[name]
        n = len(args)
        fpn = "p" + lname + "_"
        proto = f"void {fpn}({params});"
        body = [proto, f"EXPORT void {lname}_({params}) {{", f"  uint64_t a[{max(n, 2) + 1}] = {{0}};"]
        body.append("  int rec = enter();")
        body.append("  uint64_t cp = rec ? site_of(__builtin_return_address(0)) : 0;")
        if n:
            body.append("  if (rec) {")
            for j, e in enumerate(args):
                body.append(f"    a[{j}] = (uint64_t)(int64_t)({e});")
            body.append("  }")
        body.append(f"  a[{n}] = cp;")
        body.append(f"  if (rec) gaspard_record_event(MODEL_MPI, {kid}u, 0, NULL, 0, a, {n + 1});")
        if name == "MPI_Finalize":
            body.append("  if (rec) clock_sync(1);")
        body.append(f"  {call};")
        if name == "MPI_Init":
            body.append("  if (rec) clock_sync(0);")
        if name == "MPI_Init":
            body.append("  a[0] = (uint64_t)(int64_t)world_rank_self(), a[1] = (uint64_t)(int64_t)world_size(), a[2] = cp;")
            body.append(f"  if (rec) {{ gaspard_record_event(MODEL_MPI, {kid}u, 1, NULL, 0, a, 3); leave(); }}")
        else:
            body.append(f"  if (rec) {{ gaspard_record_event(MODEL_MPI, {kid}u, 1, NULL, 0, a, {n + 1}); leave(); }}")
        body.append("}")
        fwrap.append("\n".join(body))

    write_kinds(os.path.join(ROOT, "crates/format/src/mpi_kinds.rs"), "scripts/gen-mpi.py", "MPI", "MPI_KINDS",
                FIRST_KIND, kinds)
    write_header(os.path.join(ROOT, "crates/gasp/include/gasp_mpi.h"), """/* gasp_mpi.h: MPI events, an extension of GASP 1.4 defined by gaspard
 * (generated by scripts/gen-mpi.py).
 *
 * Section 8 of the GASP specification ("MPI interface") is "TBD". gaspard
 * names each MPI routine's event GASP_MPI_<FUNCTION> (MPI_Put ->
 * GASP_MPI_PUT), of the model GASP_MODEL_MPI: START before the call, END
 * after it. Peers, roots and targets are ranks of MPI_COMM_WORLD; sizes are
 * bytes; request and window handles are their values; codeptr, last, is
 * the caller's code address (the trace reader turns it into a source line).
 * See docs/EXTENSIONS.md. */
""", "_GASP_MPI_H", chdr)
    with open(os.path.join(ROOT, "crates/gasp/csrc/mpi_adapter.c"), "w") as out:
        out.write(HELPERS)
        out.write("\n\n".join(cwrap) + "\n\n/* Fortran bindings (gfortran's lower-case name with one underscore). */\n\n")
        out.write("\n\n".join(fwrap) + "\n")
    print(f"{len(FUNCS)} MPI routines, {len(FORTRAN)} Fortran bindings")


main()
