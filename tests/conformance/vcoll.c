/* SPDX-License-Identifier: Apache-2.0
 *
 * The v-collectives, scans and irregular reduce_scatter, checked element by
 * element: MPI_Allgatherv, MPI_Gatherv, MPI_Scatterv, MPI_Alltoallv,
 * MPI_Scan, MPI_Exscan, MPI_Reduce_scatter with unequal counts, blocking and
 * MPI_I*, plain and MPI_IN_PLACE, with zero counts, displacements that are
 * neither zero-based nor increasing (blocks laid out backwards, with gaps the
 * call must not write), odd byte sizes (MPI_BYTE) and a non-contiguous
 * derived type (two ints with a hole between them), at sizes that travel
 * eagerly and by rendezvous. Scans run every op the device offers for its
 * type (SUM, PROD, MAX, MIN; SUM and PROD on unsigned) with exact values.
 * Exscan's rank 0 result is undefined and never read.
 * Arguments: seed=N is accepted for symmetry with the other programs (the
 * cases are fixed); quick=1 runs only the small sizes. */
#include "conformance.h"

CF_DEFINE_GLOBALS

static int g_rank, g_size;

/* --- movement kinds: the item a block is made of ------------------------- */
enum { K_INT, K_BYTE, K_HOLEY, K_COUNT };
static MPI_Datatype g_holey; /* ints at 0 and 2 of 3: 8 data bytes, extent 12 */
static const char* kind_name[K_COUNT] = {"int", "byte", "holey"};
static MPI_Datatype kind_type(int k) { return k == K_INT ? MPI_INT : k == K_BYTE ? MPI_BYTE : g_holey; }
static size_t kind_data(int k) { return k == K_INT ? 4 : k == K_BYTE ? 1 : 8; }
static size_t kind_extent(int k) { return k == K_INT ? 4 : k == K_BYTE ? 1 : 12; }
/* Offset in an item of its j-th data byte. */
static size_t kind_pos(int k, size_t j) { return k == K_HOLEY && j >= 4 ? j + 4 : j; }

static uint64_t salt_of(int step, int src, int dst) {
  return (uint64_t)step * 1000003u + (uint64_t)src * 131u + (uint64_t)dst * 7u + 1u;
}

/* Items [0, n) at `items` (in extents): the pattern of message `salt`. */
static void put_items(unsigned char* buf, int k, size_t first, int n, uint64_t salt) {
  for (size_t i = 0; i < (size_t)n; i++)
    for (size_t j = 0; j < kind_data(k); j++)
      buf[(first + i) * kind_extent(k) + kind_pos(k, j)] = cf_byte(salt, i * kind_data(k) + j);
}

/* Checks a whole buffer of `total` items: every byte inside one of the
 * `nblocks` blocks holds its pattern, every other byte (gaps, holes) the guard. */
static void check_buffer(const unsigned char* buf, int k, size_t total, int nblocks, const int* displs,
                         const int* counts, const uint64_t* salts, const char* what) {
  const size_t bytes = total * kind_extent(k);
  unsigned char* want = malloc(bytes ? bytes : 1);
  memset(want, CF_GUARD, bytes);
  for (int b = 0; b < nblocks; b++) put_items(want, k, (size_t)displs[b], counts[b], salts[b]);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < bytes; i++)
    if (buf[i] != want[i] && bad++ == 0) first = i;
  CF_CHECK(bad == 0, "%s: %zu of %zu bytes wrong, first at %zu (got 0x%02x want 0x%02x)", what, bad, bytes, first,
           bad ? buf[first] : 0, bad ? want[first] : 0);
  free(want);
}

/* Counts: zero for about a quarter of the pairs, else `scale` items or so. */
static int count_of(int step, int a, int b, int scale) {
  int base = (a * 3 + b * 5 + step) % 4;
  return base == 0 ? 0 : base * scale + (a + b) % 3;
}
static int sym_count(int step, int a, int b, int scale) { return count_of(step, a + b, a * b, scale); }

