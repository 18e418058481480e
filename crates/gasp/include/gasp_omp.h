/* gasp_omp.h: OpenMP events, an extension of GASP 1.4 defined by gaspard.
 *
 * The GASP specification has no OpenMP section. gaspard records OpenMP
 * programs through OMPT (it is an OpenMP tool) and reports their constructs
 * as these events, of the language model GASPARD_MODEL_OMP. The numbers are
 * the event kinds of gaspard's traces; each START/END pair brackets the
 * construct on one thread. `codeptr` is the construct's code address (the
 * trace reader turns it into a source line); `region` and `mutex` carry the
 * OMPT ompt_sync_region_t and ompt_mutex_t values. See docs/EXTENSIONS.md. */
#ifndef _GASP_OMP_H
#define _GASP_OMP_H

#define GASPARD_MODEL_OMP 5

/* START/ATOMIC: int thread_type; END: (none) */
#define GASP_OMP_THREAD 64u
/* START/ATOMIC: size requested_parallelism, int flags, ptr codeptr; END: int flags, ptr codeptr */
#define GASP_OMP_PARALLEL 65u
/* START/ATOMIC: size actual_parallelism, size index, int flags; END: (none) */
#define GASP_OMP_IMPLICIT_TASK 66u
/* START/ATOMIC: size count, ptr codeptr; END: size count, ptr codeptr */
#define GASP_OMP_LOOP 67u
/* START/ATOMIC: size count, ptr codeptr; END: size count, ptr codeptr */
#define GASP_OMP_SECTIONS 68u
/* START/ATOMIC: size count, ptr codeptr, int executor; END: size count, ptr codeptr, int executor */
#define GASP_OMP_SINGLE 69u
/* START/ATOMIC: size count, ptr codeptr; END: size count, ptr codeptr */
#define GASP_OMP_WORKSHARE 70u
/* START/ATOMIC: size count, ptr codeptr; END: size count, ptr codeptr */
#define GASP_OMP_DISTRIBUTE 71u
/* START/ATOMIC: size count, ptr codeptr; END: size count, ptr codeptr */
#define GASP_OMP_TASKLOOP 72u
/* START/ATOMIC: int region, ptr codeptr; END: int region, ptr codeptr */
#define GASP_OMP_BARRIER 73u
/* START/ATOMIC: int region, ptr codeptr; END: int region, ptr codeptr */
#define GASP_OMP_IMPLICIT_BARRIER 74u
/* START/ATOMIC: int region, ptr codeptr; END: int region, ptr codeptr */
#define GASP_OMP_TASKWAIT 75u
/* START/ATOMIC: int region, ptr codeptr; END: int region, ptr codeptr */
#define GASP_OMP_TASKGROUP 76u
/* START/ATOMIC: int region, ptr codeptr; END: int region, ptr codeptr */
#define GASP_OMP_REDUCTION 77u
/* START/ATOMIC: int region, ptr codeptr; END: int region, ptr codeptr */
#define GASP_OMP_SYNC_WAIT 78u
/* START/ATOMIC: size wait_id, ptr codeptr; END: size wait_id, ptr codeptr */
#define GASP_OMP_LOCK 79u
/* START/ATOMIC: size wait_id, ptr codeptr; END: size wait_id, ptr codeptr */
#define GASP_OMP_NEST_LOCK 80u
/* START/ATOMIC: size wait_id, ptr codeptr; END: size wait_id, ptr codeptr */
#define GASP_OMP_CRITICAL 81u
/* START/ATOMIC: size wait_id, ptr codeptr; END: size wait_id, ptr codeptr */
#define GASP_OMP_ORDERED 82u
/* START/ATOMIC: size wait_id, ptr codeptr; END: size wait_id, ptr codeptr */
#define GASP_OMP_ATOMIC 83u
/* START/ATOMIC: int mutex, size wait_id, ptr codeptr; END: (none) */
#define GASP_OMP_MUTEX_ACQUIRED 84u
/* START/ATOMIC: int flags, int has_dependences, ptr codeptr; END: (none) */
#define GASP_OMP_TASK_CREATE 85u
/* START/ATOMIC: int prior_status; END: (none) */
#define GASP_OMP_TASK_SCHEDULE 86u
/* START/ATOMIC: ptr codeptr; END: ptr codeptr */
#define GASP_OMP_MASKED 87u
/* START/ATOMIC: ptr codeptr; END: (none) */
#define GASP_OMP_FLUSH 88u
/* START/ATOMIC: size count, ptr codeptr; END: size count, ptr codeptr */
#define GASP_OMP_SCOPE 89u

#endif
