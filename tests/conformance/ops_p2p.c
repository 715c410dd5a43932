/* SPDX-License-Identifier: Apache-2.0
 *
 * Point-to-point operations of the interleaving stress program. */
#include <unistd.h>

#include "interleave.h"

enum send_mode {
  SM_SEND, SM_SSEND, SM_BSEND, SM_RSEND, SM_ISEND, SM_ISSEND, SM_IBSEND, SM_IRSEND,
  SM_SEND_INIT, SM_SSEND_INIT, SM_BSEND_INIT, SM_RSEND_INIT, SM_COUNT
};
static const char* const send_mode_name[SM_COUNT] = {
  "MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Isend", "MPI_Issend", "MPI_Ibsend", "MPI_Irsend",
  "MPI_Send_init", "MPI_Ssend_init", "MPI_Bsend_init", "MPI_Rsend_init"};

static int is_ready_mode(int m) { return m == SM_RSEND || m == SM_IRSEND || m == SM_RSEND_INIT; }

enum recv_method {
  RM_RECV, RM_IRECV_WAIT, RM_IRECV_TEST, RM_IRECV_WAITANY, RM_IRECV_TESTANY, RM_IRECV_WAITALL,
  RM_IRECV_TESTALL, RM_IRECV_WAITSOME, RM_IRECV_TESTSOME, RM_RECV_INIT,
  /* the rest cannot be posted ahead of a ready-mode send */
  RM_PROBE_RECV, RM_IPROBE_RECV, RM_MPROBE_MRECV, RM_IMPROBE_MRECV, RM_MPROBE_IMRECV, RM_SENDRECV, RM_COUNT
};
#define RM_POSTABLE RM_PROBE_RECV
static const char* const recv_method_name[RM_COUNT] = {
  "MPI_Recv", "MPI_Irecv+MPI_Wait", "MPI_Irecv+MPI_Test", "MPI_Irecv+MPI_Waitany", "MPI_Irecv+MPI_Testany",
  "MPI_Irecv+MPI_Waitall", "MPI_Irecv+MPI_Testall", "MPI_Irecv+MPI_Waitsome", "MPI_Irecv+MPI_Testsome",
  "MPI_Recv_init+MPI_Start", "MPI_Probe+MPI_Recv", "MPI_Iprobe+MPI_Recv", "MPI_Mprobe+MPI_Mrecv",
  "MPI_Improbe+MPI_Mrecv", "MPI_Mprobe+MPI_Imrecv", "MPI_Sendrecv"};

#define GO_TAG 32700 /* "my receive is posted": precedes every ready-mode send */

/* Message sizes in bytes: around the envelope's inline limit (4064), the
 * eager limit (65536) and rendezvous sizes, with odd tails. */
static const int msg_bytes[] = {0, 1, 4, 7, 64, 1000, 4064, 4068, 8192, 65536, 65540, 200004, 1048580};
#define N_MSG_BYTES ((int)(sizeof msg_bytes / sizeof msg_bytes[0]))

static int draw_bytes(cf_rng* g) {
  /* mostly small: half the draws from the first 7 sizes */
  return cf_below(g, 2) ? msg_bytes[cf_below(g, 7)] : msg_bytes[cf_below(g, N_MSG_BYTES)];
}

static MPI_Datatype draw_basic(cf_rng* g, int bytes, int* elem_size) {
  MPI_Datatype t[4] = {MPI_BYTE, MPI_SHORT, MPI_INT, MPI_DOUBLE};
  int s[4] = {1, 2, 4, 8};
  int k = cf_below(g, 4);
  while (bytes % s[k] != 0) k--;
  *elem_size = s[k];
  return t[k];
}

/* --- one receive by one of the paths --- */
typedef struct {
  int method;
  void* buf;
  int count; /* elements the receive offers (>= the message) */
  MPI_Datatype type;
  int source, tag; /* arguments: may be wildcards */
  MPI_Request req;
} recv_op;

static void recv_post(recv_op* r, MPI_Comm comm) {
  r->req = MPI_REQUEST_NULL;
  if (r->method == RM_RECV_INIT) {
    CF_RC(MPI_Recv_init(r->buf, r->count, r->type, r->source, r->tag, comm, &r->req));
    CF_RC(MPI_Start(&r->req));
  } else if (r->method < RM_POSTABLE && r->method != RM_RECV) {
    CF_RC(MPI_Irecv(r->buf, r->count, r->type, r->source, r->tag, comm, &r->req));
  }
}

