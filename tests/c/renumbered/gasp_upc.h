/* gasp_upc.h as another UPC runtime might ship it: the same symbols as
 * crates/gasp/include/gasp_upc.h, every event under a different number.
 *
 * System events start at 1000 in an order of their own, except four that
 * take each other's numbers from gaspard's default header (GET and PUT,
 * NOTIFY and WAIT swap), and user events use 100..999. A tool that mapped
 * raw tag numbers rather than symbolic names would record wrong or unknown
 * events with this header. gasp.h is gaspard's own (found on the include
 * path). */
#ifndef _GASP_UPC_H
#define _GASP_UPC_H

#include <stddef.h>
#include "gasp.h"

#define GASP_UPC_VERSION 20070607

typedef void gasp_upc_PTS_t;
typedef void gasp_upc_lock_t;
typedef struct renumbered_nb_op *gasp_upc_nb_handle_t;
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

#define GASP_UPC_USEREVT_START 100
#define GASP_UPC_USEREVT_END 999

/* Collective communication events (Table 10) */
#define GASP_UPC_ALL_BROADCAST 1000
#define GASP_UPC_ALL_SCATTER 1001
#define GASP_UPC_ALL_GATHER 1002
#define GASP_UPC_ALL_GATHER_ALL 1003
#define GASP_UPC_ALL_EXCHANGE 1004
#define GASP_UPC_ALL_PERMUTE 1005
#define GASP_UPC_ALL_REDUCE 1006
#define GASP_UPC_ALL_PREFIX_REDUCE 1007

/* Shared variable cache events (Table 9) */
#define GASP_UPC_CACHE_INVALIDATE 1008
#define GASP_UPC_CACHE_HIT 1009
#define GASP_UPC_CACHE_MISS 1010

/* Non-blocking shared variable access events (Table 8) */
#define GASP_UPC_NB_SYNC 1011
#define GASP_UPC_NB_PUT_DATA 1012
#define GASP_UPC_NB_PUT_INIT 1013
#define GASP_UPC_NB_GET_DATA 1014
#define GASP_UPC_NB_GET_INIT 1015

/* Blocking shared variable access events (Table 7): each has the other's
 * number in gaspard's default header. */
#define GASP_UPC_GET 0x2402u
#define GASP_UPC_PUT 0x2401u

/* Library-related events (Table 6) */
#define GASP_UPC_MEMSET 1016
#define GASP_UPC_MEMPUT 1017
#define GASP_UPC_MEMGET 1018
#define GASP_UPC_MEMCPY 1019
#define GASP_UPC_UNLOCK 1020
#define GASP_UPC_LOCK_ATTEMPT 1021
#define GASP_UPC_LOCK 1022
#define GASP_UPC_LOCK_FREE 1023
#define GASP_UPC_ALL_LOCK_ALLOC 1024
#define GASP_UPC_GLOBAL_LOCK_ALLOC 1025
#define GASP_UPC_FREE 1026
#define GASP_UPC_ALLOC 1027
#define GASP_UPC_ALL_ALLOC 1028
#define GASP_UPC_GLOBAL_ALLOC 1029

/* Work-sharing events (Table 5) */
#define GASP_UPC_FORALL 1030

/* Synchronization events (Table 4): NOTIFY and WAIT swap the default numbers. */
#define GASP_UPC_NOTIFY 0x2102u
#define GASP_UPC_WAIT 0x2101u
#define GASP_UPC_BARRIER 1031
#define GASP_UPC_FENCE 1032

/* Exit events (Table 3) */
#define GASP_UPC_NONCOLLECTIVE_EXIT 1033
#define GASP_UPC_COLLECTIVE_EXIT 1034

/* C events (Section 4) */
#define GASP_C_FREE 1035
#define GASP_C_REALLOC 1036
#define GASP_C_MALLOC 1037
#define GASP_C_FUNC 1038

#endif
