/* The tracepoint of bench/lttng_tool.c: one event per GASP START/END, with
 * the event's tag and type (as the OTF2 peer keeps: region and enter/leave). */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER gaspard_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./lttng_tp.h"

#if !defined(GASPARD_BENCH_LTTNG_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define GASPARD_BENCH_LTTNG_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(
    gaspard_bench, event,
    LTTNG_UST_TP_ARGS(unsigned int, tag, int, type),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(unsigned int, tag, tag)
        lttng_ust_field_integer(int, type, type)))

#endif

#include <lttng/tracepoint-event.h>