/* Completes a posted receive (or runs a blocking one); checks the status
 * of the probe if there was one. The final status goes to *st. Returns 1 if
 * the status comes from a multiple-completion call. */
static int recv_complete(recv_op* r, MPI_Comm comm, MPI_Status* st, int want_source, int want_tag,
                         int want_count) {
  MPI_Status probe_st;
  MPI_Message msg = MPI_MESSAGE_NULL;
  int flag = 0, index = -1, outcount = 0, indices[2];
  /* the multiple-completion calls also get a null request, which they skip
     (Wait/Test*) or report with an empty status (Waitall/Testall) */
  MPI_Request pair[2] = {MPI_REQUEST_NULL, r->req};
  MPI_Status sts[2];
  cf_status_prefill(st, 1);
  cf_status_prefill(&probe_st, 1);
  cf_status_prefill(sts, 2);
  switch (r->method) {
    case RM_RECV:
      CF_RC(MPI_Recv(r->buf, r->count, r->type, r->source, r->tag, comm, st));
      return 0;
    case RM_IRECV_WAIT:
    case RM_RECV_INIT:
      CF_RC(MPI_Wait(&r->req, st));
      if (r->method == RM_RECV_INIT) {
        CF_CHECK(r->req != MPI_REQUEST_NULL, "MPI_Wait freed a persistent request");
        CF_RC(MPI_Request_free(&r->req));
      }
      return 0;
    case RM_IRECV_TEST:
      while (!flag) CF_RC(MPI_Test(&r->req, &flag, st));
      return 0;
    case RM_IRECV_WAITANY:
      CF_RC(MPI_Waitany(2, pair, &index, st));
      CF_CHECK(index == 1, "MPI_Waitany index %d, want 1", index);
      return 0;
    case RM_IRECV_TESTANY:
      while (!flag) CF_RC(MPI_Testany(2, pair, &index, &flag, st));
      CF_CHECK(index == 1, "MPI_Testany index %d, want 1", index);
      return 0;
    case RM_IRECV_WAITALL:
    case RM_IRECV_TESTALL:
      if (r->method == RM_IRECV_WAITALL) CF_RC(MPI_Waitall(2, pair, sts));
      else
        while (!flag) CF_RC(MPI_Testall(2, pair, &flag, sts));
      /* a null request's status is empty (MPI 3.1 section 3.7.3) */
      CF_CHECK(sts[0].MPI_SOURCE == MPI_ANY_SOURCE && sts[0].MPI_TAG == MPI_ANY_TAG,
               "%s: empty status of a null request has source %d tag %d", recv_method_name[r->method],
               sts[0].MPI_SOURCE, sts[0].MPI_TAG);
      *st = sts[1];
      return 1;
    case RM_IRECV_WAITSOME:
    case RM_IRECV_TESTSOME:
      while (outcount == 0) {
        if (r->method == RM_IRECV_WAITSOME) CF_RC(MPI_Waitsome(2, pair, &outcount, indices, sts));
        else CF_RC(MPI_Testsome(2, pair, &outcount, indices, sts));
        if (outcount == MPI_UNDEFINED) break; /* checked below */
      }
      CF_CHECK(outcount == 1 && indices[0] == 1, "%s: outcount %d index %d", recv_method_name[r->method],
               outcount, indices[0]);
      *st = sts[0];
      return 1;
    case RM_PROBE_RECV:
    case RM_IPROBE_RECV:
      if (r->method == RM_PROBE_RECV) CF_RC(MPI_Probe(r->source, r->tag, comm, &probe_st));
      else
        while (!flag) CF_RC(MPI_Iprobe(r->source, r->tag, comm, &flag, &probe_st));
      cf_check_status(&probe_st, want_source, want_tag, r->type, want_count, "probe");
      /* receive what was probed, by its exact envelope */
      CF_RC(MPI_Recv(r->buf, r->count, r->type, probe_st.MPI_SOURCE, probe_st.MPI_TAG, comm, st));
      return 0;
    case RM_MPROBE_MRECV:
    case RM_IMPROBE_MRECV:
    case RM_MPROBE_IMRECV:
      if (r->method == RM_IMPROBE_MRECV)
        while (!flag) CF_RC(MPI_Improbe(r->source, r->tag, comm, &flag, &msg, &probe_st));
      else CF_RC(MPI_Mprobe(r->source, r->tag, comm, &msg, &probe_st));
      cf_check_status(&probe_st, want_source, want_tag, r->type, want_count, "matched probe");
      if (r->method == RM_MPROBE_IMRECV) {
        MPI_Request q;
        CF_RC(MPI_Imrecv(r->buf, r->count, r->type, &msg, &q));
        CF_RC(MPI_Wait(&q, st));
      } else {
        CF_RC(MPI_Mrecv(r->buf, r->count, r->type, &msg, st));
      }
      CF_CHECK(msg == MPI_MESSAGE_NULL, "matched receive left the message handle set");
      return 0;
    default:
      CF_CHECK(0, "bad receive method %d", r->method);
      return 0;
  }
}

