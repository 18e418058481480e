/* The plain event rate of OTF2's C reader: reads every event of an archive
 * location by location (the fastest way OTF2 offers: no merge in time
 * order), with Enter and Leave callbacks that count, and prints
 *   events=N seconds=S
 * (S: the event reading only, definitions apart). Used by bench/analysis.sh
 * on `gaspard export --format otf2` of the same trace gaspard analyses.
 *
 *   otf2_read ARCHIVE/traces.otf2 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <otf2/otf2.h>

#define CHECK(call)                                                                \
  do {                                                                             \
    OTF2_ErrorCode e_ = (call);                                                    \
    if (e_ != OTF2_SUCCESS) {                                                      \
      fprintf(stderr, "otf2_read: %s: %s\n", #call, OTF2_Error_GetName(e_));       \
      exit(2);                                                                     \
    }                                                                              \
  } while (0)

static uint64_t *locations;
static size_t nlocations, cap;
static uint64_t counted;

static OTF2_CallbackCode def_location(void *u, OTF2_LocationRef self, OTF2_StringRef name,
                                      OTF2_LocationType t, uint64_t n, OTF2_LocationGroupRef g) {
  (void)u, (void)name, (void)t, (void)n, (void)g;
  if (nlocations == cap) {
    cap = cap ? 2 * cap : 64;
    locations = realloc(locations, cap * sizeof *locations);
    if (!locations) exit(2);
  }
  locations[nlocations++] = self;
  return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode ev_enter(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void *u,
                                  OTF2_AttributeList *a, OTF2_RegionRef r) {
  (void)l, (void)t, (void)pos, (void)u, (void)a, (void)r;
  counted++;
  return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode ev_leave(OTF2_LocationRef l, OTF2_TimeStamp t, uint64_t pos, void *u,
                                  OTF2_AttributeList *a, OTF2_RegionRef r) {
  (void)l, (void)t, (void)pos, (void)u, (void)a, (void)r;
  counted++;
  return OTF2_CALLBACK_SUCCESS;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: otf2_read ARCHIVE/traces.otf2\n");
    return 2;
  }
  OTF2_Reader *r = OTF2_Reader_Open(argv[1]);
  if (!r) {
    fprintf(stderr, "otf2_read: cannot open %s\n", argv[1]);
    return 2;
  }
  CHECK(OTF2_Reader_SetSerialCollectiveCallbacks(r));
  OTF2_GlobalDefReader *gd = OTF2_Reader_GetGlobalDefReader(r);
  OTF2_GlobalDefReaderCallbacks *dc = OTF2_GlobalDefReaderCallbacks_New();
  OTF2_GlobalDefReaderCallbacks_SetLocationCallback(dc, def_location);
  CHECK(OTF2_Reader_RegisterGlobalDefCallbacks(r, gd, dc, NULL));
  uint64_t n = 0;
  CHECK(OTF2_Reader_ReadAllGlobalDefinitions(r, gd, &n));
  CHECK(OTF2_Reader_CloseGlobalDefReader(r, gd));
  for (size_t i = 0; i < nlocations; i++) CHECK(OTF2_Reader_SelectLocation(r, locations[i]));
  CHECK(OTF2_Reader_OpenDefFiles(r));
  CHECK(OTF2_Reader_OpenEvtFiles(r));
  for (size_t i = 0; i < nlocations; i++) {
    OTF2_DefReader *d = OTF2_Reader_GetDefReader(r, locations[i]);
    if (d) {
      CHECK(OTF2_Reader_ReadAllLocalDefinitions(r, d, &n));
      CHECK(OTF2_Reader_CloseDefReader(r, d));
    }
  }
  CHECK(OTF2_Reader_CloseDefFiles(r));
  OTF2_EvtReaderCallbacks *ec = OTF2_EvtReaderCallbacks_New();
  OTF2_EvtReaderCallbacks_SetEnterCallback(ec, ev_enter);
  OTF2_EvtReaderCallbacks_SetLeaveCallback(ec, ev_leave);
  double t0 = now();
  uint64_t events = 0;
  for (size_t i = 0; i < nlocations; i++) {
    OTF2_EvtReader *e = OTF2_Reader_GetEvtReader(r, locations[i]);
    if (!e) return 2;
    CHECK(OTF2_Reader_RegisterEvtCallbacks(r, e, ec, NULL));
    uint64_t got = 0;
    CHECK(OTF2_Reader_ReadAllLocalEvents(r, e, &got));
    events += got;
    CHECK(OTF2_Reader_CloseEvtReader(r, e));
  }
  double t1 = now();
  CHECK(OTF2_Reader_CloseEvtFiles(r));
  OTF2_Reader_Close(r);
  printf("events=%" PRIu64 " enter_leave=%" PRIu64 " seconds=%.6f\n", events, counted, t1 - t0);
  return 0;
}
