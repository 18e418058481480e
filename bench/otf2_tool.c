/* A minimal GASP tool that writes its events with OTF2's event writer, the
 * writer Score-P uses: the reference the benchmark compares gaspard with.
 *
 * One OTF2 location (and event writer) per gasp_init, that is per thread;
 * START is OTF2_EvtWriter_Enter and END is OTF2_EvtWriter_Leave of one region
 * per event type (the event's arguments are not recorded: Enter/Leave have
 * no place for them). Timestamps are read per event with rdtsc, as gaspard
 * does (BENCH_OTF2_CLOCK=monotonic: clock_gettime(CLOCK_MONOTONIC)).
 * Buffers go to disk through OTF2's flush callbacks whenever a chunk is full,
 * in the recording thread. The archive goes to $BENCH_OTF2_DIR and is closed,
 * with minimal global definitions, by bench_tool_finish() (the driver calls
 * it after the timed part). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include <otf2/otf2.h>
#include <otf2/OTF2_Pthread_Locks.h>

#include "gasp_upc.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_LOCATIONS 256
#define USER_REGIONS 64
/* Regions: 0 = GASP_UPC_GET, 1..USER_REGIONS = user events, last = any other tag. */
#define REGION_OTHER (1 + USER_REGIONS)

struct _gasp_context_S {
  OTF2_EvtWriter *writer;
  uint64_t location;
  int on;
};

static OTF2_Archive *archive;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct _gasp_context_S contexts[MAX_LOCATIONS];
static unsigned ncontexts;
static int use_monotonic;
static uint64_t t_start, mono_start, realtime_start;
static unsigned user_events;
static char *user_names[USER_REGIONS];

static uint64_t mono_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t now(void) {
  if (__builtin_expect(use_monotonic, 0)) return mono_ns(CLOCK_MONOTONIC);
  return __rdtsc();
}

static OTF2_FlushType pre_flush(void *user, OTF2_FileType type, OTF2_LocationRef loc,
                                void *caller, bool final) {
  (void)user, (void)type, (void)loc, (void)caller, (void)final;
  return OTF2_FLUSH;
}

static OTF2_TimeStamp post_flush(void *user, OTF2_FileType type, OTF2_LocationRef loc) {
  (void)user, (void)type, (void)loc;
  return now();
}

static OTF2_FlushCallbacks flush_callbacks = {
    .otf2_pre_flush = pre_flush,
    .otf2_post_flush = post_flush,
};

static void die(const char *what, OTF2_ErrorCode e) {
  fprintf(stderr, "otf2_tool: %s: %s\n", what, OTF2_Error_GetName(e));
  exit(2);
}
#define CHECK(call, what)                                                      \
  do {                                                                         \
    OTF2_ErrorCode e_ = (call);                                                \
    if (e_ != OTF2_SUCCESS) die(what, e_);                                     \
  } while (0)

static void open_archive(void) {
  const char *dir = getenv("BENCH_OTF2_DIR");
  const char *clk = getenv("BENCH_OTF2_CLOCK");
  use_monotonic = clk && strcmp(clk, "monotonic") == 0;
  if (!dir) dir = "otf2-trace";
  /* 1 MiB event chunks, 4 MiB definition chunks, plain POSIX files. */
  archive = OTF2_Archive_Open(dir, "traces", OTF2_FILEMODE_WRITE, 1024 * 1024, 4 * 1024 * 1024,
                              OTF2_SUBSTRATE_POSIX, OTF2_COMPRESSION_NONE);
  if (!archive) {
    fprintf(stderr, "otf2_tool: cannot open archive in %s\n", dir);
    exit(2);
  }
  CHECK(OTF2_Archive_SetFlushCallbacks(archive, &flush_callbacks, NULL), "flush callbacks");
  CHECK(OTF2_Archive_SetSerialCollectiveCallbacks(archive), "collective callbacks");
  CHECK(OTF2_Pthread_Archive_SetLockingCallbacks(archive, NULL), "locking callbacks");
  CHECK(OTF2_Archive_OpenEvtFiles(archive), "open event files");
  mono_start = mono_ns(CLOCK_MONOTONIC);
  realtime_start = mono_ns(CLOCK_REALTIME);
  t_start = now();
}

EXPORT gasp_context_t gasp_init(gasp_model_t srcmodel, int *argc, char ***argv) {
  (void)srcmodel, (void)argc, (void)argv;
  pthread_once(&once, open_archive);
  pthread_mutex_lock(&mu);
  if (ncontexts == MAX_LOCATIONS) {
    pthread_mutex_unlock(&mu);
    return NULL;
  }
  struct _gasp_context_S *c = &contexts[ncontexts];
  c->location = ncontexts++;
  pthread_mutex_unlock(&mu);
  c->writer = OTF2_Archive_GetEvtWriter(archive, c->location);
  if (!c->writer) {
    fprintf(stderr, "otf2_tool: no event writer for location %llu\n",
            (unsigned long long)c->location);
    exit(2);
  }
  c->on = 1;
  return c;
}

static inline OTF2_RegionRef region_of(unsigned tag) {
  if (tag == GASP_UPC_GET) return 0;
  if (tag >= GASP_UPC_USEREVT_START && tag - GASP_UPC_USEREVT_START < USER_REGIONS)
    return 1 + (tag - GASP_UPC_USEREVT_START);
  return REGION_OTHER;
}

EXPORT void gasp_event_notifyVA(gasp_context_t c, unsigned int evttag, gasp_evttype_t evttype,
                                const char *filename, int linenum, int colnum, va_list ap) {
  (void)filename, (void)linenum, (void)colnum, (void)ap;
  if (__builtin_expect(c == NULL || !c->on, 0)) return;
  uint64_t ts = now();
  OTF2_RegionRef r = region_of(evttag);
  if (evttype == GASP_START)
    OTF2_EvtWriter_Enter(c->writer, NULL, ts, r);
  else if (evttype == GASP_END)
    OTF2_EvtWriter_Leave(c->writer, NULL, ts, r);
}

