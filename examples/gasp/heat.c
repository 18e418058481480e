/* A 1-D heat stencil written the way a UPC compiler instruments it: four
 * threads (pthreads standing in for UPC threads) each own a block of a shared
 * array, read their neighbours' edge cells (GASP_UPC_GET), write their own
 * block (GASP_UPC_PUT), and meet at a split barrier (notify/wait) every
 * iteration. Thread 3 is given eight times the work, so the others wait for it.
 *
 *   cc -O2 -pthread -I crates/gasp/include examples/gasp/heat.c -Ltarget/release -lgaspard
 *   gaspard run -o out/heat -- ./heat 200 [SWEEPS]
 *
 * SWEEPS (default 1) repeats each thread's stencil sweep: more work per
 * iteration, so that the imbalance outweighs the scheduler's noise on a
 * machine with fewer cores than threads.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gasp_upc.h>
#include <pupc.h>

#define THREADS 4
#define BLOCK 4096

static double grid[2][THREADS * BLOCK];
static int iterations = 100;
static int sweeps = 1;
static pthread_barrier_t bar;
static int g_argc;
static char **g_argv;

/* What a pointer-to-shared looks like to this "runtime": thread and address. */
typedef struct { uint64_t thread; uint64_t addr; } pts_t;

static void *run(void *arg) {
  int me = (int)(intptr_t)arg;
  gasp_context_t ctx = gasp_init(GASP_MODEL_UPC, &g_argc, &g_argv);
  unsigned iter_ev = gasp_create_event(ctx, "iteration", "%d");
  for (int it = 0; it < iterations; it++) {
    double *cur = grid[it & 1], *nxt = grid[(it + 1) & 1];
    gasp_event_notify(ctx, iter_ev, GASP_START, __FILE__, __LINE__, 0, it);
    int lo = me * BLOCK, hi = lo + BLOCK;
    double left = 0, right = 0;
    if (me > 0) {
      pts_t src = {(uint64_t)(me - 1), (uint64_t)(uintptr_t)&cur[lo - 1]};
      gasp_event_notify(ctx, GASP_UPC_GET, GASP_START, __FILE__, __LINE__, 14, 1, &left, &src, sizeof left);
      left = cur[lo - 1];
      gasp_event_notify(ctx, GASP_UPC_GET, GASP_END, __FILE__, __LINE__ - 2, 14, 1, &left, &src, sizeof left);
    }
    if (me < THREADS - 1) {
      pts_t src = {(uint64_t)(me + 1), (uint64_t)(uintptr_t)&cur[hi]};
      gasp_event_notify(ctx, GASP_UPC_GET, GASP_START, __FILE__, __LINE__, 15, 1, &right, &src, sizeof right);
      right = cur[hi];
      gasp_event_notify(ctx, GASP_UPC_GET, GASP_END, __FILE__, __LINE__ - 2, 15, 1, &right, &src, sizeof right);
    }
    int work = (me == THREADS - 1 ? 8 : 1) * sweeps; /* the imbalance */
    gasp_event_notify(ctx, GASP_UPC_FORALL, GASP_START, __FILE__, __LINE__, 5);
    for (int w = 0; w < work; w++)
      for (int i = lo; i < hi; i++) {
        double l = i == lo ? left : cur[i - 1], r = i == hi - 1 ? right : cur[i + 1];
        nxt[i] = cur[i] + 0.25 * (l - 2 * cur[i] + r) + (i == 0 ? 1.0 : 0.0);
      }
    gasp_event_notify(ctx, GASP_UPC_FORALL, GASP_END, __FILE__, __LINE__, 5);
    pts_t dst = {(uint64_t)me, (uint64_t)(uintptr_t)&nxt[lo]};
    gasp_event_notify(ctx, GASP_UPC_MEMPUT, GASP_START, __FILE__, __LINE__, 5, &dst, &nxt[lo],
                      (size_t)BLOCK * sizeof(double));
    gasp_event_notify(ctx, GASP_UPC_MEMPUT, GASP_END, __FILE__, __LINE__ - 2, 5, &dst, &nxt[lo],
                      (size_t)BLOCK * sizeof(double));
    gasp_event_notify(ctx, GASP_UPC_NOTIFY, GASP_START, __FILE__, __LINE__, 5, 1, it);
    gasp_event_notify(ctx, GASP_UPC_NOTIFY, GASP_END, __FILE__, __LINE__, 5, 1, it);
    gasp_event_notify(ctx, GASP_UPC_WAIT, GASP_START, __FILE__, __LINE__, 5, 1, it);
    pthread_barrier_wait(&bar);
    gasp_event_notify(ctx, GASP_UPC_WAIT, GASP_END, __FILE__, __LINE__ - 2, 5, 1, it);
    gasp_event_notify(ctx, iter_ev, GASP_END, __FILE__, __LINE__, 0, it);
  }
  gasp_event_notify(ctx, GASP_UPC_COLLECTIVE_EXIT, GASP_START, __FILE__, __LINE__, 0, 0);
  pthread_barrier_wait(&bar);
  gasp_event_notify(ctx, GASP_UPC_COLLECTIVE_EXIT, GASP_END, __FILE__, __LINE__, 0, 0);
  return NULL;
}

int main(int argc, char **argv) {
  g_argc = argc;
  g_argv = argv;
  if (argc > 1) iterations = atoi(argv[1]);
  if (argc > 2 && atoi(argv[2]) > 0) sweeps = atoi(argv[2]);
  pthread_barrier_init(&bar, NULL, THREADS);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, run, (void *)(intptr_t)i);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  printf("heat: %d iterations on %d threads, grid[0] = %.3f\n", iterations, THREADS, grid[iterations & 1][0]);
  return 0;
}
