/* A collective-heavy MPI program for the report's memory: every rank calls
 * MPI_Allreduce again and again, and MPI_Bcast every tenth time, with a
 * little work between that grows with the rank (the later ranks arrive
 * late). Each call is one the report's wait-state analysis keeps until
 * every rank is read.
 *
 *   mpicc -O1 -g bench/collectives.c -o collectives
 *   gaspard run -o trace -- mpirun -np 2 ./collectives 1000000 10
 *   /usr/bin/time -v gaspard report trace --json > /dev/null */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  long calls = argc > 1 ? atol(argv[1]) : 1000;
  int work = argc > 2 ? atoi(argv[2]) : 2000;
  double x = rank, y = 0;
  for (long i = 0; i < calls; i++) {
    volatile double w = 0;
    for (int j = 0; j < work * (rank + 1); j++) w += j;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (i % 10 == 0) MPI_Bcast(&y, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    x = y / 3;
  }
  if (rank == 0) printf("collectives: %ld calls, y = %g\n", calls, y);
  MPI_Finalize();
  return 0;
}
