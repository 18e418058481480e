/* A PMPI wrapper that intercepts MPI_Put and MPI_Win_flush and records
 * nothing (with -DREAD_CLOCK: only reads the clock around each call). */
#include <mpi.h>
#include "clock_read.h"
int MPI_Put(const void *o, int oc, MPI_Datatype ot, int r, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Win w) {
  CLOCK_BEGIN;
  int rc = PMPI_Put(o, oc, ot, r, d, tc, tt, w);
  CLOCK_END;
  return rc;
}
int MPI_Win_flush(int rank, MPI_Win w) {
  CLOCK_BEGIN;
  int rc = PMPI_Win_flush(rank, w);
  CLOCK_END;
  return rc;
}
