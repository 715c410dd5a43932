// SPDX-License-Identifier: Apache-2.0
//
// Spin-then-block helpers shared by every layer that waits by polling: the
// emulator's doorbell and transports and the PMPI layer's wait loops. One
// policy for all of them, so 2 ranks on 2 cores hand off without giving the
// core away while 4+ ranks on 2 cores stop spinning in vain.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace accl {

// One short pause inside spin loops (PAUSE on x86; lets the sibling
// hyper-thread run and saves power).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long a waiter spins before it blocks, adapted to how well spinning
// works right now. Spinning pays only when the thread that will wake us runs
// on another core; with more busy threads than cores (4+ ranks on 2 cores:
// each rank has a host and a firmware thread) a spin runs out in vain and
// steals the core from the very thread we wait for. So: a spin that ends
// with the event doubles the budget it had (up to the configured maximum),
// one that runs out halves it, down to zero (block at once); every 64th wait
// probes with the full budget so spinning comes back when cores free up (a
// probe that succeeds keeps the full budget: doubling the collapsed budget
// instead gave 1 us, which a round trip of a few microseconds outlasts, so
// spinning never came back). An event that arrives only late in the spin
// counts as a miss too: under oversubscription the event is late *because*
// we hold the core.
class SpinBudget {
 public:
  // `floor`: the budget never drops below it (0: down to blocking at once).
  explicit SpinBudget(std::chrono::nanoseconds max, std::chrono::nanoseconds floor = std::chrono::nanoseconds(0))
      : max_(max.count()), floor_(std::min(floor.count(), max.count())), budget_(max.count()) {}
  // Budget for the next wait.
  std::chrono::nanoseconds next() {
    int64_t b = budget_.load(std::memory_order_relaxed);
    if (b < max_ && (waits_.fetch_add(1, std::memory_order_relaxed) & 63) == 0) b = max_;
    return std::chrono::nanoseconds(b);
  }
  // `used`: the budget this wait had (what next() returned).
  void spin_succeeded(std::chrono::nanoseconds used) {
    budget_.store(std::min(max_, std::max<int64_t>(2 * used.count(), 1000)), std::memory_order_relaxed);
  }
  void spin_failed() {
    int64_t b = budget_.load(std::memory_order_relaxed) / 2;
    budget_.store(std::max(floor_, b < 500 ? int64_t{0} : b), std::memory_order_relaxed);
  }

 private:
  const int64_t max_;
  const int64_t floor_;
  std::atomic<int64_t> budget_;  // relaxed: a heuristic, races only blur it
  std::atomic<uint32_t> waits_{0};
};

}  // namespace accl
