/* Generates a big, realistic trace through gaspard's real recorder: one
 * process of a UPC-like SPMD program, THREADS threads, each iterating
 * reads of its neighbours' edges (GASP_UPC_GET), a forall loop, a bulk put
 * of its own block (GASP_UPC_MEMPUT), a split barrier (notify/wait) and a user
 * region ("step", with the iteration as argument): 14 events per iteration.
 * Run it NPROCS times with the same GASPARD_DIR (bench/analysis.sh does) to
 * get a trace of NPROCS processes.
 *
 *   cc -O2 -pthread -rdynamic -I crates/gasp/include bench/gen_trace.c \
 *     -L target/release -lgaspard -o gen_trace
 *   GASPARD_DIR=big ./gen_trace PROC NPROCS THREADS EVENTS_PER_THREAD
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <gasp_upc.h>

typedef struct {
  uint64_t thread, addr;
} pts_t;

/* Pointers-to-shared here are (thread, address) pairs. */
int gaspard_upc_resolve_pts(const gasp_upc_PTS_t *pts, uint64_t *thread, uint64_t *addr) {
  const pts_t *p = (const pts_t *)pts;
  *thread = p->thread;
  *addr = p->addr;
  return 0;
}

static int proc, nprocs, threads;
static long events;
static pthread_barrier_t bar;
static int g_argc;
static char **g_argv;
#define BLOCK 512
static double data[64][BLOCK];

static void *run(void *arg) {
  int t = (int)(intptr_t)arg;
  uint64_t me = (uint64_t)proc * threads + t, all = (uint64_t)nprocs * threads;
  gasp_context_t ctx = gasp_init(GASP_MODEL_UPC, &g_argc, &g_argv);
  unsigned step = gasp_create_event(ctx, "step", "%d");
  double *mine = data[t % 64];
  long iters = events / 14;
  for (long it = 0; it < iters; it++) {
    gasp_event_notify(ctx, step, GASP_START, __FILE__, __LINE__, 0, (int)it);
    double left, right;
    pts_t l = {(me + all - 1) % all, 0x100000 + (BLOCK - 1) * 8}, r = {(me + 1) % all, 0x100000};
    gasp_event_notify(ctx, GASP_UPC_GET, GASP_START, __FILE__, __LINE__, 0, 1, &left, &l, sizeof left);
    left = mine[0];
    gasp_event_notify(ctx, GASP_UPC_GET, GASP_END, __FILE__, __LINE__ - 2, 0, 1, &left, &l, sizeof left);
    gasp_event_notify(ctx, GASP_UPC_GET, GASP_START, __FILE__, __LINE__, 0, 1, &right, &r, sizeof right);
    right = mine[BLOCK - 1];
    gasp_event_notify(ctx, GASP_UPC_GET, GASP_END, __FILE__, __LINE__ - 2, 0, 1, &right, &r, sizeof right);
    gasp_event_notify(ctx, GASP_UPC_FORALL, GASP_START, __FILE__, __LINE__, 0);
    for (int i = 1; i < 64; i++) mine[i] = 0.5 * (mine[i - 1] + mine[i + 1]) + left * right * 1e-9;
    gasp_event_notify(ctx, GASP_UPC_FORALL, GASP_END, __FILE__, __LINE__, 0);
    pts_t d = {me, 0x100000};
    gasp_event_notify(ctx, GASP_UPC_MEMPUT, GASP_START, __FILE__, __LINE__, 0, &d, mine, (size_t)BLOCK * 8);
    gasp_event_notify(ctx, GASP_UPC_MEMPUT, GASP_END, __FILE__, __LINE__ - 1, 0, &d, mine, (size_t)BLOCK * 8);
    gasp_event_notify(ctx, GASP_UPC_NOTIFY, GASP_START, __FILE__, __LINE__, 0, 1, (int)it);
    gasp_event_notify(ctx, GASP_UPC_NOTIFY, GASP_END, __FILE__, __LINE__, 0, 1, (int)it);
    gasp_event_notify(ctx, GASP_UPC_WAIT, GASP_START, __FILE__, __LINE__, 0, 1, (int)it);
    if (it % 64 == 0) pthread_barrier_wait(&bar);
    gasp_event_notify(ctx, GASP_UPC_WAIT, GASP_END, __FILE__, __LINE__ - 2, 0, 1, (int)it);
    gasp_event_notify(ctx, step, GASP_END, __FILE__, __LINE__, 0, (int)it);
  }
  return NULL;
}

int main(int argc, char **argv) {
  g_argc = argc;
  g_argv = argv;
  if (argc != 5) {
    fprintf(stderr, "usage: %s PROC NPROCS THREADS EVENTS_PER_THREAD\n", argv[0]);
    return 2;
  }
  proc = atoi(argv[1]);
  nprocs = atoi(argv[2]);
  threads = atoi(argv[3]);
  events = atol(argv[4]);
  if (nprocs < 1 || proc < 0 || proc >= nprocs || threads < 1 || threads > 64 || events < 14) {
    fprintf(stderr, "%s: bad arguments\n", argv[0]);
    return 2;
  }
  pthread_barrier_init(&bar, NULL, (unsigned)threads);
  pthread_t th[64];
  for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, run, (void *)(intptr_t)i);
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
  return 0;
}
