/* SPDX-License-Identifier: Apache-2.0
 *
 * Neighbourhood collectives and MPI_Alltoallw, every element checked.
 *
 *   neighbor [rounds=N] [wide=E] [mpi_error=0]
 *
 * Topologies on MPI_COMM_WORLD: 1-D and 2-D Cart, periodic and not (missing
 * neighbours are MPI_PROC_NULL: their blocks must stay untouched), a graph,
 * and a distributed graph whose ranks have different numbers of sources and
 * destinations (with repeated edges and, on few ranks, self-loops). On each:
 * MPI_Neighbor_allgather(v), _alltoall(v/w) and all five MPI_Ineighbor_*
 * outstanding at once; then MPI_(I)alltoallw on MPI_COMM_WORLD, also in
 * place. v and w forms use non-zero displacements with gaps that must stay
 * untouched; alltoallv moves shorts (blocks of odd byte counts), the w forms
 * receive into strided vector types. wide=E: only a dist-graph of E
 * parallel edges from each rank to the next.
 *
 * Which block of a sender arrives in which block of a receiver: Cart
 * topologies send block 2d+1 (to the +d neighbour) into the receiver's block
 * 2d (from its -d neighbour) and vice versa. Where both neighbours of a
 * periodic dimension are the same rank (size 1 or 2) MPI 3.1 leaves the
 * order open (Open MPI 4.1 matches the two messages in posting order, MPI 4
 * fixes the direction), so either is accepted there. Graphs: the i-th edge
 * from s to r in s's destination list is the i-th s in r's source list. */
#include "conformance.h"

CF_DEFINE_GLOBALS

#define MAXN 64  /* neighbours per rank */
#define GUARD_INT (-7)

typedef struct {
  const char* name;
  MPI_Comm comm;
  int is_cart;
  int n; /* comm size */
  /* every rank's lists (gathered), [rank][k] */
  int nsrc[64], ndst[64];
  int src[64][MAXN], dst[64][MAXN];
} topo_t;

static int value(int s, int j, int i) { return s * 100000 + j * 1000 + i + 1; }
static short svalue(int s, int j, int i) { return (short)((s * 373 + j * 41 + i * 7 + 1) % 30000); }

/* Elements of the block sender s sends to its destination j. Cart blocks
 * of one dimension have equal sizes (see the top of the file). */
static int count_of(const topo_t* t, int s, int j) { return t->is_cart ? 1 + (s + j / 2) % 3 : 1 + (s + 2 * j) % 4; }

/* The sender's block index that lands in block k of rank r (source s);
 * *alt: the other acceptable one (or -1). */
static int sender_block(const topo_t* t, int r, int k, int* alt) {
  int s = t->src[r][k];
  *alt = -1;
  if (t->is_cart) {
    if (t->src[r][k ^ 1] == s) *alt = k; /* both neighbours of a periodic dimension are s */
    return k ^ 1;
  }
  int occurrence = 0;
  for (int q = 0; q < k; q++) occurrence += t->src[r][q] == s;
  for (int j = 0; j < t->ndst[s]; j++)
    if (t->dst[s][j] == r && occurrence-- == 0) return j;
  return -1;
}

