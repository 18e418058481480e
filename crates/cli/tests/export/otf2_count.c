/* Reads an OTF2 archive with libotf2's reader and prints what it holds, one
 * fact per line, for the export tests:
 *   locations N
 *   windows N
 *   comms N
 *   misnested N                 Leaves that do not leave the innermost region
 *   open N                      regions entered and never left
 *   <Record> <count>            for each event record type
 *   bytes <Record> <sum>        bytes of MpiSend, MpiRecv, RmaPut, RmaGet, MpiIsend, MpiIrecv
 *   bad_requests N              request completions that match no open request
 *   open_requests N             requests never completed
 *   unopened_window_use N       window events outside RmaWinCreate..RmaWinDestroy
 *   enter <region name> <count> Enter events per region name
 * Exits non-zero when the archive cannot be read. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <otf2/otf2.h>

#define MAXS 4096
static char *strings[MAXS];
static uint32_t region_name[MAXS];
static uint64_t enters_by_region[MAXS];
static uint64_t locations[MAXS];
static size_t nlocations, nwindows, ncomms;

enum { ENTER, LEAVE, SEND, RECV, CBEGIN, CEND, PUT, GET, ATOMIC, COMPLETE,
       ISEND, ISEND_DONE, IRECV_REQ, IRECV, WCREATE, WDESTROY, RCBEGIN, RCEND, LREQ, LACQ,
       LREL, NREC };
static const char *rec_names[NREC] = {"Enter", "Leave", "MpiSend", "MpiRecv",
                                      "MpiCollectiveBegin", "MpiCollectiveEnd", "RmaPut",
                                      "RmaGet", "RmaAtomic", "RmaOpCompleteBlocking",
                                      "MpiIsend", "MpiIsendComplete", "MpiIrecvRequest",
                                      "MpiIrecv", "RmaWinCreate", "RmaWinDestroy",
                                      "RmaCollectiveBegin", "RmaCollectiveEnd",
                                      "RmaRequestLock", "RmaAcquireLock", "RmaReleaseLock"};
/* Requests: an MpiIsendComplete or MpiIrecv must name a request started
 * (MpiIsend, MpiIrecvRequest) on its location and not yet completed. */
#define MAXR 65536
static uint64_t open_req[MAXR];
static OTF2_LocationRef open_loc[MAXR];
static size_t nopen;
static uint64_t bad_requests;
static void req_start(OTF2_LocationRef l, uint64_t id) {
    if (nopen < MAXR) { open_loc[nopen] = l; open_req[nopen++] = id; }
}
static void req_done(OTF2_LocationRef l, uint64_t id) {
    for (size_t i = 0; i < nopen; i++)
        if (open_req[i] == id && open_loc[i] == l) {
            open_req[i] = open_req[--nopen];
            open_loc[i] = open_loc[nopen];
            return;
        }
    bad_requests++;
}
static uint64_t counts[NREC], bytes[NREC];
static uint64_t last_time[MAXS];
static int backwards;
/* Enter/Leave must nest: a Leave leaves the region entered last. */
#define DEPTH 256
static OTF2_RegionRef stack[MAXS][DEPTH];
static int depth[MAXS];
static uint64_t misnested;

static void tick(OTF2_LocationRef loc, OTF2_TimeStamp t) {
    if (loc < MAXS) {
        if (t < last_time[loc]) backwards = 1;
        last_time[loc] = t;
    }
}

