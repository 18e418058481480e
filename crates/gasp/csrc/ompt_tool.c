/* An OpenMP tool (OMPT, OpenMP 5.x): LLVM's libomp finds `ompt_start_tool`
 * in the process, or loads this library named by OMP_TOOL_LIBRARIES, and
 * gaspard records the OpenMP constructs as GASP_OMP_* events of the model
 * GASPARD_MODEL_OMP (kinds in crates/format/src/kinds.rs, documented in
 * docs/EXTENSIONS.md). Each construct's code address is kept as an argument
 * (`codeptr`), for the reader to turn into a source line.
 *
 * The OMPT declarations below are the few this tool needs, as the OpenMP
 * specification fixes them (so that building gaspard needs no OpenMP
 * compiler). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gaspard_record.h"

#define EXPORT __attribute__((visibility("default")))
#define GASPARD_MODEL_OMP 5u

/* --- OMPT ABI (OpenMP 5.1, section 4) ------------------------------------ */
typedef union ompt_data_t {
  uint64_t value;
  void *ptr;
} ompt_data_t;
typedef struct ompt_frame_t ompt_frame_t;
typedef uint64_t ompt_wait_id_t;
typedef void (*ompt_interface_fn_t)(void);
typedef ompt_interface_fn_t (*ompt_function_lookup_t)(const char *name);
typedef void (*ompt_callback_t)(void);
typedef int (*ompt_set_callback_t)(int event, ompt_callback_t callback);
typedef int (*ompt_initialize_t)(ompt_function_lookup_t lookup, int initial_device_num,
                                 ompt_data_t *tool_data);
typedef void (*ompt_finalize_t)(ompt_data_t *tool_data);
typedef struct {
  ompt_initialize_t initialize;
  ompt_finalize_t finalize;
  ompt_data_t tool_data;
} ompt_start_tool_result_t;

enum {
  cb_thread_begin = 1, cb_thread_end = 2, cb_parallel_begin = 3, cb_parallel_end = 4,
  cb_task_create = 5, cb_task_schedule = 6, cb_implicit_task = 7, cb_sync_region_wait = 16,
  cb_mutex_released = 17, cb_work = 20, cb_masked = 21, cb_sync_region = 23,
  cb_mutex_acquire = 26, cb_mutex_acquired = 27, cb_nest_lock = 28, cb_flush = 29
};
enum { scope_begin = 1, scope_end = 2, scope_beginend = 3 };
enum {
  sync_barrier = 1, sync_barrier_implicit = 2, sync_barrier_explicit = 3,
  sync_barrier_implementation = 4, sync_taskwait = 5, sync_taskgroup = 6, sync_reduction = 7,
  sync_barrier_implicit_workshare = 8, sync_barrier_implicit_parallel = 9, sync_barrier_teams = 10
};
enum {
  work_loop = 1, work_sections = 2, work_single_executor = 3, work_single_other = 4,
  work_workshare = 5, work_distribute = 6, work_taskloop = 7, work_scope = 8
};
enum {
  mutex_lock = 1, mutex_test_lock = 2, mutex_nest_lock = 3, mutex_test_nest_lock = 4,
  mutex_critical = 5, mutex_atomic = 6, mutex_ordered = 7
};

/* --- canonical kinds (crates/format/src/kinds.rs) ----------------------- */
enum {
  K_OMP_THREAD = 64, K_OMP_PARALLEL, K_OMP_IMPLICIT_TASK, K_OMP_LOOP, K_OMP_SECTIONS,
  K_OMP_SINGLE, K_OMP_WORKSHARE, K_OMP_DISTRIBUTE, K_OMP_TASKLOOP, K_OMP_BARRIER,
  K_OMP_IMPLICIT_BARRIER, K_OMP_TASKWAIT, K_OMP_TASKGROUP, K_OMP_REDUCTION, K_OMP_SYNC_WAIT,
  K_OMP_LOCK, K_OMP_NEST_LOCK, K_OMP_CRITICAL, K_OMP_ORDERED, K_OMP_ATOMIC,
  K_OMP_MUTEX_ACQUIRED, K_OMP_TASK_CREATE, K_OMP_TASK_SCHEDULE, K_OMP_MASKED, K_OMP_FLUSH,
  K_OMP_SCOPE
};

gaspard_ctx *gaspard_context(unsigned model);

static __thread gaspard_ctx *here __attribute__((tls_model("initial-exec")));

static inline gaspard_ctx *ctx(void) {
  gaspard_ctx *c = here;
  if (__builtin_expect(c == NULL, 0)) here = c = gaspard_context(GASPARD_MODEL_OMP);
  if (!c || !c->on || !gaspard_reserve(c)) return NULL;
  return c;
}

