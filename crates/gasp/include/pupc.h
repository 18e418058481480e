/* pupc.h: UPC measurement control and user events (GASP Sections 5.2-5.3),
 * and the PUPC proposal's timing functions as an extension.
 *
 * User-event calls compile to nothing unless the code is compiled with
 * instrumentation on (-DGASPARD_PROFILE, which `gaspard cc --profile` adds);
 * then each carries __FILE__ and __LINE__. */
#ifndef _PUPC_H
#define _PUPC_H

#include <stdint.h>
#include "gasp_upc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Timing (PUPC proposal, Section 3.5): ticks of gaspard's clock. */
typedef uint64_t pupc_tick_t;
pupc_tick_t pupc_ticks_now(void);
unsigned int pupc_ticks_to_us(pupc_tick_t ticks);
unsigned int pupc_tick_granularityus(void);

/* This thread's UPC context, created on first use. */
gasp_context_t gaspard_pupc_context(void);

int pupc_control(int on);
unsigned int pupc_create_event(const char *name, const char *desc);
void pupc_event_start(unsigned int evttag, ...);
void pupc_event_end(unsigned int evttag, ...);
void pupc_event_atomic(unsigned int evttag, ...);

#if defined(GASPARD_PROFILE) && GASPARD_PROFILE
#define pupc_event_start(evttag, ...) \
  gasp_event_notify(gaspard_pupc_context(), (evttag), GASP_START, __FILE__, __LINE__, 0, ##__VA_ARGS__)
#define pupc_event_end(evttag, ...) \
  gasp_event_notify(gaspard_pupc_context(), (evttag), GASP_END, __FILE__, __LINE__, 0, ##__VA_ARGS__)
#define pupc_event_atomic(evttag, ...) \
  gasp_event_notify(gaspard_pupc_context(), (evttag), GASP_ATOMIC, __FILE__, __LINE__, 0, ##__VA_ARGS__)
#else
#define pupc_create_event(name, desc) ((void)(name), (void)(desc), 0u)
#define pupc_event_start(evttag, ...) ((void)0)
#define pupc_event_end(evttag, ...) ((void)0)
#define pupc_event_atomic(evttag, ...) ((void)0)
#endif

#ifdef __cplusplus
}
#endif

#endif
