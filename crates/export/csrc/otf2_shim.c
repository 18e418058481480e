/* A narrow layer over the OTF2 writer: one archive written by one process,
 * one location at a time, then the global definitions. Every function
 * returns an OTF2_ErrorCode (0 = success). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <otf2/otf2.h>

typedef struct {
    OTF2_Archive *archive;
    OTF2_EvtWriter *evt;
    OTF2_GlobalDefWriter *defs;
    uint64_t location;
} gotf2_t;

static OTF2_FlushType pre_flush(void *user, OTF2_FileType type, OTF2_LocationRef loc,
                                void *data, bool final) {
    (void)user; (void)type; (void)loc; (void)data; (void)final;
    return OTF2_FLUSH;
}

static OTF2_TimeStamp post_flush(void *user, OTF2_FileType type, OTF2_LocationRef loc) {
    (void)user; (void)type; (void)loc;
    return 0;
}

static OTF2_FlushCallbacks flush_callbacks = {
    .otf2_pre_flush = pre_flush,
    .otf2_post_flush = post_flush,
};

const char *gotf2_error_name(int code) { return OTF2_Error_GetName((OTF2_ErrorCode)code); }
const char *gotf2_error_description(int code) {
    return OTF2_Error_GetDescription((OTF2_ErrorCode)code);
}

/* Opens DIR/NAME.otf2 for writing; *out receives the handle. */
int gotf2_open(const char *dir, const char *name, void **out) {
    *out = NULL;
    gotf2_t *h = calloc(1, sizeof *h);
    if (!h) return OTF2_ERROR_MEM_ALLOC_FAILED;
    h->archive = OTF2_Archive_Open(dir, name, OTF2_FILEMODE_WRITE, 1024 * 1024, 4 * 1024 * 1024,
                                   OTF2_SUBSTRATE_POSIX, OTF2_COMPRESSION_NONE);
    if (!h->archive) {
        free(h);
        return OTF2_ERROR_FILE_CAN_NOT_OPEN;
    }
    OTF2_ErrorCode e = OTF2_Archive_SetFlushCallbacks(h->archive, &flush_callbacks, NULL);
    if (e == OTF2_SUCCESS) e = OTF2_Archive_SetSerialCollectiveCallbacks(h->archive);
    if (e == OTF2_SUCCESS) e = OTF2_Archive_SetCreator(h->archive, "gaspard export");
    if (e == OTF2_SUCCESS) e = OTF2_Archive_OpenEvtFiles(h->archive);
    if (e != OTF2_SUCCESS) {
        OTF2_Archive_Close(h->archive);
        free(h);
        return e;
    }
    *out = h;
    return OTF2_SUCCESS;
}

int gotf2_begin_location(void *hp, uint64_t location) {
    gotf2_t *h = hp;
    h->evt = OTF2_Archive_GetEvtWriter(h->archive, location);
    h->location = location;
    return h->evt ? OTF2_SUCCESS : OTF2_ERROR_INVALID_ARGUMENT;
}

/* Closes the location's event writer; *events receives how many it wrote. */
int gotf2_end_location(void *hp, uint64_t *events) {
    gotf2_t *h = hp;
    OTF2_ErrorCode e = OTF2_EvtWriter_GetNumberOfEvents(h->evt, events);
    if (e == OTF2_SUCCESS) e = OTF2_Archive_CloseEvtWriter(h->archive, h->evt);
    h->evt = NULL;
    return e;
}

