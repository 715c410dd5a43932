/* SPDX-License-Identifier: Apache-2.0
 *
 * Every intercepted collective against PMPI_* on the same data:
 * types x ops x counts (0, 1, odd, larger than an RX buffer, 1 MiB) x roots x
 * MPI_IN_PLACE x blocking/non-blocking x communicators (world, dup, split
 * halves, reversed split, odd subset, a cartesian comm the layer only meets
 * lazily). Receive buffers start from the same sentinel bytes in both runs
 * and are compared whole, so writes outside the result are caught too.
 *
 * Usage: test_colls [quick|smoke]   (quick: world and one split only;
 *                                    smoke: world only, counts up to 7)
 */
#include "common.h"

#include <stdint.h>

enum Kind { K_I32, K_I64, K_U32, K_F32, K_F64, K_C64, K_CONTIG3, K_VEC, K_BYTE };

typedef struct {
  const char* name;
  MPI_Datatype type;
  enum Kind kind;
  int elems;      /* basic elements per item */
  int reducible;  /* predefined ops are defined on it */
  /* Open MPI refuses predefined ops on derived types: reductions are checked
   * against PMPI on the flattened basic type instead. */
  MPI_Datatype ref;
  int ref_mult;
} TC;

static TC types[9];
static int ntypes = 0;

static void add_type(const char* name, MPI_Datatype t, enum Kind k, int elems, int reducible) {
  types[ntypes].name = name;
  types[ntypes].type = t;
  types[ntypes].kind = k;
  types[ntypes].elems = elems;
  types[ntypes].reducible = reducible;
  types[ntypes].ref = t;
  types[ntypes].ref_mult = 1;
  ntypes++;
}

static MPI_Aint extent_of(MPI_Datatype t) {
  MPI_Aint lb, ext;
  PMPI_Type_get_extent(t, &lb, &ext);
  return ext;
}

static double value(int rank, long j, int salt) { return (double)(((rank * 7 + j * 3 + salt) % 5) + 1); }

/* count items of tc, values for `rank`, gaps of non-contiguous types = 0x5A */
static void* make_data(const TC* tc, int count, int rank, int salt) {
  size_t bytes = (size_t)count * (size_t)extent_of(tc->type) + 16;
  unsigned char* p = malloc(bytes);
  memset(p, 0x5A, bytes);
  long n = (long)count * tc->elems;
  for (long j = 0; j < n; ++j) {
    double v = value(rank, j, salt);
    switch (tc->kind) {
      case K_I32: ((int32_t*)p)[j] = (int32_t)v; break;
      case K_I64: ((int64_t*)p)[j] = (int64_t)v; break;
      case K_U32: ((uint32_t*)p)[j] = (uint32_t)v; break;
      case K_F32: case K_CONTIG3: ((float*)p)[j] = (float)v; break;
      case K_F64: case K_C64: ((double*)p)[j] = v; break;
      case K_VEC: ((int32_t*)p)[(j / 2) * 3 + (j % 2) * 2] = (int32_t)v; break; /* int, gap, int */
      case K_BYTE: p[j] = (unsigned char)v; break;
    }
  }
  return p;
}

static void* sentinel(size_t bytes) {
  void* p = malloc(bytes + 16);
  memset(p, 0xA5, bytes + 16);
  return p;
}

static void* twin(const void* p, size_t bytes) {
  void* q = malloc(bytes + 16);
  memcpy(q, p, bytes + 16);
  return q;
}

#define SAME(a, b, bytes, ...) CHECK(memcmp((a), (b), (bytes) + 16) == 0, __VA_ARGS__)

static const char* op_name(MPI_Op op) {
  if (op == MPI_SUM) return "SUM";
  if (op == MPI_MAX) return "MAX";
  if (op == MPI_MIN) return "MIN";
  if (op == MPI_PROD) return "PROD";
  return "op";
}

static char ctx[256];
static const char* comm_label = "";

