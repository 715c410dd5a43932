// SPDX-License-Identifier: Apache-2.0
//
// Wakeup: the one doorbell of an emulated CCLO's firmware thread. Producers
// (call controller, receive sink, shutdown) ring it after they queued work;
// the firmware's DataPlane::idle() waits on it.
//
// It is an epoch counter rather than a "work available" predicate so the
// firmware may leave work queued (e.g. calls it cannot start yet) without
// idle() turning into a busy loop: idle() returns when something happened
// since the previous idle() returned. Waiters spin briefly first (cheap
// hand-offs between ranks), then block, because 4+ ranks often share 2 cores.
//
// Host threads that wait for a call run firmware passes themselves
// ("drivers", see EmuDevice::drive_until). While one drives, the firmware
// thread need not wake for each ring (that wake-up is the hand-off the driver
// saves), so ring() skips it and the firmware's wait ignores the epoch. A
// driver that stops hands over with leave_driving(): it rings if anything
// may have happened that its passes did not take care of. When its last pass
// found nothing to do, the rings before that pass are taken care of: the
// firmware thread does not wake for them either (handled_), so a host thread
// that polls for its calls keeps the firmware thread asleep instead of
// having it run (and spin) after every call for nothing.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

#include <accl/spin.hpp>

namespace accl::emu {

// Spins until done() or the budget / deadline runs out; reports the outcome
// to `budget`. True when done() became true while spinning. `worked`, when
// given and true at the end, says the spin did useful work (it delivered
// messages): a hit then counts as one however late it came.
template <typename Done>
bool spin_until(SpinBudget& budget, std::chrono::steady_clock::time_point deadline, Done&& done,
                const bool* worked = nullptr) {
  auto now = std::chrono::steady_clock::now();
  auto spin = budget.next();
  if (spin.count() == 0) return done();
  const auto start = now;
  auto end = std::min(deadline, now + spin);
  unsigned iterations = 0;
  while (now < end) {
    if (done()) {
      // Count it as a hit only if it came in the first half of the budget.
      if ((now - start) * 2 <= spin || (worked != nullptr && *worked)) budget.spin_succeeded(spin);
      else budget.spin_failed();
      return true;
    }
    cpu_relax();
    if ((++iterations & 15) == 0) now = std::chrono::steady_clock::now();
  }
  if (done()) return true;
  if (end < deadline) budget.spin_failed();  // ran out of spin, not of time
  return false;
}

class Wakeup {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Wakeup(std::chrono::nanoseconds spin) : spin_(spin) {}

  // Something happened: wake the waiter. Cheap when nobody is blocked.
  void ring();
  // Waits until ring() was called after `seen` was read (returns the epoch
  // now), or `deadline` passes, or stop() was called.
  uint64_t wait(uint64_t seen, Clock::time_point deadline);
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

  // Work the waiter does while it spins (before the driver threads' ring
  // can end the spin): `poll` takes inbound messages off the transports on
  // the waiting thread, so an arrival is delivered and handled without a
  // transport thread waking it; `stop_polling` runs when the spin ran out
  // after polling, before the waiter blocks. Set before the first wait.
  void set_spin_work(std::function<bool()> poll, std::function<void()> stop_polling) {
    spin_poll_ = std::move(poll);
    stop_spin_poll_ = std::move(stop_polling);
  }

  void stop();
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }

  // The firmware thread is blocked (not spinning, not running a pass).
  bool sleeping() const { return sleepers_.load(std::memory_order_relaxed) > 0; }

  // A host thread starts / stops running firmware passes while it waits.
  // `seen`: the epoch read before the driver's last pass; `pending`: that
  // pass progressed or could not run (another thread held the firmware), so
  // another pass is due. Either, or a ring since `seen`, wakes the firmware.
  // `idle_pass`: that pass ran and found nothing to do (rings up to `seen`
  // are taken care of).
  void enter_driving() { drivers_.fetch_add(1, std::memory_order_seq_cst); }
  void leave_driving(uint64_t seen, bool pending, bool idle_pass);

 private:
  bool firmware_should_wake(uint64_t seen) const {
    if (stopped()) return true;
    const uint64_t epoch = epoch_.load(std::memory_order_seq_cst);
    return epoch > std::max(seen, handled_.load(std::memory_order_seq_cst)) &&
           drivers_.load(std::memory_order_seq_cst) == 0;
  }

  SpinBudget spin_;
  std::function<bool()> spin_poll_;
  std::function<void()> stop_spin_poll_;
  std::atomic<uint64_t> epoch_{0};
  std::atomic<bool> stopped_{false};
  std::atomic<int> sleepers_{0};  // lets ring() skip the mutex when nobody sleeps
  std::atomic<int> drivers_{0};   // host threads running firmware passes right now
  std::atomic<uint64_t> handled_{0};  // rings up to this epoch were handled by a driver's pass
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace accl::emu
