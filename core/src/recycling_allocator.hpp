// SPDX-License-Identifier: Apache-2.0
//
// RecyclingAllocator: an allocator for std::allocate_shared that keeps freed
// blocks for the next object of the same type instead of returning them to
// malloc. Every offloaded call hands its caller a shared request; without
// this each call paid a malloc/free pair on the data path (the issue's "no
// per-call allocation" target, checked end to end by tests/pmpi/test_alloc.c).
//
// One free list per block type for the whole process, behind a mutex (a
// request may be freed on another thread than the one that made it), with a
// few lock-free spare slots in front. The
// lists are never destroyed: requests may outlive the driver that made them,
// and a block freed during static destruction must still find its list.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <new>
#include <vector>

namespace accl::detail {

class BlockFreeList {
 public:
  BlockFreeList(size_t bytes, size_t align) : bytes_(bytes), align_(align) {}

  void* take() {
    for (auto& slot : spares_) {
      if (slot.load(std::memory_order_relaxed) == nullptr) continue;
      if (void* p = slot.exchange(nullptr, std::memory_order_acquire)) return p;
    }
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        void* p = free_.back();
        free_.pop_back();
        return p;
      }
    }
    return ::operator new(bytes_, std::align_val_t{align_});
  }

  void give_back(void* p) noexcept {
    for (auto& slot : spares_) {
      void* empty = nullptr;
      if (slot.load(std::memory_order_relaxed) == nullptr &&
          slot.compare_exchange_strong(empty, p, std::memory_order_release, std::memory_order_relaxed))
        return;
    }
    {
      std::lock_guard lock(mutex_);
      // The vector's capacity grows only until it holds the most requests
      // alive at once; beyond kMaxKept, blocks go back to the heap.
      if (free_.size() < kMaxKept) {
        try {
          free_.push_back(p);
          return;
        } catch (...) {
          // No room to remember it: free it below.
        }
      }
    }
    ::operator delete(p, std::align_val_t{align_});
  }

 private:
  static constexpr size_t kMaxKept = 4096;
  const size_t bytes_;
  const size_t align_;
  // A few blocks passed on without the mutex: a small message's calls make
  // and drop a request or two at a time, and the mutex round trip on each
  // end cost more than the rest of making the request.
  std::atomic<void*> spares_[4] = {};
  std::mutex mutex_;
  std::vector<void*> free_;
};

template <typename T>
BlockFreeList& free_list_for() {
  static BlockFreeList* list = new BlockFreeList(sizeof(T), alignof(T));  // never destroyed (see above)
  return *list;
}

template <typename T>
struct RecyclingAllocator {
  using value_type = T;

  RecyclingAllocator() = default;
  template <typename U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    if (n != 1) return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{alignof(T)}));
    return static_cast<T*>(free_list_for<T>().take());
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n != 1) return ::operator delete(p, std::align_val_t{alignof(T)});
    free_list_for<T>().give_back(p);
  }

  template <typename U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace accl::detail
