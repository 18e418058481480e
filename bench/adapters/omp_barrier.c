/* Time per OpenMP barrier on all threads: ./omp_barrier COUNT */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  double t0 = 0, t1 = 0;
  #pragma omp parallel
  {
    #pragma omp barrier
    #pragma omp master
    t0 = omp_get_wtime();
    for (long i = 0; i < n; i++) {
      #pragma omp barrier
    }
    #pragma omp master
    t1 = omp_get_wtime();
  }
  printf("%.2f\n", (t1 - t0) * 1e9 / n);
  return 0;
}
