/* SPDX-License-Identifier: Apache-2.0
 *
 * Point-to-point through the layer: Irecv+Send, Sendrecv rings, ANY_SOURCE /
 * ANY_TAG with exact status, Probe/Iprobe/Mprobe then receive, many
 * outstanding requests with every Wait/Test variant, non-overtaking order
 * across eager and rendezvous sizes, self messages, synchronous sends,
 * non-contiguous types, truncation (MPI_ERRORS_RETURN), persistent requests,
 * cancel, MPI_PROC_NULL, a blocking send that must not depend on the
 * receiver leaving a native call, and Waitall over native + offloaded
 * requests. Runs on world, a dup, split halves and a cartesian comm (whose
 * p2p stays native).
 */
#include "common.h"

#include <stdint.h>

static int rank, size;
static char ctx[200];
static const char* comm_label = "";

static void set_ctx(const char* what, int n) {
  snprintf(ctx, sizeof ctx, "%s comm=%s n=%d", what, comm_label, n);
  t_context = ctx;
}

static int val(int src, int dst, int i, int salt) { return src * 1000003 + dst * 10007 + i * 7 + salt; }

static void check_status(const MPI_Status* st, int src, int tag, int count, MPI_Datatype t) {
  int n = -1;
  MPI_Get_count(st, t, &n);
  CHECK(st->MPI_SOURCE == src, "status source %d want %d", st->MPI_SOURCE, src);
  CHECK(st->MPI_TAG == tag, "status tag %d want %d", st->MPI_TAG, tag);
  CHECK(n == count, "status count %d want %d", n, count);
}

/* A message of cnt ints from src to dst (one element spare, for receives
 * larger than the message). */
static int* ring_message(int src, int dst, int cnt, int salt) {
  int* m = malloc(sizeof(int) * (size_t)(cnt + 1));
  for (int i = 0; i < cnt; ++i) m[i] = val(src, dst, i, salt);
  return m;
}

/* What arrived must be the message src sent to dst. */
static void check_ring_message(const int* in, int src, int dst, int cnt, int salt) {
  int bad = 0;
  for (int i = 0; i < cnt; ++i) bad += in[i] != val(src, dst, i, salt);
  CHECK(bad == 0, "%d wrong elements", bad);
}

static const int sizes[] = {0, 1, 7, 56, 100, 5000, 20000, 262144}; /* ints; 262144 = 1 MiB */
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static void ring_sendrecv(MPI_Comm comm) {
  int r, n;
  rank_size(comm, &r, &n);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  for (int s = 0; s < NSIZES; ++s) {
    const int cnt = sizes[s];
    set_ctx("sendrecv ring", cnt);
    int* out = ring_message(r, right, cnt, s);
    int* in = malloc(sizeof(int) * (size_t)(cnt + 1));
    MPI_Status st;
    CHECK_RC(MPI_Sendrecv(out, cnt, MPI_INT, right, 100 + s, in, cnt + 1, MPI_INT, left, 100 + s, comm, &st));
    check_status(&st, left, 100 + s, cnt, MPI_INT);
    check_ring_message(in, left, r, cnt, s);
    free(out), free(in);
  }
}

static void irecv_send(MPI_Comm comm) {
  int r, n;
  rank_size(comm, &r, &n);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  for (int s = 0; s < NSIZES; ++s) {
    const int cnt = sizes[s];
    set_ctx("irecv+send", cnt);
    int* out = ring_message(r, right, cnt, 50 + s);
    int* in = calloc((size_t)cnt + 1, sizeof(int));
    MPI_Request req;
    MPI_Status st;
    CHECK_RC(MPI_Irecv(in, cnt, MPI_INT, left, 7, comm, &req));
    CHECK_RC(MPI_Send(out, cnt, MPI_INT, right, 7, comm));
    CHECK_RC(MPI_Wait(&req, &st));
    CHECK(req == MPI_REQUEST_NULL, "request not reset");
    check_status(&st, left, 7, cnt, MPI_INT);
    check_ring_message(in, left, r, cnt, 50 + s);
    free(out), free(in);
  }
}

