/* A diagnostic peer: gaspard's C hot path alone.
 *
 * Linked with crates/gasp/csrc/gasp_shim.c unchanged, this replaces the Rust
 * side of libgaspard.so by stubs: each context owns one 1 MiB buffer, touched
 * once at gasp_init, and a full buffer is simply reused from its start
 * (gaspard_refill). Nothing is encoded or written; there is no flusher
 * thread and no page fault after start-up. The difference between this peer
 * and libgaspard.so is what the buffers, the flusher and the memory traffic
 * cost on top of the hot path's own instructions. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include "gasp_upc.h"
#include "gaspard_record.h"

#define EXPORT __attribute__((visibility("default")))
#define BUFFER_WORDS (1u << 17) /* 1 MiB */

__attribute__((aligned(64))) gaspard_ctx gaspard_contexts[GASPARD_MAX_CONTEXTS];
__thread char gaspard_tls_marker __attribute__((tls_model("initial-exec")));
int gaspard_clock_is_tsc = 1;

static uint64_t *buffers[GASPARD_MAX_CONTEXTS];
static unsigned ncontexts;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void gaspard_set_user_schema(unsigned id, const unsigned char *schema);

uint64_t *gaspard_refill(gaspard_ctx *c, unsigned words) {
  uint64_t *start = buffers[c - gaspard_contexts];
  if (!start || words > BUFFER_WORDS) return NULL;
  c->cur = start;
  c->end = start + BUFFER_WORDS;
  return start;
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
  uint64_t *b = aligned_alloc(64, BUFFER_WORDS * 8);
  if (!b) return NULL;
  memset(b, 0, BUFFER_WORDS * 8);
  buffers[i] = b;
  gaspard_ctx *c = &gaspard_contexts[i];
  c->cur = b;
  c->end = b + BUFFER_WORDS;
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

EXPORT unsigned int gasp_create_event(gasp_context_t context, const char *name, const char *desc) {
  (void)context, (void)name, (void)desc;
  /* "%d %f": an int and a double (the codes of crates/format/src/user.rs). */
  static const unsigned char schema[] = {1, 7, 0};
  gaspard_set_user_schema(GASP_UPC_USEREVT_START, schema);
  return GASP_UPC_USEREVT_START;
}
