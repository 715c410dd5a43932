// SPDX-License-Identifier: Apache-2.0
//
// The call controller of an emulated CCLO (public ACCL: hostctrl + arbiter).
// The driver queues calls with start(); a call becomes ready for the firmware
// only once every call it waits for has completed (device-side chaining, so
// the host never has to wake up between dependent calls). The firmware takes
// ready calls in FIFO order with pop() and reports them with finish().
//
// No allocation per call once warmed up: entries come from a pool and are
// found by id in a ring indexed by id (ids are consecutive), the ready queue
// is an intrusive list.
#pragma once

#include "exchange_memory.hpp"
#include "wakeup.hpp"

#include <accl/device.hpp>
#include <accl_fw/dataplane.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

namespace accl::emu {

class CallController {
 public:
  CallController(ExchangeMemory& xmem, Wakeup& firmware_doorbell, std::chrono::nanoseconds spin);
  ~CallController();

  // --- driver side (Device interface semantics) ---
  // ring_doorbell = false: the caller runs the firmware itself right after
  // (or rings the doorbell if it cannot), saving the firmware thread a wake-up.
  CallId start(const CallWords& call, std::span<const CallId> waitfor, bool ring_doorbell = true);
  // spin = false: block at once (the caller already spun or drove the firmware).
  bool wait(CallId id, std::chrono::nanoseconds timeout, bool spin = true);
  // Lock-free for the last kRecentCalls calls started (hosts that poll call
  // it twice per poll), else under the mutex. Inline, below: the lock-free
  // answer is a few loads.
  bool test(CallId id);
  // Throws std::invalid_argument for unknown ids, std::logic_error while the
  // call is still running. Lock-free for a completed call among the last
  // kRecentCalls started (every call's driver collects its result once).
  CallResult result(CallId id);
  // test() and, if complete, result() in one look at the entry (lock-free
  // for the last kRecentCalls calls started); throws as those two do.
  // Inline, below: pollers call it on every round.
  bool test_result(CallId id, CallResult& out);
  void release(CallId id);

  // Lock-free completion check of one call for threads that poll (a host
  // thread driving the firmware). Valid while the controller lives.
  class Watch {
   public:
    bool done() const {
      // An entry taken over by a later call means ours was released, which
      // happens only after it completed.
      return slot_id_->load(std::memory_order_acquire) != id_ || done_->load(std::memory_order_acquire);
    }

   private:
    friend class CallController;
    Watch(const std::atomic<CallId>* slot_id, const std::atomic<bool>* done, CallId id)
        : slot_id_(slot_id), done_(done), id_(id) {}
    const std::atomic<CallId>* slot_id_;
    const std::atomic<bool>* done_;
    CallId id_;
  };
  // Throws std::invalid_argument for ids never started.
  Watch watch(CallId id);

  // --- firmware side ---
  bool pop(fw::Call& out);
  // Records the result, mirrors RETCODE/PERFCNT into exchange memory and
  // releases dependent calls. Unknown ids are logged and ignored.
  void finish(uint64_t id, uint32_t retcode, uint64_t duration_ns);

  // Ends every call not yet finished with `retcode` (device shutdown), so no
  // host thread waits for a firmware that is gone.
  void abort_all(uint32_t retcode);

  size_t ready_count() const { return ready_count_.load(std::memory_order_acquire); }

 private:
  struct Entry {
    std::atomic<CallId> id{0};      // written under mutex_; read lock-free by Watch
    CallWords words;
    std::atomic<bool> done{false};
    CallResult result;
    unsigned pending = 0;           // unfinished calls this one waits for
    std::vector<CallId> dependents; // calls waiting for this one (capacity kept across reuse)
    bool released = false;          // released before completion: drop at finish
    bool started = false;           // handed to the firmware
    Entry* next_ready = nullptr;    // ready queue link
  };

  bool test_locked(CallId id);           // test() beyond the recent calls
  bool test_result_locked(CallId id, CallResult& out);  // test_result() beyond them
  // The entry of a recent call `id` when it still holds that call, else
  // nullptr (the caller asks under the mutex).
  const Entry* recent(CallId id) const;
  // Copies the result of a completed recent entry `e` into `out`, unless
  // call `id` left the entry meanwhile (false: ask under the mutex). Safe
  // without the mutex: the result was written before `done` was set
  // (release), and the entry is not reused before the caller releases `id`.
  static bool copy_recent_result(const Entry& e, CallId id, CallResult& out);
  Entry* find(CallId id);                // caller holds mutex_
  Entry* acquire_entry(CallId id);       // caller holds mutex_; registers `id`
  void retire(Entry& e);                 // caller holds mutex_; back to the pool
  void complete(Entry& e, uint32_t retcode, uint64_t duration_ns);  // caller holds mutex_
  void make_ready(Entry& e);             // caller holds mutex_

  ExchangeMemory& xmem_;
  Wakeup& doorbell_;
  SpinBudget spin_;

  std::mutex mutex_;
  std::condition_variable done_cv_;
  unsigned blocked_waiters_ = 0;  // threads in wait() on done_cv_ (guarded by mutex_): finish() notifies only then
  CallId next_id_ = 1;
  // Live entries by id: slots_[id & (size - 1)] for oldest_live_ <= id <
  // next_id_ (nullptr once retired). The size is a power of two that grows
  // when the live id span reaches it.
  std::vector<Entry*> slots_;
  CallId oldest_live_ = 1;
  // Live entries older than the ring covers (a caller kept a few calls
  // unreleased across many others): the ring stops growing at kMaxSlots and
  // its oldest live entries move here instead.
  static constexpr size_t kMaxSlots = size_t{1} << 16;
  std::unordered_map<CallId, Entry*> far_;
  std::vector<std::unique_ptr<Entry>> storage_;  // owns every entry ever made
  std::vector<Entry*> free_;
  // Entries of recently started calls by id % kRecentCalls (written under
  // mutex_, read by test() without it). Entries live as long as the
  // controller; one whose id no longer matches answers nothing.
  static constexpr size_t kRecentCalls = 64;
  std::array<std::atomic<Entry*>, kRecentCalls> recent_{};
  Entry* ready_head_ = nullptr;
  Entry* ready_tail_ = nullptr;
  std::atomic<size_t> ready_count_{0};
};

inline const CallController::Entry* CallController::recent(CallId id) const {
  if (id == 0) return nullptr;
  const Entry* e = recent_[id % kRecentCalls].load(std::memory_order_acquire);
  return e != nullptr && e->id.load(std::memory_order_acquire) == id ? e : nullptr;
}

inline bool CallController::test(CallId id) {
  // The entry still holds call `id` (ids are set only for started calls):
  // its done flag is the answer. If it was released and reused meanwhile,
  // the flag may read false for a completed call: the caller asks again.
  if (const Entry* e = recent(id)) return e->done.load(std::memory_order_acquire);
  return test_locked(id);
}

inline bool CallController::copy_recent_result(const Entry& e, CallId id, CallResult& out) {
  const CallResult result = e.result;
  if (e.id.load(std::memory_order_acquire) != id) return false;
  out = result;
  return true;
}

inline bool CallController::test_result(CallId id, CallResult& out) {
  // Lock-free as test() and result(): a running call answers false at once,
  // a completed one its result.
  if (const Entry* e = recent(id)) {
    if (!e->done.load(std::memory_order_acquire)) return false;
    if (copy_recent_result(*e, id, out)) return true;
  }
  return test_result_locked(id, out);
}

}  // namespace accl::emu