static void set_ctx(const char* call, const TC* tc, int count, const char* extra) {
  snprintf(ctx, sizeof ctx, "%s comm=%s type=%s count=%d %s", call, comm_label, tc->name, count, extra);
  t_context = ctx;
}

/* The context's extra text for a call in place and/or non-blocking. */
static const char* mode_text(int inplace, int nb) {
  return inplace ? (nb ? "in-place nb" : "in-place") : (nb ? "nb" : "");
}

/* Names the context of a rooted call: its root, in place, non-blocking. */
static void set_root_ctx(const char* call, const TC* tc, int count, int root, int inplace, int nb) {
  char extra[48];
  snprintf(extra, sizeof extra, "root=%d%s%s", root, inplace ? " in-place" : "", nb ? " nb" : "");
  set_ctx(call, tc, count, extra);
}

static int wait_or(int rc, MPI_Request* req) { return rc == MPI_SUCCESS ? MPI_Wait(req, MPI_STATUS_IGNORE) : rc; }

/* ---- reductions ---------------------------------------------------------- */

static void t_allreduce(MPI_Comm comm, const TC* tc, int count, MPI_Op op, int inplace, int nb) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  size_t bytes = (size_t)count * (size_t)extent_of(tc->type);
  char extra[64];
  snprintf(extra, sizeof extra, "%s%s%s", op_name(op), inplace ? " in-place" : "", nb ? " nonblocking" : "");
  set_ctx("allreduce", tc, count, extra);
  void* s = make_data(tc, count, rank, 1);
  void* a = inplace ? twin(s, bytes) : sentinel(bytes);
  void* b = twin(a, bytes);
  MPI_Request req;
  const void* src = inplace ? MPI_IN_PLACE : s;
  int rc = nb ? wait_or(MPI_Iallreduce(src, a, count, tc->type, op, comm, &req), &req)
              : MPI_Allreduce(src, a, count, tc->type, op, comm);
  CHECK_RC(rc);
  PMPI_Allreduce(src, b, count * tc->ref_mult, tc->ref, op, comm);
  SAME(a, b, bytes, "result differs from PMPI");
  free(s), free(a), free(b);
}

static void t_reduce(MPI_Comm comm, const TC* tc, int count, MPI_Op op, int root, int inplace, int nb) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  size_t bytes = (size_t)count * (size_t)extent_of(tc->type);
  char extra[64];
  snprintf(extra, sizeof extra, "%s root=%d%s%s", op_name(op), root, inplace ? " in-place" : "", nb ? " nb" : "");
  set_ctx("reduce", tc, count, extra);
  void* s = make_data(tc, count, rank, 2);
  int ip = inplace && rank == root;
  void* a = ip ? twin(s, bytes) : sentinel(bytes);
  void* b = twin(a, bytes);
  const void* src = ip ? MPI_IN_PLACE : s;
  MPI_Request req;
  int rc = nb ? wait_or(MPI_Ireduce(src, a, count, tc->type, op, root, comm, &req), &req)
              : MPI_Reduce(src, a, count, tc->type, op, root, comm);
  CHECK_RC(rc);
  PMPI_Reduce(src, b, count * tc->ref_mult, tc->ref, op, root, comm);
  if (rank == root) SAME(a, b, bytes, "result differs from PMPI");
  free(s), free(a), free(b);
}