/* Displacements of `n` blocks laid out backwards with gaps; returns the
 * buffer's size in items. */
static size_t layout(int n, const int* counts, int* displs) {
  size_t at = 1;
  for (int p = n - 1; p >= 0; p--) {
    displs[p] = (int)at;
    at += (size_t)counts[p] + (size_t)(p % 2) + 1;
  }
  return at + 1;
}

static unsigned char* guarded(int k, size_t items) {
  unsigned char* b = malloc(items * kind_extent(k) + 1);
  memset(b, CF_GUARD, items * kind_extent(k) + 1);
  return b;
}

static void finish(int nonblocking, MPI_Request* req) {
  if (nonblocking) CF_RC(MPI_Wait(req, MPI_STATUS_IGNORE));
}

/* regular: the layout of an allgather (equal counts, block i at i x count),
 * which the layer hands to the device's allgather when blocks are whole words. */
static void allgatherv_case(int step, int k, int scale, int in_place, int nb, int regular, MPI_Comm comm) {
  int n = g_size, counts[8], displs[8];
  uint64_t salts[8];
  for (int p = 0; p < n; p++) {
    counts[p] = regular ? scale : count_of(step, p, p, scale);
    salts[p] = salt_of(step, p, -1);
  }
  size_t total = layout(n, counts, displs);
  if (regular) {
    for (int p = 0; p < n; p++) displs[p] = p * scale;
    total = (size_t)n * (size_t)scale + 1;
  }
  unsigned char* r = guarded(k, total);
  unsigned char* s = guarded(k, (size_t)counts[g_rank] + 1);
  MPI_Request req;
  cf_where("allgatherv step %d %s scale %d%s%s%s", step, kind_name[k], scale, in_place ? " in place" : "",
           nb ? " nonblocking" : "", regular ? " regular" : "");
  if (in_place) {
    put_items(r, k, (size_t)displs[g_rank], counts[g_rank], salts[g_rank]);
    if (nb) CF_RC(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, counts, displs, kind_type(k), comm, &req));
    else CF_RC(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, counts, displs, kind_type(k), comm));
  } else {
    put_items(s, k, 0, counts[g_rank], salts[g_rank]);
    if (nb)
      CF_RC(MPI_Iallgatherv(s, counts[g_rank], kind_type(k), r, counts, displs, kind_type(k), comm, &req));
    else
      CF_RC(MPI_Allgatherv(s, counts[g_rank], kind_type(k), r, counts, displs, kind_type(k), comm));
  }
  finish(nb, &req);
  check_buffer(r, k, total, n, displs, counts, salts, "allgatherv receive buffer");
  free(r);
  free(s);
}

/* The blocks of a rooted v-collective ("gatherv" or "scatterv") at `step`:
 * rank p's block holds count_of(step, p, p, scale) items, salted by its
 * sender and receiver (p and the root, either way round). Names the case for
 * failure messages; returns the layout's size in items. */
static size_t rooted_blocks(const char* name, int step, int k, int scale, int in_place, int nb, int root,
                            int* counts, int* displs, uint64_t* salts) {
  const int gathers = strcmp(name, "gatherv") == 0;
  for (int p = 0; p < g_size; p++) {
    counts[p] = count_of(step, p, p, scale);
    salts[p] = gathers ? salt_of(step, p, root) : salt_of(step, root, p);
  }
  cf_where("%s step %d root %d %s scale %d%s%s", name, step, root, kind_name[k], scale, in_place ? " in place" : "",
           nb ? " nonblocking" : "");
  return layout(g_size, counts, displs);
}

