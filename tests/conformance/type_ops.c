/* SPDX-License-Identifier: Apache-2.0
 *
 * Reductions over the 8/16-bit, unsigned and pair types with every
 * predefined op MPI defines on them, every element checked against a value
 * computed here from what every rank contributed.
 *
 *   type_ops [seed=N] [large=N] [ompi_quirks=1] [mpi_error=0]
 *
 * For each C integer type (char, signed/unsigned char, int8/uint8, short,
 * unsigned short, int16/uint16, unsigned, unsigned long, uint32/uint64, int,
 * long) x SUM PROD MAX MIN BAND BOR BXOR LAND LOR LXOR, and each pair type
 * (MPI_2INT, MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT) x
 * MINLOC MAXLOC: MPI_Allreduce (also in place), MPI_Reduce to a rotating
 * root (also in place), MPI_Reduce_scatter_block and MPI_Reduce_scatter with
 * equal counts. Values include the types' extremes (sums and products wrap),
 * negatives, zeros (logical ops) and, for the pairs, equal values on several
 * ranks with different indices (the lower index must win). The padding of
 * MPI_DOUBLE_INT / MPI_LONG_INT / MPI_SHORT_INT items and the bytes past
 * the result must stay untouched. Run under the layer with
 * ACCL_FALLBACK=error: every call must then be offloaded. */
#include <limits.h>

#include "conformance.h"

CF_DEFINE_GLOBALS

/* ----- integers: values held as 64-bit patterns, stored at their width ----- */

typedef struct {
  MPI_Datatype type;
  const char* name;
  int size;
  int is_signed;
} int_type;

static uint64_t load_int(const void* p, const int_type* t) {
  switch (t->size) {
    case 1: {
      uint8_t v;
      memcpy(&v, p, 1);
      return t->is_signed ? (uint64_t)(int64_t)(int8_t)v : v;
    }
    case 2: {
      uint16_t v;
      memcpy(&v, p, 2);
      return t->is_signed ? (uint64_t)(int64_t)(int16_t)v : v;
    }
    case 4: {
      uint32_t v;
      memcpy(&v, p, 4);
      return t->is_signed ? (uint64_t)(int64_t)(int32_t)v : v;
    }
    default: {
      uint64_t v;
      memcpy(&v, p, 8);
      return v;
    }
  }
}

static void store_int(void* p, const int_type* t, uint64_t v) {
  switch (t->size) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
  }
}

/* Argument ompi_quirks=1 (the native run): small values where Open MPI
 * 4.1.4 itself is wrong, so that run still validates the rest of the
 * program: SUM of 8/16-bit types saturates in its AVX kernels (127 + 1 =
 * 127) where C wraps, and MAX/MIN of 64-bit unsigned types compare signed
 * (max(0, 2^64 - 1) = 0). Under the layer every value is used. */
static int g_ompi_quirks = 0;
static int g_no_overflow = 0;

/* The value of rank `r`'s element `i`: extremes, zeros and random bits. */
static uint64_t int_value(const int_type* t, uint64_t salt, int r, size_t i) {
  const int bits = 8 * t->size;
  const uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  const uint64_t top = 1ull << (bits - 1);
  if (g_no_overflow) {
    cf_rng g = {salt * 1000003u + (uint64_t)r * 7919u + i};
    const int64_t v = (int64_t)(cf_next(&g) % 41) - (t->is_signed ? 20 : 0);
    return (uint64_t)v;
  }
  const uint64_t edges[] = {t->is_signed ? top : 0,            /* min */
                            t->is_signed ? top - 1 : mask,     /* max */
                            t->is_signed ? top - 2 : mask - 1, /* max - 1 */
                            0, 1, mask /* -1 as bits */};
  uint64_t bits_value;
  if (i % 4 == 0) bits_value = edges[(i / 4 + (size_t)r + salt) % 6];
  else if ((i + salt) % 7 == (size_t)r % 7) bits_value = 0;
  else {
    cf_rng g = {salt * 1000003u + (uint64_t)r * 7919u + i};
    bits_value = cf_next(&g);
  }
  bits_value &= mask;
  /* as load_int would return it (sign-extended for signed types) */
  if (t->is_signed && (bits_value & top)) bits_value |= ~mask;
  return bits_value;
}

static uint64_t int_combine(MPI_Op op, const int_type* t, uint64_t a, uint64_t b) {
  if (op == MPI_SUM) return a + b;
  if (op == MPI_PROD) return a * b;
  if (op == MPI_MAX || op == MPI_MIN) {
    int a_less = t->is_signed ? (int64_t)a < (int64_t)b : a < b;
    return (op == MPI_MAX) == a_less ? b : a;
  }
  if (op == MPI_BAND) return a & b;
  if (op == MPI_BOR) return a | b;
  if (op == MPI_BXOR) return a ^ b;
  if (op == MPI_LAND) return a != 0 && b != 0;
  if (op == MPI_LOR) return a != 0 || b != 0;
  return (a != 0) != (b != 0); /* MPI_LXOR */
}