/* Every rank sends rank+1 ints tagged with its rank to 0, which receives
 * with wildcards and must learn source, tag and count from the status. */
static void any_source(MPI_Comm comm) {
  int r, n;
  rank_size(comm, &r, &n);
  set_ctx("any_source", n);
  if (r == 0) {
    int seen = 0;
    for (int k = 1; k < n; ++k) {
      int buf[64];
      MPI_Status st;
      CHECK_RC(MPI_Recv(buf, 64, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &st));
      int cnt = -1;
      MPI_Get_count(&st, MPI_INT, &cnt);
      CHECK(st.MPI_TAG == 1000 + st.MPI_SOURCE, "tag %d from %d", st.MPI_TAG, st.MPI_SOURCE);
      CHECK(cnt == st.MPI_SOURCE + 1, "count %d from %d", cnt, st.MPI_SOURCE);
      for (int i = 0; i < cnt && i < 64; ++i) CHECK(buf[i] == val(st.MPI_SOURCE, 0, i, 3), "data from %d", st.MPI_SOURCE);
      seen |= 1 << st.MPI_SOURCE;
    }
    CHECK(seen == ((1 << n) - 2), "sources seen %x", seen);
  } else {
    int buf[64];
    for (int i = 0; i <= r; ++i) buf[i] = val(r, 0, i, 3);
    CHECK_RC(MPI_Send(buf, r + 1, MPI_INT, 0, 1000 + r, comm));
  }
}

/* Probe / Iprobe / Mprobe, then receive exactly what was announced. */
static void probes(MPI_Comm comm) {
  int r, n;
  rank_size(comm, &r, &n);
  set_ctx("probe", n);
  if (r == 0) {
    for (int k = 1; k < n; ++k) {
      for (int kind = 0; kind < 3; ++kind) {
        MPI_Status st;
        MPI_Message msg = MPI_MESSAGE_NULL;
        if (kind == 0) {
          CHECK_RC(MPI_Probe(MPI_ANY_SOURCE, 2000 + kind, comm, &st));
        } else if (kind == 1) {
          int flag = 0;
          while (!flag) CHECK_RC(MPI_Iprobe(MPI_ANY_SOURCE, 2000 + kind, comm, &flag, &st));
        } else {
          CHECK_RC(MPI_Mprobe(MPI_ANY_SOURCE, 2000 + kind, comm, &msg, &st));
        }
        int cnt = -1;
        MPI_Get_count(&st, MPI_INT, &cnt);
        const int src = st.MPI_SOURCE;
        CHECK(cnt == 3 * src + kind, "probed count %d from %d", cnt, src);
        int* buf = malloc(sizeof(int) * (size_t)(cnt + 1));
        MPI_Status st2;
        if (kind == 2) CHECK_RC(MPI_Mrecv(buf, cnt, MPI_INT, &msg, &st2));
        else CHECK_RC(MPI_Recv(buf, cnt, MPI_INT, src, 2000 + kind, comm, &st2));
        check_status(&st2, src, 2000 + kind, cnt, MPI_INT);
        for (int i = 0; i < cnt; ++i) CHECK(buf[i] == val(src, 0, i, kind), "data");
        free(buf);
      }
    }
  } else {
    for (int kind = 0; kind < 3; ++kind) {
      int cnt = 3 * r + kind;
      int buf[32];
      for (int i = 0; i < cnt; ++i) buf[i] = val(r, 0, i, kind);
      CHECK_RC(MPI_Send(buf, cnt, MPI_INT, 0, 2000 + kind, comm));
    }
  }
  /* nothing left over */
  int flag = 1;
  MPI_Barrier(comm);
  CHECK_RC(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, MPI_STATUS_IGNORE));
  CHECK(flag == 0, "unexpected message left");
  MPI_Barrier(comm); /* before anyone starts sending the next phase */
}