static void gather_lists(topo_t* t, int rank) {
  int in = 0, out = 0, mine[2 + 2 * MAXN];
  int kind = MPI_UNDEFINED;
  MPI_Topo_test(t->comm, &kind);
  int srcs[MAXN], dsts[MAXN];
  if (kind == MPI_CART) {
    int nd = 0;
    MPI_Cartdim_get(t->comm, &nd);
    for (int d = 0; d < nd; d++) {
      MPI_Cart_shift(t->comm, d, 1, &srcs[2 * d], &srcs[2 * d + 1]);
      dsts[2 * d] = srcs[2 * d];
      dsts[2 * d + 1] = srcs[2 * d + 1];
    }
    in = out = 2 * nd;
  } else if (kind == MPI_GRAPH) {
    MPI_Graph_neighbors_count(t->comm, rank, &in);
    MPI_Graph_neighbors(t->comm, rank, in, srcs);
    memcpy(dsts, srcs, sizeof srcs);
    out = in;
  } else {
    int w = 0, in_weights[MAXN], out_weights[MAXN];
    MPI_Dist_graph_neighbors_count(t->comm, &in, &out, &w);
    MPI_Dist_graph_neighbors(t->comm, in, srcs, in_weights, out, dsts, out_weights);
  }
  mine[0] = in;
  mine[1] = out;
  for (int k = 0; k < MAXN; k++) {
    mine[2 + k] = k < in ? srcs[k] : -99;
    mine[2 + MAXN + k] = k < out ? dsts[k] : -99;
  }
  int* all = cf_malloc(sizeof mine * (size_t)t->n);
  MPI_Allgather(mine, 2 + 2 * MAXN, MPI_INT, all, 2 + 2 * MAXN, MPI_INT, t->comm);
  for (int r = 0; r < t->n; r++) {
    int* m = all + r * (2 + 2 * MAXN);
    t->nsrc[r] = m[0];
    t->ndst[r] = m[1];
    memcpy(t->src[r], m + 2, MAXN * sizeof(int));
    memcpy(t->dst[r], m + 2 + MAXN, MAXN * sizeof(int));
  }
  free(all);
}

/* Checks block k of rank r: `count` elements at `got` with stride `stride`
 * (in elements), against the sender's block. Returns the sender block used. */
static void check_int_block(const topo_t* t, int r, int k, const int* got, int stride, int cnt, const char* what) {
  int s = t->src[r][k], alt = -1;
  int j = sender_block(t, r, k, &alt);
  int ok = 1, ok_alt = alt >= 0;
  for (int i = 0; i < cnt; i++) {
    if (got[i * stride] != value(s, j, i)) ok = 0;
    if (alt >= 0 && got[i * stride] != value(s, alt, i)) ok_alt = 0;
  }
  CF_CHECK(ok || ok_alt, "%s: block %d from rank %d (sender block %d) wrong: first element %d, want %d", what, k, s,
           j, cnt > 0 ? got[0] : 0, value(s, j, 0));
}

static void check_guard_ints(const int* p, int n, const char* what) {
  for (int i = 0; i < n; i++) CF_CHECK(p[i] == GUARD_INT, "%s: element %d written (%d) that must not be", what, i, p[i]);
}

static void fill_ints(int* p, int n) {
  for (int i = 0; i < n; i++) p[i] = GUARD_INT;
}

/* Buffers and arguments of one topology's calls, built for rank r. */
typedef struct {
  int in, out;
  int *sbuf_ag, *rbuf_ag;             /* allgather: one block of B ints */
  int *rbuf_agv, rc_agv[MAXN], rd_agv[MAXN], len_agv;
  int *sbuf_a2a, *rbuf_a2a;           /* alltoall: blocks of B ints */
  short *sbuf_v, *rbuf_v;             /* alltoallv: shorts */
  int sc_v[MAXN], sd_v[MAXN], rc_v[MAXN], rd_v[MAXN], slen_v, rlen_v;
  int *sbuf_w, *rbuf_w;               /* alltoallw */
  int sc_w[MAXN], rc_w[MAXN];
  MPI_Aint sd_w[MAXN], rd_w[MAXN];
  MPI_Datatype st_w[MAXN], rt_w[MAXN];
  int slen_w, rlen_w;
} args_t;

#define B 5

