/* gasp_all_events.c: plays the runtime side of GASP 1.4 against gaspard.
 *
 * Four pthreads act as four UPC threads. Each calls gasp_init and then sends
 * every event of Tables 1-10 of the specification (C and UPC), with START and
 * END (or ATOMIC where the table says so), with arguments that depend on the
 * thread, plus user events, a measurement-off window and unknown tags.
 *
 * Every event is described twice, side by side: once as the runtime sends it
 * and once as the JSON a correct tool must record for it (in the shape of
 * `gaspard dump DIR --json`). The program writes those expectations to the
 * file named on its command line; the Rust test compares them with the dump.
 * Events sent while measurement is off are not expected. Event tags come from
 * whichever gasp_upc.h is first on the include path, so the same source also
 * checks a tool built against a renumbered header.
 *
 * Usage: gasp_all_events MODE EXPECTED.json
 *   all       four UPC threads, every event
 *   twomodel  one thread with a UPC and a CAF context
 *   abort     as all, then the main thread calls abort()
 *   segv      as all, then the main thread dereferences a null pointer
 *
 * Prints nothing on success. Wrong return values of the tool are printed
 * after the expectations are written; the program then exits with status 1,
 * except in the crash modes, which test crash recording and crash anyway. */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gasp.h"
#include "gasp_upc.h"

#define NTHREADS 4
#define PTS_BYTES 16
#define PTS_POOL 64

/* ---- growing text buffers ------------------------------------------------ */

struct buf {
  char *s;
  size_t len, cap;
};

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "gasp_all_events: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

static void bprintf(struct buf *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) die("vsnprintf failed");
    if (b->s && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    b->cap = (b->cap + (size_t)n + 1) * 2;
    b->s = realloc(b->s, b->cap);
    if (!b->s) die("out of memory");
  }
}

/* Wrong return values of the tool: reported all together at the end, after
 * the expectations are written, so that one does not hide the others. */
static pthread_mutex_t failures_lock = PTHREAD_MUTEX_INITIALIZER;
static struct buf failures;

static void fail(const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&failures_lock);
  bprintf(&failures, "gasp_all_events: %s\n", msg);
  pthread_mutex_unlock(&failures_lock);
}

/* A JSON string, or null. */
static void bjson_str(struct buf *b, const char *s) {
  if (!s) {
    bprintf(b, "null");
    return;
  }
  bprintf(b, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      bprintf(b, "\\%c", c);
    else if (c < 0x20)
      bprintf(b, "\\u%04x", c);
    else
      bprintf(b, "%c", c);
  }
  bprintf(b, "\"");
}

/* ---- one runtime context: what it sends and what must be recorded -------- */

struct run {
  gasp_context_t ctx;
  int t;              /* UPC thread number: arguments depend on it */
  const char *model;  /* "UPC" or "CAF", as the dump names models */
  long tid;
  int on;             /* measurement state: off means nothing is expected */
  int use_va;         /* send through gasp_event_notifyVA */
  unsigned nva;       /* events sent through it: every other one from notify_va_one */
  const char *file;   /* source position of the next event */
  int line, col;      /* (the line advances by one per event sent) */
  int controls;       /* gasp_control calls so far */
  int last_control;   /* the last value given to gasp_control */
  unsigned unknown;   /* unknown tags sent while measurement was on */
  int nevents;        /* expected events so far */
  int nargs;          /* arguments of the expected event being written */
  struct buf expect;  /* expected events, comma separated */
  unsigned char pts[PTS_POOL][PTS_BYTES];
  int npts;
};

static void site(struct run *r, const char *file, int line, int col) {
  r->file = file;
  r->line = line;
  r->col = col;
}

/* A 16-byte pointer-to-shared (or lock) in a known pattern, distinct per
 * thread and per call. */
static void *pts(struct run *r) {
  if (r->npts == PTS_POOL) die("PTS pool exhausted");
  unsigned char *p = r->pts[r->npts];
  for (int i = 0; i < PTS_BYTES; i++) p[i] = (unsigned char)(0x40 * r->t + 0x11 * i + r->npts);
  r->npts++;
  return p;
}

/* A local address that is never dereferenced. */
#define LOCAL(r, k) ((void *)(uintptr_t)(0x100000u * ((r)->t + 1) + (k)))
/* A size depending on the thread. */
#define SIZE(r, k) ((size_t)(1000 * (r)->t + (k)))

static void notify_va(gasp_context_t ctx, unsigned tag, gasp_evttype_t ph, const char *file,
                      int line, int col, ...) {
  va_list ap;
  va_start(ap, col);
  gasp_event_notifyVA(ctx, tag, ph, file, line, col, ap);
  va_end(ap);
}

/* The same from a function with one named argument: the list handed to
 * gasp_event_notifyVA starts with arguments still in registers. */
struct va_call {
  gasp_context_t ctx;
  unsigned tag;
  gasp_evttype_t ph;
  const char *file;
  int line, col;
};

static void notify_va_one(const struct va_call *k, ...) {
  va_list ap;
  va_start(ap, k);
  gasp_event_notifyVA(k->ctx, k->tag, k->ph, k->file, k->line, k->col, ap);
  va_end(ap);
}