static void gatherv_case(int step, int k, int scale, int in_place, int nb, MPI_Comm comm) {
  int n = g_size, root = step % n, counts[8], displs[8];
  uint64_t salts[8];
  size_t total = rooted_blocks("gatherv", step, k, scale, in_place, nb, root, counts, displs, salts);
  unsigned char* r = guarded(k, total);
  unsigned char* s = guarded(k, (size_t)counts[g_rank] + 1);
  const void* sbuf = s;
  put_items(s, k, 0, counts[g_rank], salts[g_rank]);
  if (in_place && g_rank == root) {
    put_items(r, k, (size_t)displs[root], counts[root], salts[root]);
    sbuf = MPI_IN_PLACE;
  }
  MPI_Request req;
  if (nb)
    CF_RC(MPI_Igatherv(sbuf, counts[g_rank], kind_type(k), r, counts, displs, kind_type(k), root, comm, &req));
  else
    CF_RC(MPI_Gatherv(sbuf, counts[g_rank], kind_type(k), r, counts, displs, kind_type(k), root, comm));
  finish(nb, &req);
  if (g_rank == root) check_buffer(r, k, total, n, displs, counts, salts, "gatherv receive buffer at the root");
  else check_buffer(r, k, total, 0, displs, counts, salts, "gatherv receive buffer off the root (untouched)");
  free(r);
  free(s);
}

static void scatterv_case(int step, int k, int scale, int in_place, int nb, MPI_Comm comm) {
  int n = g_size, root = (step + 1) % n, counts[8], displs[8];
  uint64_t salts[8];
  size_t total = rooted_blocks("scatterv", step, k, scale, in_place, nb, root, counts, displs, salts);
  unsigned char* s = guarded(k, total);
  unsigned char* r = guarded(k, (size_t)counts[g_rank] + 2);
  if (g_rank == root)
    for (int p = 0; p < n; p++) put_items(s, k, (size_t)displs[p], counts[p], salts[p]);
  void* rbuf = in_place && g_rank == root ? MPI_IN_PLACE : r;
  MPI_Request req;
  if (nb)
    CF_RC(MPI_Iscatterv(s, counts, displs, kind_type(k), rbuf, counts[g_rank], kind_type(k), root, comm, &req));
  else
    CF_RC(MPI_Scatterv(s, counts, displs, kind_type(k), rbuf, counts[g_rank], kind_type(k), root, comm));
  finish(nb, &req);
  int zero = 0;
  if (g_rank == root) check_buffer(s, k, total, n, displs, counts, salts, "scatterv send buffer (unchanged)");
  if (rbuf == MPI_IN_PLACE)
    check_buffer(r, k, (size_t)counts[g_rank] + 2, 0, &zero, counts, salts, "scatterv unused receive buffer");
  else
    check_buffer(r, k, (size_t)counts[g_rank] + 2, 1, &zero, &counts[g_rank], &salts[g_rank],
                 "scatterv receive buffer");
  free(r);
  free(s);
}

static void alltoallv_case(int step, int k, int scale, int in_place, int nb, MPI_Comm comm) {
  int n = g_size, me = g_rank;
  int sc[8], sd[8], rc[8], rd[8];
  uint64_t ssalt[8], rsalt[8];
  for (int p = 0; p < n; p++) {
    /* In place the receive side describes what is sent: counts symmetric. */
    sc[p] = in_place ? sym_count(step, me, p, scale) : count_of(step, me, p, scale);
    rc[p] = in_place ? sym_count(step, p, me, scale) : count_of(step, p, me, scale);
    ssalt[p] = salt_of(step, me, p);
    rsalt[p] = salt_of(step, p, me);
  }
  size_t stotal = layout(n, sc, sd);
  size_t rtotal = layout(n, rc, rd);
  unsigned char* s = guarded(k, stotal);
  unsigned char* r = guarded(k, rtotal);
  MPI_Request req;
  cf_where("alltoallv step %d %s scale %d%s%s", step, kind_name[k], scale, in_place ? " in place" : "",
           nb ? " nonblocking" : "");
  const void* sbuf = s;
  if (in_place) {
    for (int p = 0; p < n; p++) put_items(r, k, (size_t)rd[p], rc[p], ssalt[p]);
    /* The block a rank keeps for itself stays what it was. */
    rsalt[me] = ssalt[me];
    sbuf = MPI_IN_PLACE;
  } else {
    for (int p = 0; p < n; p++) put_items(s, k, (size_t)sd[p], sc[p], ssalt[p]);
  }
  if (nb) CF_RC(MPI_Ialltoallv(sbuf, sc, sd, kind_type(k), r, rc, rd, kind_type(k), comm, &req));
  else CF_RC(MPI_Alltoallv(sbuf, sc, sd, kind_type(k), r, rc, rd, kind_type(k), comm));
  finish(nb, &req);
  check_buffer(r, k, rtotal, n, rd, rc, rsalt, "alltoallv receive buffer");
  if (!in_place) check_buffer(s, k, stotal, n, sd, sc, ssalt, "alltoallv send buffer (unchanged)");
  free(r);
  free(s);
}