/* Bits of the folded element `i` as load_int returns them. */
static uint64_t int_expected(MPI_Op op, const int_type* t, uint64_t salt, int nranks, size_t i) {
  uint64_t acc = int_value(t, salt, 0, i);
  for (int r = 1; r < nranks; r++) acc = int_combine(op, t, acc, int_value(t, salt, r, i));
  /* the stored width, sign-extended again */
  unsigned char tmp[8];
  store_int(tmp, t, acc);
  return load_int(tmp, t);
}

/* ----- pairs: value and index at the offsets of the C struct ----- */

typedef struct {
  MPI_Datatype type;
  const char* name;
  size_t extent;       /* sizeof the C struct */
  size_t index_offset; /* offsetof its index */
  int value_kind;      /* 0 int, 1 float, 2 double, 3 long, 4 short */
} pair_type;

struct s_2int { int v; int i; };
struct s_float_int { float v; int i; };
struct s_double_int { double v; int i; };
struct s_long_int { long v; int i; };
struct s_short_int { short v; int i; };

static double pair_value_of(const pair_type* t, const void* p) {
  switch (t->value_kind) {
    case 0: { int v; memcpy(&v, p, sizeof v); return v; }
    case 1: { float v; memcpy(&v, p, sizeof v); return v; }
    case 2: { double v; memcpy(&v, p, sizeof v); return v; }
    case 3: { long v; memcpy(&v, p, sizeof v); return (double)v; }
    default: { short v; memcpy(&v, p, sizeof v); return v; }
  }
}

static size_t pair_value_bytes(const pair_type* t) {
  static const size_t bytes[] = {sizeof(int), sizeof(float), sizeof(double), sizeof(long), sizeof(short)};
  return bytes[t->value_kind];
}

/* Rank r's item i: few distinct values (ties across ranks) and indices that
 * differ from the rank order, so ties are decided by the index. */
static void pair_make(const pair_type* t, uint64_t salt, int r, size_t i, void* item) {
  cf_rng g = {salt * 31u + (uint64_t)r * 131u + i};
  const int v = (int)(cf_next(&g) % 5) - 2;
  const int index = (int)((r * 7 + (int)i + (int)salt) % 11) - 3;
  switch (t->value_kind) {
    case 0: { int x = v; memcpy(item, &x, sizeof x); break; }
    case 1: { float x = (float)v * 0.5f; memcpy(item, &x, sizeof x); break; }
    case 2: { double x = v * 0.25; memcpy(item, &x, sizeof x); break; }
    case 3: { long x = v * 1000000000000L; memcpy(item, &x, sizeof x); break; }
    default: { short x = (short)(v * 1000); memcpy(item, &x, sizeof x); break; }
  }
  memcpy((char*)item + t->index_offset, &index, sizeof index);
}

static void pair_expected(MPI_Op op, const pair_type* t, uint64_t salt, int nranks, size_t i, double* value,
                          int* index) {
  unsigned char item[32];
  for (int r = 0; r < nranks; r++) {
    pair_make(t, salt, r, i, item);
    const double v = pair_value_of(t, item);
    int k;
    memcpy(&k, item + t->index_offset, sizeof k);
    if (r == 0 || (op == MPI_MINLOC ? v < *value : v > *value)) {
      *value = v;
      *index = k;
    } else if (v == *value && k < *index) {
      *index = k;
    }
  }
}

/* ----- one reduction, checked ----- */

typedef struct {
  int is_pair;
  const int_type* it;
  const pair_type* pt;
  MPI_Op op;
  const char* op_name;
  size_t extent;
} red_case;

static void make_item(const red_case* c, uint64_t salt, int r, size_t i, void* item) {
  if (c->is_pair) pair_make(c->pt, salt, r, i, item);
  else store_int(item, c->it, int_value(c->it, salt, r, i));
}

/* Checks `count` items starting at global item `first`; the padding of
 * pair items must still hold CF_GUARD. */
