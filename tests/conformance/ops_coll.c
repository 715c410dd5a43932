/* SPDX-License-Identifier: Apache-2.0
 *
 * Collective operations of the interleaving stress program: the ones the
 * layer can offload, and native ones it must coexist with. */
#include <unistd.h>

#include "interleave.h"

static MPI_Op op_left;  /* non-commutative: a op b = a, so the result is rank 0's value */
static MPI_Op op_dmax;  /* commutative maximum of doubles, user-defined */

static void left_fn(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  memcpy(inout, in, (size_t)*len * sizeof(int));
}

static void dmax_fn(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const double* a = in;
  double* b = inout;
  for (int i = 0; i < *len; i++)
    if (a[i] > b[i]) b[i] = a[i];
}

void ops_coll_init(void) {
  CF_RC(MPI_Op_create(left_fn, 0, &op_left));
  CF_RC(MPI_Op_create(dmax_fn, 1, &op_dmax));
}

void ops_coll_fini(void) {
  CF_RC(MPI_Op_free(&op_left));
  CF_RC(MPI_Op_free(&op_dmax));
}

/* The value rank r contributes at index i in step s: small signed integers,
 * so sums are exact in int and double. */
static int contribution(int step, int r, int i) { return (int)(((unsigned)i * 31u + (unsigned)r * 17u + (unsigned)step * 7u) % 2001u) - 1000; }

static const int coll_counts[] = {1, 3, 17, 256, 1500, 20000};
#define N_COLL_COUNTS ((int)(sizeof coll_counts / sizeof coll_counts[0]))

/* Waits for a non-blocking collective (checks the status rule too). */
static void finish(MPI_Request* req, int by_test, const char* call) {
  MPI_Status st;
  int flag = 0;
  cf_status_prefill(&st, 1);
  if (by_test)
    while (!flag) CF_RC(MPI_Test(req, &flag, &st));
  else CF_RC(MPI_Wait(req, &st));
  CF_CHECK(!cf_check_mpi_error || st.MPI_ERROR == CF_ERR_SENTINEL, "completing %s wrote status.MPI_ERROR (%d)", call, st.MPI_ERROR);
}

enum coll_kind {
  CK_BCAST, CK_ALLREDUCE_INT, CK_ALLREDUCE_DOUBLE, CK_ALLREDUCE_IN_PLACE, CK_REDUCE_MAX, CK_REDUCE_MIN,
  CK_GATHER, CK_SCATTER, CK_ALLGATHER, CK_ALLTOALL, CK_BARRIER, CK_REDUCE_SCATTER_BLOCK, CK_REDUCE_SCATTER,
  CK_COUNT
};
static const char* const coll_name[CK_COUNT] = {
  "Bcast", "Allreduce(int,SUM)", "Allreduce(double,SUM)", "Allreduce(IN_PLACE,SUM)", "Reduce(MAX)",
  "Reduce(MIN)", "Gather", "Scatter", "Allgather", "Alltoall", "Barrier", "Reduce_scatter_block",
  "Reduce_scatter"};