/* Two non-blocking calls in flight on one communicator: their messages must
 * not mix. */
static void overlapping_case(int step, MPI_Comm comm) {
  int n = g_size, counts[8], displs[8], tcounts[8], tdispls[8];
  uint64_t salts[8], tsalts[8];
  for (int p = 0; p < n; p++) {
    counts[p] = count_of(step, p, p, 300);
    salts[p] = salt_of(step, p, -1);
    tcounts[p] = count_of(step + 1, p, p, 300);
    tsalts[p] = salt_of(step + 1, p, -1);
  }
  size_t total = layout(n, counts, displs), ttotal = layout(n, tcounts, tdispls);
  unsigned char *a = guarded(K_INT, total), *b = guarded(K_INT, ttotal);
  put_items(a, K_INT, (size_t)displs[g_rank], counts[g_rank], salts[g_rank]);
  put_items(b, K_INT, (size_t)tdispls[g_rank], tcounts[g_rank], tsalts[g_rank]);
  MPI_Request reqs[2];
  cf_where("two Iallgatherv in flight, step %d", step);
  CF_RC(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a, counts, displs, MPI_INT, comm, &reqs[0]));
  CF_RC(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, tcounts, tdispls, MPI_INT, comm, &reqs[1]));
  CF_RC(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
  check_buffer(a, K_INT, total, n, displs, counts, salts, "first Iallgatherv");
  check_buffer(b, K_INT, ttotal, n, tdispls, tcounts, tsalts, "second Iallgatherv");
  free(a);
  free(b);
}

/* --- reductions ------------------------------------------------------------ */
enum { T_INT, T_LONG, T_UNSIGNED, T_FLOAT, T_DOUBLE, T_COUNT };
static const char* type_name[T_COUNT] = {"int", "long", "unsigned", "float", "double"};
static MPI_Datatype red_type(int t) {
  const MPI_Datatype ts[T_COUNT] = {MPI_INT, MPI_LONG, MPI_UNSIGNED, MPI_FLOAT, MPI_DOUBLE};
  return ts[t];
}
static size_t red_size(int t) {
  const size_t s[T_COUNT] = {sizeof(int), sizeof(long), sizeof(unsigned), sizeof(float), sizeof(double)};
  return s[t];
}
enum { O_SUM, O_PROD, O_MAX, O_MIN, O_COUNT };
static const char* op_name[O_COUNT] = {"SUM", "PROD", "MAX", "MIN"};
static MPI_Op red_op(int o) {
  const MPI_Op os[O_COUNT] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
  return os[o];
}
/* Unsigned values have no order on the device; the others take every op. */
static int valid_pair(int t, int o) { return t != T_UNSIGNED || o == O_SUM || o == O_PROD; }