EXPORT void gasp_event_notify(gasp_context_t c, unsigned int evttag, gasp_evttype_t evttype,
                              const char *filename, int linenum, int colnum, ...) {
  va_list ap;
  va_start(ap, colnum);
  gasp_event_notifyVA(c, evttag, evttype, filename, linenum, colnum, ap);
  va_end(ap);
}

EXPORT int gasp_control(gasp_context_t c, int on) {
  if (!c) return 1;
  int was = c->on;
  c->on = on;
  return was;
}

EXPORT unsigned int gasp_create_event(gasp_context_t c, const char *name, const char *desc) {
  (void)c, (void)desc;
  if (!name) name = "(unnamed)";
  pthread_mutex_lock(&mu);
  unsigned i = 0;
  while (i < user_events && strcmp(user_names[i], name) != 0) i++;
  if (i == user_events && user_events < USER_REGIONS) user_names[user_events++] = strdup(name);
  pthread_mutex_unlock(&mu);
  /* The same id for the same name; past USER_REGIONS names, the "other" region. */
  return GASP_UPC_USEREVT_START + (i < USER_REGIONS ? i : USER_REGIONS);
}

/* Closes the event writers and the archive and writes the definitions. Call
 * once, after every recording thread is done. */
EXPORT void bench_tool_finish(void) {
  if (!archive) return;
  uint64_t nevents[MAX_LOCATIONS];
  for (unsigned i = 0; i < ncontexts; i++) {
    nevents[i] = 0;
    OTF2_EvtWriter_GetNumberOfEvents(contexts[i].writer, &nevents[i]);
    CHECK(OTF2_Archive_CloseEvtWriter(archive, contexts[i].writer), "close event writer");
  }
  CHECK(OTF2_Archive_CloseEvtFiles(archive), "close event files");
  uint64_t t_end = now(), mono_end = mono_ns(CLOCK_MONOTONIC);

  CHECK(OTF2_Archive_OpenDefFiles(archive), "open definition files");
  for (unsigned i = 0; i < ncontexts; i++) {
    OTF2_DefWriter *dw = OTF2_Archive_GetDefWriter(archive, contexts[i].location);
    CHECK(OTF2_Archive_CloseDefWriter(archive, dw), "close definition writer");
  }
  CHECK(OTF2_Archive_CloseDefFiles(archive), "close definition files");

  OTF2_GlobalDefWriter *g = OTF2_Archive_GetGlobalDefWriter(archive);
  uint64_t res = use_monotonic ? 1000000000u
                               : (uint64_t)((double)(t_end - t_start) * 1e9 /
                                            (double)(mono_end - mono_start > 0 ? mono_end - mono_start : 1));
  CHECK(OTF2_GlobalDefWriter_WriteClockProperties(g, res, t_start, t_end - t_start + 1,
                                                  realtime_start),
        "clock properties");
  unsigned s = 0;
  OTF2_GlobalDefWriter_WriteString(g, s++, "");                  /* 0 */
  OTF2_GlobalDefWriter_WriteString(g, s++, "upc_get");           /* 1 */
  OTF2_GlobalDefWriter_WriteString(g, s++, "other");             /* 2 */
  OTF2_GlobalDefWriter_WriteString(g, s++, "machine");           /* 3 */
  OTF2_GlobalDefWriter_WriteString(g, s++, "process");           /* 4 */
  OTF2_GlobalDefWriter_WriteString(g, s++, "thread");            /* 5 */
  unsigned user_name0 = s;
  for (unsigned i = 0; i < USER_REGIONS; i++) {
    char name[32];
    snprintf(name, sizeof name, "user_event_%u", i);
    OTF2_GlobalDefWriter_WriteString(g, s++, i < user_events ? user_names[i] : name);
  }
  OTF2_GlobalDefWriter_WriteRegion(g, 0, 1, 1, 0, OTF2_REGION_ROLE_DATA_TRANSFER,
                                   OTF2_PARADIGM_UPC, OTF2_REGION_FLAG_NONE, 0, 0, 0);
  for (unsigned i = 0; i < USER_REGIONS; i++)
    OTF2_GlobalDefWriter_WriteRegion(g, 1 + i, user_name0 + i, user_name0 + i, 0,
                                     OTF2_REGION_ROLE_ARTIFICIAL, OTF2_PARADIGM_USER,
                                     OTF2_REGION_FLAG_NONE, 0, 0, 0);
  OTF2_GlobalDefWriter_WriteRegion(g, REGION_OTHER, 2, 2, 0, OTF2_REGION_ROLE_UNKNOWN,
                                   OTF2_PARADIGM_UPC, OTF2_REGION_FLAG_NONE, 0, 0, 0);
  OTF2_GlobalDefWriter_WriteSystemTreeNode(g, 0, 3, 3, OTF2_UNDEFINED_SYSTEM_TREE_NODE);
  OTF2_GlobalDefWriter_WriteLocationGroup(g, 0, 4, OTF2_LOCATION_GROUP_TYPE_PROCESS, 0,
                                          OTF2_UNDEFINED_LOCATION_GROUP);
  for (unsigned i = 0; i < ncontexts; i++)
    OTF2_GlobalDefWriter_WriteLocation(g, contexts[i].location, 5, OTF2_LOCATION_TYPE_CPU_THREAD,
                                       nevents[i], 0);
  CHECK(OTF2_Archive_Close(archive), "close archive");
  archive = NULL;
}
