/* SPDX-License-Identifier: Apache-2.0
 *
 * Bad arguments to intercepted calls: with MPI_ERRORS_RETURN every call must
 * come back with the error class the native MPI gives for the same arguments
 * (the layer must not offload, crash, hang or write anything), and the
 * buffers must be untouched. The expected class is taken from PMPI_* itself
 * on the same arguments, so the test holds whatever MPI checks. Each case is
 * bad on every rank, as an MPI program would be, so nothing waits on a peer.
 * Afterwards one valid allreduce and one send/recv prove the layer still works.
 */
#include "common.h"

#include <stdint.h>

#define N 64
#define SENTINEL 0x5a

static unsigned char sbuf[4 * N * 8], rbuf[4 * N * 8];

static void reset_buffers(void) {
  memset(sbuf, 1, sizeof sbuf);
  memset(rbuf, SENTINEL, sizeof rbuf);
}

static int untouched(void) {
  for (size_t i = 0; i < sizeof rbuf; ++i)
    if (rbuf[i] != SENTINEL) return 0;
  for (size_t i = 0; i < sizeof sbuf; ++i)
    if (sbuf[i] != 1) return 0;
  return 1;
}

static int error_class(int rc) {
  int cls = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  return cls;
}

/* Runs `layer` (the intercepted call) and `native` (PMPI) on the same bad
 * arguments and compares the outcome. */
#define SAME_AS_NATIVE(what, layer, native)                                                        \
  do {                                                                                             \
    t_context = what;                                                                              \
    reset_buffers();                                                                               \
    int expect = error_class(native);                                                              \
    reset_buffers();                                                                               \
    int got = error_class(layer);                                                                  \
    CHECK(expect != MPI_SUCCESS, "native MPI accepted these arguments; the case is not bad input"); \
    CHECK(got == expect, "error class %d, native MPI gives %d", got, expect);                      \
    CHECK(untouched(), "a buffer changed although the call failed");                               \
  } while (0)

/* Arguments native Open MPI does not check (it crashes on NULL in every
 * collective, and runs overlapping buffers with undefined results): the
 * layer must refuse them with `want` on every rank, touching nothing. Only
 * with the layer in the process: natively these crash. */