static void t_reduce_scatter(MPI_Comm comm, const TC* tc, int count, MPI_Op op, int inplace, int variant) {
  /* variant 0: _block, 1: vector with equal counts, 2: vector, unequal, 3: _block non-blocking */
  int rank, size;
  rank_size(comm, &rank, &size);
  int* counts = malloc(sizeof(int) * (size_t)size);
  int total = 0;
  for (int i = 0; i < size; ++i) {
    counts[i] = variant == 2 ? count + i : count;
    total += counts[i];
  }
  MPI_Aint ext = extent_of(tc->type);
  size_t in_bytes = (size_t)total * (size_t)ext, out_bytes = inplace ? in_bytes : (size_t)counts[rank] * (size_t)ext;
  char extra[64];
  snprintf(extra, sizeof extra, "%s variant=%d%s", op_name(op), variant, inplace ? " in-place" : "");
  set_ctx("reduce_scatter", tc, count, extra);
  void* s = make_data(tc, total, rank, 3);
  void* a = inplace ? twin(s, in_bytes) : sentinel(out_bytes);
  void* b = twin(a, out_bytes);
  const void* src = inplace ? MPI_IN_PLACE : s;
  int rc;
  MPI_Request req;
  int* ref_counts = malloc(sizeof(int) * (size_t)size);
  for (int i = 0; i < size; ++i) ref_counts[i] = counts[i] * tc->ref_mult;
  if (variant == 0) {
    rc = MPI_Reduce_scatter_block(src, a, count, tc->type, op, comm);
    PMPI_Reduce_scatter_block(src, b, count * tc->ref_mult, tc->ref, op, comm);
  } else if (variant == 3) {
    rc = wait_or(MPI_Ireduce_scatter_block(src, a, count, tc->type, op, comm, &req), &req);
    PMPI_Reduce_scatter_block(src, b, count * tc->ref_mult, tc->ref, op, comm);
  } else {
    rc = MPI_Reduce_scatter(src, a, counts, tc->type, op, comm);
    PMPI_Reduce_scatter(src, b, ref_counts, tc->ref, op, comm);
  }
  free(ref_counts);
  CHECK_RC(rc);
  /* in place: only the first counts[rank] items are defined */
  CHECK(memcmp(a, b, (size_t)counts[rank] * (size_t)ext) == 0, "result differs from PMPI");
  free(s), free(a), free(b), free(counts);
}

/* ---- data movement ---------------------------------------------------------- */

static void t_bcast(MPI_Comm comm, const TC* tc, int count, int root, int nb) {
  int rank;
  MPI_Comm_rank(comm, &rank);
  size_t bytes = (size_t)count * (size_t)extent_of(tc->type);
  char extra[32];
  snprintf(extra, sizeof extra, "root=%d%s", root, nb ? " nb" : "");
  set_ctx("bcast", tc, count, extra);
  void* a = rank == root ? make_data(tc, count, rank, 4) : sentinel(bytes);
  void* b = twin(a, bytes);
  MPI_Request req;
  int rc = nb ? wait_or(MPI_Ibcast(a, count, tc->type, root, comm, &req), &req) : MPI_Bcast(a, count, tc->type, root, comm);
  CHECK_RC(rc);
  PMPI_Bcast(b, count, tc->type, root, comm);
  SAME(a, b, bytes, "result differs from PMPI");
  free(a), free(b);
}

static void t_gather(MPI_Comm comm, const TC* tc, int count, int root, int inplace, int nb) {
  int rank, size;
  rank_size(comm, &rank, &size);
  size_t blk = (size_t)count * (size_t)extent_of(tc->type), all = blk * (size_t)size;
  set_root_ctx("gather", tc, count, root, inplace, nb);
  void* s = make_data(tc, count, rank, 5);
  void* a = sentinel(all);
  int ip = inplace && rank == root;
  if (ip) memcpy((char*)a + (size_t)root * blk, s, blk);
  void* b = twin(a, all);
  const void* src = ip ? MPI_IN_PLACE : s;
  MPI_Request req;
  int rc = nb ? wait_or(MPI_Igather(src, count, tc->type, a, count, tc->type, root, comm, &req), &req)
              : MPI_Gather(src, count, tc->type, a, count, tc->type, root, comm);
  CHECK_RC(rc);
  PMPI_Gather(src, count, tc->type, b, count, tc->type, root, comm);
  if (rank == root) SAME(a, b, all, "result differs from PMPI");
  free(s), free(a), free(b);
}

