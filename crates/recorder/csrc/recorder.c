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
  e->last_file = NULL;
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
