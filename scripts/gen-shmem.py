#!/usr/bin/env python3
"""Generates gaspard's OpenSHMEM events from one table:

  crates/format/src/shmem_kinds.rs   the kinds, their names and arguments
  crates/gasp/include/gasp_shmem.h   the same for GASP tools (names, numbers)
  crates/gasp/csrc/shmem_adapter.c   the pshmem wrappers of libgaspard_shmem.so

Run it again after changing the table, then `cargo fmt`: python3 scripts/gen-shmem.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_common import header_entry, kind_entry, write_header, write_kinds  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIRST_KIND = 512

TYPES = {  # OpenSHMEM type name -> C type
    "char": "char", "short": "short", "int": "int", "long": "long", "longlong": "long long",
    "float": "float", "double": "double",
}
AMO_TYPES = ["int", "long", "longlong"]
SIZED = {"32": 4, "64": 8, "128": 16}

# Argument lists (name, type) per shape; types are those of kinds.rs.
SHAPES = {
    "none": [],
    "init": [],
    "rma": [("pe", "Int"), ("dest", "Ptr"), ("source", "Ptr"), ("nbytes", "Size")],
    "amo": [("pe", "Int"), ("target", "Ptr"), ("value", "Size"), ("nbytes", "Size")],
    "wait": [("ivar", "Ptr"), ("cmp", "Int"), ("value", "Size")],
    "lock": [("lock", "Ptr")],
    "active": [("pe_start", "Int"), ("log_stride", "Int"), ("pe_size", "Int")],
    "bcast": [("root", "Int"), ("dest", "Ptr"), ("source", "Ptr"), ("nbytes", "Size"),
              ("pe_start", "Int"), ("log_stride", "Int"), ("pe_size", "Int")],
    "coll": [("dest", "Ptr"), ("source", "Ptr"), ("nbytes", "Size"),
             ("pe_start", "Int"), ("log_stride", "Int"), ("pe_size", "Int")],
    "malloc": [("size", "Size")],
    "calloc": [("count", "Size"), ("size", "Size")],
    "free": [("ptr", "Ptr")],
    "realloc": [("ptr", "Ptr"), ("size", "Size")],
}
END_SHAPES = {  # END arguments where they differ from START
    "malloc": [("size", "Size"), ("ptr", "Ptr")],
    "calloc": [("count", "Size"), ("size", "Size"), ("ptr", "Ptr")],
    "realloc": [("ptr", "Ptr"), ("size", "Size"), ("newptr", "Ptr")],
    "init": [("pe", "Int"), ("npes", "Int")],
}
CLASS = {"init": "Program", "none": "Sync", "rma": "Comm", "amo": "Comm", "wait": "Sync", "lock": "Sync",
         "active": "Sync", "bcast": "Comm", "coll": "Comm", "malloc": "Memory",
         "calloc": "Memory", "free": "Memory", "realloc": "Memory"}

# (function, return type, C parameters, shape, C expressions of the START arguments)
FUNCS = []


def f(name, ret, params, shape, args, cls=None):
    FUNCS.append((name, ret, params, shape, args, cls))


f("shmem_init", "void", "void", "init", [], "Program")
f("shmem_finalize", "void", "void", "none", [], "Program")
f("shmem_malloc", "void *", "size_t size", "malloc", ["size"])
f("shmem_calloc", "void *", "size_t count, size_t size", "calloc", ["count", "size"])
f("shmem_realloc", "void *", "void *ptr, size_t size", "realloc", ["SP(ptr)", "size"])
f("shmem_free", "void", "void *ptr", "free", ["SP(ptr)"])
for op in ["put", "get"]:
    for nbi in ["", "_nbi"]:
        f(f"shmem_{op}mem{nbi}", "void", "void *dest, const void *source, size_t nelems, int pe",
          "rma", ["SI(pe)", "SP(dest)", "SP(source)", "nelems"])
        for t, ct in TYPES.items():
            f(f"shmem_{t}_{op}{nbi}", "void",
              f"{ct} *dest, const {ct} *source, size_t nelems, int pe", "rma",
              ["SI(pe)", "SP(dest)", "SP(source)", f"nelems * sizeof({ct})"])
        for bits, size in SIZED.items():
            f(f"shmem_{op}{bits}{nbi}", "void", "void *dest, const void *source, size_t nelems, int pe",
              "rma", ["SI(pe)", "SP(dest)", "SP(source)", f"nelems * {size}"])
for t, ct in TYPES.items():
    f(f"shmem_{t}_p", "void", f"{ct} *dest, {ct} value, int pe", "rma",
      ["SI(pe)", "SP(dest)", "0", f"sizeof({ct})"])
    f(f"shmem_{t}_g", ct, f"const {ct} *source, int pe", "rma",
      ["SI(pe)", "0", "SP(source)", f"sizeof({ct})"])
for t in AMO_TYPES:
    ct = TYPES[t]
    amo = lambda v: ["SI(pe)", "SP(target)", v, f"sizeof({ct})"]
    f(f"shmem_{t}_atomic_fetch_add", ct, f"{ct} *target, {ct} value, int pe", "amo", amo("(uint64_t)value"))
    f(f"shmem_{t}_atomic_add", "void", f"{ct} *target, {ct} value, int pe", "amo", amo("(uint64_t)value"))
    f(f"shmem_{t}_atomic_fetch_inc", ct, f"{ct} *target, int pe", "amo", amo("1"))
    f(f"shmem_{t}_atomic_inc", "void", f"{ct} *target, int pe", "amo", amo("1"))
    f(f"shmem_{t}_atomic_fetch", ct, f"const {ct} *target, int pe", "amo", amo("0"))
    f(f"shmem_{t}_atomic_set", "void", f"{ct} *target, {ct} value, int pe", "amo", amo("(uint64_t)value"))
    f(f"shmem_{t}_atomic_swap", ct, f"{ct} *target, {ct} value, int pe", "amo", amo("(uint64_t)value"))
    f(f"shmem_{t}_atomic_compare_swap", ct, f"{ct} *target, {ct} cond, {ct} value, int pe", "amo",
      amo("(uint64_t)value"))
    f(f"shmem_{t}_wait_until", "void", f"volatile {ct} *ivar, int cmp, {ct} value", "wait",
      ["SP(ivar)", "SI(cmp)", "(uint64_t)value"])
    f(f"shmem_{t}_test", "int", f"volatile {ct} *ivar, int cmp, {ct} value", "wait",
      ["SP(ivar)", "SI(cmp)", "(uint64_t)value"])
for name in ["shmem_barrier_all", "shmem_sync_all", "shmem_fence", "shmem_quiet"]:
    f(name, "void", "void", "none", [])
f("shmem_barrier", "void", "int PE_start, int logPE_stride, int PE_size, long *pSync", "active",
  ["SI(PE_start)", "SI(logPE_stride)", "SI(PE_size)"])
f("shmem_set_lock", "void", "volatile long *lock", "lock", ["SP(lock)"])
f("shmem_clear_lock", "void", "volatile long *lock", "lock", ["SP(lock)"])
f("shmem_test_lock", "int", "volatile long *lock", "lock", ["SP(lock)"])
for bits, size in [("32", 4), ("64", 8)]:
    f(f"shmem_broadcast{bits}", "void",
      "void *dest, const void *source, size_t nelems, int PE_root, int PE_start, int logPE_stride, "
      "int PE_size, long *pSync", "bcast",
      ["SI(PE_root)", "SP(dest)", "SP(source)", f"nelems * {size}", "SI(PE_start)", "SI(logPE_stride)",
       "SI(PE_size)"])
    for coll in ["collect", "fcollect", "alltoall"]:
        f(f"shmem_{coll}{bits}", "void",
          "void *dest, const void *source, size_t nelems, int PE_start, int logPE_stride, int PE_size, "
          "long *pSync", "coll",
          ["SP(dest)", "SP(source)", f"nelems * {size}", "SI(PE_start)", "SI(logPE_stride)", "SI(PE_size)"])
for t in ["int", "long", "longlong", "float", "double"]:
    ct = TYPES[t]
    for op in ["sum", "prod", "max", "min"]:
        f(f"shmem_{t}_{op}_to_all", "void",
          f"{ct} *dest, const {ct} *source, int nreduce, int PE_start, int logPE_stride, int PE_size, "
          f"{ct} *pWrk, long *pSync", "coll",
          ["SP(dest)", "SP(source)", f"(uint64_t)nreduce * sizeof({ct})", "SI(PE_start)",
           "SI(logPE_stride)", "SI(PE_size)"])


def present(header):
    text = open(header).read()
    return [fn for fn in FUNCS if f"p{fn[0]}(" in text.replace(" (", "(")]


def call_args(params):
    if params == "void":
        return ""
    return ", ".join(p.split()[-1].lstrip("*") for p in params.split(","))


def main():
    header = "/usr/lib/x86_64-linux-gnu/openmpi/include/pshmem.h"
    funcs = present(header) if os.path.exists(header) else FUNCS
    kinds, chdr, cwrap = [], [], []
    for i, (name, ret, params, shape, args, cls) in enumerate(funcs):
        kid = FIRST_KIND + i
        gname = "GASP_" + name.upper()
        # Every event ends with the caller's code address (its source line, when read).
        start = SHAPES[shape] + [("codeptr", "Ptr")]
        end = END_SHAPES.get(shape, SHAPES[shape]) + [("codeptr", "Ptr")]
        kinds.append(kind_entry(kid, gname, cls or CLASS[shape], start, end))
        chdr.extend(header_entry(name, gname, kid, start, end))
        n = len(args)
        arr = ", ".join(f"(uint64_t)({a})" for a in args) if args else "0"
        body = [f"EXPORT {ret} {name}({params}) {{"]
        cargs = call_args(params)
        body.append(f"  uint64_t a[{n + 3}] = {{{arr}}};")
        body.append(f"  uint64_t cp = (uint64_t)(uintptr_t)__builtin_return_address(0);")
        body.append(f"  int rec = enter();")
        body.append(f"  a[{n}] = cp;")
        body.append(f"  if (rec) gaspard_record_event(MODEL_SHMEM, {kid}u, 0, NULL, 0, a, {n + 1});")
        # Clock synchronization, inside the interval of the call that needs it.
        if name == "shmem_finalize":
            body.append("  if (rec) clock_sync(1);")
        if ret == "void":
            body.append(f"  p{name}({cargs});")
        else:
            body.append(f"  {ret} r = p{name}({cargs});")
        if shape == "init":
            body.append("  if (rec) clock_sync(0);")
            body.append("  a[0] = (uint64_t)(int64_t)pshmem_my_pe(), a[1] = (uint64_t)(int64_t)pshmem_n_pes(), a[2] = cp;")
            endn = 3
        elif shape in END_SHAPES:
            body.append(f"  a[{n}] = (uint64_t)(uintptr_t)r, a[{n + 1}] = cp;")
            endn = n + 2
        else:
            endn = n + 1
        body.append(f"  if (rec) {{ gaspard_record_event(MODEL_SHMEM, {kid}u, 1, NULL, 0, a, {endn}); leave(); }}")
        if ret != "void":
            body.append("  return r;")
        body.append("}")
        cwrap.append("\n".join(body))

    write_kinds(os.path.join(ROOT, "crates/format/src/shmem_kinds.rs"), "scripts/gen-shmem.py", "OpenSHMEM", "SHMEM_KINDS",
                FIRST_KIND, kinds)
    write_header(os.path.join(ROOT, "crates/gasp/include/gasp_shmem.h"), """/* gasp_shmem.h: OpenSHMEM events, an extension of GASP 1.4 defined by gaspard
 * (generated by scripts/gen-shmem.py).
 *
 * Section 9 of the GASP specification ("SHMEM interface") is "TBD". gaspard
 * names each OpenSHMEM routine's event GASP_SHMEM_<FUNCTION>, of the model
 * GASP_MODEL_SHMEM: START before the call, END after it, on the calling PE.
 * Arguments: pe is the target PE; dest/source/target/ivar are local
 * addresses of symmetric objects (the same offset on every PE); nbytes is
 * what moves; codeptr, last, is the caller's code address (the trace reader
 * turns it into a source line). See docs/EXTENSIONS.md. */
