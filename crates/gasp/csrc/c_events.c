/* The C events of GASP Section 4, for programs built with `gaspard cc --profile`:
 *
 * - GASP_C_FUNC from GCC/Clang's -finstrument-functions hooks. The function's
 *   name comes from dladdr once per address (the wrapper links with -rdynamic
 *   so that the program's own functions have names) and is cached; a static
 *   function, which has no dynamic symbol, is named module+offset.
 * - GASP_C_MALLOC, GASP_C_REALLOC, GASP_C_FREE from the program's calls,
 *   redirected here by the linker (-Wl,--wrap=malloc and so on); this
 *   library's own calls are not redirected.
 *
 * Both are throttled (GASPARD_THROTTLE): a function called very often for
 * very short times is no longer recorded in the process, a call site of
 * malloc, realloc or free no longer on a thread; the manifest's notes say
 * so, and for call sites how many calls (and bytes) were left out. On
 * x86-64 the hook calls of a throttled function are then patched out of the
 * code (GASPARD_THROTTLE_PATCH), so that its later calls cost nothing, and
 * the call of a throttled allocation call site is patched to call the C
 * library directly, so that its later calls cost what they cost without
 * gaspard (and are no longer counted).
 *
 * Events go to the calling thread's UPC-model context, as the spec's Section
 * 4 places C events under UPC's measurement control. A thread-local guard
 * keeps the tool from measuring itself. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unwind.h>

#include "gasp_upc.h"
#include "gaspard_record.h"

#define EXPORT __attribute__((visibility("default")))
#define NO_INSTRUMENT __attribute__((no_instrument_function))

/* Canonical kinds (crates/format/src/kinds.rs). */
enum { K_C_FUNC = 1, K_C_MALLOC, K_C_REALLOC, K_C_FREE };

gasp_context_t gaspard_pupc_context(void);

static __thread gaspard_ctx *here __attribute__((tls_model("initial-exec")));
static __thread int busy __attribute__((tls_model("initial-exec")));

/* This thread's context while measuring, else NULL. Sets the guard. */
static inline NO_INSTRUMENT gaspard_ctx *enter(void) {
  if (busy) return NULL;
  busy = 1;
  gaspard_ctx *c = here;
  if (__builtin_expect(c == NULL, 0)) here = c = (gaspard_ctx *)gaspard_pupc_context();
  if (c && (!c->on || !gaspard_reserve(c))) c = NULL;
  if (!c) busy = 0;
  return c;
}

static inline NO_INSTRUMENT void leave(void) { busy = 0; }

/* Function names by address: a direct-mapped cache, filled from dladdr. */
#define NAME_SLOTS 4096
static struct {
  void *fn;
  const char *name;
} names[NAME_SLOTS];

static NO_INSTRUMENT const char *name_of(void *fn) {
  unsigned i = (unsigned)(((uintptr_t)fn >> 4) % NAME_SLOTS);
  void *seen = __atomic_load_n(&names[i].fn, __ATOMIC_ACQUIRE);
  const char *name = __atomic_load_n(&names[i].name, __ATOMIC_ACQUIRE);
  if (seen == fn && name) return name;
  Dl_info info;
  int found = dladdr(fn, &info);
  if (found && info.dli_sname && info.dli_saddr == fn) {
    name = info.dli_sname; /* in the module's string table: lives as long as it */
  } else {
    /* A static function: its module and offset, the same from run to run. */
    char buf[300];
    if (found && info.dli_fname) {
      const char *base = strrchr(info.dli_fname, '/');
      snprintf(buf, sizeof buf, "%s+0x%lx", base ? base + 1 : info.dli_fname,
               (unsigned long)((uintptr_t)fn - (uintptr_t)info.dli_fbase));
    } else {
      snprintf(buf, sizeof buf, "%p", fn);
    }
    name = strdup(buf); /* kept for the life of the program */
    if (!name) return "?";
  }
  __atomic_store_n(&names[i].name, name, __ATOMIC_RELEASE);
  __atomic_store_n(&names[i].fn, fn, __ATOMIC_RELEASE);
  return name;
}

/* Throttling (GASPARD_THROTTLE, as TAU does): a function called more than
 * thr_calls times for less than thr_ticks on average on one thread is no
 * longer recorded on any thread of the process; the manifest notes it. Each
 * thread keeps its functions' counts in a small open-addressing table and,
 * for each active call, its function and whether its START was recorded, so
 * that END follows the same decision. The throttled functions of the
 * process are in a shared table (gone), which each thread looks at when
 * that table grows. */
#define FN_SLOTS 2048 /* functions per thread; more are recorded unthrottled */
#define FN_DEPTH 1024 /* nesting tracked per thread; deeper calls are recorded */
typedef struct {
  void *fn;
  uint64_t calls;
  uint64_t ticks;
  int throttled;
  unsigned gone_seen; /* the count of throttled functions when last looked at */
  unsigned stays;     /* its throttled calls met at sites that stay (not patched) */
  /* Its name's string number in the chunk of generation str_gen of context
   * str_ctx (the encoder numbers strings afresh in each chunk). */
  const gaspard_ctx *str_ctx;
  uint32_t str_gen, str_id;
} fn_stat;
typedef struct {
  uint64_t start; /* UINT64_MAX: not recorded */
  void *fn;
  fn_stat *st;
} fn_frame;
static __thread fn_stat *fn_stats __attribute__((tls_model("initial-exec")));
static __thread fn_frame *fn_stack __attribute__((tls_model("initial-exec")));
static __thread unsigned fn_depth __attribute__((tls_model("initial-exec")));
static int thr_state; /* 0 not read yet, 1 on, 2 off */
static uint64_t thr_calls, thr_ticks, thr_us;

/* Throttling of allocation calls: per thread and per call site (the address
 * malloc, realloc or free is called from) and kind, the rule of functions.
 * Once a site is throttled its calls and bytes are counted, and the notes
 * of the manifest give the counts (gaspard_note_source). */
#define SITE_SLOTS 128 /* call sites per thread; more are recorded unthrottled */
typedef struct {
  void *site;
  unsigned kind;
  int throttled;
  uint64_t calls, ticks;
  /* From the throttling on; written by the owning thread, read by the notes. */
  uint64_t skipped, skipped_bytes;
  const char *name;
  int patch_tried; /* its call was looked at for patching (x86-64) */
} site_stat;
typedef struct site_table {
  struct site_table *next;
  site_stat s[SITE_SLOTS];
} site_table;
static __thread site_table *sites __attribute__((tls_model("initial-exec")));
static site_table *all_sites; /* every thread's table (never freed), for the notes */

/* In a forked child, throttling starts over on the forking thread (the only
 * one left): the child's own trace names the functions and call sites it
 * throttles, and counts only its own calls. */
static int patch_lock;
static NO_INSTRUMENT void throttle_forked(void) {
  /* Throttled functions stay throttled: their patched code is inherited. */
  __atomic_store_n(&patch_lock, 0, __ATOMIC_RELEASE);
  if (fn_stats) memset(fn_stats, 0, FN_SLOTS * sizeof *fn_stats);
  for (site_table *t = all_sites; t; t = t->next)
    for (unsigned i = 0; i < SITE_SLOTS; i++) t->s[i].skipped = t->s[i].skipped_bytes = 0;
  if (sites) memset(sites->s, 0, sizeof sites->s);
}

__attribute__((constructor)) static NO_INSTRUMENT void throttle_setup(void) {
  pthread_atfork(NULL, NULL, throttle_forked);
}

int gaspard_throttle(uint64_t *calls, uint64_t *ticks, uint64_t *us);
void gaspard_note_source(size_t (*source)(char *out, size_t cap));
int gaspard_throttle_limits(uint64_t *calls, uint64_t *us);
void gaspard_note(const char *msg);

/* Whether throttling is on (GASPARD_THROTTLE). */
static inline NO_INSTRUMENT int throttling(void) {
  int state = __atomic_load_n(&thr_state, __ATOMIC_ACQUIRE);
  if (__builtin_expect(state == 0, 0)) {
    uint64_t c = 0, us = 0;
    if (gaspard_throttle_limits(&c, &us)) {
      thr_calls = c;
      thr_us = us;
      state = 1;
    } else {
      state = 2;
    }
    __atomic_store_n(&thr_state, state, __ATOMIC_RELEASE);
  }
  return state == 1;
}