/* K messages each way between every pair, completed with every variant. */
static void many_outstanding(MPI_Comm comm, int variant) {
  int r, n;
  rank_size(comm, &r, &n);
  const int K = 16, CNT = variant == 0 ? 2000 : 10;
  set_ctx("many outstanding", variant);
  const int total = 2 * K * n;
  MPI_Request* reqs = malloc(sizeof(MPI_Request) * (size_t)total);
  MPI_Status* sts = malloc(sizeof(MPI_Status) * (size_t)total);
  int* in = malloc(sizeof(int) * (size_t)(K * n * CNT));
  int* out = malloc(sizeof(int) * (size_t)(K * n * CNT));
  int q = 0;
  for (int p = 0; p < n; ++p)
    for (int k = 0; k < K; ++k) CHECK_RC(MPI_Irecv(in + (p * K + k) * CNT, CNT, MPI_INT, p, k, comm, &reqs[q++]));
  for (int p = 0; p < n; ++p)
    for (int k = 0; k < K; ++k) {
      int* o = out + (p * K + k) * CNT;
      for (int i = 0; i < CNT; ++i) o[i] = val(r, p, i, k);
      CHECK_RC(MPI_Isend(o, CNT, MPI_INT, p, k, comm, &reqs[q++]));
    }
  int done = 0;
  if (variant == 0) {
    CHECK_RC(MPI_Waitall(q, reqs, sts));
    done = q;
  } else if (variant == 1) {
    while (done < q) {
      int idx;
      CHECK_RC(MPI_Waitany(q, reqs, &idx, MPI_STATUS_IGNORE));
      CHECK(idx != MPI_UNDEFINED && reqs[idx] == MPI_REQUEST_NULL, "waitany index %d", idx);
      ++done;
    }
    int idx;
    CHECK_RC(MPI_Waitany(q, reqs, &idx, MPI_STATUS_IGNORE));
    CHECK(idx == MPI_UNDEFINED, "waitany on all-null should give MPI_UNDEFINED");
  } else if (variant == 2) {
    int* idx = malloc(sizeof(int) * (size_t)q);
    while (done < q) {
      int outc = 0;
      CHECK_RC(MPI_Waitsome(q, reqs, &outc, idx, sts));
      CHECK(outc > 0 && outc != MPI_UNDEFINED, "waitsome outcount %d", outc);
      if (outc == MPI_UNDEFINED) break;
      done += outc;
    }
    int outc = 0;
    MPI_Waitsome(q, reqs, &outc, idx, sts);
    CHECK(outc == MPI_UNDEFINED, "waitsome on all-null");
    free(idx);
  } else if (variant == 3) {
    int flag = 0;
    while (!flag) CHECK_RC(MPI_Testall(q, reqs, &flag, sts));
    done = q;
  } else if (variant == 4) {
    while (done < q) {
      int idx, flag = 0;
      CHECK_RC(MPI_Testany(q, reqs, &idx, &flag, MPI_STATUS_IGNORE));
      if (flag) ++done;
    }
  } else {
    int* idx = malloc(sizeof(int) * (size_t)q);
    while (done < q) {
      int outc = 0;
      CHECK_RC(MPI_Testsome(q, reqs, &outc, idx, MPI_STATUSES_IGNORE));
      if (outc == MPI_UNDEFINED) break;
      done += outc;
    }
    free(idx);
  }
  CHECK(done == q, "completed %d of %d", done, q);
  for (int i = 0; i < q; ++i) CHECK(reqs[i] == MPI_REQUEST_NULL, "request %d not null", i);
  if (variant == 0)
    for (int i = 0; i < K * n; ++i) check_status(&sts[i], i / K, i % K, CNT, MPI_INT);
  int bad = 0;
  for (int p = 0; p < n; ++p)
    for (int k = 0; k < K; ++k)
      for (int i = 0; i < CNT; ++i) bad += in[(p * K + k) * CNT + i] != val(p, r, i, k);
  CHECK(bad == 0, "%d wrong elements", bad);
  free(reqs), free(sts), free(in), free(out);
}