/* Sends one event at the current position, directly or through the VA entry. */
#define NOTIFY(r, tag, ph, ...)                                                           \
  do {                                                                                    \
    if ((r)->use_va && (r)->nva++ % 2)                                                    \
      notify_va_one(&(struct va_call){(r)->ctx, (tag), (ph), (r)->file, (r)->line, (r)->col}, \
                    ##__VA_ARGS__);                                                       \
    else if ((r)->use_va)                                                                 \
      notify_va((r)->ctx, (tag), (ph), (r)->file, (r)->line, (r)->col, ##__VA_ARGS__);    \
    else                                                                                  \
      gasp_event_notify((r)->ctx, (tag), (ph), (r)->file, (r)->line, (r)->col,            \
                        ##__VA_ARGS__);                                                   \
  } while (0)

static const char *phase_name(gasp_evttype_t ph) {
  switch (ph) {
  case GASP_START: return "START";
  case GASP_END: return "END";
  case GASP_ATOMIC: return "ATOMIC";
  }
  return "?";
}

/* Opens the expected event just sent (at r->line) and returns nonzero, or
 * returns 0 when measurement is off. Moves the position to the next line. */
static int expect_begin(struct run *r, const char *kind, gasp_evttype_t ph) {
  int line = r->line++;
  if (!r->on) return 0;
  struct buf *b = &r->expect;
  bprintf(b, "%s\n    {\"kind\":", r->nevents++ ? "," : "");
  bjson_str(b, kind);
  bprintf(b, ",\"phase\":\"%s\",\"file\":", phase_name(ph));
  bjson_str(b, r->file);
  bprintf(b, ",\"line\":%d,\"col\":%d", line, r->col);
  return 1;
}

/* Argument lists of an expected system event: {"args":{...}}. */
static void args_open(struct run *r) {
  bprintf(&r->expect, ",\"args\":{");
  r->nargs = 0;
}
static void arg_name(struct run *r, const char *name) {
  bprintf(&r->expect, "%s\"%s\":", r->nargs++ ? "," : "", name);
}
static void a_int(struct run *r, const char *name, int v) {
  arg_name(r, name);
  bprintf(&r->expect, "%d", v);
}
static void a_size(struct run *r, const char *name, size_t v) {
  arg_name(r, name);
  bprintf(&r->expect, "%zu", v);
}
static void a_ptr(struct run *r, const char *name, const void *p) {
  arg_name(r, name);
  bprintf(&r->expect, "\"0x%jx\"", (uintmax_t)(uintptr_t)p);
}
static void a_pts(struct run *r, const char *name, const void *p) {
  static const unsigned char zero[PTS_BYTES];
  const unsigned char *bytes = p ? p : zero;
  arg_name(r, name);
  bprintf(&r->expect, "{\"bytes\":\"");
  for (int i = 0; i < PTS_BYTES; i++) bprintf(&r->expect, "%02x", bytes[i]);
  bprintf(&r->expect, "\"}");
}
static void a_str(struct run *r, const char *name, const char *s) {
  arg_name(r, name);
  bjson_str(&r->expect, s);
}
static void a_reduction(struct run *r, const char *name, gasp_upc_reduction_t type) {
  static const char *const names[] = {
      "GASP_UPC_REDUCTION_C", "GASP_UPC_REDUCTION_UC", "GASP_UPC_REDUCTION_S",
      "GASP_UPC_REDUCTION_US", "GASP_UPC_REDUCTION_I", "GASP_UPC_REDUCTION_UI",
      "GASP_UPC_REDUCTION_L", "GASP_UPC_REDUCTION_UL", "GASP_UPC_REDUCTION_F",
      "GASP_UPC_REDUCTION_D", "GASP_UPC_REDUCTION_LD"};
  a_str(r, name, names[type]);
}
static void expect_end(struct run *r) { bprintf(&r->expect, "}}"); }

/* The first event of every context, recorded by gasp_init itself. */
static void expect_init(struct run *r) {
  struct buf *b = &r->expect;
  bprintf(b, "%s\n    {\"kind\":\"GASPARD_INIT\",\"phase\":\"ATOMIC\",\"file\":null,"
             "\"line\":0,\"col\":0,\"args\":{\"model\":\"%s\"}}",
          r->nevents++ ? "," : "", r->model);
}

static void expect_measurement(struct run *r, int on) {
  struct buf *b = &r->expect;
  bprintf(b, "%s\n    {\"kind\":\"GASPARD_MEASUREMENT\",\"phase\":\"ATOMIC\",\"file\":null,"
             "\"line\":0,\"col\":0,\"args\":{\"on\":%d}}",
          r->nevents++ ? "," : "", on);
}

/* ---- measurement control ------------------------------------------------- */

/* gasp_control, checking its return value: nonzero before the first call,
 * then the last value it received (Section 3.3). */
static void control(struct run *r, int on) {
  int got = gasp_control(r->ctx, on);
  if (r->controls++ == 0) {
    if (got == 0)
      fail("thread %d %s: first gasp_control returned 0, expected nonzero", r->t, r->model);
  } else if (got != r->last_control) {
    fail("thread %d %s: gasp_control(ctx, %d) returned %d, expected the last value received, %d",
        r->t, r->model, on, got, r->last_control);
  }
  if (r->on && !on) expect_measurement(r, 0);
  if (!r->on && on) expect_measurement(r, 1);
  r->on = on != 0;
  r->last_control = on;
}

/* ---- Tables 1 and 2: C events ------------------------------------------- */

static void c_func(struct run *r, gasp_evttype_t ph, const char *funcsig) {
  NOTIFY(r, GASP_C_FUNC, ph, funcsig);
  if (!expect_begin(r, "GASP_C_FUNC", ph)) return;
  args_open(r);
  a_str(r, "funcsig", funcsig);
  expect_end(r);
}

static void c_malloc(struct run *r, gasp_evttype_t ph, size_t nbytes, void *returnptr) {
  if (ph == GASP_END)
    NOTIFY(r, GASP_C_MALLOC, ph, nbytes, returnptr);
  else
    NOTIFY(r, GASP_C_MALLOC, ph, nbytes);
  if (!expect_begin(r, "GASP_C_MALLOC", ph)) return;
  args_open(r);
  a_size(r, "nbytes", nbytes);
  if (ph == GASP_END) a_ptr(r, "returnptr", returnptr);
  expect_end(r);
}

static void c_realloc(struct run *r, gasp_evttype_t ph, void *ptr, size_t size, void *returnptr) {
  if (ph == GASP_END)
    NOTIFY(r, GASP_C_REALLOC, ph, ptr, size, returnptr);
  else
    NOTIFY(r, GASP_C_REALLOC, ph, ptr, size);
  if (!expect_begin(r, "GASP_C_REALLOC", ph)) return;
  args_open(r);
  a_ptr(r, "ptr", ptr);
  a_size(r, "size", size);
  if (ph == GASP_END) a_ptr(r, "returnptr", returnptr);
  expect_end(r);
}

static void c_free(struct run *r, gasp_evttype_t ph, void *ptr) {
  NOTIFY(r, GASP_C_FREE, ph, ptr);
  if (!expect_begin(r, "GASP_C_FREE", ph)) return;
  args_open(r);
  a_ptr(r, "ptr", ptr);
  expect_end(r);
}

/* ---- Tables 3-5: exit, synchronization, work sharing --------------------- */

static void exit_event(struct run *r, unsigned tag, const char *kind, gasp_evttype_t ph,
                       int status) {
  NOTIFY(r, tag, ph, status);
  if (!expect_begin(r, kind, ph)) return;
  args_open(r);
  a_int(r, "status", status);
  expect_end(r);
}

static void sync_event(struct run *r, unsigned tag, const char *kind, gasp_evttype_t ph,
                       int named, int expr) {
  NOTIFY(r, tag, ph, named, expr);
  if (!expect_begin(r, kind, ph)) return;
  args_open(r);
  a_int(r, "named", named);
  a_int(r, "expr", expr);
  expect_end(r);
}

static void no_args(struct run *r, unsigned tag, const char *kind, gasp_evttype_t ph) {
  NOTIFY(r, tag, ph);
  if (!expect_begin(r, kind, ph)) return;
  args_open(r);
  expect_end(r);
}

/* ---- Table 6: library events --------------------------------------------- */

static void alloc2(struct run *r, unsigned tag, const char *kind, gasp_evttype_t ph,
                   size_t nblocks, size_t nbytes, void *newshrd_ptr) {
  if (ph == GASP_END)
    NOTIFY(r, tag, ph, nblocks, nbytes, (gasp_upc_PTS_t *)newshrd_ptr);
  else
    NOTIFY(r, tag, ph, nblocks, nbytes);
  if (!expect_begin(r, kind, ph)) return;
  args_open(r);
  a_size(r, "nblocks", nblocks);
  a_size(r, "nbytes", nbytes);
  if (ph == GASP_END) a_pts(r, "newshrd_ptr", newshrd_ptr);
  expect_end(r);
}

static void upc_alloc(struct run *r, gasp_evttype_t ph, size_t nbytes, void *newshrd_ptr) {
  if (ph == GASP_END)
    NOTIFY(r, GASP_UPC_ALLOC, ph, nbytes, (gasp_upc_PTS_t *)newshrd_ptr);
  else
    NOTIFY(r, GASP_UPC_ALLOC, ph, nbytes);
  if (!expect_begin(r, "GASP_UPC_ALLOC", ph)) return;
  args_open(r);
  a_size(r, "nbytes", nbytes);
  if (ph == GASP_END) a_pts(r, "newshrd_ptr", newshrd_ptr);
  expect_end(r);
}

static void upc_free(struct run *r, gasp_evttype_t ph, void *shrd_ptr) {
  NOTIFY(r, GASP_UPC_FREE, ph, (gasp_upc_PTS_t *)shrd_ptr);
  if (!expect_begin(r, "GASP_UPC_FREE", ph)) return;
  args_open(r);
  a_pts(r, "shrd_ptr", shrd_ptr);
  expect_end(r);
}

/* LOCK_ALLOC events: no arguments at START, the lock at END. */
static void lock_alloc(struct run *r, unsigned tag, const char *kind, gasp_evttype_t ph,
                       void *lck) {
  if (ph == GASP_END)
    NOTIFY(r, tag, ph, (gasp_upc_lock_t *)lck);
  else
    NOTIFY(r, tag, ph);
  if (!expect_begin(r, kind, ph)) return;
  args_open(r);
  if (ph == GASP_END) a_pts(r, "lck", lck);
  expect_end(r);
}

static void lock_event(struct run *r, unsigned tag, const char *kind, gasp_evttype_t ph,
                       void *lck) {
  NOTIFY(r, tag, ph, (gasp_upc_lock_t *)lck);
  if (!expect_begin(r, kind, ph)) return;
  args_open(r);
  a_pts(r, "lck", lck);
  expect_end(r);
}

static void lock_attempt(struct run *r, gasp_evttype_t ph, void *lck, int result) {
  if (ph == GASP_END)
    NOTIFY(r, GASP_UPC_LOCK_ATTEMPT, ph, (gasp_upc_lock_t *)lck, result);
  else
    NOTIFY(r, GASP_UPC_LOCK_ATTEMPT, ph, (gasp_upc_lock_t *)lck);
  if (!expect_begin(r, "GASP_UPC_LOCK_ATTEMPT", ph)) return;
  args_open(r);
  a_pts(r, "lck", lck);
  if (ph == GASP_END) a_int(r, "result", result);
  expect_end(r);
}

static void upc_memcpy(struct run *r, gasp_evttype_t ph, void *dst, void *src, size_t n) {
  NOTIFY(r, GASP_UPC_MEMCPY, ph, (gasp_upc_PTS_t *)dst, (gasp_upc_PTS_t *)src, n);
  if (!expect_begin(r, "GASP_UPC_MEMCPY", ph)) return;
  args_open(r);
  a_pts(r, "dst", dst);
  a_pts(r, "src", src);
  a_size(r, "n", n);
  expect_end(r);
}

static void upc_memget(struct run *r, gasp_evttype_t ph, void *dst, void *src, size_t n) {
  NOTIFY(r, GASP_UPC_MEMGET, ph, dst, (gasp_upc_PTS_t *)src, n);
  if (!expect_begin(r, "GASP_UPC_MEMGET", ph)) return;
  args_open(r);
  a_ptr(r, "dst", dst);
  a_pts(r, "src", src);
  a_size(r, "n", n);
  expect_end(r);
}

static void upc_memput(struct run *r, gasp_evttype_t ph, void *dst, void *src, size_t n) {
  NOTIFY(r, GASP_UPC_MEMPUT, ph, (gasp_upc_PTS_t *)dst, src, n);
  if (!expect_begin(r, "GASP_UPC_MEMPUT", ph)) return;
  args_open(r);
  a_pts(r, "dst", dst);
  a_ptr(r, "src", src);
  a_size(r, "n", n);
  expect_end(r);
}

static void upc_memset(struct run *r, gasp_evttype_t ph, void *dst, int c, size_t n) {
  NOTIFY(r, GASP_UPC_MEMSET, ph, (gasp_upc_PTS_t *)dst, c, n);
  if (!expect_begin(r, "GASP_UPC_MEMSET", ph)) return;
  args_open(r);
  a_pts(r, "dst", dst);
  a_int(r, "c", c);
  a_size(r, "n", n);
  expect_end(r);
}

/* ---- Tables 7 and 8: shared accesses ------------------------------------- */

static void upc_get(struct run *r, gasp_evttype_t ph, int is_relaxed, void *dst, void *src,
                    size_t n) {
  NOTIFY(r, GASP_UPC_GET, ph, is_relaxed, dst, (gasp_upc_PTS_t *)src, n);
  if (!expect_begin(r, "GASP_UPC_GET", ph)) return;
  args_open(r);
  a_int(r, "is_relaxed", is_relaxed);
  a_ptr(r, "dst", dst);
  a_pts(r, "src", src);
  a_size(r, "n", n);
  expect_end(r);
}

static void upc_put(struct run *r, gasp_evttype_t ph, int is_relaxed, void *dst, void *src,
                    size_t n) {
  NOTIFY(r, GASP_UPC_PUT, ph, is_relaxed, (gasp_upc_PTS_t *)dst, src, n);
  if (!expect_begin(r, "GASP_UPC_PUT", ph)) return;
  args_open(r);
  a_int(r, "is_relaxed", is_relaxed);
  a_pts(r, "dst", dst);
  a_ptr(r, "src", src);
  a_size(r, "n", n);
  expect_end(r);
}

static void nb_get_init(struct run *r, gasp_evttype_t ph, int is_relaxed, void *dst, void *src,
                        size_t n, gasp_upc_nb_handle_t handle) {
  if (ph == GASP_END)
    NOTIFY(r, GASP_UPC_NB_GET_INIT, ph, is_relaxed, dst, (gasp_upc_PTS_t *)src, n, handle);
  else
    NOTIFY(r, GASP_UPC_NB_GET_INIT, ph, is_relaxed, dst, (gasp_upc_PTS_t *)src, n);
  if (!expect_begin(r, "GASP_UPC_NB_GET_INIT", ph)) return;
  args_open(r);
  a_int(r, "is_relaxed", is_relaxed);
  a_ptr(r, "dst", dst);
  a_pts(r, "src", src);
  a_size(r, "n", n);
  if (ph == GASP_END) a_ptr(r, "handle", handle);
  expect_end(r);
}

static void nb_put_init(struct run *r, gasp_evttype_t ph, int is_relaxed, void *dst, void *src,
                        size_t n, gasp_upc_nb_handle_t handle) {
  if (ph == GASP_END)
    NOTIFY(r, GASP_UPC_NB_PUT_INIT, ph, is_relaxed, (gasp_upc_PTS_t *)dst, src, n, handle);
  else
    NOTIFY(r, GASP_UPC_NB_PUT_INIT, ph, is_relaxed, (gasp_upc_PTS_t *)dst, src, n);
  if (!expect_begin(r, "GASP_UPC_NB_PUT_INIT", ph)) return;
  args_open(r);
  a_int(r, "is_relaxed", is_relaxed);
  a_pts(r, "dst", dst);
  a_ptr(r, "src", src);
  a_size(r, "n", n);
  if (ph == GASP_END) a_ptr(r, "handle", handle);
  expect_end(r);
}

/* NB_GET_DATA, NB_PUT_DATA and NB_SYNC. */
static void nb_handle(struct run *r, unsigned tag, const char *kind, gasp_evttype_t ph,
                      gasp_upc_nb_handle_t handle) {
  NOTIFY(r, tag, ph, handle);
  if (!expect_begin(r, kind, ph)) return;
  args_open(r);
  a_ptr(r, "handle", handle);
  expect_end(r);
}

/* ---- Table 9: cache events (atomic) -------------------------------------- */

static void cache_miss(struct run *r, size_t n, size_t n_lines) {
  NOTIFY(r, GASP_UPC_CACHE_MISS, GASP_ATOMIC, n, n_lines);
  if (!expect_begin(r, "GASP_UPC_CACHE_MISS", GASP_ATOMIC)) return;
  args_open(r);
  a_size(r, "n", n);
  a_size(r, "n_lines", n_lines);
  expect_end(r);
}

static void cache_hit(struct run *r, size_t n) {
  NOTIFY(r, GASP_UPC_CACHE_HIT, GASP_ATOMIC, n);
  if (!expect_begin(r, "GASP_UPC_CACHE_HIT", GASP_ATOMIC)) return;
  args_open(r);
  a_size(r, "n", n);
  expect_end(r);
}

static void cache_invalidate(struct run *r, size_t n_dirty) {
  NOTIFY(r, GASP_UPC_CACHE_INVALIDATE, GASP_ATOMIC, n_dirty);
  if (!expect_begin(r, "GASP_UPC_CACHE_INVALIDATE", GASP_ATOMIC)) return;
  args_open(r);
  a_size(r, "n_dirty", n_dirty);
  expect_end(r);
}

/* ---- Table 10: collectives ----------------------------------------------- */

/* BROADCAST, SCATTER, GATHER, GATHER_ALL, EXCHANGE. */
static void collective(struct run *r, unsigned tag, const char *kind, gasp_evttype_t ph,
                       void *dst, void *src, size_t nbytes, int upc_flags) {
  NOTIFY(r, tag, ph, (gasp_upc_PTS_t *)dst, (gasp_upc_PTS_t *)src, nbytes, upc_flags);
  if (!expect_begin(r, kind, ph)) return;
  args_open(r);
  a_pts(r, "dst", dst);
  a_pts(r, "src", src);
  a_size(r, "nbytes", nbytes);
  a_int(r, "upc_flags", upc_flags);
  expect_end(r);
}

static void permute(struct run *r, gasp_evttype_t ph, void *dst, void *src, void *perm,
                    size_t nbytes, int upc_flags) {
  NOTIFY(r, GASP_UPC_ALL_PERMUTE, ph, (gasp_upc_PTS_t *)dst, (gasp_upc_PTS_t *)src,
         (gasp_upc_PTS_t *)perm, nbytes, upc_flags);
  if (!expect_begin(r, "GASP_UPC_ALL_PERMUTE", ph)) return;
  args_open(r);
  a_pts(r, "dst", dst);
  a_pts(r, "src", src);
  a_pts(r, "perm", perm);
  a_size(r, "nbytes", nbytes);
  a_int(r, "upc_flags", upc_flags);
  expect_end(r);
}

/* ALL_REDUCE and ALL_PREFIX_REDUCE. */
static void reduce(struct run *r, unsigned tag, const char *kind, gasp_evttype_t ph, void *dst,
                   void *src, int upc_op, size_t nelems, size_t blk_size, void *func,
                   int upc_flags, gasp_upc_reduction_t type) {
  NOTIFY(r, tag, ph, (gasp_upc_PTS_t *)dst, (gasp_upc_PTS_t *)src, upc_op, nelems, blk_size, func,
         upc_flags, type);
  if (!expect_begin(r, kind, ph)) return;
  args_open(r);
  a_pts(r, "dst", dst);
  a_pts(r, "src", src);
  a_int(r, "upc_op", upc_op);
  a_size(r, "nelems", nelems);
  a_size(r, "blk_size", blk_size);
  a_ptr(r, "func", func);
  a_int(r, "upc_flags", upc_flags);
  a_reduction(r, "type", type);
  expect_end(r);
}

/* ---- user events (Section 5.3) ------------------------------------------- */

static void user_name(struct run *r, const char *name) {
  bprintf(&r->expect, ",\"name\":");
  bjson_str(&r->expect, name);
}

/* A "phase" event: format "%d %s %f %p". */
static const char *const PHASE_FORMAT = "%d %s %f %p";
static void user_phase(struct run *r, unsigned id, gasp_evttype_t ph, int i, const char *s,
                       double d, void *p) {
  NOTIFY(r, id, ph, i, s, d, p);
  if (!expect_begin(r, "GASPARD_USER", ph)) return;
  user_name(r, "phase");
  struct buf *b = &r->expect;
  bprintf(b, ",\"values\":[%d,", i);
  bjson_str(b, s);
  bprintf(b, ",%.17g,\"0x%jx\"],\"text\":", d, (uintmax_t)(uintptr_t)p);
  char text[256];
  snprintf(text, sizeof text, PHASE_FORMAT, i, s, d, p);
  bjson_str(b, text);
  bprintf(b, "}");
}

/* A "wide" event: more doubles than there are vector registers for
 * arguments, so that some come in memory among the integers. */
static const char *const WIDE_FORMAT = "%d %f %f %f %f %f %f %f %f %f %f %ld %zu";
static void user_wide(struct run *r, unsigned id, gasp_evttype_t ph, int i, double d, long l,
                      size_t z) {
  double x[10];
  for (int k = 0; k < 10; k++) x[k] = (d + 0.0625) * (k + 1); /* never integral */
  NOTIFY(r, id, ph, i, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], l, z);
  if (!expect_begin(r, "GASPARD_USER", ph)) return;
  user_name(r, "wide");
  struct buf *b = &r->expect;
  bprintf(b, ",\"values\":[%d", i);
  for (int k = 0; k < 10; k++) bprintf(b, ",%.17g", x[k]);
  bprintf(b, ",%ld,%zu],\"text\":", l, z);
  char text[512];
  snprintf(text, sizeof text, WIDE_FORMAT, i, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7],
           x[8], x[9], l, z);
  bjson_str(b, text);
  bprintf(b, "}");
}

/* A "marker" event, created without a format: no values. The argument sent
 * along must be ignored. */
static void user_marker(struct run *r, unsigned id, gasp_evttype_t ph) {
  NOTIFY(r, id, ph, 12345);
  if (!expect_begin(r, "GASPARD_USER", ph)) return;
  user_name(r, "marker");
  bprintf(&r->expect, ",\"values\":[],\"text\":\"\"}");
}

/* An event whose format the tool must not read ("%n"). */
static void user_unreadable(struct run *r, unsigned id, gasp_evttype_t ph) {
  int written = 0;
  NOTIFY(r, id, ph, &written);
  if (written != 0) fail("thread %d: the tool wrote through a %%n argument", r->t);
  if (!expect_begin(r, "GASPARD_USER", ph)) return;
  user_name(r, "unreadable");
  bprintf(&r->expect, ",\"args_unread\":true}");
}

static void unknown_tag(struct run *r, unsigned tag) {
  NOTIFY(r, tag, GASP_ATOMIC, 1, 2, 3);
  if (r->on) r->unknown++;
  r->line++;
}

/* ---- the scenarios -------------------------------------------------------- */

struct shared {
  int *argc;
  char ***argv;
  unsigned phase_id[NTHREADS], marker_id[NTHREADS], unreadable_id[NTHREADS];
};
static struct shared shared;

static unsigned create_event(struct run *r, const char *name, const char *desc) {
  unsigned id = gasp_create_event(r->ctx, name, desc);
  if (id < GASP_UPC_USEREVT_START || id > GASP_UPC_USEREVT_END)
    fail("gasp_create_event(\"%s\") returned %u, outside %u..%u", name, id,
        (unsigned)GASP_UPC_USEREVT_START, (unsigned)GASP_UPC_USEREVT_END);
  unsigned again = gasp_create_event(r->ctx, name, desc);
  if (again != id)
    fail("gasp_create_event(\"%s\") returned %u, then %u for the same name", name, id, again);
  return id;
}

static void init_run(struct run *r, int t, gasp_model_t model, const char *model_name) {
  memset(r, 0, sizeof *r);
  r->t = t;
  r->model = model_name;
  r->tid = (long)syscall(SYS_gettid);
  r->ctx = gasp_init(model, shared.argc, shared.argv);
  if (!r->ctx) die("thread %d: gasp_init returned NULL", t);
  r->on = 1;
  expect_init(r);
}

static const char *const FUNCSIG[NTHREADS] = {
    "void upc_thread_0(int)", "void upc_thread_1(int)", "void upc_thread_2(int)",
    "void upc_thread_3(int)"};
static const char *const FILE_MAIN = "gasp_all_events.upc";
static const char *const FILE_LIB = "lib/upc_collectives.upc";

/* Everything one UPC thread sends. */
static void upc_thread_events(struct run *r) {
  const int t = r->t;

  site(r, FILE_MAIN, 100 * (t + 1), 1);
  c_func(r, GASP_START, FUNCSIG[t]);

  /* Tables 4 and 5: synchronization, named and anonymous, and work sharing. */
  site(r, FILE_MAIN, 1000 * (t + 1), 5 + t);
  sync_event(r, GASP_UPC_NOTIFY, "GASP_UPC_NOTIFY", GASP_START, 1, 10 + t);
  sync_event(r, GASP_UPC_NOTIFY, "GASP_UPC_NOTIFY", GASP_END, 1, 10 + t);
  sync_event(r, GASP_UPC_WAIT, "GASP_UPC_WAIT", GASP_START, 1, 10 + t);
  sync_event(r, GASP_UPC_WAIT, "GASP_UPC_WAIT", GASP_END, 1, 10 + t);
  sync_event(r, GASP_UPC_NOTIFY, "GASP_UPC_NOTIFY", GASP_START, 0, 0);
  sync_event(r, GASP_UPC_NOTIFY, "GASP_UPC_NOTIFY", GASP_END, 0, 0);
  sync_event(r, GASP_UPC_WAIT, "GASP_UPC_WAIT", GASP_START, 0, 0);
  sync_event(r, GASP_UPC_WAIT, "GASP_UPC_WAIT", GASP_END, 0, 0);
  sync_event(r, GASP_UPC_BARRIER, "GASP_UPC_BARRIER", GASP_START, 0, 0);
  sync_event(r, GASP_UPC_BARRIER, "GASP_UPC_BARRIER", GASP_END, 0, 0);
  sync_event(r, GASP_UPC_BARRIER, "GASP_UPC_BARRIER", GASP_START, 1, -100 - t);
  sync_event(r, GASP_UPC_BARRIER, "GASP_UPC_BARRIER", GASP_END, 1, -100 - t);
  sync_event(r, GASP_UPC_BARRIER, "GASP_UPC_BARRIER", GASP_START, 1, INT_MIN + t);
  sync_event(r, GASP_UPC_BARRIER, "GASP_UPC_BARRIER", GASP_END, 1, INT_MIN + t);
  sync_event(r, GASP_UPC_BARRIER, "GASP_UPC_BARRIER", GASP_START, 1, INT_MAX - t);
  sync_event(r, GASP_UPC_BARRIER, "GASP_UPC_BARRIER", GASP_END, 1, INT_MAX - t);
  no_args(r, GASP_UPC_FENCE, "GASP_UPC_FENCE", GASP_START);
  no_args(r, GASP_UPC_FENCE, "GASP_UPC_FENCE", GASP_END);
  no_args(r, GASP_UPC_FORALL, "GASP_UPC_FORALL", GASP_START);
  no_args(r, GASP_UPC_FORALL, "GASP_UPC_FORALL", GASP_END);
  /* A runtime without source information: no file, line 0, column 0. */
  site(r, NULL, 0, 0);
  no_args(r, GASP_UPC_FENCE, "GASP_UPC_FENCE", GASP_START);
  site(r, NULL, 0, 0);
  no_args(r, GASP_UPC_FENCE, "GASP_UPC_FENCE", GASP_END);

  /* Table 6: allocation, locks, bulk copies. */
  site(r, FILE_MAIN, 2000 * (t + 1), 9);
  void *shared_block = pts(r);
  alloc2(r, GASP_UPC_GLOBAL_ALLOC, "GASP_UPC_GLOBAL_ALLOC", GASP_START, t + 1, SIZE(r, 64), NULL);
  alloc2(r, GASP_UPC_GLOBAL_ALLOC, "GASP_UPC_GLOBAL_ALLOC", GASP_END, t + 1, SIZE(r, 64),
         shared_block);
  void *all_block = pts(r);
  alloc2(r, GASP_UPC_ALL_ALLOC, "GASP_UPC_ALL_ALLOC", GASP_START, NTHREADS, SIZE(r, 128), NULL);
  alloc2(r, GASP_UPC_ALL_ALLOC, "GASP_UPC_ALL_ALLOC", GASP_END, NTHREADS, SIZE(r, 128), all_block);
  void *local_block = pts(r);
  upc_alloc(r, GASP_START, SIZE(r, 256), NULL);
  upc_alloc(r, GASP_END, SIZE(r, 256), local_block);
  upc_free(r, GASP_START, local_block);
  upc_free(r, GASP_END, local_block);
  upc_free(r, GASP_START, NULL); /* upc_free(NULL) is valid */
  upc_free(r, GASP_END, NULL);

  void *lock_a = pts(r), *lock_b = pts(r);
  lock_alloc(r, GASP_UPC_GLOBAL_LOCK_ALLOC, "GASP_UPC_GLOBAL_LOCK_ALLOC", GASP_START, NULL);
  lock_alloc(r, GASP_UPC_GLOBAL_LOCK_ALLOC, "GASP_UPC_GLOBAL_LOCK_ALLOC", GASP_END, lock_a);
  lock_alloc(r, GASP_UPC_ALL_LOCK_ALLOC, "GASP_UPC_ALL_LOCK_ALLOC", GASP_START, NULL);
  lock_alloc(r, GASP_UPC_ALL_LOCK_ALLOC, "GASP_UPC_ALL_LOCK_ALLOC", GASP_END, lock_b);
  lock_event(r, GASP_UPC_LOCK, "GASP_UPC_LOCK", GASP_START, lock_a);
  lock_event(r, GASP_UPC_LOCK, "GASP_UPC_LOCK", GASP_END, lock_a);
  lock_attempt(r, GASP_START, lock_b, 0);
  lock_attempt(r, GASP_END, lock_b, 0);
  lock_attempt(r, GASP_START, lock_b, 0);
  lock_attempt(r, GASP_END, lock_b, 1);
  lock_event(r, GASP_UPC_UNLOCK, "GASP_UPC_UNLOCK", GASP_START, lock_b);
  lock_event(r, GASP_UPC_UNLOCK, "GASP_UPC_UNLOCK", GASP_END, lock_b);
  lock_event(r, GASP_UPC_UNLOCK, "GASP_UPC_UNLOCK", GASP_START, lock_a);
  lock_event(r, GASP_UPC_UNLOCK, "GASP_UPC_UNLOCK", GASP_END, lock_a);
  lock_event(r, GASP_UPC_LOCK_FREE, "GASP_UPC_LOCK_FREE", GASP_START, lock_a);
  lock_event(r, GASP_UPC_LOCK_FREE, "GASP_UPC_LOCK_FREE", GASP_END, lock_a);

  void *dst = pts(r), *src = pts(r);
  upc_memcpy(r, GASP_START, dst, src, SIZE(r, 1));
  upc_memcpy(r, GASP_END, dst, src, SIZE(r, 1));
  upc_memget(r, GASP_START, LOCAL(r, 0x10), src, SIZE(r, 2));
  upc_memget(r, GASP_END, LOCAL(r, 0x10), src, SIZE(r, 2));
  upc_memput(r, GASP_START, dst, LOCAL(r, 0x20), SIZE(r, 3));
  upc_memput(r, GASP_END, dst, LOCAL(r, 0x20), SIZE(r, 3));
  upc_memset(r, GASP_START, dst, 0x5a + t, SIZE(r, 4));
  upc_memset(r, GASP_END, dst, 0x5a + t, SIZE(r, 4));
  upc_memset(r, GASP_START, dst, -1, (size_t)1 << 40);
  upc_memset(r, GASP_END, dst, -1, (size_t)1 << 40);

  /* Tables 7 and 9: strict and relaxed accesses, with cache events inside. */
  site(r, FILE_MAIN, 3000 * (t + 1), 13);
  void *remote = pts(r);
  upc_get(r, GASP_START, 0, LOCAL(r, 0x30), remote, 8);
  upc_get(r, GASP_END, 0, LOCAL(r, 0x30), remote, 8);
  upc_get(r, GASP_START, 1, LOCAL(r, 0x38), remote, SIZE(r, 5));
  cache_miss(r, SIZE(r, 5), 64);
  cache_hit(r, 8 + t);
  upc_get(r, GASP_END, 1, LOCAL(r, 0x38), remote, SIZE(r, 5));
  upc_put(r, GASP_START, 0, remote, LOCAL(r, 0x40), 4);
  upc_put(r, GASP_END, 0, remote, LOCAL(r, 0x40), 4);
  upc_put(r, GASP_START, 1, remote, LOCAL(r, 0x48), SIZE(r, 6));
  cache_miss(r, SIZE(r, 6), 128);
  cache_invalidate(r, 3 + t);
  upc_put(r, GASP_END, 1, remote, LOCAL(r, 0x48), SIZE(r, 6));
  /* A pointer with the top bit set. */
  upc_get(r, GASP_START, 1, (void *)(uintptr_t)(UINTPTR_MAX - 0xfff - t), remote, 1);
  upc_get(r, GASP_END, 1, (void *)(uintptr_t)(UINTPTR_MAX - 0xfff - t), remote, 1);

  /* Table 8: non-blocking accesses, through the VA entry point. */
  r->use_va = 1;
  site(r, FILE_MAIN, 4000 * (t + 1), 17);
  gasp_upc_nb_handle_t h1 = (gasp_upc_nb_handle_t)(uintptr_t)(0xbeef0000u + 0x100 * t + 1);
  gasp_upc_nb_handle_t h2 = (gasp_upc_nb_handle_t)(uintptr_t)(0xbeef0000u + 0x100 * t + 2);
  void *nb_src = pts(r), *nb_dst = pts(r);
  nb_get_init(r, GASP_START, 1, LOCAL(r, 0x50), nb_src, SIZE(r, 7), NULL);
  nb_get_init(r, GASP_END, 1, LOCAL(r, 0x50), nb_src, SIZE(r, 7), h1);
  nb_put_init(r, GASP_START, 0, nb_dst, LOCAL(r, 0x58), SIZE(r, 8), NULL);
  nb_put_init(r, GASP_END, 0, nb_dst, LOCAL(r, 0x58), SIZE(r, 8), h2);
  /* Completed synchronously: no DATA or SYNC follows a trivial handle. */
  nb_get_init(r, GASP_START, 0, LOCAL(r, 0x60), nb_src, 16, NULL);
  nb_get_init(r, GASP_END, 0, LOCAL(r, 0x60), nb_src, 16, GASP_NB_TRIVIAL);
  nb_put_init(r, GASP_START, 1, nb_dst, LOCAL(r, 0x68), 24, NULL);
  nb_put_init(r, GASP_END, 1, nb_dst, LOCAL(r, 0x68), 24, GASP_NB_TRIVIAL);
  nb_handle(r, GASP_UPC_NB_GET_DATA, "GASP_UPC_NB_GET_DATA", GASP_START, h1);
  nb_handle(r, GASP_UPC_NB_GET_DATA, "GASP_UPC_NB_GET_DATA", GASP_END, h1);
  nb_handle(r, GASP_UPC_NB_PUT_DATA, "GASP_UPC_NB_PUT_DATA", GASP_START, h2);
  nb_handle(r, GASP_UPC_NB_PUT_DATA, "GASP_UPC_NB_PUT_DATA", GASP_END, h2);
  nb_handle(r, GASP_UPC_NB_SYNC, "GASP_UPC_NB_SYNC", GASP_START, h1);
  nb_handle(r, GASP_UPC_NB_SYNC, "GASP_UPC_NB_SYNC", GASP_END, h1);
  nb_handle(r, GASP_UPC_NB_SYNC, "GASP_UPC_NB_SYNC", GASP_START, h2);
  nb_handle(r, GASP_UPC_NB_SYNC, "GASP_UPC_NB_SYNC", GASP_END, h2);

  /* Table 10: collectives (still through the VA entry point). */
  site(r, FILE_LIB, 5000 * (t + 1), 21);
  void *cd = pts(r), *cs = pts(r), *cp = pts(r);
  static const struct { unsigned tag; const char *kind; } COLLECTIVES[] = {
      {GASP_UPC_ALL_BROADCAST, "GASP_UPC_ALL_BROADCAST"},
      {GASP_UPC_ALL_SCATTER, "GASP_UPC_ALL_SCATTER"},
      {GASP_UPC_ALL_GATHER, "GASP_UPC_ALL_GATHER"},
      {GASP_UPC_ALL_GATHER_ALL, "GASP_UPC_ALL_GATHER_ALL"},
      {GASP_UPC_ALL_EXCHANGE, "GASP_UPC_ALL_EXCHANGE"},
  };
  for (int i = 0; i < 5; i++) {
    unsigned tag = COLLECTIVES[i].tag;
    const char *kind = COLLECTIVES[i].kind;
    int flags = (i % 3 + 1) | (4 << (t % 2)); /* UPC_IN_xSYNC | UPC_OUT_xSYNC style */
    collective(r, tag, kind, GASP_START, cd, cs, SIZE(r, 10 + i), flags);
    collective(r, tag, kind, GASP_END, cd, cs, SIZE(r, 10 + i), flags);
  }
  r->use_va = 0;
  permute(r, GASP_START, cd, cs, cp, SIZE(r, 20), 0);
  permute(r, GASP_END, cd, cs, cp, SIZE(r, 20), 0);
  void *reduce_fn = (void *)(uintptr_t)(0x400000u + 0x10 * t);
  for (int ty = GASP_UPC_REDUCTION_C; ty <= GASP_UPC_REDUCTION_LD; ty++) {
    int op = 1 << (ty % 8);              /* UPC_ADD, UPC_MULT, ... */
    void *func = ty == GASP_UPC_REDUCTION_LD ? reduce_fn : NULL; /* UPC_FUNC */
    reduce(r, GASP_UPC_ALL_REDUCE, "GASP_UPC_ALL_REDUCE", GASP_START, cd, cs, op,
           SIZE(r, 30 + ty), (size_t)(ty + 1), func, 0x3f, (gasp_upc_reduction_t)ty);
    reduce(r, GASP_UPC_ALL_REDUCE, "GASP_UPC_ALL_REDUCE", GASP_END, cd, cs, op, SIZE(r, 30 + ty),
           (size_t)(ty + 1), func, 0x3f, (gasp_upc_reduction_t)ty);
  }
  for (int ty = GASP_UPC_REDUCTION_C; ty <= GASP_UPC_REDUCTION_LD; ty++) {
    if ((ty + t) % 2) continue; /* half of the types per thread, all of them over two threads */
    r->use_va = ty % 4 == 0;
    reduce(r, GASP_UPC_ALL_PREFIX_REDUCE, "GASP_UPC_ALL_PREFIX_REDUCE", GASP_START, cd, cs, 1 << t,
           SIZE(r, 50 + ty), 0, reduce_fn, 5, (gasp_upc_reduction_t)ty);
    reduce(r, GASP_UPC_ALL_PREFIX_REDUCE, "GASP_UPC_ALL_PREFIX_REDUCE", GASP_END, cd, cs, 1 << t,
           SIZE(r, 50 + ty), 0, reduce_fn, 5, (gasp_upc_reduction_t)ty);
  }
  r->use_va = 0;

  /* Table 2: C memory allocation. */
  site(r, FILE_MAIN, 6000 * (t + 1), 25);
  c_malloc(r, GASP_START, SIZE(r, 40), NULL);
  c_malloc(r, GASP_END, SIZE(r, 40), LOCAL(r, 0x1000));
  c_realloc(r, GASP_START, LOCAL(r, 0x1000), SIZE(r, 80), NULL);
  c_realloc(r, GASP_END, LOCAL(r, 0x1000), SIZE(r, 80), LOCAL(r, 0x2000));
  c_malloc(r, GASP_START, 0, NULL);
  c_malloc(r, GASP_END, 0, NULL); /* malloc(0) may return NULL */
  c_free(r, GASP_START, LOCAL(r, 0x2000));
  c_free(r, GASP_END, LOCAL(r, 0x2000));

  /* User events: every phase, both entry points, with values. */
  site(r, FILE_MAIN, 7000 * (t + 1), 29);
  unsigned phase = create_event(r, "phase", PHASE_FORMAT);
  unsigned marker = create_event(r, "marker", NULL);
  unsigned unreadable = create_event(r, "unreadable", "count %n");
  if (phase == marker || phase == unreadable || marker == unreadable)
    fail("gasp_create_event gave the same id to different names");
  shared.phase_id[t] = phase;
  shared.marker_id[t] = marker;
  shared.unreadable_id[t] = unreadable;
  user_phase(r, phase, GASP_START, t, "start", 2.5 + t, LOCAL(r, 0x70));
  user_phase(r, phase, GASP_ATOMIC, -7 - t, "with \"quotes\"", -0.125, NULL);
  r->use_va = 1;
  user_phase(r, phase, GASP_END, 1000000 + t, "end", 1e-3 * (t + 1) + 0.5, LOCAL(r, 0x78));
  user_marker(r, marker, GASP_START);
  unsigned wide = create_event(r, "wide", WIDE_FORMAT);
  user_wide(r, wide, GASP_START, -3 - t, 0.5 + t, -40000000000L - t, (size_t)7 << 40);
  user_wide(r, wide, GASP_END, 5 + t, 1.25, 6, 7);
  r->use_va = 0;
  user_wide(r, wide, GASP_ATOMIC, 9 + t, -2.75, 8, 9);
  user_marker(r, marker, GASP_END);
  user_marker(r, marker, GASP_ATOMIC);
  user_unreadable(r, unreadable, GASP_ATOMIC);

  /* Unknown tags are ignored. An id of the user range nobody created is unknown too. */
  unknown_tag(r, 0xdeadbeefu);
  unknown_tag(r, 12345678u);
  unknown_tag(r, GASP_UPC_USEREVT_START + 500);

  /* Measurement off: nothing of this window is recorded, and gasp_control
   * returns the last value it received. */
  site(r, FILE_MAIN, 900000 + 100 * t, 33); /* lines 900000.. only here */
  control(r, 0);
  upc_get(r, GASP_START, 1, LOCAL(r, 0x80), remote, 99);
  upc_get(r, GASP_END, 1, LOCAL(r, 0x80), remote, 99);
  sync_event(r, GASP_UPC_BARRIER, "GASP_UPC_BARRIER", GASP_START, 1, 99);
  sync_event(r, GASP_UPC_BARRIER, "GASP_UPC_BARRIER", GASP_END, 1, 99);
  user_phase(r, phase, GASP_ATOMIC, 99, "off", 9.5, NULL);
  control(r, 0);
  unknown_tag(r, 0xdeadbeefu);
  r->use_va = 1;
  upc_put(r, GASP_START, 1, remote, LOCAL(r, 0x88), 99);
  upc_put(r, GASP_END, 1, remote, LOCAL(r, 0x88), 99);
  r->use_va = 0;
  control(r, 1);
  control(r, 2); /* any nonzero value is on */
  control(r, 1);

  /* Table 3: exits, and the end of the thread's function. */
  site(r, FILE_MAIN, 8000 * (t + 1), 37);
  exit_event(r, GASP_UPC_NONCOLLECTIVE_EXIT, "GASP_UPC_NONCOLLECTIVE_EXIT", GASP_ATOMIC, -1 - t);
  exit_event(r, GASP_UPC_COLLECTIVE_EXIT, "GASP_UPC_COLLECTIVE_EXIT", GASP_START, t);
  exit_event(r, GASP_UPC_COLLECTIVE_EXIT, "GASP_UPC_COLLECTIVE_EXIT", GASP_END, t);
  site(r, FILE_MAIN, 100 * (t + 1) + 99, 1);
  c_func(r, GASP_END, FUNCSIG[t]);
}

static struct run runs[NTHREADS];
static int nruns;

static void *upc_thread(void *arg) {
  struct run *r = arg;
  init_run(r, (int)(r - runs), GASP_MODEL_UPC, "UPC");
  upc_thread_events(r);
  return NULL;
}

/* One thread, two language models: contexts and measurement control are
 * per model, user event ids are per name. */
static void *two_model_thread(void *arg) {
  (void)arg;
  struct run *upc = &runs[0], *caf = &runs[1];
  init_run(upc, 0, GASP_MODEL_UPC, "UPC");
  init_run(caf, 1, GASP_MODEL_CAF, "CAF");
  if (upc->ctx == caf->ctx) fail("gasp_init gave the same context to UPC and CAF");

  site(upc, FILE_MAIN, 100, 1);
  site(caf, "main.f90", 200, 7);
  c_func(upc, GASP_START, "int main(int, char **)");
  c_func(caf, GASP_START, "program caf_main");
  sync_event(upc, GASP_UPC_BARRIER, "GASP_UPC_BARRIER", GASP_START, 0, 0);
  c_malloc(caf, GASP_START, 4096, NULL);
  sync_event(upc, GASP_UPC_BARRIER, "GASP_UPC_BARRIER", GASP_END, 0, 0);
  c_malloc(caf, GASP_END, 4096, LOCAL(caf, 0x10));

  unsigned phase_upc = create_event(upc, "phase", PHASE_FORMAT);
  unsigned phase_caf = create_event(caf, "phase", PHASE_FORMAT);
  if (phase_upc != phase_caf)
    fail("gasp_create_event(\"phase\") returned %u for UPC and %u for CAF", phase_upc, phase_caf);
  user_phase(caf, phase_caf, GASP_ATOMIC, 42, "caf", 0.75, LOCAL(caf, 0x20));
  user_phase(upc, phase_upc, GASP_ATOMIC, 43, "upc", 1.75, LOCAL(upc, 0x20));

  /* CAF off: its events vanish, UPC's do not. */
  control(caf, 0);
  site(caf, "main.f90", 900500, 7);
  c_free(caf, GASP_START, LOCAL(caf, 0x10));
  c_free(caf, GASP_END, LOCAL(caf, 0x10));
  upc->use_va = 1;
  void *remote = pts(upc);
  upc_get(upc, GASP_START, 1, LOCAL(upc, 0x30), remote, 8);
  upc_get(upc, GASP_END, 1, LOCAL(upc, 0x30), remote, 8);
  upc->use_va = 0;
  control(upc, 1); /* the UPC context was never switched: nonzero */
  control(caf, 1);

  site(caf, "main.f90", 300, 7);
  c_func(caf, GASP_END, "program caf_main");
  unknown_tag(caf, 0xdeadbeefu);
  exit_event(upc, GASP_UPC_COLLECTIVE_EXIT, "GASP_UPC_COLLECTIVE_EXIT", GASP_START, 0);
  exit_event(upc, GASP_UPC_COLLECTIVE_EXIT, "GASP_UPC_COLLECTIVE_EXIT", GASP_END, 0);
  c_func(upc, GASP_END, "int main(int, char **)");
  return NULL;
}

static void run_threads(void *(*fn)(void *), int n) {
  pthread_t th[NTHREADS];
  for (int i = 0; i < n; i++)
    if (pthread_create(&th[i], NULL, fn, &runs[i]) != 0) die("pthread_create failed");
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

static void write_expectations(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) die("cannot write %s", path);
  unsigned unknown = 0;
  for (int i = 0; i < nruns; i++) unknown += runs[i].unknown;
  fprintf(f, "{\"pid\":%ld,\"unknown_tags\":%u,\"threads\":[", (long)getpid(), unknown);
  for (int i = 0; i < nruns; i++) {
    struct run *r = &runs[i];
    fprintf(f, "%s\n  {\"tid\":%ld,\"model\":\"%s\",\"events\":[%s\n  ]}", i ? "," : "", r->tid,
            r->model, r->expect.s);
  }
  fprintf(f, "\n]}\n");
  if (fclose(f) != 0) die("cannot write %s", path);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s all|twomodel|abort|segv EXPECTED.json\n", argv[0]);
    return 2;
  }
  const char *mode = argv[1], *out = argv[2];
  shared.argc = &argc;
  shared.argv = &argv;
  if (strcmp(mode, "twomodel") == 0) {
    nruns = 2;
    pthread_t th;
    if (pthread_create(&th, NULL, two_model_thread, NULL) != 0) die("pthread_create failed");
    pthread_join(th, NULL);
  } else if (strcmp(mode, "all") == 0 || strcmp(mode, "abort") == 0 ||
             strcmp(mode, "segv") == 0) {
    nruns = NTHREADS;
    run_threads(upc_thread, NTHREADS);
    for (int t = 1; t < NTHREADS; t++)
      if (shared.phase_id[t] != shared.phase_id[0] || shared.marker_id[t] != shared.marker_id[0] ||
          shared.unreadable_id[t] != shared.unreadable_id[0])
        fail("gasp_create_event gave thread %d other ids than thread 0 for the same names", t);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  write_expectations(out);
  if (failures.len) fputs(failures.s, stderr);
  if (strcmp(mode, "abort") == 0) abort();
  if (strcmp(mode, "segv") == 0) {
    volatile int *nowhere = NULL;
    return *nowhere;
  }
  return failures.len ? 1 : 0;
}