static void build(const topo_t* t, int r, args_t* a) {
  memset(a, 0, sizeof *a);
  a->in = t->nsrc[r];
  a->out = t->ndst[r];
  a->sbuf_ag = cf_malloc(B * sizeof(int));
  for (int i = 0; i < B; i++) a->sbuf_ag[i] = value(r, 0, i);
  a->rbuf_ag = cf_malloc((size_t)(a->in * B + 1) * sizeof(int));
  /* allgatherv: block k holds B - k % 2 ints... all senders send B: counts must be B */
  int pos = 3;
  for (int k = 0; k < a->in; k++) {
    a->rc_agv[k] = B;
    a->rd_agv[k] = pos;
    pos += B + 2;
  }
  a->len_agv = pos + 1;
  a->rbuf_agv = cf_malloc((size_t)a->len_agv * sizeof(int));
  a->sbuf_a2a = cf_malloc((size_t)(a->out * B + 1) * sizeof(int));
  for (int j = 0; j < a->out; j++)
    for (int i = 0; i < B; i++) a->sbuf_a2a[j * B + i] = value(r, j, i);
  a->rbuf_a2a = cf_malloc((size_t)(a->in * B + 1) * sizeof(int));
  /* alltoallv of shorts, odd counts, gaps, blocks in reverse order in the send buffer */
  pos = 1;
  for (int j = a->out - 1; j >= 0; j--) {
    a->sc_v[j] = 2 * count_of(t, r, j) + 1;
    a->sd_v[j] = pos;
    pos += a->sc_v[j] + 1;
  }
  a->slen_v = pos + 1;
  a->sbuf_v = cf_malloc((size_t)a->slen_v * sizeof(short));
  for (int i = 0; i < a->slen_v; i++) a->sbuf_v[i] = -1;
  for (int j = 0; j < a->out; j++)
    for (int i = 0; i < a->sc_v[j]; i++) a->sbuf_v[a->sd_v[j] + i] = svalue(r, j, i);
  pos = 2;
  for (int k = 0; k < a->in; k++) {
    int alt = -1, s = t->src[r][k], j = sender_block(t, r, k, &alt);
    a->rc_v[k] = s == MPI_PROC_NULL ? 3 : 2 * count_of(t, s, j) + 1;
    a->rd_v[k] = pos;
    pos += a->rc_v[k] + 3;
  }
  a->rlen_v = pos + 1;
  a->rbuf_v = cf_malloc((size_t)a->rlen_v * sizeof(short));
  /* alltoallw: MPI_INT blocks at byte displacements, received into strided vectors */
  pos = 2;
  for (int j = 0; j < a->out; j++) {
    a->sc_w[j] = count_of(t, r, j);
    a->sd_w[j] = (MPI_Aint)pos * (MPI_Aint)sizeof(int);
    a->st_w[j] = MPI_INT;
    pos += a->sc_w[j] + 1;
  }
  a->slen_w = pos + 1;
  a->sbuf_w = cf_malloc((size_t)a->slen_w * sizeof(int));
  fill_ints(a->sbuf_w, a->slen_w);
  for (int j = 0; j < a->out; j++)
    for (int i = 0; i < a->sc_w[j]; i++) a->sbuf_w[a->sd_w[j] / (MPI_Aint)sizeof(int) + i] = value(r, j, i);
  pos = 1;
  for (int k = 0; k < a->in; k++) {
    int alt = -1, s = t->src[r][k], j = sender_block(t, r, k, &alt);
    int c = s == MPI_PROC_NULL ? 2 : count_of(t, s, j);
    MPI_Type_vector(c, 1, 2, MPI_INT, &a->rt_w[k]);
    MPI_Type_commit(&a->rt_w[k]);
    a->rc_w[k] = 1;
    a->rd_w[k] = (MPI_Aint)pos * (MPI_Aint)sizeof(int);
    pos += 2 * c + 1;
  }
  a->rlen_w = pos + 1;
  a->rbuf_w = cf_malloc((size_t)a->rlen_w * sizeof(int));
}

static void clear_receives(args_t* a) {
  fill_ints(a->rbuf_ag, a->in * B + 1);
  fill_ints(a->rbuf_agv, a->len_agv);
  fill_ints(a->rbuf_a2a, a->in * B + 1);
  for (int i = 0; i < a->rlen_v; i++) a->rbuf_v[i] = -1;
  fill_ints(a->rbuf_w, a->rlen_w);
}