static OTF2_CallbackCode def_string(void *u, OTF2_StringRef self, const char *s) {
    (void)u;
    if (self < MAXS) strings[self] = strdup(s);
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode def_location(void *u, OTF2_LocationRef self, OTF2_StringRef name,
                                      OTF2_LocationType type, uint64_t n,
                                      OTF2_LocationGroupRef group) {
    (void)u; (void)name; (void)type; (void)n; (void)group;
    if (nlocations < MAXS) locations[nlocations++] = self;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode def_region(void *u, OTF2_RegionRef self, OTF2_StringRef name,
                                    OTF2_StringRef canonical, OTF2_StringRef descr,
                                    OTF2_RegionRole role, OTF2_Paradigm paradigm,
                                    OTF2_RegionFlag flags, OTF2_StringRef file, uint32_t b,
                                    uint32_t e) {
    (void)u; (void)canonical; (void)descr; (void)role; (void)paradigm; (void)flags;
    (void)file; (void)b; (void)e;
    if (self < MAXS) region_name[self] = name;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode def_win(void *u, OTF2_RmaWinRef self, OTF2_StringRef name,
                                 OTF2_CommRef comm, OTF2_RmaWinFlag flags) {
    (void)u; (void)self; (void)name; (void)comm; (void)flags;
    nwindows++;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode def_comm(void *u, OTF2_CommRef self, OTF2_StringRef name,
                                  OTF2_GroupRef group, OTF2_CommRef parent, OTF2_CommFlag f) {
    (void)u; (void)self; (void)name; (void)group; (void)parent; (void)f;
    ncomms++;
    return OTF2_CALLBACK_SUCCESS;
}

static OTF2_CallbackCode ev_enter(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                  OTF2_AttributeList *a, OTF2_RegionRef r) {
    (void)u; (void)a;
    tick(l, t);
    counts[ENTER]++;
    if (r < MAXS) enters_by_region[r]++;
    if (l < MAXS && depth[l] < DEPTH) stack[l][depth[l]++] = r;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_leave(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                  OTF2_AttributeList *a, OTF2_RegionRef r) {
    (void)u; (void)a;
    tick(l, t);
    counts[LEAVE]++;
    if (l < MAXS) {
        if (depth[l] == 0 || stack[l][depth[l] - 1] != r) misnested++;
        if (depth[l] > 0) depth[l]--;
    }
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_send(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                 OTF2_AttributeList *a, uint32_t peer, OTF2_CommRef c,
                                 uint32_t tag, uint64_t len) {
    (void)u; (void)a; (void)peer; (void)c; (void)tag;
    tick(l, t);
    counts[SEND]++;
    bytes[SEND] += len;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_recv(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                 OTF2_AttributeList *a, uint32_t peer, OTF2_CommRef c,
                                 uint32_t tag, uint64_t len) {
    (void)u; (void)a; (void)peer; (void)c; (void)tag;
    tick(l, t);
    counts[RECV]++;
    bytes[RECV] += len;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_isend(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                  OTF2_AttributeList *a, uint32_t peer, OTF2_CommRef c,
                                  uint32_t tag, uint64_t len, uint64_t id) {
    (void)u; (void)a; (void)peer; (void)c; (void)tag;
    tick(l, t);
    counts[ISEND]++;
    bytes[ISEND] += len;
    req_start(l, id);
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_isend_done(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                       OTF2_AttributeList *a, uint64_t id) {
    (void)u; (void)a;
    tick(l, t);
    counts[ISEND_DONE]++;
    req_done(l, id);
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_irecv_req(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                      OTF2_AttributeList *a, uint64_t id) {
    (void)u; (void)a;
    tick(l, t);
    counts[IRECV_REQ]++;
    req_start(l, id);
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_irecv(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                  OTF2_AttributeList *a, uint32_t peer, OTF2_CommRef c,
                                  uint32_t tag, uint64_t len, uint64_t id) {
    (void)u; (void)a; (void)peer; (void)c; (void)tag;
    tick(l, t);
    counts[IRECV]++;
    bytes[IRECV] += len;
    req_done(l, id);
    return OTF2_CALLBACK_SUCCESS;
}
/* A window is used between its RmaWinCreate and RmaWinDestroy on a location. */
static int win_open[MAXS][64];
static uint64_t unopened_window_use;
static void win_use(OTF2_LocationRef l, OTF2_RmaWinRef w) {
    if (l < MAXS && w < 64 && !win_open[l][w]) unopened_window_use++;
}
static OTF2_CallbackCode ev_wcreate(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                    OTF2_AttributeList *a, OTF2_RmaWinRef w) {
    (void)u; (void)a;
    tick(l, t);
    counts[WCREATE]++;
    if (l < MAXS && w < 64) win_open[l][w] = 1;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_wdestroy(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                     OTF2_AttributeList *a, OTF2_RmaWinRef w) {
    (void)u; (void)a;
    tick(l, t);
    counts[WDESTROY]++;
    win_use(l, w);
    if (l < MAXS && w < 64) win_open[l][w] = 0;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_rcbegin(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                    OTF2_AttributeList *a) {
    (void)u; (void)a;
    tick(l, t);
    counts[RCBEGIN]++;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_rcend(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                  OTF2_AttributeList *a, OTF2_CollectiveOp op,
                                  OTF2_RmaSyncLevel level, OTF2_RmaWinRef w, uint32_t root,
                                  uint64_t sent, uint64_t recvd) {
    (void)u; (void)a; (void)op; (void)level; (void)root; (void)sent; (void)recvd;
    tick(l, t);
    counts[RCEND]++;
    win_use(l, w);
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_lreq(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                 OTF2_AttributeList *a, OTF2_RmaWinRef w, uint32_t remote,
                                 uint64_t id, OTF2_LockType type) {
    (void)u; (void)a; (void)remote; (void)id; (void)type;
    tick(l, t);
    counts[LREQ]++;
    win_use(l, w);
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_lacq(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                 OTF2_AttributeList *a, OTF2_RmaWinRef w, uint32_t remote,
                                 uint64_t id, OTF2_LockType type) {
    (void)u; (void)a; (void)remote; (void)id; (void)type;
    tick(l, t);
    counts[LACQ]++;
    win_use(l, w);
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_lrel(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                 OTF2_AttributeList *a, OTF2_RmaWinRef w, uint32_t remote,
                                 uint64_t id) {
    (void)u; (void)a; (void)remote; (void)id;
    tick(l, t);
    counts[LREL]++;
    win_use(l, w);
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_cbegin(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                   OTF2_AttributeList *a) {
    (void)u; (void)a;
    tick(l, t);
    counts[CBEGIN]++;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_cend(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                 OTF2_AttributeList *a, OTF2_CollectiveOp op, OTF2_CommRef c,
                                 uint32_t root, uint64_t sent, uint64_t recvd) {
    (void)u; (void)a; (void)op; (void)c; (void)root; (void)sent; (void)recvd;
    tick(l, t);
    counts[CEND]++;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_put(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                OTF2_AttributeList *a, OTF2_RmaWinRef w, uint32_t remote,
                                uint64_t n, uint64_t id) {
    (void)u; (void)a; (void)w; (void)remote; (void)id;
    tick(l, t);
    counts[PUT]++;
    bytes[PUT] += n;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_get(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                OTF2_AttributeList *a, OTF2_RmaWinRef w, uint32_t remote,
                                uint64_t n, uint64_t id) {
    (void)u; (void)a; (void)w; (void)remote; (void)id;
    tick(l, t);
    counts[GET]++;
    bytes[GET] += n;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_atomic(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                   OTF2_AttributeList *a, OTF2_RmaWinRef w, uint32_t remote,
                                   OTF2_RmaAtomicType type, uint64_t sent, uint64_t recvd,
                                   uint64_t id) {
    (void)u; (void)a; (void)w; (void)remote; (void)type; (void)sent; (void)recvd; (void)id;
    tick(l, t);
    counts[ATOMIC]++;
    return OTF2_CALLBACK_SUCCESS;
}
static OTF2_CallbackCode ev_complete(OTF2_LocationRef l, OTF2_TimeStamp t, void *u,
                                     OTF2_AttributeList *a, OTF2_RmaWinRef w, uint64_t id) {
    (void)u; (void)a; (void)w; (void)id;
    tick(l, t);
    counts[COMPLETE]++;
    return OTF2_CALLBACK_SUCCESS;
}

#define CHECK(x)                                                                 \
    do {                                                                         \
        OTF2_ErrorCode e_ = (x);                                                 \
        if (e_ != OTF2_SUCCESS) {                                                \
            fprintf(stderr, "%s: %s\n", #x, OTF2_Error_GetName(e_));             \
            return 2;                                                            \
        }                                                                        \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s ARCHIVE/traces.otf2\n", argv[0]);
        return 2;
    }
    OTF2_Reader *r = OTF2_Reader_Open(argv[1]);
    if (!r) {
        fprintf(stderr, "cannot open %s\n", argv[1]);
        return 2;
    }
    CHECK(OTF2_Reader_SetSerialCollectiveCallbacks(r));
    OTF2_GlobalDefReader *gd = OTF2_Reader_GetGlobalDefReader(r);
    if (!gd) return 2;
    OTF2_GlobalDefReaderCallbacks *dc = OTF2_GlobalDefReaderCallbacks_New();
    OTF2_GlobalDefReaderCallbacks_SetStringCallback(dc, def_string);
    OTF2_GlobalDefReaderCallbacks_SetLocationCallback(dc, def_location);
    OTF2_GlobalDefReaderCallbacks_SetRegionCallback(dc, def_region);
    OTF2_GlobalDefReaderCallbacks_SetRmaWinCallback(dc, def_win);
    OTF2_GlobalDefReaderCallbacks_SetCommCallback(dc, def_comm);
    CHECK(OTF2_Reader_RegisterGlobalDefCallbacks(r, gd, dc, NULL));
    OTF2_GlobalDefReaderCallbacks_Delete(dc);
    uint64_t ndefs;
    CHECK(OTF2_Reader_ReadAllGlobalDefinitions(r, gd, &ndefs));
    CHECK(OTF2_Reader_CloseGlobalDefReader(r, gd));

    for (size_t i = 0; i < nlocations; i++) CHECK(OTF2_Reader_SelectLocation(r, locations[i]));
    CHECK(OTF2_Reader_OpenDefFiles(r));
    CHECK(OTF2_Reader_OpenEvtFiles(r));
    for (size_t i = 0; i < nlocations; i++) {
        OTF2_DefReader *d = OTF2_Reader_GetDefReader(r, locations[i]);
        if (d) {
            uint64_t n;
            CHECK(OTF2_Reader_ReadAllLocalDefinitions(r, d, &n));
            CHECK(OTF2_Reader_CloseDefReader(r, d));
        }
        if (!OTF2_Reader_GetEvtReader(r, locations[i])) return 2;
    }
    CHECK(OTF2_Reader_CloseDefFiles(r));
    OTF2_GlobalEvtReader *ge = OTF2_Reader_GetGlobalEvtReader(r);
    if (!ge) return 2;
    OTF2_GlobalEvtReaderCallbacks *ec = OTF2_GlobalEvtReaderCallbacks_New();
    OTF2_GlobalEvtReaderCallbacks_SetEnterCallback(ec, ev_enter);
    OTF2_GlobalEvtReaderCallbacks_SetLeaveCallback(ec, ev_leave);
    OTF2_GlobalEvtReaderCallbacks_SetMpiSendCallback(ec, ev_send);
    OTF2_GlobalEvtReaderCallbacks_SetMpiRecvCallback(ec, ev_recv);
    OTF2_GlobalEvtReaderCallbacks_SetMpiIsendCallback(ec, ev_isend);
    OTF2_GlobalEvtReaderCallbacks_SetMpiIsendCompleteCallback(ec, ev_isend_done);
    OTF2_GlobalEvtReaderCallbacks_SetMpiIrecvRequestCallback(ec, ev_irecv_req);
    OTF2_GlobalEvtReaderCallbacks_SetMpiIrecvCallback(ec, ev_irecv);
    OTF2_GlobalEvtReaderCallbacks_SetRmaWinCreateCallback(ec, ev_wcreate);
    OTF2_GlobalEvtReaderCallbacks_SetRmaWinDestroyCallback(ec, ev_wdestroy);
    OTF2_GlobalEvtReaderCallbacks_SetRmaCollectiveBeginCallback(ec, ev_rcbegin);
    OTF2_GlobalEvtReaderCallbacks_SetRmaCollectiveEndCallback(ec, ev_rcend);
    OTF2_GlobalEvtReaderCallbacks_SetRmaRequestLockCallback(ec, ev_lreq);
    OTF2_GlobalEvtReaderCallbacks_SetRmaAcquireLockCallback(ec, ev_lacq);
    OTF2_GlobalEvtReaderCallbacks_SetRmaReleaseLockCallback(ec, ev_lrel);
    OTF2_GlobalEvtReaderCallbacks_SetMpiCollectiveBeginCallback(ec, ev_cbegin);
    OTF2_GlobalEvtReaderCallbacks_SetMpiCollectiveEndCallback(ec, ev_cend);
    OTF2_GlobalEvtReaderCallbacks_SetRmaPutCallback(ec, ev_put);
    OTF2_GlobalEvtReaderCallbacks_SetRmaGetCallback(ec, ev_get);
    OTF2_GlobalEvtReaderCallbacks_SetRmaAtomicCallback(ec, ev_atomic);
    OTF2_GlobalEvtReaderCallbacks_SetRmaOpCompleteBlockingCallback(ec, ev_complete);
    CHECK(OTF2_Reader_RegisterGlobalEvtCallbacks(r, ge, ec, NULL));
    OTF2_GlobalEvtReaderCallbacks_Delete(ec);
    uint64_t nev;
    CHECK(OTF2_Reader_ReadAllGlobalEvents(r, ge, &nev));
    CHECK(OTF2_Reader_CloseGlobalEvtReader(r, ge));
    CHECK(OTF2_Reader_CloseEvtFiles(r));
    CHECK(OTF2_Reader_Close(r));

    uint64_t open = 0;
    for (size_t i = 0; i < MAXS; i++) open += depth[i];
    printf("locations %zu\nwindows %zu\ncomms %zu\nevents %" PRIu64 "\nbackwards %d\n",
           nlocations, nwindows, ncomms, nev, backwards);
    printf("misnested %" PRIu64 "\nopen %" PRIu64 "\n", misnested, open);
    printf("bad_requests %" PRIu64 "\nopen_requests %zu\n", bad_requests, nopen);
    printf("unopened_window_use %" PRIu64 "\n", unopened_window_use);
    for (int i = 0; i < NREC; i++) printf("%s %" PRIu64 "\n", rec_names[i], counts[i]);
    for (int i = SEND; i < NREC; i++)
        if (i == SEND || i == RECV || i == PUT || i == GET || i == ISEND || i == IRECV)
            printf("bytes %s %" PRIu64 "\n", rec_names[i], bytes[i]);
    /* Enter counts per region name (regions sharing a name are summed). */
    for (uint32_t i = 0; i < MAXS; i++) {
        if (!enters_by_region[i]) continue;
        uint64_t n = 0;
        const char *name = strings[region_name[i]] ? strings[region_name[i]] : "?";
        int first = 1;
        for (uint32_t j = 0; j < MAXS; j++) {
            if (!enters_by_region[j]) continue;
            const char *other = strings[region_name[j]] ? strings[region_name[j]] : "?";
            if (strcmp(name, other) == 0) {
                if (j < i) first = 0;
                n += enters_by_region[j];
            }
        }
        if (first) printf("enter %s %" PRIu64 "\n", name, n);
    }
    return 0;
}
