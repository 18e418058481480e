/* The GASP entry points that take varargs, which stable Rust cannot define.
 *
 * Each runtime tag is mapped, by its symbolic name from the gasp_upc.h this
 * file is compiled against, to a canonical gaspard kind (the numbers of
 * crates/format/src/kinds.rs), and its varargs are read by the types of the
 * GASP 1.4 tables into fixed 64-bit words. Events a header does not define
 * are simply not compiled in; tags nobody defined are ignored (counted).
 * Varargs are never forwarded to Rust. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "gasp_upc.h"
#include "pupc.h"
#include "gaspard_record.h"

#undef pupc_create_event
#undef pupc_event_start
#undef pupc_event_end
#undef pupc_event_atomic

#ifndef GASPARD_PTS_BYTES
#define GASPARD_PTS_BYTES 16
#endif
#define PTS_WORDS ((GASPARD_PTS_BYTES + 7) / 8)
#define MAX_ARGS 250
#define EXPORT __attribute__((visibility("default")))

/* Read by the Rust side. */
const unsigned gaspard_pts_bytes = GASPARD_PTS_BYTES;
const unsigned gaspard_userevt_start = GASP_UPC_USEREVT_START;
const unsigned gaspard_userevt_end = GASP_UPC_USEREVT_END;

/* Optional: a UPC-compiled helper may define this to resolve a
 * pointer-to-shared into (thread, address). Return 0 on success. */
int gaspard_upc_resolve_pts(const gasp_upc_PTS_t *pts, uint64_t *thread, uint64_t *addr)
    __attribute__((weak));

/* Varargs read by the x86-64 System V rules (see "Varargs" below) rather
 * than by va_arg; GASPARD_PORTABLE_VARARGS forces va_arg. */
#if defined(__x86_64__) && !defined(__ILP32__) && !defined(_WIN32) && \
    !defined(GASPARD_PORTABLE_VARARGS)
#define SYSV_ARGS 1
#endif

/* User-event schemas, by id - GASP_UPC_USEREVT_START. NULL: not created. */
#define USER_SLOTS ((GASP_UPC_USEREVT_END - GASP_UPC_USEREVT_START + 1) > 65536 \
                        ? 65536 : (GASP_UPC_USEREVT_END - GASP_UPC_USEREVT_START + 1))
static const unsigned char *user_schema[USER_SLOTS];
static const unsigned char unreadable_schema[1];

/* The same schemas, when they are short and simple, as 2-bit codes in the
 * low 32 bits, first argument lowest: 1 an int, 2 one integer-class word
 * (long, long long, size_t, intmax_t, ptrdiff_t, void *), 3 a double (the
 * GASPARD_ARG_* codes); 0 ends. The high 32 bits hold the number of
 * arguments. 0 for the others (strings, long doubles, more than 16
 * arguments or 8 doubles, no argument), read from the schema. */
static uint64_t user_words[USER_SLOTS];

static uint64_t schema_words(const unsigned char *schema) {
#ifdef SYSV_ARGS
  uint64_t w = 0;
  unsigned i = 0, doubles = 0;
  for (; schema && schema[i]; i++) {
    unsigned code;
    switch (schema[i]) {
    case 1: code = GASPARD_ARG_INT; break;
    case 2: case 3: case 4: case 5: case 6: case 10: code = GASPARD_ARG_WORD; break;
    case 7: code = GASPARD_ARG_DOUBLE; doubles++; break;
    default: return 0;
    }
    if (i == 16 || doubles > 8) return 0;
    w |= (uint64_t)code << (2 * i);
  }
  return w ? w | (uint64_t)i << 32 : 0;
#else
  (void)schema;
  return 0;
#endif
}

void gaspard_set_user_schema(unsigned id, const unsigned char *schema) {
  unsigned i = id - GASP_UPC_USEREVT_START;
  if (id < GASP_UPC_USEREVT_START || i >= USER_SLOTS) return;
  __atomic_store_n(&user_words[i], schema_words(schema), __ATOMIC_RELAXED);
  __atomic_store_n(&user_schema[i], schema ? schema : unreadable_schema, __ATOMIC_RELEASE);
}

/* Canonical kinds (crates/format/src/kinds.rs). */
enum {
  K_C_FUNC = 1, K_C_MALLOC, K_C_REALLOC, K_C_FREE,
  K_COLLECTIVE_EXIT = 16, K_NONCOLLECTIVE_EXIT, K_NOTIFY, K_WAIT, K_BARRIER, K_FENCE, K_FORALL,
  K_GLOBAL_ALLOC, K_ALL_ALLOC, K_ALLOC, K_FREE, K_GLOBAL_LOCK_ALLOC, K_ALL_LOCK_ALLOC,
  K_LOCK_FREE, K_LOCK, K_LOCK_ATTEMPT, K_UNLOCK, K_MEMCPY, K_MEMGET, K_MEMPUT, K_MEMSET,
  K_GET, K_PUT, K_NB_GET_INIT, K_NB_GET_DATA, K_NB_PUT_INIT, K_NB_PUT_DATA, K_NB_SYNC,
  K_CACHE_MISS, K_CACHE_HIT, K_CACHE_INVALIDATE, K_ALL_BROADCAST, K_ALL_SCATTER,
  K_ALL_GATHER, K_ALL_GATHER_ALL, K_ALL_EXCHANGE, K_ALL_PERMUTE, K_ALL_REDUCE,
  K_ALL_PREFIX_REDUCE
};
_Static_assert(K_ALL_PREFIX_REDUCE < 128, "system kinds fit the encoder's first slots (kind & 127)");

/* --- Varargs ----------------------------------------------------------------
 * On x86-64 (System V), va_arg on a va_list kept in memory loads and stores
 * the list at every argument. Here the list is read once into an args_t held
 * in registers, and each argument taken by the ABI's rules: integer-class
 * words from the register save area while gp_offset < 48, then from the
 * overflow area, 8 bytes each; doubles from the save area while
 * fp_offset < 176, then from the overflow area; a long double from the
 * overflow area, 16-aligned. Since the GASP entry points take six integer
 * arguments before `...`, their varargs words all come from the overflow
 * area. Elsewhere, plain va_arg on a copy of the list. */
#ifdef SYSV_ARGS
typedef struct {
  unsigned gp, fp;
  const uint64_t *ov;
  const char *rs;
} args_t;
#define ARGS_OPEN(r, ap)                                                        \
  ((r).gp = (ap)[0].gp_offset, (r).fp = (ap)[0].fp_offset,                      \
   (r).ov = (const uint64_t *)(ap)[0].overflow_arg_area, (r).rs = (const char *)(ap)[0].reg_save_area)
#define ARGS_CLOSE(r) ((void)0)

static inline uint64_t arg_word(args_t *r) {
  uint64_t v;
  if (__builtin_expect(r->gp < 48, 0)) {
    memcpy(&v, r->rs + r->gp, 8);
    r->gp += 8;
  } else {
    v = *r->ov++;
  }
  return v;
}

static inline double arg_double(args_t *r) {
  double d;
  if (r->fp < 176) {
    memcpy(&d, r->rs + r->fp, 8);
    r->fp += 16;
  } else {
    memcpy(&d, r->ov++, 8);
  }
  return d;
}

static inline long double arg_long_double(args_t *r) {
  const char *p = (const char *)(((uintptr_t)r->ov + 15) & ~(uintptr_t)15);
  long double v;
  memcpy(&v, p, sizeof v);
  r->ov = (const uint64_t *)(p + 16);
  return v;
}

#define A_INT(r) ((uint64_t)(int64_t)(int)arg_word(r))
#define A_SIZE(r) arg_word(r)
#define A_PTR(r) arg_word(r)
#define A_HANDLE(r) arg_word(r)
#define A_DOUBLE(r) arg_double(r)
#define A_LONG_DOUBLE(r) arg_long_double(r)
#else
typedef struct {
  va_list ap;
} args_t;
#define ARGS_OPEN(r, list) va_copy((r).ap, list)
#define ARGS_CLOSE(r) va_end((r).ap)
#define A_INT(r) ((uint64_t)(int64_t)va_arg((r)->ap, int))
#define A_SIZE(r) ((uint64_t)va_arg((r)->ap, size_t))
#define A_PTR(r) ((uint64_t)(uintptr_t)va_arg((r)->ap, void *))
#define A_HANDLE(r) ((uint64_t)(uintptr_t)va_arg((r)->ap, gasp_upc_nb_handle_t))
#define A_DOUBLE(r) va_arg((r)->ap, double)
#define A_LONG_DOUBLE(r) va_arg((r)->ap, long double)
#endif
#define A_STR(r) ((const char *)(uintptr_t)A_PTR(r))

/* A pointer-to-shared argument: its bytes, or (thread, address) through the hook. */
typedef int (*resolve_fn)(const gasp_upc_PTS_t *, uint64_t *, uint64_t *);

static __attribute__((noinline)) unsigned resolve_pts(uint64_t *a, const void *pts,
                                                       resolve_fn hook) {
  uint64_t t = UINT64_MAX, ad = 0;
  if (!pts || hook(pts, &t, &ad) != 0) t = UINT64_MAX, ad = 0;
  a[0] = t;
  a[1] = ad;
  return 2;
}

static inline unsigned put_pts(uint64_t *a, const void *pts, resolve_fn hook) {
  if (__builtin_expect(hook != NULL, 0)) return resolve_pts(a, pts, hook);
  if (__builtin_expect(pts != NULL, 1)) {
    if (GASPARD_PTS_BYTES % 8) a[PTS_WORDS - 1] = 0;
    memcpy(a, pts, GASPARD_PTS_BYTES);
  } else {
    for (unsigned i = 0; i < PTS_WORDS; i++) a[i] = 0;
  }
  return PTS_WORDS;
}
/* (In a fast body, a hook is known to be absent.) */
#define A_PTS(r) (n += put_pts(a + n, (const void *)(uintptr_t)A_PTR(r), fast ? NULL : hook))

/* Reads a user event's varargs by its schema; marks the doubles in `fmask`.
 * With `fast` set, returns READ_NEEDS_CALL at a string (read by calls). */