/* The limit in clock ticks, measured when first needed: by then the
 * program has run a while, and the clock's rate is known without a wait. */
static NO_INSTRUMENT uint64_t limit_ticks(void) {
  uint64_t t = __atomic_load_n(&thr_ticks, __ATOMIC_RELAXED);
  if (t) return t;
  uint64_t c = 0, us = 0;
  if (!gaspard_throttle(&c, &t, &us) || !t) t = 1;
  __atomic_store_n(&thr_ticks, t, __ATOMIC_RELAXED);
  return t;
}

static NO_INSTRUMENT fn_stat *stat_of(void *fn) {
  if (!throttling()) return NULL;
  if (!fn_stats) {
    fn_stats = calloc(FN_SLOTS, sizeof *fn_stats);
    fn_stack = calloc(FN_DEPTH, sizeof *fn_stack);
    if (!fn_stats || !fn_stack) return NULL;
  }
  unsigned h = (unsigned)(((uintptr_t)fn >> 4) % FN_SLOTS);
  for (unsigned probe = 0; probe < 16; probe++) {
    fn_stat *st = &fn_stats[(h + probe) % FN_SLOTS];
    if (st->fn == fn) return st;
    if (!st->fn) {
      st->fn = fn;
      return st;
    }
  }
  return NULL;
}

/* The throttled functions of the process: inserted under patch_lock, looked
 * up without it (fn is stored last, with release). */
#define GONE_SLOTS 1024
typedef struct {
  void *fn;
  const char *name;
  uint64_t calls; /* on the thread that throttled it */
  double us;      /* mean duration there */
  unsigned sites; /* hook call sites patched out */
} gone_fn;
static gone_fn gone[GONE_SLOTS];
static unsigned gone_count;

static NO_INSTRUMENT gone_fn *gone_of(void *fn) {
  unsigned h = (unsigned)(((uintptr_t)fn >> 4) % GONE_SLOTS);
  for (unsigned probe = 0; probe < 32; probe++) {
    gone_fn *g = &gone[(h + probe) % GONE_SLOTS];
    void *seen = __atomic_load_n(&g->fn, __ATOMIC_ACQUIRE);
    if (seen == fn) return g;
    if (!seen) return NULL;
  }
  return NULL;
}

/* Whether st's function is throttled, here or by another thread. */
static inline NO_INSTRUMENT int is_throttled(fn_stat *st) {
  if (st->throttled) return 1;
  unsigned n = __atomic_load_n(&gone_count, __ATOMIC_ACQUIRE);
  if (__builtin_expect(n == st->gone_seen, 1)) return 0;
  st->gone_seen = n;
  if (gone_of(st->fn)) st->throttled = 1;
  return st->throttled;
}

/* patch_lock serialises the rare changes: throttling a function, patching
 * a call site. Taken with a try, never waited for: a thread that finds it
 * taken (another thread, or this one in a signal handler) leaves its work
 * for a later call. */
static inline NO_INSTRUMENT int patch_trylock(void) {
  return !__atomic_exchange_n(&patch_lock, 1, __ATOMIC_ACQUIRE);
}
static inline NO_INSTRUMENT void patch_unlock(void) {
  __atomic_store_n(&patch_lock, 0, __ATOMIC_RELEASE);
}

static size_t gone_notes(char *out, size_t cap);
static int patch_state; /* 0 not decided yet, 1 on, 2 off */
int gaspard_throttle_patch(void);

/* Whether throttled calls may be patched (GASPARD_THROTTLE_PATCH, and no
 * failure of mprotect so far). */
static inline NO_INSTRUMENT int patching_on(void) {
  int state = __atomic_load_n(&patch_state, __ATOMIC_ACQUIRE);
  if (__builtin_expect(state == 0, 0)) {
    state = gaspard_throttle_patch() ? 1 : 2;
    __atomic_store_n(&patch_state, state, __ATOMIC_RELEASE);
  }
  return state == 1;
}

/* The allocation call sites whose call was patched to call the C library
 * directly (x86-64): they never reach the wrappers again, on any thread, so
 * their calls are neither recorded nor counted from then on, and the notes
 * say so. Added under patch_lock, `count` last with release; kept in a
 * forked child, which runs the same patched code. */
#define ALLOC_PATCHED_MAX 256
static struct {
  void *site;
  unsigned kind;
  const char *name;
} alloc_patched[ALLOC_PATCHED_MAX];
static unsigned alloc_patched_count;

/* Whether `site`'s call was patched. */
static NO_INSTRUMENT int alloc_was_patched(void *site) {
  unsigned n = __atomic_load_n(&alloc_patched_count, __ATOMIC_ACQUIRE);
  for (unsigned i = 0; i < n; i++)
    if (alloc_patched[i].site == site) return 1;
  return 0;
}

/* Makes st's function throttled for the process. Returns 0 when the lock
 * was taken (the next call tries again). */
static NO_INSTRUMENT int throttle_fn(fn_stat *st) {
  if (!patch_trylock()) return 0;
  st->throttled = 1;
  if (!gone_of(st->fn)) {
    unsigned h = (unsigned)(((uintptr_t)st->fn >> 4) % GONE_SLOTS);
    for (unsigned probe = 0; probe < 32; probe++) {
      gone_fn *g = &gone[(h + probe) % GONE_SLOTS];
      if (g->fn) continue;
      g->name = name_of(st->fn);
      g->calls = st->calls;
      g->us = (double)st->ticks / (double)st->calls * (double)thr_us / (double)limit_ticks();
      __atomic_store_n(&g->fn, st->fn, __ATOMIC_RELEASE);
      __atomic_add_fetch(&gone_count, 1, __ATOMIC_RELEASE);
      break;
    } /* table full: throttled on this thread only */
    static int registered;
    if (!__atomic_exchange_n(&registered, 1, __ATOMIC_ACQ_REL)) gaspard_note_source(gone_notes);
  }
  patch_unlock();
  return 1;
}

/* The notes: one line per throttled function. Read at each manifest, so a
 * forked child, whose code stays patched, names them too. */
static NO_INSTRUMENT size_t gone_notes(char *out, size_t cap) {
  size_t used = 0;
  int patching = __atomic_load_n(&patch_state, __ATOMIC_ACQUIRE) == 1;
  for (unsigned i = 0; i < GONE_SLOTS && used < cap; i++) {
    gone_fn *g = &gone[i];
    if (!__atomic_load_n(&g->fn, __ATOMIC_ACQUIRE)) continue;
    unsigned sites = __atomic_load_n(&g->sites, __ATOMIC_RELAXED);
    char how[128] = "";
    if (sites)
      snprintf(how, sizeof how, "; its hook calls were patched out of the code at %u call site%s",
               sites, sites == 1 ? "" : "s");
    else if (!patching)
      snprintf(how, sizeof how, "; its hook calls were not patched out");
    int w = snprintf(out + used, cap - used,
                     "function %s: no longer recorded on any thread after %llu calls of %.3f us "
                     "on average on one thread (GASPARD_THROTTLE=%llu,%llu)%s\n",
                     g->name, (unsigned long long)g->calls, g->us, (unsigned long long)thr_calls,
                     (unsigned long long)thr_us, how);
    if (w < 0 || (size_t)w >= cap - used) break;
    used += (size_t)w;
  }
  return used;
}

/* Patching out the hook calls of throttled functions (x86-64), as XRay
 * patches its sleds: a hook call `call rel32` (5 bytes, e8) or `call
 * *disp32(%rip)` (6 bytes, ff 15, gcc's -fno-plt) becomes a 2-byte short
 * jump over itself (eb 03, eb 04), written with one atomic 16-bit store
 * while the page is writable and executable; a thread running that code
 * meanwhile executes either the old call or the jump. A call site is
 * patched only when its bytes are those of a call to our hook, directly or
 * through a PLT stub (`jmp *GOT`, after endbr64 and a bnd prefix or not)
 * whose GOT slot holds our hook, all in mapped code read from
 * /proc/self/maps. Each site is looked at once: patched or refused, it goes
 * into a set of sites. */
#if defined(__x86_64__)
#define PATCH_SLOTS 8192
static void *patch_seen[PATCH_SLOTS];

