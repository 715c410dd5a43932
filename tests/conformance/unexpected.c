/* SPDX-License-Identifier: Apache-2.0
 *
 * Thousands of unexpected messages: a receiver that takes them late and in
 * another order than they came, as BLACS and ScaLAPACK do.
 *
 *   unexpected [per_sender=N] [truncation_guard=1] [mpi_error=0]
 *
 * Phases, each with another receiver (rank phase % size):
 *  (1) every other rank MPI_Isends per_sender messages of tag 1 (sizes from
 *      100 B to 60 KiB, inline, eager and a few of rendezvous size), then
 *      one blocking MPI_Send of tag 2. The receiver first takes the tag-2
 *      messages (MPI_ANY_SOURCE), then each sender's tag-1 messages in send
 *      order, through MPI_Recv, MPI_Irecv + MPI_Wait, MPI_Probe + MPI_Recv
 *      and MPI_Mprobe + MPI_Mrecv in turn, some into a vector type;
 *  (2) MPI_Issend of tag 3 that nobody has matched yet must not complete
 *      (checked after a barrier), then a message of tag 4 overtakes it;
 *  (3) a message taken late into a receive buffer that is too small:
 *      MPI_ERR_TRUNCATE, and nothing written past the buffer.
 * Every byte and status field is checked. */
#include "conformance.h"

CF_DEFINE_GLOBALS

static const int kSizes[] = {8192, 100, 16387, 61440, 5000, 32768, 4096, 24000};
#define NSIZES ((int)(sizeof kSizes / sizeof kSizes[0]))
#define RNDV_BYTES (200 * 1024) /* one in 97 messages: above every eager size */

static int size_of(int i) { return i % 97 == 96 ? RNDV_BYTES : kSizes[i % NSIZES]; }

static uint64_t salt_of(int phase, int src, int i) {
  return ((uint64_t)phase << 48) ^ ((uint64_t)(unsigned)src << 32) ^ (uint64_t)(unsigned)i;
}

/* One tag-1 message of the flood, received late through path i % 4. */
static void take_late(MPI_Comm comm, int src, int i, unsigned char* buf, MPI_Datatype pair) {
  int bytes = size_of(i);
  uint64_t salt = salt_of(1, src, i);
  MPI_Status st;
  cf_status_prefill(&st, 1);
  memset(buf, CF_GUARD, (size_t)bytes + 64);
  int path = i % 4;
  if (path == 0) {
    CF_RC(MPI_Recv(buf, bytes + 64, MPI_BYTE, src, 1, comm, &st));
    cf_check_status(&st, src, 1, MPI_BYTE, bytes, "MPI_Recv");
  } else if (path == 1) {
    MPI_Request rq;
    CF_RC(MPI_Irecv(buf, bytes, MPI_BYTE, src, 1, comm, &rq));
    CF_RC(MPI_Wait(&rq, &st));
    cf_check_status(&st, src, 1, MPI_BYTE, bytes, "MPI_Wait");
  } else if (path == 2) {
    CF_RC(MPI_Probe(src, 1, comm, &st));
    cf_check_status(&st, src, 1, MPI_BYTE, bytes, "MPI_Probe");
    cf_status_prefill(&st, 1);
    CF_RC(MPI_Recv(buf, bytes, MPI_BYTE, src, 1, comm, &st));
    cf_check_status(&st, src, 1, MPI_BYTE, bytes, "MPI_Recv after MPI_Probe");
  } else {
    MPI_Message msg;
    CF_RC(MPI_Mprobe(src, 1, comm, &msg, &st));
    cf_check_status(&st, src, 1, MPI_BYTE, bytes, "MPI_Mprobe");
    cf_status_prefill(&st, 1);
    if (bytes % 2 == 0 && i % 8 == 3) {
      /* every other byte of a buffer twice the size: a non-contiguous receive */
      unsigned char* wide = cf_malloc((size_t)bytes * 2);
      memset(wide, CF_GUARD, (size_t)bytes * 2);
      CF_RC(MPI_Mrecv(wide, bytes, pair, &msg, &st));
      cf_check_status(&st, src, 1, MPI_BYTE, bytes, "MPI_Mrecv (vector)");
      for (int k = 0; k < bytes; k++) buf[k] = wide[2 * k];
      size_t gaps = 0;
      for (int k = 0; k < bytes; k++) gaps += wide[2 * k + 1] != CF_GUARD;
      CF_CHECK(gaps == 0, "MPI_Mrecv (vector): %zu gap bytes written", gaps);
      free(wide);
    } else {
      CF_RC(MPI_Mrecv(buf, bytes, MPI_BYTE, &msg, &st));
      cf_check_status(&st, src, 1, MPI_BYTE, bytes, "MPI_Mrecv");
    }
  }
  cf_verify(buf, (size_t)bytes, salt, "late message");
  if (path == 0) cf_verify_guard(buf + bytes, 64, "past the late message");
}

