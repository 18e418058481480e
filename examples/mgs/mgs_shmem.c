/* Modified Gram-Schmidt on OpenSHMEM, in the five versions of the SVMview
 * case study (Section 6 of INRIA RR-2774): see README.md in this directory.
 *
 * The matrix of m vectors of n doubles is one shared array of m*n doubles,
 * stored vector after vector and distributed block-cyclically in pages of
 * 1024 doubles (8192 bytes, the page of the paper): global page b lives on
 * PE b % P at local page b / P of one symmetric array.
 *
 *   oshcc -g -O2 mgs_shmem.c -o mgs_shmem -lm
 *   oshrun -np 4 --oversubscribe --mca osc ^rdma ./mgs_shmem VERSION [M [REPS]]
 *
 * VERSION 1..5; M vectors (default 128); REPS repeats the dot-product and
 * update arithmetic (default 100) without changing the communication. PE 0
 * prints the orthogonality error of the result; the exit status is 0 only if
 * it is below 1e-8. */
#include <math.h>
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE 1024 /* doubles per page: 8192 bytes */

static double *shared; /* this PE's pages of the shared matrix */
static int me, npes;

/* The piece of a range of the shared matrix that starts at global element g
 * and stays within one page: the PE holding it, its offset in that PE's
 * pages and its length (at most count). */
static long piece(long g, long count, int *pe, long *local) {
  long page = g / PAGE, off = g % PAGE;
  *pe = (int)(page % npes);
  *local = (page / npes) * PAGE + off;
  return PAGE - off < count ? PAGE - off : count;
}

/* gget(dst, g, count) reads count doubles of the shared matrix from global
 * element g on into the private buffer dst; gput(g, src, count) writes them.
 * The range is split at page boundaries and each piece is one shmem_getmem
 * (shmem_putmem) on the PE holding the page, EVEN WHEN that PE is this one:
 * like a UPC runtime handling an access through a pointer-to-shared, every
 * access to the shared matrix is a call the tool sees. They are macros so
 * that each access is attributed to the source line making it, as a UPC
 * compiler passes that line to its runtime. */
#define gget(dst, g, count)                                                                        \
  do {                                                                                             \
    double *d_ = (dst);                                                                            \
    long g_ = (g), c_ = (count), at_, len_;                                                        \
    for (int pe_; c_ > 0; d_ += len_, g_ += len_, c_ -= len_) {                                    \
      len_ = piece(g_, c_, &pe_, &at_);                                                            \
      shmem_getmem(d_, shared + at_, len_ * sizeof(double), pe_);                                  \
    }                                                                                              \
  } while (0)

#define gput(g, src, count)                                                                        \
  do {                                                                                             \
    const double *s_ = (src);                                                                      \
    long g_ = (g), c_ = (count), at_, len_;                                                        \
    for (int pe_; c_ > 0; s_ += len_, g_ += len_, c_ -= len_) {                                    \
      len_ = piece(g_, c_, &pe_, &at_);                                                            \
      shmem_putmem(shared + at_, s_, len_ * sizeof(double), pe_);                                  \
    }                                                                                              \
  } while (0)

/* The compiler must redo each repetition of the arithmetic. */
static volatile double sink;
#define KEEP(x)                                                                                    \
  do {                                                                                             \
    sink = (x);                                                                                    \
    __asm__ volatile("" ::: "memory");                                                             \
  } while (0)

static double dot(const double *a, const double *b, int n, int reps) {
  double s = 0;
  for (int r = 0; r < reps; r++) {
    s = 0;
    for (int k = 0; k < n; k++) s += a[k] * b[k];
    KEEP(s);
  }
  return s;
}

/* w = vj - t * vi, computed reps times. */
static void update(double *w, const double *vj, const double *vi, double t, int n, int reps) {
  for (int r = 0; r < reps; r++) {
    for (int k = 0; k < n; k++) w[k] = vj[k] - t * vi[k];
    KEEP(w[0]);
  }
}

static void normalize(double *x, int n) {
  double s = 0;
  for (int k = 0; k < n; k++) s += x[k] * x[k];
  double xnorm = 1.0 / sqrt(s);
  for (int k = 0; k < n; k++) x[k] *= xnorm;
}

/* The PE in charge of vector j: CYCLIC affinity (versions 2-4) or BLOCK
 * affinity (versions 1 and 5; version 1 uses it only to initialize). */
static int owner(int version, int j, int m) {
  int bs = (m + npes - 1) / npes;
  return (version == 1 || version == 5) ? j / bs : j % npes;
}

