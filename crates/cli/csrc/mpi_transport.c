/* The MPI calls of `gaspard report --mpi`: start-up, rank and size, and
 * point-to-point transfers of byte buffers of any length between ranks (in
 * pieces of at most 1 GiB, MPI counts being ints), each waited for without
 * spinning. Called from one thread. */
#include <mpi.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define TAG 0x6770 /* "gp" */
#define PIECE ((uint64_t)1 << 30)

static int started_here;

int gaspard_mpi_init(int *rank, int *size) {
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return -1;
    started_here = 1;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (MPI_Comm_rank(MPI_COMM_WORLD, rank) != MPI_SUCCESS) return -1;
  if (MPI_Comm_size(MPI_COMM_WORLD, size) != MPI_SUCCESS) return -1;
  return 0;
}

static int wait_lazily(MPI_Request *req);

int gaspard_mpi_send(int to, const uint8_t *buf, uint64_t len) {
  MPI_Request req;
  if (MPI_Isend(&len, 1, MPI_UINT64_T, to, TAG, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
      wait_lazily(&req) != 0)
    return -1;
  for (uint64_t off = 0; off < len; off += PIECE) {
    uint64_t n = len - off < PIECE ? len - off : PIECE;
    if (MPI_Isend(buf + off, (int)n, MPI_BYTE, to, TAG, MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
        wait_lazily(&req) != 0)
      return -1;
  }
  return 0;
}

/* Completes `req` without spinning: a rank waiting for another (still
 * reading its share) must leave the cores to the ranks and threads at work. */
static int wait_lazily(MPI_Request *req) {
  struct timespec pause = {0, 200000}; /* 0.2 ms */
  for (;;) {
    int done = 0;
    if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return -1;
    if (done) return 0;
    nanosleep(&pause, NULL);
  }
}

int gaspard_mpi_recv_len(int from, uint64_t *len) {
  MPI_Request req;
  if (MPI_Irecv(len, 1, MPI_UINT64_T, from, TAG, MPI_COMM_WORLD, &req) != MPI_SUCCESS) return -1;
  return wait_lazily(&req);
}

int gaspard_mpi_recv(int from, uint8_t *buf, uint64_t len) {
  for (uint64_t off = 0; off < len; off += PIECE) {
    uint64_t n = len - off < PIECE ? len - off : PIECE;
    MPI_Request req;
    if (MPI_Irecv(buf + off, (int)n, MPI_BYTE, from, TAG, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
      return -1;
    if (wait_lazily(&req) != 0) return -1;
  }
  return 0;
}

void gaspard_mpi_finalize(void) {
  if (started_here) MPI_Finalize();
}

void gaspard_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }
