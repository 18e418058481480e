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
 * Both are throttled (GASPARD_THROTTLE): a function, or a call site of
 * malloc, realloc or free, called very often for very short times is no
 * longer recorded on a thread; the manifest's notes say so, and for call
 * sites how many calls (and bytes) were left out.
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

/* Throttling of allocation calls: per thread and per call site (the address
 * malloc, realloc or free is called from) and kind, the rule of functions.
 * Once a site is throttled its calls and bytes are counted, and the notes
 * of the manifest give the counts (gaspard_note_source). */
#define SITE_SLOTS 128 /* call sites per thread; more are recorded unthrottled */
typedef struct {
  void *site;
  unsigned kind;
  int throttled;
  uint64_t calls, ticks;
  /* From the throttling on; written by the owning thread, read by the notes. */
  uint64_t skipped, skipped_bytes;
  const char *name;
} site_stat;
typedef struct site_table {
  struct site_table *next;
  site_stat s[SITE_SLOTS];
} site_table;
static __thread site_table *sites __attribute__((tls_model("initial-exec")));
static site_table *all_sites; /* every thread's table (never freed), for the notes */

/* In a forked child, throttling starts over on the forking thread (the only
 * one left): the child's own trace names the functions and call sites it
 * throttles, and counts only its own calls. */
static NO_INSTRUMENT void throttle_forked(void) {
  if (fn_stats) memset(fn_stats, 0, FN_SLOTS * sizeof *fn_stats);
  for (site_table *t = all_sites; t; t = t->next)
    for (unsigned i = 0; i < SITE_SLOTS; i++) t->s[i].skipped = t->s[i].skipped_bytes = 0;
  if (sites) memset(sites->s, 0, sizeof sites->s);
}

__attribute__((constructor)) static NO_INSTRUMENT void throttle_setup(void) {
  pthread_atfork(NULL, NULL, throttle_forked);
}

int gaspard_throttle(uint64_t *calls, uint64_t *ticks, uint64_t *us);
int gaspard_throttle_limits(uint64_t *calls, uint64_t *us);
void gaspard_note(const char *msg);

/* Whether throttling is on (GASPARD_THROTTLE). */
static inline NO_INSTRUMENT int throttling(void) {
  int state = __atomic_load_n(&thr_state, __ATOMIC_ACQUIRE);
  if (__builtin_expect(state == 0, 0)) {
    uint64_t c = 0, us = 0;
    if (gaspard_throttle_limits(&c, &us)) {
      thr_calls = c;
      thr_us = us;
      state = 1;
    } else {
      state = 2;
    }
    __atomic_store_n(&thr_state, state, __ATOMIC_RELEASE);
  }
  return state == 1;
}

/* The limit in clock ticks, measured when first needed: by then the
 * program has run a while, and the clock's rate is known without a wait. */
static NO_INSTRUMENT uint64_t limit_ticks(void) {
  uint64_t t = __atomic_load_n(&thr_ticks, __ATOMIC_RELAXED);
  if (t) return t;
  uint64_t c = 0, us = 0;
  if (!gaspard_throttle(&c, &t, &us) || !t) t = 1;
  __atomic_store_n(&thr_ticks, t, __ATOMIC_RELAXED);
  return t;
}

static NO_INSTRUMENT fn_stat *stat_of(void *fn) {
  if (!throttling()) return NULL;
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
  if (st && st->fn == fn && !st->throttled) {
    st->calls++;
    st->ticks += ts - fr->start;
    if (st->calls >= thr_calls && st->ticks < limit_ticks() * st->calls) {
      st->throttled = 1;
      char msg[512];
      snprintf(msg, sizeof msg,
               "function %s: no longer recorded on one thread after %llu calls of %.3f us on "
               "average (GASPARD_THROTTLE=%llu,%llu)",
               name_of(fn), (unsigned long long)st->calls,
               (double)st->ticks / (double)st->calls * (double)thr_us / (double)limit_ticks(),
               (unsigned long long)thr_calls, (unsigned long long)thr_us);
      gaspard_note(msg);
    }
  }
  leave();
}

