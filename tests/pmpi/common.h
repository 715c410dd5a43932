/* SPDX-License-Identifier: Apache-2.0
 *
 * Helpers shared by the PMPI layer's MPI test programs. The programs are
 * plain MPI: they run with the layer preloaded, linked, or not at all, and
 * compare every intercepted call with PMPI_* (which the layer never
 * intercepts) on the same data. */
#ifndef ACCL_PMPI_TEST_COMMON_H
#define ACCL_PMPI_TEST_COMMON_H

#include <dlfcn.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_failures = 0;
static int t_rank = -1;
static const char* t_context = "";

#define CHECK(cond, ...)                                                         \
  do {                                                                           \
    if (!(cond)) {                                                               \
      if (t_failures < 20) {                                                     \
        fprintf(stderr, "[rank %d] FAIL %s:%d [%s] ", t_rank, __FILE__, __LINE__, \
                t_context);                                                      \
        fprintf(stderr, __VA_ARGS__);                                            \
        fprintf(stderr, "\n");                                                   \
      }                                                                          \
      t_failures++;                                                              \
    }                                                                            \
  } while (0)

#define CHECK_RC(rc) CHECK((rc) == MPI_SUCCESS, "rc=%d", (rc))

/* This process's rank in comm and the size of comm. */
static inline void rank_size(MPI_Comm comm, int* rank, int* size) {
  MPI_Comm_rank(comm, rank);
  MPI_Comm_size(comm, size);
}

/* MPI_Init, then this process's rank and size in MPI_COMM_WORLD; the rank
 * also labels every failure message. */
static inline void init_world(int* argc, char*** argv, int* rank, int* size) {
  MPI_Init(argc, argv);
  rank_size(MPI_COMM_WORLD, rank, size);
  t_rank = *rank;
}

/* Whether the program's first argument (its mode) is `mode`. */
static inline int mode_is(int argc, char** argv, const char* mode) {
  return argc > 1 && strcmp(argv[1], mode) == 0;
}

/* A periodic one-dimensional cartesian comm over MPI_COMM_WORLD: the layer
 * keeps its point-to-point calls native. */
static inline MPI_Comm ring_cart(int size) {
  int dims[1] = {size}, periods[1] = {1};
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
  return cart;
}

/* The layer's query API, looked up at run time so the program also runs
 * without the layer (LD_PRELOAD mode links nothing of ours). */
typedef int (*counts_fn)(const char*, unsigned long long*, unsigned long long*);
typedef int (*active_fn)(void);

static inline int layer_active(void) {
  active_fn f = (active_fn)dlsym(RTLD_DEFAULT, "accl_pmpi_active");
  return f ? f() : 0;
}

static inline int layer_present(void) { return dlsym(RTLD_DEFAULT, "accl_pmpi_active") != NULL; }

static inline unsigned long long offloaded_calls(const char* name) {
  counts_fn f = (counts_fn)dlsym(RTLD_DEFAULT, "accl_pmpi_call_counts");
  unsigned long long off = 0, nat = 0;
  if (f) f(name, &off, &nat);
  return off;
}

static inline unsigned long long native_calls(const char* name) {
  counts_fn f = (counts_fn)dlsym(RTLD_DEFAULT, "accl_pmpi_call_counts");
  unsigned long long off = 0, nat = 0;
  if (f) f(name, &off, &nat);
  return nat;
}

/* With TEST_EXPECT_OFFLOAD=1 in the environment, `name` must have been
 * offloaded at least once on this rank (needs ACCL_STATS=1). With
 * TEST_EXPECT_OFFLOAD=0 it must never have been. */
static inline void expect_offloaded(const char* name) {
  const char* e = getenv("TEST_EXPECT_OFFLOAD");
  if (e == NULL) return;
  if (atoi(e) == 1) CHECK(offloaded_calls(name) > 0, "%s was never offloaded", name);
  else CHECK(offloaded_calls(name) == 0, "%s was offloaded although it should not be", name);
}

/* The offload proof at the end of a program: with more than one rank, each
 * call named (the list ends with NULL) must pass expect_offloaded. */
__attribute__((sentinel)) static inline void expect_offloaded_with_peers(int size, ...) {
  t_context = "offload proof";
  if (size < 2) return;
  va_list names;
  va_start(names, size);
  for (const char* name = va_arg(names, const char*); name != NULL; name = va_arg(names, const char*))
    expect_offloaded(name);
  va_end(names);
}

/* Sums failures over all ranks (PMPI: the check itself must not depend on
 * the layer), prints one verdict, returns the process exit code. */
static int finish(const char* name) {
  int total = 0;
  PMPI_Allreduce(&t_failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (t_rank == 0) {
    printf("%s: %s (%d failures; layer %s)\n", name, total ? "FAILED" : "passed", total,
           layer_present() ? (layer_active() ? "active" : "loaded, inactive") : "absent");
    fflush(stdout);
  }
  MPI_Finalize();
  return total ? 1 : 0;
}

#endif
