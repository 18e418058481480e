/* A lock-heavy OpenMP program for the report's memory: every thread enters
 * one critical section again and again, doing a little work inside and out.
 * Each entry is an acquisition and a hold the report's lock analysis keeps
 * until every thread is read.
 *
 *   clang -fopenmp -O1 -g bench/critical.c -o critical
 *   gaspard run -o trace -- ./critical 1000000
 *   /usr/bin/time -v gaspard report trace --json > /dev/null */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  long entries = argc > 1 ? atol(argv[1]) : 100000;
  double total = 0;
  #pragma omp parallel
  {
    double mine = 0;
    #pragma omp for
    for (long i = 0; i < entries; i++) {
      for (int j = 0; j < 50; j++) mine += (double)((i + j) % 7);
      #pragma omp critical
      total += mine * 1e-9;
    }
  }
  printf("critical: %ld entries, total %.3f\n", entries, total);
  return 0;
}