/* --- one send by one of the modes --- */
static void send_start(int mode, const void* buf, int count, MPI_Datatype type, int dest, int tag,
                       MPI_Comm comm, MPI_Request* req) {
  *req = MPI_REQUEST_NULL;
  switch (mode) {
    case SM_SEND: CF_RC(MPI_Send(buf, count, type, dest, tag, comm)); break;
    case SM_SSEND: CF_RC(MPI_Ssend(buf, count, type, dest, tag, comm)); break;
    case SM_BSEND: CF_RC(MPI_Bsend(buf, count, type, dest, tag, comm)); break;
    case SM_RSEND: CF_RC(MPI_Rsend(buf, count, type, dest, tag, comm)); break;
    case SM_ISEND: CF_RC(MPI_Isend(buf, count, type, dest, tag, comm, req)); break;
    case SM_ISSEND: CF_RC(MPI_Issend(buf, count, type, dest, tag, comm, req)); break;
    case SM_IBSEND: CF_RC(MPI_Ibsend(buf, count, type, dest, tag, comm, req)); break;
    case SM_IRSEND: CF_RC(MPI_Irsend(buf, count, type, dest, tag, comm, req)); break;
    case SM_SEND_INIT: CF_RC(MPI_Send_init(buf, count, type, dest, tag, comm, req)); break;
    case SM_SSEND_INIT: CF_RC(MPI_Ssend_init(buf, count, type, dest, tag, comm, req)); break;
    case SM_BSEND_INIT: CF_RC(MPI_Bsend_init(buf, count, type, dest, tag, comm, req)); break;
    case SM_RSEND_INIT: CF_RC(MPI_Rsend_init(buf, count, type, dest, tag, comm, req)); break;
    default: CF_CHECK(0, "bad send mode %d", mode);
  }
  if (mode >= SM_SEND_INIT) CF_RC(MPI_Start(req));
}

static void send_finish(int mode, MPI_Request* req) {
  if (*req == MPI_REQUEST_NULL) return;
  MPI_Status st;
  cf_status_prefill(&st, 1);
  CF_RC(MPI_Wait(req, &st));
  CF_CHECK(!cf_check_mpi_error || st.MPI_ERROR == CF_ERR_SENTINEL, "MPI_Wait on %s wrote status.MPI_ERROR (%d)",
           send_mode_name[mode], st.MPI_ERROR);
  if (mode >= SM_SEND_INIT) CF_RC(MPI_Request_free(req));
}

/* x sends one message to y; every other rank does nothing. */
static void one_message(cf_ctx* c, int x, int y, int mode, int method, int bytes, int extra, int wild) {
  int esize;
  MPI_Datatype type = draw_basic(&c->g, bytes, &esize);
  int count = bytes / esize, tag = cf_below(&c->g, 30000);
  uint64_t salt = cf_salt(c->step, x, y, tag);
  if (c->rank == y) {
    size_t room = (size_t)(count + extra) * esize;
    recv_op r = {method, cf_malloc(room), count + extra, type, (wild & 1) ? MPI_ANY_SOURCE : x,
                 (wild & 2) ? MPI_ANY_TAG : tag, MPI_REQUEST_NULL};
    MPI_Status st;
    memset(r.buf, CF_GUARD, room);
    cf_where("step %d: %s <- %s, %d B, wild %d", c->step, recv_method_name[method], send_mode_name[mode], bytes,
             wild);
    recv_post(&r, c->comm);
    if (is_ready_mode(mode)) CF_RC(MPI_Send(NULL, 0, MPI_BYTE, x, GO_TAG, c->comm));
    if (method == RM_SENDRECV) {
      /* the partner's message comes with a zero-byte one back */
      cf_status_prefill(&st, 1);
      CF_RC(MPI_Sendrecv(NULL, 0, MPI_BYTE, x, tag, r.buf, r.count, r.type, r.source, r.tag, c->comm, &st));
      cf_check_status(&st, x, tag, type, count, recv_method_name[method]);
    } else {
      int multi = recv_complete(&r, c->comm, &st, x, tag, count);
      if (multi) cf_check_status_multi(&st, x, tag, type, count, recv_method_name[method]);
      else cf_check_status(&st, x, tag, type, count, recv_method_name[method]);
    }
    cf_verify(r.buf, (size_t)bytes, salt, "received message");
    cf_verify_guard((char*)r.buf + bytes, room - bytes, "receive buffer beyond the message");
    free(r.buf);
  } else if (c->rank == x) {
    void* buf = cf_malloc((size_t)bytes);
    MPI_Request req;
    cf_fill(buf, (size_t)bytes, salt);
    cf_where("step %d: %s -> %s, %d B", c->step, send_mode_name[mode], recv_method_name[method], bytes);
    if (is_ready_mode(mode)) {
      MPI_Status st;
      cf_status_prefill(&st, 1);
      CF_RC(MPI_Recv(NULL, 0, MPI_BYTE, y, GO_TAG, c->comm, &st));
      cf_check_status(&st, y, GO_TAG, MPI_BYTE, 0, "MPI_Recv of the go message");
    }
    send_start(mode, buf, count, type, y, tag, c->comm, &req);
    if (method == RM_SENDRECV) CF_RC(MPI_Recv(NULL, 0, MPI_BYTE, y, tag, c->comm, MPI_STATUS_IGNORE));
    send_finish(mode, &req);
    free(buf);
  }
}

void op_pairs(cf_ctx* c) {
  int n = c->size, perm[64], fence = 0;
  for (int i = 0; i < n; i++) perm[i] = i;
  for (int i = n - 1; i > 0; i--) { /* Fisher-Yates with the step generator */
    int j = cf_below(&c->g, i + 1), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  int mode = cf_below(&c->g, SM_COUNT), method = cf_below(&c->g, RM_COUNT);
  if (is_ready_mode(mode)) method = cf_below(&c->g, RM_POSTABLE);
  int bytes = draw_bytes(&c->g), extra = cf_below(&c->g, 3) == 0 ? 1 + cf_below(&c->g, 9) : 0;
  int wild = cf_below(&c->g, 4);
  if (mode == SM_BSEND || mode == SM_IBSEND || mode == SM_BSEND_INIT) bytes = bytes > 200004 ? 200004 : bytes;
  fence = wild != 0;
  for (int p = 0; p + 1 < n; p += 2) {
    int a = perm[p], b = perm[p + 1];
    one_message(c, a, b, mode, method, bytes, extra, wild);
    one_message(c, b, a, mode, method, bytes, extra, wild);
  }
  int esize;
  MPI_Datatype self_type = draw_basic(&c->g, bytes, &esize);
  if (n % 2 == 1 && c->rank == perm[n - 1]) { /* the odd one out talks to itself */
    MPI_Datatype type = self_type;
    char* out = cf_malloc((size_t)bytes);
    char* in = cf_malloc((size_t)bytes + 16);
    MPI_Status st;
    uint64_t salt = cf_salt(c->step, c->rank, c->rank, 1);
    cf_fill(out, (size_t)bytes, salt);
    memset(in, CF_GUARD, (size_t)bytes + 16);
    cf_status_prefill(&st, 1);
    cf_where("step %d: MPI_Sendrecv to self, %d B", c->step, bytes);
    CF_RC(MPI_Sendrecv(out, bytes / esize, type, c->rank, 5, in, bytes / esize + 16 / esize, type,
                       (wild & 1) ? MPI_ANY_SOURCE : c->rank, (wild & 2) ? MPI_ANY_TAG : 5, c->comm, &st));
    cf_check_status(&st, c->rank, 5, type, bytes / esize, "MPI_Sendrecv to self");
    cf_verify(in, (size_t)bytes, salt, "message to self");
    cf_verify_guard(in + bytes, 16, "receive buffer beyond the message to self");
    free(out);
    free(in);
  }
  /* a wildcard receive of this step must not see the next step's messages */
  if (fence) CF_RC(MPI_Barrier(c->comm));
}

void op_fan_in(cf_ctx* c) {
  int root = cf_below(&c->g, c->size), how = cf_below(&c->g, 4), send_how = cf_below(&c->g, 3);
  int base_tag = cf_below(&c->g, 1000) * 3;
  int size_pick = cf_below(&c->g, 1000);
  if (c->size < 2) return;
  cf_where("step %d: fan-in to %d, probe kind %d", c->step, root, how);
  if (c->rank != root) {
    int bytes = msg_bytes[(size_pick + c->rank) % N_MSG_BYTES] + c->rank;
    char* buf = cf_malloc((size_t)bytes);
    int tag = base_tag + c->rank % 3;
    MPI_Request req;
    cf_fill(buf, (size_t)bytes, cf_salt(c->step, c->rank, root, tag));
    if (send_how == 0) CF_RC(MPI_Send(buf, bytes, MPI_BYTE, root, tag, c->comm));
    else if (send_how == 1) CF_RC(MPI_Ssend(buf, bytes, MPI_BYTE, root, tag, c->comm));
    else {
      CF_RC(MPI_Isend(buf, bytes, MPI_BYTE, root, tag, c->comm, &req));
      CF_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
    }
    free(buf);
  } else {
    char seen[64] = {0};
    for (int k = 0; k < c->size - 1; k++) {
      MPI_Status st, rst;
      MPI_Message msg = MPI_MESSAGE_NULL;
      int flag = 0, bytes = -1;
      cf_status_prefill(&st, 1);
      cf_status_prefill(&rst, 1);
      if (how == 0) CF_RC(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, &st));
      else if (how == 1)
        while (!flag) CF_RC(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, &flag, &st));
      else if (how == 2) CF_RC(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, &msg, &st));
      else
        while (!flag) CF_RC(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, &flag, &msg, &st));
      int src = st.MPI_SOURCE;
      CF_CHECK(src >= 0 && src < c->size && src != root, "probe: source %d", src);
      if (src < 0 || src >= c->size || src == root) break;
      CF_CHECK(!seen[src], "probe: source %d seen twice", src);
      seen[src] = 1;
      int want_bytes = msg_bytes[(size_pick + src) % N_MSG_BYTES] + src, want_tag = base_tag + src % 3;
      cf_check_status(&st, src, want_tag, MPI_BYTE, want_bytes, "probe with MPI_ANY_SOURCE/MPI_ANY_TAG");
      MPI_Get_count(&st, MPI_BYTE, &bytes);
      if (bytes < 0) bytes = want_bytes;
      char* buf = cf_malloc((size_t)bytes);
      if (how >= 2) CF_RC(MPI_Mrecv(buf, bytes, MPI_BYTE, &msg, &rst));
      else CF_RC(MPI_Recv(buf, bytes, MPI_BYTE, src, st.MPI_TAG, c->comm, &rst));
      cf_check_status(&rst, src, want_tag, MPI_BYTE, want_bytes, how >= 2 ? "MPI_Mrecv" : "MPI_Recv");
      cf_verify(buf, (size_t)bytes, cf_salt(c->step, src, root, want_tag), "fan-in message");
      free(buf);
    }
  }
  CF_RC(MPI_Barrier(c->comm));
}

