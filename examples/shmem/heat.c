/* 1-D heat diffusion on OpenSHMEM: each PE owns a block of the rod, puts its
 * edge cells into its neighbours' halo cells, and all PEs meet at a barrier
 * every step.
 *
 *   oshcc -g heat.c -o heat && gaspard run -- oshrun -np 4 ./heat 100 */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>

#define N 1024

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 50;
  shmem_init();
  int me = shmem_my_pe(), np = shmem_n_pes();
  double *u = shmem_calloc(N + 2, sizeof(double)); /* u[0] and u[N+1] are halos */
  double *v = malloc((N + 2) * sizeof(double));
  double *total = shmem_malloc(sizeof(double)), *partial = shmem_malloc(sizeof(double));
  static long psync[SHMEM_REDUCE_SYNC_SIZE];
  static double pwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];
  for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) psync[i] = SHMEM_SYNC_VALUE;
  if (me == 0) u[1] = 1000.0;
  shmem_barrier_all();
  for (int s = 0; s < steps; s++) {
    if (me > 0) shmem_double_put(&u[N + 1], &u[1], 1, me - 1);
    if (me < np - 1) shmem_double_put(&u[0], &u[N], 1, me + 1);
    shmem_barrier_all();
    for (int i = 1; i <= N; i++) v[i] = u[i] + 0.25 * (u[i - 1] - 2 * u[i] + u[i + 1]);
    for (int i = 1; i <= N; i++) u[i] = v[i];
    shmem_barrier_all();
  }
  *partial = 0;
  for (int i = 1; i <= N; i++) *partial += u[i];
  shmem_barrier_all();
  shmem_double_sum_to_all(total, partial, 1, 0, 0, np, pwrk, psync);
  if (me == 0) printf("heat: %d steps on %d PEs, total heat %.3f\n", steps, np, *total);
  shmem_free(partial);
  shmem_free(total);
  shmem_free(u);
  free(v);
  shmem_finalize();
  return 0;
}