static inline void rec(unsigned kind, unsigned phase, const uint64_t *a, unsigned n) {
  gaspard_ctx *c = ctx();
  if (c) gaspard_emit(c, gaspard_now(), kind, phase, 0, NULL, 0, 0, 0, NULL, a, n);
}

static inline unsigned phase_of(int endpoint) {
  return endpoint == scope_begin ? 0u : endpoint == scope_end ? 1u : 2u;
}

#define PTR(p) ((uint64_t)(uintptr_t)(p))

static void on_thread_begin(int type, ompt_data_t *data) {
  (void)data;
  uint64_t a[1] = {(uint64_t)type};
  rec(K_OMP_THREAD, 0, a, 1);
}

static void on_thread_end(ompt_data_t *data) {
  (void)data;
  uint64_t a[1] = {0};
  rec(K_OMP_THREAD, 1, a, 0);
}

/* A parallel region's code address is kept in its parallel data (the tool's
 * to set), for the events of its team that come without one: each thread's
 * implicit task, and the implicit barrier that ends the region on threads
 * that libomp gives none. */
static inline uint64_t region_codeptr(const ompt_data_t *par) { return par ? par->value : 0; }

/* An event's code address, else its parallel region's. */
static inline uint64_t codeptr_or_region(const void *codeptr, const ompt_data_t *par) {
  return codeptr ? PTR(codeptr) : region_codeptr(par);
}

static void on_parallel_begin(ompt_data_t *task, const ompt_frame_t *frame, ompt_data_t *par,
                              unsigned requested, int flags, const void *codeptr) {
  (void)task, (void)frame;
  if (par) par->value = PTR(codeptr);
  uint64_t a[3] = {requested, (uint64_t)(uint32_t)flags, PTR(codeptr)};
  rec(K_OMP_PARALLEL, 0, a, 3);
}

static void on_parallel_end(ompt_data_t *par, ompt_data_t *task, int flags, const void *codeptr) {
  (void)par, (void)task;
  uint64_t a[2] = {(uint64_t)(uint32_t)flags, PTR(codeptr)};
  rec(K_OMP_PARALLEL, 1, a, 2);
}

static void on_implicit_task(int endpoint, ompt_data_t *par, ompt_data_t *task, unsigned actual,
                             unsigned index, int flags) {
  (void)task;
  /* flags tells the initial task (ompt_task_initial, the program's own,
   * outside any parallel region) from a team's implicit task; the code
   * address is its region's (none for the initial task). */
  uint64_t a[4] = {actual, index, (uint64_t)(unsigned)flags,
                   endpoint == scope_begin ? region_codeptr(par) : 0};
  rec(K_OMP_IMPLICIT_TASK, phase_of(endpoint), a, endpoint == scope_begin ? 4 : 0);
}

static void on_work(int wstype, int endpoint, ompt_data_t *par, ompt_data_t *task, uint64_t count,
                    const void *codeptr) {
  (void)par, (void)task;
  unsigned kind;
  uint64_t a[3] = {count, PTR(codeptr), 0};
  unsigned n = 2;
  switch (wstype) {
  case work_loop: kind = K_OMP_LOOP; break;
  case work_sections: kind = K_OMP_SECTIONS; break;
  case work_single_executor: kind = K_OMP_SINGLE; a[2] = 1; n = 3; break;
  case work_single_other: kind = K_OMP_SINGLE; a[2] = 0; n = 3; break;
  case work_workshare: kind = K_OMP_WORKSHARE; break;
  case work_distribute: kind = K_OMP_DISTRIBUTE; break;
  case work_taskloop: kind = K_OMP_TASKLOOP; break;
  default: kind = K_OMP_SCOPE; break;
  }
  rec(kind, phase_of(endpoint), a, n);
}

static unsigned sync_kind(int kind) {
  switch (kind) {
  case sync_barrier_explicit: return K_OMP_BARRIER;
  case sync_taskwait: return K_OMP_TASKWAIT;
  case sync_taskgroup: return K_OMP_TASKGROUP;
  case sync_reduction: return K_OMP_REDUCTION;
  default: return K_OMP_IMPLICIT_BARRIER; /* implicit, implementation, teams, deprecated */
  }
}

static void on_sync_region(int kind, int endpoint, ompt_data_t *par, ompt_data_t *task,
                           const void *codeptr) {
  (void)task;
  uint64_t a[2] = {(uint64_t)kind, codeptr_or_region(codeptr, par)};
  rec(sync_kind(kind), phase_of(endpoint), a, 2);
}

static void on_sync_region_wait(int kind, int endpoint, ompt_data_t *par, ompt_data_t *task,
                                const void *codeptr) {
  (void)task;
  uint64_t a[2] = {(uint64_t)kind, codeptr_or_region(codeptr, par)};
  rec(K_OMP_SYNC_WAIT, phase_of(endpoint), a, 2);
}

