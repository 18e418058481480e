/* Storage the C hot path reaches without a function call, and the encoder's
 * slow paths: definitions of callsites, strings and user events. */
#include <stdlib.h>
#include "gaspard_record.h"

__attribute__((aligned(64))) gaspard_ctx gaspard_contexts[GASPARD_MAX_CONTEXTS];
__thread char gaspard_tls_marker __attribute__((tls_model("initial-exec")));
int gaspard_clock_is_tsc = 0;

/* Accessors for Rust, which cannot name a C thread-local. */
const void *gaspard_tls_marker_addr(void) { return &gaspard_tls_marker; }
uint64_t gaspard_clock_now(void) { return gaspard_now(); }

/* Bytes per pointer-to-shared argument; the GASP shim defines the real value. */
__attribute__((weak)) const unsigned gaspard_pts_bytes = 16;
unsigned gaspard_pts_bytes_value(void) { return gaspard_pts_bytes; }

void gaspard_enc_reset(gaspard_enc *e);

/* The file of the callsite key a chunk starts with: no event's. */
static const char no_file[1];

/* A fresh encoder, or NULL when memory is short. */
gaspard_enc *gaspard_enc_new(void) {
  gaspard_enc *e = calloc(1, sizeof *e);
  if (e) gaspard_enc_reset(e);
  return e;
}

/* Starts a new chunk: every cache entry of the old generation becomes absent. */
void gaspard_enc_reset(gaspard_enc *e) {
  e->gen++;
  if (e->gen == 0) { /* wrapped: clear so that no stale entry matches */
    memset(e, 0, sizeof *e);
    e->gen = 1;
  }
  e->events = 0;
  e->base_ts = e->last_ts = 0;
  e->nsites = e->nstrings = 0;
  e->last_kind = 0xffffffffu;
  e->last_site = 0xffffffffu; /* no SAME_SITE on a chunk's first event */
  e->last_user = 0;
  for (unsigned i = 0; i < sizeof e->prev / sizeof e->prev[0]; i++) e->prev[i].n = 0;
  for (unsigned i = 0; i < GASPARD_SHARED_SLOTS; i++) e->shared[i].n = 0;
  e->last_file = no_file; /* no event's key: the first event looks its site up */
  e->last_line = 0xffffffffu;
}

uint32_t gaspard_define_string(gaspard_ctx *c, const void *ptr) {
  if (!ptr) return 0;
  gaspard_enc *e = c->enc;
  gaspard_string_slot *s = &e->strings[((uintptr_t)ptr >> 3) % GASPARD_STRING_SLOTS];
  if (s->gen == e->gen && s->ptr == ptr) return s->id;
  uint32_t id = ++e->nstrings;
  size_t len = strnlen((const char *)ptr, GASPARD_MAX_STRING);
  uint8_t *p = c->cur;
  *p++ = GASPARD_DEF_STRING;
  p = gaspard_put_u64(p, id);
  p = gaspard_put_u64(p, len);
  memcpy(p, ptr, len);
  p += len;
  c->cur = p;
  s->ptr = ptr;
  s->id = id;
  s->gen = e->gen;
  return id;
}

uint32_t gaspard_define_site(gaspard_ctx *c, const char *file, uint32_t line, uint32_t col) {
  gaspard_enc *e = c->enc;
  uint32_t fid = gaspard_define_string(c, file);
  uint32_t id = ++e->nsites;
  uint8_t *p = c->cur;
  *p++ = GASPARD_DEF_CALLSITE;
  p = gaspard_put_u64(p, id);
  p = gaspard_put_u64(p, fid);
  p = gaspard_put_u64(p, line);
  p = gaspard_put_u64(p, col);
  c->cur = p;
  gaspard_site_slot *s = &e->sites[((uintptr_t)file * 31u + line * 7u + col) % GASPARD_SITE_SLOTS];
  s->file = file;
  s->line = line;
  s->col = col;
  s->id = id;
  s->gen = e->gen;
  return id;
}

void gaspard_define_user(gaspard_ctx *c, uint64_t id) {
  gaspard_enc *e = c->enc;
  /* What remains of the margin after this event's other definitions. */
  size_t cap = GASPARD_MARGIN - 2 * (GASPARD_MAX_STRING + 32) - 1024 - 11 * GASPARD_MAX_ARGS;
  c->cur += gaspard_user_definition(id, c->cur, cap);
  gaspard_user_slot *u = &e->users[id % GASPARD_USER_SLOTS];
  u->id = id;
  u->gen = e->gen;
}