static void check_receives(const topo_t* t, int r, const args_t* a, const char* how) {
  char what[96];
  for (int k = 0; k < a->in; k++) {
    int s = t->src[r][k];
    if (s == MPI_PROC_NULL) {
      snprintf(what, sizeof what, "%s %s: MPI_PROC_NULL blocks", how, t->name);
      check_guard_ints(a->rbuf_ag + k * B, B, what);
      check_guard_ints(a->rbuf_agv + a->rd_agv[k], B, what);
      check_guard_ints(a->rbuf_a2a + k * B, B, what);
      for (int i = 0; i < a->rc_v[k]; i++) CF_CHECK(a->rbuf_v[a->rd_v[k] + i] == -1, "%s: alltoallv", what);
      continue;
    }
    snprintf(what, sizeof what, "%s %s: neighbor_allgather", how, t->name);
    for (int i = 0; i < B; i++)
      CF_CHECK(a->rbuf_ag[k * B + i] == value(s, 0, i), "%s: block %d element %d is %d, want %d", what, k, i,
               a->rbuf_ag[k * B + i], value(s, 0, i));
    snprintf(what, sizeof what, "%s %s: neighbor_allgatherv", how, t->name);
    for (int i = 0; i < B; i++)
      CF_CHECK(a->rbuf_agv[a->rd_agv[k] + i] == value(s, 0, i), "%s: block %d element %d is %d, want %d", what, k,
               i, a->rbuf_agv[a->rd_agv[k] + i], value(s, 0, i));
    snprintf(what, sizeof what, "%s %s: neighbor_alltoall", how, t->name);
    check_int_block(t, r, k, a->rbuf_a2a + k * B, 1, B, what);
    snprintf(what, sizeof what, "%s %s: neighbor_alltoallv", how, t->name);
    {
      int alt = -1, j = sender_block(t, r, k, &alt), ok = 1, ok_alt = alt >= 0;
      for (int i = 0; i < a->rc_v[k]; i++) {
        if (a->rbuf_v[a->rd_v[k] + i] != svalue(s, j, i)) ok = 0;
        if (alt >= 0 && a->rbuf_v[a->rd_v[k] + i] != svalue(s, alt, i)) ok_alt = 0;
      }
      CF_CHECK(ok || ok_alt, "%s: block %d from rank %d wrong", what, k, s);
    }
    snprintf(what, sizeof what, "%s %s: neighbor_alltoallw", how, t->name);
    {
      int alt = -1, j = sender_block(t, r, k, &alt);
      int c = count_of(t, s, j);
      const int* blk = a->rbuf_w + a->rd_w[k] / (MPI_Aint)sizeof(int);
      check_int_block(t, r, k, blk, 2, c, what);
    }
  }
  /* alltoallw: every element outside the received items (stride gaps,
   * MPI_PROC_NULL blocks, between blocks) untouched */
  snprintf(what, sizeof what, "%s %s: neighbor_alltoallw outside the blocks", how, t->name);
  {
    char* written = calloc((size_t)a->rlen_w, 1);
    for (int k = 0; k < a->in; k++) {
      int alt = -1, s = t->src[r][k];
      if (s == MPI_PROC_NULL) continue;
      int c = count_of(t, s, sender_block(t, r, k, &alt));
      for (int i = 0; i < c; i++) written[a->rd_w[k] / (MPI_Aint)sizeof(int) + 2 * i] = 1;
    }
    for (int i = 0; i < a->rlen_w; i++)
      if (!written[i]) CF_CHECK(a->rbuf_w[i] == GUARD_INT, "%s: element %d written (%d)", what, i, a->rbuf_w[i]);
    free(written);
  }
  /* gaps between the blocks of the v and w forms */
  snprintf(what, sizeof what, "%s %s: gaps", how, t->name);
  for (int k = 0; k <= a->in; k++) {
    int from = k == 0 ? 0 : a->rd_agv[k - 1] + B, to = k == a->in ? a->len_agv : a->rd_agv[k];
    check_guard_ints(a->rbuf_agv + from, to - from, what);
    from = k == 0 ? 0 : a->rd_v[k - 1] + a->rc_v[k - 1];
    to = k == a->in ? a->rlen_v : a->rd_v[k];
    for (int i = from; i < to; i++) CF_CHECK(a->rbuf_v[i] == -1, "%s: alltoallv gap element %d written", what, i);
  }
  check_guard_ints(a->rbuf_ag + a->in * B, 1, what);
  check_guard_ints(a->rbuf_a2a + a->in * B, 1, what);
}