/* Same source, same tag: arrival order must be send order, across small
 * (inline), eager and rendezvous sizes. */
static void non_overtaking(MPI_Comm comm) {
  int r, n;
  rank_size(comm, &r, &n);
  set_ctx("non-overtaking", n);
  const int M = 30;
  const int lens[] = {1, 5000, 40, 20000, 0, 3};
  if (r == 1) {
    int* b = malloc(sizeof(int) * 20000);
    for (int m = 0; m < M; ++m) {
      int len = lens[m % 6];
      for (int i = 0; i < len; ++i) b[i] = m * 100000 + i;
      CHECK_RC(MPI_Send(b, len, MPI_INT, 0, 5, comm));
    }
    free(b);
  } else if (r == 0) {
    int* b = malloc(sizeof(int) * 20000);
    for (int m = 0; m < M; ++m) {
      MPI_Status st;
      CHECK_RC(MPI_Recv(b, 20000, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &st));
      int cnt;
      MPI_Get_count(&st, MPI_INT, &cnt);
      CHECK(cnt == lens[m % 6], "message %d has %d ints (want %d)", m, cnt, lens[m % 6]);
      if (cnt > 0) CHECK(b[0] == m * 100000, "message %d out of order (got %d)", m, b[0] / 100000);
    }
    free(b);
  }
}

