/* The C events of GASP Section 4, for programs built with `gaspard cc --profile`:
 *
 * - GASP_C_FUNC from GCC/Clang's -finstrument-functions hooks. The function's
 *   name comes from dladdr once per address (the wrapper links with -rdynamic
 *   so that the program's own functions have names) and is cached; a static
 *   function, which has no dynamic symbol, is named module+offset.
 * - GASP_C_MALLOC, GASP_C_REALLOC, GASP_C_FREE from the program's calls,
 *   redirected here by the linker (-Wl,--wrap=malloc and so on); this
 *   library's own calls are not redirected.
 *
 * Events go to the calling thread's UPC-model context, as the spec's Section
 * 4 places C events under UPC's measurement control. A thread-local guard
 * keeps the tool from measuring itself. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gasp_upc.h"
#include "gaspard_record.h"

#define EXPORT __attribute__((visibility("default")))
#define NO_INSTRUMENT __attribute__((no_instrument_function))

/* Canonical kinds (crates/format/src/kinds.rs). */
enum { K_C_FUNC = 1, K_C_MALLOC, K_C_REALLOC, K_C_FREE };

gasp_context_t gaspard_pupc_context(void);

static __thread gaspard_ctx *here __attribute__((tls_model("initial-exec")));
static __thread int busy __attribute__((tls_model("initial-exec")));

/* This thread's context while measuring, else NULL. Sets the guard. */
static inline NO_INSTRUMENT gaspard_ctx *enter(void) {
  if (busy) return NULL;
  busy = 1;
  gaspard_ctx *c = here;
  if (__builtin_expect(c == NULL, 0)) here = c = (gaspard_ctx *)gaspard_pupc_context();
  if (c && (!c->on || !gaspard_reserve(c))) c = NULL;
  if (!c) busy = 0;
  return c;
}

static inline NO_INSTRUMENT void leave(void) { busy = 0; }

/* Function names by address: a direct-mapped cache, filled from dladdr. */
#define NAME_SLOTS 4096
static struct {
  void *fn;
  const char *name;
} names[NAME_SLOTS];

static NO_INSTRUMENT const char *name_of(void *fn) {
  unsigned i = (unsigned)(((uintptr_t)fn >> 4) % NAME_SLOTS);
  void *seen = __atomic_load_n(&names[i].fn, __ATOMIC_ACQUIRE);
  const char *name = __atomic_load_n(&names[i].name, __ATOMIC_ACQUIRE);
  if (seen == fn && name) return name;
  Dl_info info;
  int found = dladdr(fn, &info);
  if (found && info.dli_sname && info.dli_saddr == fn) {
    name = info.dli_sname; /* in the module's string table: lives as long as it */
  } else {
    /* A static function: its module and offset, the same from run to run. */
    char buf[300];
    if (found && info.dli_fname) {
      const char *base = strrchr(info.dli_fname, '/');
      snprintf(buf, sizeof buf, "%s+0x%lx", base ? base + 1 : info.dli_fname,
               (unsigned long)((uintptr_t)fn - (uintptr_t)info.dli_fbase));
    } else {
      snprintf(buf, sizeof buf, "%p", fn);
    }
    name = strdup(buf); /* kept for the life of the program */
    if (!name) return "?";
  }
  __atomic_store_n(&names[i].name, name, __ATOMIC_RELEASE);
  __atomic_store_n(&names[i].fn, fn, __ATOMIC_RELEASE);
  return name;
}

/* Throttling (GASPARD_THROTTLE, as TAU does): per thread, a function called
 * more than thr_calls times for less than thr_ticks on average is no longer
 * recorded; the manifest notes it. Each thread keeps its functions' counts
 * in a small open-addressing table and, for each active call, whether its
 * START was recorded, so that END follows the same decision. */
