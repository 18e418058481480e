/* Many shared objects: OBJS symmetric allocations, each written REPS times
 * by every PE (a put to the next PE). The report has to find, for every
 * access, the allocation that holds its address: bench/many_objects.sh
 * times `gaspard report` on its trace.
 */
#include <shmem.h>
#include <stdio.h>
int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  enum { OBJS = 3000, REPS = 100 };
  static long *o[OBJS];
  for (int i = 0; i < OBJS; i++) o[i] = shmem_malloc(64);
  long v = me;
  for (int r = 0; r < REPS; r++)
    for (int i = 0; i < OBJS; i++) shmem_long_put(o[i], &v, 1, (me + 1) % n);
  shmem_barrier_all();
  if (me == 0) printf("objs: %d objects x %d puts\n", OBJS, REPS);
  shmem_finalize();
  return 0;
}