/* Rank r's input at element i: small integers, exact in every type. */
static long input_of(int o, int r, size_t i) {
  if (o == O_PROD) return (long)((r + i) % 3) + 1 - ((i % 5 == 0 && r == 1) ? 3 : 0); /* 1..3, sometimes -2 */
  if (o == O_SUM) return (long)(r + 1) * (long)(i % 7 + 1) - 3;
  return (long)((r * 7 + i * 3) % 11) - 5;
}
static long combine(int o, long a, long b) {
  switch (o) {
    case O_SUM: return a + b;
    case O_PROD: return a * b;
    case O_MAX: return a > b ? a : b;
    default: return a < b ? a : b;
  }
}
static void store(int t, void* buf, size_t i, long v) {
  switch (t) {
    case T_INT: ((int*)buf)[i] = (int)v; break;
    case T_LONG: ((long*)buf)[i] = v; break;
    case T_UNSIGNED: ((unsigned*)buf)[i] = (unsigned)v; break;
    case T_FLOAT: ((float*)buf)[i] = (float)v; break;
    default: ((double*)buf)[i] = (double)v; break;
  }
}
static int same(int t, const void* buf, size_t i, long v) {
  switch (t) {
    case T_INT: return ((const int*)buf)[i] == (int)v;
    case T_LONG: return ((const long*)buf)[i] == v;
    case T_UNSIGNED: return ((const unsigned*)buf)[i] == (unsigned)v;
    case T_FLOAT: return ((const float*)buf)[i] == (float)v;
    default: return ((const double*)buf)[i] == (double)v;
  }
}
/* Unsigned inputs must not be negative for the exact check to mean much. */
static long input(int t, int o, int r, size_t i) {
  long v = input_of(o, r, i);
  return t == T_UNSIGNED && v < 0 ? -v : v;
}

static void scan_case(int t, int o, int count, int exclusive, int in_place, int nb, MPI_Comm comm) {
  size_t sz = red_size(t);
  unsigned char* s = malloc(count * sz + 1);
  unsigned char* r = malloc(count * sz + 1);
  for (int i = 0; i < count; i++) {
    store(t, s, (size_t)i, input(t, o, g_rank, (size_t)i));
    store(t, r, (size_t)i, -77);
  }
  if (in_place) memcpy(r, s, count * sz);
  const void* sbuf = in_place ? MPI_IN_PLACE : s;
  MPI_Request req;
  cf_where("%s %s %s count %d%s%s", exclusive ? "exscan" : "scan", type_name[t], op_name[o], count,
           in_place ? " in place" : "", nb ? " nonblocking" : "");
  if (exclusive) {
    if (nb) CF_RC(MPI_Iexscan(sbuf, r, count, red_type(t), red_op(o), comm, &req));
    else CF_RC(MPI_Exscan(sbuf, r, count, red_type(t), red_op(o), comm));
  } else {
    if (nb) CF_RC(MPI_Iscan(sbuf, r, count, red_type(t), red_op(o), comm, &req));
    else CF_RC(MPI_Scan(sbuf, r, count, red_type(t), red_op(o), comm));
  }
  finish(nb, &req);
  int last = exclusive ? g_rank - 1 : g_rank;
  if (last >= 0) {
    int bad = 0, first = -1;
    for (int i = 0; i < count; i++) {
      long want = input(t, o, 0, (size_t)i);
      for (int q = 1; q <= last; q++) want = combine(o, want, input(t, o, q, (size_t)i));
      if (!same(t, r, (size_t)i, want) && bad++ == 0) first = i;
    }
    CF_CHECK(bad == 0, "%d of %d elements wrong, first at %d", bad, count, first);
  }
  if (!in_place)
    for (int i = 0; i < count; i++)
      CF_CHECK(same(t, s, (size_t)i, input(t, o, g_rank, (size_t)i)), "send buffer changed at %d", i);
  free(s);
  free(r);
}