static void t_scatter(MPI_Comm comm, const TC* tc, int count, int root, int inplace, int nb) {
  int rank, size;
  rank_size(comm, &rank, &size);
  size_t blk = (size_t)count * (size_t)extent_of(tc->type);
  set_root_ctx("scatter", tc, count, root, inplace, nb);
  void* s = make_data(tc, count * size, rank, 6);
  int ip = inplace && rank == root;
  void* a = sentinel(blk);
  void* b = twin(a, blk);
  void* dst_a = ip ? MPI_IN_PLACE : a;
  void* dst_b = ip ? MPI_IN_PLACE : b;
  MPI_Request req;
  int rc = nb ? wait_or(MPI_Iscatter(s, count, tc->type, dst_a, count, tc->type, root, comm, &req), &req)
              : MPI_Scatter(s, count, tc->type, dst_a, count, tc->type, root, comm);
  CHECK_RC(rc);
  PMPI_Scatter(s, count, tc->type, dst_b, count, tc->type, root, comm);
  if (!ip) SAME(a, b, blk, "result differs from PMPI");
  free(s), free(a), free(b);
}

/* MPI_Allgather and MPI_Alltoall: `count` items of tc->type to and from
 * each rank. */
typedef int (*ExchangeFn)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
typedef int (*IexchangeFn)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm, MPI_Request*);

/* Runs the intercepted exchange (blocking, or non-blocking and waited for)
 * from `src` into `a`, and the PMPI one into a copy of a's `bytes` as they
 * were before; the two must match. */
static void exchange_against_pmpi(ExchangeFn call, IexchangeFn icall, ExchangeFn pmpi_call, MPI_Comm comm,
                                  const TC* tc, int count, const void* src, void* a, size_t bytes, int nb) {
  void* b = twin(a, bytes);
  MPI_Request req;
  int rc = nb ? wait_or(icall(src, count, tc->type, a, count, tc->type, comm, &req), &req)
              : call(src, count, tc->type, a, count, tc->type, comm);
  CHECK_RC(rc);
  pmpi_call(src, count, tc->type, b, count, tc->type, comm);
  SAME(a, b, bytes, "result differs from PMPI");
  free(b);
}

static void t_allgather(MPI_Comm comm, const TC* tc, int count, int inplace, int nb) {
  int rank, size;
  rank_size(comm, &rank, &size);
  size_t blk = (size_t)count * (size_t)extent_of(tc->type), all = blk * (size_t)size;
  set_ctx("allgather", tc, count, mode_text(inplace, nb));
  void* s = make_data(tc, count, rank, 7);
  void* a = sentinel(all);
  if (inplace) memcpy((char*)a + (size_t)rank * blk, s, blk);
  exchange_against_pmpi(&MPI_Allgather, &MPI_Iallgather, &PMPI_Allgather, comm, tc, count, inplace ? MPI_IN_PLACE : s,
                        a, all, nb);
  free(s), free(a);
}

static void t_alltoall(MPI_Comm comm, const TC* tc, int count, int inplace, int nb) {
  int rank, size;
  rank_size(comm, &rank, &size);
  size_t all = (size_t)count * (size_t)extent_of(tc->type) * (size_t)size;
  set_ctx("alltoall", tc, count, mode_text(inplace, nb));
  void* s = make_data(tc, count * size, rank, 8);
  void* a = inplace ? twin(s, all) : sentinel(all);
  exchange_against_pmpi(&MPI_Alltoall, &MPI_Ialltoall, &PMPI_Alltoall, comm, tc, count, inplace ? MPI_IN_PLACE : s, a,
                        all, nb);
  free(s), free(a);
}

/* Send and receive types differ in handle but not in signature. */
static void t_mixed_signature(MPI_Comm comm, MPI_Datatype contig3) {
  int rank, size;
  rank_size(comm, &rank, &size);
  t_context = "allgather 3xFLOAT vs 1xcontig3";
  float s[3] = {(float)rank, (float)rank + 0.5f, (float)rank * 2};
  float* a = calloc((size_t)size * 3, sizeof(float));
  float* b = calloc((size_t)size * 3, sizeof(float));
  CHECK_RC(MPI_Allgather(s, 3, MPI_FLOAT, a, 1, contig3, comm));
  PMPI_Allgather(s, 3, MPI_FLOAT, b, 1, contig3, comm);
  CHECK(memcmp(a, b, (size_t)size * 3 * sizeof(float)) == 0, "result differs from PMPI");
  free(a), free(b);
}

