/* gaspard's recording hot path, shared by every adapter written in C.
 *
 * A context (one per thread and programming model) owns a buffer that is the
 * payload of one trace chunk. Recording an event reads the clock and writes
 * it straight into that buffer in the trace's compact encoding
 * (docs/FORMAT.md, crates/format/src/codec.rs): an opcode byte, varints,
 * deltas against the previous event. The common case (same kind, same
 * callsite, same arguments) is two bytes. No lock, no system call, no
 * allocation; a buffer with less than GASPARD_MARGIN bytes left goes to
 * gaspard_refill(), the slow path in Rust (crates/recorder/src/process.rs),
 * which hands it to the flusher thread as a finished chunk.
 *
 * Per chunk, the encoder starts afresh: its caches of callsites, strings and
 * previous arguments carry the chunk's generation number, and an entry of
 * another generation counts as absent. */
#ifndef GASPARD_RECORD_H
#define GASPARD_RECORD_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define GASPARD_MAX_CONTEXTS 4096
#define GASPARD_FLAG_PTS_RESOLVED 1u
#define GASPARD_FLAG_ARGS_UNREAD 2u
/* Every event, with the definitions it may need (two strings of at most
 * GASPARD_MAX_STRING bytes, a callsite, a user event), fits in this. */
#define GASPARD_MARGIN 16384u
/* Room always kept after `end` for one GASPARD_LOST record. */
#define GASPARD_LOST_RESERVE 64u
#define GASPARD_MAX_STRING 4096u
#define GASPARD_MAX_ARGS 250u

/* Canonical kinds not tied to a runtime tag (see crates/format/src/kinds.rs). */
#define GASPARD_K_INIT 256u
#define GASPARD_K_MEASUREMENT 257u
#define GASPARD_K_USER 258u
#define GASPARD_K_LOST 259u

/* Opcode bits and definitions (crates/format/src/codec.rs). */
#define GASPARD_OP_SAME_KIND 0x04u
#define GASPARD_OP_SAME_SITE 0x08u
#define GASPARD_OP_SAME_ARGS 0x10u
#define GASPARD_OP_RESOLVED 0x20u
#define GASPARD_OP_UNREAD 0x40u
#define GASPARD_OP_SAME_NARGS 0x80u
#define GASPARD_DEF_STRING 0x03u
#define GASPARD_DEF_CALLSITE 0x07u
#define GASPARD_DEF_TIME 0x0fu

/* Previous arguments: system kinds remembered whatever their length (16
 * words is the most any has); user events in GASPARD_USER_SLOTS slots by
 * id modulo the slot count, a slot holding another id counting as empty,
 * and arguments longer than GASPARD_USER_WORDS words not remembered; kinds
 * from 512 on share GASPARD_SHARED_SLOTS slots in the same way. The decoder
 * follows the same rule. */
#define GASPARD_KIND_WORDS 16
#define GASPARD_USER_SLOTS 16
#define GASPARD_USER_WORDS 32
#define GASPARD_SHARED_FIRST 512u
#define GASPARD_SHARED_SLOTS 64
#define GASPARD_SITE_SLOTS 256
#define GASPARD_STRING_SLOTS 256

typedef struct {
  uint32_t gen, n;
  uint64_t w[GASPARD_KIND_WORDS];
} gaspard_prev_kind;

/* Which user event a slot of previous arguments holds, and how many words;
 * the words themselves apart (gaspard_enc.uwords), 256 bytes a slot. */
typedef struct {
  uint32_t gen, n;
  uint64_t id;
} gaspard_prev_user;

typedef struct {
  const char *file;
  uint32_t line, col, id, gen;
} gaspard_site_slot;

typedef struct {
  const void *ptr;
  uint32_t id, gen;
} gaspard_string_slot;

typedef struct {
  uint64_t id;
  uint32_t gen, pad;
} gaspard_user_slot;

/* The encoder state of one context. The first fields are read by Rust
 * (crates/recorder/src/lib.rs, `EncHead`): keep them in step. */