int gotf2_enter(void *hp, uint64_t t, uint32_t region) {
    return OTF2_EvtWriter_Enter(((gotf2_t *)hp)->evt, NULL, t, region);
}
int gotf2_leave(void *hp, uint64_t t, uint32_t region) {
    return OTF2_EvtWriter_Leave(((gotf2_t *)hp)->evt, NULL, t, region);
}
int gotf2_mpi_send(void *hp, uint64_t t, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t len) {
    return OTF2_EvtWriter_MpiSend(((gotf2_t *)hp)->evt, NULL, t, peer, comm, tag, len);
}
int gotf2_mpi_recv(void *hp, uint64_t t, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t len) {
    return OTF2_EvtWriter_MpiRecv(((gotf2_t *)hp)->evt, NULL, t, peer, comm, tag, len);
}
int gotf2_mpi_isend(void *hp, uint64_t t, uint32_t peer, uint32_t comm, uint32_t tag,
                    uint64_t len, uint64_t request) {
    return OTF2_EvtWriter_MpiIsend(((gotf2_t *)hp)->evt, NULL, t, peer, comm, tag, len, request);
}
int gotf2_mpi_isend_complete(void *hp, uint64_t t, uint64_t request) {
    return OTF2_EvtWriter_MpiIsendComplete(((gotf2_t *)hp)->evt, NULL, t, request);
}
int gotf2_mpi_irecv_request(void *hp, uint64_t t, uint64_t request) {
    return OTF2_EvtWriter_MpiIrecvRequest(((gotf2_t *)hp)->evt, NULL, t, request);
}
int gotf2_mpi_irecv(void *hp, uint64_t t, uint32_t peer, uint32_t comm, uint32_t tag,
                    uint64_t len, uint64_t request) {
    return OTF2_EvtWriter_MpiIrecv(((gotf2_t *)hp)->evt, NULL, t, peer, comm, tag, len, request);
}
int gotf2_collective_begin(void *hp, uint64_t t) {
    return OTF2_EvtWriter_MpiCollectiveBegin(((gotf2_t *)hp)->evt, NULL, t);
}

/* op: 0 barrier, 1 broadcast, 2 gather, 3 scatter, 4 allgather, 5 alltoall,
 * 6 allreduce, 7 reduce. */
int gotf2_collective_end(void *hp, uint64_t t, uint32_t op, uint32_t comm, uint32_t root,
                         uint64_t sent, uint64_t received) {
    static const OTF2_CollectiveOp ops[] = {
        OTF2_COLLECTIVE_OP_BARRIER,   OTF2_COLLECTIVE_OP_BCAST,    OTF2_COLLECTIVE_OP_GATHER,
        OTF2_COLLECTIVE_OP_SCATTER,   OTF2_COLLECTIVE_OP_ALLGATHER, OTF2_COLLECTIVE_OP_ALLTOALL,
        OTF2_COLLECTIVE_OP_ALLREDUCE, OTF2_COLLECTIVE_OP_REDUCE,
    };
    if (op >= sizeof ops / sizeof ops[0]) return OTF2_ERROR_INVALID_ARGUMENT;
    return OTF2_EvtWriter_MpiCollectiveEnd(((gotf2_t *)hp)->evt, NULL, t, ops[op], comm, root,
                                           sent, received);
}
int gotf2_rma_put(void *hp, uint64_t t, uint32_t win, uint32_t remote, uint64_t bytes, uint64_t id) {
    return OTF2_EvtWriter_RmaPut(((gotf2_t *)hp)->evt, NULL, t, win, remote, bytes, id);
}
int gotf2_rma_get(void *hp, uint64_t t, uint32_t win, uint32_t remote, uint64_t bytes, uint64_t id) {
    return OTF2_EvtWriter_RmaGet(((gotf2_t *)hp)->evt, NULL, t, win, remote, bytes, id);
}
/* An atomic that fetches (fetch) or only updates. */
int gotf2_rma_atomic(void *hp, uint64_t t, uint32_t win, uint32_t remote, int fetch,
                     uint64_t bytes, uint64_t id) {
    return OTF2_EvtWriter_RmaAtomic(((gotf2_t *)hp)->evt, NULL, t, win, remote,
                                    fetch ? OTF2_RMA_ATOMIC_TYPE_FETCH_AND_ACCUMULATE
                                          : OTF2_RMA_ATOMIC_TYPE_ACCUMULATE,
                                    bytes, fetch ? bytes : 0, id);
}
int gotf2_rma_complete(void *hp, uint64_t t, uint32_t win, uint64_t id) {
    return OTF2_EvtWriter_RmaOpCompleteBlocking(((gotf2_t *)hp)->evt, NULL, t, win, id);
}