static inline NO_INSTRUMENT int site_seen(void *site) {
  unsigned h = (unsigned)(((uintptr_t)site >> 2) % PATCH_SLOTS);
  for (unsigned probe = 0; probe < 16; probe++) {
    void *s = __atomic_load_n(&patch_seen[(h + probe) % PATCH_SLOTS], __ATOMIC_ACQUIRE);
    if (s == site) return 1;
    if (!s) return 0;
  }
  return 1; /* the set is full around here: no more patching of such sites */
}

static NO_INSTRUMENT void site_add(void *site) {
  unsigned h = (unsigned)(((uintptr_t)site >> 2) % PATCH_SLOTS);
  for (unsigned probe = 0; probe < 16; probe++) {
    void **s = &patch_seen[(h + probe) % PATCH_SLOTS];
    if (!*s) {
      __atomic_store_n(s, site, __ATOMIC_RELEASE);
      return;
    }
  }
}

/* The permissions of the mapping holding [a, a + n): "r-xp" and so on, or
 * an empty string when no single mapping holds it. Reads /proc/self/maps
 * with plain system calls (no stdio, no allocation). */
static NO_INSTRUMENT void perms_of(uintptr_t a, size_t n, char perms[5]) {
  perms[0] = 0;
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[4096], line[512];
  size_t len = 0;
  ssize_t got;
  while ((got = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < got; i++) {
      if (buf[i] != '\n') {
        if (len < sizeof line - 1) line[len++] = buf[i];
        continue;
      }
      line[len] = 0;
      len = 0;
      char *end;
      unsigned long lo = strtoul(line, &end, 16);
      if (*end != '-') continue;
      unsigned long hi = strtoul(end + 1, &end, 16);
      if (*end != ' ' || strlen(end + 1) < 4) continue;
      if (a >= lo && a + n <= hi) {
        memcpy(perms, end + 1, 4);
        perms[4] = 0;
        close(fd);
        return;
      }
    }
  }
  close(fd);
}

static NO_INSTRUMENT int readable(uintptr_t a, size_t n) {
  char p[5];
  perms_of(a, n, p);
  return p[0] == 'r';
}

/* Whether the code at `t` is a PLT stub that jumps to `hook`. */
static NO_INSTRUMENT int plt_to(const uint8_t *t, void *hook, void *hook2) {
  if (!readable((uintptr_t)t, 16)) return 0;
  const uint8_t *j = t;
  static const uint8_t endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
  if (!memcmp(j, endbr64, 4)) j += 4;
  if (j[0] == 0xf2) j++; /* bnd */
  if (j[0] != 0xff || j[1] != 0x25) return 0;
  int32_t rel;
  memcpy(&rel, j + 2, 4);
  uintptr_t slot = (uintptr_t)(j + 6) + (intptr_t)rel;
  if (slot % sizeof(void *) || !readable(slot, sizeof(void *))) return 0;
  void *to = __atomic_load_n((void **)slot, __ATOMIC_RELAXED);
  return to == hook || to == hook2;
}

static NO_INSTRUMENT void patch_failed(const char *what, int err) {
  __atomic_store_n(&patch_state, 2, __ATOMIC_RELEASE);
  char msg[256];
  snprintf(msg, sizeof msg,
           "throttled functions and call sites: their calls are no longer patched in the code (%s: "
           "%s)",
           what, strerror(err));
  gaspard_note(msg);
}

/* Writes `bytes` (1, 2 or 4) bytes of `value` at `at` in code: the page
 * made writable, one store, the page back to read and execute. The caller
 * checked that the bytes are in one cache line, so that the store is atomic
 * on x86-64 (and within one page). 1 when written. */
static NO_INSTRUMENT int code_store(void *at, unsigned bytes, uint32_t value) {
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return 0;
  void *base = (void *)((uintptr_t)at & ~(uintptr_t)(page - 1));
  if (mprotect(base, (size_t)page, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
    patch_failed("mprotect", errno);
    return 0;
  }
  /* The address is unaligned: an instruction rather than a C store. */
  if (bytes == 1)
    __atomic_store_n((uint8_t *)at, (uint8_t)value, __ATOMIC_RELEASE);
  else if (bytes == 2)
    __asm__ volatile("movw %1, (%0)" : : "r"(at), "r"((uint16_t)value) : "memory");
  else
    __asm__ volatile("movl %1, (%0)" : : "r"(at), "r"(value) : "memory");
  if (mprotect(base, (size_t)page, PROT_READ | PROT_EXEC) != 0) patch_failed("mprotect", errno);
  return 1;
}


/* Patches out the hook call that returns to `ret`, when it is one. */
static NO_INSTRUMENT int patch_call(uint8_t *ret, void *hook, void *hook2) {
  char p[5];
  perms_of((uintptr_t)ret - 6, 6, p);
  if (strcmp(p, "r-xp") != 0) return 0;
  uint8_t *site;
  uint16_t jump;
  int32_t rel;
  memcpy(&rel, ret - 4, 4);
  if (ret[-5] == 0xe8) {
    const uint8_t *t = ret + rel;
    if ((void *)t != hook && (void *)t != hook2 && !plt_to(t, hook, hook2)) return 0;
    site = ret - 5;
    jump = 0x03eb; /* eb 03, little-endian */
  } else if (ret[-6] == 0xff && ret[-5] == 0x15) {
    uintptr_t slot = (uintptr_t)ret + (intptr_t)rel;
    if (slot % sizeof(void *) || !readable(slot, sizeof(void *))) return 0;
    void *to = __atomic_load_n((void **)slot, __ATOMIC_RELAXED);
    if (to != hook && to != hook2) return 0;
    site = ret - 6;
    jump = 0x04eb;
  } else {
    return 0;
  }
  /* One store must hold both bytes: not across a cache line. */
  if (((uintptr_t)site & 63) == 63) return 0;
  return code_store(site, 2, jump);
}

/* The exit hook reached by a jump: gcc -O2 ends a function with `jmp` to
 * the exit hook (a tail call), which then returns to the function's
 * caller. That jump is found in the function's code (its size from its
 * dynamic symbol, or for a static function from the module's .symtab): the
 * jump to the hook is `jmp rel32` (e9) to the hook or its PLT stub, or
 * `jmp *GOT` (ff 25) whose slot holds the hook, and exactly one such byte
 * sequence must be there, else nothing is patched (the real jump is
 * among them, so a lone one is it). It becomes `ret` (c3), one byte, which
 * returns to the caller as the hook would. */
/* Calls `each` on every symbol of the .symtab of the ELF file at `path` (its
 * name from the section's string table, "" when out of bounds) until it
 * returns nonzero; returns that value, 0 when the file is not there or has
 * no .symtab. */
typedef int (*symtab_fn)(const ElfW(Sym) *sym, const char *name, void *arg);
static NO_INSTRUMENT int symtab_each(const char *path, symtab_fn each, void *arg) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || sb.st_size < (off_t)sizeof(ElfW(Ehdr))) {
    close(fd);
    return 0;
  }
  size_t len = (size_t)sb.st_size;
  const uint8_t *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return 0;
  int r = 0;
  const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)m;
  if (!memcmp(eh->e_ident, ELFMAG, SELFMAG) && eh->e_shentsize == sizeof(ElfW(Shdr)) &&
      eh->e_shoff < len && eh->e_shnum <= (len - eh->e_shoff) / sizeof(ElfW(Shdr))) {
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(m + eh->e_shoff);
    for (unsigned i = 0; i < eh->e_shnum && !r; i++) {
      if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_offset > len ||
          sh[i].sh_size > len - sh[i].sh_offset)
        continue;
      const char *strtab = NULL;
      size_t strlen_ = 0;
      if (sh[i].sh_link < eh->e_shnum && sh[sh[i].sh_link].sh_offset <= len &&
          sh[sh[i].sh_link].sh_size <= len - sh[sh[i].sh_link].sh_offset) {
        strtab = (const char *)m + sh[sh[i].sh_link].sh_offset;
        strlen_ = sh[sh[i].sh_link].sh_size;
      }
      const ElfW(Sym) *sym = (const ElfW(Sym) *)(m + sh[i].sh_offset);
      size_t n = sh[i].sh_size / sizeof(ElfW(Sym));
      for (size_t k = 0; k < n && !r; k++) {
        /* A name must end inside the table: memchr bounds it. */
        const char *name = "";
        if (strtab && sym[k].st_name < strlen_ &&
            memchr(strtab + sym[k].st_name, 0, strlen_ - sym[k].st_name))
          name = strtab + sym[k].st_name;
        r = each(&sym[k], name, arg);
      }
    }
  }
  munmap((void *)m, len);
  return r;
}