static const char *const kind_name[] = {"", "GASP_C_FUNC", "GASP_C_MALLOC", "GASP_C_REALLOC",
                                        "GASP_C_FREE"};

/* A call site's name: its function and offset, else its module and offset. */
static NO_INSTRUMENT const char *site_name(void *site) {
  Dl_info info;
  char buf[300];
  if (dladdr(site, &info) && info.dli_sname && info.dli_saddr) {
    snprintf(buf, sizeof buf, "%s+0x%lx", info.dli_sname,
             (unsigned long)((uintptr_t)site - (uintptr_t)info.dli_saddr));
  } else if (info.dli_fname) {
    const char *base = strrchr(info.dli_fname, '/');
    snprintf(buf, sizeof buf, "%s+0x%lx", base ? base + 1 : info.dli_fname,
             (unsigned long)((uintptr_t)site - (uintptr_t)info.dli_fbase));
  } else {
    snprintf(buf, sizeof buf, "%p", site);
  }
  const char *name = strdup(buf);
  return name ? name : "?";
}

static size_t site_notes(char *out, size_t cap);
void gaspard_note_source(size_t (*source)(char *out, size_t cap));

/* This thread's statistics of the call site `site` for `kind`, or NULL
 * (throttling off, or no room). */
static inline NO_INSTRUMENT site_stat *site_of(void *site, unsigned kind) {
  if (!throttling()) return NULL;
  site_table *t = sites;
  if (__builtin_expect(t == NULL, 0)) {
    t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->next = __atomic_load_n(&all_sites, __ATOMIC_ACQUIRE);
    while (!__atomic_compare_exchange_n(&all_sites, &t->next, t, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_ACQUIRE)) {}
    sites = t;
  }
  unsigned h = (unsigned)((((uintptr_t)site >> 2) ^ kind) % SITE_SLOTS);
  for (unsigned probe = 0; probe < 8; probe++) {
    site_stat *st = &t->s[(h + probe) % SITE_SLOTS];
    if (st->site == site && st->kind == kind) return st;
    if (!st->site) {
      st->kind = kind;
      st->site = site;
      return st;
    }
  }
  return NULL;
}

/* A recorded call of `ticks`: throttles the site when it is due. */
static NO_INSTRUMENT void site_done(site_stat *st, uint64_t ticks) {
  st->calls++;
  st->ticks += ticks;
  if (st->calls < thr_calls || st->ticks >= limit_ticks() * st->calls) return;
  st->name = site_name(st->site);
  __atomic_store_n(&st->throttled, 1, __ATOMIC_RELEASE);
  static int registered;
  if (!__atomic_exchange_n(&registered, 1, __ATOMIC_ACQ_REL)) gaspard_note_source(site_notes);
  char msg[512];
  snprintf(msg, sizeof msg,
           "%s at %s: no longer recorded on one thread after %llu calls of %.3f us on average "
           "(GASPARD_THROTTLE=%llu,%llu)",
           kind_name[st->kind], st->name, (unsigned long long)st->calls,
           (double)st->ticks / (double)st->calls * (double)thr_us / (double)limit_ticks(),
           (unsigned long long)thr_calls, (unsigned long long)thr_us);
  gaspard_note(msg);
}

/* A call left out: counted (relaxed stores: only this thread writes). */
static inline NO_INSTRUMENT void site_skipped(site_stat *st, uint64_t bytes) {
  __atomic_store_n(&st->skipped, st->skipped + 1, __ATOMIC_RELAXED);
  if (bytes) __atomic_store_n(&st->skipped_bytes, st->skipped_bytes + bytes, __ATOMIC_RELAXED);
}

/* The notes: per throttled call site and kind, over all threads, the calls
 * (and bytes) left out. */
