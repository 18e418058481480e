/* A message-heavy MPI program for the report's memory: two ranks exchange
 * small messages again and again, each a send and a receive whose times
 * the report's wait-state analysis keeps until every rank is read.
 *
 *   mpicc -O1 -g bench/pingpong.c -o pingpong
 *   gaspard run -o trace -- mpirun -np 2 ./pingpong 1000000
 *   /usr/bin/time -v gaspard report trace --json > /dev/null */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  long rounds = argc > 1 ? atol(argv[1]) : 100000;
  int rank, other;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  other = 1 - rank;
  double v = rank;
  for (long i = 0; i < rounds; i++) {
    if (rank == 0) {
      MPI_Send(&v, 1, MPI_DOUBLE, other, 7, MPI_COMM_WORLD);
      MPI_Recv(&v, 1, MPI_DOUBLE, other, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&v, 1, MPI_DOUBLE, other, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      v += 1;
      MPI_Send(&v, 1, MPI_DOUBLE, other, 7, MPI_COMM_WORLD);
    }
  }
  if (rank == 0) printf("pingpong: %ld rounds, v = %.0f\n", rounds, v);
  MPI_Finalize();
  return 0;
}
