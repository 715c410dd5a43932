/* SPDX-License-Identifier: Apache-2.0
 *
 * An unmodified MPI program on public ACCL's firmware: run under
 * LD_PRELOAD=libaccl_pmpi.so with ACCL_DEVICE=sim and ACCL_SIM_ADDRESS naming
 * a cclo_emu session of one instance per rank (sim_mpi_launcher starts it),
 * with ACCL_STATS=1 so the layer counts its decisions.
 *
 * Offloaded there (public rules, eager sizes): allreduce SUM and MAX, bcast,
 * reduce, allgather on MPI_COMM_WORLD. Native, each for its named reason
 * (pmpi/src/reasons.def): send/recv (no RANK_ANY/TAG_ANY receives for MPI
 * matching), allreduce MIN (SUM and MAX only), an allreduce above the eager
 * size, alltoall and barrier (rendezvous without RDMA), a collective on a dup of
 * MPI_COMM_WORLD (no context-id word), allgatherv and scan (composed of device
 * sends of sizes the ranks do not agree on). Every result is checked, and so is
 * where each call ran. cclo_emu sleeps ~10 ms per packet: counts are small.
 */
#include <mpi.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define N 16 /* 64 bytes of floats or ints: eager with 1 KiB RX buffers */
#define BIG 512 /* 2 KiB of floats: above the 1 KiB eager size */

static int rank, size, failures;

#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      fprintf(stderr, "rank %d: FAILED: ", rank);        \
      fprintf(stderr, __VA_ARGS__);                      \
      fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__); \
      ++failures;                                        \
    }                                                    \
  } while (0)

typedef int (*counts_fn)(const char*, unsigned long long*, unsigned long long*);