/* For Rust: records an event with plain integer arguments (no user event).
 * With `checked` zero, the caller guarantees the room (a GASPARD_LOST record
 * in the reserve). */
void gaspard_emit_plain(gaspard_ctx *c, unsigned kind, unsigned phase, const uint64_t *args,
                        unsigned n, int checked) {
  if (checked && !gaspard_reserve(c)) return;
  if (!c->cur) return;
  gaspard_emit(c, gaspard_now(), kind, phase, 0, NULL, 0, 0, 0, NULL, args, n);
}

/* For Rust: the encoder's chunk bookkeeping. */
void gaspard_enc_stats(const gaspard_enc *e, uint32_t *events, uint64_t *base_ts,
                       uint64_t *last_ts) {
  *events = e->events;
  *base_ts = e->base_ts;
  *last_ts = e->last_ts;
}

/* --- Filters ------------------------------------------------------------ */

int gaspard_filtering = 0;
static uint64_t skip_kind[GASPARD_FILTER_KINDS / 64];
static uint64_t skip_user[GASPARD_FILTER_USERS / 64];
static uint32_t user_base = 0x10000u;
#define GASPARD_SITE_RULES 64
static struct {
  char file[256];
  size_t len;
  uint32_t line; /* 0: every line */
} site_rules[GASPARD_SITE_RULES];
static unsigned nsite_rules;
/* The last file seen by this thread and the rules whose file it matches. */
static __thread const char *rule_file;
static __thread uint64_t rule_mask;

void gaspard_filter_kind(unsigned kind) {
  if (kind < GASPARD_FILTER_KINDS) skip_kind[kind / 64] |= 1ull << (kind % 64);
}

void gaspard_filter_user(uint32_t base, uint32_t index) {
  user_base = base;
  if (index < GASPARD_FILTER_USERS) __atomic_fetch_or(&skip_user[index / 64], 1ull << (index % 64), __ATOMIC_RELAXED);
}

/* A rule: files whose path ends with `file` (after a '/' or whole), at
 * `line` or at every line when it is 0. Returns 0 when there is no room. */
int gaspard_filter_site(const char *file, uint32_t line) {
  size_t len = strlen(file);
  if (nsite_rules == GASPARD_SITE_RULES || len == 0 || len >= sizeof site_rules[0].file) return 0;
  memcpy(site_rules[nsite_rules].file, file, len + 1);
  site_rules[nsite_rules].len = len;
  site_rules[nsite_rules].line = line;
  nsite_rules++;
  return 1;
}

void gaspard_filter_enable(int on) { gaspard_filtering = on; }

static uint64_t rules_of(const char *file) {
  uint64_t m = 0;
  size_t len = strnlen(file, GASPARD_MAX_STRING);
  for (unsigned i = 0; i < nsite_rules; i++) {
    size_t r = site_rules[i].len;
    if (r <= len && memcmp(file + len - r, site_rules[i].file, r) == 0 &&
        (r == len || file[len - r - 1] == '/'))
      m |= 1ull << i;
  }
  return m;
}

int gaspard_filtered(gaspard_ctx *c, unsigned kind, uint64_t user, const char *file, int line) {
  int skip = 0;
  if (kind == GASPARD_K_USER) {
    uint64_t i = user - user_base;
    skip = i < GASPARD_FILTER_USERS && (__atomic_load_n(&skip_user[i / 64], __ATOMIC_RELAXED) >> (i % 64) & 1);
  } else if (kind >= 256 && kind < 512) {
    return 0; /* gaspard's own events are always kept */
  } else if (kind < GASPARD_FILTER_KINDS) {
    skip = skip_kind[kind / 64] >> (kind % 64) & 1;
  }
  if (!skip && nsite_rules && file) {
    if (file != rule_file) rule_file = file, rule_mask = rules_of(file);
    for (uint64_t m = rule_mask; m && !skip; m &= m - 1) {
      uint32_t l = site_rules[__builtin_ctzll(m)].line;
      skip = l == 0 || l == (uint32_t)line;
    }
  }
  if (skip) c->filtered++;
  return skip;
}