static NO_INSTRUMENT size_t site_notes(char *out, size_t cap) {
  enum { MAXN = 256 };
  struct {
    void *site;
    unsigned kind, threads;
    const char *name;
    uint64_t calls, bytes;
  } sum[MAXN];
  unsigned n = 0;
  for (site_table *t = __atomic_load_n(&all_sites, __ATOMIC_ACQUIRE); t; t = t->next)
    for (unsigned i = 0; i < SITE_SLOTS; i++) {
      site_stat *st = &t->s[i];
      if (!__atomic_load_n(&st->throttled, __ATOMIC_ACQUIRE) || !st->name) continue;
      unsigned k = 0;
      while (k < n && !(sum[k].site == st->site && sum[k].kind == st->kind)) k++;
      if (k == n) {
        if (n == MAXN) continue;
        sum[k].site = st->site, sum[k].kind = st->kind, sum[k].name = st->name;
        sum[k].threads = 0, sum[k].calls = 0, sum[k].bytes = 0;
        n++;
      }
      sum[k].threads++;
      sum[k].calls += __atomic_load_n(&st->skipped, __ATOMIC_RELAXED);
      sum[k].bytes += __atomic_load_n(&st->skipped_bytes, __ATOMIC_RELAXED);
    }
  size_t used = 0;
  for (unsigned k = 0; k < n && used < cap; k++) {
    char bytes[64] = "";
    if (sum[k].kind != K_C_FREE)
      snprintf(bytes, sizeof bytes, " for %llu bytes", (unsigned long long)sum[k].bytes);
    int w = snprintf(out + used, cap - used,
                     "%s at %s: %llu calls%s not recorded (throttled on %u thread%s, "
                     "GASPARD_THROTTLE=%llu,%llu)\n",
                     kind_name[sum[k].kind], sum[k].name, (unsigned long long)sum[k].calls, bytes,
                     sum[k].threads, sum[k].threads == 1 ? "" : "s",
                     (unsigned long long)thr_calls, (unsigned long long)thr_us);
    if (w < 0 || (size_t)w >= cap - used) break;
    used += (size_t)w;
  }
  return used;
}

/* One allocation call, recorded as START and END unless its site is throttled. */
#define ALLOC_CALL(KIND, SITE, BYTES, NS, NE, CALL)                                               \
  gaspard_ctx *c = enter();                                                                       \
  if (!c) {                                                                                       \
    CALL;                                                                                         \
  } else {                                                                                        \
    site_stat *st = site_of(SITE, KIND);                                                          \
    if (st && st->throttled) {                                                                    \
      site_skipped(st, BYTES);                                                                    \
      CALL;                                                                                       \
    } else {                                                                                      \
      uint64_t t0 = gaspard_now();                                                                \
      gaspard_emit(c, t0, KIND, GASP_START, 0, NULL, 0, 0, 0, NULL, a, NS);                       \
      CALL;                                                                                       \
      uint64_t t1 = gaspard_now();                                                                \
      SET_RESULT;                                                                                 \
      if (gaspard_reserve(c)) gaspard_emit(c, t1, KIND, GASP_END, 0, NULL, 0, 0, 0, NULL, a, NE); \
      if (st) site_done(st, t1 - t0);                                                             \
    }                                                                                             \
    leave();                                                                                      \
  }

EXPORT NO_INSTRUMENT void *__wrap_malloc(size_t nbytes) {
  void *r;
  uint64_t a[2] = {nbytes, 0};
#define SET_RESULT a[1] = (uint64_t)(uintptr_t)r
  ALLOC_CALL(K_C_MALLOC, __builtin_return_address(0), nbytes, 1, 2, r = malloc(nbytes))
#undef SET_RESULT
  return r;
}

EXPORT NO_INSTRUMENT void *__wrap_realloc(void *ptr, size_t size) {
  void *r;
  uint64_t a[3] = {(uint64_t)(uintptr_t)ptr, size, 0};
#define SET_RESULT a[2] = (uint64_t)(uintptr_t)r
  ALLOC_CALL(K_C_REALLOC, __builtin_return_address(0), size, 2, 3, r = realloc(ptr, size))
#undef SET_RESULT
  return r;
}

EXPORT NO_INSTRUMENT void __wrap_free(void *ptr) {
  uint64_t a[1] = {(uint64_t)(uintptr_t)ptr};
#define SET_RESULT (void)0
  ALLOC_CALL(K_C_FREE, __builtin_return_address(0), 0, 1, 1, free(ptr))
#undef SET_RESULT
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
