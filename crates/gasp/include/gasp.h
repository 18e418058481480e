/* gasp.h: the GASP performance tool interface, version 1.4 (tool side by gaspard).
 *
 * A runtime calls gasp_init once per thread (and again per language model in
 * hybrid programs), then reports every event through gasp_event_notify.
 * Event tags are defined in gasp_upc.h (C and UPC events). */
#ifndef _GASP_H
#define _GASP_H

#include <stdarg.h>

#define GASP_VERSION 20051101

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  GASP_MODEL_UPC,
  GASP_MODEL_TITANIUM,
  GASP_MODEL_CAF,
  GASP_MODEL_MPI,
  GASP_MODEL_SHMEM
} gasp_model_t;

typedef enum {
  GASP_START,
  GASP_END,
  GASP_ATOMIC
} gasp_evttype_t;

struct _gasp_context_S;
typedef struct _gasp_context_S *gasp_context_t;

/* Called by each thread after the runtime is initialised, before main.
 * gaspard removes its own --gaspard-KEY=VALUE options from argv. */
gasp_context_t gasp_init(gasp_model_t srcmodel, int *argc, char ***argv);

void gasp_event_notify(gasp_context_t context, unsigned int evttag, gasp_evttype_t evttype,
                       const char *filename, int linenum, int colnum, ...);
void gasp_event_notifyVA(gasp_context_t context, unsigned int evttag, gasp_evttype_t evttype,
                         const char *filename, int linenum, int colnum, va_list varargs);

/* Measurement control, per context (that is, per thread and model). Returns
 * the previous value: nonzero before the first call. */
int gasp_control(gasp_context_t context, int on);

/* Returns an id in GASP_UPC_USEREVT_START..GASP_UPC_USEREVT_END, the same id
 * for the same name. desc is NULL or a printf-style format for the event's
 * arguments. */
unsigned int gasp_create_event(gasp_context_t context, const char *name, const char *desc);

#ifdef __cplusplus
}
#endif

#endif
