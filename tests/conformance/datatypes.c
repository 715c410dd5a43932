/* SPDX-License-Identifier: Apache-2.0
 *
 * Derived datatypes on every receive path: vector, indexed, struct (mixed
 * basic types, holes), resized, nested, and duplicates freed while a
 * non-blocking or persistent operation that uses them is pending.
 *
 *   datatypes [seed=N] [rounds=N] [mpi_error=0] [paths=LETTERS] [short=0]
 *
 * paths (default pcf): p point-to-point receive paths, c collectives'
 * receive sides, f types freed while an operation that uses them is
 * pending (both). short=0: every message fills the receive exactly. *
 * The expected receive image is computed from each type's typemap written
 * out here by hand (the oracle does not ask MPI). Short receives (fewer
 * basic elements than the receive offers) must fill exactly the first m
 * basic elements in typemap order; MPI_Get_elements must say m and
 * MPI_Get_count m / (elements per type) or MPI_UNDEFINED (MPI 3.1 3.3.3). */
#include "conformance.h"

CF_DEFINE_GLOBALS

#define MAX_FIELDS 8

/* One element of a receive type: its basic entries in typemap order. */
typedef struct {
  const char* name;
  int fields;
  int off[MAX_FIELDS];
  int size[MAX_FIELDS];
  MPI_Datatype basic[MAX_FIELDS];
  MPI_Aint extent;
  MPI_Datatype type; /* built by build_types() */
} dtype;

static dtype types[] = {
  {"vector(3,2,4,int)", 6, {0, 4, 16, 20, 32, 36}, {4, 4, 4, 4, 4, 4}, {0}, 40, MPI_DATATYPE_NULL},
  {"indexed({1,3,2},{5,0,10},int)", 6, {20, 0, 4, 8, 40, 44}, {4, 4, 4, 4, 4, 4}, {0}, 48, MPI_DATATYPE_NULL},
  {"resized(vector(2,1,2,int),0,20)", 2, {0, 8}, {4, 4}, {0}, 20, MPI_DATATYPE_NULL},
  {"struct{int@0,double@8,short[3]@24} resized to 32", 5, {0, 8, 24, 26, 28}, {4, 8, 2, 2, 2}, {0}, 32,
   MPI_DATATYPE_NULL},
  {"contiguous(2,resized(vector(2,1,2,int),0,16))", 4, {0, 8, 16, 24}, {4, 4, 4, 4}, {0}, 32, MPI_DATATYPE_NULL},
};
#define N_TYPES ((int)(sizeof types / sizeof types[0]))

static MPI_Datatype basic_of_size(int size) { return size == 8 ? MPI_DOUBLE : size == 2 ? MPI_SHORT : MPI_INT; }

static void build_types(void) {
  MPI_Datatype t, v;
  MPI_Type_vector(3, 2, 4, MPI_INT, &types[0].type);
  int bl[3] = {1, 3, 2}, disp[3] = {5, 0, 10};
  MPI_Type_indexed(3, bl, disp, MPI_INT, &types[1].type);
  MPI_Type_vector(2, 1, 2, MPI_INT, &v);
  MPI_Type_create_resized(v, 0, 20, &types[2].type);
  MPI_Type_free(&v);
  int sbl[3] = {1, 1, 3};
  MPI_Aint sdisp[3] = {0, 8, 24};
  MPI_Datatype stypes[3] = {MPI_INT, MPI_DOUBLE, MPI_SHORT};
  MPI_Type_create_struct(3, sbl, sdisp, stypes, &t);
  MPI_Type_create_resized(t, 0, 32, &types[3].type);
  MPI_Type_free(&t);
  MPI_Type_vector(2, 1, 2, MPI_INT, &v);
  MPI_Type_create_resized(v, 0, 16, &t);
  MPI_Type_contiguous(2, t, &types[4].type);
  MPI_Type_free(&t);
  MPI_Type_free(&v);
  for (int i = 0; i < N_TYPES; i++) {
    MPI_Aint lb, extent;
    MPI_Type_commit(&types[i].type);
    for (int f = 0; f < types[i].fields; f++) types[i].basic[f] = basic_of_size(types[i].size[f]);
    MPI_Type_get_extent(types[i].type, &lb, &extent);
    CF_CHECK(lb == 0 && extent == types[i].extent, "%s: extent %ld, want %ld", types[i].name, (long)extent,
             (long)types[i].extent);
  }
}

