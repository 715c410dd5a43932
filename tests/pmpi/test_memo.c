/* SPDX-License-Identifier: Apache-2.0
 *
 * The layer remembers native decisions by the call's arguments
 * (pmpi/src/decision_memo.hpp). A remembered call must stay exactly what the
 * full decision would do: counted as native each time, and forgotten when a
 * communicator or datatype handle it names is freed, because MPI may hand
 * the same handle out again for an object that is decided otherwise.
 *
 * Run on 2 ranks with ACCL_STATS=1 and tests/pmpi/tuning/policy.json, whose
 * rules offload bcast from 1 KiB, keep smaller collectives native, and
 * offload point-to-point on 2 ranks:
 *   repeat   the same native bcast three times: native each time, data moves
 *   count    the same buffer with a larger count: offloaded
 *   comm     a size-1 communicator (native) freed, its handle reused by a
 *            duplicate of MPI_COMM_WORLD: offloaded
 *   type     a 64 B datatype (native) freed, its handle reused by a 4 KiB one:
 *            offloaded
 *   p2p      a send to self on a size-1 communicator (native) freed, the
 *            handle reused by a duplicate of MPI_COMM_WORLD: offloaded
 * A case whose handle MPI did not reuse (after several tries) fails: without
 * the reuse it would prove nothing.
 */
#include "common.h"

static int size;
static float buf[1024];

#define COUNTED_ONCE(counter, name, stmt, failure)                            \
  do {                                                                        \
    unsigned long long before = counter(name);                                \
    stmt;                                                                     \
    CHECK(counter(name) == before + 1, "%s " failure, name);                  \
  } while (0)
#define NATIVE(name, stmt) COUNTED_ONCE(native_calls, name, stmt, "was not counted native")
#define OFFLOADED(name, stmt) COUNTED_ONCE(offloaded_calls, name, stmt, "was not offloaded")

/* Root 0 fills `n` floats with `seed + i`; after the bcast every rank must hold them. */
static void bcast_checked(MPI_Datatype type, int count, int n, float seed, MPI_Comm comm) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  for (int i = 0; i < n; ++i) buf[i] = rank == 0 ? seed + (float)i : -1.0f;
  CHECK_RC(MPI_Bcast(buf, count, type, 0, comm));
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += buf[i] != seed + (float)i;
  CHECK(wrong == 0, "bcast: %d of %d floats wrong", wrong, n);
}

static void repeat_and_count(void) {
  t_context = "repeat";
  for (int k = 0; k < 3; ++k)
    NATIVE("MPI_Bcast", bcast_checked(MPI_FLOAT, 16, 16, (float)(100 * k), MPI_COMM_WORLD));
  t_context = "count";
  OFFLOADED("MPI_Bcast", bcast_checked(MPI_FLOAT, 1024, 1024, 7.0f, MPI_COMM_WORLD));
  NATIVE("MPI_Bcast", bcast_checked(MPI_FLOAT, 16, 16, 9.0f, MPI_COMM_WORLD));
}

enum { kTries = 16 };

/* A communicator of this rank alone, remembered native for `use`, freed;
 * then duplicates of MPI_COMM_WORLD until one gets the freed handle back,
 * which is returned (the others are freed). MPI_COMM_NULL if none did. */
