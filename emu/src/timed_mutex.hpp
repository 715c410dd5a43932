// SPDX-License-Identifier: Apache-2.0
//
// A mutex whose lock can give up at a deadline.
#pragma once

#include "transport.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace accl::emu::transport_detail {

// A mutex whose lock can give up at a deadline. Not std::timed_mutex: its
// try_lock_until uses pthread_mutex_clocklock, which ThreadSanitizer (GCC 12)
// does not intercept, so every later unlock is reported as an error.
// The lock is one atomic flag: an uncontended lock and unlock (every small
// message's send) is one exchange and one store, with no mutex round trip
// and no condition-variable notify. Only waiters use mutex_ and released_.
class TimedMutex {
 public:
  bool try_lock_until(Clock::time_point deadline) {
    if (try_lock()) return true;
    std::unique_lock lock(mutex_);
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    const bool locked = released_.wait_until(lock, deadline, [&] { return try_lock(); });
    waiters_.fetch_sub(1, std::memory_order_relaxed);
    return locked;
  }
  void lock() {
    if (try_lock()) return;
    std::unique_lock lock(mutex_);
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    released_.wait(lock, [&] { return try_lock(); });
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }
  bool try_lock() { return !locked_.exchange(true, std::memory_order_seq_cst); }
  void unlock() {
    locked_.store(false, std::memory_order_seq_cst);
    // Dekker-style with the waiter (both sides seq_cst): either its try_lock
    // after registering sees the flag clear, or we see it registered. It
    // registers and tests under mutex_, so taking mutex_ here means it is
    // either asleep on released_ (and gets the notify) or has not yet
    // tested the flag (and will see it clear).
    if (waiters_.load(std::memory_order_seq_cst) == 0) return;
    { std::lock_guard lock(mutex_); }
    released_.notify_all();
  }

 private:
  std::atomic<bool> locked_{false};
  std::atomic<int> waiters_{0};
  std::mutex mutex_;
  std::condition_variable released_;
};

}  // namespace accl::emu::transport_detail