static int check_items(const red_case* c, const unsigned char* buf, uint64_t salt, int nranks, size_t first,
                       int count, const char* call) {
  int bad = 0;
  for (int k = 0; k < count && bad < 3; k++) {
    const unsigned char* item = buf + (size_t)k * c->extent;
    const size_t i = first + (size_t)k;
    if (c->is_pair) {
      double want_v = 0;
      int want_k = 0, got_k;
      pair_expected(c->op, c->pt, salt, nranks, i, &want_v, &want_k);
      memcpy(&got_k, item + c->pt->index_offset, sizeof got_k);
      const double got_v = pair_value_of(c->pt, item);
      if (got_v != want_v || got_k != want_k) {
        CF_CHECK(0, "%s %s %s item %zu: (%g, %d), want (%g, %d)", call, c->pt->name, c->op_name, i, got_v, got_k,
                 want_v, want_k);
        bad++;
      }
      const size_t vb = pair_value_bytes(c->pt);
      for (size_t b = vb; b < c->pt->index_offset; b++)
        if (item[b] != CF_GUARD) {
          CF_CHECK(0, "%s %s item %zu: padding byte %zu written", call, c->pt->name, i, b);
          bad++;
          break;
        }
      for (size_t b = c->pt->index_offset + sizeof(int); b < c->extent; b++)
        if (item[b] != CF_GUARD) {
          CF_CHECK(0, "%s %s item %zu: trailing padding byte %zu written", call, c->pt->name, i, b);
          bad++;
          break;
        }
    } else {
      const uint64_t got = load_int(item, c->it), want = int_expected(c->op, c->it, salt, nranks, i);
      if (got != want) {
        CF_CHECK(0, "%s %s %s item %zu: 0x%llx, want 0x%llx", call, c->it->name, c->op_name, i,
                 (unsigned long long)got, (unsigned long long)want);
        bad++;
      }
    }
  }
  return bad;
}

static int run_case(const red_case* c, MPI_Datatype type, int count, uint64_t salt, int size, int rank,
                    unsigned char* sbuf, unsigned char* rbuf) {
  int bad = 0;
  const size_t block = (size_t)count * c->extent, all = block * (size_t)size;
  const int root = (int)(salt % (uint64_t)size);
  /* everything this rank contributes: items [0, count * size) */
  memset(sbuf, CF_GUARD, all);
  for (size_t i = 0; i < (size_t)count * (size_t)size; i++) make_item(c, salt, rank, i, sbuf + i * c->extent);

  cf_where("allreduce count %d", count);
  memset(rbuf, CF_GUARD, all + 64);
  CF_RC(MPI_Allreduce(sbuf, rbuf, count, type, c->op, MPI_COMM_WORLD));
  bad += check_items(c, rbuf, salt, size, 0, count, "MPI_Allreduce");
  bad += cf_verify_guard(rbuf + block, 64, "MPI_Allreduce past the result") != 0;

  cf_where("allreduce in place count %d", count);
  memcpy(rbuf, sbuf, block);
  CF_RC(MPI_Allreduce(MPI_IN_PLACE, rbuf, count, type, c->op, MPI_COMM_WORLD));
  bad += check_items(c, rbuf, salt, size, 0, count, "MPI_Allreduce(MPI_IN_PLACE)");

  cf_where("reduce root %d count %d", root, count);
  memset(rbuf, CF_GUARD, all + 64);
  CF_RC(MPI_Reduce(sbuf, rbuf, count, type, c->op, root, MPI_COMM_WORLD));
  if (rank == root) bad += check_items(c, rbuf, salt, size, 0, count, "MPI_Reduce");
  bad += cf_verify_guard(rbuf + (rank == root ? block : 0), 64, "MPI_Reduce past the result") != 0;

  cf_where("reduce in place root %d count %d", root, count);
  if (rank == root) {
    memcpy(rbuf, sbuf, block);
    CF_RC(MPI_Reduce(MPI_IN_PLACE, rbuf, count, type, c->op, root, MPI_COMM_WORLD));
    bad += check_items(c, rbuf, salt, size, 0, count, "MPI_Reduce(MPI_IN_PLACE)");
  } else {
    CF_RC(MPI_Reduce(sbuf, NULL, count, type, c->op, root, MPI_COMM_WORLD));
  }

  cf_where("reduce_scatter_block count %d", count);
  memset(rbuf, CF_GUARD, all + 64);
  CF_RC(MPI_Reduce_scatter_block(sbuf, rbuf, count, type, c->op, MPI_COMM_WORLD));
  bad += check_items(c, rbuf, salt, size, (size_t)rank * (size_t)count, count, "MPI_Reduce_scatter_block");
  bad += cf_verify_guard(rbuf + block, 64, "MPI_Reduce_scatter_block past the result") != 0;

  cf_where("reduce_scatter count %d", count);
  int* counts = cf_malloc(sizeof(int) * (size_t)size);
  for (int r = 0; r < size; r++) counts[r] = count;
  memset(rbuf, CF_GUARD, all + 64);
  CF_RC(MPI_Reduce_scatter(sbuf, rbuf, counts, type, c->op, MPI_COMM_WORLD));
  bad += check_items(c, rbuf, salt, size, (size_t)rank * (size_t)count, count, "MPI_Reduce_scatter");
  free(counts);
  return bad;
}