static void run_topology(topo_t* t, int rank, int rounds) {
  MPI_Comm_size(t->comm, &t->n);
  gather_lists(t, rank);
  args_t a;
  build(t, rank, &a);
  for (int round = 0; round < rounds; round++) {
    cf_where("%s: blocking calls, round %d", t->name, round);
    clear_receives(&a);
    CF_RC(MPI_Neighbor_allgather(a.sbuf_ag, B, MPI_INT, a.rbuf_ag, B, MPI_INT, t->comm));
    CF_RC(MPI_Neighbor_allgatherv(a.sbuf_ag, B, MPI_INT, a.rbuf_agv, a.rc_agv, a.rd_agv, MPI_INT, t->comm));
    CF_RC(MPI_Neighbor_alltoall(a.sbuf_a2a, B, MPI_INT, a.rbuf_a2a, B, MPI_INT, t->comm));
    CF_RC(MPI_Neighbor_alltoallv(a.sbuf_v, a.sc_v, a.sd_v, MPI_SHORT, a.rbuf_v, a.rc_v, a.rd_v, MPI_SHORT, t->comm));
    CF_RC(MPI_Neighbor_alltoallw(a.sbuf_w, a.sc_w, a.sd_w, a.st_w, a.rbuf_w, a.rc_w, a.rd_w, a.rt_w, t->comm));
    check_receives(t, rank, &a, "blocking");

    cf_where("%s: five non-blocking calls outstanding, round %d", t->name, round);
    clear_receives(&a);
    MPI_Request reqs[5];
    CF_RC(MPI_Ineighbor_alltoallw(a.sbuf_w, a.sc_w, a.sd_w, a.st_w, a.rbuf_w, a.rc_w, a.rd_w, a.rt_w, t->comm,
                                  &reqs[0]));
    CF_RC(MPI_Ineighbor_allgather(a.sbuf_ag, B, MPI_INT, a.rbuf_ag, B, MPI_INT, t->comm, &reqs[1]));
    CF_RC(MPI_Ineighbor_alltoallv(a.sbuf_v, a.sc_v, a.sd_v, MPI_SHORT, a.rbuf_v, a.rc_v, a.rd_v, MPI_SHORT,
                                  t->comm, &reqs[2]));
    CF_RC(MPI_Ineighbor_allgatherv(a.sbuf_ag, B, MPI_INT, a.rbuf_agv, a.rc_agv, a.rd_agv, MPI_INT, t->comm,
                                   &reqs[3]));
    CF_RC(MPI_Ineighbor_alltoall(a.sbuf_a2a, B, MPI_INT, a.rbuf_a2a, B, MPI_INT, t->comm, &reqs[4]));
    /* Completed one at a time, in another order than started, with tests in between. */
    int flag = 0;
    CF_RC(MPI_Test(&reqs[4], &flag, MPI_STATUS_IGNORE));
    CF_RC(MPI_Wait(&reqs[2], MPI_STATUS_IGNORE));
    CF_RC(MPI_Waitall(5, reqs, MPI_STATUSES_IGNORE));
    check_receives(t, rank, &a, "non-blocking");
  }
  for (int k = 0; k < a.in; k++) MPI_Type_free(&a.rt_w[k]);
  free(a.sbuf_ag), free(a.rbuf_ag), free(a.rbuf_agv), free(a.sbuf_a2a), free(a.rbuf_a2a);
  free(a.sbuf_v), free(a.rbuf_v), free(a.sbuf_w), free(a.rbuf_w);
}

/* MPI_(I)alltoallw on `comm`: rank r sends (1 + (r + p) % 3) ints to p
 * (symmetric, so the in-place form can use the same counts). */