/* Bytes of the first m basic elements of k elements of d, packed. */
static size_t packed_bytes(const dtype* d, int m) {
  size_t b = 0;
  for (int e = 0; e < m; e++) b += (size_t)d->size[e % d->fields];
  return b;
}

/* A type for the sender: the first m basic elements of the signature of d,
 * packed one after the other (same signature, different layout), with an
 * extent of exactly their bytes. */
static MPI_Datatype sequence_type(const dtype* d, int m) {
  MPI_Datatype t;
  if (m == 0) {
    MPI_Type_contiguous(0, MPI_INT, &t);
  } else {
    int* bl = cf_malloc(sizeof(int) * (size_t)m);
    MPI_Aint* disp = cf_malloc(sizeof(MPI_Aint) * (size_t)m);
    MPI_Datatype* ty = cf_malloc(sizeof(MPI_Datatype) * (size_t)m);
    MPI_Aint at = 0;
    for (int e = 0; e < m; e++) {
      bl[e] = 1, disp[e] = at, ty[e] = d->basic[e % d->fields];
      at += d->size[e % d->fields];
    }
    MPI_Datatype padded;
    MPI_Type_create_struct(m, bl, disp, ty, &padded);
    /* a struct's extent is padded to its widest member's alignment; blocks
       of a collective's send buffer follow each other without gaps */
    MPI_Type_create_resized(padded, 0, at, &t);
    MPI_Type_free(&padded);
    free(bl), free(disp), free(ty);
  }
  MPI_Type_commit(&t);
  return t;
}

/* Checks k elements of d at buf after the first m basic elements of the
 * packed pattern `salt` arrived: those in place, every other byte guard. */
static void verify_image(const dtype* d, int k, int m, const unsigned char* buf, uint64_t salt, const char* what) {
  size_t total = (size_t)d->extent * (size_t)k;
  unsigned char* want = cf_malloc(total + 1);
  memset(want, CF_GUARD, total);
  size_t seq = 0;
  for (int e = 0; e < m; e++) {
    int f = e % d->fields;
    size_t at = (size_t)(e / d->fields) * (size_t)d->extent + (size_t)d->off[f];
    for (int b = 0; b < d->size[f]; b++) want[at + b] = cf_byte(salt, seq + (size_t)b);
    seq += (size_t)d->size[f];
  }
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < total; i++)
    if (buf[i] != want[i] && bad++ == 0) first = i;
  CF_CHECK(bad == 0, "%s into %d x %s, %d basic elements: %zu bytes wrong, first at %zu (got 0x%02x want 0x%02x)",
           what, k, d->name, m, bad, first, bad ? buf[first] : 0, bad ? want[first] : 0);
  free(want);
}

static void check_counts(const MPI_Status* st, const dtype* d, MPI_Datatype used, int m, const char* what) {
  int count = -2, elements = -2;
  MPI_Get_count(st, used, &count);
  MPI_Get_elements(st, used, &elements);
  int want_count = m % d->fields == 0 ? m / d->fields : MPI_UNDEFINED;
  CF_CHECK(count == want_count, "%s, %s, %d basic elements: MPI_Get_count %d, want %d", what, d->name, m, count,
           want_count);
  CF_CHECK(elements == m, "%s, %s: MPI_Get_elements %d, want %d", what, d->name, elements, m);
}

enum path {
  P_RECV, P_IRECV_WAIT, P_IRECV_TEST, P_PROBE_RECV, P_MPROBE_MRECV, P_IMPROBE_IMRECV, P_RECV_INIT, P_SENDRECV,
  P_IRECV_DUP_FREED, P_RECV_INIT_DUP_FREED, P_COUNT
};
static const char* const path_name[P_COUNT] = {
  "MPI_Recv", "MPI_Irecv+MPI_Wait", "MPI_Irecv+MPI_Test", "MPI_Probe+MPI_Recv", "MPI_Mprobe+MPI_Mrecv",
  "MPI_Improbe+MPI_Imrecv", "MPI_Recv_init+MPI_Start (twice)", "MPI_Sendrecv",
  "MPI_Irecv with a dup freed before MPI_Wait", "MPI_Recv_init with a dup freed before MPI_Start"};