static void flood(MPI_Comm comm, int rank, int size, int receiver, int per_sender, MPI_Datatype pair) {
  cf_where("phase 1: %d unexpected messages per sender to rank %d", per_sender, receiver);
  if (rank != receiver) {
    unsigned char** bufs = cf_malloc(sizeof(unsigned char*) * (size_t)per_sender);
    MPI_Request* rqs = cf_malloc(sizeof(MPI_Request) * (size_t)per_sender);
    for (int i = 0; i < per_sender; i++) {
      bufs[i] = cf_malloc((size_t)size_of(i));
      cf_fill(bufs[i], (size_t)size_of(i), salt_of(1, rank, i));
      CF_RC(MPI_Isend(bufs[i], size_of(i), MPI_BYTE, receiver, 1, comm, &rqs[i]));
    }
    int last[3] = {rank, per_sender, 0x600D};
    CF_RC(MPI_Send(last, 3, MPI_INT, receiver, 2, comm));
    CF_RC(MPI_Waitall(per_sender, rqs, MPI_STATUSES_IGNORE));
    for (int i = 0; i < per_sender; i++) free(bufs[i]);
    free(bufs);
    free(rqs);
    return;
  }
  int seen = 0;
  for (int k = 0; k < size - 1; k++) {
    int last[3] = {-1, -1, -1};
    MPI_Status st;
    cf_status_prefill(&st, 1);
    CF_RC(MPI_Recv(last, 3, MPI_INT, MPI_ANY_SOURCE, 2, comm, &st));
    CF_CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < size && st.MPI_SOURCE != rank && last[0] == st.MPI_SOURCE &&
                 last[1] == per_sender && last[2] == 0x600D,
             "tag-2 message from %d says {%d, %d, 0x%x}", st.MPI_SOURCE, last[0], last[1], last[2]);
    cf_check_status(&st, last[0], 2, MPI_INT, 3, "MPI_Recv of tag 2");
    if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < size) seen |= 1 << st.MPI_SOURCE;
  }
  CF_CHECK(seen == ((1 << size) - 1) - (1 << rank), "tag-2 messages came from the mask 0x%x", seen);
  unsigned char* buf = cf_malloc(RNDV_BYTES + 64);
  for (int src = 0; src < size; src++) {
    if (src == rank) continue;
    for (int i = 0; i < per_sender && cf_failures < 25; i++) {
      cf_where("phase 1: late message %d of %d from rank %d", i, per_sender, src);
      take_late(comm, src, i, buf, pair);
    }
  }
  free(buf);
}

