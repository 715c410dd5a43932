/* SPDX-License-Identifier: Apache-2.0
 *
 * Short receives into derived datatypes and MPI's status rules.
 *
 * Part 1: a message that ends inside an item of the receive type must fill
 * exactly the basic elements that came (MPI 3.1 3.2.4: only the locations of
 * the shorter message are modified). Every receive path (Recv, Irecv with
 * each Wait/Test call, Probe+Recv, Mprobe+Mrecv, Improbe+Imrecv, persistent,
 * Sendrecv; posted before or after the message arrives), for vector,
 * indexed, mixed struct, resized, out-of-order hindexed, subarray, a padded
 * pair type, a dup and a nested struct, with small (inline), eager and
 * rendezvous sizes. The receive buffer is pre-filled with a sentinel and
 * every byte is checked against a hand-written layout; MPI_Get_count and
 * MPI_Get_elements are checked too.
 *
 * Part 2: single-completion calls never write status.MPI_ERROR; Waitall,
 * Waitsome, Testall and Testsome write it if and only if they return
 * MPI_ERR_IN_STATUS (MPI 3.1 3.2.5, 3.7.5), also for arrays mixing native
 * and offloaded requests.
 */
#include "common.h"

#define SENTINEL 0xA5
#define KEEP_ERR 777 /* a caller's MPI_ERROR value that must survive */

static int rank, size, left, right;
static char ctx[300];

/* One receive type: its item layout in pack order and its basic elements. */
typedef struct {
  const char* name;
  MPI_Datatype type;
  int nruns;
  long off[8], len[8];
  int nelem;
  int esize[8];
  int size;
  long extent;
} Shape;

enum { NSHAPES = 15 };
static Shape shapes[NSHAPES];

static void shape(Shape* s, const char* name, MPI_Datatype t, int nruns, const long* runs, int nelem,
                  const int* esize) {
  s->name = name;
  s->type = t;
  MPI_Type_commit(&s->type);
  s->nruns = nruns;
  for (int i = 0; i < nruns; ++i) {
    s->off[i] = runs[2 * i];
    s->len[i] = runs[2 * i + 1];
  }
  s->nelem = nelem;
  for (int i = 0; i < nelem; ++i) s->esize[i] = esize[i];
  MPI_Aint lb, ext;
  MPI_Type_get_extent(s->type, &lb, &ext);
  MPI_Type_size(s->type, &s->size);
  s->extent = ext;
}

static void make_shapes(void) {
  MPI_Datatype vec, t;
  MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  int i4[] = {4, 4, 4, 4};
  shape(&shapes[0], "vector", vec, 2, (long[]){0, 4, 8, 4}, 2, i4);
  MPI_Type_indexed(2, (int[]){2, 1}, (int[]){0, 3}, MPI_INT, &t);
  shape(&shapes[1], "indexed", t, 2, (long[]){0, 8, 12, 4}, 3, i4);
  MPI_Type_create_struct(3, (int[]){1, 1, 1}, (MPI_Aint[]){0, 8, 16}, (MPI_Datatype[]){MPI_INT, MPI_DOUBLE, MPI_CHAR},
                         &t);
  shape(&shapes[2], "struct int,double,char", t, 3, (long[]){0, 4, 8, 8, 16, 1}, 3, (int[]){4, 8, 1});
  MPI_Type_create_resized(vec, 0, 20, &t);
  shape(&shapes[3], "resized vector", t, 2, (long[]){0, 4, 8, 4}, 2, i4);
  MPI_Type_create_hindexed(2, (int[]){1, 2}, (MPI_Aint[]){16, 0}, MPI_INT, &t);
  shape(&shapes[4], "hindexed out of order", t, 2, (long[]){16, 4, 0, 8}, 3, i4);
  MPI_Type_create_subarray(2, (int[]){3, 4}, (int[]){2, 2}, (int[]){1, 1}, MPI_ORDER_C, MPI_INT, &t);
  shape(&shapes[5], "subarray", t, 2, (long[]){20, 8, 36, 8}, 4, i4);
  shape(&shapes[6], "MPI_DOUBLE_INT", MPI_DOUBLE_INT, 2, (long[]){0, 8, 8, 4}, 2, (int[]){8, 4});
  MPI_Type_dup(vec, &t);
  shape(&shapes[7], "dup of vector", t, 2, (long[]){0, 4, 8, 4}, 2, i4);
  MPI_Type_create_struct(2, (int[]){2, 1}, (MPI_Aint[]){0, 30}, (MPI_Datatype[]){vec, MPI_SHORT}, &t);
  shape(&shapes[8], "struct of vectors and a short", t, 5, (long[]){0, 4, 8, 4, 12, 4, 20, 4, 30, 2}, 5,
        (int[]){4, 4, 4, 4, 2});
  MPI_Type_contiguous(3, MPI_INT, &t);
  shape(&shapes[9], "contiguous (control)", t, 1, (long[]){0, 12}, 3, i4);
  MPI_Type_create_hvector(2, 1, 40, shapes[2].type, &t);
  shape(&shapes[10], "hvector of struct", t, 6, (long[]){0, 4, 8, 8, 16, 1, 40, 4, 48, 8, 56, 1}, 6,
        (int[]){4, 8, 1, 4, 8, 1});
  MPI_Type_create_indexed_block(3, 1, (int[]){4, 0, 2}, MPI_SHORT, &t);
  shape(&shapes[11], "indexed_block of shorts", t, 3, (long[]){8, 2, 0, 2, 4, 2}, 3, (int[]){2, 2, 2});
  MPI_Type_create_subarray(3, (int[]){2, 3, 2}, (int[]){1, 2, 2}, (int[]){1, 0, 0}, MPI_ORDER_FORTRAN, MPI_INT, &t);
  shape(&shapes[12], "subarray, Fortran order", t, 4, (long[]){4, 4, 12, 4, 28, 4, 36, 4}, 4, i4);
  /* rank 1's part of 8 ints dealt cyclically in pairs to 2 processes: ints 2, 3, 6, 7 */
  MPI_Type_create_darray(2, 1, 1, (int[]){8}, (int[]){MPI_DISTRIBUTE_CYCLIC}, (int[]){2}, (int[]){2}, MPI_ORDER_C,
                         MPI_INT, &t);
  shape(&shapes[13], "darray", t, 2, (long[]){8, 8, 24, 8}, 4, i4);
  MPI_Type_create_hindexed(2, (int[]){1, 1}, (MPI_Aint[]){-8, 4}, MPI_INT, &t);
  shape(&shapes[14], "hindexed below the buffer pointer", t, 2, (long[]){-8, 4, 4, 4}, 2, i4);
}

static unsigned char v(long p) { return (unsigned char)(p % 97 + 1); } /* never SENTINEL */

/* Where packed byte p of a message received as `s` items lands. */
static long dest_of(const Shape* s, long p) {
  long item = p / s->size, q = p % s->size;
  for (int j = 0; j < s->nruns; ++j) {
    if (q < s->len[j]) return item * s->extent + s->off[j] + q;
    q -= s->len[j];
  }
  return -1;
}

static int elements_in(const Shape* s, long bytes) {
  int n = 0;
  for (long p = 0; p < bytes; ++n) p += s->esize[n % s->nelem];
  return n;
}

enum Path {
  P_RECV, P_PROBE_RECV, P_IRECV_WAIT, P_IRECV_TEST, P_WAITANY, P_WAITALL, P_WAITSOME, P_TESTSOME,
  P_MPROBE_MRECV, P_IMPROBE_IMRECV, P_PERSISTENT, P_SENDRECV, NPATHS
};
static const char* path_names[] = {"Recv", "Probe+Recv", "Irecv+Wait", "Irecv+Test", "Irecv+Waitany",
                                   "Irecv+Waitall", "Irecv+Waitsome", "Irecv+Testsome", "Mprobe+Mrecv",
                                   "Improbe+Imrecv", "Recv_init+Start+Wait", "Sendrecv"};

/* Open MPI 4.1's own Waitall/Waitsome/Testsome write MPI_SUCCESS into MPI_ERROR when they succeed (MPI 3.1
 * 3.2.5 says they must not); without the layer that is accepted from the multiple-completion calls. */
static int error_kept(int err, int multiple) {
  return err == KEEP_ERR || (multiple && !layer_present() && err == MPI_SUCCESS);
}

static void check_status(const MPI_Status* st, const Shape* s, long bytes, const char* which, int multiple) {
  int n = -1;
  CHECK(error_kept(st->MPI_ERROR, multiple), "%s: MPI_ERROR written (%d)", which, st->MPI_ERROR);
  CHECK(st->MPI_SOURCE == left && st->MPI_TAG == 5, "%s: source %d tag %d", which, st->MPI_SOURCE, st->MPI_TAG);
  MPI_Get_elements(st, s->type, &n);
  /* (Open MPI counts the basic elements of its predefined pair types wrongly; the layer only sets the byte count) */
  if (s->type != MPI_DOUBLE_INT)
    CHECK(n == elements_in(s, bytes), "%s: MPI_Get_elements %d want %d", which, n, elements_in(s, bytes));
  MPI_Get_count(st, s->type, &n);
  const int want = bytes % s->size == 0 ? (int)(bytes / s->size) : MPI_UNDEFINED;
  CHECK(n == want, "%s: MPI_Get_count %d want %d", which, n, want);
  MPI_Get_count(st, MPI_BYTE, &n);
  CHECK(n == bytes, "%s: MPI_Get_count(MPI_BYTE) %d want %ld", which, n, bytes);
}

/* One message of `bytes` packed bytes to the right, received from the left
 * as `count` items of s through `path`. */
