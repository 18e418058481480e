/* A minimal GASP tool on LTTng-UST: each START and END fires one tracepoint
 * (bench/lttng_tp.h) carrying the event's tag and type, as the OTF2 peer keeps
 * region and enter/leave; the event's arguments and source position are not
 * recorded. LTTng-UST time-stamps the event and writes it into a per-CPU ring
 * buffer shared with the consumer daemon of a live session (bench/run.sh
 * starts lttng-sessiond and a session per run). */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "lttng_tp.h"

#include <stdarg.h>

#include "gasp_upc.h"

#define EXPORT __attribute__((visibility("default")))

struct _gasp_context_S {
  int on;
};
static __thread struct _gasp_context_S ctx_of_thread = {1};

EXPORT gasp_context_t gasp_init(gasp_model_t srcmodel, int *argc, char ***argv) {
  (void)srcmodel, (void)argc, (void)argv;
  return &ctx_of_thread;
}

EXPORT void gasp_event_notifyVA(gasp_context_t c, unsigned int evttag, gasp_evttype_t evttype,
                                const char *filename, int linenum, int colnum, va_list ap) {
  (void)filename, (void)linenum, (void)colnum, (void)ap;
  if (__builtin_expect(c == NULL || !c->on, 0)) return;
  lttng_ust_tracepoint(gaspard_bench, event, evttag, (int)evttype);
}

EXPORT void gasp_event_notify(gasp_context_t c, unsigned int evttag, gasp_evttype_t evttype,
                              const char *filename, int linenum, int colnum, ...) {
  va_list ap;
  va_start(ap, colnum);
  gasp_event_notifyVA(c, evttag, evttype, filename, linenum, colnum, ap);
  va_end(ap);
}

EXPORT int gasp_control(gasp_context_t c, int on) {
  if (!c) return 1;
  int was = c->on;
  c->on = on;
  return was;
}

EXPORT unsigned int gasp_create_event(gasp_context_t c, const char *name, const char *desc) {
  (void)c, (void)name, (void)desc;
  return GASP_UPC_USEREVT_START;
}