static void self_and_sync(MPI_Comm comm) {
  int r, n;
  rank_size(comm, &r, &n);
  set_ctx("self", 0);
  int out[100], in[100];
  for (int i = 0; i < 100; ++i) out[i] = val(r, r, i, 9);
  MPI_Request req;
  MPI_Status st;
  CHECK_RC(MPI_Isend(out, 100, MPI_INT, r, 3, comm, &req));
  CHECK_RC(MPI_Recv(in, 100, MPI_INT, r, 3, comm, &st));
  CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
  check_status(&st, r, 3, 100, MPI_INT);
  CHECK(memcmp(in, out, sizeof in) == 0, "self data");
  /* self Ssend with the receive posted first */
  CHECK_RC(MPI_Irecv(in, 100, MPI_INT, r, 4, comm, &req));
  CHECK_RC(MPI_Ssend(out, 50, MPI_INT, r, 4, comm));
  CHECK_RC(MPI_Wait(&req, &st));
  check_status(&st, r, 4, 50, MPI_INT);

  set_ctx("ssend", n);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  for (int big = 0; big < 2; ++big) {
    const int cnt = big ? 30000 : 10;
    int* o = malloc(sizeof(int) * (size_t)cnt);
    int* i2 = malloc(sizeof(int) * (size_t)cnt);
    for (int i = 0; i < cnt; ++i) o[i] = val(r, right, i, 11);
    CHECK_RC(MPI_Irecv(i2, cnt, MPI_INT, left, 12, comm, &req));
    CHECK_RC(MPI_Ssend(o, cnt, MPI_INT, right, 12, comm));
    CHECK_RC(MPI_Wait(&req, &st));
    check_status(&st, left, 12, cnt, MPI_INT);
    CHECK(i2[cnt - 1] == val(left, r, cnt - 1, 11), "ssend data");
    MPI_Request rq[2];
    CHECK_RC(MPI_Irecv(i2, cnt, MPI_INT, left, 13, comm, &rq[0]));
    CHECK_RC(MPI_Issend(o, cnt, MPI_INT, right, 13, comm, &rq[1]));
    CHECK_RC(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    free(o), free(i2);
  }
}

static void noncontiguous(MPI_Comm comm) {
  int r, n;
  rank_size(comm, &r, &n);
  set_ctx("vector type", n);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  MPI_Datatype vec;
  MPI_Type_vector(100, 1, 3, MPI_INT, &vec); /* every third int */
  MPI_Type_commit(&vec);
  int out[300], in[100], back[300];
  for (int i = 0; i < 300; ++i) out[i] = val(r, right, i, 21);
  MPI_Status st;
  CHECK_RC(MPI_Sendrecv(out, 1, vec, right, 21, in, 100, MPI_INT, left, 21, comm, &st));
  check_status(&st, left, 21, 100, MPI_INT);
  for (int i = 0; i < 100; ++i) CHECK(in[i] == val(left, r, 3 * i, 21), "vector element %d", i);
  /* and into a vector layout */
  for (int i = 0; i < 300; ++i) back[i] = -1;
  CHECK_RC(MPI_Sendrecv(in, 100, MPI_INT, left, 22, back, 1, vec, right, 22, comm, &st));
  for (int i = 0; i < 300; ++i) {
    if (i % 3 == 0) CHECK(back[i] == val(r, right, i, 21), "vector receive element %d", i);
    else CHECK(back[i] == -1, "vector gap %d overwritten", i);
  }
  MPI_Type_free(&vec);
}

static void truncation(MPI_Comm comm) {
  int r, n;
  rank_size(comm, &r, &n);
  if (n < 2) return;
  set_ctx("truncation", n);
  MPI_Comm c;
  MPI_Comm_dup(comm, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  for (int big = 0; big < 2; ++big) {
    const int cnt = big ? 10000 : 10;
    int* buf = calloc((size_t)cnt, sizeof(int));
    if (r == 1) {
      CHECK_RC(MPI_Send(buf, cnt, MPI_INT, 0, 31, c));
    } else if (r == 0) {
      MPI_Status st;
      int rc = MPI_Recv(buf, cnt / 2, MPI_INT, 1, 31, c, &st);
      int cls = -1;
      MPI_Error_class(rc, &cls);
      CHECK(cls == MPI_ERR_TRUNCATE, "truncated receive returned class %d", cls);
    }
    free(buf);
  }
  MPI_Comm_free(&c);
}

static void persistent_cancel_procnull(MPI_Comm comm) {
  int r, n;
  rank_size(comm, &r, &n);
  set_ctx("persistent", n);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  int out[50], in[50];
  MPI_Request rq[2];
  CHECK_RC(MPI_Recv_init(in, 50, MPI_INT, left, 41, comm, &rq[0]));
  CHECK_RC(MPI_Send_init(out, 50, MPI_INT, right, 41, comm, &rq[1]));
  for (int it = 0; it < 3; ++it) {
    for (int i = 0; i < 50; ++i) out[i] = val(r, right, i, it);
    CHECK_RC(MPI_Startall(2, rq));
    MPI_Status st[2];
    CHECK_RC(MPI_Waitall(2, rq, st));
    CHECK(rq[0] != MPI_REQUEST_NULL, "persistent request freed by wait");
    check_status(&st[0], left, 41, 50, MPI_INT);
    for (int i = 0; i < 50; ++i) CHECK(in[i] == val(left, r, i, it), "persistent data it=%d", it);
  }
  /* waiting on an inactive persistent request returns at once */
  CHECK_RC(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
  MPI_Request_free(&rq[0]);
  MPI_Request_free(&rq[1]);

  set_ctx("cancel", n);
  MPI_Request req;
  MPI_Status st;
  CHECK_RC(MPI_Irecv(in, 50, MPI_INT, left, 999, comm, &req)); /* never sent */
  CHECK_RC(MPI_Cancel(&req));
  CHECK_RC(MPI_Wait(&req, &st));
  int cancelled = 0;
  MPI_Test_cancelled(&st, &cancelled);
  CHECK(cancelled, "receive not cancelled");

  set_ctx("proc_null", n);
  CHECK_RC(MPI_Send(out, 5, MPI_INT, MPI_PROC_NULL, 1, comm));
  CHECK_RC(MPI_Recv(in, 5, MPI_INT, MPI_PROC_NULL, 1, comm, &st));
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "proc_null source %d", st.MPI_SOURCE);
  CHECK_RC(MPI_Sendrecv(out, 5, MPI_INT, right, 42, in, 5, MPI_INT, MPI_PROC_NULL, 42, comm, &st));
  CHECK_RC(MPI_Sendrecv(out, 5, MPI_INT, MPI_PROC_NULL, 42, in, 5, MPI_INT, left, 42, comm, &st));
  check_status(&st, left, 42, 5, MPI_INT);

  set_ctx("request_free", n);
  CHECK_RC(MPI_Isend(out, 50, MPI_INT, right, 43, comm, &req));
  CHECK_RC(MPI_Request_free(&req));
  CHECK_RC(MPI_Recv(in, 50, MPI_INT, left, 43, comm, &st));

  set_ctx("sendrecv_replace", n);
  for (int i = 0; i < 50; ++i) in[i] = val(r, right, i, 44);
  CHECK_RC(MPI_Sendrecv_replace(in, 50, MPI_INT, right, 44, left, 44, comm, &st));
  for (int i = 0; i < 50; ++i) CHECK(in[i] == val(left, r, i, 44), "replace data");
}

static void my_op(void* in, void* inout, int* len, MPI_Datatype* t) {
  (void)t;
  for (int i = 0; i < *len; ++i) ((int*)inout)[i] += ((int*)in)[i];
}

/* Rank 0 sends 1 MiB (rendezvous size) with a blocking MPI_Send and then
 * joins a collective that runs natively (user op); rank 1 posted the receive
 * before that collective and waits for it only afterwards. MPI's progress
 * rule says this must not deadlock. */
static void send_then_native_collective(MPI_Comm comm) {
  int r, n;
  rank_size(comm, &r, &n);
  if (n < 2) return;
  set_ctx("send vs native collective", n);
  MPI_Op op;
  MPI_Op_create(my_op, 1, &op);
  const int cnt = 262144;
  int* buf = malloc(sizeof(int) * (size_t)cnt);
  int x = 1, y = 0;
  MPI_Request req = MPI_REQUEST_NULL;
  if (r == 1) CHECK_RC(MPI_Irecv(buf, cnt, MPI_INT, 0, 51, comm, &req));
  if (r == 0) {
    for (int i = 0; i < cnt; ++i) buf[i] = i;
    CHECK_RC(MPI_Send(buf, cnt, MPI_INT, 1, 51, comm));
  }
  CHECK_RC(MPI_Allreduce(&x, &y, 1, MPI_INT, op, comm));
  CHECK(y == n, "user-op allreduce %d", y);
  if (r == 1) {
    CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(buf[cnt - 1] == cnt - 1, "big message data");
  }
  MPI_Op_free(&op);
  free(buf);
}

/* One Waitall over a native request (cart comm) and offloaded ones. */
static void mixed_requests(MPI_Comm offloaded, MPI_Comm native) {
  int r, n;
  MPI_Comm_rank(offloaded, &r);
  MPI_Comm_size(offloaded, &n);
  set_ctx("mixed native+offloaded waitall", n);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  int a = r, b = -1, c = r * 2, d = -1;
  MPI_Request rq[5];
  rq[0] = MPI_REQUEST_NULL;
  CHECK_RC(MPI_Irecv(&b, 1, MPI_INT, left, 61, offloaded, &rq[1]));
  CHECK_RC(MPI_Irecv(&d, 1, MPI_INT, left, 62, native, &rq[2]));
  CHECK_RC(MPI_Isend(&a, 1, MPI_INT, right, 61, offloaded, &rq[3]));
  CHECK_RC(MPI_Isend(&c, 1, MPI_INT, right, 62, native, &rq[4]));
  MPI_Status st[5];
  CHECK_RC(MPI_Waitall(5, rq, st));
  CHECK(b == left && d == 2 * left, "mixed data %d %d", b, d);
  check_status(&st[1], left, 61, 1, MPI_INT);
  check_status(&st[2], left, 62, 1, MPI_INT);
}

/* Rank 0 waits for an offloaded receive with MPI_Waitall / Waitany /
 * Waitsome over that request alone, while rank 1 must first finish a native
 * rendezvous send (1 MiB on the cart comm) to rank 0 before it sends what
 * rank 0 waits for. MPI's progress rule: rank 0's wait must also drive the
 * native engine, else both ranks wait until the offloaded receive times out
 * (these loops polled only the offloaded requests). */
static void native_send_during_offloaded_waits(MPI_Comm offloaded, MPI_Comm native) {
  int r, n;
  rank_size(offloaded, &r, &n);
  if (n < 2) return;
  const int cnt = 262144;
  int* big = malloc(sizeof(int) * (size_t)cnt);
  for (int variant = 0; variant < 3; ++variant) {
    static const char* const names[] = {"waitall", "waitany", "waitsome"};
    set_ctx(names[variant], n);
    int small = -1;
    if (r == 0) {
      MPI_Request native_req, offloaded_req;
      memset(big, 0, sizeof(int) * (size_t)cnt);
      CHECK_RC(MPI_Irecv(big, cnt, MPI_INT, 1, 71, native, &native_req));
      CHECK_RC(MPI_Irecv(&small, 1, MPI_INT, 1, 72, offloaded, &offloaded_req));
      if (variant == 0) {
        CHECK_RC(MPI_Waitall(1, &offloaded_req, MPI_STATUSES_IGNORE));
      } else if (variant == 1) {
        int index = -1;
        CHECK_RC(MPI_Waitany(1, &offloaded_req, &index, MPI_STATUS_IGNORE));
        CHECK(index == 0, "waitany index %d", index);
      } else {
        int outcount = 0, index = -1;
        CHECK_RC(MPI_Waitsome(1, &offloaded_req, &outcount, &index, MPI_STATUSES_IGNORE));
        CHECK(outcount == 1 && index == 0, "waitsome %d %d", outcount, index);
      }
      CHECK(small == 100 + variant, "offloaded message %d", small);
      CHECK_RC(MPI_Wait(&native_req, MPI_STATUS_IGNORE));
      CHECK(big[0] == variant && big[cnt - 1] == cnt - 1 + variant, "native message %d %d", big[0], big[cnt - 1]);
    } else if (r == 1) {
      for (int i = 0; i < cnt; ++i) big[i] = i + variant;
      small = 100 + variant;
      CHECK_RC(MPI_Send(big, cnt, MPI_INT, 0, 71, native));
      CHECK_RC(MPI_Send(&small, 1, MPI_INT, 0, 72, offloaded));
    }
    MPI_Barrier(offloaded);
  }
  free(big);
}

static void run(MPI_Comm comm, const char* label, int full) {
  if (comm == MPI_COMM_NULL) return;
  comm_label = label;
  int n;
  MPI_Comm_size(comm, &n);
  /* Barriers separate phases whose wildcard receives could otherwise
   * legally match the next phase's messages. */
  ring_sendrecv(comm);
  irecv_send(comm);
  any_source(comm);
  MPI_Barrier(comm);
  probes(comm);
  for (int v = 0; v < (full ? 6 : 1); ++v) many_outstanding(comm, v);
  if (n > 1) non_overtaking(comm);
  MPI_Barrier(comm);
  self_and_sync(comm);
  noncontiguous(comm);
  truncation(comm);
  persistent_cancel_procnull(comm);
  MPI_Barrier(comm);
}

int main(int argc, char** argv) {
  init_world(&argc, &argv, &rank, &size);
  const int quick = mode_is(argc, argv, "quick");
  run(MPI_COMM_WORLD, "world", 1);
  send_then_native_collective(MPI_COMM_WORLD);
  MPI_Comm dup, half;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  run(dup, "dup", !quick);
  MPI_Comm cart = ring_cart(size);
  mixed_requests(dup, cart);
  native_send_during_offloaded_waits(dup, cart);
  if (!quick) {
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    run(half, "split-halves-reversed", 0);
    run(cart, "cart", 0);
    MPI_Comm_free(&half);
  }
  MPI_Comm_free(&dup);
  MPI_Comm_free(&cart);
  expect_offloaded_with_peers(size, "MPI_Send", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Sendrecv", NULL);
  if (size > 1 && rank == 0) expect_offloaded("MPI_Probe");
  return finish("test_p2p");
}
