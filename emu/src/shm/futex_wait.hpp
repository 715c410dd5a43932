// SPDX-License-Identifier: Apache-2.0
//
// Waiting on the words of a shared ring: futexes shared between processes,
// the spin before sleeping, and bounded sleeps.
#pragma once

#include "transport.hpp"

#include <accl/spin.hpp>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <thread>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

// Longest single futex sleep: a safety net only, every state change wakes
// the sleeper explicitly.
constexpr auto kSleepSlice = std::chrono::milliseconds(100);

// ---- futex (shared, not FUTEX_PRIVATE: the words live in a shared mapping)

inline void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::microseconds timeout) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
  ts.tv_nsec = static_cast<long>((timeout.count() % 1000000) * 1000);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

inline void futex_wake_all(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Unconditional wake: for rare events (close, abort, stop).
inline void wake(std::atomic<uint32_t>& word) {
  word.fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(word);
}

// Wake after publishing progress; costs a syscall only when the other side
// sleeps. Dekker-style handshake on `sleeping` with read-modify-writes (not
// fences, which ThreadSanitizer cannot follow): both RMWs are ordered in the
// word's modification order, so either ours reads the sleeper's 1 and wakes
// it, or its exchange reads our write and thereby sees our progress.
inline void notify(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleeping) {
  if (sleeping.fetch_add(0, std::memory_order_acq_rel) != 0) wake(word);
}

template <class Ready>
inline void sleep_until(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleeping, Ready ready,
                 std::chrono::microseconds timeout) {
  sleeping.exchange(1, std::memory_order_acq_rel);
  // A wake between here and futex_wait changes `word`: the wait returns.
  const uint32_t seen = word.load(std::memory_order_acquire);
  if (!ready() && timeout.count() > 0) futex_wait(word, seen, timeout);
  sleeping.store(0, std::memory_order_relaxed);
}

// Polls `ready` for up to `budget` (ACCL_EMU_SPIN_US) before the caller goes
// to sleep: a message that follows within microseconds is taken without a
// futex round trip. Yields now and then so that, with more threads than
// cores, the thread we wait for can run on this core. (Not the adaptive
// SpinBudget of accl/spin.hpp: streaming a payload through the ring, reader and
// sender wait for each other piece by piece, and a budget that shrinks after
// late pieces sent them to the futex: 4 MiB osu_bw lost a third.)
template <class Ready>
inline bool spin_until(Ready ready, std::chrono::microseconds budget) {
  // Usually ready at once (a small message finds room in the ring): no
  // clock read then.
  if (ready()) return true;
  if (budget.count() <= 0) return false;
  const auto end = Clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (Clock::now() >= end) return ready();
    std::this_thread::yield();
  }
}

inline std::chrono::microseconds until(Clock::time_point deadline, std::chrono::microseconds cap) {
  auto rest = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
  return std::clamp(rest, std::chrono::microseconds(0), cap);
}

}  // namespace shm
}  // namespace accl::emu::transport_detail