#define FN_SLOTS 2048 /* functions per thread; more are recorded unthrottled */
#define FN_DEPTH 1024 /* nesting tracked per thread; deeper calls are recorded */
typedef struct {
  void *fn;
  uint64_t calls;
  uint64_t ticks;
  int throttled;
} fn_stat;
typedef struct {
  uint64_t start; /* UINT64_MAX: not recorded */
  fn_stat *st;
} fn_frame;
static __thread fn_stat *fn_stats __attribute__((tls_model("initial-exec")));
static __thread fn_frame *fn_stack __attribute__((tls_model("initial-exec")));
static __thread unsigned fn_depth __attribute__((tls_model("initial-exec")));
static int thr_state; /* 0 not read yet, 1 on, 2 off */
static uint64_t thr_calls, thr_ticks, thr_us;

/* In a forked child, throttling starts over on the forking thread (the only
 * one left): the child's own trace names the functions it throttles. */
static NO_INSTRUMENT void throttle_forked(void) {
  if (fn_stats) memset(fn_stats, 0, FN_SLOTS * sizeof *fn_stats);
}

__attribute__((constructor)) static NO_INSTRUMENT void throttle_setup(void) {
  pthread_atfork(NULL, NULL, throttle_forked);
}

int gaspard_throttle(uint64_t *calls, uint64_t *ticks, uint64_t *us);
void gaspard_note(const char *msg);

static NO_INSTRUMENT fn_stat *stat_of(void *fn) {
  int state = __atomic_load_n(&thr_state, __ATOMIC_ACQUIRE);
  if (state == 0) {
    uint64_t c = 0, t = 0, us = 0;
    if (gaspard_throttle(&c, &t, &us)) {
      thr_calls = c;
      thr_ticks = t;
      thr_us = us;
      state = 1;
    } else {
      state = 2;
    }
    __atomic_store_n(&thr_state, state, __ATOMIC_RELEASE);
  }
  if (state != 1) return NULL;
  if (!fn_stats) {
    fn_stats = calloc(FN_SLOTS, sizeof *fn_stats);
    fn_stack = calloc(FN_DEPTH, sizeof *fn_stack);
    if (!fn_stats || !fn_stack) return NULL;
  }
  unsigned h = (unsigned)(((uintptr_t)fn >> 4) % FN_SLOTS);
  for (unsigned probe = 0; probe < 16; probe++) {
    fn_stat *st = &fn_stats[(h + probe) % FN_SLOTS];
    if (st->fn == fn) return st;
    if (!st->fn) {
      st->fn = fn;
      return st;
    }
  }
  return NULL;
}

EXPORT NO_INSTRUMENT void __cyg_profile_func_enter(void *fn, void *call_site) {
  (void)call_site;
  if (busy) return;
  fn_stat *st = stat_of(fn);
  fn_frame *fr = fn_stack && fn_depth < FN_DEPTH ? &fn_stack[fn_depth] : NULL;
  if (fn_stack) fn_depth++;
  gaspard_ctx *c = st && st->throttled ? NULL : enter();
  if (fr) {
    fr->start = UINT64_MAX; /* until recorded */
    fr->st = st;
  }
  if (!c) return;
  uint64_t ts = gaspard_now();
  uint64_t a[1] = {gaspard_define_string(c, name_of(fn))};
  gaspard_emit(c, ts, K_C_FUNC, GASP_START, 0, NULL, 0, 0, 0, NULL, a, 1);
  if (fr) fr->start = ts;
  leave();
}

