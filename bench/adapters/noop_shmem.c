/* A wrapper that intercepts shmem_putmem and records nothing (with
 * -DREAD_CLOCK: only reads the clock around the call). */
#include <stddef.h>
#include "clock_read.h"
void pshmem_putmem(void *dest, const void *src, size_t n, int pe);
void shmem_putmem(void *dest, const void *src, size_t n, int pe) {
  CLOCK_BEGIN;
  pshmem_putmem(dest, src, n, pe);
  CLOCK_END;
}