""", "_GASP_SHMEM_H", chdr)
    with open(os.path.join(ROOT, "crates/gasp/csrc/shmem_adapter.c"), "w") as out:
        out.write("""/* libgaspard_shmem.so: OpenSHMEM routines recorded as GASP_SHMEM_* events
 * (generated by scripts/gen-shmem.py; do not edit).
 *
 * Open MPI's oshmem exports every shmem_* as a weak alias of pshmem_*: each
 * wrapper here records START, calls pshmem_*, records END. A thread-local
 * guard keeps calls the library makes itself (shmem_finalize's own
 * barrier) out of the trace. Loaded with libgaspard.so (LD_PRELOAD, as
 * `gaspard run` does, or linked before -loshmem). */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <pshmem.h>

#define EXPORT __attribute__((visibility("default")))
#define MODEL_SHMEM 4u
#define SP(x) (uintptr_t)(x)
#define SI(x) (int64_t)(x)

int gaspard_record_event(unsigned model, unsigned kind, unsigned phase, const char *file,
                         int line, const uint64_t *args, unsigned n);

/* Initial-exec: the library is loaded at start-up (LD_PRELOAD or linked),
 * and each wrapped call reads this without a call to __tls_get_addr. */
static __thread int inside __attribute__((tls_model("initial-exec")));