#define READ_NEEDS_CALL UINT32_MAX
static inline __attribute__((always_inline)) unsigned read_user_args(const unsigned char *s,
                                                                     uint64_t *a, uint64_t *fmask,
                                                                     args_t *r, const int fast) {
  unsigned n = 0;
  for (; *s && n + 9 < MAX_ARGS; s++) {
    switch (*s) {
    case 1: a[n++] = A_INT(r); break;
#ifdef SYSV_ARGS
    case 2: case 3: case 4: case 5: case 6: case 10:
      a[n++] = arg_word(r); /* long, long long, size_t, intmax_t, ptrdiff_t, void *: one word */
      break;
#else
    case 2: a[n++] = (uint64_t)va_arg(r->ap, long); break;
    case 3: a[n++] = (uint64_t)va_arg(r->ap, long long); break;
    case 4: a[n++] = (uint64_t)va_arg(r->ap, size_t); break;
    case 5: a[n++] = (uint64_t)va_arg(r->ap, intmax_t); break;
    case 6: a[n++] = (uint64_t)va_arg(r->ap, ptrdiff_t); break;
    case 10: a[n++] = (uint64_t)(uintptr_t)va_arg(r->ap, void *); break;
#endif
    case 7: {
      double d = A_DOUBLE(r);
      fmask[n / 64] |= 1ull << (n % 64);
      memcpy(&a[n++], &d, 8);
      break;
    }
    case 8: {
      double d = (double)A_LONG_DOUBLE(r);
      fmask[n / 64] |= 1ull << (n % 64);
      memcpy(&a[n++], &d, 8);
      break;
    }
    case 9: {
      if (fast) return READ_NEEDS_CALL;
      const char *str = A_STR(r);
      if (!str) str = "(null)";
      size_t len = strnlen(str, 64);
      a[n++] = len;
      unsigned w = (unsigned)((len + 7) / 8);
      for (unsigned i = 0; i < w; i++) a[n + i] = 0;
      memcpy(&a[n], str, len);
      n += w;
      break;
    }
    default: return n;
    }
  }
  return n;
}
_Static_assert(PTS_WORDS <= 4, "gaspard keeps at most 16 argument words per system event");

/* --- Tags to kinds -----------------------------------------------------------
 * The tags this header defines, with their canonical kinds; looked up through
 * a hash table built at load time (a miss, for a tag the table lacks, scans
 * the list). */
static const struct {
  unsigned tag;
  unsigned char kind;
} tag_list[] = {
#define TAG(T, K) {T, K},
#ifdef GASP_C_FUNC
    TAG(GASP_C_FUNC, K_C_FUNC)
#endif
#ifdef GASP_C_MALLOC
    TAG(GASP_C_MALLOC, K_C_MALLOC)
#endif
#ifdef GASP_C_REALLOC
    TAG(GASP_C_REALLOC, K_C_REALLOC)
#endif
#ifdef GASP_C_FREE
    TAG(GASP_C_FREE, K_C_FREE)
#endif
#ifdef GASP_UPC_COLLECTIVE_EXIT
    TAG(GASP_UPC_COLLECTIVE_EXIT, K_COLLECTIVE_EXIT)
#endif
#ifdef GASP_UPC_NONCOLLECTIVE_EXIT
    TAG(GASP_UPC_NONCOLLECTIVE_EXIT, K_NONCOLLECTIVE_EXIT)
#endif
#ifdef GASP_UPC_NOTIFY
    TAG(GASP_UPC_NOTIFY, K_NOTIFY)
#endif
#ifdef GASP_UPC_WAIT
    TAG(GASP_UPC_WAIT, K_WAIT)
#endif
#ifdef GASP_UPC_BARRIER
    TAG(GASP_UPC_BARRIER, K_BARRIER)
#endif
#ifdef GASP_UPC_FENCE
    TAG(GASP_UPC_FENCE, K_FENCE)
#endif
#ifdef GASP_UPC_FORALL
    TAG(GASP_UPC_FORALL, K_FORALL)
#endif
#ifdef GASP_UPC_GLOBAL_ALLOC
    TAG(GASP_UPC_GLOBAL_ALLOC, K_GLOBAL_ALLOC)
#endif
#ifdef GASP_UPC_ALL_ALLOC
    TAG(GASP_UPC_ALL_ALLOC, K_ALL_ALLOC)
#endif
#ifdef GASP_UPC_ALLOC
    TAG(GASP_UPC_ALLOC, K_ALLOC)
#endif
#ifdef GASP_UPC_FREE
    TAG(GASP_UPC_FREE, K_FREE)
#endif
#ifdef GASP_UPC_GLOBAL_LOCK_ALLOC
    TAG(GASP_UPC_GLOBAL_LOCK_ALLOC, K_GLOBAL_LOCK_ALLOC)
#endif
#ifdef GASP_UPC_ALL_LOCK_ALLOC
    TAG(GASP_UPC_ALL_LOCK_ALLOC, K_ALL_LOCK_ALLOC)
#endif
#ifdef GASP_UPC_LOCK_FREE
    TAG(GASP_UPC_LOCK_FREE, K_LOCK_FREE)
#endif
#ifdef GASP_UPC_LOCK
    TAG(GASP_UPC_LOCK, K_LOCK)
#endif
#ifdef GASP_UPC_LOCK_ATTEMPT
    TAG(GASP_UPC_LOCK_ATTEMPT, K_LOCK_ATTEMPT)
#endif
#ifdef GASP_UPC_UNLOCK
    TAG(GASP_UPC_UNLOCK, K_UNLOCK)
#endif
#ifdef GASP_UPC_MEMCPY
    TAG(GASP_UPC_MEMCPY, K_MEMCPY)
#endif
#ifdef GASP_UPC_MEMGET
    TAG(GASP_UPC_MEMGET, K_MEMGET)
#endif
#ifdef GASP_UPC_MEMPUT
    TAG(GASP_UPC_MEMPUT, K_MEMPUT)
#endif
#ifdef GASP_UPC_MEMSET
    TAG(GASP_UPC_MEMSET, K_MEMSET)
#endif
#ifdef GASP_UPC_GET
    TAG(GASP_UPC_GET, K_GET)
#endif
#ifdef GASP_UPC_PUT
    TAG(GASP_UPC_PUT, K_PUT)
#endif
#ifdef GASP_UPC_NB_GET_INIT
    TAG(GASP_UPC_NB_GET_INIT, K_NB_GET_INIT)
#endif
#ifdef GASP_UPC_NB_GET_DATA
    TAG(GASP_UPC_NB_GET_DATA, K_NB_GET_DATA)
#endif
#ifdef GASP_UPC_NB_PUT_INIT
    TAG(GASP_UPC_NB_PUT_INIT, K_NB_PUT_INIT)
#endif
#ifdef GASP_UPC_NB_PUT_DATA
    TAG(GASP_UPC_NB_PUT_DATA, K_NB_PUT_DATA)
#endif
#ifdef GASP_UPC_NB_SYNC
    TAG(GASP_UPC_NB_SYNC, K_NB_SYNC)
#endif
#ifdef GASP_UPC_CACHE_MISS
    TAG(GASP_UPC_CACHE_MISS, K_CACHE_MISS)
#endif
#ifdef GASP_UPC_CACHE_HIT
    TAG(GASP_UPC_CACHE_HIT, K_CACHE_HIT)
#endif
#ifdef GASP_UPC_CACHE_INVALIDATE
    TAG(GASP_UPC_CACHE_INVALIDATE, K_CACHE_INVALIDATE)
#endif
#ifdef GASP_UPC_ALL_BROADCAST
    TAG(GASP_UPC_ALL_BROADCAST, K_ALL_BROADCAST)
#endif
#ifdef GASP_UPC_ALL_SCATTER
    TAG(GASP_UPC_ALL_SCATTER, K_ALL_SCATTER)
#endif
#ifdef GASP_UPC_ALL_GATHER
    TAG(GASP_UPC_ALL_GATHER, K_ALL_GATHER)
#endif
#ifdef GASP_UPC_ALL_GATHER_ALL
    TAG(GASP_UPC_ALL_GATHER_ALL, K_ALL_GATHER_ALL)
#endif
#ifdef GASP_UPC_ALL_EXCHANGE
    TAG(GASP_UPC_ALL_EXCHANGE, K_ALL_EXCHANGE)
#endif
#ifdef GASP_UPC_ALL_PERMUTE
    TAG(GASP_UPC_ALL_PERMUTE, K_ALL_PERMUTE)
#endif
#ifdef GASP_UPC_ALL_REDUCE
    TAG(GASP_UPC_ALL_REDUCE, K_ALL_REDUCE)
#endif
#ifdef GASP_UPC_ALL_PREFIX_REDUCE
    TAG(GASP_UPC_ALL_PREFIX_REDUCE, K_ALL_PREFIX_REDUCE)
#endif
#undef TAG
    {0, 0} /* end; never matched (kind 0) */
};

