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

CallController::Entry* CallController::find(CallId id) {
  if (id >= next_id_) return nullptr;
  if (id < oldest_live_) {
    auto it = far_.find(id);
    return it == far_.end() ? nullptr : it->second;
  }
  return slots_[id & (slots_.size() - 1)];
}

CallController::Entry* CallController::acquire_entry(CallId id) {
  // Room for ids oldest_live_ .. id in the ring.
  if (slots_.empty() || id - oldest_live_ >= slots_.size()) {
    if (slots_.size() >= kMaxSlots) {
      // Pinned old entries: move the oldest half of the ring to far_.
      const CallId keep_from = id - slots_.size() / 2;
      for (; oldest_live_ < keep_from; ++oldest_live_) {
        Entry*& slot = slots_[oldest_live_ & (slots_.size() - 1)];
        if (slot != nullptr) far_.emplace(oldest_live_, slot);
        slot = nullptr;
      }
    } else {
      std::vector<Entry*> grown(std::max<size_t>(64, 2 * slots_.size()), nullptr);
      for (CallId i = oldest_live_; i < id; ++i) grown[i & (grown.size() - 1)] = slots_[i & (slots_.size() - 1)];
      slots_.swap(grown);
    }
  }
  Entry* e = nullptr;
  if (!free_.empty()) {
    e = free_.back();
    free_.pop_back();
  } else {
    storage_.push_back(std::make_unique<Entry>());
    e = storage_.back().get();
    free_.reserve(storage_.capacity());  // retire() then never allocates
  }
  e->done.store(false, std::memory_order_relaxed);
  e->result = CallResult{};
  e->pending = 0;
  e->dependents.clear();
  e->released = false;
  e->started = false;
  e->next_ready = nullptr;
  e->id.store(id, std::memory_order_release);
  slots_[id & (slots_.size() - 1)] = e;
  recent_[id % kRecentCalls].store(e, std::memory_order_release);
  return e;
}

void CallController::retire(Entry& e) {
  const CallId id = e.id.load(std::memory_order_relaxed);
  if (id < oldest_live_) {
    far_.erase(id);
  } else {
    slots_[id & (slots_.size() - 1)] = nullptr;
    while (oldest_live_ < next_id_ && slots_[oldest_live_ & (slots_.size() - 1)] == nullptr) ++oldest_live_;
  }
  // The lock-free paths (test(), result(), Watch) match entries by id: a
  // released id must no longer match (0 is never a call's id).
  e.id.store(0, std::memory_order_release);
  free_.push_back(&e);
}

void CallController::make_ready(Entry& e) {
  e.next_ready = nullptr;
  if (ready_tail_ != nullptr) ready_tail_->next_ready = &e;
  else ready_head_ = &e;
  ready_tail_ = &e;
  ready_count_.fetch_add(1, std::memory_order_acq_rel);
}

CallId CallController::start(const CallWords& call, std::span<const CallId> waitfor, bool ring_doorbell) {
  bool ready_now = false;
  CallId id = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = next_id_++;
    Entry* e = acquire_entry(id);
    e->words = call;
    for (CallId dep : waitfor) {
      if (dep == 0 || dep >= id) {
        // Not a call of this device: waiting for it would deadlock.
        ACCL_LOG_WARN("emulated CCLO: call {} waits for unknown call id {}; ignoring that dependency", id, dep);
        continue;
      }
      Entry* d = find(dep);
      // Released ids belong to completed calls (release() requires that),
      // so a missing entry is a satisfied dependency.
      if (d == nullptr || d->done.load(std::memory_order_relaxed)) continue;
      d->dependents.push_back(id);
      ++e->pending;
    }
    ready_now = e->pending == 0;
    if (ready_now) make_ready(*e);
  }
  // Decided under the lock: once it is released the firmware may already
  // complete a dependency and touch e->pending.
  if (ready_now && ring_doorbell) doorbell_.ring();
  return id;
}

CallController::Watch CallController::watch(CallId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (id == 0 || id >= next_id_) throw std::invalid_argument("emulated CCLO: wait for unknown call id " + std::to_string(id));
  Entry* e = find(id);
  if (e == nullptr) {
    // Released, hence complete: a watch that reports done at once.
    static const std::atomic<CallId> kNoSlot{0};
    static const std::atomic<bool> kDone{true};
    return Watch(&kNoSlot, &kDone, id);
  }
  return Watch(&e->id, &e->done, id);
}

