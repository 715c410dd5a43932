/* SPDX-License-Identifier: Apache-2.0
 *
 * Calls the device cannot run must still give MPI's answer (they fall back to
 * PMPI on every rank alike), and the controls must steer the decision.
 *
 *   test_fallback cases       user op, vector type, MPI_C_BOOL, odd byte
 *                             counts, unequal reduce_scatter: correct results,
 *                             counted as native (ACCL_STATS=1); MINLOC, MAX on
 *                             unsigned and LAND, which the emulator reports:
 *                             offloaded
 *   test_fallback thresholds  run with ACCL_ALLREDUCE_MIN_BYTES=1024 and
 *                             ACCL_OFFLOAD_CALLS=^bcast
 *   test_fallback forced      one offloadable call, then a user op: must abort
 *                             under ACCL_FALLBACK=error
 *   test_fallback forced_scan the same with MPI_Scan (a composed call)
 *   test_fallback policy MODE the decisions of ACCL_POLICY (see policy())
 */
#include "common.h"

static int size;

static void my_sum(void* in, void* inout, int* len, MPI_Datatype* t) {
  (void)t;
  for (int i = 0; i < *len; ++i) ((int*)inout)[i] += ((int*)in)[i];
}

/* Runs `stmt` and checks that the layer's `counter` of `name` (native_calls
 * or offloaded_calls) went up by exactly one (when counting is on). */
#define COUNTED_ONCE(counter, name, stmt, failure)                                          \
  do {                                                                                      \
    unsigned long long before = counter(name);                                              \
    stmt;                                                                                   \
    if (getenv("TEST_EXPECT_OFFLOAD") && size > 1)                                          \
      CHECK(counter(name) == before + 1, "%s " failure, name);                              \
  } while (0)
/* Runs `stmt` and checks it was counted natively / offloaded (when counting is on). */
#define NATIVE(name, stmt) COUNTED_ONCE(native_calls, name, stmt, "did not fall back")
#define OFFLOADED(name, stmt) COUNTED_ONCE(offloaded_calls, name, stmt, "was not offloaded")