#define TAG_BITS 8
#define TAG_SLOTS (1u << TAG_BITS)
_Static_assert(sizeof tag_list / sizeof tag_list[0] < TAG_SLOTS / 2, "the tag table stays sparse");
/* Open addressing; an empty slot has kind 0 (which the dispatch takes for an
 * unknown tag, so that tag 0 needs no test of its own). */
static struct {
  uint32_t tag, kind;
} tag_table[TAG_SLOTS];

static inline unsigned tag_hash(unsigned tag) { return (tag * 0x9e3779b1u) >> (32 - TAG_BITS); }

__attribute__((constructor)) static void build_tag_table(void) {
  for (unsigned i = 0; tag_list[i].kind; i++) {
    unsigned h = tag_hash(tag_list[i].tag);
    while (tag_table[h].kind) h = (h + 1) % TAG_SLOTS;
    tag_table[h].tag = tag_list[i].tag;
    tag_table[h].kind = tag_list[i].kind;
  }
}

/* The kind of a tag not in its first slot, or 0 for a tag of no kind. */
static __attribute__((noinline, cold)) unsigned kind_of_tag_slow(unsigned tag) {
  for (unsigned i = 0; tag_list[i].kind; i++)
    if (tag_list[i].tag == tag) return tag_list[i].kind;
  return 0;
}

/* With `fast` set, 0 rather than a call for a tag not in its first slot. */
static inline __attribute__((always_inline)) unsigned kind_of_tag(unsigned tag, const int fast) {
  unsigned h = tag_hash(tag);
  if (__builtin_expect(tag_table[h].tag == tag, 1) && (fast || tag_table[h].kind))
    return tag_table[h].kind;
  return fast ? 0 : kind_of_tag_slow(tag);
}

/* --- Recording ---------------------------------------------------------------- */

/* Bails out of a fast body: the caller records the event the full way. */
#define SLOW(r)                                                                 \
  do {                                                                          \
    ARGS_CLOSE(r);                                                              \
    return 0;                                                                   \
  } while (0)