static void short_receive(MPI_Comm comm, const Shape* s, int count, long bytes, enum Path path, int posted) {
  snprintf(ctx, sizeof ctx, "%s, %d items, %ld bytes, %s, %s", s->name, count, bytes, path_names[path],
           posted ? "posted first" : "message first");
  t_context = ctx;
  const long margin = 64; /* the buffer pointer is `margin` bytes in: types may reach below it */
  const long span = count * s->extent + 2 * margin;
  unsigned char* out = malloc((size_t)bytes + 1);
  unsigned char* in = malloc((size_t)span);
  unsigned char* want = malloc((size_t)span);
  for (long p = 0; p < bytes; ++p) out[p] = v(p);
  memset(in, SENTINEL, (size_t)span);
  memset(want, SENTINEL, (size_t)span);
  for (long p = 0; p < bytes; ++p) want[margin + dest_of(s, p)] = v(p);
  void* buf = in + margin;
  MPI_Status st, sts[2];
  st.MPI_ERROR = sts[0].MPI_ERROR = sts[1].MPI_ERROR = KEEP_ERR;
  MPI_Request sreq = MPI_REQUEST_NULL, rreq = MPI_REQUEST_NULL, reqs[2];
  const int tag = 5;
  if (path == P_SENDRECV) {
    CHECK_RC(MPI_Sendrecv(out, (int)bytes, MPI_PACKED, right, tag, buf, count, s->type, left, tag, comm, &st));
  } else {
    int can_post = path >= P_IRECV_WAIT && path <= P_TESTSOME;
    if (path == P_PERSISTENT) {
      CHECK_RC(MPI_Recv_init(buf, count, s->type, left, tag, comm, &rreq));
      can_post = 1;
    }
    if (posted && can_post) {
      if (path == P_PERSISTENT) CHECK_RC(MPI_Start(&rreq));
      else CHECK_RC(MPI_Irecv(buf, count, s->type, left, tag, comm, &rreq));
    }
    MPI_Barrier(comm); /* the receive is posted (or not) before the message leaves */
    CHECK_RC(MPI_Isend(out, (int)bytes, MPI_PACKED, right, tag, comm, &sreq));
    if (!(posted && can_post)) {
      MPI_Barrier(comm); /* the message is on its way before the receive */
      if (path == P_PERSISTENT) CHECK_RC(MPI_Start(&rreq));
      else if (can_post) CHECK_RC(MPI_Irecv(buf, count, s->type, left, tag, comm, &rreq));
    }
    int flag = 0, idx = -1, outcount = 0, indices[2];
    MPI_Message msg = MPI_MESSAGE_NULL;
    switch (path) {
      case P_RECV: CHECK_RC(MPI_Recv(buf, count, s->type, left, tag, comm, &st)); break;
      case P_PROBE_RECV:
        CHECK_RC(MPI_Probe(left, tag, comm, &st));
        check_status(&st, s, bytes, "MPI_Probe", 0);
        CHECK_RC(MPI_Recv(buf, count, s->type, left, tag, comm, &st));
        break;
      case P_IRECV_WAIT:
      case P_PERSISTENT: CHECK_RC(MPI_Wait(&rreq, &st)); break;
      case P_IRECV_TEST:
        while (!flag) CHECK_RC(MPI_Test(&rreq, &flag, &st));
        break;
      case P_WAITANY:
        reqs[0] = MPI_REQUEST_NULL;
        reqs[1] = rreq;
        CHECK_RC(MPI_Waitany(2, reqs, &idx, &st));
        CHECK(idx == 1, "Waitany index %d", idx);
        break;
      case P_WAITALL:
        reqs[0] = rreq;
        reqs[1] = MPI_REQUEST_NULL;
        CHECK_RC(MPI_Waitall(2, reqs, sts));
        st = sts[0];
        CHECK(error_kept(sts[1].MPI_ERROR, 1), "Waitall: MPI_ERROR of a null request written");
        break;
      case P_WAITSOME:
      case P_TESTSOME:
        reqs[0] = rreq;
        while (outcount == 0) {
          if (path == P_WAITSOME) CHECK_RC(MPI_Waitsome(1, reqs, &outcount, indices, sts));
          else CHECK_RC(MPI_Testsome(1, reqs, &outcount, indices, sts));
        }
        CHECK(outcount == 1 && indices[0] == 0, "outcount %d", outcount);
        st = sts[0];
        break;
      case P_MPROBE_MRECV:
        CHECK_RC(MPI_Mprobe(left, tag, comm, &msg, &st));
        check_status(&st, s, bytes, "MPI_Mprobe", 0);
        CHECK_RC(MPI_Mrecv(buf, count, s->type, &msg, &st));
        break;
      case P_IMPROBE_IMRECV:
        while (!flag) CHECK_RC(MPI_Improbe(left, tag, comm, &flag, &msg, &st));
        check_status(&st, s, bytes, "MPI_Improbe", 0);
        st.MPI_ERROR = KEEP_ERR;
        CHECK_RC(MPI_Imrecv(buf, count, s->type, &msg, &rreq));
        CHECK_RC(MPI_Wait(&rreq, &st));
        break;
      default: break;
    }
    CHECK_RC(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    if (path == P_PERSISTENT) MPI_Request_free(&rreq);
  }
  check_status(&st, s, bytes, path_names[path], path == P_WAITALL || path == P_WAITSOME || path == P_TESTSOME);
  long bad = 0, first = -1;
  for (long i = 0; i < span; ++i)
    if (in[i] != want[i]) {
      if (first < 0) first = i;
      ++bad;
    }
  CHECK(bad == 0, "%ld wrong bytes, first at offset %ld: %d want %d", bad, first, first >= 0 ? in[first] : 0,
        first >= 0 ? want[first] : 0);
  free(out);
  free(in);
  free(want);
}

static void short_receives(MPI_Comm comm, int quick) {
  for (int k = 0; k < NSHAPES; ++k) {
    const Shape* s = &shapes[k];
    for (int path = 0; path < NPATHS; ++path) {
      const int postable = (path >= P_IRECV_WAIT && path <= P_TESTSOME) || path == P_PERSISTENT;
      for (int posted = 0; posted < 1 + postable; ++posted) {
        /* 3 items: every basic element boundary */
        long bytes = 0;
        for (int e = 0; e <= 3 * s->nelem; bytes += s->esize[e % s->nelem], ++e)
          if (!quick || e % s->nelem == 1 || e == 3 * s->nelem) short_receive(comm, s, 3, bytes, path, posted);
        /* eager and rendezvous payloads: end after the first element of the last item, and short by one element */
        const int big[] = {1000, 12000};
        for (int b = 0; b < 2; ++b) {
          const long items = big[b];
          short_receive(comm, s, (int)items, (items - 1) * s->size + s->esize[0], path, posted);
          if (!quick) short_receive(comm, s, (int)items, items * s->size - s->esize[s->nelem - 1], path, posted);
        }
      }
    }
  }
}

/* A type whose layout the layer does not decode (a darray spanning more than 64 MiB: measured layouts stop there):
 * a message ending inside its item fails with an error, never drops data silently. Under the layer only: native
 * MPI places the element. */
static void undecodable_layout(MPI_Comm comm) {
  if (!layer_active() || size < 2) return;
  t_context = "short receive into an undecodable type";
  MPI_Datatype big;
  MPI_Type_create_darray(2, 1, 1, (int[]){20000000}, (int[]){MPI_DISTRIBUTE_CYCLIC}, (int[]){1}, (int[]){2},
                         MPI_ORDER_C, MPI_INT, &big);
  MPI_Type_commit(&big);
  int one = 42;
  int* in = calloc(2, sizeof(int)); /* the message's one int would land at in[1] */
  MPI_Request sreq;
  MPI_Status st;
  st.MPI_ERROR = KEEP_ERR;
  CHECK_RC(MPI_Isend(&one, 1, MPI_INT, right, 6, comm, &sreq));
  const int rc = MPI_Recv(in, 1, big, left, 6, comm, &st);
  CHECK(rc != MPI_SUCCESS, "a message ending inside an item of an undecodable type was accepted");
  CHECK(st.MPI_ERROR == KEEP_ERR, "MPI_ERROR written (%d)", st.MPI_ERROR);
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  CHECK(strstr(text, "layout") != NULL, "error text '%s' does not name the cause", text);
  CHECK_RC(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
  free(in);
  MPI_Type_free(&big);
  MPI_Barrier(comm);
}

/* --- status rules ------------------------------------------------------- */

static int err_class(int code) {
  int c = -1;
  MPI_Error_class(code, &c);
  return c;
}

/* 10 ints to the right; the receive from the left takes `rcount`. */
static void truncations(MPI_Comm comm, MPI_Comm native) {
  int data[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, in[10], in2[10];
  MPI_Status st, sts[3];
  MPI_Request sreq, reqs[3];
  int rc, flag, outcount, idx, indices[3];
  /* single completion: the error is the return code, MPI_ERROR stays */
  for (int how = 0; how < 5; ++how) {
    static const char* names[] = {"Recv", "Wait", "Test", "Waitany", "Sendrecv"};
    snprintf(ctx, sizeof ctx, "truncated %s", names[how]);
    t_context = ctx;
    st.MPI_ERROR = KEEP_ERR;
    if (how == 4) {
      rc = MPI_Sendrecv(data, 10, MPI_INT, right, 7, in, 4, MPI_INT, left, 7, comm, &st);
    } else {
      CHECK_RC(MPI_Isend(data, 10, MPI_INT, right, 7, comm, &sreq));
      if (how == 0) {
        rc = MPI_Recv(in, 4, MPI_INT, left, 7, comm, &st);
      } else {
        CHECK_RC(MPI_Irecv(in, 4, MPI_INT, left, 7, comm, &reqs[0]));
        if (how == 1) rc = MPI_Wait(&reqs[0], &st);
        else if (how == 2) do rc = MPI_Test(&reqs[0], &flag, &st); while (rc == MPI_SUCCESS && !flag);
        else rc = MPI_Waitany(1, reqs, &idx, &st);
      }
      CHECK_RC(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
    }
    CHECK(err_class(rc) == MPI_ERR_TRUNCATE, "rc class %d", err_class(rc));
    CHECK(st.MPI_ERROR == KEEP_ERR, "MPI_ERROR written (%d)", st.MPI_ERROR);
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 7, "source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
    MPI_Barrier(comm);
  }
  /* multiple completion with a failure: MPI_ERR_IN_STATUS, every completed status's MPI_ERROR written */
  for (int how = 0; how < 4; ++how) {
    static const char* names[] = {"Waitall", "Testall", "Waitsome", "Testsome"};
    snprintf(ctx, sizeof ctx, "truncated in %s", names[how]);
    t_context = ctx;
    for (int i = 0; i < 3; ++i) sts[i].MPI_ERROR = KEEP_ERR;
    CHECK_RC(MPI_Irecv(in2, 10, MPI_INT, left, 8, comm, &reqs[0]));
    CHECK_RC(MPI_Irecv(in, 4, MPI_INT, left, 9, comm, &reqs[1]));
    reqs[2] = MPI_REQUEST_NULL;
    MPI_Request sr[2];
    CHECK_RC(MPI_Isend(data, 10, MPI_INT, right, 8, comm, &sr[0]));
    CHECK_RC(MPI_Isend(data, 10, MPI_INT, right, 9, comm, &sr[1]));
    CHECK_RC(MPI_Waitall(2, sr, MPI_STATUSES_IGNORE));
    MPI_Barrier(comm); /* both messages are here: Waitsome/Testsome see both */
    if (how == 0) {
      rc = MPI_Waitall(3, reqs, sts);
    } else if (how == 1) {
      do rc = MPI_Testall(3, reqs, &flag, sts); while (rc == MPI_SUCCESS && !flag);
    } else {
      /* The good receive may complete in an earlier call that succeeds (MPI_ERROR kept) or in the
       * failing one (MPI_SUCCESS written). */
      int got = 0;
      rc = MPI_SUCCESS;
      while (got < 2 && rc == MPI_SUCCESS) {
        MPI_Status some[3];
        for (int i = 0; i < 3; ++i) some[i].MPI_ERROR = KEEP_ERR;
        outcount = 0;
        if (how == 2) rc = MPI_Waitsome(3, reqs, &outcount, indices, some);
        else rc = MPI_Testsome(3, reqs, &outcount, indices, some);
        if (outcount == MPI_UNDEFINED) break;
        for (int k = 0; k < outcount; ++k) {
          if (indices[k] == 1)
            CHECK(err_class(some[k].MPI_ERROR) == MPI_ERR_TRUNCATE, "MPI_ERROR of the truncated receive %d",
                  some[k].MPI_ERROR);
          else
            CHECK(rc == MPI_ERR_IN_STATUS ? some[k].MPI_ERROR == MPI_SUCCESS : error_kept(some[k].MPI_ERROR, 1),
                  "MPI_ERROR of the good receive %d (rc %d)", some[k].MPI_ERROR, rc);
        }
        got += outcount;
      }
    }
    CHECK(rc == MPI_ERR_IN_STATUS, "rc %d (class %d) want MPI_ERR_IN_STATUS", rc, err_class(rc));
    if (how == 0 || how == 1) {
      CHECK(sts[0].MPI_ERROR == MPI_SUCCESS, "MPI_ERROR of the good receive %d", sts[0].MPI_ERROR);
      CHECK(err_class(sts[1].MPI_ERROR) == MPI_ERR_TRUNCATE, "MPI_ERROR of the truncated receive %d",
            sts[1].MPI_ERROR);
      CHECK(sts[2].MPI_ERROR == MPI_SUCCESS, "MPI_ERROR of the null request %d", sts[2].MPI_ERROR);
    }
    MPI_Barrier(comm);
  }
  /* a mixed array: the native (cart comm) receive is truncated, the offloaded one is fine */
  t_context = "truncated native receive in a mixed Waitall";
  for (int i = 0; i < 2; ++i) sts[i].MPI_ERROR = KEEP_ERR;
  CHECK_RC(MPI_Irecv(in2, 10, MPI_INT, left, 10, comm, &reqs[0]));
  CHECK_RC(MPI_Irecv(in, 4, MPI_INT, left, 10, native, &reqs[1]));
  MPI_Request sr[2];
  CHECK_RC(MPI_Isend(data, 10, MPI_INT, right, 10, comm, &sr[0]));
  CHECK_RC(MPI_Isend(data, 10, MPI_INT, right, 10, native, &sr[1]));
  rc = MPI_Waitall(2, reqs, sts);
  CHECK(rc == MPI_ERR_IN_STATUS, "rc %d want MPI_ERR_IN_STATUS", rc);
  CHECK(sts[0].MPI_ERROR == MPI_SUCCESS, "MPI_ERROR of the good offloaded receive %d", sts[0].MPI_ERROR);
  CHECK(err_class(sts[1].MPI_ERROR) == MPI_ERR_TRUNCATE, "MPI_ERROR of the truncated native receive %d",
        sts[1].MPI_ERROR);
  CHECK_RC(MPI_Waitall(2, sr, MPI_STATUSES_IGNORE));
  MPI_Barrier(comm);
}

/* Successful completions of every kind leave MPI_ERROR alone. */
static void successes(MPI_Comm comm, MPI_Comm native) {
  int a = rank, b = -1, c = -1, flag = 0, idx, outcount, indices[4];
  MPI_Status st, sts[4];
  MPI_Request reqs[4];
#define FRESH()                                                   \
  do {                                                            \
    st.MPI_ERROR = KEEP_ERR;                                      \
    for (int i_ = 0; i_ < 4; ++i_) sts[i_].MPI_ERROR = KEEP_ERR; \
  } while (0)
#define KEPT(s, what) CHECK(error_kept((s).MPI_ERROR, 0), "%s wrote MPI_ERROR (%d)", what, (s).MPI_ERROR)
#define KEPT_MULTI(s, what) CHECK(error_kept((s).MPI_ERROR, 1), "%s wrote MPI_ERROR (%d)", what, (s).MPI_ERROR)
  t_context = "successful completions";
  /* mixed Waitall: offloaded + native receives and sends */
  FRESH();
  CHECK_RC(MPI_Irecv(&b, 1, MPI_INT, left, 11, comm, &reqs[0]));
  CHECK_RC(MPI_Irecv(&c, 1, MPI_INT, left, 11, native, &reqs[1]));
  CHECK_RC(MPI_Isend(&a, 1, MPI_INT, right, 11, comm, &reqs[2]));
  CHECK_RC(MPI_Isend(&a, 1, MPI_INT, right, 11, native, &reqs[3]));
  CHECK_RC(MPI_Waitall(4, reqs, sts));
  for (int i = 0; i < 4; ++i) KEPT_MULTI(sts[i], "mixed MPI_Waitall");
  CHECK(b == left && c == left, "mixed data %d %d", b, c);
  /* Testall, Waitsome, Testsome, Waitany, Testany, Request_get_status, Wait and Test of a send */
  for (int how = 0; how < 8; ++how) {
    FRESH();
    CHECK_RC(MPI_Irecv(&b, 1, MPI_INT, left, 12, comm, &reqs[0]));
    CHECK_RC(MPI_Isend(&a, 1, MPI_INT, right, 12, comm, &reqs[1]));
    int done = 0;
    switch (how) {
      case 0: while (!flag) CHECK_RC(MPI_Testall(2, reqs, &flag, sts)); flag = 0; break;
      case 1:
      case 2:
        while (done < 2) {
          if (how == 1) CHECK_RC(MPI_Waitsome(2, reqs, &outcount, indices, sts));
          else CHECK_RC(MPI_Testsome(2, reqs, &outcount, indices, sts));
          for (int k = 0; k < outcount; ++k) KEPT_MULTI(sts[k], how == 1 ? "MPI_Waitsome" : "MPI_Testsome");
          done += outcount;
        }
        break;
      case 3: CHECK_RC(MPI_Waitany(2, reqs, &idx, &st)); CHECK_RC(MPI_Waitany(2, reqs, &idx, &sts[1])); break;
      case 4:
        for (int got = 0; got < 2;) {
          CHECK_RC(MPI_Testany(2, reqs, &idx, &flag, &sts[got]));
          if (flag && idx != MPI_UNDEFINED) ++got;
        }
        flag = 0;
        break;
      case 5:
        while (!flag) CHECK_RC(MPI_Request_get_status(reqs[0], &flag, &st));
        flag = 0;
        CHECK_RC(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
        break;
      case 6: CHECK_RC(MPI_Wait(&reqs[1], &st)); CHECK_RC(MPI_Wait(&reqs[0], &sts[0])); break;
      case 7:
        while (!flag) CHECK_RC(MPI_Test(&reqs[1], &flag, &st));
        flag = 0;
        while (!flag) CHECK_RC(MPI_Test(&reqs[0], &flag, &sts[0]));
        flag = 0;
        break;
    }
    KEPT(st, "a single completion");
    for (int i = 0; i < 2; ++i) {
      if (how <= 2) KEPT_MULTI(sts[i], "a multiple completion");
      else KEPT(sts[i], "a single completion");
    }
  }
  /* null and inactive requests, an Iprobe that finds nothing, Sendrecv, a non-blocking collective */
  FRESH();
  reqs[0] = MPI_REQUEST_NULL;
  CHECK_RC(MPI_Wait(&reqs[0], &st));
  KEPT(st, "MPI_Wait on MPI_REQUEST_NULL");
  CHECK_RC(MPI_Recv_init(&b, 1, MPI_INT, left, 13, comm, &reqs[0]));
  CHECK_RC(MPI_Wait(&reqs[0], &st));
  KEPT(st, "MPI_Wait on an inactive persistent request");
  MPI_Request_free(&reqs[0]);
  CHECK_RC(MPI_Iprobe(left, 14, comm, &flag, &st));
  KEPT(st, "MPI_Iprobe without a message");
  CHECK_RC(MPI_Sendrecv(&a, 1, MPI_INT, right, 15, &b, 1, MPI_INT, left, 15, comm, &st));
  KEPT(st, "MPI_Sendrecv");
  CHECK_RC(MPI_Ibcast(&a, 1, MPI_INT, 0, comm, &reqs[0]));
  CHECK_RC(MPI_Wait(&reqs[0], &st));
  KEPT(st, "MPI_Wait of an MPI_Ibcast");
  CHECK_RC(MPI_Iallreduce(&rank, &b, 1, MPI_INT, MPI_SUM, comm, &reqs[0]));
  CHECK_RC(MPI_Waitall(1, reqs, sts));
  KEPT_MULTI(sts[0], "MPI_Waitall of an MPI_Iallreduce");
  MPI_Barrier(comm);
}

int main(int argc, char** argv) {
  init_world(&argc, &argv, &rank, &size);
  const int quick = mode_is(argc, argv, "quick");
  right = (rank + 1) % size;
  left = (rank + size - 1) % size;
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm cart = ring_cart(size);
  MPI_Comm_set_errhandler(cart, MPI_ERRORS_RETURN);
  make_shapes();
  short_receives(comm, quick);
  undecodable_layout(comm);
  truncations(comm, cart);
  successes(comm, cart);
  for (int k = 0; k < NSHAPES; ++k)
    if (shapes[k].type != MPI_DOUBLE_INT) MPI_Type_free(&shapes[k].type);
  MPI_Comm_free(&cart);
  MPI_Comm_free(&comm);
  expect_offloaded_with_peers(size, "MPI_Recv", "MPI_Irecv", "MPI_Mrecv", NULL);
  return finish("test_recv_status");
}