typedef struct gaspard_enc {
  uint32_t gen;        /* chunk generation, never 0 once started */
  uint32_t events;     /* events in this chunk */
  uint64_t base_ts;    /* first event's time */
  uint64_t last_ts;    /* last event's time */
  uint32_t nsites, nstrings;
  uint32_t last_kind;  /* 0xffffffff: none yet */
  uint32_t last_site;
  uint64_t last_user;
  const char *last_file; /* the last callsite's key (column as given), to skip the */
  uint32_t last_line, last_col; /* cache; a chunk starts with a file no event has */
  gaspard_prev_kind prev[128 + 8]; /* kinds 0..127, then 256..263 */
  gaspard_prev_kind shared[GASPARD_SHARED_SLOTS]; /* kinds from 512, `gen` holding the kind */
  gaspard_prev_user uprev[GASPARD_USER_SLOTS];
  uint64_t uwords[GASPARD_USER_SLOTS][GASPARD_USER_WORDS];
  gaspard_user_slot users[GASPARD_USER_SLOTS];
  gaspard_site_slot sites[GASPARD_SITE_SLOTS];
  gaspard_string_slot strings[GASPARD_STRING_SLOTS];
} gaspard_enc;

typedef struct gaspard_ctx {
  uint8_t *cur;           /* next free byte; published with release order */
  uint8_t *end;           /* refill when fewer than GASPARD_MARGIN bytes remain before it */
  const void *owner;      /* &gaspard_tls_marker of the owning thread */
  uint32_t on;            /* measurement on (gasp_control) */
  uint32_t model;         /* gasp_model_t */
  void *rs;               /* Rust-side state of this context */
  uint64_t unknown_tags;  /* tags ignored, as the spec requires */
  gaspard_enc *enc;       /* encoder state */
  uint64_t filtered;      /* events left out by the filters */
} gaspard_ctx;

/* Hidden: defined in the same library (recorder.c), so the hot path reaches
 * them directly rather than through the GOT. */
#define GASPARD_HIDDEN __attribute__((visibility("hidden")))
extern GASPARD_HIDDEN gaspard_ctx gaspard_contexts[GASPARD_MAX_CONTEXTS];
extern GASPARD_HIDDEN __thread char gaspard_tls_marker __attribute__((tls_model("initial-exec")));
extern GASPARD_HIDDEN int gaspard_clock_is_tsc;

/* Filters by event name and callsite (GASPARD_EXCLUDE, GASPARD_INCLUDE,
 * GASPARD_EXCLUDE_SITES; crates/recorder/src/filter.rs). Off unless set:
 * then the hot path pays one load and one branch. */
#define GASPARD_FILTER_KINDS 4096u
#define GASPARD_FILTER_USERS 65536u
extern GASPARD_HIDDEN int gaspard_filtering;
/* Nonzero when the event is left out (and counted in c->filtered). */
int gaspard_filtered(gaspard_ctx *c, unsigned kind, uint64_t user, const char *file, int line);

/* Slow paths, in Rust. */
uint8_t *gaspard_refill(gaspard_ctx *c);
gaspard_ctx *gaspard_context_for_thread(gaspard_ctx *c);
/* Writes the definition of user event `id` at `p` (at most `cap` bytes); returns its length. */
size_t gaspard_user_definition(uint64_t id, uint8_t *p, size_t cap);

/* Slow paths, in C (recorder.c). */
uint32_t gaspard_define_site(gaspard_ctx *c, const char *file, uint32_t line, uint32_t col);
uint32_t gaspard_define_string(gaspard_ctx *c, const void *ptr);
void gaspard_define_user(gaspard_ctx *c, uint64_t id);

_Static_assert(sizeof(gaspard_ctx) == 64, "a context is 64 bytes (gaspard_ctx_valid)");

/* Whether `p` is one of gaspard_contexts: its offset rotated right by 6 bits
 * (a slot's index, or a huge number when the offset is not a multiple of 64)
 * is below the number of slots. */
