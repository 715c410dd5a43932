// SPDX-License-Identifier: Apache-2.0
#include "call_controller.hpp"

#include <accl/log.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace accl::emu {

CallController::CallController(ExchangeMemory& xmem, Wakeup& firmware_doorbell, std::chrono::nanoseconds spin)
    : xmem_(xmem), doorbell_(firmware_doorbell), spin_(spin) {}

CallController::~CallController() = default;

CallController::EntryPtr CallController::find(CallId id) {
  auto it = calls_.find(id);
  return it == calls_.end() ? nullptr : it->second;
}

void CallController::make_ready(const EntryPtr& e) {
  ready_.push_back(e);
  ready_count_.fetch_add(1, std::memory_order_acq_rel);
}

CallId CallController::start(const CallWords& call, std::span<const CallId> waitfor) {
  auto e = std::make_shared<Entry>();
  e->words = call;
  bool ready_now = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    e->id = next_id_++;
    for (CallId dep : waitfor) {
      if (dep == 0 || dep >= e->id) {
        // Not a call of this device: waiting for it would deadlock.
        ACCL_LOG_WARN("emulated CCLO: call {} waits for unknown call id {}; ignoring that dependency", e->id, dep);
        continue;
      }
      EntryPtr d = find(dep);
      // Released ids belong to completed calls (release() requires that),
      // so a missing entry is a satisfied dependency.
      if (d == nullptr || d->done.load(std::memory_order_relaxed)) continue;
      d->dependents.push_back(e->id);
      ++e->pending;
    }
    calls_.emplace(e->id, e);
    ready_now = e->pending == 0;
    if (ready_now) make_ready(e);
  }
  // Decided under the lock: once it is released the firmware may already
  // complete a dependency and touch e->pending.
  if (ready_now) doorbell_.ring();
  return e->id;
}

bool CallController::pop(fw::Call& out) {
  if (ready_count_.load(std::memory_order_acquire) == 0) return false;  // cheap poll for the firmware loop
  std::lock_guard<std::mutex> lock(mutex_);
  if (ready_.empty()) return false;
  EntryPtr e = std::move(ready_.front());
  ready_.pop_front();
  ready_count_.fetch_sub(1, std::memory_order_acq_rel);
  e->started = true;
  for (uint32_t i = 0; i < abi::kCallWords; ++i) out.words[i] = e->words.words[i];
  out.id = e->id;
  return true;
}

void CallController::complete(Entry& e, uint32_t retcode, uint64_t duration_ns) {
  e.result.retcode = retcode;
  e.result.duration_ns = duration_ns;
  e.done.store(true, std::memory_order_release);
  // A failed dependency still releases its dependents: the driver reports
  // the failure, the device does not cancel (Device::start contract).
  bool woke = false;
  for (CallId dep_id : e.dependents) {
    EntryPtr d = find(dep_id);
    if (d != nullptr && d->pending > 0 && --d->pending == 0) {
      make_ready(d);
      woke = true;
    }
  }
  e.dependents.clear();
  if (woke) doorbell_.ring();
  if (e.released) calls_.erase(e.id);
}

void CallController::finish(uint64_t id, uint32_t retcode, uint64_t duration_ns) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    EntryPtr e = find(id);
    if (e == nullptr || e->done.load(std::memory_order_relaxed)) {
      ACCL_LOG_ERROR("emulated CCLO: firmware finished unknown or already finished call {}", id);
      return;
    }
    // Public ABI: RETCODE and PERFCNT describe the last finished call;
    // PERFCNT counts 250 MHz cycles (4 ns).
    xmem_.store(abi::kRetcodeOffset, retcode);
    xmem_.store(abi::kPerfCounterOffset, static_cast<uint32_t>(duration_ns / 4));
    complete(*e, retcode, duration_ns);
  }
  done_cv_.notify_all();
}

void CallController::abort_all(uint32_t retcode) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_.clear();
    ready_count_.store(0, std::memory_order_release);
    std::vector<EntryPtr> open;
    for (auto& [id, e] : calls_)
      if (!e->done.load(std::memory_order_relaxed)) open.push_back(e);
    for (auto& e : open) {
      e->dependents.clear();  // every open call is aborted anyway
      complete(*e, retcode, 0);
    }
  }
  done_cv_.notify_all();
}

bool CallController::wait(CallId id, std::chrono::nanoseconds timeout) {
  EntryPtr e;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (id == 0 || id >= next_id_) throw std::invalid_argument("emulated CCLO: wait for unknown call id " + std::to_string(id));
    e = find(id);
  }
  if (e == nullptr) return true;  // released, hence complete
  if (e->done.load(std::memory_order_acquire)) return true;
  auto now = Wakeup::Clock::now();
  // Clamp absurd timeouts (nanoseconds::max()) so the deadline cannot overflow.
  auto deadline = now + std::clamp(timeout, std::chrono::nanoseconds(0),
                                   std::chrono::nanoseconds(std::chrono::hours(24 * 365)));
  // Spin briefly (adaptively, see SpinBudget): short calls finish within
  // microseconds and a futex sleep + wake costs more than that. Then block.
  if (spin_until(spin_, deadline, [&] { return e->done.load(std::memory_order_acquire); })) return true;
  std::unique_lock<std::mutex> lock(mutex_);
  return done_cv_.wait_until(lock, deadline, [&] { return e->done.load(std::memory_order_acquire); });
}

bool CallController::test(CallId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (id == 0 || id >= next_id_) throw std::invalid_argument("emulated CCLO: test of unknown call id " + std::to_string(id));
  EntryPtr e = find(id);
  return e == nullptr || e->done.load(std::memory_order_acquire);
}

CallResult CallController::result(CallId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  EntryPtr e = find(id);
  if (e == nullptr) throw std::invalid_argument("emulated CCLO: result of unknown or released call id " + std::to_string(id));
  if (!e->done.load(std::memory_order_acquire))
    throw std::logic_error("emulated CCLO: result of call " + std::to_string(id) + " which has not completed");
  return e->result;
}

void CallController::release(CallId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  EntryPtr e = find(id);
  if (e == nullptr) return;
  if (e->done.load(std::memory_order_relaxed)) calls_.erase(id);
  else e->released = true;  // still queued or running: forget it once finished
}

}  // namespace accl::emu
