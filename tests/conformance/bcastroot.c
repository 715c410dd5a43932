/* SPDX-License-Identifier: Apache-2.0
 *
 * Broadcast runs that let one root get thousands of calls ahead of its
 * receivers, then change the root; every value checked.
 *
 *   bcastroot [seed=N] [per_root=N] [mpi_error=0]
 *
 * Phases: (1) per_root broadcasts of one int from each root in turn, on
 * MPI_COMM_WORLD; (2) the same on a duplicate, with one receiver pausing
 * every 512 calls so the root runs far ahead, and mixed sizes (1 int to
 * 20000 ints); (3) a root that changes every call; (4) seeded random runs
 * of random length from random roots; (5) 64 outstanding MPI_Ibcast from
 * one root, then the next root, completed with MPI_Waitall. */
#include <unistd.h>

#include "conformance.h"

CF_DEFINE_GLOBALS

static uint64_t salt_of(int phase, int a, int i) {
  return ((uint64_t)phase << 40) ^ ((uint64_t)(unsigned)a << 24) ^ (uint64_t)(unsigned)i;
}

static int bcast_checked(MPI_Comm comm, int rank, int root, int count, uint64_t salt, int* buf) {
  size_t bytes = (size_t)count * sizeof(int);
  if (rank == root) cf_fill(buf, bytes, salt);
  else memset(buf, CF_GUARD, bytes);
  CF_RC(MPI_Bcast(buf, count, MPI_INT, root, comm));
  return cf_verify(buf, bytes, salt, "bcast data") != 0;
}

int main(int argc, char** argv) {
  const int size = cf_init(&argc, &argv), rank = cf_world_rank;
  uint64_t seed = cf_seed_arg(argc, argv, 1);
  int per_root = (int)cf_int_arg(argc, argv, "per_root", 2048);
  if (rank == 0) printf("bcastroot: seed=%llu per_root=%d np=%d\n", (unsigned long long)seed, per_root, size);
  int* buf = cf_malloc(20000 * sizeof(int));
  int bad = 0;

  for (int root = 0; root < size && bad < 3; root++) {
    cf_where("phase 1: %d bcasts of 1 int from root %d", per_root, root);
    for (int i = 0; i < per_root && bad < 3; i++) bad += bcast_checked(MPI_COMM_WORLD, rank, root, 1, salt_of(1, root, i), buf);
  }

  MPI_Comm dup;
  CF_RC(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  int pauser = size - 1;
  for (int k = 0; k < size && bad < 3; k++) {
    int root = (k + 1) % size; /* a root order different from phase 1 */
    cf_where("phase 2: %d bcasts of mixed sizes from root %d, rank %d pausing", per_root, root, pauser);
    for (int i = 0; i < per_root && bad < 3; i++) {
      int count = i % 97 == 0 ? 20000 : i % 13 == 0 ? 1000 : 1 + i % 7;
      if (rank == pauser && rank != root && i % 512 == 511) usleep(5000);
      bad += bcast_checked(dup, rank, root, count, salt_of(2, root, i), buf);
    }
  }

  cf_where("phase 3: root changing every call");
  for (int i = 0; i < per_root && bad < 3; i++) bad += bcast_checked(dup, rank, i % size, 1 + i % 3, salt_of(3, i % size, i), buf);

  cf_rng g = {seed};
  for (int run = 0; run < 12 && bad < 3; run++) {
    int root = cf_below(&g, size), len = 1 + cf_below(&g, per_root), count = 1 + cf_below(&g, 4) * cf_below(&g, 300);
    cf_where("phase 4: run %d, %d bcasts of %d ints from root %d", run, len, count, root);
    for (int i = 0; i < len && bad < 3; i++) bad += bcast_checked(MPI_COMM_WORLD, rank, root, count, salt_of(4, run, i), buf);
  }

  enum { OUTSTANDING = 64 };
  int* nb = cf_malloc(sizeof(int) * OUTSTANDING * 4);
  MPI_Request reqs[OUTSTANDING];
  MPI_Status sts[OUTSTANDING];
  for (int root = 0; root < size && bad < 3; root++) {
    cf_where("phase 5: %d outstanding MPI_Ibcast from root %d", OUTSTANDING, root);
    for (int i = 0; i < OUTSTANDING; i++) {
      int* b = nb + 4 * i;
      if (rank == root) cf_fill(b, 4 * sizeof(int), salt_of(5, root, i));
      else memset(b, CF_GUARD, 4 * sizeof(int));
      CF_RC(MPI_Ibcast(b, 4, MPI_INT, root, dup, &reqs[i]));
    }
    cf_status_prefill(sts, OUTSTANDING);
    CF_RC(MPI_Waitall(OUTSTANDING, reqs, sts));
    for (int i = 0; i < OUTSTANDING; i++) {
      if (cf_verify(nb + 4 * i, 4 * sizeof(int), salt_of(5, root, i), "ibcast data")) bad++;
      CF_CHECK(!cf_check_mpi_error || sts[i].MPI_ERROR == CF_ERR_SENTINEL || sts[i].MPI_ERROR == MPI_SUCCESS,
               "MPI_Waitall: MPI_ERROR %d after success", sts[i].MPI_ERROR);
    }
  }
  free(nb);
  CF_RC(MPI_Comm_free(&dup));
  free(buf);
  return cf_finish_and_finalize();
}