EXPORT NO_INSTRUMENT void __cyg_profile_func_exit(void *fn, void *call_site) {
  (void)call_site;
  if (busy) return;
  fn_frame *fr = NULL;
  if (fn_stack && fn_depth > 0) {
    fn_depth--;
    if (fn_depth < FN_DEPTH) fr = &fn_stack[fn_depth];
  }
  /* Its START was not recorded (throttled, or measurement off): no END. */
  if (fr && fr->start == UINT64_MAX) return;
  gaspard_ctx *c = enter();
  if (!c) return;
  uint64_t ts = gaspard_now();
  uint64_t a[1] = {gaspard_define_string(c, name_of(fn))};
  gaspard_emit(c, ts, K_C_FUNC, GASP_END, 0, NULL, 0, 0, 0, NULL, a, 1);
  fn_stat *st = fr ? fr->st : NULL;
  if (st && st->fn == fn) {
    st->calls++;
    st->ticks += ts - fr->start;
    if (st->calls >= thr_calls && st->ticks < thr_ticks * st->calls) {
      st->throttled = 1;
      char msg[512];
      snprintf(msg, sizeof msg,
               "function %s: no longer recorded on one thread after %llu calls of %.3f us on "
               "average (GASPARD_THROTTLE=%llu,%llu)",
               name_of(fn), (unsigned long long)st->calls,
               (double)st->ticks / (double)st->calls * (double)thr_us / (double)thr_ticks,
               (unsigned long long)thr_calls, (unsigned long long)thr_us);
      gaspard_note(msg);
    }
  }
  leave();
}

static inline NO_INSTRUMENT void mem_event(gaspard_ctx *c, unsigned kind, unsigned phase,
                                           const uint64_t *a, unsigned n) {
  gaspard_emit(c, gaspard_now(), kind, phase, 0, NULL, 0, 0, 0, NULL, a, n);
}

EXPORT NO_INSTRUMENT void *__wrap_malloc(size_t nbytes) {
  gaspard_ctx *c = enter();
  if (!c) return malloc(nbytes);
  uint64_t a[2] = {nbytes, 0};
  mem_event(c, K_C_MALLOC, GASP_START, a, 1);
  void *r = malloc(nbytes);
  a[1] = (uint64_t)(uintptr_t)r;
  if (gaspard_reserve(c)) mem_event(c, K_C_MALLOC, GASP_END, a, 2);
  leave();
  return r;
}

EXPORT NO_INSTRUMENT void *__wrap_realloc(void *ptr, size_t size) {
  gaspard_ctx *c = enter();
  if (!c) return realloc(ptr, size);
  uint64_t a[3] = {(uint64_t)(uintptr_t)ptr, size, 0};
  mem_event(c, K_C_REALLOC, GASP_START, a, 2);
  void *r = realloc(ptr, size);
  a[2] = (uint64_t)(uintptr_t)r;
  if (gaspard_reserve(c)) mem_event(c, K_C_REALLOC, GASP_END, a, 3);
  leave();
  return r;
}

EXPORT NO_INSTRUMENT void __wrap_free(void *ptr) {
  gaspard_ctx *c = enter();
  if (!c) {
    free(ptr);
    return;
  }
  uint64_t a[1] = {(uint64_t)(uintptr_t)ptr};
  mem_event(c, K_C_FREE, GASP_START, a, 1);
  free(ptr);
  if (gaspard_reserve(c)) mem_event(c, K_C_FREE, GASP_END, a, 1);
  leave();
}

/* For adapters built as separate libraries (libgaspard_shmem.so, ...): records
 * one event with plain integer arguments on the calling thread's context for
 * `model`. Returns 0 when nothing was recorded (measurement off, dropped). */
gaspard_ctx *gaspard_context(unsigned model);
#define ADAPTER_MODELS 8
static __thread gaspard_ctx *adapter_ctx[ADAPTER_MODELS] __attribute__((tls_model("initial-exec")));

EXPORT NO_INSTRUMENT int gaspard_record_event(unsigned model, unsigned kind, unsigned phase,
                                              const char *file, int line,
                                              const uint64_t *args, unsigned n) {
  if (model >= ADAPTER_MODELS || n > 16) return 0;
  gaspard_ctx *c = adapter_ctx[model];
  if (__builtin_expect(c == NULL, 0)) adapter_ctx[model] = c = gaspard_context(model);
  if (!c || !c->on || !gaspard_reserve(c)) return 0;
  gaspard_emit(c, gaspard_now(), kind, phase, 0, file, line, 0, 0, NULL, args, n);
  return 1;
}
