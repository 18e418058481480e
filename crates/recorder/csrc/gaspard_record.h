/* gaspard's recording hot path, shared by every adapter written in C.
 *
 * A context (one per thread and programming model) holds a pointer into a
 * per-thread buffer of 64-bit words. Recording an event is: read the clock,
 * reserve words, store them, publish the new end. No lock, no system call,
 * no allocation; a full buffer goes to gaspard_refill(), the slow path in
 * Rust (crates/recorder/src/lib.rs), which hands it to the flusher thread.
 *
 * The raw record layout is documented in crates/format/src/raw.rs; keep the
 * two in step. */
#ifndef GASPARD_RECORD_H
#define GASPARD_RECORD_H

#include <stdint.h>
#include <stddef.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define GASPARD_MAX_CONTEXTS 4096
#define GASPARD_HEADER_WORDS 3
#define GASPARD_FLAG_PTS_RESOLVED 1u
#define GASPARD_FLAG_ARGS_UNREAD 2u

/* Canonical kinds not tied to a runtime tag (see crates/format/src/kinds.rs). */
#define GASPARD_K_INIT 256u
#define GASPARD_K_MEASUREMENT 257u
#define GASPARD_K_USER 258u

typedef struct gaspard_ctx {
  uint64_t *cur;          /* next free word; published with release order */
  uint64_t *end;          /* one past the last usable word */
  const void *owner;      /* &gaspard_tls_marker of the owning thread */
  uint32_t on;            /* measurement on (gasp_control) */
  uint32_t model;         /* gasp_model_t */
  void *rs;               /* Rust-side state of this context */
  uint64_t unknown_tags;  /* tags ignored, as the spec requires */
  uint64_t pad[2];
} gaspard_ctx;

extern gaspard_ctx gaspard_contexts[GASPARD_MAX_CONTEXTS];
extern __thread char gaspard_tls_marker __attribute__((tls_model("initial-exec")));
extern int gaspard_clock_is_tsc;

/* Slow paths, in Rust. */
uint64_t *gaspard_refill(gaspard_ctx *c, unsigned words);
gaspard_ctx *gaspard_context_for_thread(gaspard_ctx *c);

static inline int gaspard_ctx_valid(const void *p) {
  uintptr_t off = (uintptr_t)p - (uintptr_t)gaspard_contexts;
  return off < sizeof(gaspard_contexts) && off % sizeof(gaspard_ctx) == 0;
}

/* The context to record into: the one given when it belongs to this thread,
 * else this thread's own (a NULL, foreign or other thread's context never
 * crashes the program). May return NULL when recording is impossible. */
static inline gaspard_ctx *gaspard_ctx_here(void *p) {
  gaspard_ctx *c = (gaspard_ctx *)p;
  if (__builtin_expect(!gaspard_ctx_valid(c) || c->owner != &gaspard_tls_marker, 0))
    c = gaspard_context_for_thread(c);
  return c;
}

static inline uint64_t gaspard_now(void) {
#if defined(__x86_64__) || defined(__i386__)
  if (__builtin_expect(gaspard_clock_is_tsc, 1)) return __rdtsc();
#endif
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Room for `words` words, or NULL when the event is dropped (counted by the slow path). */
static inline uint64_t *gaspard_reserve(gaspard_ctx *c, unsigned words) {
  uint64_t *p = c->cur;
  if (__builtin_expect(p == NULL || (size_t)(c->end - p) < words, 0)) p = gaspard_refill(c, words);
  return p;
}

static inline void gaspard_commit(gaspard_ctx *c, uint64_t *p, unsigned words) {
  __atomic_store_n(&c->cur, p + words, __ATOMIC_RELEASE);
}

static inline void gaspard_header(uint64_t *p, uint64_t ts, unsigned kind, unsigned phase,
                                  unsigned flags, unsigned nargs, const char *file, int line,
                                  int col) {
  uint64_t c16 = col < 0 ? 0 : (col > 65535 ? 65535 : (uint64_t)col);
  p[0] = ts;
  p[1] = (uint64_t)kind | (uint64_t)(phase & 3u) << 16 | (uint64_t)(flags & 0x3fu) << 18 |
         (uint64_t)(nargs & 0xffu) << 24 | (uint64_t)(uint32_t)line << 32;
  p[2] = ((uint64_t)(uintptr_t)file & 0xffffffffffffull) | c16 << 48;
}

/* Records one event with `nargs` argument words from `args`. */
static inline void gaspard_record(gaspard_ctx *c, uint64_t ts, unsigned kind, unsigned phase,
                                  unsigned flags, const char *file, int line, int col,
                                  const uint64_t *args, unsigned nargs) {
  uint64_t *p = gaspard_reserve(c, GASPARD_HEADER_WORDS + nargs);
  if (__builtin_expect(p == NULL, 0)) return;
  gaspard_header(p, ts, kind, phase, flags, nargs, file, line, col);
  for (unsigned i = 0; i < nargs; i++) p[GASPARD_HEADER_WORDS + i] = args[i];
  gaspard_commit(c, p, GASPARD_HEADER_WORDS + nargs);
}

#endif
