/* gasp_upc.h: C and UPC event tags of the GASP interface, version 1.4, as
 * numbered by gaspard's own runtime-neutral build. A runtime ships its own
 * gasp_upc.h with its own numbers: build gaspard against it with
 * GASPARD_GASP_UPC_H=/dir/of/that/header (see README), since the tool maps
 * tags by symbolic name, never by number. */
#ifndef _GASP_UPC_H
#define _GASP_UPC_H

#include <stddef.h>
#include "gasp.h"

#define GASP_UPC_VERSION 20261101

/* Opaque types (Section 5.4): pointers to shared data and to locks are
 * passed with an extra level of indirection. */
typedef void gasp_upc_PTS_t;
typedef void gasp_upc_lock_t;
typedef void *gasp_upc_nb_handle_t;
#define GASP_NB_TRIVIAL ((gasp_upc_nb_handle_t)0)

typedef enum {
  GASP_UPC_REDUCTION_C,
  GASP_UPC_REDUCTION_UC,
  GASP_UPC_REDUCTION_S,
  GASP_UPC_REDUCTION_US,
  GASP_UPC_REDUCTION_I,
  GASP_UPC_REDUCTION_UI,
  GASP_UPC_REDUCTION_L,
  GASP_UPC_REDUCTION_UL,
  GASP_UPC_REDUCTION_F,
  GASP_UPC_REDUCTION_D,
  GASP_UPC_REDUCTION_LD
} gasp_upc_reduction_t;

/* User events (Section 5.3): ids returned by gasp_create_event. */
#define GASP_UPC_USEREVT_START 0x10000u
#define GASP_UPC_USEREVT_END 0x1ffffu


/* C events (Section 4) */
#define GASP_C_FUNC 0x1001u
#define GASP_C_MALLOC 0x1002u
#define GASP_C_REALLOC 0x1003u
#define GASP_C_FREE 0x1004u

/* Exit events (Table 3) */
#define GASP_UPC_COLLECTIVE_EXIT 0x2001u
#define GASP_UPC_NONCOLLECTIVE_EXIT 0x2002u

/* Synchronization events (Table 4) */
#define GASP_UPC_NOTIFY 0x2101u
#define GASP_UPC_WAIT 0x2102u
#define GASP_UPC_BARRIER 0x2103u
#define GASP_UPC_FENCE 0x2104u

/* Work-sharing events (Table 5) */
#define GASP_UPC_FORALL 0x2201u

/* Library-related events (Table 6) */
#define GASP_UPC_GLOBAL_ALLOC 0x2301u
#define GASP_UPC_ALL_ALLOC 0x2302u
#define GASP_UPC_ALLOC 0x2303u
#define GASP_UPC_FREE 0x2304u
#define GASP_UPC_GLOBAL_LOCK_ALLOC 0x2305u
#define GASP_UPC_ALL_LOCK_ALLOC 0x2306u
#define GASP_UPC_LOCK_FREE 0x2307u
#define GASP_UPC_LOCK 0x2308u
#define GASP_UPC_LOCK_ATTEMPT 0x2309u
#define GASP_UPC_UNLOCK 0x230au
#define GASP_UPC_MEMCPY 0x230bu
#define GASP_UPC_MEMGET 0x230cu
#define GASP_UPC_MEMPUT 0x230du
#define GASP_UPC_MEMSET 0x230eu

/* Blocking shared variable access events (Table 7) */
#define GASP_UPC_GET 0x2401u
#define GASP_UPC_PUT 0x2402u

/* Non-blocking shared variable access events (Table 8) */
#define GASP_UPC_NB_GET_INIT 0x2501u
#define GASP_UPC_NB_GET_DATA 0x2502u
#define GASP_UPC_NB_PUT_INIT 0x2503u
#define GASP_UPC_NB_PUT_DATA 0x2504u
#define GASP_UPC_NB_SYNC 0x2505u

/* Shared variable cache events (Table 9) */
#define GASP_UPC_CACHE_MISS 0x2601u
#define GASP_UPC_CACHE_HIT 0x2602u
#define GASP_UPC_CACHE_INVALIDATE 0x2603u

/* Collective communication events (Table 10) */
#define GASP_UPC_ALL_BROADCAST 0x2701u
#define GASP_UPC_ALL_SCATTER 0x2702u
#define GASP_UPC_ALL_GATHER 0x2703u
#define GASP_UPC_ALL_GATHER_ALL 0x2704u
#define GASP_UPC_ALL_EXCHANGE 0x2705u
#define GASP_UPC_ALL_PERMUTE 0x2706u
#define GASP_UPC_ALL_REDUCE 0x2707u
#define GASP_UPC_ALL_PREFIX_REDUCE 0x2708u

#endif
