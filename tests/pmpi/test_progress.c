/* SPDX-License-Identifier: Apache-2.0
 *
 * MPI's progress rule under the layer: offloaded point-to-point traffic
 * completes while one side sits in a call that runs natively.
 *
 * In every scenario one rank posts offloaded work and then enters a native
 * call (or MPI_Finalize) that its peer only joins after that work completed
 * on the peer's side: without progress while the first rank is in native
 * MPI, the pair waits for each other for ever (the runner's timeout ends the
 * test). Scenarios (argv[1], default all):
 *   userop   many blocking MPI_Sends to a slow receiver, then MPI_Allreduce
 *            with a user-defined op (never offloaded)
 *   dup      the same, then MPI_Comm_dup / MPI_Comm_split / MPI_Comm_free
 *   onesided the same, then MPI_Win_create + MPI_Win_fence (not intercepted)
 *   rndv     MPI_Isends of rendezvous-size messages, then a native reduction;
 *            the receiver takes them one by one with MPI_Recv first
 *   recvside MPI_Irecvs posted, then a native reduction; the peer's MPI_Ssends
 *            and rendezvous sends need this rank's matches and replies
 *   finalize blocking sends to a slow receiver, then MPI_Finalize at once
 * Every received byte is checked; the verdict line says passed or FAILED. */
#include <unistd.h>

#include "common.h"

#define SMALL_MSGS 200
#define BIG_MSGS 24
#define BIG_INTS (80 * 1024) /* 320 KiB: above the default 64 KiB eager size */

static void band_like(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *len; ++i) ((int*)inout)[i] &= ((int*)in)[i];
}

/* A reduction Open MPI runs natively: the layer cannot offload user ops. */
static void native_reduction(MPI_Comm comm) {
  MPI_Op op;
  MPI_Op_create(band_like, 1, &op);
  int in = 0x7fffffff, out = 0;
  CHECK_RC(MPI_Allreduce(&in, &out, 1, MPI_INT, op, comm));
  CHECK(out == 0x7fffffff, "user-op allreduce gave %x", out);
  MPI_Op_free(&op);
}

static void fill(int* v, int n, int seed) {
  for (int i = 0; i < n; ++i) v[i] = seed * 7919 + i;
}

static void check_fill(const int* v, int n, int seed) {
  int bad = 0;
  for (int i = 0; i < n; ++i)
    if (v[i] != seed * 7919 + i) ++bad;
  CHECK(bad == 0, "message %d: %d of %d ints wrong", seed, bad, n);
}

/* Rank 0 sends SMALL_MSGS small messages to the last rank, which takes them
 * slowly; rank 0 goes on to `then` right away. */
static void small_sends_then(MPI_Comm comm, void (*then)(MPI_Comm)) {
  int rank, size;
  rank_size(comm, &rank, &size);
  const int last = size - 1;
  int msg[16];
  for (int i = 0; i < SMALL_MSGS; ++i) {
    if (rank == 0) {
      fill(msg, 16, i);
      CHECK_RC(MPI_Send(msg, 16, MPI_INT, last, 5, comm));
    } else if (rank == last) {
      if (i < 40) usleep(300);
      memset(msg, 0xff, sizeof msg);
      CHECK_RC(MPI_Recv(msg, 16, MPI_INT, 0, 5, comm, MPI_STATUS_IGNORE));
      check_fill(msg, 16, i);
    }
  }
  then(comm);
}

static void comm_management(MPI_Comm comm) {
  MPI_Comm dup, split;
  int rank;
  MPI_Comm_rank(comm, &rank);
  CHECK_RC(MPI_Comm_dup(comm, &dup));
  CHECK_RC(MPI_Comm_split(dup, rank % 2, rank, &split));
  CHECK_RC(MPI_Comm_free(&split));
  CHECK_RC(MPI_Comm_free(&dup));
}

static void one_sided(MPI_Comm comm) {
  int cell = 0;
  MPI_Win win;
  CHECK_RC(MPI_Win_create(&cell, sizeof cell, sizeof cell, MPI_INFO_NULL, comm, &win));
  CHECK_RC(MPI_Win_fence(0, win));
  CHECK_RC(MPI_Win_fence(0, win));
  CHECK_RC(MPI_Win_free(&win));
}

/* Rank 0: MPI_Isend of BIG_MSGS rendezvous-size messages, then a native
 * reduction, then MPI_Waitall. The last rank receives them first. */
