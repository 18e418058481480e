/* Time per 8-byte MPI_Put inside a lock_all epoch, flushed every 100:
 * mpirun -np 2 ./mpi_put COUNT */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long n = argc > 1 ? atol(argv[1]) : 100000;
  int me, np;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  long *base, v = me;
  MPI_Win win;
  MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  MPI_Win_lock_all(0, win);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (long i = 0; i < n; i++) {
    MPI_Put(&v, 1, MPI_LONG, (me + 1) % np, 0, 1, MPI_LONG, win);
    if (i % 100 == 99) MPI_Win_flush((me + 1) % np, win);
  }
  MPI_Win_flush_all(win);
  double t1 = MPI_Wtime();
  MPI_Win_unlock_all(win);
  if (me == 0) printf("%.2f\n", (t1 - t0) * 1e9 / n);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}