void op_collective(cf_ctx* c) {
  int kind = cf_below(&c->g, CK_COUNT), nb = cf_below(&c->g, 3) == 0, by_test = cf_below(&c->g, 2);
  int count = coll_counts[cf_below(&c->g, N_COLL_COUNTS)], root = cf_below(&c->g, c->size);
  int n = c->size, me = c->rank;
  size_t block = (size_t)count * sizeof(int);
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Request* rq = nb ? &req : NULL;
  cf_where("step %d: %s%s, %d ints, root %d", c->step, nb ? "I" : "", coll_name[kind], count, root);
  int* a = cf_malloc(block * (size_t)n);
  int* b = cf_malloc(block * (size_t)n);
  double* da = NULL;
  double* db = NULL;
  memset(b, CF_GUARD, block * (size_t)n);
#define RUN(blocking, nonblocking)                         \
  do {                                                     \
    if (rq) {                                              \
      CF_RC(nonblocking);                                  \
      finish(rq, by_test, coll_name[kind]);                \
    } else {                                               \
      CF_RC(blocking);                                     \
    }                                                      \
  } while (0)
  switch (kind) {
    case CK_BCAST:
      if (me == root) cf_fill(b, block, cf_salt(c->step, root, 0, 0));
      RUN(MPI_Bcast(b, count, MPI_INT, root, c->comm), MPI_Ibcast(b, count, MPI_INT, root, c->comm, rq));
      cf_verify(b, block, cf_salt(c->step, root, 0, 0), "bcast data");
      break;
    case CK_ALLREDUCE_INT:
    case CK_ALLREDUCE_IN_PLACE:
      for (int i = 0; i < count; i++) a[i] = contribution(c->step, me, i);
      if (kind == CK_ALLREDUCE_IN_PLACE) {
        memcpy(b, a, block);
        RUN(MPI_Allreduce(MPI_IN_PLACE, b, count, MPI_INT, MPI_SUM, c->comm),
            MPI_Iallreduce(MPI_IN_PLACE, b, count, MPI_INT, MPI_SUM, c->comm, rq));
      } else {
        RUN(MPI_Allreduce(a, b, count, MPI_INT, MPI_SUM, c->comm),
            MPI_Iallreduce(a, b, count, MPI_INT, MPI_SUM, c->comm, rq));
      }
      for (int i = 0, bad = 0; i < count && bad < 3; i++) {
        int want = 0;
        for (int r = 0; r < n; r++) want += contribution(c->step, r, i);
        if (b[i] != want) { CF_CHECK(0, "allreduce[%d] = %d, want %d", i, b[i], want); bad++; }
      }
      break;
    case CK_ALLREDUCE_DOUBLE:
      da = cf_malloc((size_t)count * sizeof(double));
      db = cf_malloc((size_t)count * sizeof(double));
      for (int i = 0; i < count; i++) da[i] = contribution(c->step, me, i) * 0.5;
      RUN(MPI_Allreduce(da, db, count, MPI_DOUBLE, MPI_SUM, c->comm),
          MPI_Iallreduce(da, db, count, MPI_DOUBLE, MPI_SUM, c->comm, rq));
      for (int i = 0, bad = 0; i < count && bad < 3; i++) {
        double want = 0;
        for (int r = 0; r < n; r++) want += contribution(c->step, r, i) * 0.5;
        if (db[i] != want) { CF_CHECK(0, "allreduce[%d] = %g, want %g", i, db[i], want); bad++; }
      }
      break;
    case CK_REDUCE_MAX:
    case CK_REDUCE_MIN: {
      MPI_Op op = kind == CK_REDUCE_MAX ? MPI_MAX : MPI_MIN;
      for (int i = 0; i < count; i++) a[i] = contribution(c->step, me, i);
      RUN(MPI_Reduce(a, b, count, MPI_INT, op, root, c->comm),
          MPI_Ireduce(a, b, count, MPI_INT, op, root, c->comm, rq));
      if (me == root) {
        for (int i = 0, bad = 0; i < count && bad < 3; i++) {
          int want = contribution(c->step, 0, i);
          for (int r = 1; r < n; r++) {
            int v = contribution(c->step, r, i);
            if (kind == CK_REDUCE_MAX ? v > want : v < want) want = v;
          }
          if (b[i] != want) { CF_CHECK(0, "reduce[%d] = %d, want %d", i, b[i], want); bad++; }
        }
      } else {
        cf_verify_guard(b, block, "reduce's receive buffer on a non-root");
      }
      break;
    }
    case CK_GATHER:
      cf_fill(a, block, cf_salt(c->step, me, root, 1));
      RUN(MPI_Gather(a, count, MPI_INT, b, count, MPI_INT, root, c->comm),
          MPI_Igather(a, count, MPI_INT, b, count, MPI_INT, root, c->comm, rq));
      if (me == root)
        for (int r = 0; r < n; r++) cf_verify((char*)b + block * r, block, cf_salt(c->step, r, root, 1), "gathered block");
      break;
    case CK_SCATTER:
      if (me == root)
        for (int r = 0; r < n; r++) cf_fill((char*)a + block * r, block, cf_salt(c->step, root, r, 2));
      RUN(MPI_Scatter(a, count, MPI_INT, b, count, MPI_INT, root, c->comm),
          MPI_Iscatter(a, count, MPI_INT, b, count, MPI_INT, root, c->comm, rq));
      cf_verify(b, block, cf_salt(c->step, root, me, 2), "scattered block");
      cf_verify_guard((char*)b + block, block * (n - 1), "scatter's receive buffer beyond the block");
      break;
    case CK_ALLGATHER:
      cf_fill(a, block, cf_salt(c->step, me, 0, 3));
      RUN(MPI_Allgather(a, count, MPI_INT, b, count, MPI_INT, c->comm),
          MPI_Iallgather(a, count, MPI_INT, b, count, MPI_INT, c->comm, rq));
      for (int r = 0; r < n; r++) cf_verify((char*)b + block * r, block, cf_salt(c->step, r, 0, 3), "allgathered block");
      break;
    case CK_ALLTOALL:
      for (int r = 0; r < n; r++) cf_fill((char*)a + block * r, block, cf_salt(c->step, me, r, 4));
      RUN(MPI_Alltoall(a, count, MPI_INT, b, count, MPI_INT, c->comm),
          MPI_Ialltoall(a, count, MPI_INT, b, count, MPI_INT, c->comm, rq));
      for (int r = 0; r < n; r++) cf_verify((char*)b + block * r, block, cf_salt(c->step, r, me, 4), "alltoall block");
      break;
    case CK_BARRIER:
      RUN(MPI_Barrier(c->comm), MPI_Ibarrier(c->comm, rq));
      break;
    case CK_REDUCE_SCATTER_BLOCK:
    case CK_REDUCE_SCATTER: {
      int* counts = cf_malloc((size_t)n * sizeof(int));
      for (int r = 0; r < n; r++) counts[r] = count;
      for (int i = 0; i < count * n; i++) a[i] = contribution(c->step, me, i);
      if (kind == CK_REDUCE_SCATTER_BLOCK)
        RUN(MPI_Reduce_scatter_block(a, b, count, MPI_INT, MPI_SUM, c->comm),
            MPI_Ireduce_scatter_block(a, b, count, MPI_INT, MPI_SUM, c->comm, rq));
      else
        RUN(MPI_Reduce_scatter(a, b, counts, MPI_INT, MPI_SUM, c->comm),
            MPI_Ireduce_scatter(a, b, counts, MPI_INT, MPI_SUM, c->comm, rq));
      for (int i = 0, bad = 0; i < count && bad < 3; i++) {
        int want = 0;
        for (int r = 0; r < n; r++) want += contribution(c->step, r, me * count + i);
        if (b[i] != want) { CF_CHECK(0, "reduce_scatter[%d] = %d, want %d", i, b[i], want); bad++; }
      }
      free(counts);
      break;
    }
    default:
      CF_CHECK(0, "bad collective %d", kind);
  }
#undef RUN
  free(a);
  free(b);
  free(da);
  free(db);
}

