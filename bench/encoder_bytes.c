/* encoder_bytes: the bytes gaspard's C hot path writes for a fixed, varied
 * stream of GASP events, to compare two versions of the encoder.
 *
 *   encoder_bytes LIB.so EVENTS > out.bin
 *
 * LIB.so is bench/hotpath_stub.c with crates/gasp/csrc/gasp_shim.c and
 * crates/recorder/csrc/recorder.c, built with a clock the driver sets
 * (bench/encoder_bytes.sh builds two and compares them). Events: gets and
 * puts (directly and through gasp_event_notifyVA from a function with fewer
 * named arguments), twenty user events "%d %f" (more than the encoder's
 * slots for them) and two of other short schemas, non-blocking gets, barriers,
 * memsets, function entries (strings), unknown tags, measurement switched
 * off and on, callsites that change, columns out of range, time that jumps
 * and goes backwards. Writes the last chunk's payload (the buffer wraps
 * every megabyte, starting a new chunk). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include "gasp_upc.h"
typedef gasp_context_t (*init_fn)(gasp_model_t, int *, char ***);
typedef void (*notify_fn)(gasp_context_t, unsigned, gasp_evttype_t, const char *, int, int, ...);
typedef void (*notifyva_fn)(gasp_context_t, unsigned, gasp_evttype_t, const char *, int, int, va_list);
typedef int (*control_fn)(gasp_context_t, int);
typedef unsigned (*create_fn)(gasp_context_t, const char *, const char *);
static notifyva_fn nva; static gasp_context_t g;
static void few(unsigned tag, gasp_evttype_t ph, ...) { va_list ap; va_start(ap, ph); nva(g, tag, ph, "few.c", 3, 4, ap); va_end(ap); }
static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: encoder_bytes LIB.so EVENTS > out.bin\n");
    return 2;
  }
  int N = atoi(argv[2]);
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  init_fn init = (init_fn)dlsym(h, "gasp_init"); notify_fn n = (notify_fn)dlsym(h, "gasp_event_notify");
  nva = (notifyva_fn)dlsym(h, "gasp_event_notifyVA"); control_fn ctl = (control_fn)dlsym(h, "gasp_control");
  create_fn cr = (create_fn)dlsym(h, "gasp_create_event"); void (*set)(uint64_t) = (void (*)(uint64_t))dlsym(h, "fake_set");
  set(1000);
  g = init(GASP_MODEL_UPC, NULL, NULL);
  uint8_t *start = *(uint8_t **)g;
  unsigned u[20]; /* more than the encoder's 16 user-event slots */
  const char *unames[20] = {"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "u9",
                            "u10", "u11", "u12", "u13", "u14", "u15", "u16", "u17", "u18", "u19"};
  for (int k = 0; k < 20; k++) u[k] = cr(g, unames[k], "%d %f");
  /* Other short schemas: integer words and doubles mixed, and more doubles
   * than the registers hold (the last ones passed on the stack). */
  unsigned um = cr(g, "mixed", "%ld %f %p %d %f %zu");
  unsigned ud = cr(g, "doubles", "%f %f %f %f %f %f %f %f %f %f %d");
  unsigned char pts[3][16]; for (int k = 0; k < 3; k++) for (int i = 0; i < 16; i++) pts[k][i] = (unsigned char)(i * 7 + k);
  const char *files[3] = {"a.c", "b.c", NULL};
  uint64_t t = 5000;
  for (int i = 0; i < N; i++) {
    uint64_t r = next();
    unsigned d = (unsigned)(r % 100);
    t += d < 80 ? (r >> 8) % 100 : d < 95 ? (r >> 8) % 100000 : 0;
    if (d == 99) t -= (r >> 8) % 500; /* backwards */
    set(t);
    const char *f = files[(r >> 20) % 3 == 0 ? (r >> 22) % 3 : 0];
    int line = (r >> 24) % 8 == 0 ? (int)((r >> 27) % 5) : 10;
    int col = (r >> 30) % 8 == 0 ? (int)((r >> 33) % 70000) - 3 : 7;
    gasp_evttype_t ph = (gasp_evttype_t)((r >> 40) % 3);
    unsigned char *p = pts[(r >> 42) % 4 == 0 ? (r >> 44) % 3 : 0];
    size_t sz = (r >> 46) % 4 == 0 ? (r >> 48) % 1000 : 8;
    switch ((r >> 52) % 10) {
    case 0: case 1: case 2: n(g, GASP_UPC_GET, ph, f, line, col, 1, (void *)(uintptr_t)0x12345670, (void *)p, sz); break;
    case 3: n(g, GASP_UPC_PUT, ph, f, line, col, 0, (void *)p, (void *)(uintptr_t)0x12345670, sz); break;
    case 4: few(GASP_UPC_PUT, ph, 0, (void *)p, (void *)(uintptr_t)0x12345670, sz); break;
    case 5:
      if ((r >> 34) % 8 == 0) {
        double x = (double)(r >> 12) / 7.0;
        n(g, um, ph, f, line, col, (long)(r >> 40) - 5000, x, (void *)(uintptr_t)(r & ~7ull),
          (int)(r >> 60), (r >> 33) % 2 ? x : -x, (size_t)(r >> 50));
      } else if ((r >> 34) % 8 == 1) {
        double x = (double)((r >> 10) % 64) * 0.25;
        n(g, ud, ph, f, line, col, x, 1.0, x, -x, 2.5, x, x * x, 0.0, x + 1, (r >> 33) % 2 ? x : 3.0,
          (int)(r >> 58));
      } else {
        n(g, u[(r >> 36) % 4 == 0 ? (r >> 38) % 20 : 0], ph, f, line, col, (int)(r >> 56) - 100,
          (double)((r >> 58) % 4) * 0.5);
      }
      break;
    case 6: n(g, GASP_UPC_NB_GET_INIT, ph, f, line, col, 1, (void *)(uintptr_t)0x12345670, (void *)p, sz, (void *)(uintptr_t)(r >> 50)); break;
    case 7: n(g, GASP_UPC_BARRIER, ph, f, line, col, (int)(r % 3), (int)(r >> 60) - 4); break;
    case 8: if ((r >> 56) % 16 == 0) n(g, 0x7777u, ph, f, line, col); else n(g, GASP_UPC_MEMSET, ph, f, line, col, (void *)p, (int)sz, sz); break;
    case 9: if ((r >> 56) % 32 == 0) { ctl(g, 0); n(g, GASP_UPC_FENCE, ph, f, line, col); ctl(g, 1); } else n(g, GASP_C_FUNC, ph, f, line, col, (r >> 57) % 2 ? "fa" : "fb"); break;
    }
  }
  fwrite(start, 1, (size_t)(*(uint8_t **)g - start), stdout);
  return 0;
}