struct size_query {
  uintptr_t bias, fn;
  size_t size;
};

static NO_INSTRUMENT int size_of_sym(const ElfW(Sym) *sym, const char *name, void *arg) {
  (void)name;
  struct size_query *q = arg;
  if (ELF64_ST_TYPE(sym->st_info) == STT_FUNC && sym->st_value &&
      q->bias + sym->st_value == q->fn) {
    q->size = sym->st_size;
    return 1;
  }
  return 0;
}

/* The size of the function at fn from its module's symbol table (.symtab,
 * read from the file: the program's own is /proc/self/exe), for a static
 * function, which has no dynamic symbol. 0 when not found. */
static NO_INSTRUMENT size_t symtab_size(void *fn) {
  Dl_info info;
  struct link_map *lm = NULL;
  if (!dladdr1(fn, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm) return 0;
  const char *path = lm->l_name && lm->l_name[0] ? lm->l_name : "/proc/self/exe";
  struct size_query q = {lm->l_addr, (uintptr_t)fn, 0};
  symtab_each(path, size_of_sym, &q);
  return q.size;
}

/* --- Coarray Fortran call sites ---------------------------------------
 * OpenCoarrays' runtime (libcaf_mpi) is linked into the program itself, and
 * its MPI calls return into it, where no source line is known. An MPI call
 * made from the runtime's code takes as its call site the first return
 * address outside that code up the stack: the program's line that called the
 * runtime (the `sync all`, the coarray access, `end program`).
 *
 * The runtime's code is found once, from the program's .symtab: the hull of
 * its `_gfortran_caf_*` functions, widened to the static functions of the
 * source files that have one among them (helpers placed before or after
 * them). A source file's code is contiguous in the program, so nothing else
 * lies in that range; cold parts (`.cold`, placed apart) are left out. */

struct caf_scan {
  uintptr_t bias;
  uintptr_t glo, ghi; /* the hull of the _gfortran_caf_* functions */
  uintptr_t lo, hi;   /* the current source file's static functions */
  int in;             /* whether one of them lies in [glo, ghi) */
  uintptr_t wlo, whi; /* the hull widened */
};

static NO_INSTRUMENT int caf_entries(const ElfW(Sym) *sym, const char *name, void *arg) {
  struct caf_scan *r = arg;
  if (ELF64_ST_TYPE(sym->st_info) == STT_FUNC && sym->st_value &&
      ELF64_ST_BIND(sym->st_info) != STB_LOCAL && !strncmp(name, "_gfortran_caf_", 14)) {
    uintptr_t a = r->bias + sym->st_value, b = a + sym->st_size;
    if (!r->glo || a < r->glo) r->glo = a;
    if (b > r->ghi) r->ghi = b;
  }
  return 0;
}

/* Ends the current source file's static functions: the hull is widened to
 * them when one lies among the runtime's entry points. */
static NO_INSTRUMENT void caf_file_end(struct caf_scan *r) {
  if (r->in) {
    if (r->lo < r->wlo) r->wlo = r->lo;
    if (r->hi > r->whi) r->whi = r->hi;
  }
  r->lo = r->hi = 0, r->in = 0;
}

static NO_INSTRUMENT int caf_helpers(const ElfW(Sym) *sym, const char *name, void *arg) {
  struct caf_scan *r = arg;
  if (ELF64_ST_TYPE(sym->st_info) == STT_FILE) {
    caf_file_end(r);
  } else if (ELF64_ST_TYPE(sym->st_info) == STT_FUNC && sym->st_value &&
             ELF64_ST_BIND(sym->st_info) == STB_LOCAL && !strstr(name, ".cold")) {
    uintptr_t a = r->bias + sym->st_value, b = a + sym->st_size;
    if (a - r->glo < r->ghi - r->glo) r->in = 1;
    if (!r->lo || a < r->lo) r->lo = a;
    if (b > r->hi) r->hi = b;
  }
  return 0;
}

/* The program's executable code, where the runtime's callers are. */
static uintptr_t prog_text_lo, prog_text_hi;

/* The program (the first module): its load bias in *arg, its code in
 * prog_text_lo and prog_text_hi. */
static NO_INSTRUMENT int main_module(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  *(uintptr_t *)arg = info->dlpi_addr;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      prog_text_lo = info->dlpi_addr + ph->p_vaddr;
      prog_text_hi = prog_text_lo + ph->p_memsz;
    }
  }
  return 1;
}

/* The program's OpenCoarrays code [*lo, *hi), or 0 and 0 when it has none
 * (not a Coarray Fortran program, or no .symtab). Called once, by
 * libgaspard_mpi.so as it is loaded. */
EXPORT NO_INSTRUMENT void gaspard_caf_range(uintptr_t *lo, uintptr_t *hi) {
  struct caf_scan r = {0};
  *lo = *hi = 0;
  dl_iterate_phdr(main_module, &r.bias);
  symtab_each("/proc/self/exe", caf_entries, &r);
  if (r.glo >= r.ghi) return;
  r.wlo = r.glo, r.whi = r.ghi;
  symtab_each("/proc/self/exe", caf_helpers, &r);
  caf_file_end(&r);
  *lo = r.wlo, *hi = r.whi;
}

/* libgcc gives with each frame's IP the CFA of the frame that IP returns
 * from (the callee's): the second frame's is gaspard_caf_caller's own, and
 * the return address into the program is stored right below the CFA given
 * with it. */
struct caf_walk {
  uintptr_t lo, hi, found;
  uintptr_t own_cfa;   /* gaspard_caf_caller's, given with the second frame */
  uintptr_t found_cfa; /* given with the frame found */
  int inside, frames;
};

static NO_INSTRUMENT _Unwind_Reason_Code caf_step(struct _Unwind_Context *ctx, void *arg) {
  struct caf_walk *w = arg;
  uintptr_t ip = (uintptr_t)_Unwind_GetIP(ctx);
  if (!ip || ++w->frames > 32) return _URC_END_OF_STACK;
  if (w->frames == 2) w->own_cfa = (uintptr_t)_Unwind_GetCFA(ctx);
  /* A return address: the call is the instruction before it. */
  if (ip - 1 - w->lo < w->hi - w->lo) {
    w->inside = 1;
  } else if (w->inside) {
    w->found = ip;
    w->found_cfa = (uintptr_t)_Unwind_GetCFA(ctx);
    return _URC_END_OF_STACK;
  }
  return _URC_NO_REASON;
}

/* Unwinding the stack takes about 0.7 us here, three times per coarray
 * access (lock, get, unlock): each thread keeps, per return address into the
 * runtime, where the runtime's caller's return address was found on the
 * stack, relative to this function's frame. A call from the same place in the
 * runtime finds it there again, in one read, checked to be a return address
 * into the program's code outside the runtime (else the stack is unwound
 * again). */
#define CAF_CACHE 32
typedef struct {
  uintptr_t ra;
  uintptr_t off;
} caf_entry;
/* Allocated at a thread's first coarray call: a pointer in thread-local
 * storage, whose static part is small when libgaspard.so is loaded by dlopen
 * (OMP_TOOL_LIBRARIES); a thread's 512 bytes are kept until the program
 * ends. */
static __thread caf_entry *caf_cache;

static NO_INSTRUMENT int caf_caller_ok(uintptr_t v, uintptr_t lo, uintptr_t hi) {
  return v - prog_text_lo < prog_text_hi - prog_text_lo && v - 1 - lo >= hi - lo;
}

/* The call site to record for a call returning to `ra`, inside the range
 * [lo, hi) of gaspard_caf_range: the first return address outside it up the
 * stack, else `ra`. */