enum native_kind {
  NK_USER_OP_NONCOMMUTATIVE, NK_USER_OP_MAX, NK_BAND, NK_BOR_BXOR, NK_MAXLOC, NK_DUP_FREE, NK_SPLIT_FREE,
  NK_ALLTOALLV, NK_SCAN, NK_EXSCAN, NK_ALLGATHERV, NK_WIN_FENCE, NK_COUNT
};
static const char* const native_name[NK_COUNT] = {
  "Allreduce(user op, non-commutative)", "Reduce(user op max, double)", "Allreduce(BAND)",
  "Reduce(BOR)+Allreduce(BXOR)", "Allreduce(MAXLOC, 2INT)", "Comm_dup+Comm_free", "Comm_split+Comm_free",
  "Alltoallv", "Scan", "Exscan", "Allgatherv", "Win_create+Put+Win_fence"};

void op_native(cf_ctx* c) {
  int kind = cf_below(&c->g, NK_COUNT), root = cf_below(&c->g, c->size);
  int count = coll_counts[cf_below(&c->g, 4)];
  int n = c->size, me = c->rank, world_size;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  /* Open MPI 4.1's MPI_Win_create fails on a one-rank communicator, and now
     and then (open(2) of its shared-memory segment, ENOENT) when the two
     halves of a split create windows at the same time: windows only on
     communicators that hold every rank */
  if (kind == NK_WIN_FENCE && n != world_size) kind = NK_ALLTOALLV;
  cf_where("step %d: native %s, %d elements, root %d", c->step, native_name[kind], count, root);
  switch (kind) {
    case NK_USER_OP_NONCOMMUTATIVE: {
      int* a = cf_malloc((size_t)count * sizeof(int));
      int* b = cf_malloc((size_t)count * sizeof(int));
      for (int i = 0; i < count; i++) a[i] = contribution(c->step, me, i);
      CF_RC(MPI_Allreduce(a, b, count, MPI_INT, op_left, c->comm));
      for (int i = 0, bad = 0; i < count && bad < 3; i++)
        if (b[i] != contribution(c->step, 0, i)) { CF_CHECK(0, "left-projection[%d] = %d", i, b[i]); bad++; }
      free(a);
      free(b);
      break;
    }
    case NK_USER_OP_MAX: {
      double* a = cf_malloc((size_t)count * sizeof(double));
      double* b = cf_malloc((size_t)count * sizeof(double));
      for (int i = 0; i < count; i++) a[i] = contribution(c->step, me, i) + 0.25;
      CF_RC(MPI_Reduce(a, b, count, MPI_DOUBLE, op_dmax, root, c->comm));
      if (me == root)
        for (int i = 0, bad = 0; i < count && bad < 3; i++) {
          double want = contribution(c->step, 0, i) + 0.25;
          for (int r = 1; r < n; r++)
            if (contribution(c->step, r, i) + 0.25 > want) want = contribution(c->step, r, i) + 0.25;
          if (b[i] != want) { CF_CHECK(0, "user max[%d] = %g, want %g", i, b[i], want); bad++; }
        }
      free(a);
      free(b);
      break;
    }
    case NK_BAND:
    case NK_BOR_BXOR: {
      unsigned* a = cf_malloc((size_t)count * sizeof(unsigned));
      unsigned* b = cf_malloc((size_t)count * sizeof(unsigned));
      unsigned* x = cf_malloc((size_t)count * sizeof(unsigned));
      for (int i = 0; i < count; i++) a[i] = (unsigned)cf_next(&(cf_rng){cf_salt(c->step, me, i, 9)});
      if (kind == NK_BAND) {
        CF_RC(MPI_Allreduce(a, b, count, MPI_UNSIGNED, MPI_BAND, c->comm));
      } else {
        CF_RC(MPI_Reduce(a, b, count, MPI_UNSIGNED, MPI_BOR, root, c->comm));
        CF_RC(MPI_Allreduce(a, x, count, MPI_UNSIGNED, MPI_BXOR, c->comm));
      }
      for (int i = 0, bad = 0; i < count && bad < 3; i++) {
        unsigned band = ~0u, bor = 0, bxor = 0;
        for (int r = 0; r < n; r++) {
          unsigned v = (unsigned)cf_next(&(cf_rng){cf_salt(c->step, r, i, 9)});
          band &= v, bor |= v, bxor ^= v;
        }
        if (kind == NK_BAND && b[i] != band) { CF_CHECK(0, "band[%d] = %x, want %x", i, b[i], band); bad++; }
        if (kind == NK_BOR_BXOR && me == root && b[i] != bor) { CF_CHECK(0, "bor[%d] = %x, want %x", i, b[i], bor); bad++; }
        if (kind == NK_BOR_BXOR && x[i] != bxor) { CF_CHECK(0, "bxor[%d] = %x, want %x", i, x[i], bxor); bad++; }
      }
      free(a);
      free(b);
      free(x);
      break;
    }
    case NK_MAXLOC: {
      int in[2] = {contribution(c->step, me, 0), me}, out[2] = {0, 0}, want[2] = {contribution(c->step, 0, 0), 0};
      for (int r = 1; r < n; r++)
        if (contribution(c->step, r, 0) > want[0]) want[0] = contribution(c->step, r, 0), want[1] = r;
      CF_RC(MPI_Allreduce(in, out, 1, MPI_2INT, MPI_MAXLOC, c->comm));
      CF_CHECK(out[0] == want[0] && out[1] == want[1], "maxloc (%d,%d), want (%d,%d)", out[0], out[1], want[0], want[1]);
      break;
    }
    case NK_DUP_FREE:
    case NK_SPLIT_FREE: {
      MPI_Comm d;
      int v = me == root ? c->step : -1, dr, ds;
      if (kind == NK_DUP_FREE) CF_RC(MPI_Comm_dup(c->comm, &d));
      else CF_RC(MPI_Comm_split(c->comm, 0, n - me, &d)); /* one colour, ranks reversed */
      MPI_Comm_rank(d, &dr);
      MPI_Comm_size(d, &ds);
      CF_CHECK(ds == n && dr == (kind == NK_DUP_FREE ? me : n - 1 - me), "new comm: rank %d of %d", dr, ds);
      CF_RC(MPI_Bcast(&v, 1, MPI_INT, kind == NK_DUP_FREE ? root : n - 1 - root, d));
      CF_CHECK(v == c->step, "bcast on the new comm gave %d", v);
      CF_RC(MPI_Comm_free(&d));
      break;
    }
    case NK_ALLTOALLV:
    case NK_ALLGATHERV: {
      int *sc = cf_malloc(sizeof(int) * n), *sd = cf_malloc(sizeof(int) * n), *rc = cf_malloc(sizeof(int) * n),
          *rd = cf_malloc(sizeof(int) * n);
      int stot = 0, rtot = 0;
      for (int r = 0; r < n; r++) {
        /* bytes from me to r, and from r to me; allgatherv: r's block */
        sc[r] = kind == NK_ALLTOALLV ? ((me + 2 * r + c->step) % 5) * count : (me + c->step) % 4 * count;
        rc[r] = kind == NK_ALLTOALLV ? ((r + 2 * me + c->step) % 5) * count : (r + c->step) % 4 * count;
        sd[r] = stot, rd[r] = rtot;
        stot += sc[r], rtot += rc[r];
      }
      char* s = cf_malloc((size_t)stot + 1);
      char* rb = cf_malloc((size_t)rtot + 1);
      memset(rb, CF_GUARD, (size_t)rtot + 1);
      if (kind == NK_ALLTOALLV) {
        for (int r = 0; r < n; r++) cf_fill(s + sd[r], (size_t)sc[r], cf_salt(c->step, me, r, 5));
        CF_RC(MPI_Alltoallv(s, sc, sd, MPI_BYTE, rb, rc, rd, MPI_BYTE, c->comm));
        for (int r = 0; r < n; r++) cf_verify(rb + rd[r], (size_t)rc[r], cf_salt(c->step, r, me, 5), "alltoallv block");
      } else {
        cf_fill(s, (size_t)sc[0], cf_salt(c->step, me, 0, 6));
        CF_RC(MPI_Allgatherv(s, sc[0], MPI_BYTE, rb, rc, rd, MPI_BYTE, c->comm));
        for (int r = 0; r < n; r++) cf_verify(rb + rd[r], (size_t)rc[r], cf_salt(c->step, r, 0, 6), "allgatherv block");
      }
      cf_verify_guard(rb + rtot, 1, "beyond the v-collective's data");
      free(sc), free(sd), free(rc), free(rd), free(s), free(rb);
      break;
    }
    case NK_SCAN:
    case NK_EXSCAN: {
      long long* a = cf_malloc((size_t)count * sizeof(long long));
      long long* b = cf_malloc((size_t)count * sizeof(long long));
      for (int i = 0; i < count; i++) a[i] = contribution(c->step, me, i), b[i] = -7777;
      if (kind == NK_SCAN) CF_RC(MPI_Scan(a, b, count, MPI_LONG_LONG, MPI_SUM, c->comm));
      else CF_RC(MPI_Exscan(a, b, count, MPI_LONG_LONG, MPI_SUM, c->comm));
      if (kind == NK_SCAN || me > 0)
        for (int i = 0, bad = 0; i < count && bad < 3; i++) {
          long long want = 0;
          for (int r = 0; r < (kind == NK_SCAN ? me + 1 : me); r++) want += contribution(c->step, r, i);
          if (b[i] != want) { CF_CHECK(0, "%s[%d] = %lld, want %lld", native_name[kind], i, b[i], want); bad++; }
        }
      free(a);
      free(b);
      break;
    }
    case NK_WIN_FENCE: {
      size_t bytes = (size_t)count * sizeof(int);
      char* mem = cf_malloc(bytes);
      char* out = cf_malloc(bytes);
      MPI_Win win;
      cf_fill(out, bytes, cf_salt(c->step, me, (me + 1) % n, 7));
      memset(mem, CF_GUARD, bytes);
      CF_RC(MPI_Win_create(mem, (MPI_Aint)bytes, 1, MPI_INFO_NULL, c->comm, &win));
      CF_RC(MPI_Win_fence(0, win));
      CF_RC(MPI_Put(out, (int)bytes, MPI_BYTE, (me + 1) % n, 0, (int)bytes, MPI_BYTE, win));
      CF_RC(MPI_Win_fence(0, win));
      cf_verify(mem, bytes, cf_salt(c->step, (me + n - 1) % n, me, 7), "window after Put and fence");
      CF_RC(MPI_Win_free(&win));
      free(mem);
      free(out);
      break;
    }
    default:
      CF_CHECK(0, "bad native call %d", kind);
  }
}

void op_bcast_run(cf_ctx* c, int per_root, int roots) {
  int first = cf_below(&c->g, c->size), count = 1 + cf_below(&c->g, 2) * cf_below(&c->g, 64);
  int lagger = cf_below(&c->g, c->size);
  int* v = cf_malloc((size_t)count * sizeof(int));
  for (int k = 0; k < roots; k++) {
    int root = (first + k) % c->size, bad = 0;
    cf_where("step %d: run of %d bcasts of %d ints from root %d", c->step, per_root, count, root);
    for (int i = 0; i < per_root; i++) {
      uint64_t salt = cf_salt(c->step, root, k, i);
      /* one non-root falls behind now and then, so the root runs far ahead */
      if (c->rank == lagger && lagger != root && i % 256 == 255) usleep(2000);
      if (c->rank == root) cf_fill(v, (size_t)count * sizeof(int), salt);
      else memset(v, CF_GUARD, (size_t)count * sizeof(int));
      CF_RC(MPI_Bcast(v, count, MPI_INT, root, c->comm));
      if (bad < 3 && cf_verify(v, (size_t)count * sizeof(int), salt, "bcast in a run")) bad++;
    }
  }
  free(v);
}
