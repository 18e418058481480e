/* A 1-D halo exchange with MPI one-sided communication: each rank exposes
 * its block in a window and puts its edge cells into its neighbours' halos
 * between two fences; a global residual every 10 steps.
 *
 *   mpicc -g rma_halo.c -o rma_halo && gaspard run -- mpirun -np 4 ./rma_halo 100 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 1024

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int steps = argc > 1 ? atoi(argv[1]) : 50;
  int me, np;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  double *u;
  MPI_Win win;
  MPI_Win_allocate((N + 2) * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &u, &win);
  for (int i = 0; i < N + 2; i++) u[i] = me == 0 && i == 1 ? 1000.0 : 0.0;
  double *v = malloc((N + 2) * sizeof(double));
  double residual = 0;
  for (int s = 0; s < steps; s++) {
    MPI_Win_fence(0, win);
    if (me > 0) MPI_Put(&u[1], 1, MPI_DOUBLE, me - 1, N + 1, 1, MPI_DOUBLE, win);
    if (me < np - 1) MPI_Put(&u[N], 1, MPI_DOUBLE, me + 1, 0, 1, MPI_DOUBLE, win);
    MPI_Win_fence(0, win);
    double local = 0;
    for (int i = 1; i <= N; i++) {
      v[i] = u[i] + 0.25 * (u[i - 1] - 2 * u[i] + u[i + 1]);
      local += (v[i] - u[i]) * (v[i] - u[i]);
    }
    for (int i = 1; i <= N; i++) u[i] = v[i];
    if (s % 10 == 9) MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  if (me == 0) printf("rma_halo: %d steps on %d ranks, residual %.3e\n", steps, np, residual);
  free(v);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}
