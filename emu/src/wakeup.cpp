// SPDX-License-Identifier: Apache-2.0
#include "wakeup.hpp"

namespace accl::emu {

void Wakeup::ring() {
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  // A sleeper registers (sleepers_++) under the mutex before it re-checks the
  // epoch. The seq_cst load here pairs with that: either we see the sleeper
  // and notify under the mutex, or the sleeper sees our epoch increment.
  // With a driver active the sleeper would not wake for it anyway: the
  // driver sees the new epoch and, if it stops, hands over in
  // leave_driving() (drivers_-- then epoch load, the mirror of ours).
  if (sleepers_.load(std::memory_order_seq_cst) > 0 && drivers_.load(std::memory_order_seq_cst) == 0) {
    // Taking the mutex orders us after a sleeper's predicate check (it
    // holds the mutex from its check until it waits), so the notify cannot
    // be lost; notifying after releasing it spares the woken thread from
    // blocking on the mutex we still hold (a second context switch).
    { std::lock_guard<std::mutex> lock(mutex_); }
    cv_.notify_all();
  }
}

void Wakeup::stop() {
  stopped_.store(true, std::memory_order_release);
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  std::lock_guard<std::mutex> lock(mutex_);
  cv_.notify_all();
}

void Wakeup::leave_driving(uint64_t seen, bool pending, bool idle_pass) {
  if (idle_pass) {
    // A pass that started at `seen` found nothing: earlier rings are done.
    // (Only ever raised; a ring after `seen` still wakes the firmware.)
    uint64_t handled = handled_.load(std::memory_order_seq_cst);
    while (handled < seen && !handled_.compare_exchange_weak(handled, seen, std::memory_order_seq_cst)) {
    }
  }
  drivers_.fetch_sub(1, std::memory_order_seq_cst);
  if (pending || epoch_.load(std::memory_order_seq_cst) != seen) ring();
}

uint64_t Wakeup::wait(uint64_t seen, Clock::time_point deadline) {
  // seq_cst: Dekker-style pairing with ring() (epoch store, then sleepers and
  // drivers load) and leave_driving() (drivers store, then epoch load).
  auto changed = [&] { return firmware_should_wake(seen); };
  // Spin phase: a reply from a peer often arrives within microseconds; we
  // take it off the transport ourselves (its delivery rings the doorbell).
  // Not while a driver runs the passes: it polls itself, and our polls
  // ending with stop_polling would cut its poll lease short. A poll that
  // delivers counts as a spin that paid, however long the copy took (a
  // large message streams in for tens of microseconds): the budget must
  // not shrink because of the work done in it.
  bool delivered = false;
  auto changed_or_delivered = [&] {
    if (changed()) return true;
    if (spin_poll_ && drivers_.load(std::memory_order_relaxed) == 0) {
      delivered = spin_poll_() || delivered;
    }
    return delivered || changed();
  };
  const bool woke = spin_until(spin_, deadline, changed_or_delivered, &delivered);
  // About to sleep: the reader threads take over delivery (a driver, if
  // one runs, keeps polling and ends its own lease when it stops).
  if (!woke && stop_spin_poll_ && drivers_.load(std::memory_order_relaxed) == 0) stop_spin_poll_();
  if (woke || Clock::now() >= deadline) return epoch();
  std::unique_lock<std::mutex> lock(mutex_);
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  cv_.wait_until(lock, deadline, changed);
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  return epoch();
}

}  // namespace accl::emu
