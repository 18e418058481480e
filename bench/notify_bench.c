/* notify_bench: the cost of one event through a GASP tool library.
 *
 *   notify_bench --tool LIB.so --scenario get|user|off [--threads T]
 *                [--events N] [--warmup W] [--label NAME]
 *
 * Loads LIB.so with dlopen(RTLD_NOW | RTLD_LOCAL), finds the gasp_* entry
 * points with dlsym, and has each of T threads (thread 0 is the main thread)
 * call gasp_init for its own context and then send N events (N/2 START/END
 * pairs) through gasp_event_notify:
 *
 *   get   GASP_UPC_GET pairs with the arguments of a 8-byte blocking get
 *         (is_relaxed, dst, pointer-to-shared of 16 bytes, size)
 *   user  pairs of a user event made by gasp_create_event(ctx, "iter", "%d %f"),
 *         with an int and a double that change every iteration
 *   off   GASP_UPC_GET pairs after gasp_control(ctx, 0)
 *
 * W events per thread (same kind) are sent first, untimed. The threads then
 * meet at a barrier and each times its own N events with CLOCK_MONOTONIC.
 * Afterwards the tool's finishing function, when it has one (gaspard_flush,
 * bench_tool_finish), is called and timed apart.
 *
 * Prints one line:
 *   RESULT label=L scenario=S threads=T events=N ns_per_event=X thread_ns=a,b finish_ms=F
 * minflt=M nivcsw=I nvcsw=V
 * where ns_per_event is the mean over threads of (thread wall time / N), and
 * M, I, V are the page faults and involuntary and voluntary context switches
 * of the whole process from before gasp_init to the end of the last loop. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "gasp_upc.h"

typedef gasp_context_t (*init_fn)(gasp_model_t, int *, char ***);
typedef void (*notify_fn)(gasp_context_t, unsigned int, gasp_evttype_t, const char *, int, int,
                          ...);
typedef int (*control_fn)(gasp_context_t, int);
typedef unsigned int (*create_fn)(gasp_context_t, const char *, const char *);
typedef void (*finish_fn)(void);

enum { S_GET, S_USER, S_OFF };

static init_fn p_init;
static notify_fn p_notify;
static control_fn p_control;
static create_fn p_create;
static int scenario = -1;
static unsigned nthreads = 1;
static unsigned long long nevents = 2000000, nwarmup = 20000;
static pthread_barrier_t barrier;

struct worker {
  pthread_t tid;
  unsigned index;
  double ns;
};

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The event loops, kept out of line so each is one plain loop of calls. */
__attribute__((noinline)) static void send_get(notify_fn notify, gasp_context_t ctx,
                                               unsigned long long pairs, char *dst,
                                               const unsigned char *pts) {
  for (unsigned long long i = 0; i < pairs; i++) {
    notify(ctx, GASP_UPC_GET, GASP_START, "bench.c", 42, 7, 1, (void *)dst, (void *)pts,
           (size_t)8);
    notify(ctx, GASP_UPC_GET, GASP_END, "bench.c", 42, 7, 1, (void *)dst, (void *)pts,
           (size_t)8);
  }
}

__attribute__((noinline)) static void send_user(notify_fn notify, gasp_context_t ctx,
                                                unsigned id, unsigned long long pairs,
                                                unsigned long long first) {
  for (unsigned long long i = first; i < first + pairs; i++) {
    int k = (int)i;
    double x = (double)i * 0.5;
    notify(ctx, id, GASP_START, "bench.c", 57, 3, k, x);
    notify(ctx, id, GASP_END, "bench.c", 57, 3, k, x);
  }
}

