/* SPDX-License-Identifier: Apache-2.0
 *
 * Calls the layer passes straight to PMPI when nothing observes them
 * (issue 40), and those it must not. Under a table that offloads
 * point-to-point on 2-rank communicators only, ranks 0 and 1 first exchange
 * messages on MPI_COMM_WORLD (3+ ranks: native, straight to PMPI), then,
 * unless the argument is "world", on a 2-rank communicator split off the
 * world, where the same calls must reach the device. Every rank also enters
 * MPI_Barrier, which reaches the device unless the settings never offload
 * it. meson.build checks the device's debug log (no send, receive or barrier
 * call, or each of them, per run). The values are checked either way.
 *
 *   test_native_route [world]
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void exchange(MPI_Comm comm, int me, int base) {
  int out[4], in[4];
  for (int i = 0; i < 4; ++i) out[i] = base + 10 * me + i;
  MPI_Request reqs[2];
  const int peer = 1 - me;
  MPI_Irecv(in, 4, MPI_INT, peer, 5, comm, &reqs[0]);
  MPI_Isend(out, 4, MPI_INT, peer, 5, comm, &reqs[1]);
  MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
  int echo = 0;
  if (me == 0) {
    MPI_Send(&base, 1, MPI_INT, 1, 6, comm);
    MPI_Recv(&echo, 1, MPI_INT, 1, 6, comm, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(&echo, 1, MPI_INT, 0, 6, comm, MPI_STATUS_IGNORE);
    MPI_Send(&echo, 1, MPI_INT, 0, 6, comm);
  }
  for (int i = 0; i < 4; ++i)
    if (in[i] != base + 10 * peer + i) {
      fprintf(stderr, "rank %d: element %d is %d, expected %d\n", me, i, in[i], base + 10 * peer + i);
      ++failures;
    }
  if (echo != base) {
    fprintf(stderr, "rank %d: echo %d, expected %d\n", me, echo, base);
    ++failures;
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int world_only = argc > 1 && strcmp(argv[1], "world") == 0;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 3) {
    if (rank == 0) fprintf(stderr, "test_native_route needs 3 or more ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank < 2) exchange(MPI_COMM_WORLD, rank, 100);
  if (!world_only) {
    MPI_Comm pair;
    MPI_Comm_split(MPI_COMM_WORLD, rank < 2 ? 0 : MPI_UNDEFINED, rank, &pair);
    if (pair != MPI_COMM_NULL) {
      exchange(pair, rank, 200);
      MPI_Comm_free(&pair);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && all == 0) printf("test_native_route: passed\n");
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