int main(int argc, char **argv) {
  int version = argc > 1 ? atoi(argv[1]) : 0;
  int m = argc > 2 ? atoi(argv[2]) : 128;
  int reps = argc > 3 ? atoi(argv[3]) : 100;
  shmem_init();
  me = shmem_my_pe();
  npes = shmem_n_pes();
  if (version < 1 || version > 5 || m < 1 || reps < 1) {
    if (me == 0) fprintf(stderr, "usage: mgs_shmem VERSION(1..5) [M>0 [REPS>0]]\n");
    shmem_finalize();
    return 2;
  }
  int n = version <= 3 ? 1024 : 1025; /* 1025: two vectors share a page */
  long total = (long)m * n;
  long pages = (total + PAGE - 1) / PAGE;
  long local_pages = (pages + npes - 1) / npes;
  shared = shmem_malloc(local_pages * PAGE * sizeof(double));
  /* Version 3-5's broadcast: the owner's source and everyone's copy. */
  double *bsrc = shmem_malloc(n * sizeof(double));
  double *bcast = shmem_malloc(n * sizeof(double));
  static long psync[SHMEM_BCAST_SYNC_SIZE];
  for (int k = 0; k < SHMEM_BCAST_SYNC_SIZE; k++) psync[k] = SHMEM_SYNC_VALUE;
  double *vi = malloc(n * sizeof(double));
  double *vj = malloc(n * sizeof(double));
  double *w = malloc(n * sizeof(double));
  if (!shared || !bsrc || !bcast || !vi || !vj || !w) {
    fprintf(stderr, "mgs_shmem: out of memory\n");
    shmem_global_exit(1);
  }

  /* A diagonally dominant matrix (n on the diagonal, [0,1) elsewhere), well
   * conditioned, so MGS stays accurate; each PE writes the vectors it owns. */
  for (int j = 0; j < m; j++) {
    if (owner(version, j, m) != me) continue;
    for (int k = 0; k < n; k++) vj[k] = (k == j ? n : 0) + ((k * 7 + j * 13) % 101) / 101.0;
    gput((long)j * n, vj, n);
  }
  shmem_barrier_all();

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < m; i++) {
    if (version == 1) {
      /* Sequential section on PE 0, then the j loop split in P blocks. */
      if (me == 0) {
        gget(vi, (long)i * n, n);
        normalize(vi, n);
        gput((long)i * n, vi, n);
      }
      shmem_barrier_all();
      int count = m - 1 - i, chunk = (count + npes - 1) / npes;
      int lo = i + 1 + me * chunk, hi = lo + chunk < m ? lo + chunk : m;
      if (lo < hi) gget(vi, (long)i * n, n);
      for (int j = lo; j < hi; j++) {
        gget(vj, (long)j * n, n);
        double t = dot(vi, vj, n, reps);
        update(w, vj, vi, t, n, reps);
        gput((long)j * n, w, n);
      }
      shmem_barrier_all();
    } else if (version == 2) {
      /* Affinity: the owner of vector i normalizes it; every PE then reads
       * it from the shared matrix (the producer-consumer read). */
      if (owner(version, i, m) == me) {
        gget(vi, (long)i * n, n);
        normalize(vi, n);
        gput((long)i * n, vi, n);
      }
      shmem_barrier_all();
      int got = 0;
      for (int j = i + 1; j < m; j++) {
        if (owner(version, j, m) != me) continue;
        if (!got) {
          gget(vi, (long)i * n, n);
          got = 1;
        }
        gget(vj, (long)j * n, n);
        double t = dot(vi, vj, n, reps);
        update(w, vj, vi, t, n, reps);
        gput((long)j * n, w, n);
      }
      shmem_barrier_all();
    } else {
      /* Versions 3-5: the owner normalizes vector i, writes it back and
       * broadcasts it; no barrier before the j loop, which uses the copy. */
      int root = owner(version, i, m);
      if (root == me) {
        gget(bsrc, (long)i * n, n);
        normalize(bsrc, n);
        gput((long)i * n, bsrc, n);
      }
      shmem_broadcast64(bcast, bsrc, n, root, 0, 0, npes, psync);
      if (root == me) memcpy(bcast, bsrc, n * sizeof(double)); /* the root's dest is not written */
      for (int j = i + 1; j < m; j++) {
        if (owner(version, j, m) != me) continue;
        gget(vj, (long)j * n, n);
        double t = dot(bcast, vj, n, reps);
        update(w, vj, bcast, t, n, reps);
        gput((long)j * n, w, n);
      }
      shmem_barrier_all();
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);

  int status = 0;
  if (me == 0) {
    /* max |<q_i,q_j> - delta_ij| over all pairs, from the gathered result. */
    double *q = malloc(total * sizeof(double));
    if (!q) {
      fprintf(stderr, "mgs_shmem: out of memory\n");
      shmem_global_exit(1);
    }
    for (int j = 0; j < m; j++) gget(q + (long)j * n, (long)j * n, n);
    double err = 0;
    for (int a = 0; a < m; a++)
      for (int b = a; b < m; b++) {
        double e = fabs(dot(q + (long)a * n, q + (long)b * n, n, 1) - (a == b));
        if (e > err || isnan(e)) err = e;
      }
    double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("mgs v%d m=%d n=%d P=%d orthogonality_error=%.1e time=%.2fs\n", version, m, n, npes,
           err, secs);
    status = err < 1e-8 ? 0 : 1;
    free(q);
  }
  shmem_barrier_all();
  free(w);
  free(vj);
  free(vi);
  shmem_free(bcast);
  shmem_free(bsrc);
  shmem_free(shared);
  shmem_finalize();
  return status;
}