/* A user event: its varargs read by its schema. */
static inline __attribute__((always_inline)) int record_user(gaspard_ctx *c, uint64_t ts,
                                                             unsigned evttag, unsigned phase,
                                                             const char *filename, int linenum,
                                                             int colnum, args_t *r, const int fast) {
  const unsigned char *s =
      __atomic_load_n(&user_schema[evttag - GASP_UPC_USEREVT_START], __ATOMIC_ACQUIRE);
  if (__builtin_expect(s == NULL, 0)) {
    if (fast) return 0;
    c->unknown_tags++; /* the spec: unknown tags are ignored */
    return 1;
  }
  unsigned flags = gaspard_upc_resolve_pts ? GASPARD_FLAG_PTS_RESOLVED : 0, n = 0;
#ifdef SYSV_ARGS
  uint64_t w = __atomic_load_n(&user_words[evttag - GASP_UPC_USEREVT_START], __ATOMIC_RELAXED);
#endif
  uint64_t a[MAX_ARGS];
  uint64_t fbits[(MAX_ARGS + 63) / 64];
  const uint64_t *fmask = NULL;
  if (__builtin_expect(s == unreadable_schema, 0)) {
    if (fast) return 0;
    flags |= GASPARD_FLAG_ARGS_UNREAD;
#ifdef SYSV_ARGS
  } else if (w != 0) {
    /* Words in the order of the schema, as read_user_args reads them. */
    fbits[0] = 0; /* at most 16 words: the encoder reads no other */
    for (uint32_t k = (uint32_t)w; k; k >>= 2, n++) {
      if ((k & 3) == 3) {
        double d = A_DOUBLE(r);
        memcpy(&a[n], &d, 8);
        fbits[0] |= 1ull << n;
      } else {
        uint64_t v = arg_word(r);
        a[n] = (k & 3) == 1 ? (uint64_t)(int64_t)(int)v : v;
      }
    }
    fmask = fbits;
#endif
  } else {
    memset(fbits, 0, sizeof fbits);
    n = read_user_args(s, a, fbits, r, fast);
    if (fast && n == READ_NEEDS_CALL) return 0;
    fmask = fbits;
  }
#define EMIT_USER(words)                                                         \
  gaspard_emit_body(c, ts, GASPARD_K_USER, phase, flags, filename, linenum, colnum, evttag, fmask, \
                    a, words, fast)
  if (fast) {
    /* A few words: encoded by code that knows how many. */
    switch (n) {
    case 1: return EMIT_USER(1);
    case 2: return EMIT_USER(2);
    case 3: return EMIT_USER(3);
    case 4: return EMIT_USER(4);
    default: break;
    }
  }
  return EMIT_USER(n);
#undef EMIT_USER
}

/* Decodes one event's varargs and records it into `c`, a context of this
 * thread with measurement on. With `fast` set, calls no function and returns
 * 0, having done nothing, when the event needs one (see gaspard_emit_body);
 * else returns 1. */
/* What record_body may be given; SYSTEM_ENTRY: a system event with the
 * va_list just started by gasp_event_notify. */
enum { ANY_EVENT, SYSTEM_EVENT, USER_EVENT, SYSTEM_ENTRY };
#ifdef SYSV_ARGS
#define BODY_INLINE inline __attribute__((always_inline))
#else
#define BODY_INLINE inline /* va_copy: GCC will not force the inlining */
#endif
static BODY_INLINE int record_body(gaspard_ctx *c, unsigned evttag,
                                                             unsigned phase, const char *filename,
                                                             int linenum, int colnum, va_list ap,
                                                             const int fast, const int which) {
  uint64_t ts;
  if (fast) {
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_expect(!gaspard_clock_is_tsc, 0)) return 0; /* the clock is a call */
    ts = __rdtsc();
#else
    ts = gaspard_now();
#endif
    uint8_t *p = c->cur;
    if (__builtin_expect(phase > GASP_ATOMIC || p == NULL || (size_t)(c->end - p) < GASPARD_MARGIN, 0))
      return 0;
  } else {
    ts = gaspard_now();
    if (__builtin_expect(phase > GASP_ATOMIC, 0)) {
      c->unknown_tags++;
      return 1;
    }
    if (__builtin_expect(gaspard_reserve(c) == NULL, 0)) return 1;
  }
  args_t r;
  ARGS_OPEN(r, ap);
#ifdef SYSV_ARGS
  /* From the GASP entry points, every integer word is in the overflow area:
   * the fast body reads them there without a test each. */
  if (fast && which != SYSTEM_ENTRY && __builtin_expect(r.gp < 48, 0)) SLOW(r);
#endif
  if (which == USER_EVENT || (which == ANY_EVENT && evttag - GASP_UPC_USEREVT_START < USER_SLOTS)) {
    int done = record_user(c, ts, evttag, phase, filename, linenum, colnum, &r, fast);
    ARGS_CLOSE(r);
    return done;
  }
  unsigned end = phase == GASP_END, n = 0, kind = kind_of_tag(evttag, fast);
  uint64_t a[16];
  resolve_fn hook = gaspard_upc_resolve_pts;
  if (fast && __builtin_expect(hook != NULL, 0)) SLOW(r);
  /* System kinds are below 128: the encoder's tests for user events and
   * shared slots fold away. In a fast body, each case encodes on its own,
   * its number of words known. */
#define EMIT_SYSTEM()                                                           \
  gaspard_emit_body(c, ts, kind & 127, phase, hook ? GASPARD_FLAG_PTS_RESOLVED : 0, filename, \
                    linenum, colnum, 0, NULL, a, n, fast)