static inline int gaspard_ctx_valid(const void *p) {
  uintptr_t off = (uintptr_t)p - (uintptr_t)gaspard_contexts;
  return (off >> 6 | off << (8 * sizeof off - 6)) < GASPARD_MAX_CONTEXTS;
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

static inline uint8_t *gaspard_put_u64(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* A time delta: the same bytes as gaspard_put_u64, with the one- and
 * two-byte cases (deltas below 16384 ticks, events a few microseconds
 * apart at most) written in line rather than by the loop. */
static inline uint8_t *gaspard_put_dt(uint8_t *p, uint64_t dt) {
  if (__builtin_expect(dt < 0x80, 1)) {
    *p = (uint8_t)dt;
    return p + 1;
  }
  if (__builtin_expect(dt < 0x4000, 1)) {
    p[0] = (uint8_t)(dt | 0x80);
    p[1] = (uint8_t)(dt >> 7);
    return p + 2;
  }
  return gaspard_put_u64(p, dt);
}

static inline uint8_t *gaspard_put_i64(uint8_t *p, int64_t v) {
  return gaspard_put_u64(p, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* XOR of two doubles' bits: a byte (leading zero bytes << 4 | length), then
 * the significant bytes, most significant first; a lone 0 when equal. */
static inline uint8_t *gaspard_put_xor(uint8_t *p, uint64_t x) {
  if (!x) {
    *p++ = 0;
    return p;
  }
  unsigned lz = (unsigned)__builtin_clzll(x) / 8, tz = (unsigned)__builtin_ctzll(x) / 8;
  unsigned len = 8 - lz - tz;
  *p++ = (uint8_t)(lz << 4 | len);
  /* The significant bytes in one 8-byte store, most significant first: the
   * bytes after them are scratch, overwritten by what comes next (every
   * event has GASPARD_MARGIN bytes of room). */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t be = __builtin_bswap64(x << (8 * lz));
  memcpy(p, &be, 8);
  return p + len;
#else
  for (unsigned i = 0; i < len; i++) *p++ = (uint8_t)(x >> (8 * (7 - lz - i)));
  return p;
#endif
}

/* Room for one event at the context's cursor, or NULL when it is dropped
 * (counted by the slow path). */
static inline uint8_t *gaspard_reserve(gaspard_ctx *c) {
  uint8_t *p = c->cur;
  if (__builtin_expect(p == NULL || (size_t)(c->end - p) < GASPARD_MARGIN, 0))
    p = gaspard_refill(c);
  return p;
}

/* The callsite of an event whose key differs from the last event's (the
 * common case, the same key as the last event, is tested by the caller).
 * The last key is kept with the column as given; the site table with the
 * column clamped to 0..65535. */
static inline uint32_t gaspard_site_miss(gaspard_ctx *c, const char *file, int line, int col) {
  uint32_t l = (uint32_t)line, k = col < 0 ? 0 : (col > 65535 ? 65535 : (uint32_t)col);
  gaspard_enc *e = c->enc;
  e->last_file = file, e->last_line = l, e->last_col = (uint32_t)col;
  if (!file && !l && !k) return 0;
  gaspard_site_slot *s =
      &e->sites[((uintptr_t)file * 31u + l * 7u + k) % GASPARD_SITE_SLOTS];
  if (__builtin_expect(s->gen == e->gen && s->file == file && s->line == l && s->col == k, 1))
    return s->id;
  return gaspard_define_site(c, file, l, k);
}

/* Encodes one event at the cursor (room reserved by gaspard_reserve) and
 * publishes it. `user` is the user event's id for GASPARD_K_USER; `fmask`,
 * NULL or a bitmap of GASPARD_MAX_ARGS bits, marks the argument words that
 * are doubles (to be XOR-coded, as the decoder infers from the format);
 * `args` holds `n` words (the user id not among them).
 *
 * The common case runs straight through: the callsite's key is the last
 * event's (then the site is the last one, and the chunk has begun: a chunk
 * starts with a key no event has), the kind is the last one, the arguments
 * those of the previous event of the kind, and the time delta one byte.
 *
 * With `fast` set, the body calls no function: it returns 0, having done
 * nothing, when the event needs a call (a callsite other than the last one,
 * a user event not yet defined in this chunk); the caller then records it
 * with gaspard_emit. Otherwise it returns 1. The caller of a fast body has
 * seen the filters off (gaspard_filtering 0). */
static inline __attribute__((always_inline)) int gaspard_emit_body(
    gaspard_ctx *c, uint64_t ts, unsigned kind, unsigned phase, unsigned flags, const char *file,
    int line, int col, uint64_t user, const uint64_t *fmask, const uint64_t *args, unsigned n,
    const int fast) {
  if (!fast && __builtin_expect(gaspard_filtering, 0) && gaspard_filtered(c, kind, user, file, line))
    return 1;
  gaspard_enc *e = c->enc;
  int is_user = kind == GASPARD_K_USER;
  unsigned op = phase;
  uint32_t site;
  if (__builtin_expect(file == e->last_file && (uint32_t)line == e->last_line &&
                           (uint32_t)col == e->last_col, 1)) {
    site = e->last_site;
    op |= GASPARD_OP_SAME_SITE;
  } else {
    if (fast) return 0;
    site = gaspard_site_miss(c, file, line, col);
    if (site == e->last_site) op |= GASPARD_OP_SAME_SITE; /* never on a chunk's first event */
    e->last_site = site;
    if (e->events == 0) e->base_ts = e->last_ts = ts;
  }
  gaspard_prev_user *up = NULL;
  if (is_user) {
    /* The previous arguments' slot names this user event in this chunk only
     * after an event of it, which defined it in the chunk; and another user
     * event taking the definition's slot takes this one too. So the
     * definition is looked at only when this slot names another. */
    up = &e->uprev[user % GASPARD_USER_SLOTS];
    if (__builtin_expect(up->gen != e->gen || up->id != user, 0)) {
      gaspard_user_slot *u = &e->users[user % GASPARD_USER_SLOTS];
      if (u->gen != e->gen || u->id != user) {
        if (fast) return 0;
        gaspard_define_user(c, user);
      }
      up->gen = e->gen;
      up->id = user;
      up->n = 0;
    }
  }
  uint8_t *p = c->cur;
  if (e->last_kind == kind && (!is_user || e->last_user == user)) op |= GASPARD_OP_SAME_KIND;
  if (__builtin_expect(flags != 0, 0)) {
    if (flags & GASPARD_FLAG_PTS_RESOLVED) op |= GASPARD_OP_RESOLVED;
    if (flags & GASPARD_FLAG_ARGS_UNREAD) op |= GASPARD_OP_UNREAD;
  }
  uint64_t *pw;
  uint32_t *pn, cap;
  if (is_user) {
    pw = e->uwords[user % GASPARD_USER_SLOTS], pn = &up->n, cap = GASPARD_USER_WORDS;
  } else if (kind >= GASPARD_SHARED_FIRST) {
    gaspard_prev_kind *s = &e->shared[kind % GASPARD_SHARED_SLOTS];
    if (s->gen != kind) s->gen = kind, s->n = 0; /* emptied at each chunk too */
    pw = s->w, pn = &s->n, cap = GASPARD_KIND_WORDS;
  } else {
    /* Emptied by gaspard_enc_reset at each chunk. */
    gaspard_prev_kind *s = &e->prev[kind < 128 ? kind : 128 + ((kind - 256) & 7)];
    pw = s->w, pn = &s->n, cap = GASPARD_KIND_WORDS;
  }
  unsigned known = *pn, same = 0;
  if (known == n) {
    uint64_t diff = 0;
    switch (n) { /* unrolled: most events have a handful of words */
    default:
      for (unsigned i = 8; i < n; i++) diff |= pw[i] ^ args[i];
      /* fall through */
    case 8: diff |= pw[7] ^ args[7]; /* fall through */
    case 7: diff |= pw[6] ^ args[6]; /* fall through */
    case 6: diff |= pw[5] ^ args[5]; /* fall through */
    case 5: diff |= pw[4] ^ args[4]; /* fall through */
    case 4: diff |= pw[3] ^ args[3]; /* fall through */
    case 3: diff |= pw[2] ^ args[2]; /* fall through */
    case 2: diff |= pw[1] ^ args[1]; /* fall through */
    case 1: diff |= pw[0] ^ args[0]; /* fall through */
    case 0: break;
    }
    same = diff == 0;
    op |= same ? GASPARD_OP_SAME_ARGS : GASPARD_OP_SAME_NARGS;
  }
  if (__builtin_expect(ts < e->last_ts, 0)) {
    /* Time went backwards (another core's clock): deltas restart from here. */
    *p++ = GASPARD_DEF_TIME;
    p = gaspard_put_u64(p, ts);
    e->last_ts = ts;
  }
  *p++ = (uint8_t)op;
  if (__builtin_expect(!(op & GASPARD_OP_SAME_KIND), 0)) {
    p = gaspard_put_u64(p, kind);
    if (is_user) p = gaspard_put_u64(p, user);
  }
  if (__builtin_expect(!(op & GASPARD_OP_SAME_SITE), 0)) p = gaspard_put_u64(p, site);
  p = gaspard_put_dt(p, ts - e->last_ts);
  if (!same) {
    if (!(op & GASPARD_OP_SAME_NARGS)) p = gaspard_put_u64(p, n);
    if (!fmask) {
      for (unsigned i = 0; i < n; i++)
        p = gaspard_put_i64(p, (int64_t)(args[i] - (i < known ? pw[i] : 0)));
    } else {
      for (unsigned i = 0; i < n; i++) {
        uint64_t before = i < known ? pw[i] : 0;
        if (fmask[i / 64] >> (i % 64) & 1)
          p = gaspard_put_xor(p, args[i] ^ before);
        else
          p = gaspard_put_i64(p, (int64_t)(args[i] - before));
      }
    }
    if (n <= cap) {
      for (unsigned i = 0; i < n; i++) pw[i] = args[i];
      *pn = n;
    } else {
      *pn = 0;
    }
  }
  e->last_kind = kind;
  if (is_user) e->last_user = user; /* read only after a user event */
  e->last_ts = ts;
  e->events++;
  __atomic_store_n(&c->cur, p, __ATOMIC_RELEASE);
  return 1;
}

/* Argument words of a user event, one at a time, in order: `code` says what
 * the next is (GASPARD_ARG_INT an int, GASPARD_ARG_WORD a 64-bit integer or
 * pointer, GASPARD_ARG_DOUBLE a double, its bits); returns it as a word. */
#define GASPARD_ARG_INT 1u
#define GASPARD_ARG_WORD 2u
#define GASPARD_ARG_DOUBLE 3u
typedef uint64_t (*gaspard_arg_reader)(void *state, unsigned code);

/* The common case of a user event whose `n` argument words (at most
 * GASPARD_KIND_WORDS) are described by `codes`, 2 bits a word, first word
 * lowest, and read by `next` (an always-inline function, so that the reading
 * happens in place), at the reserved room `p`: the same bytes as
 * gaspard_emit_body, in one pass over the arguments that reads, compares,
 * encodes and remembers them (the opcode, which says whether they changed,
 * written last). Returns 0, having read and written nothing, when the event
 * is not that case: a callsite other than the last one, a user event not
 * yet seen in this chunk or last seen with another number of words, time
 * going backwards. The caller has seen the filters off. */
static inline __attribute__((always_inline)) int gaspard_emit_user_short(
    gaspard_ctx *c, uint8_t *p, uint64_t ts, unsigned phase, unsigned flags, const char *file,
    int line, int col, uint64_t user, uint32_t codes, unsigned n, gaspard_arg_reader next,
    void *state) {
  gaspard_enc *e = c->enc;
  gaspard_prev_user *up = &e->uprev[user % GASPARD_USER_SLOTS];
  if (__builtin_expect(file != e->last_file || (uint32_t)line != e->last_line ||
                           (uint32_t)col != e->last_col || up->gen != e->gen ||
                           up->id != user || up->n != n || ts < e->last_ts,
                       0))
    return 0;
  unsigned op = phase | GASPARD_OP_SAME_SITE;
  if (flags & GASPARD_FLAG_PTS_RESOLVED) op |= GASPARD_OP_RESOLVED;
  uint8_t *q = p + 1;
  if (__builtin_expect(e->last_kind == GASPARD_K_USER && e->last_user == user, 1)) {
    op |= GASPARD_OP_SAME_KIND;
  } else {
    q = gaspard_put_u64(q, GASPARD_K_USER);
    q = gaspard_put_u64(q, user);
  }
  q = gaspard_put_dt(q, ts - e->last_ts);
  uint8_t *head = q;
  uint64_t diff = 0, *pw = e->uwords[user % GASPARD_USER_SLOTS];
  for (uint32_t k = codes; k; k >>= 2, pw++) {
    uint64_t before = *pw, v = next(state, k & 3);
    diff |= v ^ before;
    if ((k & 3) == GASPARD_ARG_DOUBLE) {
      q = gaspard_put_xor(q, v ^ before);
    } else {
      uint64_t d = v - before, z = d << 1 ^ (uint64_t)((int64_t)d >> 63);
      if (__builtin_expect(z < 0x80, 1))
        *q++ = (uint8_t)z;
      else
        q = gaspard_put_u64(q, z);
    }
    *pw = v;
  }
  if (diff) {
    op |= GASPARD_OP_SAME_NARGS;
  } else {
    op |= GASPARD_OP_SAME_ARGS;
    q = head;
  }
  *p = (uint8_t)op;
  e->last_kind = GASPARD_K_USER;
  e->last_user = user;
  e->last_ts = ts;
  e->events++;
  __atomic_store_n(&c->cur, q, __ATOMIC_RELEASE);
  return 1;
}

static inline __attribute__((always_inline)) void gaspard_emit(
    gaspard_ctx *c, uint64_t ts, unsigned kind, unsigned phase, unsigned flags, const char *file,
    int line, int col, uint64_t user, const uint64_t *fmask, const uint64_t *args, unsigned n) {
  (void)gaspard_emit_body(c, ts, kind, phase, flags, file, line, col, user, fmask, args, n, 0);
}

#endif
