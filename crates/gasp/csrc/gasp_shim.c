/* The GASP entry points that take varargs, which stable Rust cannot define.
 *
 * Each runtime tag is mapped, by its symbolic name from the gasp_upc.h this
 * file is compiled against, to a canonical gaspard kind (the numbers of
 * crates/format/src/kinds.rs), and its varargs are read by the types of the
 * GASP 1.4 tables into fixed 64-bit words. Events a header does not define
 * are simply not compiled in; tags nobody defined are ignored (counted).
 * Varargs are never forwarded to Rust. */
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

/* User-event schemas, by id - GASP_UPC_USEREVT_START. NULL: not created. */
#define USER_SLOTS ((GASP_UPC_USEREVT_END - GASP_UPC_USEREVT_START + 1) > 65536 \
                        ? 65536 : (GASP_UPC_USEREVT_END - GASP_UPC_USEREVT_START + 1))
static const unsigned char *user_schema[USER_SLOTS];
static const unsigned char unreadable_schema[1];

void gaspard_set_user_schema(unsigned id, const unsigned char *schema) {
  unsigned i = id - GASP_UPC_USEREVT_START;
  if (id < GASP_UPC_USEREVT_START || i >= USER_SLOTS) return;
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

#define A_INT(ap) ((uint64_t)(int64_t)va_arg(ap, int))
#define A_SIZE(ap) ((uint64_t)va_arg(ap, size_t))
#define A_PTR(ap) ((uint64_t)(uintptr_t)va_arg(ap, void *))
#define A_HANDLE(ap) ((uint64_t)(uintptr_t)va_arg(ap, gasp_upc_nb_handle_t))

/* A pointer-to-shared argument: its bytes, or (thread, address) through the hook. */
typedef int (*resolve_fn)(const gasp_upc_PTS_t *, uint64_t *, uint64_t *);

static inline unsigned put_pts(uint64_t *a, const void *pts, resolve_fn hook) {
  if (hook) {
    uint64_t t = UINT64_MAX, ad = 0;
    if (!pts || hook(pts, &t, &ad) != 0) t = UINT64_MAX, ad = 0;
    a[0] = t;
    a[1] = ad;
    return 2;
  }
  for (unsigned i = 0; i < PTS_WORDS; i++) a[i] = 0;
  if (pts) memcpy(a, pts, GASPARD_PTS_BYTES);
  return PTS_WORDS;
}
#define A_PTS(ap) (n += put_pts(a + n, va_arg(ap, const void *), hook))

/* Reads a user event's varargs by its schema; marks the doubles in `fmask`. */
static unsigned read_user_args(const unsigned char *s, uint64_t *a, uint64_t *fmask, va_list ap) {
  unsigned n = 0;
  for (; *s && n + 9 < MAX_ARGS; s++) {
    switch (*s) {
    case 1: a[n++] = (uint64_t)(int64_t)va_arg(ap, int); break;
    case 2: a[n++] = (uint64_t)va_arg(ap, long); break;
    case 3: a[n++] = (uint64_t)va_arg(ap, long long); break;
    case 4: a[n++] = (uint64_t)va_arg(ap, size_t); break;
    case 5: a[n++] = (uint64_t)va_arg(ap, intmax_t); break;
    case 6: a[n++] = (uint64_t)va_arg(ap, ptrdiff_t); break;
    case 7: {
      double d = va_arg(ap, double);
      fmask[n / 64] |= 1ull << (n % 64);
      memcpy(&a[n++], &d, 8);
      break;
    }
    case 8: {
      double d = (double)va_arg(ap, long double);
      fmask[n / 64] |= 1ull << (n % 64);
      memcpy(&a[n++], &d, 8);
      break;
    }
    case 9: {
      const char *str = va_arg(ap, const char *);
      if (!str) str = "(null)";
      size_t len = strnlen(str, 64);
      a[n++] = len;
      unsigned w = (unsigned)((len + 7) / 8);
      for (unsigned i = 0; i < w; i++) a[n + i] = 0;
      memcpy(&a[n], str, len);
      n += w;
      break;
    }
    case 10: a[n++] = (uint64_t)(uintptr_t)va_arg(ap, void *); break;
    default: return n;
    }
  }
  return n;
}

_Static_assert(PTS_WORDS <= 4, "gaspard keeps at most 16 argument words per system event");

/* The context to record into, or NULL when measurement is off for it. Runs
 * before va_start, so that an event not measured costs next to nothing. */
static inline gaspard_ctx *measuring(gasp_context_t context) {
  gaspard_ctx *c = gaspard_ctx_here(context);
  return __builtin_expect(c != NULL && c->on, 1) ? c : NULL;
}

/* Decodes one event's varargs into the context's buffer and publishes it. */
static inline __attribute__((always_inline)) void record_event(gaspard_ctx *c, unsigned evttag,
                                                               unsigned phase,
                                                               const char *filename,
                                                               int linenum, int colnum,
                                                               va_list ap) {
  uint64_t ts = gaspard_now();
  unsigned end = phase == GASP_END;
  if (__builtin_expect(phase > GASP_ATOMIC, 0)) {
    c->unknown_tags++;
    return;
  }
  if (__builtin_expect(gaspard_reserve(c) == NULL, 0)) return;
  uint64_t a[MAX_ARGS];
  resolve_fn hook = gaspard_upc_resolve_pts;
  unsigned n = 0, kind, flags = 0;
  uint64_t user = 0;
  uint64_t fbits[(MAX_ARGS + 63) / 64];
  const uint64_t *fmask = NULL;
  switch (evttag) {
#ifdef GASP_C_FUNC
  case GASP_C_FUNC:
    kind = K_C_FUNC;
    a[n++] = gaspard_define_string(c, va_arg(ap, const char *));
    break;
#endif
#ifdef GASP_C_MALLOC
  case GASP_C_MALLOC: kind = K_C_MALLOC; a[n++] = A_SIZE(ap); if (end) a[n++] = A_PTR(ap); break;
#endif
#ifdef GASP_C_REALLOC
  case GASP_C_REALLOC:
    kind = K_C_REALLOC; a[n++] = A_PTR(ap); a[n++] = A_SIZE(ap); if (end) a[n++] = A_PTR(ap);
    break;
#endif
#ifdef GASP_C_FREE
  case GASP_C_FREE: kind = K_C_FREE; a[n++] = A_PTR(ap); break;
#endif
#ifdef GASP_UPC_COLLECTIVE_EXIT
  case GASP_UPC_COLLECTIVE_EXIT: kind = K_COLLECTIVE_EXIT; a[n++] = A_INT(ap); break;
#endif
#ifdef GASP_UPC_NONCOLLECTIVE_EXIT
  case GASP_UPC_NONCOLLECTIVE_EXIT: kind = K_NONCOLLECTIVE_EXIT; a[n++] = A_INT(ap); break;
#endif
#ifdef GASP_UPC_NOTIFY
  case GASP_UPC_NOTIFY: kind = K_NOTIFY; a[n++] = A_INT(ap); a[n++] = A_INT(ap); break;
#endif
#ifdef GASP_UPC_WAIT
  case GASP_UPC_WAIT: kind = K_WAIT; a[n++] = A_INT(ap); a[n++] = A_INT(ap); break;
#endif
#ifdef GASP_UPC_BARRIER
  case GASP_UPC_BARRIER: kind = K_BARRIER; a[n++] = A_INT(ap); a[n++] = A_INT(ap); break;
#endif
#ifdef GASP_UPC_FENCE
  case GASP_UPC_FENCE: kind = K_FENCE; break;
#endif
#ifdef GASP_UPC_FORALL
  case GASP_UPC_FORALL: kind = K_FORALL; break;
#endif
#ifdef GASP_UPC_GLOBAL_ALLOC
  case GASP_UPC_GLOBAL_ALLOC:
    kind = K_GLOBAL_ALLOC; a[n++] = A_SIZE(ap); a[n++] = A_SIZE(ap); if (end) A_PTS(ap);
    break;
#endif
#ifdef GASP_UPC_ALL_ALLOC
  case GASP_UPC_ALL_ALLOC:
    kind = K_ALL_ALLOC; a[n++] = A_SIZE(ap); a[n++] = A_SIZE(ap); if (end) A_PTS(ap);
    break;
#endif
#ifdef GASP_UPC_ALLOC
  case GASP_UPC_ALLOC: kind = K_ALLOC; a[n++] = A_SIZE(ap); if (end) A_PTS(ap); break;
#endif
#ifdef GASP_UPC_FREE
  case GASP_UPC_FREE: kind = K_FREE; A_PTS(ap); break;
#endif
#ifdef GASP_UPC_GLOBAL_LOCK_ALLOC
  case GASP_UPC_GLOBAL_LOCK_ALLOC: kind = K_GLOBAL_LOCK_ALLOC; if (end) A_PTS(ap); break;
#endif
#ifdef GASP_UPC_ALL_LOCK_ALLOC
  case GASP_UPC_ALL_LOCK_ALLOC: kind = K_ALL_LOCK_ALLOC; if (end) A_PTS(ap); break;
#endif
#ifdef GASP_UPC_LOCK_FREE
  case GASP_UPC_LOCK_FREE: kind = K_LOCK_FREE; A_PTS(ap); break;
#endif
#ifdef GASP_UPC_LOCK
  case GASP_UPC_LOCK: kind = K_LOCK; A_PTS(ap); break;
#endif
#ifdef GASP_UPC_LOCK_ATTEMPT
  case GASP_UPC_LOCK_ATTEMPT: kind = K_LOCK_ATTEMPT; A_PTS(ap); if (end) a[n++] = A_INT(ap); break;
#endif
#ifdef GASP_UPC_UNLOCK
  case GASP_UPC_UNLOCK: kind = K_UNLOCK; A_PTS(ap); break;
#endif
#ifdef GASP_UPC_MEMCPY
  case GASP_UPC_MEMCPY: kind = K_MEMCPY; A_PTS(ap); A_PTS(ap); a[n++] = A_SIZE(ap); break;
#endif
#ifdef GASP_UPC_MEMGET
  case GASP_UPC_MEMGET: kind = K_MEMGET; a[n++] = A_PTR(ap); A_PTS(ap); a[n++] = A_SIZE(ap); break;
#endif
#ifdef GASP_UPC_MEMPUT
  case GASP_UPC_MEMPUT: kind = K_MEMPUT; A_PTS(ap); a[n++] = A_PTR(ap); a[n++] = A_SIZE(ap); break;
#endif
#ifdef GASP_UPC_MEMSET
  case GASP_UPC_MEMSET: kind = K_MEMSET; A_PTS(ap); a[n++] = A_INT(ap); a[n++] = A_SIZE(ap); break;
#endif
#ifdef GASP_UPC_GET
  case GASP_UPC_GET:
    kind = K_GET; a[n++] = A_INT(ap); a[n++] = A_PTR(ap); A_PTS(ap); a[n++] = A_SIZE(ap);
    break;
#endif
#ifdef GASP_UPC_PUT
  case GASP_UPC_PUT:
    kind = K_PUT; a[n++] = A_INT(ap); A_PTS(ap); a[n++] = A_PTR(ap); a[n++] = A_SIZE(ap);
    break;
#endif
#ifdef GASP_UPC_NB_GET_INIT
  case GASP_UPC_NB_GET_INIT:
    kind = K_NB_GET_INIT; a[n++] = A_INT(ap); a[n++] = A_PTR(ap); A_PTS(ap); a[n++] = A_SIZE(ap);
    if (end) a[n++] = A_HANDLE(ap);
    break;
#endif
#ifdef GASP_UPC_NB_GET_DATA
  case GASP_UPC_NB_GET_DATA: kind = K_NB_GET_DATA; a[n++] = A_HANDLE(ap); break;
#endif
#ifdef GASP_UPC_NB_PUT_INIT
  case GASP_UPC_NB_PUT_INIT:
    kind = K_NB_PUT_INIT; a[n++] = A_INT(ap); A_PTS(ap); a[n++] = A_PTR(ap); a[n++] = A_SIZE(ap);
    if (end) a[n++] = A_HANDLE(ap);
    break;
#endif
#ifdef GASP_UPC_NB_PUT_DATA
  case GASP_UPC_NB_PUT_DATA: kind = K_NB_PUT_DATA; a[n++] = A_HANDLE(ap); break;
#endif
#ifdef GASP_UPC_NB_SYNC
  case GASP_UPC_NB_SYNC: kind = K_NB_SYNC; a[n++] = A_HANDLE(ap); break;
#endif
#ifdef GASP_UPC_CACHE_MISS
  case GASP_UPC_CACHE_MISS: kind = K_CACHE_MISS; a[n++] = A_SIZE(ap); a[n++] = A_SIZE(ap); break;
#endif
#ifdef GASP_UPC_CACHE_HIT
  case GASP_UPC_CACHE_HIT: kind = K_CACHE_HIT; a[n++] = A_SIZE(ap); break;
#endif
#ifdef GASP_UPC_CACHE_INVALIDATE
  case GASP_UPC_CACHE_INVALIDATE: kind = K_CACHE_INVALIDATE; a[n++] = A_SIZE(ap); break;
#endif
#define COLLECTIVE(TAG, K)                                                      \
  case TAG: kind = K; A_PTS(ap); A_PTS(ap); a[n++] = A_SIZE(ap); a[n++] = A_INT(ap); break;
#ifdef GASP_UPC_ALL_BROADCAST
  COLLECTIVE(GASP_UPC_ALL_BROADCAST, K_ALL_BROADCAST)
#endif
#ifdef GASP_UPC_ALL_SCATTER
  COLLECTIVE(GASP_UPC_ALL_SCATTER, K_ALL_SCATTER)
#endif
#ifdef GASP_UPC_ALL_GATHER
  COLLECTIVE(GASP_UPC_ALL_GATHER, K_ALL_GATHER)
#endif
#ifdef GASP_UPC_ALL_GATHER_ALL
  COLLECTIVE(GASP_UPC_ALL_GATHER_ALL, K_ALL_GATHER_ALL)
#endif
#ifdef GASP_UPC_ALL_EXCHANGE
  COLLECTIVE(GASP_UPC_ALL_EXCHANGE, K_ALL_EXCHANGE)
#endif
#ifdef GASP_UPC_ALL_PERMUTE
  case GASP_UPC_ALL_PERMUTE:
    kind = K_ALL_PERMUTE; A_PTS(ap); A_PTS(ap); A_PTS(ap); a[n++] = A_SIZE(ap); a[n++] = A_INT(ap);
    break;
#endif
#define REDUCTION(TAG, K)                                                       \
  case TAG:                                                                     \
    kind = K; A_PTS(ap); A_PTS(ap); a[n++] = A_INT(ap); a[n++] = A_SIZE(ap);    \
    a[n++] = A_SIZE(ap); a[n++] = A_PTR(ap); a[n++] = A_INT(ap); a[n++] = A_INT(ap); \
    break;
#ifdef GASP_UPC_ALL_REDUCE
  REDUCTION(GASP_UPC_ALL_REDUCE, K_ALL_REDUCE)
#endif
#ifdef GASP_UPC_ALL_PREFIX_REDUCE
  REDUCTION(GASP_UPC_ALL_PREFIX_REDUCE, K_ALL_PREFIX_REDUCE)
#endif
  default: {
    unsigned i = evttag - GASP_UPC_USEREVT_START;
    const unsigned char *s;
    if (evttag < GASP_UPC_USEREVT_START || i >= USER_SLOTS ||
        !(s = __atomic_load_n(&user_schema[i], __ATOMIC_ACQUIRE))) {
      c->unknown_tags++; /* the spec: unknown tags are ignored */
      return;
    }
    kind = GASPARD_K_USER;
    user = evttag;
    if (s == unreadable_schema) {
      flags |= GASPARD_FLAG_ARGS_UNREAD;
    } else {
      memset(fbits, 0, sizeof fbits);
      n = read_user_args(s, a, fbits, ap);
      fmask = fbits;
    }
  }
  }
  if (hook) flags |= GASPARD_FLAG_PTS_RESOLVED;
  gaspard_emit(c, ts, kind, phase, flags, filename, linenum, colnum, user, fmask, a, n);
}

EXPORT void gasp_event_notifyVA(gasp_context_t context, unsigned int evttag, gasp_evttype_t evttype,
                                const char *filename, int linenum, int colnum, va_list ap) {
  gaspard_ctx *c = measuring(context);
  if (c) record_event(c, evttag, (unsigned)evttype, filename, linenum, colnum, ap);
}

EXPORT void gasp_event_notify(gasp_context_t context, unsigned int evttag, gasp_evttype_t evttype,
                              const char *filename, int linenum, int colnum, ...) {
  gaspard_ctx *c = measuring(context);
  if (!c) return;
  va_list ap;
  va_start(ap, colnum);
  record_event(c, evttag, (unsigned)evttype, filename, linenum, colnum, ap);
  va_end(ap);
}

/* pupc_event_* as functions, for code that calls them without the macros. */
#define PUPC_EVENT(name, type)                                                  \
  EXPORT void name(unsigned int evttag, ...) {                                      \
    va_list ap;                                                                 \
    va_start(ap, evttag);                                                       \
    gaspard_ctx *c = measuring(gaspard_pupc_context());                         \
    if (c) record_event(c, evttag, type, NULL, 0, 0, ap);                       \
    va_end(ap);                                                                 \
  }
PUPC_EVENT(pupc_event_start, GASP_START)
PUPC_EVENT(pupc_event_end, GASP_END)
PUPC_EVENT(pupc_event_atomic, GASP_ATOMIC)