static void cases(void) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  /* user-defined op */
  t_context = "user op";
  MPI_Op op;
  MPI_Op_create(my_sum, 1, &op);
  int x[5], y[5], z[5];
  for (int i = 0; i < 5; ++i) x[i] = rank * 10 + i;
  NATIVE("MPI_Allreduce", CHECK_RC(MPI_Allreduce(x, y, 5, MPI_INT, op, MPI_COMM_WORLD)));
  PMPI_Allreduce(x, z, 5, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(memcmp(y, z, sizeof y) == 0, "user op result");
  MPI_Op_free(&op);

  /* A non-contiguous type in a reduction falls back; Open MPI itself then
   * rejects predefined ops on derived types, so the application sees exactly
   * what native MPI says (MPI_ERR_OP). */
  t_context = "vector type";
  MPI_Datatype vec;
  MPI_Type_vector(3, 1, 2, MPI_DOUBLE, &vec);
  MPI_Type_commit(&vec);
  MPI_Comm ret;
  MPI_Comm_dup(MPI_COMM_WORLD, &ret);
  MPI_Comm_set_errhandler(ret, MPI_ERRORS_RETURN);
  double a[5] = {rank + 1.0, -1, rank + 2.0, -1, rank + 3.0}, b[5] = {0, 7, 0, 7, 0};
  int rc = MPI_SUCCESS;
  NATIVE("MPI_Allreduce", rc = MPI_Allreduce(a, b, 1, vec, MPI_SUM, ret));
  int cls = MPI_SUCCESS;
  MPI_Error_class(rc, &cls);
  CHECK(cls == MPI_ERR_OP, "vector-type reduction gave class %d, native MPI says MPI_ERR_OP", cls);
  /* Data movement with the same type is packed locally and still offloads. */
  OFFLOADED("MPI_Bcast", CHECK_RC(MPI_Bcast(a, 1, vec, 0, ret)));
  CHECK(a[0] == 1.0 && a[2] == 2.0 && a[4] == 3.0 && a[1] == -1 && a[3] == -1, "vector bcast");
  MPI_Comm_free(&ret);
  MPI_Type_free(&vec);

  /* MINLOC on MPI_2INT: the emulator reports MINLOC on pairs */
  t_context = "minloc";
  int in2[2] = {100 - rank, rank}, out2[2], ref2[2];
  OFFLOADED("MPI_Allreduce", CHECK_RC(MPI_Allreduce(in2, out2, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD)));
  PMPI_Allreduce(in2, ref2, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD);
  CHECK(out2[0] == ref2[0] && out2[1] == ref2[1], "minloc result");

  /* MAX on unsigned: compared unsigned on the device (uint32) */
  t_context = "max unsigned";
  unsigned u = rank == 0 ? 0x80000000u : 1u, um = 0;
  OFFLOADED("MPI_Allreduce", CHECK_RC(MPI_Allreduce(&u, &um, 1, MPI_UNSIGNED, MPI_MAX, MPI_COMM_WORLD)));
  CHECK(size == 1 || um == 0x80000000u, "unsigned max %x", um);
  /* ... while SUM on unsigned is the same bits and offloads */
  unsigned us = 0;
  OFFLOADED("MPI_Allreduce", CHECK_RC(MPI_Allreduce(&u, &us, 1, MPI_UNSIGNED, MPI_SUM, MPI_COMM_WORLD)));

  /* logical and */
  t_context = "land";
  int l = rank != 1, lo = -1;
  OFFLOADED("MPI_Allreduce", CHECK_RC(MPI_Allreduce(&l, &lo, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD)));
  CHECK(lo == (size == 1), "land %d", lo);
  /* ... but not on MPI_C_BOOL, which has no device type */
  t_context = "lor c_bool";
  _Bool bl = rank == 1, blo = 0;
  NATIVE("MPI_Allreduce", CHECK_RC(MPI_Allreduce(&bl, &blo, 1, MPI_C_BOOL, MPI_LOR, MPI_COMM_WORLD)));
  CHECK(blo == (size > 1), "lor %d", (int)blo);

  /* 7 bytes: not a whole device word */
  t_context = "odd bytes";
  char s7[7] = "abcdef", r7[7] = {0};
  if (rank == 0) memcpy(r7, s7, 7);
  NATIVE("MPI_Bcast", CHECK_RC(MPI_Bcast(r7, 7, MPI_CHAR, 0, MPI_COMM_WORLD)));
  CHECK(memcmp(r7, s7, 7) == 0, "bcast of 7 chars");

  /* reduce_scatter with unequal counts: composed (allreduce, then this rank's part) */
  t_context = "reduce_scatter unequal";
  int* counts = malloc(sizeof(int) * (size_t)size);
  int total = 0;
  for (int i = 0; i < size; ++i) total += counts[i] = i + 1;
  int* sin = malloc(sizeof(int) * (size_t)total);
  int* sout = malloc(sizeof(int) * (size_t)(rank + 1));
  int* sref = malloc(sizeof(int) * (size_t)(rank + 1));
  for (int i = 0; i < total; ++i) sin[i] = rank + i;
  OFFLOADED("MPI_Reduce_scatter", CHECK_RC(MPI_Reduce_scatter(sin, sout, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD)));
  PMPI_Reduce_scatter(sin, sref, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(memcmp(sout, sref, sizeof(int) * (size_t)(rank + 1)) == 0, "reduce_scatter result");
  free(counts), free(sin), free(sout), free(sref);

  /* a composed call whose op the device lacks falls back like any reduction */
  t_context = "exscan user op";
  MPI_Op user_sum;
  MPI_Op_create(my_sum, 1, &user_sum);
  int ein = rank + 1, eout = -1;
  NATIVE("MPI_Exscan", CHECK_RC(MPI_Exscan(&ein, &eout, 1, MPI_INT, user_sum, MPI_COMM_WORLD)));
  if (rank > 0) CHECK(eout == rank * (rank + 1) / 2, "exscan with a user op: %d", eout);
  MPI_Op_free(&user_sum);

  /* and an ordinary call still offloads after all that */
  t_context = "offload after fallbacks";
  double d = rank, dsum2 = 0;
  OFFLOADED("MPI_Allreduce", CHECK_RC(MPI_Allreduce(&d, &dsum2, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD)));
  CHECK(dsum2 == size * (size - 1) / 2.0, "sum %f", dsum2);
}

/* ACCL_ALLREDUCE_MIN_BYTES=1024, ACCL_OFFLOAD_CALLS=^bcast */
static void thresholds(void) {
  t_context = "thresholds";
  float small[2] = {1, 2}, so[2];
  float big[512], bo[512];
  for (int i = 0; i < 512; ++i) big[i] = (float)i;
  NATIVE("MPI_Allreduce", CHECK_RC(MPI_Allreduce(small, so, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)));
  OFFLOADED("MPI_Allreduce", CHECK_RC(MPI_Allreduce(big, bo, 512, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)));
  CHECK(so[1] == 2.0f * (float)size && bo[511] == 511.0f * (float)size, "threshold results");
  NATIVE("MPI_Bcast", CHECK_RC(MPI_Bcast(big, 512, MPI_FLOAT, 0, MPI_COMM_WORLD)));
  OFFLOADED("MPI_Reduce", CHECK_RC(MPI_Reduce(small, so, 2, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD)));
}

/* The decisions of ACCL_POLICY, one mode per setting (see tests/pmpi/meson.build):
 *   table     ACCL_POLICY=auto with tests/pmpi/tuning/policy.json: allreduce native, bcast offloaded from
 *             1 KiB, reduce offloaded on 3 or more ranks, barrier offloaded, p2p offloaded on 2 ranks
 *   override  the same file and ACCL_ALLREDUCE_MIN_BYTES=1024, which outranks it for allreduce
 *   native    ACCL_POLICY=native: nothing offloaded
 *   offload   ACCL_POLICY=offload: everything offloaded */
#define DECIDED(off, name, stmt)     \
  do {                               \
    if (off) OFFLOADED(name, stmt);  \
    else NATIVE(name, stmt);         \
  } while (0)

static void policy(const char* mode) {
  t_context = mode;
  const int table = strcmp(mode, "table") == 0 || strcmp(mode, "override") == 0;
  const int all = strcmp(mode, "offload") == 0, none = strcmp(mode, "native") == 0;
  CHECK(table || all || none, "unknown policy mode %s", mode);
  const int override = strcmp(mode, "override") == 0;
  float small[4] = {1, 2, 3, 4}, so[4] = {0};
  static float big[1024], bo[1024];
  for (int i = 0; i < 1024; ++i) big[i] = (float)i;
  DECIDED(all || override, "MPI_Allreduce", CHECK_RC(MPI_Allreduce(big, bo, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)));
  DECIDED(all, "MPI_Allreduce", CHECK_RC(MPI_Allreduce(small, so, 4, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD)));
  CHECK(so[3] == 4.0f * (float)size && bo[1023] == 1023.0f * (float)size, "allreduce results");
  DECIDED(all, "MPI_Bcast", CHECK_RC(MPI_Bcast(small, 4, MPI_FLOAT, 0, MPI_COMM_WORLD)));
  DECIDED(all || table, "MPI_Bcast", CHECK_RC(MPI_Bcast(big, 1024, MPI_FLOAT, 0, MPI_COMM_WORLD)));
  CHECK(small[3] == 4.0f && big[1023] == 1023.0f, "bcast results");
  DECIDED(all || (table && size >= 3), "MPI_Reduce",
          CHECK_RC(MPI_Reduce(small, so, 4, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD)));
  CHECK(t_rank != 0 || so[2] == 3.0f * (float)size, "reduce result");
  DECIDED(all || table, "MPI_Barrier", CHECK_RC(MPI_Barrier(MPI_COMM_WORLD)));
  /* point-to-point: decided per communicator, when it is made */
  const int p2p = all || (table && size == 2);
  if (t_rank == 0) DECIDED(p2p, "MPI_Send", CHECK_RC(MPI_Send(small, 4, MPI_FLOAT, 1, 7, MPI_COMM_WORLD)));
  if (t_rank == 1)
    DECIDED(p2p, "MPI_Recv", CHECK_RC(MPI_Recv(so, 4, MPI_FLOAT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE)));
  if (t_rank == 1) CHECK(so[0] == 1.0f && so[3] == 4.0f, "received data");
}

/* MPI_Allreduce and MPI_Scan take the same arguments; either one, with a
 * user op under a forced offload, must abort. */
typedef int (*reduction_call)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);

static void forced(reduction_call call) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int v = 1, s = 0;
  call(&v, &s, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); /* offloads */
  MPI_Op op;
  MPI_Op_create(my_sum, 1, &op);
  call(&v, &s, 1, MPI_INT, op, MPI_COMM_WORLD); /* must abort */
  printf("rank %d: still alive after a forced fallback\n", rank);
}

int main(int argc, char** argv) {
  init_world(&argc, &argv, &t_rank, &size);
  const char* mode = argc > 1 ? argv[1] : "cases";
  if (strcmp(mode, "cases") == 0) cases();
  else if (strcmp(mode, "thresholds") == 0) thresholds();
  else if (strcmp(mode, "forced") == 0) forced(MPI_Allreduce);
  else if (strcmp(mode, "forced_scan") == 0) forced(MPI_Scan);
  else if (strcmp(mode, "policy") == 0) policy(argc > 2 ? argv[2] : "");
  return finish("test_fallback");
}