#define REJECTED(what, layer, want)                                                             \
  do {                                                                                          \
    t_context = what;                                                                           \
    if (!layer_present()) break;                                                                \
    reset_buffers();                                                                            \
    int got = error_class(layer);                                                               \
    CHECK(got == (want), "error class %d, want %d (%s)", got, (want), #want);                   \
    CHECK(untouched(), "a buffer changed although the call failed");                            \
  } while (0)

/* Issue 38 (1, 2): buffers MPI forbids. Before, MPI_IN_PLACE reached the
 * emulator as address 0x1 (SIGSEGV), NULL became a fresh buffer the layer
 * cached, so data written "to NULL" came back in a later call "from NULL",
 * and aliased buffers returned MPI_SUCCESS. */
static void bad_buffers(MPI_Comm dup, int size) {
  void* const inpl = MPI_IN_PLACE;
  const int peer = (t_rank + 1) % size, from = (t_rank + size - 1) % size;
  const int root = t_rank == 0;
  /* where native Open MPI checks, the layer gives its class */
  SAME_AS_NATIVE("allreduce recvbuf IN_PLACE", MPI_Allreduce(sbuf, inpl, N, MPI_INT, MPI_SUM, dup),
                 PMPI_Allreduce(sbuf, inpl, N, MPI_INT, MPI_SUM, dup));
  SAME_AS_NATIVE("allreduce both IN_PLACE", MPI_Allreduce(inpl, inpl, N, MPI_INT, MPI_SUM, dup),
                 PMPI_Allreduce(inpl, inpl, N, MPI_INT, MPI_SUM, dup));
  {
    MPI_Request req = MPI_REQUEST_NULL, nreq = MPI_REQUEST_NULL;
    SAME_AS_NATIVE("iallreduce recvbuf IN_PLACE", MPI_Iallreduce(sbuf, inpl, N, MPI_INT, MPI_SUM, dup, &req),
                   PMPI_Iallreduce(sbuf, inpl, N, MPI_INT, MPI_SUM, dup, &nreq));
    SAME_AS_NATIVE("ibcast IN_PLACE", MPI_Ibcast(inpl, N, MPI_INT, 0, dup, &req),
                   PMPI_Ibcast(inpl, N, MPI_INT, 0, dup, &nreq));
  }
  SAME_AS_NATIVE("bcast IN_PLACE", MPI_Bcast(inpl, N, MPI_INT, 0, dup), PMPI_Bcast(inpl, N, MPI_INT, 0, dup));
  SAME_AS_NATIVE("allreduce sendbuf == recvbuf", MPI_Allreduce(rbuf, rbuf, N, MPI_INT, MPI_SUM, dup),
                 PMPI_Allreduce(rbuf, rbuf, N, MPI_INT, MPI_SUM, dup));
  SAME_AS_NATIVE("reduce: root recvbuf IN_PLACE, others sendbuf IN_PLACE",
                 MPI_Reduce(root ? (void*)sbuf : inpl, root ? inpl : (void*)rbuf, N, MPI_INT, MPI_SUM, 0, dup),
                 PMPI_Reduce(root ? (void*)sbuf : inpl, root ? inpl : (void*)rbuf, N, MPI_INT, MPI_SUM, 0, dup));
  SAME_AS_NATIVE("reduce: root sendbuf == recvbuf, others sendbuf IN_PLACE",
                 MPI_Reduce(root ? (void*)rbuf : inpl, rbuf, N, MPI_INT, MPI_SUM, 0, dup),
                 PMPI_Reduce(root ? (void*)rbuf : inpl, rbuf, N, MPI_INT, MPI_SUM, 0, dup));
  SAME_AS_NATIVE("gather: root recvbuf IN_PLACE, others sendbuf IN_PLACE",
                 MPI_Gather(root ? (void*)sbuf : inpl, N, MPI_INT, root ? inpl : (void*)rbuf, N, MPI_INT, 0, dup),
                 PMPI_Gather(root ? (void*)sbuf : inpl, N, MPI_INT, root ? inpl : (void*)rbuf, N, MPI_INT, 0, dup));
  SAME_AS_NATIVE("scatter: root sendbuf IN_PLACE, others recvbuf IN_PLACE",
                 MPI_Scatter(root ? inpl : (void*)sbuf, N, MPI_INT, root ? (void*)rbuf : inpl, N, MPI_INT, 0, dup),
                 PMPI_Scatter(root ? inpl : (void*)sbuf, N, MPI_INT, root ? (void*)rbuf : inpl, N, MPI_INT, 0, dup));
  SAME_AS_NATIVE("allgather recvbuf IN_PLACE", MPI_Allgather(sbuf, N, MPI_INT, inpl, N, MPI_INT, dup),
                 PMPI_Allgather(sbuf, N, MPI_INT, inpl, N, MPI_INT, dup));
  SAME_AS_NATIVE("alltoall recvbuf IN_PLACE", MPI_Alltoall(sbuf, N, MPI_INT, inpl, N, MPI_INT, dup),
                 PMPI_Alltoall(sbuf, N, MPI_INT, inpl, N, MPI_INT, dup));
  SAME_AS_NATIVE("reduce_scatter_block recvbuf IN_PLACE",
                 MPI_Reduce_scatter_block(sbuf, inpl, N, MPI_INT, MPI_SUM, dup),
                 PMPI_Reduce_scatter_block(sbuf, inpl, N, MPI_INT, MPI_SUM, dup));
  SAME_AS_NATIVE("send NULL", MPI_Send(NULL, N, MPI_INT, peer, 3, dup), PMPI_Send(NULL, N, MPI_INT, peer, 3, dup));
  SAME_AS_NATIVE("ssend NULL", MPI_Ssend(NULL, N, MPI_INT, peer, 3, dup), PMPI_Ssend(NULL, N, MPI_INT, peer, 3, dup));
  SAME_AS_NATIVE("recv NULL", MPI_Recv(NULL, N, MPI_INT, from, 3, dup, MPI_STATUS_IGNORE),
                 PMPI_Recv(NULL, N, MPI_INT, from, 3, dup, MPI_STATUS_IGNORE));
  {
    MPI_Request req = MPI_REQUEST_NULL, nreq = MPI_REQUEST_NULL;
    SAME_AS_NATIVE("isend NULL", MPI_Isend(NULL, N, MPI_INT, peer, 3, dup, &req),
                   PMPI_Isend(NULL, N, MPI_INT, peer, 3, dup, &nreq));
    SAME_AS_NATIVE("irecv NULL", MPI_Irecv(NULL, N, MPI_INT, from, 3, dup, &req),
                   PMPI_Irecv(NULL, N, MPI_INT, from, 3, dup, &nreq));
  }
  SAME_AS_NATIVE("sendrecv NULL sendbuf",
                 MPI_Sendrecv(NULL, N, MPI_INT, peer, 3, rbuf, N, MPI_INT, from, 3, dup, MPI_STATUS_IGNORE),
                 PMPI_Sendrecv(NULL, N, MPI_INT, peer, 3, rbuf, N, MPI_INT, from, 3, dup, MPI_STATUS_IGNORE));

  /* where native Open MPI crashes or runs with undefined data */
  REJECTED("allreduce sendbuf NULL", MPI_Allreduce(NULL, rbuf, N, MPI_INT, MPI_SUM, dup), MPI_ERR_BUFFER);
  REJECTED("allreduce recvbuf NULL", MPI_Allreduce(sbuf, NULL, N, MPI_INT, MPI_SUM, dup), MPI_ERR_BUFFER);
  REJECTED("allreduce IN_PLACE into NULL", MPI_Allreduce(inpl, NULL, N, MPI_INT, MPI_SUM, dup), MPI_ERR_BUFFER);
  REJECTED("allreduce sendbuf == recvbuf, 1 item", MPI_Allreduce(rbuf, rbuf, 1, MPI_INT, MPI_SUM, dup),
           MPI_ERR_BUFFER);
  REJECTED("allreduce overlapping buffers", MPI_Allreduce(rbuf, rbuf + 16, N, MPI_INT, MPI_SUM, dup),
           MPI_ERR_BUFFER);
  {
    MPI_Request req = MPI_REQUEST_NULL;
    REJECTED("iallreduce recvbuf NULL", MPI_Iallreduce(sbuf, NULL, N, MPI_INT, MPI_SUM, dup, &req), MPI_ERR_BUFFER);
    REJECTED("ibcast NULL", MPI_Ibcast(NULL, N, MPI_INT, 0, dup, &req), MPI_ERR_BUFFER);
  }
  REJECTED("bcast NULL", MPI_Bcast(NULL, N, MPI_INT, 0, dup), MPI_ERR_BUFFER);
  REJECTED("reduce sendbuf NULL", MPI_Reduce(NULL, rbuf, N, MPI_INT, MPI_SUM, 0, dup), MPI_ERR_BUFFER);
  REJECTED("gather sendbuf NULL", MPI_Gather(NULL, N, MPI_INT, rbuf, N, MPI_INT, 0, dup), MPI_ERR_BUFFER);
  REJECTED("scatter recvbuf NULL", MPI_Scatter(sbuf, N, MPI_INT, NULL, N, MPI_INT, 0, dup), MPI_ERR_BUFFER);
  REJECTED("allgather sendbuf NULL", MPI_Allgather(NULL, N, MPI_INT, rbuf, N, MPI_INT, dup), MPI_ERR_BUFFER);
  REJECTED("allgather sendbuf inside recvbuf", MPI_Allgather(rbuf, N, MPI_INT, rbuf, N, MPI_INT, dup),
           MPI_ERR_BUFFER);
  REJECTED("alltoall recvbuf NULL", MPI_Alltoall(sbuf, N, MPI_INT, NULL, N, MPI_INT, dup), MPI_ERR_BUFFER);
  REJECTED("alltoall sendbuf == recvbuf", MPI_Alltoall(rbuf, N, MPI_INT, rbuf, N, MPI_INT, dup), MPI_ERR_BUFFER);
  REJECTED("reduce_scatter_block sendbuf NULL", MPI_Reduce_scatter_block(NULL, rbuf, N, MPI_INT, MPI_SUM, dup),
           MPI_ERR_BUFFER);
  REJECTED("reduce_scatter_block sendbuf == recvbuf",
           MPI_Reduce_scatter_block(rbuf, rbuf, N, MPI_INT, MPI_SUM, dup), MPI_ERR_BUFFER);
  REJECTED("send IN_PLACE", MPI_Send(inpl, N, MPI_INT, peer, 3, dup), MPI_ERR_BUFFER);
  REJECTED("recv IN_PLACE", MPI_Recv(inpl, N, MPI_INT, from, 3, dup, MPI_STATUS_IGNORE), MPI_ERR_BUFFER);
  REJECTED("sendrecv_replace NULL",
           MPI_Sendrecv_replace(NULL, N, MPI_INT, peer, 3, from, 3, dup, MPI_STATUS_IGNORE), MPI_ERR_BUFFER);
  {
    /* 8 MB "into NULL", then "from NULL": nothing may come back */
    const int big = 2 << 20;
    int* src = malloc((size_t)big * sizeof(int));
    for (int i = 0; i < big; ++i) src[i] = i;
    REJECTED("8 MB allreduce into NULL", MPI_Allreduce(src, NULL, big, MPI_INT, MPI_SUM, dup), MPI_ERR_BUFFER);
    REJECTED("8 MB allreduce from NULL", MPI_Allreduce(NULL, src, big, MPI_INT, MPI_SUM, dup), MPI_ERR_BUFFER);
    int intact = 1;
    for (int i = 0; i < big; ++i) intact &= src[i] == i;
    CHECK(intact, "the receive buffer of a refused allreduce changed");
    free(src);
  }
  /* NULL with an absolute-address type is MPI_BOTTOM: valid, and correct */
  {
    t_context = "bcast from MPI_BOTTOM";
    int cell[4] = {t_rank, t_rank, t_rank, t_rank};
    MPI_Aint at;
    MPI_Get_address(cell, &at);
    int len = 4;
    MPI_Datatype abs_type;
    MPI_Type_create_hindexed(1, &len, &at, MPI_INT, &abs_type);
    MPI_Type_commit(&abs_type);
    CHECK_RC(MPI_Bcast(MPI_BOTTOM, 1, abs_type, 0, dup));
    CHECK(cell[0] == 0 && cell[3] == 0, "MPI_BOTTOM bcast gave %d %d, want 0 0", cell[0], cell[3]);
    MPI_Type_free(&abs_type);
  }
}

/* A valid allreduce on every rank: after an erroneous collective, the first
 * one may report the earlier mismatch on some ranks ("the previous
 * collective ... was called with different arguments"; a rank may fail it
 * after its own part was sent, so others can succeed). The ranks agree
 * (PMPI) whether any failed; then the next one must work everywhere. */
static void recovers(MPI_Comm comm, int size, const char* what) {
  /* Ranks that failed by timeout leave the mismatch up to one timeout after
   * those that failed at once: realign them (natively) first, so that the
   * allreduce below is not itself entered a timeout apart. */
  PMPI_Barrier(MPI_COMM_WORLD);
  for (int attempt = 0; attempt < 2; ++attempt) {
    int one = 1, sum = 0;
    const int rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
    int failed = rc != MPI_SUCCESS, any_failed = 0;
    PMPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (attempt == 1 || !any_failed) {
      t_context = what;
      char text[MPI_MAX_ERROR_STRING] = "";
      int len = 0;
      if (rc != MPI_SUCCESS) MPI_Error_string(rc, text, &len);
      CHECK(rc == MPI_SUCCESS, "the second allreduce after the mismatch failed: %s", text);
      CHECK(rc != MPI_SUCCESS || sum == size, "allreduce after the mismatch gave %d, want %d", sum, size);
      return;
    }
  }
}

/* Issue 38 (5): erroneous collectives. Different MPI_Bcast roots (each rank
 * names itself: every rank only sends) returned MPI_SUCCESS on every rank
 * with each rank's own data; now each rank reports it, in the broadcast or
 * in the next collective. MPI_Allreduce on rank 0 against MPI_Bcast on the
 * others must fail on every rank within the timeout, repeatedly (it once
 * hung for 40 s under a 5 s timeout). Small and rendezvous sizes. */
static int mismatched_collectives(MPI_Comm* dup, int size) {
  const MPI_Comm comm = *dup;
  static int buf[4096], out[4096];
  for (int n = 16; n <= 4096; n *= 256) {
    char what[96];
    snprintf(what, sizeof what, "bcast roots differ, %d ints", n);
    t_context = what;
    for (int i = 0; i < n; ++i) buf[i] = t_rank;
    int rc_bcast = MPI_Bcast(buf, n, MPI_INT, t_rank, comm);
    /* every rank makes the next call, whatever its broadcast returned */
    int one = 1, sum = 0;
    const int rc_next = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
    CHECK(rc_bcast != MPI_SUCCESS || rc_next != MPI_SUCCESS,
          "the broadcast with different roots and the collective after it both succeeded");
    recovers(comm, size, what);
    for (int round = 0; round < 5; ++round) {
      snprintf(what, sizeof what, "allreduce against bcast, %d ints, round %d", n, round);
      t_context = what;
      int rc;
      if (t_rank == 0) rc = MPI_Allreduce(buf, out, n, MPI_INT, MPI_SUM, comm);
      else rc = MPI_Bcast(buf, n, MPI_INT, 0, comm);
      CHECK(rc != MPI_SUCCESS, "a rank succeeded although the ranks called different collectives");
      recovers(comm, size, what);
    }
  }
  MPI_Comm_free(dup);
  return finish("test_bad_input mismatch");
}

int main(int argc, char** argv) {
  int size;
  init_world(&argc, &argv, &t_rank, &size);
  /* MPI_COMM_NULL errors are raised on MPI_COMM_WORLD. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  const int peer = (t_rank + 1) % size, from = (t_rank + size - 1) % size;
  if (mode_is(argc, argv, "mismatch")) return mismatched_collectives(&dup, size);

  /* collectives: count, root, type, op, communicator */
  SAME_AS_NATIVE("bcast count -1", MPI_Bcast(rbuf, -1, MPI_INT, 0, dup), PMPI_Bcast(rbuf, -1, MPI_INT, 0, dup));
  SAME_AS_NATIVE("bcast root = size", MPI_Bcast(rbuf, N, MPI_INT, size, dup),
                 PMPI_Bcast(rbuf, N, MPI_INT, size, dup));
  SAME_AS_NATIVE("bcast root -7", MPI_Bcast(rbuf, N, MPI_INT, -7, dup), PMPI_Bcast(rbuf, N, MPI_INT, -7, dup));
  SAME_AS_NATIVE("bcast null type", MPI_Bcast(rbuf, N, MPI_DATATYPE_NULL, 0, dup),
                 PMPI_Bcast(rbuf, N, MPI_DATATYPE_NULL, 0, dup));
  SAME_AS_NATIVE("bcast null comm", MPI_Bcast(rbuf, N, MPI_INT, 0, MPI_COMM_NULL),
                 PMPI_Bcast(rbuf, N, MPI_INT, 0, MPI_COMM_NULL));
  SAME_AS_NATIVE("allreduce count -1", MPI_Allreduce(sbuf, rbuf, -1, MPI_FLOAT, MPI_SUM, dup),
                 PMPI_Allreduce(sbuf, rbuf, -1, MPI_FLOAT, MPI_SUM, dup));
  SAME_AS_NATIVE("allreduce null op", MPI_Allreduce(sbuf, rbuf, N, MPI_FLOAT, MPI_OP_NULL, dup),
                 PMPI_Allreduce(sbuf, rbuf, N, MPI_FLOAT, MPI_OP_NULL, dup));
  SAME_AS_NATIVE("allreduce null type", MPI_Allreduce(sbuf, rbuf, N, MPI_DATATYPE_NULL, MPI_SUM, dup),
                 PMPI_Allreduce(sbuf, rbuf, N, MPI_DATATYPE_NULL, MPI_SUM, dup));
  SAME_AS_NATIVE("allreduce null comm", MPI_Allreduce(sbuf, rbuf, N, MPI_FLOAT, MPI_SUM, MPI_COMM_NULL),
                 PMPI_Allreduce(sbuf, rbuf, N, MPI_FLOAT, MPI_SUM, MPI_COMM_NULL));
  SAME_AS_NATIVE("reduce root = size", MPI_Reduce(sbuf, rbuf, N, MPI_INT, MPI_MAX, size, dup),
                 PMPI_Reduce(sbuf, rbuf, N, MPI_INT, MPI_MAX, size, dup));
  SAME_AS_NATIVE("reduce count -3", MPI_Reduce(sbuf, rbuf, -3, MPI_INT, MPI_MAX, 0, dup),
                 PMPI_Reduce(sbuf, rbuf, -3, MPI_INT, MPI_MAX, 0, dup));
  SAME_AS_NATIVE("gather root -1", MPI_Gather(sbuf, N, MPI_INT, rbuf, N, MPI_INT, -1, dup),
                 PMPI_Gather(sbuf, N, MPI_INT, rbuf, N, MPI_INT, -1, dup));
  SAME_AS_NATIVE("scatter root = size", MPI_Scatter(sbuf, N, MPI_INT, rbuf, N, MPI_INT, size, dup),
                 PMPI_Scatter(sbuf, N, MPI_INT, rbuf, N, MPI_INT, size, dup));
  SAME_AS_NATIVE("allgather count -1", MPI_Allgather(sbuf, -1, MPI_INT, rbuf, -1, MPI_INT, dup),
                 PMPI_Allgather(sbuf, -1, MPI_INT, rbuf, -1, MPI_INT, dup));
  SAME_AS_NATIVE("alltoall null type", MPI_Alltoall(sbuf, N, MPI_DATATYPE_NULL, rbuf, N, MPI_INT, dup),
                 PMPI_Alltoall(sbuf, N, MPI_DATATYPE_NULL, rbuf, N, MPI_INT, dup));
  SAME_AS_NATIVE("reduce_scatter_block count -1",
                 MPI_Reduce_scatter_block(sbuf, rbuf, -1, MPI_INT, MPI_SUM, dup),
                 PMPI_Reduce_scatter_block(sbuf, rbuf, -1, MPI_INT, MPI_SUM, dup));
  SAME_AS_NATIVE("barrier null comm", MPI_Barrier(MPI_COMM_NULL), PMPI_Barrier(MPI_COMM_NULL));

  /* point-to-point: peer rank, tag, count, type, communicator */
  SAME_AS_NATIVE("send dest = size", MPI_Send(sbuf, N, MPI_INT, size, 1, dup), PMPI_Send(sbuf, N, MPI_INT, size, 1, dup));
  SAME_AS_NATIVE("send tag -5", MPI_Send(sbuf, N, MPI_INT, peer, -5, dup), PMPI_Send(sbuf, N, MPI_INT, peer, -5, dup));
  SAME_AS_NATIVE("send count -1", MPI_Send(sbuf, -1, MPI_INT, peer, 1, dup), PMPI_Send(sbuf, -1, MPI_INT, peer, 1, dup));
  SAME_AS_NATIVE("send null type", MPI_Send(sbuf, N, MPI_DATATYPE_NULL, peer, 1, dup),
                 PMPI_Send(sbuf, N, MPI_DATATYPE_NULL, peer, 1, dup));
  SAME_AS_NATIVE("recv source = size", MPI_Recv(rbuf, N, MPI_INT, size, 1, dup, MPI_STATUS_IGNORE),
                 PMPI_Recv(rbuf, N, MPI_INT, size, 1, dup, MPI_STATUS_IGNORE));
  SAME_AS_NATIVE("recv null comm", MPI_Recv(rbuf, N, MPI_INT, from, 1, MPI_COMM_NULL, MPI_STATUS_IGNORE),
                 PMPI_Recv(rbuf, N, MPI_INT, from, 1, MPI_COMM_NULL, MPI_STATUS_IGNORE));
  {
    MPI_Request req = MPI_REQUEST_NULL, nreq = MPI_REQUEST_NULL;
    SAME_AS_NATIVE("irecv count -1", MPI_Irecv(rbuf, -1, MPI_INT, from, 1, dup, &req),
                   PMPI_Irecv(rbuf, -1, MPI_INT, from, 1, dup, &nreq));
    CHECK(req == MPI_REQUEST_NULL || req == nreq, "a failed MPI_Irecv left a live request");
    SAME_AS_NATIVE("isend dest -9", MPI_Isend(sbuf, N, MPI_INT, -9, 1, dup, &req),
                   PMPI_Isend(sbuf, N, MPI_INT, -9, 1, dup, &nreq));
  }
  SAME_AS_NATIVE("sendrecv dest = size",
                 MPI_Sendrecv(sbuf, N, MPI_INT, size, 1, rbuf, N, MPI_INT, from, 1, dup, MPI_STATUS_IGNORE),
                 PMPI_Sendrecv(sbuf, N, MPI_INT, size, 1, rbuf, N, MPI_INT, from, 1, dup, MPI_STATUS_IGNORE));

  bad_buffers(dup, size);

  /* The layer still works after all of that. */
  t_context = "valid calls afterwards";
  int one = 1, sum = 0;
  int rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, dup);
  CHECK_RC(rc);
  CHECK(sum == size, "allreduce gave %d, want %d", sum, size);
  int token = t_rank, got = -1;
  rc = MPI_Sendrecv(&token, 1, MPI_INT, peer, 7, &got, 1, MPI_INT, from, 7, dup, MPI_STATUS_IGNORE);
  CHECK_RC(rc);
  CHECK(got == from, "sendrecv gave %d, want %d", got, from);
  expect_offloaded("MPI_Allreduce");

  MPI_Comm_free(&dup);
  return finish("test_bad_input");
}
