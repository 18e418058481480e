/* Conjugate-gradient iterations on a 1-D Laplacian with OpenMP: parallel
 * loops with reductions, a critical section for the progress log, and an
 * explicit barrier.
 *
 *   clang -fopenmp -g cg.c -o cg && gaspard run -- ./cg 50 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define N 20000

static double A(const double *x, int i) {
  return 2 * x[i] - (i > 0 ? x[i - 1] : 0) - (i < N - 1 ? x[i + 1] : 0);
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 30;
  double *x = calloc(N, sizeof *x), *r = malloc(N * sizeof *r), *p = malloc(N * sizeof *p),
         *q = malloc(N * sizeof *q);
  double rr = 0, logged = 0;
  for (int i = 0; i < N; i++) r[i] = p[i] = 1.0;
  #pragma omp parallel for reduction(+:rr)
  for (int i = 0; i < N; i++) rr += r[i] * r[i];
  for (int k = 0; k < iters; k++) {
    double pq = 0, rr2 = 0;
    #pragma omp parallel
    {
      #pragma omp for reduction(+:pq)
      for (int i = 0; i < N; i++) {
        q[i] = A(p, i);
        pq += p[i] * q[i];
      }
      double alpha = rr / pq;
      #pragma omp for reduction(+:rr2)
      for (int i = 0; i < N; i++) {
        x[i] += alpha * p[i];
        r[i] -= alpha * q[i];
        rr2 += r[i] * r[i];
      }
      #pragma omp barrier
      #pragma omp for
      for (int i = 0; i < N; i++) p[i] = r[i] + rr2 / rr * p[i];
      #pragma omp critical
      logged += 1;
    }
    rr = rr2;
  }
  printf("cg: %d iterations, residual %.3e, %d thread logs\n", iters, rr, (int)logged);
  free(x), free(r), free(p), free(q);
  return 0;
}