/* Rank 0 sends m basic elements of d's signature to rank 1, which receives
 * k elements of d by `path`. Persistent paths carry two messages. */
static void p2p_case(int rank, const dtype* d, int k, int m, int path, int sender_dup_freed, int step) {
  int tag = 100 + path, msgs = (path == P_RECV_INIT || path == P_RECV_INIT_DUP_FREED) ? 2 : 1;
  cf_where("step %d: %s, %d x %s, %d basic elements%s", step, path_name[path], k, d->name, m,
           sender_dup_freed ? ", sender's type a freed dup" : "");
  if (rank == 0) {
    MPI_Datatype seq = sequence_type(d, m);
    size_t bytes = packed_bytes(d, m);
    unsigned char* out = cf_malloc(bytes);
    for (int i = 0; i < msgs; i++) {
      cf_fill(out, bytes, (uint64_t)step * 16 + (uint64_t)i);
      if (sender_dup_freed) { /* MPI_Send_init, the type freed before MPI_Start */
        MPI_Datatype dup;
        MPI_Request req;
        CF_RC(MPI_Type_dup(seq, &dup));
        CF_RC(MPI_Send_init(out, 1, dup, 1, tag, MPI_COMM_WORLD, &req));
        CF_RC(MPI_Type_free(&dup));
        CF_RC(MPI_Start(&req));
        CF_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
        CF_RC(MPI_Request_free(&req));
      } else if (path == P_SENDRECV) {
        CF_RC(MPI_Sendrecv(out, 1, seq, 1, tag, NULL, 0, MPI_INT, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      } else {
        CF_RC(MPI_Send(out, 1, seq, 1, tag, MPI_COMM_WORLD));
      }
    }
    free(out);
    MPI_Type_free(&seq);
  } else if (rank == 1) {
    size_t room = (size_t)d->extent * (size_t)k;
    unsigned char* in = cf_malloc(room + 1);
    MPI_Datatype use = d->type;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Message msg;
    MPI_Status st, pst;
    int flag = 0;
    if (path == P_IRECV_DUP_FREED || path == P_RECV_INIT_DUP_FREED) CF_RC(MPI_Type_dup(d->type, &use));
    if (path == P_RECV_INIT || path == P_RECV_INIT_DUP_FREED) {
      CF_RC(MPI_Recv_init(in, k, use, 0, tag, MPI_COMM_WORLD, &req));
      if (path == P_RECV_INIT_DUP_FREED) CF_RC(MPI_Type_free(&use));
    }
    for (int i = 0; i < msgs; i++) {
      memset(in, CF_GUARD, room + 1);
      cf_status_prefill(&st, 1);
      cf_status_prefill(&pst, 1);
      switch (path) {
        case P_RECV: CF_RC(MPI_Recv(in, k, use, 0, tag, MPI_COMM_WORLD, &st)); break;
        case P_IRECV_WAIT:
        case P_IRECV_DUP_FREED:
          CF_RC(MPI_Irecv(in, k, use, 0, tag, MPI_COMM_WORLD, &req));
          if (path == P_IRECV_DUP_FREED) CF_RC(MPI_Type_free(&use));
          CF_RC(MPI_Wait(&req, &st));
          break;
        case P_IRECV_TEST:
          CF_RC(MPI_Irecv(in, k, use, 0, tag, MPI_COMM_WORLD, &req));
          while (!flag) CF_RC(MPI_Test(&req, &flag, &st));
          break;
        case P_PROBE_RECV:
          CF_RC(MPI_Probe(0, tag, MPI_COMM_WORLD, &pst));
          cf_check_status(&pst, 0, tag, MPI_INT, -1, "MPI_Probe");
          check_counts(&pst, d, d->type, m, "MPI_Probe");
          CF_RC(MPI_Recv(in, k, use, 0, tag, MPI_COMM_WORLD, &st));
          break;
        case P_MPROBE_MRECV:
        case P_IMPROBE_IMRECV:
          if (path == P_MPROBE_MRECV) CF_RC(MPI_Mprobe(0, tag, MPI_COMM_WORLD, &msg, &pst));
          else
            while (!flag) CF_RC(MPI_Improbe(0, tag, MPI_COMM_WORLD, &flag, &msg, &pst));
          cf_check_status(&pst, 0, tag, MPI_INT, -1, "matched probe");
          check_counts(&pst, d, d->type, m, "matched probe");
          if (path == P_MPROBE_MRECV) {
            CF_RC(MPI_Mrecv(in, k, use, &msg, &st));
          } else {
            CF_RC(MPI_Imrecv(in, k, use, &msg, &req));
            CF_RC(MPI_Wait(&req, &st));
          }
          break;
        case P_RECV_INIT:
        case P_RECV_INIT_DUP_FREED:
          CF_RC(MPI_Start(&req));
          CF_RC(MPI_Wait(&req, &st));
          break;
        case P_SENDRECV:
          CF_RC(MPI_Sendrecv(NULL, 0, MPI_INT, 0, tag, in, k, use, 0, tag, MPI_COMM_WORLD, &st));
          break;
      }
      cf_check_status(&st, 0, tag, MPI_INT, -1, path_name[path]);
      check_counts(&st, d, d->type, m, path_name[path]);
      verify_image(d, k, m, in, (uint64_t)step * 16 + (uint64_t)i, path_name[path]);
      CF_CHECK(in[room] == CF_GUARD, "%s wrote beyond k elements of %s", path_name[path], d->name);
    }
    if (path == P_RECV_INIT || path == P_RECV_INIT_DUP_FREED) CF_RC(MPI_Request_free(&req));
    free(in);
  }
}

enum coll { C_BCAST, C_GATHER, C_SCATTER, C_ALLGATHER, C_ALLTOALL, C_IGATHER_DUP_FREED, C_IBCAST_DUP_FREED, C_COUNT };
static const char* const coll_name[C_COUNT] = {"MPI_Bcast", "MPI_Gather", "MPI_Scatter", "MPI_Allgather",
                                               "MPI_Alltoall", "MPI_Igather with freed dups",
                                               "MPI_Ibcast with a freed dup"};

/* The receive side of a collective uses k elements of d per block; the send
 * side the packed signature. */
static void coll_case(int rank, int size, const dtype* d, int k, int which, int root, int step) {
  int m = k * d->fields;
  size_t bytes = packed_bytes(d, m), room = (size_t)d->extent * (size_t)k;
  MPI_Datatype seq = sequence_type(d, m), rtype = d->type, stype = seq;
  unsigned char* out = cf_malloc(bytes * (size_t)size);
  unsigned char* in = cf_malloc(room * (size_t)size + 1);
  MPI_Request req;
  cf_where("step %d: %s, %d x %s per block, root %d", step, coll_name[which], k, d->name, root);
  memset(in, CF_GUARD, room * (size_t)size + 1);
  uint64_t salt = (uint64_t)step * 64;
  if (which == C_IGATHER_DUP_FREED || which == C_IBCAST_DUP_FREED) {
    CF_RC(MPI_Type_dup(d->type, &rtype));
    CF_RC(MPI_Type_dup(seq, &stype));
  }
  switch (which) {
    case C_BCAST:
    case C_IBCAST_DUP_FREED:
      /* the root sends the packed signature, the others receive k x d */
      if (rank == root) cf_fill(out, bytes, salt);
      if (which == C_BCAST) {
        CF_RC(MPI_Bcast(rank == root ? (void*)out : (void*)in, rank == root ? 1 : k, rank == root ? stype : rtype, root,
                        MPI_COMM_WORLD));
      } else {
        CF_RC(MPI_Ibcast(rank == root ? (void*)out : (void*)in, rank == root ? 1 : k, rank == root ? stype : rtype,
                         root, MPI_COMM_WORLD, &req));
        CF_RC(MPI_Type_free(&rtype));
        CF_RC(MPI_Type_free(&stype));
        CF_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
      }
      if (rank != root) verify_image(d, k, m, in, salt, coll_name[which]);
      break;
    case C_GATHER:
    case C_IGATHER_DUP_FREED:
      cf_fill(out, bytes, salt + (uint64_t)rank);
      if (which == C_GATHER) {
        CF_RC(MPI_Gather(out, 1, stype, in, k, rtype, root, MPI_COMM_WORLD));
      } else {
        CF_RC(MPI_Igather(out, 1, stype, in, k, rtype, root, MPI_COMM_WORLD, &req));
        CF_RC(MPI_Type_free(&rtype));
        CF_RC(MPI_Type_free(&stype));
        CF_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
      }
      if (rank == root)
        for (int r = 0; r < size; r++) verify_image(d, k, m, in + room * r, salt + (uint64_t)r, coll_name[which]);
      break;
    case C_SCATTER:
      for (int r = 0; r < size; r++) cf_fill(out + bytes * r, bytes, salt + (uint64_t)r);
      CF_RC(MPI_Scatter(out, 1, stype, in, k, rtype, root, MPI_COMM_WORLD));
      verify_image(d, k, m, in, salt + (uint64_t)rank, coll_name[which]);
      break;
    case C_ALLGATHER:
      cf_fill(out, bytes, salt + (uint64_t)rank);
      CF_RC(MPI_Allgather(out, 1, stype, in, k, rtype, MPI_COMM_WORLD));
      for (int r = 0; r < size; r++) verify_image(d, k, m, in + room * r, salt + (uint64_t)r, coll_name[which]);
      break;
    case C_ALLTOALL:
      for (int r = 0; r < size; r++) cf_fill(out + bytes * r, bytes, salt + (uint64_t)(rank * 100 + r));
      CF_RC(MPI_Alltoall(out, 1, stype, in, k, rtype, MPI_COMM_WORLD));
      for (int r = 0; r < size; r++)
        verify_image(d, k, m, in + room * r, salt + (uint64_t)(r * 100 + rank), coll_name[which]);
      break;
  }
  CF_CHECK(in[room * size] == CF_GUARD, "%s wrote beyond the receive blocks", coll_name[which]);
  MPI_Type_free(&seq);
  free(out);
  free(in);
}

int main(int argc, char** argv) {
  const int size = cf_init(&argc, &argv);
  uint64_t seed = cf_seed_arg(argc, argv, 1);
  int rounds = (int)cf_int_arg(argc, argv, "rounds", 3), short_receives = (int)cf_int_arg(argc, argv, "short", 1);
  const char* paths = "pcf";
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], "paths=", 6) == 0) paths = argv[i] + 6;
  if (cf_world_rank == 0) printf("datatypes: seed=%llu rounds=%d paths=%s np=%d\n", (unsigned long long)seed, rounds, paths, size);
  build_types();
  cf_rng g = {seed};
  int step = 0;
  static const int ks[] = {1, 2, 5, 64, 3000}; /* 3000 x 32..48 B: beyond the eager size */
  for (int round = 0; round < rounds; round++) {
    for (int t = 0; t < N_TYPES; t++) {
      const dtype* d = &types[t];
      for (int path = 0; path < P_COUNT; path++) {
          int freed_path = path == P_IRECV_DUP_FREED || path == P_RECV_INIT_DUP_FREED;
          if (!strchr(paths, freed_path ? 'f' : 'p')) continue;
          int k = ks[cf_below(&g, 5)], full = k * d->fields;
          /* full, one basic element short, a partial last element, or far short */
          int shape = cf_below(&g, 4);
          if (!short_receives) shape = 0;
          int m = shape == 0 ? full : shape == 1 ? full - 1 : shape == 2 ? full - d->fields / 2 : cf_below(&g, full + 1);
          int sender_dup_freed = strchr(paths, 'f') && cf_below(&g, 4) == 0;
          if (size >= 2) p2p_case(cf_world_rank, d, k, m, path, sender_dup_freed, step);
          step++;
        }
      for (int which = 0; which < C_COUNT; which++) {
          int k = ks[cf_below(&g, 4)], root = cf_below(&g, size);
          int freed_case = which == C_IGATHER_DUP_FREED || which == C_IBCAST_DUP_FREED;
          if (!strchr(paths, freed_case ? 'f' : 'c')) continue;
          coll_case(cf_world_rank, size, d, k, which, root, step++);
        }
    }
  }
  for (int t = 0; t < N_TYPES; t++) MPI_Type_free(&types[t].type);
  return cf_finish_and_finalize();
}