static void run_alltoallw(MPI_Comm comm, int rank, int n) {
  int *sc = cf_malloc(sizeof(int) * (size_t)n), *sd = cf_malloc(sizeof(int) * (size_t)n);
  int *rc = cf_malloc(sizeof(int) * (size_t)n), *rd = cf_malloc(sizeof(int) * (size_t)n);
  MPI_Datatype *st = cf_malloc(sizeof(MPI_Datatype) * (size_t)n), *rt = cf_malloc(sizeof(MPI_Datatype) * (size_t)n);
  /* Block 0 at displacement 0: Open MPI 4.1's communicator-of-one
   * component (coll/self) multiplies Alltoallw's byte displacements by the
   * type extent. Later blocks have gaps. */
  int spos = 0, rpos = 0;
  for (int p = 0; p < n; p++) {
    int c = 1 + (rank + p) % 3;
    sc[p] = c;
    sd[p] = spos * (int)sizeof(int);
    st[p] = MPI_INT;
    spos += c + 2;
    MPI_Type_vector(c, 1, 2, MPI_INT, &rt[p]);
    MPI_Type_commit(&rt[p]);
    rc[p] = 1;
    rd[p] = rpos * (int)sizeof(int);
    rpos += 2 * c + 1;
  }
  int *sbuf = cf_malloc(sizeof(int) * (size_t)(spos + 1)), *rbuf = cf_malloc(sizeof(int) * (size_t)(rpos + 1));
  fill_ints(sbuf, spos + 1);
  for (int p = 0; p < n; p++)
    for (int i = 0; i < sc[p]; i++) sbuf[sd[p] / (int)sizeof(int) + i] = value(rank, p, i);
  for (int form = 0; form < 3; form++) {
    const char* name = form == 0 ? "MPI_Alltoallw" : form == 1 ? "MPI_Ialltoallw" : "MPI_Alltoallw in place";
    cf_where("%s on %d ranks", name, n);
    fill_ints(rbuf, rpos + 1);
    if (form == 2) { /* in place: each block starts as what goes to that peer */
      for (int p = 0; p < n; p++)
        for (int i = 0; i < sc[p]; i++) rbuf[rd[p] / (int)sizeof(int) + 2 * i] = value(rank, p, i);
      CF_RC(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, rbuf, rc, rd, rt, comm));
    } else if (form == 1) {
      MPI_Request req;
      CF_RC(MPI_Ialltoallw(sbuf, sc, sd, st, rbuf, rc, rd, rt, comm, &req));
      CF_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
    } else {
      CF_RC(MPI_Alltoallw(sbuf, sc, sd, st, rbuf, rc, rd, rt, comm));
    }
    int at = 0;
    for (int p = 0; p < n; p++) {
      int c = 1 + (rank + p) % 3, base = rd[p] / (int)sizeof(int);
      check_guard_ints(rbuf + at, base - at, name);
      for (int i = 0; i < c; i++) {
        CF_CHECK(rbuf[base + 2 * i] == value(p, rank, i), "%s: block from %d element %d is %d, want %d", name, p, i,
                 rbuf[base + 2 * i], value(p, rank, i));
        if (i + 1 < c) CF_CHECK(rbuf[base + 2 * i + 1] == GUARD_INT, "%s: stride gap written", name);
      }
      at = base + 2 * c - 1;
    }
    check_guard_ints(rbuf + at, rpos + 1 - at, name);
  }
  for (int p = 0; p < n; p++) MPI_Type_free(&rt[p]);
  free(sc), free(sd), free(rc), free(rd), free(st), free(rt), free(sbuf), free(rbuf);
}

/* A dist-graph of `edges` parallel edges from every rank to the next: with
 * 17 or more, 34+ device sends and receives per rank, more than the layer
 * puts in one call (it runs natively, for a named reason). */
static void run_wide(topo_t* t, int rank, int size, int edges, int rounds) {
  int srcs[MAXN], dsts[MAXN], weights[MAXN];
  for (int i = 0; i < edges; i++) {
    srcs[i] = (rank + size - 1) % size;
    dsts[i] = (rank + 1) % size;
    weights[i] = 1;
  }
  t->name = "dist-graph of parallel edges";
  t->is_cart = 0;
  CF_RC(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, edges, srcs, weights, edges, dsts, weights, MPI_INFO_NULL, 0,
                                       &t->comm));
  run_topology(t, rank, rounds);
  MPI_Comm_free(&t->comm);
}