static unsigned mutex_kind(int kind) {
  switch (kind) {
  case mutex_lock: case mutex_test_lock: return K_OMP_LOCK;
  case mutex_nest_lock: case mutex_test_nest_lock: return K_OMP_NEST_LOCK;
  case mutex_critical: return K_OMP_CRITICAL;
  case mutex_ordered: return K_OMP_ORDERED;
  default: return K_OMP_ATOMIC;
  }
}

/* A mutex is an interval from acquire to release; `acquired` marks the end of
 * the wait inside it. */
static void on_mutex_acquire(int kind, unsigned hint, unsigned impl, ompt_wait_id_t wait_id,
                             const void *codeptr) {
  (void)hint, (void)impl;
  uint64_t a[2] = {wait_id, PTR(codeptr)};
  rec(mutex_kind(kind), 0, a, 2);
}

static void on_mutex_acquired(int kind, ompt_wait_id_t wait_id, const void *codeptr) {
  uint64_t a[3] = {(uint64_t)kind, wait_id, PTR(codeptr)};
  rec(K_OMP_MUTEX_ACQUIRED, 2, a, 3);
}

static void on_mutex_released(int kind, ompt_wait_id_t wait_id, const void *codeptr) {
  uint64_t a[2] = {wait_id, PTR(codeptr)};
  rec(mutex_kind(kind), 1, a, 2);
}

static void on_task_create(ompt_data_t *task, const ompt_frame_t *frame, ompt_data_t *new_task,
                           int flags, int has_deps, const void *codeptr) {
  (void)task, (void)frame, (void)new_task;
  uint64_t a[3] = {(uint64_t)(uint32_t)flags, (uint64_t)has_deps, PTR(codeptr)};
  rec(K_OMP_TASK_CREATE, 2, a, 3);
}

static void on_task_schedule(ompt_data_t *prior, int prior_status, ompt_data_t *next) {
  (void)prior, (void)next;
  uint64_t a[1] = {(uint64_t)prior_status};
  rec(K_OMP_TASK_SCHEDULE, 2, a, 1);
}

static void on_masked(int endpoint, ompt_data_t *par, ompt_data_t *task, const void *codeptr) {
  (void)par, (void)task;
  uint64_t a[1] = {PTR(codeptr)};
  rec(K_OMP_MASKED, phase_of(endpoint), a, 1);
}

static void on_flush(ompt_data_t *thread, const void *codeptr) {
  (void)thread;
  uint64_t a[1] = {PTR(codeptr)};
  rec(K_OMP_FLUSH, 2, a, 1);
}

static int registered;

static int initialize(ompt_function_lookup_t lookup, int device, ompt_data_t *data) {
  (void)device, (void)data;
  ompt_set_callback_t set = (ompt_set_callback_t)lookup("ompt_set_callback");
  if (!set) return 0;
#define REG(ev, fn) registered += set(ev, (ompt_callback_t)(void (*)(void))fn) > 1
  REG(cb_thread_begin, on_thread_begin);
  REG(cb_thread_end, on_thread_end);
  REG(cb_parallel_begin, on_parallel_begin);
  REG(cb_parallel_end, on_parallel_end);
  REG(cb_implicit_task, on_implicit_task);
  REG(cb_work, on_work);
  REG(cb_sync_region, on_sync_region);
  /* The waiting part of a synchronization region: with LLVM's libomp it
   * spans the region itself (barrier, taskwait, taskgroup) but for a few
   * instructions, so by default it is not asked for (a third of the events
   * of a barrier-bound program); GASPARD_OMPT_WAIT=1 records it. */
  const char *wait = getenv("GASPARD_OMPT_WAIT");
  if (wait && !strcmp(wait, "1")) REG(cb_sync_region_wait, on_sync_region_wait);
  REG(cb_mutex_acquire, on_mutex_acquire);
  REG(cb_mutex_acquired, on_mutex_acquired);
  REG(cb_mutex_released, on_mutex_released);
  REG(cb_task_create, on_task_create);
  REG(cb_task_schedule, on_task_schedule);
  REG(cb_masked, on_masked);
  REG(cb_flush, on_flush);
#undef REG
  return 1; /* nonzero: keep the tool */
}

static void finalize(ompt_data_t *data) { (void)data; }

EXPORT ompt_start_tool_result_t *ompt_start_tool(unsigned int omp_version,
                                                 const char *runtime_version) {
  (void)omp_version, (void)runtime_version;
  const char *off = getenv("GASPARD_OMPT");
  if (off && !strcmp(off, "0")) return NULL;
  static ompt_start_tool_result_t result = {initialize, finalize, {0}};
  return &result;
}