static void *run(void *arg) {
  struct worker *w = arg;
  char dst[8] = {0};
  unsigned char pts[16];
  for (unsigned i = 0; i < sizeof pts; i++) pts[i] = (unsigned char)(i + 16 * w->index);
  gasp_context_t ctx = p_init(GASP_MODEL_UPC, NULL, NULL);
  unsigned id = 0;
  if (scenario == S_USER) id = p_create(ctx, "iter", "%d %f");
  if (scenario == S_OFF) p_control(ctx, 0);
  unsigned long long warm = nwarmup / 2, pairs = nevents / 2;

  if (scenario == S_USER)
    send_user(p_notify, ctx, id, warm, 0);
  else
    send_get(p_notify, ctx, warm, dst, pts);

  pthread_barrier_wait(&barrier);
  uint64_t t0 = mono_ns();
  if (scenario == S_USER)
    send_user(p_notify, ctx, id, pairs, warm);
  else
    send_get(p_notify, ctx, pairs, dst, pts);
  uint64_t t1 = mono_ns();
  w->ns = pairs ? (double)(t1 - t0) / (double)(2 * pairs) : 0.0;
  return NULL;
}

static void usage(void) {
  fprintf(stderr,
          "usage: notify_bench --tool LIB.so --scenario get|user|off [--threads T]\n"
          "                    [--events N] [--warmup W] [--label NAME]\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *tool = NULL, *label = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 >= argc) usage();
    const char *v = argv[++i];
    if (!strcmp(a, "--tool"))
      tool = v;
    else if (!strcmp(a, "--label"))
      label = v;
    else if (!strcmp(a, "--threads"))
      nthreads = (unsigned)strtoul(v, NULL, 10);
    else if (!strcmp(a, "--events"))
      nevents = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--warmup"))
      nwarmup = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--scenario"))
      scenario = !strcmp(v, "get") ? S_GET : !strcmp(v, "user") ? S_USER : !strcmp(v, "off") ? S_OFF : -2;
    else
      usage();
  }
  if (!tool || scenario < 0 || nthreads < 1 || nthreads > 64) usage();
  if (!label) label = tool;

  void *h = dlopen(tool, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "notify_bench: %s\n", dlerror());
    return 1;
  }
  p_init = (init_fn)dlsym(h, "gasp_init");
  p_notify = (notify_fn)dlsym(h, "gasp_event_notify");
  p_control = (control_fn)dlsym(h, "gasp_control");
  p_create = (create_fn)dlsym(h, "gasp_create_event");
  if (!p_init || !p_notify || !p_control || !p_create) {
    fprintf(stderr, "notify_bench: %s lacks a gasp_* entry point\n", tool);
    return 1;
  }
  finish_fn finish = (finish_fn)dlsym(h, "gaspard_flush");
  if (!finish) finish = (finish_fn)dlsym(h, "bench_tool_finish");

  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  struct worker w[64];
  pthread_barrier_init(&barrier, NULL, nthreads);
  for (unsigned i = 1; i < nthreads; i++) {
    w[i].index = i;
    if (pthread_create(&w[i].tid, NULL, run, &w[i]) != 0) {
      perror("pthread_create");
      return 1;
    }
  }
  w[0].index = 0;
  run(&w[0]);
  for (unsigned i = 1; i < nthreads; i++) pthread_join(w[i].tid, NULL);

  getrusage(RUSAGE_SELF, &r1);
  uint64_t f0 = mono_ns();
  if (finish) finish();
  uint64_t f1 = mono_ns();

  double sum = 0;
  char per[64 * 24] = "";
  size_t off = 0;
  for (unsigned i = 0; i < nthreads; i++) {
    sum += w[i].ns;
    off += (size_t)snprintf(per + off, sizeof per - off, "%s%.3f", i ? "," : "", w[i].ns);
  }
  static const char *names[] = {"get", "user", "off"};
  printf("RESULT label=%s scenario=%s threads=%u events=%llu ns_per_event=%.3f thread_ns=%s "
         "finish_ms=%.3f minflt=%ld nivcsw=%ld nvcsw=%ld\n",
         label, names[scenario], nthreads, nevents / 2 * 2, sum / nthreads, per,
         (double)(f1 - f0) / 1e6, r1.ru_minflt - r0.ru_minflt, r1.ru_nivcsw - r0.ru_nivcsw,
         r1.ru_nvcsw - r0.ru_nvcsw);
  fflush(stdout);
  return 0;
}
