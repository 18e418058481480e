/* A PMPI wrapper that intercepts MPI_Put and MPI_Win_flush and records nothing. */
#include <mpi.h>
int MPI_Put(const void *o, int oc, MPI_Datatype ot, int r, MPI_Aint d, int tc, MPI_Datatype tt, MPI_Win w) {
  return PMPI_Put(o, oc, ot, r, d, tc, tt, w);
}
int MPI_Win_flush(int rank, MPI_Win w) { return PMPI_Win_flush(rank, w); }