static void t_barrier(MPI_Comm comm) {
  t_context = "barrier";
  CHECK_RC(MPI_Barrier(comm));
  MPI_Request req;
  CHECK_RC(MPI_Ibarrier(comm, &req));
  CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
}

/* ---- driver ------------------------------------------------------------------- */

static int smoke = 0;

static void run_comm(MPI_Comm comm, const char* label, int big) {
  if (comm == MPI_COMM_NULL) return;
  comm_label = label;
  int size;
  MPI_Comm_size(comm, &size);
  const int counts[] = {0, 1, 7, 20000};  /* 20000 floats = 80 kB > one 64 kB RX buffer */
  const MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD};
  for (int t = 0; t < ntypes; ++t) {
    const TC* tc = &types[t];
    for (int c = 0; c < (smoke ? 3 : 4); ++c) {
      const int count = counts[c];
      /* Open MPI rejects predefined ops on derived types; the layer runs them on
       * the device, so they are only tried where the layer offloads. */
      const int derived_ok = count > 0 && size > 1 && layer_active();
      if (tc->reducible && (tc->ref_mult == 1 || derived_ok)) {
        for (int o = 0; o < 4; ++o) {
          t_allreduce(comm, tc, count, ops[o], 0, 0);
          if (c == 2 || o == 0) {
            t_allreduce(comm, tc, count, ops[o], 1, 0);
            t_allreduce(comm, tc, count, ops[o], 0, 1);
            t_reduce(comm, tc, count, ops[o], size - 1, 0, 0);
            t_reduce(comm, tc, count, ops[o], 0, 1, o == 0);
            t_reduce_scatter(comm, tc, count > 7 ? 1000 : count, ops[o], 0, 0);
          }
        }
        if (c == 2) {
          t_reduce_scatter(comm, tc, count, MPI_SUM, 1, 0);
          t_reduce_scatter(comm, tc, count, MPI_SUM, 0, 1);
          if (tc->ref_mult == 1) t_reduce_scatter(comm, tc, count, MPI_SUM, 0, 2); /* runs natively */
          t_reduce_scatter(comm, tc, count, MPI_MAX, 1, 1);
          t_reduce_scatter(comm, tc, count, MPI_SUM, 0, 3);
        }
      }
      const int roots = c == 2 ? size : 1;
      for (int r = 0; r < roots; ++r) {
        const int root = c == 2 ? r : size - 1;
        t_bcast(comm, tc, count, root, 0);
        t_gather(comm, tc, count, root, 0, 0);
        t_gather(comm, tc, count, root, 1, 0);
        t_scatter(comm, tc, count, root, 0, 0);
        t_scatter(comm, tc, count, root, 1, 0);
      }
      if (c >= 2) {
        t_bcast(comm, tc, count, 0, 1);
        t_gather(comm, tc, count, 0, 0, 1);
        t_scatter(comm, tc, count, 0, 0, 1);
      }
      t_allgather(comm, tc, count, 0, 0);
      t_allgather(comm, tc, count, 1, 0);
      t_alltoall(comm, tc, count, 0, 0);
      t_alltoall(comm, tc, count, 1, 0);
      if (c >= 2) {
        t_allgather(comm, tc, count, 0, 1);
        t_alltoall(comm, tc, count, 0, 1);
      }
    }
  }
  if (big) {
    /* 1 MiB messages */
    const TC* f32 = &types[3];
    const int n = 262144;
    t_allreduce(comm, f32, n, MPI_SUM, 0, 0);
    t_allreduce(comm, f32, n, MPI_MAX, 1, 0);
    t_reduce(comm, f32, n, MPI_SUM, 0, 0, 0);
    t_bcast(comm, f32, n, 0, 0);
    t_gather(comm, f32, n / size, 0, 0, 0);
    t_scatter(comm, f32, n / size, 0, 0, 0);
    t_allgather(comm, f32, n / size, 0, 0);
    t_alltoall(comm, f32, n / size / size, 0, 0);
    t_reduce_scatter(comm, f32, n / size, MPI_SUM, 0, 0);
  }
  t_barrier(comm);
}