static void reduce_scatter_case(int step, int t, int o, int scale, int in_place, int nb, MPI_Comm comm) {
  int n = g_size, counts[8], total = 0, before = 0;
  for (int p = 0; p < n; p++) {
    counts[p] = count_of(step, p, p, scale);
    if (p < g_rank) before += counts[p];
    total += counts[p];
  }
  /* Unequal counts are the point: make sure they are. */
  if (n > 1 && counts[0] == counts[1]) counts[0] += 1, total += 1, before += g_rank > 0 ? 1 : 0;
  size_t sz = red_size(t);
  unsigned char* s = malloc((size_t)total * sz + 1);
  unsigned char* r = malloc((size_t)total * sz + 1);
  for (int i = 0; i < total; i++) store(t, s, (size_t)i, input(t, o, g_rank, (size_t)i));
  if (in_place) memcpy(r, s, (size_t)total * sz);
  const void* sbuf = in_place ? MPI_IN_PLACE : s;
  MPI_Request req;
  cf_where("reduce_scatter step %d %s %s%s%s", step, type_name[t], op_name[o], in_place ? " in place" : "",
           nb ? " nonblocking" : "");
  if (nb) CF_RC(MPI_Ireduce_scatter(sbuf, r, counts, red_type(t), red_op(o), comm, &req));
  else CF_RC(MPI_Reduce_scatter(sbuf, r, counts, red_type(t), red_op(o), comm));
  finish(nb, &req);
  int bad = 0, first = -1;
  for (int i = 0; i < counts[g_rank]; i++) {
    long want = input(t, o, 0, (size_t)(before + i));
    for (int q = 1; q < n; q++) want = combine(o, want, input(t, o, q, (size_t)(before + i)));
    if (!same(t, r, (size_t)i, want) && bad++ == 0) first = i;
  }
  CF_CHECK(bad == 0, "%d of %d elements wrong, first at %d", bad, counts[g_rank], first);
  free(s);
  free(r);
}

int main(int argc, char** argv) {
  cf_init(&argc, &argv);
  int quick = 0;
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "quick=1") == 0) quick = 1;
  MPI_Comm comm = MPI_COMM_WORLD;
  MPI_Comm_rank(comm, &g_rank);
  MPI_Comm_size(comm, &g_size);
  if (g_size > 8) {
    if (g_rank == 0) fprintf(stderr, "vcoll: at most 8 ranks\n");
    MPI_Abort(comm, 2);
  }
  MPI_Datatype pair;
  MPI_Type_vector(2, 1, 2, MPI_INT, &pair);
  MPI_Type_create_resized(pair, 0, 12, &g_holey);
  MPI_Type_commit(&g_holey);
  MPI_Type_free(&pair);

  /* 1 item (eager), 20,000 items (80 KiB+ of ints: rendezvous) per block. */
  const int scales[] = {1, 40, 20000};
  const int nscales = quick ? 2 : 3;
  int step = 0;
  for (int si = 0; si < nscales; si++)
    for (int k = 0; k < K_COUNT; k++)
      for (int variant = 0; variant < 4; variant++) {
        int in_place = variant & 1, nb = (variant >> 1) & 1;
        ++step;
        allgatherv_case(step, k, scales[si], in_place, nb, 0, comm);
        allgatherv_case(step, k, scales[si], in_place, nb, 1, comm);
        gatherv_case(step, k, scales[si], in_place, nb, comm);
        scatterv_case(step, k, scales[si], in_place, nb, comm);
        alltoallv_case(step, k, scales[si], in_place, nb, comm);
      }
  overlapping_case(++step, comm);

  const int counts[] = {1, 1000, 70000};
  for (int ci = 0; ci < (quick ? 2 : 3); ci++)
    for (int t = 0; t < T_COUNT; t++)
      for (int o = 0; o < O_COUNT; o++) {
        if (!valid_pair(t, o)) continue;
        for (int variant = 0; variant < 8; variant++)
          scan_case(t, o, counts[ci], variant & 1, (variant >> 1) & 1, (variant >> 2) & 1, comm);
      }
  for (int t = 0; t < T_COUNT; t++)
    for (int o = 0; o < O_COUNT; o++) {
      if (!valid_pair(t, o)) continue;
      for (int variant = 0; variant < 4; variant++)
        reduce_scatter_case(++step, t, o, quick ? 30 : 5000, variant & 1, (variant >> 1) & 1, comm);
    }
  MPI_Type_free(&g_holey);
  return cf_finish_and_finalize();
}