EXPORT NO_INSTRUMENT __attribute__((noinline)) uint64_t gaspard_caf_caller(uintptr_t ra,
                                                                           uintptr_t lo,
                                                                           uintptr_t hi) {
  /* The frame address keeps this function's frame pointer: its CFA is 16
   * bytes above it. */
  uintptr_t cfa = (uintptr_t)__builtin_frame_address(0) + 16;
  /* Two places for each return address: a few places in the runtime take
   * turns (the lock, the get and the unlock of a coarray read). */
  unsigned h = (unsigned)((ra * 0x9e3779b97f4a7c15u) >> 59) % CAF_CACHE, h2 = (h + 1) % CAF_CACHE;
  unsigned k = !caf_cache ? CAF_CACHE : caf_cache[h].ra == ra ? h : caf_cache[h2].ra == ra ? h2 : CAF_CACHE;
  if (k < CAF_CACHE) {
    /* Less than 4 KiB above this frame: on this thread's stack (the frames
     * that called it, then those of the program, its start and what lies
     * above a stack's first frame), so the read cannot fault. */
    uintptr_t v = *(const uintptr_t *)(cfa + caf_cache[k].off);
    if (caf_caller_ok(v, lo, hi)) return v;
  }
  struct caf_walk w = {lo, hi, 0, 0, 0, 0, 0};
  _Unwind_Backtrace(caf_step, &w);
  if (!w.found) return ra;
  uintptr_t slot = w.found_cfa - sizeof(uintptr_t);
  if (!caf_cache) caf_cache = calloc(CAF_CACHE, sizeof *caf_cache);
  if (caf_cache && w.own_cfa == cfa && slot > cfa && slot - cfa < 4096 &&
      *(const uintptr_t *)slot == w.found && caf_caller_ok(w.found, lo, hi)) {
    k = caf_cache[h].ra == 0 || caf_cache[h].ra == ra ? h : h2;
    caf_cache[k].ra = ra;
    caf_cache[k].off = slot - cfa;
  }
  return w.found;
}

static NO_INSTRUMENT int patch_tail(void *fn, void *hook, void *hook2) {
  Dl_info info;
  const ElfW(Sym) *sym = NULL;
  size_t size = 0;
  if (dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT) && sym && info.dli_saddr == fn)
    size = sym->st_size;
  else
    size = symtab_size(fn);
  if (size < 5 || size > (1u << 20)) return 0;
  char p[5];
  perms_of((uintptr_t)fn, size, p);
  if (strcmp(p, "r-xp") != 0) return 0;
  const uint8_t *b = fn;
  const uint8_t *seen_stub = NULL;
  unsigned found = 0;
  size_t at = 0;
  for (size_t i = 0; i + 5 <= size; i++) {
    int32_t rel;
    if (b[i] == 0xe9) {
      memcpy(&rel, b + i + 1, 4);
      const uint8_t *t = b + i + 5 + rel;
      if ((void *)t == hook || (void *)t == hook2 || t == seen_stub || plt_to(t, hook, hook2)) {
        if ((void *)t != hook && (void *)t != hook2) seen_stub = t;
        found++;
        at = i;
      }
    } else if (b[i] == 0xff && i + 6 <= size && b[i + 1] == 0x25) {
      memcpy(&rel, b + i + 2, 4);
      uintptr_t slot = (uintptr_t)(b + i + 6) + (intptr_t)rel;
      if (slot % sizeof(void *) == 0 && readable(slot, sizeof(void *))) {
        void *to = __atomic_load_n((void **)slot, __ATOMIC_RELAXED);
        if (to == hook || to == hook2) {
          found++;
          at = i;
        }
      }
    }
    if (found > 1) return 0;
  }
  if (found != 1) return 0;
  return code_store((uint8_t *)fn + at, 1, 0xc3);
}

extern void enter_hook(void *fn, void *site)
    __attribute__((alias("__cyg_profile_func_enter"), visibility("hidden")));
extern void exit_hook(void *fn, void *site)
    __attribute__((alias("__cyg_profile_func_exit"), visibility("hidden")));

/* A throttled call of st's function met at the hook call that returns to
 * `ret`: patches it out when that can be done. When `ret` is the
 * function's own return address (`caller`), the exit hook was jumped to,
 * not called. A thread that keeps meeting a function's calls at sites
 * already looked at (not patchable) stops looking, so that such calls cost
 * what they did before patching. */
#define STAYS_MAX 4096
static NO_INSTRUMENT void patch_out(fn_stat *st, void *ret, void *caller, int is_exit) {
  if (st->stays >= STAYS_MAX) return;
  void *fn = st->fn;
  int tail = is_exit && ret == caller;
  if (tail) ret = fn; /* the key of the function's tail jump */
  if (!patching_on()) {
    st->stays = STAYS_MAX;
    return;
  }
  if (site_seen(ret)) {
    st->stays++;
    return;
  }
  if (!patch_trylock()) return;
  if (!site_seen(ret) && __atomic_load_n(&patch_state, __ATOMIC_ACQUIRE) == 1) {
    void *hook = is_exit ? (void *)exit_hook : (void *)enter_hook;
    /* The address the program resolves the hook to, should it differ. */
    void *hook2 = dlsym(RTLD_DEFAULT, is_exit ? "__cyg_profile_func_exit" : "__cyg_profile_func_enter");
    if (!hook2) hook2 = hook;
    if (tail ? patch_tail(fn, hook, hook2) : patch_call(ret, hook, hook2)) {
      gone_fn *g = gone_of(fn);
      if (g) __atomic_add_fetch(&g->sites, 1, __ATOMIC_RELAXED);
    }
    site_add(ret);
  }
  patch_unlock();
}
/* Throttled allocation call sites (x86-64). The program's calls of malloc,
 * realloc and free reach the wrappers through the linker's --wrap: `call
 * rel32` (e8) to the PLT stub of __wrap_malloc (or to the wrapper itself,
 * linked statically), or -fno-plt's `call *disp32(%rip)` (ff 15) through
 * the GOT slot of __wrap_malloc. Once a call site is throttled on a thread,
 * its 4-byte displacement is rewritten so that the call reaches the C
 * library's function instead (the one the wrapper calls): for e8, a stub
 * `jmp *slot(%rip)` in a page of trampolines mapped within reach (±2 GiB)
 * of the call, the slot holding the function's address; for ff 15, that
 * slot itself. The call then costs what a call through the PLT costs, and
 * the allocation is the same one the wrapper would have made, so memory
 * allocated at a patched site is freed as before, wherever it is freed.
 * The displacement is written with one 4-byte store that does not cross a
 * cache line (atomic on x86-64, as the 2-byte jumps above), while the page
 * is writable; a thread running that call meanwhile calls either the
 * wrapper or the function. Any doubt (bytes not those of such a call, a
 * mapping that is not r-xp, no trampoline within reach) leaves the call as
 * it is, going through the wrapper, counted. A patched site is patched for
 * every thread: its later calls are neither recorded nor counted anywhere,
 * and the notes say so (alloc_patched). */
#define TRAMP_MAX 16
static uint8_t *tramps[TRAMP_MAX];
static unsigned tramp_count;
/* A trampoline page: the stub of kind k (K_C_MALLOC..K_C_FREE) at 16 *
 * (k - K_C_MALLOC), its slot at 64 + 8 * (k - K_C_MALLOC). */
#define TRAMP_STUB(t, k) ((t) + 16 * ((k) - K_C_MALLOC))
#define TRAMP_SLOT(t, k) ((t) + 64 + 8 * ((k) - K_C_MALLOC))
#define TRAMP_BYTES 96

/* The function a wrapper of `kind` calls: this library's own references
 * to malloc, realloc and free, which the program's --wrap does not
 * redirect; the dynamic linker resolves them as the program's own (the C
 * library's, or an allocator's preloaded before it). */
static NO_INSTRUMENT void *libc_of(unsigned kind) {
  switch (kind) {
    case K_C_MALLOC: return (void *)malloc;
    case K_C_REALLOC: return (void *)realloc;
    case K_C_FREE: return (void *)free;
  }
  return NULL;
}

/* Whether a displacement from `from` (the end of an instruction) reaches `to`. */
static inline NO_INSTRUMENT int reaches(const uint8_t *from, const uint8_t *to) {
  int64_t d = (int64_t)((uintptr_t)to - (uintptr_t)from);
  return d >= INT32_MIN && d <= INT32_MAX;
}

/* A free, page-aligned address for one page within reach of `site`: the
 * top of the nearest gap below it in /proc/self/maps (listed in address
 * order), above the first MiB and not above the heap (where brk grows).
 * 0 when there is none. Plain system calls, as perms_of. */