int main(int argc, char** argv) {
  int size;
  init_world(&argc, &argv, &t_rank, &size);
  smoke = mode_is(argc, argv, "smoke");
  const int quick = smoke || mode_is(argc, argv, "quick");

  MPI_Datatype contig3, vec;
  MPI_Type_contiguous(3, MPI_FLOAT, &contig3);
  MPI_Type_commit(&contig3);
  MPI_Type_vector(2, 1, 2, MPI_INT, &vec); /* int, gap, int: non-contiguous */
  MPI_Type_commit(&vec);
  add_type("MPI_INT", MPI_INT, K_I32, 1, 1);
  add_type("MPI_LONG", MPI_LONG, K_I64, 1, 1);
  add_type("MPI_UNSIGNED", MPI_UNSIGNED, K_U32, 1, 1);
  add_type("MPI_FLOAT", MPI_FLOAT, K_F32, 1, 1);
  add_type("MPI_DOUBLE", MPI_DOUBLE, K_F64, 1, 1);
  add_type("MPI_C_DOUBLE_COMPLEX", MPI_C_DOUBLE_COMPLEX, K_C64, 2, 0);
  types[ntypes - 1].ref = MPI_C_DOUBLE_COMPLEX;
  add_type("contiguous(3,FLOAT)", contig3, K_CONTIG3, 3, 1);
  types[ntypes - 1].ref = MPI_FLOAT;
  types[ntypes - 1].ref_mult = 3;
  add_type("vector(2,1,2,INT)", vec, K_VEC, 2, 0);
  add_type("MPI_BYTE", MPI_BYTE, K_BYTE, 1, 0);
  /* complex SUM is valid MPI: exercise it separately (other ops are not) */

  run_comm(MPI_COMM_WORLD, "world", !smoke);
  {
    t_context = "complex sum";
    comm_label = "world";
    t_allreduce(MPI_COMM_WORLD, &types[5], 7, MPI_SUM, 0, 0);
    t_allreduce(MPI_COMM_WORLD, &types[5], 20000, MPI_SUM, 1, 0);
    if (size > 1 && layer_active()) t_allreduce(MPI_COMM_WORLD, &types[6], 7, MPI_SUM, 0, 0);
    t_mixed_signature(MPI_COMM_WORLD, contig3);
  }
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, t_rank % 2, t_rank, &half);
  if (!smoke) run_comm(half, "split-halves", 0);
  if (!quick) {
    MPI_Comm dup, rev, sub, cart;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    run_comm(dup, "dup", 0);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - t_rank, &rev); /* ranks reversed */
    run_comm(rev, "reversed", 0);
    MPI_Group wg, g;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int excl[1] = {0};
    MPI_Group_excl(wg, 1, excl, &g); /* ranks 1..n-1: odd size for np=4 */
    MPI_Comm_create(MPI_COMM_WORLD, g, &sub);
    run_comm(sub, "without-rank-0", 0);
    int dims[1] = {size}, periods[1] = {1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart); /* not wrapped: lazy */
    run_comm(cart, "cart", 0);
    t_mixed_signature(cart, contig3);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&rev);
    if (sub != MPI_COMM_NULL) MPI_Comm_free(&sub);
    MPI_Comm_free(&cart);
  }
  MPI_Comm_free(&half);
  MPI_Type_free(&contig3);
  MPI_Type_free(&vec);

  expect_offloaded_with_peers(size, "MPI_Allreduce", "MPI_Bcast", "MPI_Reduce", "MPI_Gather", "MPI_Scatter",
                              "MPI_Allgather", "MPI_Alltoall", "MPI_Reduce_scatter_block", "MPI_Reduce_scatter",
                              "MPI_Barrier", "MPI_Iallreduce", NULL);
  return finish("test_colls");
}
