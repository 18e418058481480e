/* A GASP tool that does nothing: the floor cost of the interface.
 *
 * The same entry points as libgaspard.so, each reduced to the least any tool
 * does: accept the call and open and close the varargs. */
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

EXPORT void gasp_event_notifyVA(gasp_context_t context, unsigned int evttag,
                                gasp_evttype_t evttype, const char *filename, int linenum,
                                int colnum, va_list varargs) {
  (void)context, (void)evttag, (void)evttype, (void)filename, (void)linenum, (void)colnum;
  (void)varargs;
}

EXPORT void gasp_event_notify(gasp_context_t context, unsigned int evttag, gasp_evttype_t evttype,
                              const char *filename, int linenum, int colnum, ...) {
  va_list ap;
  va_start(ap, colnum);
  (void)context, (void)evttag, (void)evttype, (void)filename, (void)linenum;
  va_end(ap);
}

EXPORT int gasp_control(gasp_context_t context, int on) {
  if (!context) return 1;
  int was = context->on;
  context->on = on;
  return was;
}

EXPORT unsigned int gasp_create_event(gasp_context_t context, const char *name, const char *desc) {
  (void)context, (void)name, (void)desc;
  return GASP_UPC_USEREVT_START;
}