int main(int argc, char** argv) {
  const int size = cf_init(&argc, &argv), rank = cf_world_rank;
  const int rounds = (int)cf_int_arg(argc, argv, "rounds", 3);
  const int wide = (int)cf_int_arg(argc, argv, "wide", 0);
  if (rank == 0) printf("neighbor: np=%d rounds=%d wide=%d\n", size, rounds, wide);
  if (size > 64 || wide > MAXN) {
    if (rank == 0) printf("neighbor: at most 64 ranks and 64 edges\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  static topo_t t; /* large: not on the stack */
  if (wide > 0) {
    run_wide(&t, rank, size, wide, rounds);
    return cf_finish_and_finalize();
  }

  for (int periodic = 1; periodic >= 0; periodic--) {
    int dims1[1] = {size}, periods1[1] = {periodic};
    t.name = periodic ? "1-D periodic Cart" : "1-D Cart";
    t.is_cart = 1;
    CF_RC(MPI_Cart_create(MPI_COMM_WORLD, 1, dims1, periods1, 0, &t.comm));
    run_topology(&t, rank, rounds);
    MPI_Comm_free(&t.comm);

    int dims2[2] = {0, 0}, periods2[2] = {periodic, 0};
    MPI_Dims_create(size, 2, dims2);
    t.name = periodic ? "2-D Cart periodic in dim 0" : "2-D Cart";
    CF_RC(MPI_Cart_create(MPI_COMM_WORLD, 2, dims2, periods2, 0, &t.comm));
    run_topology(&t, rank, rounds);
    MPI_Comm_free(&t.comm);
  }
  {
    int dims2[2] = {0, 0}, periods2[2] = {1, 1};
    MPI_Dims_create(size, 2, dims2);
    t.name = "2-D periodic Cart";
    CF_RC(MPI_Cart_create(MPI_COMM_WORLD, 2, dims2, periods2, 0, &t.comm));
    run_topology(&t, rank, rounds);
    MPI_Comm_free(&t.comm);
  }

  t.is_cart = 0;
  { /* graph: a ring, each neighbour once */
    int* index = cf_malloc(sizeof(int) * (size_t)size);
    int* edges = cf_malloc(sizeof(int) * (size_t)(2 * size));
    int ne = 0;
    for (int r = 0; r < size; r++) {
      int up = (r + 1) % size, down = (r + size - 1) % size;
      if (up != r) edges[ne++] = up;
      if (down != r && down != up) edges[ne++] = down;
      index[r] = ne;
    }
    t.name = "graph ring";
    CF_RC(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &t.comm));
    run_topology(&t, rank, rounds);
    MPI_Comm_free(&t.comm);
    free(index), free(edges);
  }
  { /* distributed graph: edges r -> r+1 for all r, r -> r+2 for even r,
     * and r -> r+3 for r % 3 == 0, in that global order (so both ends list
     * repeated edges in the same order) */
    int srcs[MAXN], dsts[MAXN], in = 0, out = 0, weights[MAXN];
    for (int i = 0; i < MAXN; i++) weights[i] = 1;
    for (int step = 1; step <= 3; step++)
      for (int r = 0; r < size; r++) {
        if ((step == 2 && r % 2 != 0) || (step == 3 && r % 3 != 0)) continue;
        int to = (r + step) % size;
        if (r == rank) dsts[out++] = to;
        if (to == rank) srcs[in++] = r;
      }
    t.name = "asymmetric dist-graph";
    CF_RC(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, in, srcs, weights, out, dsts, weights,
                                         MPI_INFO_NULL, 0, &t.comm));
    run_topology(&t, rank, rounds);
    /* a duplicate keeps the topology and gets its own device communicator */
    MPI_Comm dup;
    CF_RC(MPI_Comm_dup(t.comm, &dup));
    MPI_Comm_free(&t.comm);
    t.comm = dup;
    t.name = "duplicate of the dist-graph";
    run_topology(&t, rank, 1);
    MPI_Comm_free(&t.comm);
  }

  run_alltoallw(MPI_COMM_WORLD, rank, size);
  return cf_finish_and_finalize();
}