#define END_CASE                                                                \
  if (fast) {                                                                   \
    ARGS_CLOSE(r);                                                              \
    return EMIT_SYSTEM();                                                       \
  }                                                                             \
  break
  switch (kind) {
  case K_C_FUNC:
    if (fast) SLOW(r);
    a[n++] = gaspard_define_string(c, A_STR(&r));
    END_CASE;
  case K_C_MALLOC: a[n++] = A_SIZE(&r); if (end) a[n++] = A_PTR(&r); END_CASE;
  case K_C_REALLOC:
    a[n++] = A_PTR(&r); a[n++] = A_SIZE(&r); if (end) a[n++] = A_PTR(&r);
    END_CASE;
  case K_C_FREE: a[n++] = A_PTR(&r); END_CASE;
  case K_COLLECTIVE_EXIT: a[n++] = A_INT(&r); END_CASE;
  case K_NONCOLLECTIVE_EXIT: a[n++] = A_INT(&r); END_CASE;
  case K_NOTIFY:
  case K_WAIT:
  case K_BARRIER: a[n++] = A_INT(&r); a[n++] = A_INT(&r); END_CASE;
  case K_FENCE: END_CASE;
  case K_FORALL: END_CASE;
  case K_GLOBAL_ALLOC:
  case K_ALL_ALLOC: a[n++] = A_SIZE(&r); a[n++] = A_SIZE(&r); if (end) A_PTS(&r); END_CASE;
  case K_ALLOC: a[n++] = A_SIZE(&r); if (end) A_PTS(&r); END_CASE;
  case K_FREE: A_PTS(&r); END_CASE;
  case K_GLOBAL_LOCK_ALLOC:
  case K_ALL_LOCK_ALLOC: if (end) A_PTS(&r); END_CASE;
  case K_LOCK_FREE:
  case K_LOCK: A_PTS(&r); END_CASE;
  case K_LOCK_ATTEMPT: A_PTS(&r); if (end) a[n++] = A_INT(&r); END_CASE;
  case K_UNLOCK: A_PTS(&r); END_CASE;
  case K_MEMCPY: A_PTS(&r); A_PTS(&r); a[n++] = A_SIZE(&r); END_CASE;
  case K_MEMGET: a[n++] = A_PTR(&r); A_PTS(&r); a[n++] = A_SIZE(&r); END_CASE;
  case K_MEMPUT: A_PTS(&r); a[n++] = A_PTR(&r); a[n++] = A_SIZE(&r); END_CASE;
  case K_MEMSET: A_PTS(&r); a[n++] = A_INT(&r); a[n++] = A_SIZE(&r); END_CASE;
  case K_GET: a[n++] = A_INT(&r); a[n++] = A_PTR(&r); A_PTS(&r); a[n++] = A_SIZE(&r); END_CASE;
  case K_PUT: a[n++] = A_INT(&r); A_PTS(&r); a[n++] = A_PTR(&r); a[n++] = A_SIZE(&r); END_CASE;
  case K_NB_GET_INIT:
    a[n++] = A_INT(&r); a[n++] = A_PTR(&r); A_PTS(&r); a[n++] = A_SIZE(&r);
    if (end) a[n++] = A_HANDLE(&r);
    END_CASE;
  case K_NB_GET_DATA: a[n++] = A_HANDLE(&r); END_CASE;
  case K_NB_PUT_INIT:
    a[n++] = A_INT(&r); A_PTS(&r); a[n++] = A_PTR(&r); a[n++] = A_SIZE(&r);
    if (end) a[n++] = A_HANDLE(&r);
    END_CASE;
  case K_NB_PUT_DATA:
  case K_NB_SYNC: a[n++] = A_HANDLE(&r); END_CASE;
  case K_CACHE_MISS: a[n++] = A_SIZE(&r); a[n++] = A_SIZE(&r); END_CASE;
  case K_CACHE_HIT:
  case K_CACHE_INVALIDATE: a[n++] = A_SIZE(&r); END_CASE;
  case K_ALL_BROADCAST:
  case K_ALL_SCATTER:
  case K_ALL_GATHER:
  case K_ALL_GATHER_ALL:
  case K_ALL_EXCHANGE: A_PTS(&r); A_PTS(&r); a[n++] = A_SIZE(&r); a[n++] = A_INT(&r); END_CASE;
  case K_ALL_PERMUTE:
    A_PTS(&r); A_PTS(&r); A_PTS(&r); a[n++] = A_SIZE(&r); a[n++] = A_INT(&r);
    END_CASE;
  case K_ALL_REDUCE:
  case K_ALL_PREFIX_REDUCE:
    A_PTS(&r); A_PTS(&r); a[n++] = A_INT(&r); a[n++] = A_SIZE(&r);
    a[n++] = A_SIZE(&r); a[n++] = A_PTR(&r); a[n++] = A_INT(&r); a[n++] = A_INT(&r);
    END_CASE;
  default:
    if (fast) SLOW(r);
    c->unknown_tags++; /* the spec: unknown tags are ignored */
    ARGS_CLOSE(r);
    return 1;
  }
  ARGS_CLOSE(r);
  return EMIT_SYSTEM();
#undef EMIT_SYSTEM
#undef END_CASE
}

/* The full way, for events the fast bodies leave and all events while
 * filters are on (so not optimized for size). */
static __attribute__((noinline)) void record_slow(gaspard_ctx *c, unsigned evttag,
                                                        unsigned phase, const char *filename,
                                                        int linenum, int colnum, va_list ap) {
  (void)record_body(c, evttag, phase, filename, linenum, colnum, ap, 0, ANY_EVENT);
}

/* The fast bodies, else the full way; user events apart, so that the system
 * events' path keeps few registers and a small frame. Out of line: the entry
 * points' test of measurement stays a few instructions. */
static __attribute__((noinline)) void record_user_event(gaspard_ctx *c, unsigned evttag,
                                                        unsigned phase, const char *filename,
                                                        int linenum, int colnum, va_list ap) {
  if (__builtin_expect(!record_body(c, evttag, phase, filename, linenum, colnum, ap, 1, USER_EVENT),
                       0))
    record_slow(c, evttag, phase, filename, linenum, colnum, ap);
}

static __attribute__((noinline)) void record_system_event(gaspard_ctx *c, unsigned evttag,
                                                          unsigned phase, const char *filename,
                                                          int linenum, int colnum, va_list ap) {
  if (__builtin_expect(!record_body(c, evttag, phase, filename, linenum, colnum, ap, 1, SYSTEM_EVENT),
                       0))
    record_slow(c, evttag, phase, filename, linenum, colnum, ap);
}

