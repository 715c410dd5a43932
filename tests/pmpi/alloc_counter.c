/* SPDX-License-Identifier: Apache-2.0
 *
 * Preloaded ahead of the PMPI layer by test_alloc.c's runs: counts every heap
 * allocation of the process (all threads: the application's, the emulator's
 * firmware and transport threads) and forwards it to glibc. That includes the
 * aligned entry points: C++'s aligned operator new (used by the driver's
 * request pool for fresh blocks) goes through aligned_alloc, so a pool that
 * stopped recycling would otherwise go unnoticed. The program reads the
 * count through accl_test_allocations(). */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

extern void* __libc_malloc(size_t bytes);
extern void* __libc_calloc(size_t n, size_t bytes);
extern void* __libc_realloc(void* p, size_t bytes);
extern void* __libc_memalign(size_t alignment, size_t bytes);
extern void* __libc_valloc(size_t bytes);
extern void* __libc_pvalloc(size_t bytes);

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

void* memalign(size_t alignment, size_t bytes) {
  count();
  return __libc_memalign(alignment, bytes);
}

void* aligned_alloc(size_t alignment, size_t bytes) {
  count();
  return __libc_memalign(alignment, bytes);
}

int posix_memalign(void** out, size_t alignment, size_t bytes) {
  count();
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(alignment, bytes);
  if (p == NULL && bytes != 0) return ENOMEM;
  *out = p;
  return 0;
}

void* valloc(size_t bytes) {
  count();
  return __libc_valloc(bytes);
}

void* pvalloc(size_t bytes) {
  count();
  return __libc_pvalloc(bytes);
}

unsigned long accl_test_allocations(void) { return atomic_load_explicit(&g_allocations, memory_order_relaxed); }