static void sync_overtaken(MPI_Comm comm, int rank, int size, int receiver) {
  cf_where("phase 2: unmatched MPI_Issend to rank %d", receiver);
  enum { kSync = 8 };
  int bytes = 12000;
  unsigned char* buf = cf_malloc((size_t)bytes * kSync);
  MPI_Request rqs[kSync];
  if (rank != receiver) {
    for (int i = 0; i < kSync; i++) {
      cf_fill(buf + (size_t)i * bytes, (size_t)bytes, salt_of(2, rank, i));
      CF_RC(MPI_Issend(buf + (size_t)i * bytes, bytes, MPI_BYTE, receiver, 3, comm, &rqs[i]));
    }
  }
  CF_RC(MPI_Barrier(comm));
  if (rank != receiver) {
    int flag = 1;
    CF_RC(MPI_Testall(kSync, rqs, &flag, MPI_STATUSES_IGNORE));
    CF_CHECK(!flag, "MPI_Issend completed before the receiver matched it");
  }
  CF_RC(MPI_Barrier(comm));
  if (rank != receiver) {
    int ahead = rank;
    CF_RC(MPI_Send(&ahead, 1, MPI_INT, receiver, 4, comm));
    CF_RC(MPI_Waitall(kSync, rqs, MPI_STATUSES_IGNORE));
  } else {
    for (int k = 0; k < size - 1; k++) {
      int ahead = -1;
      MPI_Status st;
      cf_status_prefill(&st, 1);
      CF_RC(MPI_Recv(&ahead, 1, MPI_INT, MPI_ANY_SOURCE, 4, comm, &st));
      cf_check_status(&st, ahead, 4, MPI_INT, 1, "MPI_Recv of tag 4");
    }
    for (int src = 0; src < size; src++) {
      if (src == rank) continue;
      for (int i = 0; i < kSync; i++) {
        MPI_Status st;
        cf_status_prefill(&st, 1);
        memset(buf, CF_GUARD, (size_t)bytes);
        CF_RC(MPI_Recv(buf, bytes, MPI_BYTE, src, 3, comm, &st));
        cf_check_status(&st, src, 3, MPI_BYTE, bytes, "MPI_Recv of an MPI_Issend");
        cf_verify(buf, (size_t)bytes, salt_of(2, src, i), "synchronous message");
      }
    }
  }
  free(buf);
}

/* Open MPI 4.1 itself writes a truncated rendezvous message past the receive
 * buffer, so the check that nothing lands there is asked for by argument
 * (truncation_guard=1: the runs under the layer). */
static int truncation_guard = 0;

static void late_truncation(MPI_Comm comm, int rank, int size, int receiver) {
  cf_where("phase 3: late message into a short buffer at rank %d", receiver);
  int bytes = 20000, room = 6000;
  unsigned char* buf = cf_malloc((size_t)bytes);
  MPI_Request rq = MPI_REQUEST_NULL;
  if (rank != receiver) {
    cf_fill(buf, (size_t)bytes, salt_of(3, rank, 0));
    CF_RC(MPI_Isend(buf, bytes, MPI_BYTE, receiver, 5, comm, &rq));
  }
  CF_RC(MPI_Barrier(comm)); /* every message is unexpected by now */
  if (rank != receiver) {
    CF_RC(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  } else {
    for (int src = 0; src < size; src++) {
      if (src == rank) continue;
      MPI_Status st;
      cf_status_prefill(&st, 1);
      memset(buf, CF_GUARD, (size_t)bytes);
      int rc = MPI_Recv(buf, room, MPI_BYTE, src, 5, comm, &st);
      int cls = -1;
      MPI_Error_class(rc, &cls);
      CF_CHECK(cls == MPI_ERR_TRUNCATE, "a late %d-byte message into %d bytes returned class %d", bytes, room,
               cls);
      if (truncation_guard) cf_verify_guard(buf + room, (size_t)(bytes - room), "past the receive buffer");
    }
  }
  free(buf);
}

int main(int argc, char** argv) {
  const int size = cf_init(&argc, &argv), rank = cf_world_rank;
  int per_sender = (int)cf_int_arg(argc, argv, "per_sender", 2400 / (size > 1 ? size - 1 : 1));
  truncation_guard = (int)cf_int_arg(argc, argv, "truncation_guard", 0);
  if (rank == 0) printf("unexpected: per_sender=%d np=%d\n", per_sender, size);
  MPI_Datatype every_other; /* one byte, then a gap of one */
  MPI_Type_create_resized(MPI_BYTE, 0, 2, &every_other);
  MPI_Type_commit(&every_other);
  MPI_Comm comm;
  CF_RC(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  for (int phase = 0; phase < 2; phase++) flood(comm, rank, size, phase % size, per_sender, every_other);
  sync_overtaken(comm, rank, size, 1 % size);
  late_truncation(comm, rank, size, (size - 1) % size);
  MPI_Type_free(&every_other);
  MPI_Comm_free(&comm);
  return cf_finish_and_finalize();
}