static inline int enter(void) {
  if (inside) return 0;
  inside = 1;
  return 1;
}

static inline void leave(void) { inside = 0; }

/* Clock synchronization (Cristian's algorithm): at the end of shmem_init and
 * at the start of shmem_finalize (inside their events), each PE that does
 * not share PE 0's clock makes a few round trips to PE 0: it puts a request
 * into its own slot on PE 0, PE 0 answers with its time and an
 * acknowledgement. The shortest round trip is kept and recorded as a
 * GASPARD_CLOCK_SYNC event (local send time, PE 0's time, local receive
 * time); the trace reader corrects each process's times from its first and
 * last. PEs on PE 0's machine (the same running kernel:
 * gaspard_clock_domain, PE 0's read from its slot) read its clock and
 * measure nothing, unless an artificial clock error or
 * GASPARD_CLOCK_SYNC_ALL=1 says otherwise: such a PE puts SYNC_SKIP into
 * its request slot once. The slots are a symmetric allocation of the
 * adapter's own, made once. */
uint64_t gaspard_clock_ns(void);
size_t gaspard_clock_domain(char *out, size_t cap);
#define K_CLOCK_SYNC 260u
#define SYNC_ROUNDS 8
#define CLOCK_DOMAIN 64
#define SYNC_SKIP LONG_MAX
static struct sync_area {
  uint64_t reply;
  long ack;
  char domain[CLOCK_DOMAIN]; /* PE 0's clock, on PE 0 */
  long req[];                /* one per PE, on PE 0 */
} *sync_area;
static long sync_round;
static int sync_measures;

