/* A diagnostic peer: gaspard's C hot path alone.
 *
 * Linked with crates/gasp/csrc/gasp_shim.c and crates/recorder/csrc/recorder.c
 * unchanged, this replaces the Rust side of libgaspard.so by stubs: each
 * context owns one 1 MiB buffer, touched once at gasp_init, and a full buffer
 * is simply reused from its start (gaspard_refill) with a fresh encoder
 * generation. Events are encoded as always, but nothing is written; there is
 * no flusher thread and no page fault after start-up. The difference between this peer
 * and libgaspard.so is what the buffers, the flusher and the memory traffic
 * cost on top of the hot path's own instructions. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "gasp_upc.h"
#include "gaspard_record.h"

#define EXPORT __attribute__((visibility("default")))
#define BUFFER_BYTES (1u << 20) /* 1 MiB */

gaspard_enc *gaspard_enc_new(void);
void gaspard_enc_reset(gaspard_enc *e);

static uint8_t *buffers[GASPARD_MAX_CONTEXTS];
static unsigned ncontexts;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void gaspard_set_user_schema(unsigned id, const unsigned char *schema);

uint8_t *gaspard_refill(gaspard_ctx *c) {
  uint8_t *start = buffers[c - gaspard_contexts];
  if (!start) return NULL;
  gaspard_enc_reset(c->enc);
  c->cur = start;
  c->end = start + BUFFER_BYTES - GASPARD_LOST_RESERVE;
  return start;
}

/* A user event's definition with an empty name, as the trace format has it
 * (crates/format/src/codec.rs, write_user_definition). */
size_t gaspard_user_definition(uint64_t id, uint8_t *p, size_t cap) {
  if (cap < 16) return 0;
  uint8_t *q = p;
  *q++ = 0x0b; /* DEF_USER */
  q = gaspard_put_u64(q, id);
  *q++ = 0; /* name: no bytes */
  *q++ = 0; /* no description */
  *q++ = 0; /* readable */
  return (size_t)(q - p);
}

gaspard_ctx *gaspard_context_for_thread(gaspard_ctx *c) {
  (void)c;
  return NULL;
}

void *gaspard_pupc_context(void) { return NULL; }

EXPORT gasp_context_t gasp_init(gasp_model_t srcmodel, int *argc, char ***argv) {
  (void)argc, (void)argv;
  pthread_mutex_lock(&mu);
  unsigned i = ncontexts < GASPARD_MAX_CONTEXTS ? ncontexts++ : GASPARD_MAX_CONTEXTS;
  pthread_mutex_unlock(&mu);
  if (i == GASPARD_MAX_CONTEXTS) return NULL;
  gaspard_clock_is_tsc = 1;
  uint8_t *b = aligned_alloc(64, BUFFER_BYTES);
  gaspard_enc *e = gaspard_enc_new();
  if (!b || !e) return NULL;
  memset(b, 0, BUFFER_BYTES);
  buffers[i] = b;
  gaspard_ctx *c = &gaspard_contexts[i];
  c->enc = e;
  gaspard_enc_reset(e);
  c->cur = b;
  c->end = b + BUFFER_BYTES - GASPARD_LOST_RESERVE;
  c->owner = &gaspard_tls_marker;
  c->model = (uint32_t)srcmodel;
  c->on = 1;
  return (gasp_context_t)c;
}

EXPORT int gasp_control(gasp_context_t context, int on) {
  gaspard_ctx *c = (gaspard_ctx *)context;
  if (!c) return 1;
  int was = c->on != 0;
  c->on = on != 0;
  return was;
}

/* The schema of a description: the codes of crates/format/src/user.rs for
 * %d %ld %lld %zu %jd %td %f %Lf %s %p (anything else is an int), at most
 * 31 arguments. */
static void schema_of(const char *desc, unsigned char *out) {
  unsigned n = 0;
  for (const char *d = desc ? desc : ""; *d && n < 31; d++) {
    if (*d != '%') continue;
    d++;
    unsigned char code = 1;
    if (!strncmp(d, "lld", 3)) code = 3;
    else if (!strncmp(d, "ld", 2)) code = 2;
    else if (!strncmp(d, "zu", 2)) code = 4;
    else if (!strncmp(d, "jd", 2)) code = 5;
    else if (!strncmp(d, "td", 2)) code = 6;
    else if (*d == 'f') code = 7;
    else if (!strncmp(d, "Lf", 2)) code = 8;
    else if (*d == 's') code = 9;
    else if (*d == 'p') code = 10;
    out[n++] = code;
    if (!*d) break;
  }
  out[n] = 0;
}

/* One id per name; its schema from its description (the first one given). */
EXPORT unsigned int gasp_create_event(gasp_context_t context, const char *name, const char *desc) {
  (void)context;
  static const char *names[64];
  static unsigned char schemas[64][32];
  static unsigned nnames;
  pthread_mutex_lock(&mu);
  unsigned i = 0;
  while (i < nnames && strcmp(names[i], name ? name : "") != 0) i++;
  if (i == nnames && nnames < 64) {
    names[nnames++] = name ? name : "";
    schema_of(desc, schemas[i]);
  }
  pthread_mutex_unlock(&mu);
  if (i == 64) i = 63;
  gaspard_set_user_schema(GASP_UPC_USEREVT_START + i, schemas[i]);
  return GASP_UPC_USEREVT_START + i;
}
