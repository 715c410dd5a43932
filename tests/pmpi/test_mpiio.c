/* SPDX-License-Identifier: Apache-2.0
 *
 * MPI-IO under the layer. Open MPI's ROMIO calls MPI_Ialltoall itself and
 * completes it with PMPI_Wait; the layer must keep such internal calls
 * native. Collective write through a strided file view, read back, compare.
 * (Non-blocking collective I/O is not tested: Debian's Open MPI 4.1.4 ROMIO
 * crashes in MPI_File_iwrite_at_all even without the layer.)
 * Usage: test_mpiio FILE
 */
#include "common.h"

int main(int argc, char** argv) {
  int size;
  init_world(&argc, &argv, &t_rank, &size);
  const char* path = argc > 1 ? argv[1] : "pmpi_test_mpiio.dat";
  t_context = "mpi-io";
  enum { N = 4000, BLK = 100 };
  int* out = malloc(sizeof(int) * N);
  int* in = malloc(sizeof(int) * N);
  for (int i = 0; i < N; ++i) out[i] = t_rank * N + i;
  MPI_Datatype ft;
  MPI_Type_vector(N / BLK, BLK, BLK * size, MPI_INT, &ft);
  MPI_Type_commit(&ft);
  MPI_File fh;
  CHECK_RC(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
  CHECK_RC(MPI_File_set_view(fh, (MPI_Offset)t_rank * BLK * (MPI_Offset)sizeof(int), MPI_INT, ft, "native",
                             MPI_INFO_NULL));
  CHECK_RC(MPI_File_write_at_all(fh, 0, out, N, MPI_INT, MPI_STATUS_IGNORE));
  CHECK_RC(MPI_File_sync(fh));
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK_RC(MPI_File_read_at_all(fh, 0, in, N, MPI_INT, MPI_STATUS_IGNORE));
  CHECK(memcmp(in, out, sizeof(int) * N) == 0, "read back differs");
  CHECK_RC(MPI_File_close(&fh));
  MPI_Type_free(&ft);
  MPI_Barrier(MPI_COMM_WORLD);
  if (t_rank == 0) MPI_File_delete(path, MPI_INFO_NULL);
  free(out), free(in);
  return finish("test_mpiio");
}
