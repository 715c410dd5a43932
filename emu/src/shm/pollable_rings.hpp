// SPDX-License-Identifier: Apache-2.0
//
// The list of inbound rings that host threads poll, read without a lock.
#pragma once

#include "inbound_ring.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

// The rings host threads poll. The control thread adds and removes rings
// now and then; host threads read the list on every poll, so they read a
// published snapshot without taking a lock. A replaced snapshot is freed once
// no poll that may have loaded it still runs: each poll counts itself in one
// of two counters, chosen by the phase it reads first. A writer publishes the
// new snapshot and then, for each counter in turn, flips the phase away from
// it and waits until it drains. A poll holding the old snapshot counted
// itself before the publication, hence before either wait; polls that start
// meanwhile count in the other counter, so the waits end even while polls
// keep overlapping.
class PollableRings {
 public:
  using List = std::vector<std::shared_ptr<InboundRing>>;

  PollableRings() : current_(new List) {}
  ~PollableRings() { delete current_.load(std::memory_order_acquire); }
  PollableRings(const PollableRings&) = delete;
  PollableRings& operator=(const PollableRings&) = delete;

  template <class F>
  void for_each(F&& f) {
    const unsigned phase = phase_.load(std::memory_order_seq_cst) & 1;
    readers_[phase].fetch_add(1, std::memory_order_seq_cst);
    const List* list = current_.load(std::memory_order_seq_cst);
    for (const auto& ring : *list) f(*ring);
    readers_[phase].fetch_sub(1, std::memory_order_release);
  }

  void add(std::shared_ptr<InboundRing> ring) {
    std::lock_guard lock(writer_mutex_);
    auto next = std::make_unique<List>(*current_.load(std::memory_order_relaxed));
    next->push_back(std::move(ring));
    replace(std::move(next));
  }
  void remove(const InboundRing* ring) {
    std::lock_guard lock(writer_mutex_);
    auto next = std::make_unique<List>(*current_.load(std::memory_order_relaxed));
    std::erase_if(*next, [ring](const std::shared_ptr<InboundRing>& r) { return r.get() == ring; });
    replace(std::move(next));
  }
  void clear() {
    std::lock_guard lock(writer_mutex_);
    replace(std::make_unique<List>());
  }

 private:
  // writer_mutex_ held.
  void replace(std::unique_ptr<List> next) {
    std::unique_ptr<List> old(current_.exchange(next.release(), std::memory_order_seq_cst));
    for (int flip = 0; flip < 2; ++flip) {
      const unsigned drained = phase_.fetch_add(1, std::memory_order_seq_cst) & 1;
      // Polls are short (a bounded number of messages per ring).
      while (readers_[drained].load(std::memory_order_acquire) != 0) std::this_thread::yield();
    }
  }

  std::mutex writer_mutex_;  // serializes add / remove / clear
  std::atomic<List*> current_;
  std::atomic<unsigned> phase_{0};
  std::atomic<int> readers_[2] = {0, 0};
};

}  // namespace shm
}  // namespace accl::emu::transport_detail