bool CallController::pop(fw::Call& out) {
  if (ready_count_.load(std::memory_order_acquire) == 0) return false;  // cheap poll for the firmware loop
  std::lock_guard<std::mutex> lock(mutex_);
  Entry* e = ready_head_;
  if (e == nullptr) return false;
  ready_head_ = e->next_ready;
  if (ready_head_ == nullptr) ready_tail_ = nullptr;
  e->next_ready = nullptr;
  ready_count_.fetch_sub(1, std::memory_order_acq_rel);
  e->started = true;
  for (uint32_t i = 0; i < abi::kCallWords; ++i) out.words[i] = e->words.words[i];
  out.id = e->id.load(std::memory_order_relaxed);
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
    Entry* d = find(dep_id);
    if (d != nullptr && d->pending > 0 && --d->pending == 0) {
      make_ready(*d);
      woke = true;
    }
  }
  e.dependents.clear();
  if (woke) doorbell_.ring();
  if (e.released) retire(e);
}

void CallController::finish(uint64_t id, uint32_t retcode, uint64_t duration_ns) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry* e = find(id);
    if (e == nullptr || e->done.load(std::memory_order_relaxed)) {
      ACCL_LOG_ERROR("emulated CCLO: firmware finished unknown or already finished call {}", id);
      return;
    }
    // Public ABI: RETCODE and PERFCNT describe the last finished call;
    // PERFCNT counts 250 MHz cycles (4 ns).
    xmem_.store(abi::kRetcodeOffset, retcode);
    xmem_.store(abi::kPerfCounterOffset, static_cast<uint32_t>(duration_ns / 4));
    complete(*e, retcode, duration_ns);
    // A waiter registers and tests its call under the mutex: one that comes
    // later sees the call done.
    wake = blocked_waiters_ != 0;
  }
  if (wake) done_cv_.notify_all();
}

void CallController::abort_all(uint32_t retcode) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_head_ = ready_tail_ = nullptr;
    ready_count_.store(0, std::memory_order_release);
    std::vector<Entry*> open;
    for (CallId id = oldest_live_; id < next_id_; ++id)
      if (Entry* e = slots_[id & (slots_.size() - 1)]; e != nullptr && !e->done.load(std::memory_order_relaxed))
        open.push_back(e);
    for (auto& [id, e] : far_)
      if (!e->done.load(std::memory_order_relaxed)) open.push_back(e);
    for (Entry* e : open) {
      e->dependents.clear();  // every open call is aborted anyway
      complete(*e, retcode, 0);
    }
  }
  done_cv_.notify_all();
}

bool CallController::wait(CallId id, std::chrono::nanoseconds timeout, bool spin) {
  const Watch w = watch(id);
  if (w.done()) return true;
  auto now = Wakeup::Clock::now();
  // Clamp absurd timeouts (nanoseconds::max()) so the deadline cannot overflow.
  auto deadline = now + std::clamp(timeout, std::chrono::nanoseconds(0),
                                   std::chrono::nanoseconds(std::chrono::hours(24 * 365)));
  // Spin briefly (adaptively, see SpinBudget): short calls finish within
  // microseconds and a futex sleep + wake costs more than that. Then block.
  if (spin && spin_until(spin_, deadline, [&] { return w.done(); })) return true;
  std::unique_lock<std::mutex> lock(mutex_);
  ++blocked_waiters_;
  const bool done = done_cv_.wait_until(lock, deadline, [&] { return w.done(); });
  --blocked_waiters_;
  return done;
}

bool CallController::test_locked(CallId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (id == 0 || id >= next_id_) throw std::invalid_argument("emulated CCLO: test of unknown call id " + std::to_string(id));
  Entry* e = find(id);
  return e == nullptr || e->done.load(std::memory_order_acquire);
}

CallResult CallController::result(CallId id) {
  // The common case, the caller collecting a call it just saw complete,
  // without the mutex (as test()); a caller who released `id` concurrently
  // gets the checked path below.
  if (const Entry* e = recent(id); e != nullptr && e->done.load(std::memory_order_acquire)) {
    CallResult result;
    if (copy_recent_result(*e, id, result)) return result;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  Entry* e = find(id);
  if (e == nullptr) throw std::invalid_argument("emulated CCLO: result of unknown or released call id " + std::to_string(id));
  if (!e->done.load(std::memory_order_acquire))
    throw std::logic_error("emulated CCLO: result of call " + std::to_string(id) + " which has not completed");
  return e->result;
}

bool CallController::test_result_locked(CallId id, CallResult& out) {
  if (!test_locked(id)) return false;
  out = this->result(id);
  return true;
}

void CallController::release(CallId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  Entry* e = find(id);
  if (e == nullptr) return;
  if (e->done.load(std::memory_order_relaxed)) retire(*e);
  else e->released = true;  // still queued or running: forget it once finished
}

}  // namespace accl::emu