/* Window life and synchronization. */
int gotf2_rma_win_create(void *hp, uint64_t t, uint32_t win) {
    return OTF2_EvtWriter_RmaWinCreate(((gotf2_t *)hp)->evt, NULL, t, win);
}
int gotf2_rma_win_destroy(void *hp, uint64_t t, uint32_t win) {
    return OTF2_EvtWriter_RmaWinDestroy(((gotf2_t *)hp)->evt, NULL, t, win);
}
int gotf2_rma_collective_begin(void *hp, uint64_t t) {
    return OTF2_EvtWriter_RmaCollectiveBegin(((gotf2_t *)hp)->evt, NULL, t);
}
/* A fence: a barrier that synchronizes processes and memory. */
int gotf2_rma_fence_end(void *hp, uint64_t t, uint32_t win) {
    return OTF2_EvtWriter_RmaCollectiveEnd(((gotf2_t *)hp)->evt, NULL, t,
                                           OTF2_COLLECTIVE_OP_BARRIER,
                                           OTF2_RMA_SYNC_LEVEL_PROCESS | OTF2_RMA_SYNC_LEVEL_MEMORY,
                                           win, OTF2_UNDEFINED_UINT32, 0, 0);
}
int gotf2_rma_request_lock(void *hp, uint64_t t, uint32_t win, uint32_t remote, int shared) {
    return OTF2_EvtWriter_RmaRequestLock(((gotf2_t *)hp)->evt, NULL, t, win, remote, 0,
                                         shared ? OTF2_LOCK_SHARED : OTF2_LOCK_EXCLUSIVE);
}
int gotf2_rma_acquire_lock(void *hp, uint64_t t, uint32_t win, uint32_t remote, int shared) {
    return OTF2_EvtWriter_RmaAcquireLock(((gotf2_t *)hp)->evt, NULL, t, win, remote, 0,
                                         shared ? OTF2_LOCK_SHARED : OTF2_LOCK_EXCLUSIVE);
}
int gotf2_rma_release_lock(void *hp, uint64_t t, uint32_t win, uint32_t remote) {
    return OTF2_EvtWriter_RmaReleaseLock(((gotf2_t *)hp)->evt, NULL, t, win, remote, 0);
}

/* Global definitions, written after the events. */
static OTF2_GlobalDefWriter *defs(gotf2_t *h) {
    if (!h->defs) h->defs = OTF2_Archive_GetGlobalDefWriter(h->archive);
    return h->defs;
}
#define DEFS(h) OTF2_GlobalDefWriter *w = defs(h); if (!w) return OTF2_ERROR_INVALID_ARGUMENT

int gotf2_def_clock(void *hp, uint64_t length) {
    DEFS((gotf2_t *)hp);
    return OTF2_GlobalDefWriter_WriteClockProperties(w, 1000000000, 0, length,
                                                     OTF2_UNDEFINED_TIMESTAMP);
}
int gotf2_def_string(void *hp, uint32_t id, const char *s) {
    DEFS((gotf2_t *)hp);
    return OTF2_GlobalDefWriter_WriteString(w, id, s);
}
/* paradigm: 0 user, 1 MPI, 2 SHMEM, 3 OpenMP, 4 compiler (C functions). */
static OTF2_Paradigm paradigm(uint32_t p) {
    switch (p) {
    case 1: return OTF2_PARADIGM_MPI;
    case 2: return OTF2_PARADIGM_SHMEM;
    case 3: return OTF2_PARADIGM_OPENMP;
    case 4: return OTF2_PARADIGM_COMPILER;
    default: return OTF2_PARADIGM_USER;
    }
}
/* role: 0 code, 1 function, 2 barrier, 3 point-to-point, 4 RMA, 5 collective,
 * 6 atomic, 7 allocate, 8 parallel, 9 loop, 10 critical. */