int main(int argc, char** argv) {
  const int size = cf_init(&argc, &argv), rank = cf_world_rank;
  const uint64_t seed = cf_seed_arg(argc, argv, 1);
  /* items of the one large run per type (above the eager size for most) */
  const int large = (int)cf_int_arg(argc, argv, "large", 9000);
  g_ompi_quirks = (int)cf_int_arg(argc, argv, "ompi_quirks", 0);
  if (rank == 0) printf("type_ops: seed=%llu large=%d np=%d\n", (unsigned long long)seed, large, size);

  const int char_signed = (char)-1 < 0;
  const int_type ints[] = {
      {MPI_CHAR, "MPI_CHAR", 1, char_signed},
      {MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", 1, 1},
      {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", 1, 0},
      {MPI_INT8_T, "MPI_INT8_T", 1, 1},
      {MPI_UINT8_T, "MPI_UINT8_T", 1, 0},
      {MPI_SHORT, "MPI_SHORT", (int)sizeof(short), 1},
      {MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", (int)sizeof(short), 0},
      {MPI_INT16_T, "MPI_INT16_T", 2, 1},
      {MPI_UINT16_T, "MPI_UINT16_T", 2, 0},
      {MPI_INT, "MPI_INT", (int)sizeof(int), 1},
      {MPI_UNSIGNED, "MPI_UNSIGNED", (int)sizeof(unsigned), 0},
      {MPI_UINT32_T, "MPI_UINT32_T", 4, 0},
      {MPI_LONG, "MPI_LONG", (int)sizeof(long), 1},
      {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", (int)sizeof(unsigned long), 0},
      {MPI_UINT64_T, "MPI_UINT64_T", 8, 0},
  };
  const struct {
    MPI_Op op;
    const char* name;
  } int_ops[] = {{MPI_SUM, "SUM"},   {MPI_PROD, "PROD"}, {MPI_MAX, "MAX"},   {MPI_MIN, "MIN"},
                 {MPI_BAND, "BAND"}, {MPI_BOR, "BOR"},   {MPI_BXOR, "BXOR"}, {MPI_LAND, "LAND"},
                 {MPI_LOR, "LOR"},   {MPI_LXOR, "LXOR"}};
  const pair_type pairs[] = {
      {MPI_2INT, "MPI_2INT", sizeof(struct s_2int), offsetof(struct s_2int, i), 0},
      {MPI_FLOAT_INT, "MPI_FLOAT_INT", sizeof(struct s_float_int), offsetof(struct s_float_int, i), 1},
      {MPI_DOUBLE_INT, "MPI_DOUBLE_INT", sizeof(struct s_double_int), offsetof(struct s_double_int, i), 2},
      {MPI_LONG_INT, "MPI_LONG_INT", sizeof(struct s_long_int), offsetof(struct s_long_int, i), 3},
      {MPI_SHORT_INT, "MPI_SHORT_INT", sizeof(struct s_short_int), offsetof(struct s_short_int, i), 4},
  };

  const size_t max_bytes = (size_t)(large > 37 ? large : 37) * 16 * (size_t)size + 64;
  unsigned char* sbuf = cf_malloc(max_bytes);
  unsigned char* rbuf = cf_malloc(max_bytes);
  int bad = 0;
  uint64_t salt = seed * 977;

  for (size_t t = 0; t < sizeof ints / sizeof ints[0] && bad < 10; t++)
    for (size_t o = 0; o < sizeof int_ops / sizeof int_ops[0] && bad < 10; o++) {
      red_case c = {0, &ints[t], NULL, int_ops[o].op, int_ops[o].name, (size_t)ints[t].size};
      const int counts[] = {1, 37, large};
      /* the large run once per type, with the op that changes per type */
      const int ncounts = o == t % (sizeof int_ops / sizeof int_ops[0]) ? 3 : 2;
      g_no_overflow = g_ompi_quirks && ((int_ops[o].op == MPI_SUM && ints[t].size <= 2) ||
                                        ((int_ops[o].op == MPI_MAX || int_ops[o].op == MPI_MIN) &&
                                         !ints[t].is_signed && ints[t].size == 8));
      for (int k = 0; k < ncounts; k++) bad += run_case(&c, ints[t].type, counts[k], ++salt, size, rank, sbuf, rbuf);
    }
  for (size_t t = 0; t < sizeof pairs / sizeof pairs[0] && bad < 10; t++)
    for (int loc = 0; loc < 2; loc++) {
      red_case c = {1, NULL, &pairs[t], loc ? MPI_MAXLOC : MPI_MINLOC, loc ? "MAXLOC" : "MINLOC", pairs[t].extent};
      const int counts[] = {1, 37, large};
      for (int k = 0; k < 3; k++) bad += run_case(&c, pairs[t].type, counts[k], ++salt, size, rank, sbuf, rbuf);
    }

  free(sbuf);
  free(rbuf);
  return cf_finish_and_finalize();
}
