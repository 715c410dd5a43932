/* SPDX-License-Identifier: Apache-2.0
 *
 * Many outstanding non-blocking point-to-point requests at once: every rank
 * exchanges `depth` messages with every other rank in both directions, all
 * Irecv and Isend outstanding before the first wait. MPI allows any number;
 * the device has a fixed number of call slots (64) and rendezvous sends hold
 * theirs until the receiver grants, so the layer must not let its own device
 * calls fill the slots with work that waits for calls queued behind it.
 *
 * Rounds: sizes below/above the inline envelope, eager and rendezvous
 * payloads; receives posted before the sends and after them (unexpected
 * messages); receives posted in reverse tag order, so the receiver asks for
 * the newest message of each peer first (non-FIFO matching).
 *
 *   test_p2p_flood [depth]     default 256 messages per peer and direction
 *   test_p2p_flood away MS     rank 0 starts 64 eager-size Isends to rank 1
 *                              (more than the layer issues to the device at
 *                              once), then stays away from MPI for MS ms (run
 *                              with a device timeout well below MS): rank 1's
 *                              receives must wait, not fail
 */
#include "common.h"

#include <stdint.h>
#include <unistd.h>

static int rank, size;
static char ctx[200];

static unsigned char pattern(int src, int dst, int msg, size_t i) {
  return (unsigned char)(src * 131 + dst * 31 + msg * 7 + (int)(i * 13));
}

/* One round: `depth` messages of `bytes` to and from every peer. */
static void flood(size_t bytes, int depth, int recv_first, int reverse_tags) {
  snprintf(ctx, sizeof ctx, "flood bytes=%zu depth=%d recv_first=%d reverse=%d", bytes, depth, recv_first,
           reverse_tags);
  t_context = ctx;
  const int peers = size - 1;
  const int n = peers * depth;
  unsigned char* out = malloc(bytes * (size_t)n + 1);
  unsigned char* in = malloc(bytes * (size_t)n + 1);
  MPI_Request* reqs = malloc(sizeof(MPI_Request) * (size_t)(2 * n));
  MPI_Status* sts = malloc(sizeof(MPI_Status) * (size_t)(2 * n));
  memset(in, 0xEE, bytes * (size_t)n);
  for (int p = 0, k = 0; p < size; ++p) {
    if (p == rank) continue;
    for (int m = 0; m < depth; ++m, ++k)
      for (size_t i = 0; i < bytes; ++i) out[(size_t)k * bytes + i] = pattern(rank, p, m, i);
  }
  /* Slot k <-> (peer index k / depth, message k % depth); message m carries tag m. */
  int posted = 0;
  for (int phase = 0; phase < 2; ++phase) {
    const int do_recv = (phase == 0) == (recv_first != 0);
    for (int p = 0, pi = 0; p < size; ++p) {
      if (p == rank) continue;
      for (int j = 0; j < depth; ++j) {
        const int m = do_recv && reverse_tags ? depth - 1 - j : j;
        const int k = pi * depth + m;
        int rc;
        if (do_recv) rc = MPI_Irecv(in + (size_t)k * bytes, (int)bytes, MPI_BYTE, p, m, MPI_COMM_WORLD, &reqs[k]);
        else rc = MPI_Isend(out + (size_t)k * bytes, (int)bytes, MPI_BYTE, p, m, MPI_COMM_WORLD, &reqs[n + k]);
        CHECK_RC(rc);
        ++posted;
      }
      ++pi;
    }
  }
  CHECK(posted == 2 * n, "posted %d requests, want %d", posted, 2 * n);
  const int rc = MPI_Waitall(2 * n, reqs, sts);
  CHECK_RC(rc);
  int bad = 0, bad_status = 0;
  for (int p = 0, pi = 0; p < size; ++p) {
    if (p == rank) continue;
    for (int m = 0; m < depth; ++m) {
      const int k = pi * depth + m;
      int count = -1;
      MPI_Get_count(&sts[k], MPI_BYTE, &count);
      bad_status += sts[k].MPI_SOURCE != p || sts[k].MPI_TAG != m || count != (int)bytes;
      for (size_t i = 0; i < bytes; ++i) bad += in[(size_t)k * bytes + i] != pattern(p, rank, m, i);
    }
    ++pi;
  }
  CHECK(bad == 0, "%d wrong bytes", bad);
  CHECK(bad_status == 0, "%d wrong statuses", bad_status);
  free(out), free(in), free(reqs), free(sts);
}

/* Envelopes and payloads beyond the layer's device budget stay queued on
 * the sender's host until it is back in MPI. Message 0 fits in its envelope
 * (one device send), the others need a payload (two), so the budget ends
 * between an envelope and its payload: the receiver matches that envelope
 * and its payload receive waits for the absent sender. */
static void sender_away(int away_ms) {
  t_context = "sender away";
  enum { kMsgs = 64, kBytes = 8192 };
  unsigned char* data = malloc((size_t)kMsgs * kBytes);
  MPI_Request reqs[kMsgs];
  int n = 0;
  if (rank == 0) {
    for (int m = 0; m < kMsgs; ++m) {
      for (size_t i = 0; i < kBytes; ++i) data[(size_t)m * kBytes + i] = pattern(0, 1, m, i);
      const int rc = MPI_Isend(data + (size_t)m * kBytes, m == 0 ? 8 : kBytes, MPI_BYTE, 1, m, MPI_COMM_WORLD, &reqs[n++]);
      CHECK_RC(rc);
    }
    usleep((useconds_t)away_ms * 1000); /* computing, not in MPI */
  } else if (rank == 1) {
    for (int m = 0; m < kMsgs; ++m) {
      const int rc = MPI_Irecv(data + (size_t)m * kBytes, m == 0 ? 8 : kBytes, MPI_BYTE, 0, m, MPI_COMM_WORLD, &reqs[n++]);
      CHECK_RC(rc);
    }
  }
  const int rc = MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
  CHECK_RC(rc);
  if (rank == 1) {
    int bad = 0;
    for (int m = 0; m < kMsgs; ++m)
      for (size_t i = 0; i < (m == 0 ? 8u : (size_t)kBytes); ++i)
        bad += data[(size_t)m * kBytes + i] != pattern(0, 1, m, i);
    CHECK(bad == 0, "%d wrong bytes", bad);
  }
  free(data);
}

int main(int argc, char** argv) {
  init_world(&argc, &argv, &rank, &size);
  if (argc > 2 && mode_is(argc, argv, "away")) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    sender_away(atoi(argv[2]));
    return finish("test_p2p_flood away");
  }
  const int depth = argc > 1 ? atoi(argv[1]) : 256;
  /* Default settings: up to 4064 bytes travel inside the envelope, 4065
   * needs a payload (4064 words + 1 inline byte), 20000 and 65536 are eager
   * payloads (the eager size is 64 KiB), 65540 is the smallest rendezvous
   * one and 100000 a larger one. With a smaller eager size
   * (ACCL_MAX_EAGER_SIZE=1024: inline up to 992 bytes) the same sizes hit
   * the other side of each boundary. */
  const size_t sizes[] = {8, 300, 993, 4064, 4065, 20000, 65536, 65540, 100000};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
    flood(sizes[s], depth, 1, 0);
    flood(sizes[s], depth, 0, 0);
    flood(sizes[s], depth, 1, 1);
  }
  expect_offloaded("MPI_Isend");
  expect_offloaded("MPI_Irecv");
  return finish("test_p2p_flood");
}
