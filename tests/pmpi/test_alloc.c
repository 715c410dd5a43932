/* SPDX-License-Identifier: Apache-2.0
 *
 * No allocation per call on the offloaded data path (benchmarks issue,
 * memory target). With alloc_counter.so preloaded ahead of the layer, every
 * rank runs rounds of offloaded calls -- eager and rendezvous Send/Recv,
 * Isend/Irecv/Waitall, Allreduce, Bcast, Reduce, Allgather and Alltoall of
 * rendezvous size -- first to warm up (pools, queues and caches reach their
 * size), then counted. A per-call allocation anywhere in the process (PMPI
 * layer, driver, emulator threads) shows up at least once per round; the
 * test allows fewer than one per ten rounds for rare growth of a pool.
 *
 * Usage: test_alloc [rounds] */
#include "common.h"

typedef unsigned long (*allocations_fn)(void);

/* kSmall travels inside its envelope, kEager is an eager payload, kMedium a
 * rendezvous one (the default eager size is 64 KiB). */
enum { kSmall = 8, kEager = 32 << 10, kMedium = 128 << 10, kLarge = 1 << 20 };

static void exchange(int rank, int peer, char* out, char* in, int bytes, int tag) {
  if (rank < peer) {
    CHECK_RC(MPI_Send(out, bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
    CHECK_RC(MPI_Recv(in, bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  } else {
    CHECK_RC(MPI_Recv(in, bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Send(out, bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
  }
}

static void round_of_calls(int rank, int size, char* a, char* b, float* x, float* y, int n) {
  const int peer = rank ^ 1;
  if (peer < size) {
    exchange(rank, peer, a, b, kSmall, 1);
    exchange(rank, peer, a, b, kEager, 4);
    exchange(rank, peer, a, b, kMedium, 2);
    MPI_Request req[2];
    CHECK_RC(MPI_Irecv(b, kMedium, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &req[0]));
    CHECK_RC(MPI_Isend(a, kMedium, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &req[1]));
    CHECK_RC(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
  }
  CHECK_RC(MPI_Allreduce(x, y, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
  CHECK_RC(MPI_Bcast(a, kLarge, MPI_BYTE, 0, MPI_COMM_WORLD));
  CHECK_RC(MPI_Reduce(x, y, n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD));
  CHECK_RC(MPI_Allgather(a, kLarge / size, MPI_BYTE, b, kLarge / size, MPI_BYTE, MPI_COMM_WORLD));
  CHECK_RC(MPI_Alltoall(a, kLarge / size, MPI_BYTE, b, kLarge / size, MPI_BYTE, MPI_COMM_WORLD));
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int size;
  rank_size(MPI_COMM_WORLD, &t_rank, &size);
  const int rounds = argc > 1 ? atoi(argv[1]) : 300;
  allocations_fn allocations = (allocations_fn)dlsym(RTLD_DEFAULT, "accl_test_allocations");
  CHECK(allocations != NULL, "alloc_counter.so is not preloaded: nothing would be counted");
  CHECK(layer_active(), "the PMPI layer is not active: the calls would not be offloaded");
  if (allocations == NULL || !layer_active()) {
    return finish("test_alloc");
  }

  const int n = kLarge / 4;
  char* a = malloc(kLarge);
  char* b = malloc(kLarge);
  float* x = malloc(kLarge);
  float* y = malloc(kLarge);
  memset(a, 7, kLarge);
  for (int i = 0; i < n; ++i) x[i] = (float)(i % 64);

  for (int i = 0; i < 50; ++i) round_of_calls(t_rank, size, a, b, x, y, n);
  MPI_Barrier(MPI_COMM_WORLD);
  const unsigned long before = allocations();
  for (int i = 0; i < rounds; ++i) round_of_calls(t_rank, size, a, b, x, y, n);
  const unsigned long counted = allocations() - before;
  MPI_Barrier(MPI_COMM_WORLD);

  /* The results are right, too (the counted rounds were real work). */
  for (int i = 0; i < n; i += 997) CHECK(y[i] == (float)(i % 64) * size, "reduce[%d] = %g", i, y[i]);
  printf("rank %d: %lu allocations in %d rounds of offloaded calls\n", t_rank, counted, rounds);
  CHECK(counted * 10 < (unsigned long)rounds, "%lu allocations in %d rounds: the data path allocates per call", counted,
        rounds);
  CHECK(offloaded_calls("MPI_Allreduce") >= (unsigned long long)rounds, "Allreduce was not offloaded");
  CHECK(offloaded_calls("MPI_Send") >= (unsigned long long)rounds || size == 1, "Send was not offloaded");

  free(a);
  free(b);
  free(x);
  free(y);
  return finish("test_alloc");
}