void op_burst_then_native(cf_ctx* c) {
  int sender = cf_below(&c->g, c->size), receiver = cf_below(&c->g, c->size);
  int n = 16 + cf_below(&c->g, 180), large_every = cf_below(&c->g, 3) == 0 ? 4 + cf_below(&c->g, 6) : 0;
  int delay_us = 50 + cf_below(&c->g, 250), tag = cf_below(&c->g, 100);
  if (sender == receiver) receiver = (receiver + 1) % c->size;
  if (c->size < 2) {
    op_native(c);
    return;
  }
  if (large_every) n = n / 4 + 4; /* keep the bytes (and the receiver's time) bounded */
  cf_where("step %d: burst of %d sends %d -> %d (large every %d), then a native call", c->step, n, sender,
           receiver, large_every);
  if (c->rank == sender) {
    for (int i = 0; i < n; i++) {
      int bytes = (large_every && i % large_every == 0) ? 100000 : 4 + (i % 13) * 4;
      char* buf = cf_malloc((size_t)bytes);
      cf_fill(buf, (size_t)bytes, cf_salt(c->step, sender, i, tag));
      CF_RC(MPI_Send(buf, bytes, MPI_BYTE, receiver, tag, c->comm));
      free(buf);
    }
  } else if (c->rank == receiver) {
    for (int i = 0; i < n; i++) {
      int bytes = (large_every && i % large_every == 0) ? 100000 : 4 + (i % 13) * 4;
      char* buf = cf_malloc((size_t)bytes);
      MPI_Status st;
      usleep((useconds_t)delay_us);
      cf_status_prefill(&st, 1);
      CF_RC(MPI_Recv(buf, bytes, MPI_BYTE, sender, tag, c->comm, &st));
      cf_check_status(&st, sender, tag, MPI_BYTE, bytes, "MPI_Recv in a burst");
      cf_verify(buf, (size_t)bytes, cf_salt(c->step, sender, i, tag), "burst message");
      free(buf);
    }
  }
  op_native(c);
}

void op_pending_across_collective(cf_ctx* c) {
  int count = 1 + cf_below(&c->g, 3) * 5000, use_native = cf_below(&c->g, 2);
  int left = (c->rank + c->size - 1) % c->size, right = (c->rank + 1) % c->size, tag = 77;
  int* in = cf_malloc((size_t)count * sizeof(int));
  int* out = cf_malloc((size_t)count * sizeof(int));
  MPI_Request reqs[2];
  MPI_Status sts[2];
  cf_where("step %d: receive pending across a %s collective, %d ints", c->step, use_native ? "native" : "offloadable",
           count);
  memset(in, CF_GUARD, (size_t)count * sizeof(int));
  cf_fill(out, (size_t)count * sizeof(int), cf_salt(c->step, c->rank, right, tag));
  CF_RC(MPI_Irecv(in, count, MPI_INT, left, tag, c->comm, &reqs[0]));
  if (use_native) op_native(c);
  else op_collective(c);
  cf_where("step %d: completing the receive pending across a collective", c->step);
  CF_RC(MPI_Isend(out, count, MPI_INT, right, tag, c->comm, &reqs[1]));
  cf_status_prefill(sts, 2);
  CF_RC(MPI_Waitall(2, reqs, sts));
  cf_check_status_multi(&sts[0], left, tag, MPI_INT, count, "MPI_Waitall (receive)");
  CF_CHECK(!cf_check_mpi_error || sts[1].MPI_ERROR == CF_ERR_SENTINEL || sts[1].MPI_ERROR == MPI_SUCCESS,
           "MPI_Waitall (send): MPI_ERROR %d after success", sts[1].MPI_ERROR);
  cf_verify(in, (size_t)count * sizeof(int), cf_salt(c->step, left, c->rank, tag), "message pending across");
  free(in);
  free(out);
}

int final_burst_to_slow_receiver(int rank, int size, uint64_t seed) {
  const int n = 120, tag = 11;
  int failures_before = cf_failures;
  if (size < 2) return 0;
  cf_where("final burst to a slow receiver, then MPI_Finalize");
  for (int i = 0; i < n; i++) {
    /* mostly small; every 20th beyond the eager size */
    int bytes = i % 20 == 19 ? 70000 : 8 + i;
    uint64_t salt = cf_salt((int)seed, 0, size - 1, 100000 + i);
    char* buf = cf_malloc((size_t)bytes);
    if (rank == 0) {
      cf_fill(buf, (size_t)bytes, salt);
      if (i % 3 == 1) CF_RC(MPI_Bsend(buf, bytes, MPI_BYTE, size - 1, tag, MPI_COMM_WORLD));
      else CF_RC(MPI_Send(buf, bytes, MPI_BYTE, size - 1, tag, MPI_COMM_WORLD));
    } else if (rank == size - 1) {
      MPI_Status st;
      usleep(300);
      cf_status_prefill(&st, 1);
      CF_RC(MPI_Recv(buf, bytes, MPI_BYTE, 0, tag, MPI_COMM_WORLD, &st));
      cf_check_status(&st, 0, tag, MPI_BYTE, bytes, "MPI_Recv in the final burst");
      cf_verify(buf, (size_t)bytes, salt, "final burst message");
    }
    free(buf);
  }
  return cf_failures - failures_before;
}