static MPI_Comm reused_comm(void (*use)(MPI_Comm)) {
  MPI_Comm alone;
  MPI_Comm_split(MPI_COMM_WORLD, t_rank, 0, &alone);
  use(alone);
  use(alone);
  const MPI_Comm old = alone;
  MPI_Comm_free(&alone);
  MPI_Comm spare[kTries];
  MPI_Comm found = MPI_COMM_NULL;
  int n = 0, all = 0;
  /* MPI_Comm_dup is collective: the ranks agree after each one whether to go on. */
  while (n < kTries && !all) {
    MPI_Comm_dup(MPI_COMM_WORLD, &spare[n]);
    const int reused = spare[n++] == old;
    PMPI_Allreduce(&reused, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  }
  for (int i = 0; i < n; ++i) {
    if (all && i == n - 1) found = spare[i];
    else MPI_Comm_free(&spare[i]);
  }
  return found;
}

static void bcast_alone(MPI_Comm alone) {
  NATIVE("MPI_Bcast", bcast_checked(MPI_FLOAT, 1024, 1024, 3.0f, alone));
}

static void comm_reuse(void) {
  t_context = "comm";
  MPI_Comm again = reused_comm(bcast_alone);
  CHECK(again != MPI_COMM_NULL, "MPI never reused the freed communicator handle in %d tries", kTries);
  if (again == MPI_COMM_NULL) return;
  OFFLOADED("MPI_Bcast", bcast_checked(MPI_FLOAT, 1024, 1024, 5.0f, again));
  MPI_Comm_free(&again);
}

static void send_to_self(MPI_Comm alone) {
  float in[4] = {0}, out[4] = {1, 2, 3, 4};
  MPI_Request r;
  NATIVE("MPI_Irecv", CHECK_RC(MPI_Irecv(in, 4, MPI_FLOAT, 0, 3, alone, &r)));
  NATIVE("MPI_Send", CHECK_RC(MPI_Send(out, 4, MPI_FLOAT, 0, 3, alone)));
  CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
  CHECK(in[3] == 4.0f, "send to self: got %g", (double)in[3]);
}

static void p2p_reuse(void) {
  t_context = "p2p";
  MPI_Comm again = reused_comm(send_to_self);
  CHECK(again != MPI_COMM_NULL, "MPI never reused the freed communicator handle in %d tries", kTries);
  if (again == MPI_COMM_NULL) return;
  float v[4] = {1, 2, 3, 4};
  if (t_rank == 0) OFFLOADED("MPI_Send", CHECK_RC(MPI_Send(v, 4, MPI_FLOAT, 1, 3, again)));
  if (t_rank == 1) {
    memset(v, 0, sizeof v);
    OFFLOADED("MPI_Recv", CHECK_RC(MPI_Recv(v, 4, MPI_FLOAT, 0, 3, again, MPI_STATUS_IGNORE)));
    CHECK(v[3] == 4.0f, "received %g", (double)v[3]);
  }
  MPI_Comm_free(&again);
}

static void type_reuse(void) {
  t_context = "type";
  MPI_Datatype small;
  MPI_Type_contiguous(16, MPI_FLOAT, &small);
  MPI_Type_commit(&small);
  NATIVE("MPI_Bcast", bcast_checked(small, 1, 16, 11.0f, MPI_COMM_WORLD));
  NATIVE("MPI_Bcast", bcast_checked(small, 1, 16, 12.0f, MPI_COMM_WORLD));
  const MPI_Datatype old = small;
  MPI_Type_free(&small);
  MPI_Datatype spare[kTries], large = MPI_DATATYPE_NULL;
  int n = 0, reused = 0;
  for (; n < kTries && !reused; ++n) {
    MPI_Type_contiguous(1024, MPI_FLOAT, &spare[n]);
    MPI_Type_commit(&spare[n]);
    reused = spare[n] == old;
  }
  int all = 0;
  PMPI_Allreduce(&reused, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  CHECK(all, "MPI never reused the freed datatype handle in %d tries", kTries);
  for (int i = 0; i < n; ++i) {
    if (all && i == n - 1) large = spare[i];
    else MPI_Type_free(&spare[i]);
  }
  if (large == MPI_DATATYPE_NULL) return;
  OFFLOADED("MPI_Bcast", bcast_checked(large, 1, 1024, 13.0f, MPI_COMM_WORLD));
  MPI_Type_free(&large);
}

int main(int argc, char** argv) {
  init_world(&argc, &argv, &t_rank, &size);
  CHECK(size == 2, "run on 2 ranks (the policy file offloads point-to-point on 2)");
  CHECK(layer_active(), "needs the layer, active, with ACCL_STATS=1");
  if (size == 2 && layer_active()) {
    repeat_and_count();
    comm_reuse();
    type_reuse();
    p2p_reuse();
  }
  return finish("test_memo");
}
