/* SPDX-License-Identifier: Apache-2.0
 *
 * Interposition cost: time per call of cheap MPI calls (on MPI_COMM_SELF,
 * so MPI itself does almost nothing). Run once without the layer and once
 * with it and ACCL_OFFLOAD=off; the difference is the layer's fast path.
 *   bench_overhead [iterations]
 * `perf stat -e instructions:u` over both runs gives instructions per call.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const long n = argc > 1 ? atol(argv[1]) : 2000000;
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int x = 1, y = 0;
  MPI_Request req = MPI_REQUEST_NULL;
  int flag;
  double t0 = MPI_Wtime();
  for (long i = 0; i < n; ++i) MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF);
  double t1 = MPI_Wtime();
  for (long i = 0; i < n; ++i) MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_SELF);
  double t2 = MPI_Wtime();
  for (long i = 0; i < n; ++i) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
  double t3 = MPI_Wtime();
  if (rank == 0)
    printf("ns/call: MPI_Allreduce(self) %.1f  MPI_Bcast(self) %.1f  MPI_Test(null) %.1f\n", (t1 - t0) / n * 1e9,
           (t2 - t1) / n * 1e9, (t3 - t2) / n * 1e9);
  MPI_Finalize();
  return 0;
}
