// SPDX-License-Identifier: Apache-2.0
//
// The call controller of an emulated CCLO (public ACCL: hostctrl + arbiter).
// The driver queues calls with start(); a call becomes ready for the firmware
// only once every call it waits for has completed (device-side chaining, so
// the host never has to wake up between dependent calls). The firmware takes
// ready calls in FIFO order with pop() and reports them with finish().
#pragma once

#include "exchange_memory.hpp"
#include "wakeup.hpp"

#include <accl/device.hpp>
#include <accl_fw/dataplane.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
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
  CallId start(const CallWords& call, std::span<const CallId> waitfor);
  bool wait(CallId id, std::chrono::nanoseconds timeout);
  bool test(CallId id);
  // Throws std::invalid_argument for unknown ids, std::logic_error while the
  // call is still running.
  CallResult result(CallId id);
  void release(CallId id);

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
    CallId id = 0;
    CallWords words;
    std::atomic<bool> done{false};
    CallResult result;
    unsigned pending = 0;           // unfinished calls this one waits for
    std::vector<CallId> dependents; // calls waiting for this one
    bool released = false;          // released before completion: drop at finish
    bool started = false;           // handed to the firmware
  };
  using EntryPtr = std::shared_ptr<Entry>;

  EntryPtr find(CallId id);            // caller holds mutex_
  void complete(Entry& e, uint32_t retcode, uint64_t duration_ns);  // caller holds mutex_
  void make_ready(const EntryPtr& e);  // caller holds mutex_

  ExchangeMemory& xmem_;
  Wakeup& doorbell_;
  SpinBudget spin_;

  std::mutex mutex_;
  std::condition_variable done_cv_;
  CallId next_id_ = 1;
  std::unordered_map<CallId, EntryPtr> calls_;
  std::deque<EntryPtr> ready_;
  std::atomic<size_t> ready_count_{0};
};

}  // namespace accl::emu