static OTF2_RegionRole role(uint32_t r) {
    switch (r) {
    case 1: return OTF2_REGION_ROLE_FUNCTION;
    case 2: return OTF2_REGION_ROLE_BARRIER;
    case 3: return OTF2_REGION_ROLE_POINT2POINT;
    case 4: return OTF2_REGION_ROLE_RMA;
    case 5: return OTF2_REGION_ROLE_COLL_ALL2ALL;
    case 6: return OTF2_REGION_ROLE_ATOMIC;
    case 7: return OTF2_REGION_ROLE_ALLOCATE;
    case 8: return OTF2_REGION_ROLE_PARALLEL;
    case 9: return OTF2_REGION_ROLE_LOOP;
    case 10: return OTF2_REGION_ROLE_CRITICAL;
    default: return OTF2_REGION_ROLE_CODE;
    }
}
int gotf2_def_paradigms(void *hp, uint32_t mpi_name, uint32_t shmem_name) {
    DEFS((gotf2_t *)hp);
    OTF2_ErrorCode e = OTF2_GlobalDefWriter_WriteParadigm(w, OTF2_PARADIGM_MPI, mpi_name,
                                                          OTF2_PARADIGM_CLASS_PROCESS);
    if (e != OTF2_SUCCESS) return e;
    return OTF2_GlobalDefWriter_WriteParadigm(w, OTF2_PARADIGM_SHMEM, shmem_name,
                                              OTF2_PARADIGM_CLASS_PROCESS);
}
int gotf2_def_region(void *hp, uint32_t id, uint32_t name, uint32_t file, uint32_t line,
                     uint32_t role_code, uint32_t paradigm_code) {
    DEFS((gotf2_t *)hp);
    return OTF2_GlobalDefWriter_WriteRegion(w, id, name, name, name, role(role_code),
                                            paradigm(paradigm_code), OTF2_REGION_FLAG_NONE, file,
                                            line, line);
}
int gotf2_def_system_tree(void *hp, uint32_t id, uint32_t name, uint32_t class_name,
                          uint32_t parent) {
    DEFS((gotf2_t *)hp);
    return OTF2_GlobalDefWriter_WriteSystemTreeNode(
        w, id, name, class_name, parent == UINT32_MAX ? OTF2_UNDEFINED_SYSTEM_TREE_NODE : parent);
}
int gotf2_def_location_group(void *hp, uint32_t id, uint32_t name, uint32_t node) {
    DEFS((gotf2_t *)hp);
    return OTF2_GlobalDefWriter_WriteLocationGroup(w, id, name, OTF2_LOCATION_GROUP_TYPE_PROCESS,
                                                   node, OTF2_UNDEFINED_LOCATION_GROUP);
}
int gotf2_def_location(void *hp, uint64_t id, uint32_t name, uint64_t events, uint32_t group) {
    DEFS((gotf2_t *)hp);
    return OTF2_GlobalDefWriter_WriteLocation(w, id, name, OTF2_LOCATION_TYPE_CPU_THREAD, events,
                                              group);
}
/* locations: 1 for the group of a paradigm's locations (rank i = members[i]),
 * 0 for a communicator's group (members are indices into that list). */
int gotf2_def_group(void *hp, uint32_t id, uint32_t name, int locations, uint32_t paradigm_code,
                    uint32_t n, const uint64_t *members) {
    DEFS((gotf2_t *)hp);
    return OTF2_GlobalDefWriter_WriteGroup(
        w, id, name, locations ? OTF2_GROUP_TYPE_COMM_LOCATIONS : OTF2_GROUP_TYPE_COMM_GROUP,
        paradigm(paradigm_code), OTF2_GROUP_FLAG_NONE, n, members);
}
int gotf2_def_comm(void *hp, uint32_t id, uint32_t name, uint32_t group) {
    DEFS((gotf2_t *)hp);
    return OTF2_GlobalDefWriter_WriteComm(w, id, name, group, OTF2_UNDEFINED_COMM,
                                          OTF2_COMM_FLAG_NONE);
}
int gotf2_def_rma_win(void *hp, uint32_t id, uint32_t name, uint32_t comm) {
    DEFS((gotf2_t *)hp);
    return OTF2_GlobalDefWriter_WriteRmaWin(w, id, name, comm, OTF2_RMA_WIN_FLAG_NONE);
}

/* Writes an empty local definition file per location, closes everything and
 * frees the handle (also on error). */
int gotf2_close(void *hp, const uint64_t *locations, uint64_t n) {
    gotf2_t *h = hp;
    OTF2_ErrorCode e = OTF2_Archive_CloseEvtFiles(h->archive);
    if (e == OTF2_SUCCESS) e = OTF2_Archive_OpenDefFiles(h->archive);
    for (uint64_t i = 0; e == OTF2_SUCCESS && i < n; i++) {
        OTF2_DefWriter *d = OTF2_Archive_GetDefWriter(h->archive, locations[i]);
        e = d ? OTF2_Archive_CloseDefWriter(h->archive, d) : OTF2_ERROR_INVALID_ARGUMENT;
    }
    if (e == OTF2_SUCCESS) e = OTF2_Archive_CloseDefFiles(h->archive);
    OTF2_ErrorCode c = OTF2_Archive_Close(h->archive);
    free(h);
    return e != OTF2_SUCCESS ? e : c;
}
