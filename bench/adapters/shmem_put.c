/* Time per 8-byte shmem_putmem to the next PE: oshrun -np 2 ./shmem_put COUNT */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  shmem_init();
  int me = shmem_my_pe(), np = shmem_n_pes();
  long *x = shmem_malloc(sizeof(long)), v = me;
  shmem_barrier_all();
  double t0 = now();
  for (long i = 0; i < n; i++) shmem_putmem(x, &v, sizeof v, (me + 1) % np);
  shmem_quiet();
  double t1 = now();
  shmem_barrier_all();
  if (me == 0) printf("%.2f\n", (t1 - t0) * 1e9 / n);
  shmem_free(x);
  shmem_finalize();
  return 0;
}