static void rendezvous_then_native(MPI_Comm comm) {
  int rank, size;
  rank_size(comm, &rank, &size);
  const int last = size - 1;
  int* data = malloc(sizeof(int) * BIG_INTS * BIG_MSGS);
  if (rank == 0) {
    MPI_Request reqs[BIG_MSGS];
    for (int i = 0; i < BIG_MSGS; ++i) {
      fill(data + (size_t)i * BIG_INTS, BIG_INTS, i);
      CHECK_RC(MPI_Isend(data + (size_t)i * BIG_INTS, BIG_INTS, MPI_INT, last, i, comm, &reqs[i]));
    }
    native_reduction(comm);
    CHECK_RC(MPI_Waitall(BIG_MSGS, reqs, MPI_STATUSES_IGNORE));
  } else if (rank == last) {
    for (int i = 0; i < BIG_MSGS; ++i) {
      memset(data, 0, sizeof(int) * BIG_INTS);
      CHECK_RC(MPI_Recv(data, BIG_INTS, MPI_INT, 0, i, comm, MPI_STATUS_IGNORE));
      check_fill(data, BIG_INTS, i);
    }
    native_reduction(comm);
  } else {
    native_reduction(comm);
  }
  free(data);
}

/* The last rank posts receives and enters a native reduction; rank 0 sends
 * synchronous and rendezvous messages that need the last rank's replies. */
static void receiver_in_native(MPI_Comm comm) {
  int rank, size;
  rank_size(comm, &rank, &size);
  const int last = size - 1;
  enum { kSync = 32, kBig = 12 };
  int* big = malloc(sizeof(int) * BIG_INTS * kBig);
  int small[kSync][8];
  if (rank == last) {
    MPI_Request reqs[kSync + kBig];
    for (int i = 0; i < kSync; ++i) CHECK_RC(MPI_Irecv(small[i], 8, MPI_INT, 0, 100 + i, comm, &reqs[i]));
    for (int i = 0; i < kBig; ++i)
      CHECK_RC(MPI_Irecv(big + (size_t)i * BIG_INTS, BIG_INTS, MPI_INT, 0, 200 + i, comm, &reqs[kSync + i]));
    native_reduction(comm);
    CHECK_RC(MPI_Waitall(kSync + kBig, reqs, MPI_STATUSES_IGNORE));
    for (int i = 0; i < kSync; ++i) check_fill(small[i], 8, i);
    for (int i = 0; i < kBig; ++i) check_fill(big + (size_t)i * BIG_INTS, BIG_INTS, 1000 + i);
  } else if (rank == 0) {
    usleep(20000); /* the receiver is inside the reduction by now */
    for (int i = 0; i < kSync; ++i) {
      fill(small[i], 8, i);
      CHECK_RC(MPI_Ssend(small[i], 8, MPI_INT, last, 100 + i, comm));
    }
    for (int i = 0; i < kBig; ++i) {
      fill(big + (size_t)i * BIG_INTS, BIG_INTS, 1000 + i);
      CHECK_RC(MPI_Send(big + (size_t)i * BIG_INTS, BIG_INTS, MPI_INT, last, 200 + i, comm));
    }
    native_reduction(comm);
  } else {
    native_reduction(comm);
  }
  free(big);
}

static void nothing(MPI_Comm comm) { (void)comm; }

static int wants(int argc, char** argv, const char* name) {
  return argc < 2 || strcmp(argv[1], "all") == 0 || strcmp(argv[1], name) == 0;
}

int main(int argc, char** argv) {
  int size;
  init_world(&argc, &argv, &t_rank, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  /* Modes that leave small sends in flight and then make a native call. */
  static const struct {
    const char* mode;
    void (*native_call)(MPI_Comm);
  } after_small_sends[] = {{"userop", native_reduction}, {"dup", comm_management}, {"onesided", one_sided}};
  for (size_t m = 0; m < sizeof after_small_sends / sizeof after_small_sends[0]; ++m) {
    if (!wants(argc, argv, after_small_sends[m].mode)) continue;
    t_context = after_small_sends[m].mode;
    small_sends_then(MPI_COMM_WORLD, after_small_sends[m].native_call);
  }
  if (wants(argc, argv, "rndv")) {
    t_context = "rndv";
    rendezvous_then_native(MPI_COMM_WORLD);
  }
  if (wants(argc, argv, "recvside")) {
    t_context = "recvside";
    receiver_in_native(MPI_COMM_WORLD);
  }
  if (mode_is(argc, argv, "finalize")) {
    /* The verdict travels before the sends: after them rank 0 goes straight into MPI_Finalize. */
    t_context = "finalize";
    int total = 0;
    PMPI_Allreduce(&t_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    small_sends_then(MPI_COMM_WORLD, nothing);
    if (t_rank == size - 1)
      printf("test_progress finalize: %s (%d failures)\n", t_failures + total ? "FAILED" : "passed", t_failures + total);
    MPI_Finalize();
    return t_failures + total ? 1 : 0;
  }
  return finish("test_progress");
}
