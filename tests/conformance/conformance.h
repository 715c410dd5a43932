/* SPDX-License-Identifier: Apache-2.0
 *
 * Helpers of the conformance stress programs. The programs are plain MPI:
 * they must pass natively (no layer) and unchanged under
 * LD_PRELOAD=libaccl_pmpi.so. They check every byte received and every
 * status field against what MPI 3.1 requires, and print " No Errors" when
 * everything held (the convention of MPI test suites).
 *
 * Random choices come from a seeded generator that every rank runs in step
 * (same seed, same number of draws), so all ranks agree on the next
 * operation without communicating; the seed is printed so a failing
 * interleaving can be replayed. */
#ifndef ACCL_CONFORMANCE_H
#define ACCL_CONFORMANCE_H

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shared by every file of a program; exactly one file defines them with
 * CF_DEFINE_GLOBALS. */
extern int cf_failures;
extern int cf_world_rank;
extern char cf_step[160];
/* 0 (argument mpi_error=0): status.MPI_ERROR is not checked, for runs that
 * keep the rest of a program in CI while the layer still writes it. */
extern int cf_check_mpi_error;
#define CF_DEFINE_GLOBALS   \
  int cf_failures = 0;      \
  int cf_world_rank = -1;   \
  char cf_step[160] = "setup"; \
  int cf_check_mpi_error = 1;

/* What the program was doing, for failure messages. */
static inline void cf_where(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cf_step, sizeof cf_step, fmt, ap);
  va_end(ap);
}

#define CF_CHECK(cond, ...)                                                           \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      if (cf_failures < 25) {                                                         \
        fprintf(stderr, "[rank %d] FAIL %s:%d [%s] ", cf_world_rank, __FILE__, __LINE__, \
                cf_step);                                                             \
        fprintf(stderr, __VA_ARGS__);                                                 \
        fprintf(stderr, "\n");                                                        \
        fflush(stderr);                                                               \
      }                                                                               \
      cf_failures++;                                                                  \
    }                                                                                 \
  } while (0)

