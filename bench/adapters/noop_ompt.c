/* An OMPT tool that registers the callbacks gaspard registers by default and
 * does nothing in them: the floor cost of being an OpenMP tool (with
 * -DREAD_CLOCK: each callback only reads the clock, as a tool that times
 * the constructs must). */
#include <stdint.h>
#include <stddef.h>
#include "clock_read.h"
typedef union { uint64_t value; void *ptr; } ompt_data_t;
typedef void (*ompt_interface_fn_t)(void);
typedef ompt_interface_fn_t (*ompt_function_lookup_t)(const char *);
typedef void (*ompt_callback_t)(void);
typedef int (*ompt_set_callback_t)(int, ompt_callback_t);
typedef struct {
  int (*initialize)(ompt_function_lookup_t, int, ompt_data_t *);
  void (*finalize)(ompt_data_t *);
  ompt_data_t tool_data;
} ompt_start_tool_result_t;
static void nothing(void) { CLOCK_ONCE; }
static int init(ompt_function_lookup_t lookup, int dev, ompt_data_t *d) {
  (void)dev, (void)d;
  ompt_set_callback_t set = (ompt_set_callback_t)lookup("ompt_set_callback");
  /* gaspard's default set: thread, parallel, task create and schedule,
   * implicit task, mutex released, work, masked, sync region, mutex acquire
   * and acquired, flush (sync_region_wait, 16, only with GASPARD_OMPT_WAIT=1). */
  int events[] = {1, 2, 3, 4, 5, 6, 7, 17, 20, 21, 23, 26, 27, 29};
  for (unsigned i = 0; i < sizeof events / sizeof *events; i++) set(events[i], nothing);
  return 1;
}
static void fini(ompt_data_t *d) { (void)d; }
ompt_start_tool_result_t *ompt_start_tool(unsigned v, const char *r) {
  (void)v, (void)r;
  static ompt_start_tool_result_t res = {init, fini, {0}};
  return &res;
}