#ifdef SYSV_ARGS
/* The varargs of a GASP entry point for gaspard_emit_user_short: integer
 * words from the overflow area (all of them there, see "Varargs"), doubles
 * from the register save area while it has some. */
typedef struct {
  const uint64_t *ov;
  const char *rs;
  unsigned fp;
} short_args;

static inline __attribute__((always_inline)) uint64_t short_arg(void *state, unsigned code) {
  short_args *r = state;
  uint64_t v;
  if (code == GASPARD_ARG_DOUBLE && r->fp < 176) {
    memcpy(&v, r->rs + r->fp, 8);
    r->fp += 16;
    return v;
  }
  v = *r->ov++;
  return code == GASPARD_ARG_INT ? (uint64_t)(int64_t)(int)v : v;
}

/* The same from gasp_event_notify: no double named before, at most 8 in a
 * short schema, so every double is in the register save area. */
static inline __attribute__((always_inline)) uint64_t short_arg_entry(void *state, unsigned code) {
  short_args *r = state;
  uint64_t v;
  if (code == GASPARD_ARG_DOUBLE) {
    memcpy(&v, r->rs + r->fp, 8);
    r->fp += 16;
    return v;
  }
  v = *r->ov++;
  return code == GASPARD_ARG_INT ? (uint64_t)(int64_t)(int)v : v;
}

#endif

#ifdef SYSV_ARGS
/* The common case of a user event: a short schema (user_words), the
 * arguments read and encoded in one pass by gaspard_emit_user_short. Returns
 * 0, having done nothing, when the event is not that case. */
static inline __attribute__((always_inline)) int user_short_body(gaspard_ctx *c, unsigned evttag,
                                                                 unsigned phase,
                                                                 const char *filename,
                                                                 int linenum, int colnum,
                                                                 va_list ap, const int entry) {
  if (__builtin_expect(!gaspard_clock_is_tsc, 0)) return 0; /* the clock is a call */
  uint64_t ts = __rdtsc();
  uint8_t *p = c->cur;
  uint64_t w = __atomic_load_n(&user_words[evttag - GASP_UPC_USEREVT_START], __ATOMIC_ACQUIRE);
  if (__builtin_expect(phase > GASP_ATOMIC || p == NULL ||
                           (size_t)(c->end - p) < GASPARD_MARGIN || w == 0 ||
                           (!entry && ap[0].gp_offset < 48),
                       0))
    return 0;
  /* From gasp_event_notify (`entry`), va_start has just set the offsets:
   * six integer arguments named, no floating-point one. */
  short_args r = {(const uint64_t *)ap[0].overflow_arg_area, (const char *)ap[0].reg_save_area,
                  entry ? 48 : ap[0].fp_offset};
  return gaspard_emit_user_short(c, p, ts, phase,
                                 gaspard_upc_resolve_pts ? GASPARD_FLAG_PTS_RESOLVED : 0, filename,
                                 linenum, colnum, evttag, (uint32_t)w, (unsigned)(w >> 32),
                                 entry ? short_arg_entry : short_arg, &r);
}
#endif

/* User events: the common case first, in a small function of its own; else
 * record_user_event. */
static __attribute__((noinline)) void record_user_short(gaspard_ctx *c, unsigned evttag,
                                                        unsigned phase, const char *filename,
                                                        int linenum, int colnum, va_list ap) {
#ifdef SYSV_ARGS
  if (__builtin_expect(user_short_body(c, evttag, phase, filename, linenum, colnum, ap, 0), 1))
    return;
#endif
  record_user_event(c, evttag, phase, filename, linenum, colnum, ap);
}

static inline __attribute__((always_inline)) void record_event(gaspard_ctx *c, unsigned evttag,
                                                               unsigned phase,
                                                               const char *filename, int linenum,
                                                               int colnum, va_list ap) {
  if (__builtin_expect(gaspard_filtering, 0)) /* the fast bodies take the filters to be off */
    record_slow(c, evttag, phase, filename, linenum, colnum, ap);
  else if (evttag - GASP_UPC_USEREVT_START < USER_SLOTS)
    record_user_short(c, evttag, phase, filename, linenum, colnum, ap);
  else
    record_system_event(c, evttag, phase, filename, linenum, colnum, ap);
}

/* The context of a call that did not pass this thread's own: this thread's,
 * when measurement is on for it (a NULL, foreign or other thread's context
 * never crashes the program). */
static __attribute__((noinline, cold)) gaspard_ctx *other_context(gasp_context_t context) {
  gaspard_ctx *c = gaspard_context_for_thread((gaspard_ctx *)context);
  return c && c->on ? c : NULL;
}

static __attribute__((noinline, cold)) void record_other(gasp_context_t context, unsigned evttag,
                                                         unsigned phase, const char *filename,
                                                         int linenum, int colnum, va_list ap) {
  gaspard_ctx *c = other_context(context);
  if (c) record_event(c, evttag, phase, filename, linenum, colnum, ap);
}

/* This thread's own context, given back: the common case. */
static inline int own_context(gasp_context_t context) {
  gaspard_ctx *c = (gaspard_ctx *)context;
  return gaspard_ctx_valid(c) && c->owner == &gaspard_tls_marker;
}

/* The entry points test the context and its measurement flag first: an event
 * not measured costs the test and the return. */
