/* What the do-nothing wrappers do around each intercepted call: nothing, or,
 * built with -DREAD_CLOCK, read the clock before and after it as every tool
 * that times calls must (the TSC on x86, as gaspard's recorder does when the
 * TSC is invariant; the monotonic clock elsewhere). Each duration is added to
 * a per-thread sum so that no read is optimized away. */
#include <stdint.h>
#ifdef READ_CLOCK
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t clock_read(void) { return __rdtsc(); }
#else
#include <time.h>
static inline uint64_t clock_read(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
#endif
static __thread uint64_t clock_sink;
#define CLOCK_BEGIN uint64_t clock_at = clock_read()
#define CLOCK_END clock_sink += clock_read() - clock_at
/* One read, for a callback that is one end of an interval (OMPT). */
#define CLOCK_ONCE clock_sink += clock_read()
#else
#define CLOCK_BEGIN (void)0
#define CLOCK_END (void)0
#define CLOCK_ONCE (void)0
#endif
