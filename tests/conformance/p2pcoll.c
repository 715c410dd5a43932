/* SPDX-License-Identifier: Apache-2.0
 *
 * Point-to-point and collective messages of one communicator far out of
 * step, as in the BLACS tester's broadcast section: a root broadcasts
 * without waiting for anyone while the other ranks pass messages among
 * themselves with MPI_ANY_SOURCE receives, and the other way round.
 *
 *   p2pcoll [bcasts=N] [rounds=N] [per_round=N]
 *
 * Phases (each on the same duplicated communicator, in one timeline):
 *  (1) collectives ahead (np >= 3): `bcasts` rounds of MPI_Bcast of one int
 *      from rank 0, after each of which ranks 1..np-1 pass a token around
 *      their ring (MPI_Isend to the next, MPI_Recv from MPI_ANY_SOURCE).
 *      Rank 0 only broadcasts, so it runs up to all rounds ahead: its
 *      messages for later broadcasts arrive before the ring's messages;
 *  (2) point-to-point ahead: `rounds` rounds in which rank 0 MPI_Isends
 *      `per_round` small messages to rank 1 and then broadcasts; rank 1 takes
 *      every message only after the last broadcast, in send order, and
 *      rank 0 waits for its sends at the end.
 * Both are correct MPI whether or not a broadcast synchronises. Every value
 * and every status field is checked. */
#include "conformance.h"

CF_DEFINE_GLOBALS

static int bcast_value(int round) { return 0x5A000000 ^ (round * 7919); }

static void collectives_ahead(MPI_Comm comm, int rank, int size, int bcasts) {
  if (size < 3) return; /* the ring needs two ranks besides the root */
  const int ring = size - 1, pos = rank - 1;
  const int next = 1 + (pos + 1) % ring, prev = 1 + (pos + ring - 1) % ring;
  for (int i = 0; i < bcasts && cf_failures < 25; i++) {
    cf_where("phase 1: round %d of %d", i, bcasts);
    int v = rank == 0 ? bcast_value(i) : -1;
    CF_RC(MPI_Bcast(&v, 1, MPI_INT, 0, comm));
    CF_CHECK(v == bcast_value(i), "broadcast %d gave 0x%x, want 0x%x", i, v, bcast_value(i));
    if (rank == 0) continue;
    int token = rank * 100000 + i, got = -1;
    MPI_Request rq;
    MPI_Status st;
    cf_status_prefill(&st, 1);
    CF_RC(MPI_Isend(&token, 1, MPI_INT, next, 7, comm, &rq));
    CF_RC(MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 7, comm, &st));
    cf_check_status(&st, prev, 7, MPI_INT, 1, "MPI_Recv (MPI_ANY_SOURCE) of the ring token");
    CF_CHECK(got == prev * 100000 + i, "ring token %d, want %d", got, prev * 100000 + i);
    CF_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  }
}

static uint64_t salt_of(int round, int k) { return 0xC0110000ull ^ ((uint64_t)round << 16) ^ (uint64_t)k; }

/* Sizes of the flood: inline in the envelope, and one past it (a payload). */
static int flood_bytes(int k) { return k % 5 == 4 ? 6000 : 24 + k % 40; }

static void p2p_ahead(MPI_Comm comm, int rank, int rounds, int per_round) {
  const int total = rounds * per_round;
  unsigned char* bufs = NULL;
  MPI_Request* rqs = NULL;
  if (rank == 0) {
    bufs = cf_malloc((size_t)total * 6000);
    rqs = cf_malloc(sizeof(MPI_Request) * (size_t)total);
  }
  for (int i = 0; i < rounds && cf_failures < 25; i++) {
    cf_where("phase 2: round %d of %d", i, rounds);
    for (int k = 0; rank == 0 && k < per_round; k++) {
      const int n = i * per_round + k;
      unsigned char* b = bufs + (size_t)n * 6000;
      cf_fill(b, (size_t)flood_bytes(k), salt_of(i, k));
      CF_RC(MPI_Isend(b, flood_bytes(k), MPI_BYTE, 1, 100 + k, comm, &rqs[n]));
    }
    int v = rank == 0 ? bcast_value(i) : -1;
    CF_RC(MPI_Bcast(&v, 1, MPI_INT, 0, comm));
    CF_CHECK(v == bcast_value(i), "broadcast %d gave 0x%x, want 0x%x", i, v, bcast_value(i));
  }
  if (rank == 0) {
    cf_where("phase 2: waiting for %d sends", total);
    CF_RC(MPI_Waitall(total, rqs, MPI_STATUSES_IGNORE));
  } else if (rank == 1) {
    unsigned char buf[6000 + 64];
    for (int i = 0; i < rounds && cf_failures < 25; i++) {
      for (int k = 0; k < per_round; k++) {
        cf_where("phase 2: message %d of round %d", k, i);
        MPI_Status st;
        cf_status_prefill(&st, 1);
        memset(buf, CF_GUARD, sizeof buf);
        /* MPI_ANY_TAG: the messages must come in send order */
        CF_RC(MPI_Recv(buf, (int)sizeof buf, MPI_BYTE, 0, MPI_ANY_TAG, comm, &st));
        cf_check_status(&st, 0, 100 + k, MPI_BYTE, flood_bytes(k), "MPI_Recv of the flood");
        cf_verify(buf, (size_t)flood_bytes(k), salt_of(i, k), "flood message");
        cf_verify_guard(buf + flood_bytes(k), sizeof buf - (size_t)flood_bytes(k), "past the flood message");
      }
    }
  }
  free(bufs);
  free(rqs);
}

int main(int argc, char** argv) {
  const int size = cf_init(&argc, &argv), rank = cf_world_rank;
  /* Enough to fill a device's arrival table (1,024) several times over. */
  const int bcasts = (int)cf_int_arg(argc, argv, "bcasts", 3000);
  const int rounds = (int)cf_int_arg(argc, argv, "rounds", 200);
  const int per_round = (int)cf_int_arg(argc, argv, "per_round", 10);
  if (rank == 0) printf("p2pcoll: bcasts=%d rounds=%d per_round=%d np=%d\n", bcasts, rounds, per_round, size);
  MPI_Comm comm;
  CF_RC(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  collectives_ahead(comm, rank, size, bcasts);
  p2p_ahead(comm, rank, rounds, per_round);
  MPI_Comm_free(&comm);
  return cf_finish_and_finalize();
}