static NO_INSTRUMENT uintptr_t free_page_near(uintptr_t site, size_t page) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096], line[512];
  size_t len = 0;
  ssize_t got;
  uintptr_t prev_hi = (uintptr_t)1 << 20, best = 0;
  int prev_heap = 0, done = 0;
  while (!done && (got = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < got && !done; i++) {
      if (buf[i] != '\n') {
        if (len < sizeof line - 1) line[len++] = buf[i];
        continue;
      }
      line[len] = 0;
      len = 0;
      char *end;
      unsigned long lo = strtoul(line, &end, 16);
      if (*end != '-') continue;
      unsigned long hi = strtoul(end + 1, &end, 16);
      if (*end != ' ') continue;
      if (lo > site) {
        done = 1;
        break;
      }
      if (lo >= prev_hi + page && !prev_heap && site - (lo - page) < ((uintptr_t)1 << 31) - page)
        best = lo - page;
      if (hi > prev_hi) prev_hi = hi;
      prev_heap = strstr(end, "[heap]") != NULL;
    }
  }
  close(fd);
  return best;
}

/* A trampoline page within reach of the call ending at `ret`, mapped when
 * there is none yet (at most TRAMP_MAX). NULL when none can be had. Under
 * patch_lock. */
static NO_INSTRUMENT uint8_t *tramp_near(const uint8_t *ret) {
  for (unsigned i = 0; i < tramp_count; i++)
    if (reaches(ret, tramps[i]) && reaches(ret, tramps[i] + TRAMP_BYTES)) return tramps[i];
  if (tramp_count == TRAMP_MAX) return NULL;
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return NULL;
  uintptr_t at = free_page_near((uintptr_t)ret, (size_t)page);
  if (!at) return NULL;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_FIXED_NOREPLACE
  flags |= MAP_FIXED_NOREPLACE; /* never over a mapping; older kernels take it as a hint */
#endif
  uint8_t *t = mmap((void *)at, (size_t)page, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (t == MAP_FAILED) return NULL;
  if ((uintptr_t)t != at) { /* placed elsewhere: maybe out of reach */
    munmap(t, (size_t)page);
    return NULL;
  }
  memset(t, 0xcc, (size_t)page); /* int3 wherever no stub is */
  for (unsigned k = K_C_MALLOC; k <= K_C_FREE; k++) {
    uint8_t *stub = TRAMP_STUB(t, k), *slot = TRAMP_SLOT(t, k);
    int32_t rel = (int32_t)(slot - (stub + 6));
    stub[0] = 0xff, stub[1] = 0x25; /* jmp *rel(%rip) */
    memcpy(stub + 2, &rel, 4);
    void *fn = libc_of(k);
    memcpy(slot, &fn, sizeof fn);
  }
  /* Executable, no longer writable; a W^X policy refusing it: no trampoline. */
  if (mprotect(t, (size_t)page, PROT_READ | PROT_EXEC) != 0) {
    munmap(t, (size_t)page);
    return NULL;
  }
  tramps[tramp_count++] = t;
  return t;
}

extern void *wrap_malloc_fn(size_t n) __attribute__((alias("__wrap_malloc"), visibility("hidden")));
extern void *wrap_realloc_fn(void *p, size_t n)
    __attribute__((alias("__wrap_realloc"), visibility("hidden")));
extern void wrap_free_fn(void *p) __attribute__((alias("__wrap_free"), visibility("hidden")));

static const char *const wrap_name[] = {"", "", "__wrap_malloc", "__wrap_realloc", "__wrap_free"};

/* Makes the call of the wrapper of `kind` that returns to `ret` call the C
 * library's function directly, when it is such a call. Under patch_lock. */
static NO_INSTRUMENT int patch_alloc_call(uint8_t *ret, unsigned kind) {
  void *wrap = kind == K_C_MALLOC    ? (void *)wrap_malloc_fn
               : kind == K_C_REALLOC ? (void *)wrap_realloc_fn
                                     : (void *)wrap_free_fn;
  /* The address the program resolves the wrapper to, should it differ. */
  void *wrap2 = dlsym(RTLD_DEFAULT, wrap_name[kind]);
  if (!wrap2) wrap2 = wrap;
  void *fn = libc_of(kind);
  /* Linked so that our own malloc is the wrapper: nothing to call instead. */
  if (!fn || fn == wrap || fn == wrap2) return 0;
  char p[5];
  perms_of((uintptr_t)ret - 6, 6, p);
  if (strcmp(p, "r-xp") != 0) return 0;
  int32_t rel;
  memcpy(&rel, ret - 4, 4);
  int direct;
  if (ret[-5] == 0xe8) {
    const uint8_t *t = ret + rel;
    if ((void *)t != wrap && (void *)t != wrap2 && !plt_to(t, wrap, wrap2)) return 0;
    direct = 1;
  } else if (ret[-6] == 0xff && ret[-5] == 0x15) {
    uintptr_t slot = (uintptr_t)ret + (intptr_t)rel;
    if (slot % sizeof(void *) || !readable(slot, sizeof(void *))) return 0;
    void *to = __atomic_load_n((void **)slot, __ATOMIC_RELAXED);
    if (to != wrap && to != wrap2) return 0;
    direct = 0;
  } else {
    return 0;
  }
  /* The displacement: its 4 bytes in one cache line, for one atomic store. */
  uint8_t *field = ret - 4;
  if (((uintptr_t)field & 63) > 60) return 0;
  uint8_t *t = tramp_near(ret);
  if (!t) return 0;
  const uint8_t *to = direct ? TRAMP_STUB(t, kind) : TRAMP_SLOT(t, kind);
  if (!reaches(ret, to)) return 0;
  return code_store(field, 4, (uint32_t)(int32_t)(to - ret));
}

/* A throttled call at st's site: patches the site's call when that can be
 * done, once per thread and site (patch_tried), and records it among the
 * patched sites. Called with the thread's guard set (busy). */
static NO_INSTRUMENT void alloc_patch_out(site_stat *st) {
  if (!patching_on()) {
    st->patch_tried = 1;
    return;
  }
  if (!patch_trylock()) return; /* another thread is patching: at a later call */
  void *site = st->site;
  unsigned n = alloc_patched_count;
  if (n < ALLOC_PATCHED_MAX && !site_seen(site) &&
      __atomic_load_n(&patch_state, __ATOMIC_ACQUIRE) == 1) {
    if (patch_alloc_call(site, st->kind)) {
      alloc_patched[n].site = site;
      alloc_patched[n].kind = st->kind;
      alloc_patched[n].name = st->name ? st->name : "?";
      __atomic_store_n(&alloc_patched_count, n + 1, __ATOMIC_RELEASE);
    }
    site_add(site);
  }
  patch_unlock();
  st->patch_tried = 1;
}
#else
static inline NO_INSTRUMENT void patch_out(fn_stat *st, void *ret, void *caller, int is_exit) {
  (void)st, (void)ret, (void)caller, (void)is_exit;
}
static inline NO_INSTRUMENT void alloc_patch_out(site_stat *st) { st->patch_tried = 1; }
#endif

/* Records END for a call of fn, now. */
static NO_INSTRUMENT void record_end(void *fn) {
  gaspard_ctx *c = enter();
  if (!c) return;
  uint64_t ts = gaspard_now();
  uint64_t a[1] = {gaspard_define_string(c, name_of(fn))};
  gaspard_emit(c, ts, K_C_FUNC, GASP_END, 0, NULL, 0, 0, 0, NULL, a, 1);
  leave();
}

/* The frame of fn's call, below frames whose exits were patched out (calls
 * of functions throttled while they ran): those are popped, and those whose
 * START was recorded get an END now. NULL when fn has no frame (its entry
 * was not seen): nothing is popped. */
static NO_INSTRUMENT fn_frame *unwind_to(void *fn) {
  unsigned i = fn_depth;
  while (i > 0 && fn_stack[i - 1].fn != fn) i--;
  if (i == 0) return NULL;
  for (unsigned j = fn_depth; j > i; j--)
    if (fn_stack[j - 1].start != UINT64_MAX) record_end(fn_stack[j - 1].fn);
  fn_depth = i;
  return &fn_stack[i - 1];
}

/* The string number of `fn`'s name in the chunk `c` is filling: kept in
 * its statistics `st` (when there are) for the chunk, rather than its name
 * looked up and its string found again at every event. */
static inline NO_INSTRUMENT uint32_t fn_string(gaspard_ctx *c, fn_stat *st, void *fn) {
  if (!st || st->fn != fn) return gaspard_define_string(c, name_of(fn));
  uint32_t gen = c->enc->gen;
  if (st->str_ctx != c || st->str_gen != gen) {
    st->str_id = gaspard_define_string(c, name_of(fn));
    st->str_ctx = c;
    st->str_gen = gen;
  }
  return st->str_id;
}

/* A throttled function's calls push no frame; with patching, their entries
 * and exits stop coming one call site at a time, so an exit may have no
 * frame (its entry was patched out) and a frame may have no exit (patched
 * out while the call ran: unwind_to pops it at its caller's exit). */
EXPORT NO_INSTRUMENT void __cyg_profile_func_enter(void *fn, void *call_site) {
  if (busy) return;
  fn_stat *st = stat_of(fn);
  if (st && is_throttled(st)) {
    patch_out(st, __builtin_return_address(0), call_site, 0);
    return;
  }
  fn_frame *fr = fn_stack && fn_depth < FN_DEPTH ? &fn_stack[fn_depth] : NULL;
  if (fn_stack) fn_depth++;
  if (fr) {
    fr->start = UINT64_MAX; /* until recorded */
    fr->fn = fn;
    fr->st = st;
  }
  gaspard_ctx *c = enter();
  if (!c) return;
  uint64_t ts = gaspard_now();
  /* The function, and where it is called from (a return address). */
  uint64_t a[2] = {fn_string(c, st, fn), (uint64_t)(uintptr_t)call_site};
  gaspard_emit(c, ts, K_C_FUNC, GASP_START, 0, NULL, 0, 0, 0, NULL, a, 2);
  if (fr) fr->start = ts;
  leave();
}

EXPORT NO_INSTRUMENT void __cyg_profile_func_exit(void *fn, void *call_site) {
  if (busy) return;
  fn_frame *fr = NULL;
  fn_stat *st = NULL;
  if (fn_stack && fn_depth > FN_DEPTH) {
    /* Deeper than tracked: recorded unless throttled. */
    st = stat_of(fn);
    if (st && is_throttled(st)) {
      patch_out(st, __builtin_return_address(0), call_site, 1);
      return;
    }
    fn_depth--;
  } else if (fn_stack) {
    if (fn_depth > 0 && fn_stack[fn_depth - 1].fn == fn) {
      fr = &fn_stack[fn_depth - 1];
    } else {
      st = stat_of(fn);
      if (st && is_throttled(st)) {
        patch_out(st, __builtin_return_address(0), call_site, 1);
        return;
      }
      fr = unwind_to(fn);
      if (!fr) return;
    }
    fn_depth--;
    st = fr->st && fr->st->fn == fn ? fr->st : NULL;
    if (st && is_throttled(st)) {
      /* A call that ran when its function was throttled. */
      patch_out(st, __builtin_return_address(0), call_site, 1);
      st = NULL;
    }
    /* Its START was not recorded (measurement off): no END. */
    if (fr->start == UINT64_MAX) return;
  }
  gaspard_ctx *c = enter();
  if (!c) return;
  uint64_t ts = gaspard_now();
  /* fn_string takes the frame's statistics only when they are fn's. The
   * return address again: an END then has the words of its START, which
   * it repeats for a call that made no other (no argument bytes), and the
   * next START's address is coded against it. */
  uint64_t a[2] = {fn_string(c, st ? st : (fr ? fr->st : NULL), fn), (uint64_t)(uintptr_t)call_site};
  gaspard_emit(c, ts, K_C_FUNC, GASP_END, 0, NULL, 0, 0, 0, NULL, a, 2);
  if (st && fr) {
    st->calls++;
    st->ticks += ts - fr->start;
    if (st->calls >= thr_calls && st->ticks < limit_ticks() * st->calls) throttle_fn(st);
  }
  leave();
}

static const char *const libc_name[] = {"", "", "malloc", "realloc", "free"};
static const char *const kind_name[] = {"", "GASP_C_FUNC", "GASP_C_MALLOC", "GASP_C_REALLOC",
                                        "GASP_C_FREE"};

/* A call site's name: its function and offset, else its module and offset. */
static NO_INSTRUMENT const char *site_name(void *site) {
  Dl_info info;
  char buf[300];
  if (dladdr(site, &info) && info.dli_sname && info.dli_saddr) {
    snprintf(buf, sizeof buf, "%s+0x%lx", info.dli_sname,
             (unsigned long)((uintptr_t)site - (uintptr_t)info.dli_saddr));
  } else if (info.dli_fname) {
    const char *base = strrchr(info.dli_fname, '/');
    snprintf(buf, sizeof buf, "%s+0x%lx", base ? base + 1 : info.dli_fname,
             (unsigned long)((uintptr_t)site - (uintptr_t)info.dli_fbase));
  } else {
    snprintf(buf, sizeof buf, "%p", site);
  }
  const char *name = strdup(buf);
  return name ? name : "?";
}

static size_t site_notes(char *out, size_t cap);

/* This thread's statistics of the call site `site` for `kind`, or NULL
 * (throttling off, or no room). */
static inline NO_INSTRUMENT site_stat *site_of(void *site, unsigned kind) {
  if (!throttling()) return NULL;
  site_table *t = sites;
  if (__builtin_expect(t == NULL, 0)) {
    t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->next = __atomic_load_n(&all_sites, __ATOMIC_ACQUIRE);
    while (!__atomic_compare_exchange_n(&all_sites, &t->next, t, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_ACQUIRE)) {}
    sites = t;
  }
  unsigned h = (unsigned)((((uintptr_t)site >> 2) ^ kind) % SITE_SLOTS);
  for (unsigned probe = 0; probe < 8; probe++) {
    site_stat *st = &t->s[(h + probe) % SITE_SLOTS];
    if (st->site == site && st->kind == kind) return st;
    if (!st->site) {
      st->kind = kind;
      st->site = site;
      return st;
    }
  }
  return NULL;
}

/* A recorded call of `ticks`: throttles the site when it is due. */
static NO_INSTRUMENT void site_done(site_stat *st, uint64_t ticks) {
  st->calls++;
  st->ticks += ticks;
  if (st->calls < thr_calls || st->ticks >= limit_ticks() * st->calls) return;
  st->name = site_name(st->site);
  __atomic_store_n(&st->throttled, 1, __ATOMIC_RELEASE);
  static int registered;
  if (!__atomic_exchange_n(&registered, 1, __ATOMIC_ACQ_REL)) gaspard_note_source(site_notes);
  char msg[512];
  snprintf(msg, sizeof msg,
           "%s at %s: no longer recorded on one thread after %llu calls of %.3f us on average "
           "(GASPARD_THROTTLE=%llu,%llu)",
           kind_name[st->kind], st->name, (unsigned long long)st->calls,
           (double)st->ticks / (double)st->calls * (double)thr_us / (double)limit_ticks(),
           (unsigned long long)thr_calls, (unsigned long long)thr_us);
  gaspard_note(msg);
}

/* A call left out: counted (relaxed stores: only this thread writes). */
static inline NO_INSTRUMENT void site_skipped(site_stat *st, uint64_t bytes) {
  __atomic_store_n(&st->skipped, st->skipped + 1, __ATOMIC_RELAXED);
  if (bytes) __atomic_store_n(&st->skipped_bytes, st->skipped_bytes + bytes, __ATOMIC_RELAXED);
}

/* The notes: per throttled call site and kind, over all threads, the calls
 * (and bytes) left out. */
static NO_INSTRUMENT size_t site_notes(char *out, size_t cap) {
  enum { MAXN = 256 };
  struct {
    void *site;
    unsigned kind, threads;
    const char *name;
    uint64_t calls, bytes;
  } sum[MAXN];
  unsigned n = 0;
  for (site_table *t = __atomic_load_n(&all_sites, __ATOMIC_ACQUIRE); t; t = t->next)
    for (unsigned i = 0; i < SITE_SLOTS; i++) {
      site_stat *st = &t->s[i];
      if (!__atomic_load_n(&st->throttled, __ATOMIC_ACQUIRE) || !st->name) continue;
      unsigned k = 0;
      while (k < n && !(sum[k].site == st->site && sum[k].kind == st->kind)) k++;
      if (k == n) {
        if (n == MAXN) continue;
        sum[k].site = st->site, sum[k].kind = st->kind, sum[k].name = st->name;
        sum[k].threads = 0, sum[k].calls = 0, sum[k].bytes = 0;
        n++;
      }
      sum[k].threads++;
      sum[k].calls += __atomic_load_n(&st->skipped, __ATOMIC_RELAXED);
      sum[k].bytes += __atomic_load_n(&st->skipped_bytes, __ATOMIC_RELAXED);
    }
  size_t used = 0;
  for (unsigned k = 0; k < n && used < cap; k++) {
    char bytes[64] = "", patched[160] = "";
    if (sum[k].kind != K_C_FREE)
      snprintf(bytes, sizeof bytes, " for %llu bytes", (unsigned long long)sum[k].bytes);
    if (alloc_was_patched(sum[k].site))
      snprintf(patched, sizeof patched,
               ", then its call was patched to call %s directly: its later calls on every thread "
               "were neither recorded nor counted",
               libc_name[sum[k].kind]);
    int w = snprintf(out + used, cap - used,
                     "%s at %s: %llu call%s%s not recorded (throttled on %u thread%s, "
                     "GASPARD_THROTTLE=%llu,%llu)%s\n",
                     kind_name[sum[k].kind], sum[k].name, (unsigned long long)sum[k].calls,
                     sum[k].calls == 1 ? "" : "s", bytes,
                     sum[k].threads, sum[k].threads == 1 ? "" : "s",
                     (unsigned long long)thr_calls, (unsigned long long)thr_us, patched);
    if (w < 0 || (size_t)w >= cap - used) break;
    used += (size_t)w;
  }
  /* Sites patched before a fork whose thread here has not throttled them:
   * the child runs their patched calls from its start. */
  unsigned np = __atomic_load_n(&alloc_patched_count, __ATOMIC_ACQUIRE);
  for (unsigned i = 0; i < np && used < cap; i++) {
    unsigned k = 0;
    while (k < n && sum[k].site != alloc_patched[i].site) k++;
    if (k < n) continue;
    int w = snprintf(out + used, cap - used,
                     "%s at %s: its call was patched to call %s directly before this process was "
                     "forked: its calls were neither recorded nor counted (GASPARD_THROTTLE=%llu,%llu)\n",
                     kind_name[alloc_patched[i].kind], alloc_patched[i].name,
                     libc_name[alloc_patched[i].kind], (unsigned long long)thr_calls,
                     (unsigned long long)thr_us);
    if (w < 0 || (size_t)w >= cap - used) break;
    used += (size_t)w;
  }
  return used;
}

/* One allocation call, recorded as START and END unless its site is throttled. */
#define ALLOC_CALL(KIND, SITE, BYTES, NS, NE, CALL)                                               \
  gaspard_ctx *c = enter();                                                                       \
  if (!c) {                                                                                       \
    CALL;                                                                                         \
  } else {                                                                                        \
    site_stat *st = site_of(SITE, KIND);                                                          \
    if (st && st->throttled) {                                                                    \
      site_skipped(st, BYTES);                                                                    \
      if (__builtin_expect(!st->patch_tried, 0)) alloc_patch_out(st);                            \
      CALL;                                                                                       \
    } else {                                                                                      \
      uint64_t t0 = gaspard_now();                                                                \
      gaspard_emit(c, t0, KIND, GASP_START, 0, NULL, 0, 0, 0, NULL, a, NS);                       \
      CALL;                                                                                       \
      uint64_t t1 = gaspard_now();                                                                \
      SET_RESULT;                                                                                 \
      if (gaspard_reserve(c)) gaspard_emit(c, t1, KIND, GASP_END, 0, NULL, 0, 0, 0, NULL, a, NE); \
      if (st) site_done(st, t1 - t0);                                                             \
    }                                                                                             \
    leave();                                                                                      \
  }

/* The fast path of the wrappers, for a call site already throttled on this
 * thread whose call could not be patched (or patching is off): its
 * statistics, found with three thread-local loads (initial-exec: one
 * instruction each) and a probe of the thread's table, without a clock
 * read, a lock or a call; NULL otherwise (the site is not in the table yet,
 * not throttled, not yet looked at for patching, the guard is set or
 * measurement is off), and the wrapper takes the recording path. */
static inline NO_INSTRUMENT site_stat *alloc_throttled(void *site, unsigned kind) {
  site_table *t = sites;
  if (__builtin_expect(t == NULL || busy, 0)) return NULL;
  gaspard_ctx *c = here;
  if (__builtin_expect(c == NULL || !c->on, 0)) return NULL;
  unsigned h = (unsigned)((((uintptr_t)site >> 2) ^ kind) % SITE_SLOTS);
  for (unsigned probe = 0; probe < 8; probe++) {
    site_stat *st = &t->s[(h + probe) % SITE_SLOTS];
    if (st->site == site && st->kind == kind) return st->throttled && st->patch_tried ? st : NULL;
    if (!st->site) return NULL;
  }
  return NULL;
}

static NO_INSTRUMENT __attribute__((noinline)) void *malloc_recorded(size_t nbytes, void *site) {
  void *r;
  /* START: the size and the call site; END: the size and the result. */
  uint64_t a[2] = {nbytes, (uint64_t)(uintptr_t)site};
#define SET_RESULT a[1] = (uint64_t)(uintptr_t)r
  ALLOC_CALL(K_C_MALLOC, site, nbytes, 2, 2, r = malloc(nbytes))
#undef SET_RESULT
  return r;
}

EXPORT NO_INSTRUMENT void *__wrap_malloc(size_t nbytes) {
  void *site = __builtin_return_address(0);
  site_stat *st = alloc_throttled(site, K_C_MALLOC);
  if (__builtin_expect(st == NULL, 0)) return malloc_recorded(nbytes, site);
  site_skipped(st, nbytes);
  return malloc(nbytes);
}

static NO_INSTRUMENT __attribute__((noinline)) void *realloc_recorded(void *ptr, size_t size,
                                                                       void *site) {
  void *r;
  uint64_t a[3] = {(uint64_t)(uintptr_t)ptr, size, (uint64_t)(uintptr_t)site};
#define SET_RESULT a[2] = (uint64_t)(uintptr_t)r
  ALLOC_CALL(K_C_REALLOC, site, size, 3, 3, r = realloc(ptr, size))
#undef SET_RESULT
  return r;
}

EXPORT NO_INSTRUMENT void *__wrap_realloc(void *ptr, size_t size) {
  void *site = __builtin_return_address(0);
  site_stat *st = alloc_throttled(site, K_C_REALLOC);
  if (__builtin_expect(st == NULL, 0)) return realloc_recorded(ptr, size, site);
  site_skipped(st, size);
  return realloc(ptr, size);
}

static NO_INSTRUMENT __attribute__((noinline)) void free_recorded(void *ptr, void *site) {
  /* START and END alike (the END then costs no argument bytes). */
  uint64_t a[2] = {(uint64_t)(uintptr_t)ptr, (uint64_t)(uintptr_t)site};
#define SET_RESULT (void)0
  ALLOC_CALL(K_C_FREE, site, 0, 2, 2, free(ptr))
#undef SET_RESULT
}

EXPORT NO_INSTRUMENT void __wrap_free(void *ptr) {
  void *site = __builtin_return_address(0);
  site_stat *st = alloc_throttled(site, K_C_FREE);
  if (__builtin_expect(st == NULL, 0)) {
    free_recorded(ptr, site);
    return;
  }
  site_skipped(st, 0);
  free(ptr);
}

/* For adapters built as separate libraries (libgaspard_shmem.so, ...): records
 * one event with plain integer arguments on the calling thread's context for
 * `model`. Returns 0 when nothing was recorded (measurement off, dropped). */
gaspard_ctx *gaspard_context(unsigned model);
#define ADAPTER_MODELS 8
static __thread gaspard_ctx *adapter_ctx[ADAPTER_MODELS] __attribute__((tls_model("initial-exec")));

EXPORT NO_INSTRUMENT int gaspard_record_event(unsigned model, unsigned kind, unsigned phase,
                                              const char *file, int line,
                                              const uint64_t *args, unsigned n) {
  if (model >= ADAPTER_MODELS || n > 16) return 0;
  gaspard_ctx *c = adapter_ctx[model];
  if (__builtin_expect(c == NULL, 0)) adapter_ctx[model] = c = gaspard_context(model);
  if (!c || !c->on || !gaspard_reserve(c)) return 0;
  gaspard_emit(c, gaspard_now(), kind, phase, 0, file, line, 0, 0, NULL, args, n);
  return 1;
}