static void clock_sync(int at_end) {
  int me = pshmem_my_pe(), n = pshmem_n_pes();
  if (!sync_area) {
    if (at_end) return;
    sync_area = pshmem_malloc(sizeof *sync_area + sizeof(long) * (size_t)n);
    if (!sync_area) return;
    sync_area->reply = 0, sync_area->ack = 0;
    for (int i = 0; i < n; i++) sync_area->req[i] = 0;
    char mine[CLOCK_DOMAIN] = {0};
    gaspard_clock_domain(mine, sizeof mine);
    memcpy(sync_area->domain, mine, sizeof mine);
    pshmem_barrier_all();
    if (me != 0) {
      char root[CLOCK_DOMAIN] = {0};
      pshmem_getmem(root, sync_area->domain, sizeof root, 0);
      root[CLOCK_DOMAIN - 1] = 0;
      sync_measures = !mine[0] || !root[0] || strcmp(mine, root) != 0;
      if (!sync_measures) pshmem_long_p(&sync_area->req[me], SYNC_SKIP, 0);
    }
  }
  long first = sync_round + 1;
  sync_round += SYNC_ROUNDS;
  if (me == 0) {
    for (int r = 1; r < n; r++) {
      pshmem_long_wait_until(&sync_area->req[r], SHMEM_CMP_GE, first);
      if (*(volatile long *)&sync_area->req[r] == SYNC_SKIP) continue;
      for (long k = first; k <= sync_round; k++) {
        pshmem_long_wait_until(&sync_area->req[r], SHMEM_CMP_EQ, k);
        uint64_t t = gaspard_clock_ns();
        pshmem_putmem(&sync_area->reply, &t, sizeof t, r);
        pshmem_fence();
        pshmem_long_p(&sync_area->ack, k, r);
      }
    }
    pshmem_quiet();
  } else if (sync_measures) {
    uint64_t best[5] = {0, 0, 0, 0, (uint64_t)at_end}, rtt = UINT64_MAX;
    for (long k = first; k <= sync_round; k++) {
      uint64_t s = gaspard_clock_ns();
      pshmem_long_p(&sync_area->req[me], k, 0);
      pshmem_quiet();
      pshmem_long_wait_until(&sync_area->ack, SHMEM_CMP_EQ, k);
      uint64_t e = gaspard_clock_ns();
      uint64_t t = *(volatile uint64_t *)&sync_area->reply;
      if (e >= s && e - s < rtt) rtt = e - s, best[1] = s, best[2] = t, best[3] = e;
    }
    if (rtt != UINT64_MAX) gaspard_record_event(MODEL_SHMEM, K_CLOCK_SYNC, 2, NULL, 0, best, 5);
  } else {
    /* Its SYNC_SKIP must reach PE 0 before the program goes on. */
    pshmem_quiet();
  }
  /* At the end the area is left to shmem_finalize, which releases the
   * symmetric heap: freeing it here would cost two more synchronizations of
   * every PE (a barrier and shmem_free's own), and nothing needs one: PE 0
   * completed its puts (quiet) and each PE received its last acknowledgement. */
}

""")
        out.write("\n\n".join(cwrap) + "\n")
    print(f"{len(funcs)} OpenSHMEM routines")


main()
