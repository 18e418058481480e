/* Storage the C hot path reaches without a function call. */
#include "gaspard_record.h"

__attribute__((aligned(64))) gaspard_ctx gaspard_contexts[GASPARD_MAX_CONTEXTS];
__thread char gaspard_tls_marker __attribute__((tls_model("initial-exec")));
int gaspard_clock_is_tsc = 0;

/* Accessors for Rust, which cannot name a C thread-local. */
const void *gaspard_tls_marker_addr(void) { return &gaspard_tls_marker; }
uint64_t gaspard_clock_now(void) { return gaspard_now(); }

/* Bytes per pointer-to-shared argument; the GASP shim defines the real value. */
__attribute__((weak)) const unsigned gaspard_pts_bytes = 16;
unsigned gaspard_pts_bytes_value(void) { return gaspard_pts_bytes; }
