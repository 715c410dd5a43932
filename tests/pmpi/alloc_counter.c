/* SPDX-License-Identifier: Apache-2.0
 *
 * Preloaded ahead of the PMPI layer by test_alloc.c's runs: counts every
 * malloc, calloc and realloc of the process (all threads: the application's,
 * the emulator's firmware and transport threads) and forwards them to glibc.
 * The program reads the count through accl_test_allocations(). */
#include <stdatomic.h>
#include <stddef.h>

extern void* __libc_malloc(size_t bytes);
extern void* __libc_calloc(size_t n, size_t bytes);
extern void* __libc_realloc(void* p, size_t bytes);

static atomic_ulong g_allocations;

static void count(void) { atomic_fetch_add_explicit(&g_allocations, 1, memory_order_relaxed); }

void* malloc(size_t bytes) {
  count();
  return __libc_malloc(bytes);
}

void* calloc(size_t n, size_t bytes) {
  count();
  return __libc_calloc(n, bytes);
}

void* realloc(void* p, size_t bytes) {
  count();
  return __libc_realloc(p, bytes);
}

unsigned long accl_test_allocations(void) { return atomic_load_explicit(&g_allocations, memory_order_relaxed); }