/* Where the calls of `name` ran on this rank so far. */
static void expect_counts(counts_fn counts, const char* name, unsigned long long offloaded,
                          unsigned long long native) {
  unsigned long long off = 0, nat = 0;
  CHECK(counts(name, &off, &nat) == 0, "%s: no counts", name);
  CHECK(off == offloaded && nat == native, "%s: %llu offloaded, %llu native; expected %llu and %llu", name, off, nat,
        offloaded, native);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "accl_pmpi_active");
  counts_fn counts = (counts_fn)dlsym(RTLD_DEFAULT, "accl_pmpi_call_counts");
  if (active == NULL || counts == NULL || !active()) {
    fprintf(stderr, "rank %d: FAILED: the ACCL PMPI layer is not loaded or not active\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  /* allreduce SUM of floats, MAX of ints (offloaded) */
  float fs[N], fr[N];
  for (int i = 0; i < N; ++i) fs[i] = (float)(rank * 100 + i);
  MPI_Allreduce(fs, fr, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < N; ++i)
    CHECK(fr[i] == (float)(100 * size * (size - 1) / 2 + size * i), "allreduce SUM [%d] = %g", i, fr[i]);
  int is[N], ir[N];
  for (int i = 0; i < N; ++i) is[i] = (i % size == rank) ? 1000 + i : i;
  MPI_Allreduce(is, ir, N, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  for (int i = 0; i < N; ++i) CHECK(ir[i] == 1000 + i, "allreduce MAX [%d] = %d", i, ir[i]);

  /* bcast from the last rank (offloaded) */
  int b[N];
  for (int i = 0; i < N; ++i) b[i] = rank == size - 1 ? 7 * i + 3 : -1;
  MPI_Bcast(b, N, MPI_INT, size - 1, MPI_COMM_WORLD);
  for (int i = 0; i < N; ++i) CHECK(b[i] == 7 * i + 3, "bcast [%d] = %d", i, b[i]);

  /* reduce SUM of ints to rank 0 (offloaded) */
  for (int i = 0; i < N; ++i) is[i] = (rank + 1) * i;
  for (int i = 0; i < N; ++i) ir[i] = -1;
  MPI_Reduce(is, ir, N, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    for (int i = 0; i < N; ++i) CHECK(ir[i] == size * (size + 1) / 2 * i, "reduce [%d] = %d", i, ir[i]);

  /* allgather of 8 ints per rank (offloaded) */
  int part[8], all[8 * 16];
  for (int i = 0; i < 8; ++i) part[i] = rank * 1000 + i;
  MPI_Allgather(part, 8, MPI_INT, all, 8, MPI_INT, MPI_COMM_WORLD);
  for (int i = 0; i < 8 * size; ++i) CHECK(all[i] == (i / 8) * 1000 + i % 8, "allgather [%d] = %d", i, all[i]);

  /* barrier (native: the public firmware's barrier is its rendezvous address
   * handshake, which never completed here on cclo_emu over tcp) */
  MPI_Barrier(MPI_COMM_WORLD);

  /* send/recv around a ring (native: public firmware) */
  int out[N], in[N];
  for (int i = 0; i < N; ++i) out[i] = rank * 10 + i;
  MPI_Sendrecv(out, N, MPI_INT, (rank + 1) % size, 5, in, N, MPI_INT, (rank + size - 1) % size, 5, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  for (int i = 0; i < N; ++i)
    CHECK(in[i] == ((rank + size - 1) % size) * 10 + i, "sendrecv [%d] = %d", i, in[i]);
  if (rank == 0) MPI_Send(out, N, MPI_INT, 1, 6, MPI_COMM_WORLD);
  if (rank == 1) {
    MPI_Recv(in, N, MPI_INT, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < N; ++i) CHECK(in[i] == i, "recv [%d] = %d", i, in[i]);
  }

  /* allreduce MIN (native: SUM and MAX only) */
  for (int i = 0; i < N; ++i) is[i] = rank == 0 ? -i : i;
  MPI_Allreduce(is, ir, N, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  for (int i = 0; i < N; ++i) CHECK(ir[i] == -i, "allreduce MIN [%d] = %d", i, ir[i]);

  /* allreduce above the eager size (native: it would go rendezvous) */
  static float big_s[BIG], big_r[BIG];
  for (int i = 0; i < BIG; ++i) big_s[i] = (float)(rank + i);
  MPI_Allreduce(big_s, big_r, BIG, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < BIG; ++i)
    CHECK(big_r[i] == (float)(size * (size - 1) / 2 + size * i), "big allreduce [%d] = %g", i, big_r[i]);

  /* alltoall (native: always rendezvous there) */
  int a_s[16], a_r[16];
  for (int i = 0; i < size; ++i) a_s[i] = rank * 100 + i;
  MPI_Alltoall(a_s, 1, MPI_INT, a_r, 1, MPI_INT, MPI_COMM_WORLD);
  for (int i = 0; i < size; ++i) CHECK(a_r[i] == i * 100 + rank, "alltoall [%d] = %d", i, a_r[i]);

  /* allgatherv and scan (native: composed of device sends whose sizes the
   * ranks do not agree on, so no rank could keep a rendezvous-size block native) */
  int v_counts[16], v_displs[16], v_all[16 * 4];
  for (int i = 0; i < size; ++i) {
    v_counts[i] = 1 + i % 3;
    v_displs[i] = 4 * i;
  }
  int v_part[3] = {rank * 10, rank * 10 + 1, rank * 10 + 2};
  MPI_Allgatherv(v_part, v_counts[rank], MPI_INT, v_all, v_counts, v_displs, MPI_INT, MPI_COMM_WORLD);
  for (int i = 0; i < size; ++i)
    for (int k = 0; k < v_counts[i]; ++k)
      CHECK(v_all[4 * i + k] == i * 10 + k, "allgatherv [%d][%d] = %d", i, k, v_all[4 * i + k]);
  int prefix = 0, mine = rank + 1;
  MPI_Scan(&mine, &prefix, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(prefix == (rank + 1) * (rank + 2) / 2, "scan = %d", prefix);

  /* a collective on a dup (native: no context-id word) */
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, dup);
  CHECK(sum == size, "allreduce on a dup = %d", sum);
  MPI_Comm_free(&dup);

  expect_counts(counts, "MPI_Allreduce", 2, 3);
  expect_counts(counts, "MPI_Bcast", 1, 0);
  expect_counts(counts, "MPI_Reduce", 1, 0);
  expect_counts(counts, "MPI_Allgather", 1, 0);
  expect_counts(counts, "MPI_Barrier", 0, 1);
  expect_counts(counts, "MPI_Alltoall", 0, 1);
  expect_counts(counts, "MPI_Sendrecv", 0, 1);
  expect_counts(counts, "MPI_Allgatherv", 0, 1);
  expect_counts(counts, "MPI_Scan", 0, 1);

  /* The tally bypasses the layer (PMPI_): it is not under test, and each
   * offloaded call costs about a second on cclo_emu. */
  int total = 0;
  PMPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("mpi_public_sim on %d ranks: %s\n", size, total == 0 ? "passed" : "FAILED");
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
