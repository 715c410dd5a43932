// SPDX-License-Identifier: Apache-2.0
//
// Replaces the global operator new of the test_emu binary with one that
// counts the allocations of the calling thread while a test asks for it
// (see AllocationCounter in emu_test_util.hpp).
#include "emu_test_util.hpp"

#include <cstdlib>
#include <new>

namespace accl::emu::test {
namespace {
thread_local bool counting = false;
thread_local uint64_t counted = 0;
}  // namespace

AllocationCounter::AllocationCounter() {
  counted = 0;
  counting = true;
}
AllocationCounter::~AllocationCounter() { counting = false; }
uint64_t AllocationCounter::count() const { return counted; }

}  // namespace accl::emu::test

namespace {
void* allocate(std::size_t bytes) {
  if (accl::emu::test::counting) ++accl::emu::test::counted;
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void* allocate_aligned(std::size_t bytes, std::align_val_t align) {
  if (accl::emu::test::counting) ++accl::emu::test::counted;
  const std::size_t a = static_cast<std::size_t>(align);
  if (void* p = std::aligned_alloc(a, (bytes + a - 1) / a * a)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t bytes) { return allocate(bytes); }
void* operator new[](std::size_t bytes) { return allocate(bytes); }
void* operator new(std::size_t bytes, std::align_val_t align) { return allocate_aligned(bytes, align); }
void* operator new[](std::size_t bytes, std::align_val_t align) { return allocate_aligned(bytes, align); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