#define CF_RC(call)                                                  \
  do {                                                               \
    int cf_rc_ = (call);                                             \
    CF_CHECK(cf_rc_ == MPI_SUCCESS, "%s returned %d", #call, cf_rc_); \
  } while (0)

/* --- deterministic generator (splitmix64): same sequence on every rank --- */
typedef struct {
  uint64_t s;
} cf_rng;

static inline uint64_t cf_next(cf_rng* g) {
  uint64_t z = (g->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n) (n > 0). */
static inline int cf_below(cf_rng* g, int n) { return (int)(cf_next(g) % (uint64_t)n); }

/* The byte at position i of the message identified by `salt` (a mix of
 * step, source, destination...): every byte differs from its neighbours and
 * from other messages, so a shifted, truncated or misrouted copy shows. */
static inline unsigned char cf_byte(uint64_t salt, size_t i) {
  uint64_t z = salt * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull;
  z ^= z >> 29;
  return (unsigned char)(z ^ (z >> 8) ^ (z >> 17));
}

static inline void cf_fill(void* buf, size_t n, uint64_t salt) {
  unsigned char* b = (unsigned char*)buf;
  for (size_t i = 0; i < n; i++) b[i] = cf_byte(salt, i);
}

/* Number of bytes of buf[0..n) that differ from the pattern; reports the
 * first mismatch. */
static inline size_t cf_verify(const void* buf, size_t n, uint64_t salt, const char* what) {
  const unsigned char* b = (const unsigned char*)buf;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (b[i] != cf_byte(salt, i)) {
      if (bad++ == 0) first = i;
    }
  CF_CHECK(bad == 0, "%s: %zu of %zu bytes wrong, first at %zu (got 0x%02x want 0x%02x)", what, bad, n,
           first, bad ? b[first] : 0, bad ? cf_byte(salt, first) : 0);
  return bad;
}

/* Bytes the receiver must not touch (beyond a message, gaps of a type). */
#define CF_GUARD 0xA5

static inline size_t cf_verify_guard(const void* buf, size_t n, const char* what) {
  const unsigned char* b = (const unsigned char*)buf;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (b[i] != CF_GUARD) {
      if (bad++ == 0) first = i;
    }
  CF_CHECK(bad == 0, "%s: %zu bytes written that must not be, first at %zu", what, bad, first);
  return bad;
}

/* MPI 3.1 section 3.2.5: calls do not modify a status's MPI_ERROR; only the
 * multiple-completion calls may, and only when they return
 * MPI_ERR_IN_STATUS. Statuses are pre-filled with this sentinel. */
#define CF_ERR_SENTINEL 0x5EED

static inline void cf_status_prefill(MPI_Status* st, int n) {
  for (int i = 0; i < n; i++) {
    memset(&st[i], 0x77, sizeof st[i]);
    st[i].MPI_ERROR = CF_ERR_SENTINEL;
    st[i].MPI_SOURCE = -77;
    st[i].MPI_TAG = -77;
  }
}

/* A status from a single-completion call (or probe): source, tag, element
 * count in `type`, and MPI_ERROR untouched. want_count < 0: not checked. */
static inline void cf_check_status(const MPI_Status* st, int want_source, int want_tag, MPI_Datatype type,
                                   int want_count, const char* call) {
  CF_CHECK(st->MPI_SOURCE == want_source, "%s: status.MPI_SOURCE %d, want %d", call, st->MPI_SOURCE,
           want_source);
  CF_CHECK(st->MPI_TAG == want_tag, "%s: status.MPI_TAG %d, want %d", call, st->MPI_TAG, want_tag);
  CF_CHECK(!cf_check_mpi_error || st->MPI_ERROR == CF_ERR_SENTINEL,
           "%s: status.MPI_ERROR written (%d) by a call that must not", call, st->MPI_ERROR);
  if (want_count >= 0) {
    int count = -1;
    MPI_Get_count(st, type, &count);
    CF_CHECK(count == want_count, "%s: MPI_Get_count %d, want %d", call, count, want_count);
  }
}

/* A status from a multiple-completion call that succeeded: MPI 3.1 leaves
 * MPI_ERROR alone; Open MPI writes MPI_SUCCESS there, which no program can
 * tell from "untouched" in a useful way, so both are accepted. Anything
 * else is a bug. */
static inline void cf_check_status_multi(const MPI_Status* st, int want_source, int want_tag, MPI_Datatype type,
                                         int want_count, const char* call) {
  MPI_Status copy = *st;
  CF_CHECK(!cf_check_mpi_error || st->MPI_ERROR == CF_ERR_SENTINEL || st->MPI_ERROR == MPI_SUCCESS,
           "%s: status.MPI_ERROR %d after success", call, st->MPI_ERROR);
  copy.MPI_ERROR = CF_ERR_SENTINEL;
  cf_check_status(&copy, want_source, want_tag, type, want_count, call);
}

/* Sums failures over MPI_COMM_WORLD, prints one verdict on rank 0, returns
 * the exit code. */
static inline int cf_finish(void) {
  int total = 0;
  MPI_Allreduce(&cf_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (cf_world_rank == 0) {
    if (total == 0) printf(" No Errors\n");
    else printf(" Found %d errors\n", total);
    fflush(stdout);
  }
  return total == 0 ? 0 : 1;
}

/* MPI_Finalize after the verdict of cf_finish; returns the exit code. */
static inline int cf_finish_and_finalize(void) {
  int rc = cf_finish();
  MPI_Finalize();
  return rc;
}

/* Seed: argument "seed=N" or 1. */
static inline uint64_t cf_seed_arg(int argc, char** argv, uint64_t fallback) {
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], "seed=", 5) == 0) return strtoull(argv[i] + 5, NULL, 0);
  return fallback;
}

/* Arguments every program takes: mpi_error=0 (see cf_check_mpi_error). */
static inline void cf_common_args(int argc, char** argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "mpi_error=0") == 0) cf_check_mpi_error = 0;
}

/* The start of every program: MPI_Init, cf_world_rank, the common
 * arguments. Returns the size of MPI_COMM_WORLD. */
static inline int cf_init(int* argc, char*** argv) {
  MPI_Init(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &cf_world_rank);
  cf_common_args(*argc, *argv);
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

/* Integer argument "name=N" or fallback. */
static inline long cf_int_arg(int argc, char** argv, const char* name, long fallback) {
  size_t n = strlen(name);
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return strtol(argv[i] + n + 1, NULL, 0);
  return fallback;
}

static inline void* cf_malloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "[rank %d] out of memory (%zu bytes)\n", cf_world_rank, n);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  return p;
}

#endif