EXPORT void gasp_event_notifyVA(gasp_context_t context, unsigned int evttag, gasp_evttype_t evttype,
                                const char *filename, int linenum, int colnum, va_list ap) {
  if (__builtin_expect(own_context(context), 1)) {
    gaspard_ctx *c = (gaspard_ctx *)context;
    if (__builtin_expect(c->on != 0, 1))
      record_event(c, evttag, (unsigned)evttype, filename, linenum, colnum, ap);
    return;
  }
  record_other(context, evttag, (unsigned)evttype, filename, linenum, colnum, ap);
}

#if defined(SYSV_ARGS) && defined(__ELF__)
/* gasp_event_notify, in assembly (x86-64, ELF): the test of the context and its
 * measurement flag (own_context, then `on`) before anything else, so that an
 * event not measured costs a dozen instructions and no frame; then a jump,
 * registers and stack untouched (so its varargs are those of the call), to
 * gaspard_notify_own for a measured event of this thread's own context, else
 * to gaspard_notify_other. Only r10 and r11, which carry no argument, are
 * used. This leaves gaspard_notify_own free to save registers and keep the
 * fast bodies inline. */
_Static_assert(offsetof(gaspard_ctx, owner) == 16 && offsetof(gaspard_ctx, on) == 24,
               "the offsets the assembly below uses");
_Static_assert(GASPARD_MAX_CONTEXTS == 4096 && sizeof(gaspard_ctx) == 64,
               "gaspard_ctx_valid, as the assembly below does it");
#if defined(__CET__) && (__CET__ & 1)
#define NOTIFY_LANDING "  endbr64\n" /* an indirect branch's target under IBT */
#else
#define NOTIFY_LANDING ""
#endif
__asm__(".text\n"
        ".p2align 4\n"
        ".globl gasp_event_notify\n"
        ".type gasp_event_notify, @function\n"
        "gasp_event_notify:\n"
        ".cfi_startproc\n"
        NOTIFY_LANDING
        "  leaq gaspard_contexts(%rip), %r10\n"
        "  movq %rdi, %r11\n"
        "  subq %r10, %r11\n"
        "  rorq $6, %r11\n"
        "  cmpq $4095, %r11\n"
        "  ja 1f\n"
        "  movq gaspard_tls_marker@gottpoff(%rip), %r10\n"
        "  addq %fs:0, %r10\n"
        "  cmpq %r10, 16(%rdi)\n"
        "  jne 1f\n"
        "  cmpl $0, 24(%rdi)\n"
        "  je 2f\n"
        "  jmp gaspard_notify_own\n"
        "1:\n"
        "  jmp gaspard_notify_other\n"
        "2:\n"
        "  ret\n"
        ".cfi_endproc\n"
        ".size gasp_event_notify, .-gasp_event_notify\n");

/* A measured event of this thread's own context, from gasp_event_notify:
 * the fast bodies inline, else the full way. */
__attribute__((used, noinline, noclone, visibility("hidden"))) void gaspard_notify_own(
    gasp_context_t context, unsigned int evttag, gasp_evttype_t evttype, const char *filename,
    int linenum, int colnum, ...) {
  gaspard_ctx *c = (gaspard_ctx *)context;
  unsigned phase = (unsigned)evttype;
  va_list ap;
  va_start(ap, colnum);
  if (__builtin_expect(gaspard_filtering, 0)) /* the fast bodies take the filters to be off */
    record_slow(c, evttag, phase, filename, linenum, colnum, ap);
  else if (evttag - GASP_UPC_USEREVT_START < USER_SLOTS) {
    if (__builtin_expect(!user_short_body(c, evttag, phase, filename, linenum, colnum, ap, 1), 0))
      record_user_event(c, evttag, phase, filename, linenum, colnum, ap);
  } else if (__builtin_expect(
                 !record_body(c, evttag, phase, filename, linenum, colnum, ap, 1, SYSTEM_ENTRY), 0))
    record_slow(c, evttag, phase, filename, linenum, colnum, ap);
  va_end(ap);
}

/* Any other call of gasp_event_notify: a context not this thread's own
 * (another thread's, NULL or not a context at all). */
__attribute__((used, noinline, noclone, visibility("hidden"))) void gaspard_notify_other(
    gasp_context_t context, unsigned int evttag, gasp_evttype_t evttype, const char *filename,
    int linenum, int colnum, ...) {
  va_list ap;
  va_start(ap, colnum);
  gasp_event_notifyVA(context, evttag, evttype, filename, linenum, colnum, ap);
  va_end(ap);
}
#else
EXPORT void gasp_event_notify(gasp_context_t context, unsigned int evttag, gasp_evttype_t evttype,
                              const char *filename, int linenum, int colnum, ...) {
  va_list ap;
  if (__builtin_expect(own_context(context), 1)) {
    gaspard_ctx *c = (gaspard_ctx *)context;
    if (__builtin_expect(c->on == 0, 0)) return;
    va_start(ap, colnum);
    record_event(c, evttag, (unsigned)evttype, filename, linenum, colnum, ap);
  } else {
    va_start(ap, colnum);
    record_other(context, evttag, (unsigned)evttype, filename, linenum, colnum, ap);
  }
  va_end(ap);
}
#endif

/* pupc_event_* as functions, for code that calls them without the macros. */
#define PUPC_EVENT(name, type)                                                  \
  EXPORT void name(unsigned int evttag, ...) {                                  \
    va_list ap;                                                                 \
    va_start(ap, evttag);                                                       \
    gasp_event_notifyVA(gaspard_pupc_context(), evttag, type, NULL, 0, 0, ap);  \
    va_end(ap);                                                                 \
  }
PUPC_EVENT(pupc_event_start, GASP_START)
PUPC_EVENT(pupc_event_end, GASP_END)
PUPC_EVENT(pupc_event_atomic, GASP_ATOMIC)
