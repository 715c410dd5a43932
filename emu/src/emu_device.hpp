// SPDX-License-Identifier: Apache-2.0
//
// One emulated CCLO: exchange memory, memory banks, call controller, data
// plane, transports and the firmware thread, behind the Device interface.
//
// Threads: the driver's threads call the Device methods; the control program
// (which pops calls, moves data and sends) runs on whichever thread holds
// firmware_mutex_: the firmware thread, a driver thread inside start(),
// wait() or test(), or a shm reader thread right after it delivered a
// message (delivery_ended) ("caller-driven progress": a host thread that waits for a
// call runs the firmware passes itself instead of handing the call to the
// firmware thread and being woken by it, two thread switches per call on
// oversubscribed cores). The firmware thread remains for progress nobody
// waits for (async calls, arrivals between calls). Transport threads deliver
// incoming messages into the ReceiveSink; drivers also take complete
// messages off the shared-memory rings themselves (Transport::poll), so an
// arrival is matched and completed on the thread that waits for it. They meet in the call controller
// (mutex + condvar), the sink (mutex), the kernel stream (mutex + condvar)
// and the exchange memory (atomics); the firmware thread sleeps on the Wakeup
// doorbell when it has nothing to do.
#pragma once

#include "call_controller.hpp"
#include "dataplane.hpp"
#include "exchange_memory.hpp"
#include "kernel_stream.hpp"
#include "link_table.hpp"
#include "memory.hpp"
#include "mover.hpp"
#include "receive_sink.hpp"
#include "wakeup.hpp"

#include <accl/device.hpp>
#include <accl_emu/emulator.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

namespace accl::fw {
class ControlProgram;
}

namespace accl::emu {

// Settings beyond EmuOptions (from the environment by default; tests set them).
struct DeviceSettings {
  bool start_firmware = true;               // false: tests drive the DataPlane themselves
  std::chrono::nanoseconds spin{};          // ACCL_EMU_SPIN_US
  std::chrono::nanoseconds drive_spin{};    // ACCL_EMU_DRIVE_SPIN_US
  std::chrono::nanoseconds drive_yield{};   // ACCL_EMU_YIELD_US
  std::chrono::nanoseconds contended_spin{};  // ACCL_CONTENDED_SPIN_US
  std::chrono::nanoseconds io_timeout{};    // stream pulls and sends: ACCL_TIMEOUT_MS
  size_t overflow_bytes = 0;                // ACCL_EMU_OVERFLOW_BYTES
  static DeviceSettings from_environment();
};

// The budget a host thread waiting for a call spends driving the CCLO
// without progress before it blocks: `drive_spin` when each process on the
// host has a core of its own (core_per_process), else `spin` (spinning
// longer would take the core from the peer being waited for).
std::chrono::nanoseconds driving_spin_budget(const DeviceSettings& settings, bool core_per_process);

// The driving budget's lowest value: a quarter of `drive_spin` when each
// process has a core, else 0 (block at once). With a core each, a driving
// spin takes no core from a peer, but the first calls (link set-up, first
// touch of buffers) take milliseconds: halving on each of them collapsed the
// budget to zero within nine calls, and every later wait blocked and handed
// its call to the firmware and reader threads, a wake-up chain per message
// that both ranks' probes could no longer escape (2-rank bcast of 1 MiB:
// 300-500 us instead of 50-90 us in such runs).
std::chrono::nanoseconds driving_spin_floor(const DeviceSettings& settings, bool core_per_process);

// How long a host thread waiting for a call keeps driving its CCLO without
// progress, yielding the core between polls, before it blocks: `drive_yield`
// when the host runs more ACCL processes than it has cores, else 0 (no
// yielding phase: the spin-then-block policy above). Oversubscribed, a
// waiting thread that blocks hands every step of a collective to its reader
// thread with a futex wake-up, and a core whose threads all blocked halts
// until the next wake-up reaches it (a slow cross-core interrupt in a
// virtual machine): 4 ranks on 2 cores idled 8-10 % of the time. Yielding
// pollers keep both cores busy with whichever rank has work, as Open MPI's
// own ranks do (they sched_yield while they wait).
std::chrono::nanoseconds driving_yield_budget(const DeviceSettings& settings, unsigned host_processes,
                                              unsigned cores);

class EmuDevice final : public Device, private DeliveryDriver {
 public:
  EmuDevice(const EmuOptions& options, const DeviceSettings& settings);
  ~EmuDevice() override;
  EmuDevice(const EmuDevice&) = delete;
  EmuDevice& operator=(const EmuDevice&) = delete;

  std::string name() const override { return "emu"; }
  bool simulated() const override { return true; }
  uint32_t read(uint32_t offset) override { return xmem_.read(offset); }
  void write(uint32_t offset, uint32_t value) override { xmem_.write(offset, value); }

  CallId start(const CallWords& call, std::span<const CallId> waitfor) override;
  bool wait(CallId id, std::chrono::nanoseconds timeout) override;
  bool test(CallId id) override;
  CallResult result(CallId id) override { return calls_.result(id); }
  bool test_result(CallId id, CallResult& out) override;
  void release(CallId id) override { calls_.release(id); }

  DeviceAllocation allocate(size_t bytes, MemoryKind kind, unsigned bank) override {
    return memory_.allocate(bytes, kind, bank);
  }
  DeviceAllocation map_host(void* ptr, size_t bytes) override { return memory_.map_host(ptr, bytes); }
  void free(const DeviceAllocation& alloc) override { memory_.free(alloc); }
  void copy_to_device(uint64_t address, const void* src, size_t bytes) override {
    memory_.copy_to_device(address, src, bytes);
  }
  void copy_from_device(uint64_t address, void* dst, size_t bytes) override {
    memory_.copy_from_device(address, dst, bytes);
  }

  Endpoint endpoint() const;
  NetAddress address() const { return self_; }
  TransportKind transport_kind() const { return kind_; }
  bool firmware_running() const { return firmware_.joinable(); }

  // Parts, for tests that play the firmware.
  EmuDataPlane& dataplane() { return dataplane_; }
  ReceiveSink& sink() { return sink_; }
  KernelStream& streams() { return streams_; }
  DeviceMemory& memory() { return memory_; }
  ExchangeMemory& exchange_memory() { return xmem_; }
  LinkTable& links() { return links_; }
  Mover& mover() { return mover_; }

 private:
  // Creates and starts the transports of `options.transport`; sets self_.
  TransportSet start_transports(const EmuOptions& options);
  void firmware_main();
  // Runs up to `max_passes` firmware passes on this thread, stopping after
  // one that made no progress. False (nothing run) if another thread holds
  // the firmware. `progressed`: the last pass progressed; `seen`: the
  // doorbell epoch read before it.
  bool run_passes(unsigned max_passes, bool& progressed, uint64_t& seen);
  // test() and test_result(): true once is_done(); while the call runs, a
  // poll takes inbound messages off the transports and runs the firmware
  // passes before it asks again. A template, so that each keeps the whole
  // poll inline (a poller's every round passes here).
  template <typename IsDone>
  bool poll_call(IsDone&& is_done);
  // True when a firmware pass now would find nothing to do: the last pass
  // found nothing and nothing rang since it began (epoch `seen` unchanged;
  // the firmware thread's own idle() rests on the same rule). Timers are the
  // one thing that changes without a ring, so every kPassesPerSkippedRun-th
  // time it says no and a pass runs (its deadline checks then come every
  // kPassesPerSkippedRun x the firmware's idle-pass interval).
  bool idle_pass_would_repeat(uint64_t seen);
  static constexpr unsigned kPassesPerSkippedRun = 8;
  // How late a firmware timer may fire when it came due just after a host
  // thread stopped running the passes (the firmware thread then slept on).
  static constexpr uint64_t kDriverTimerSlackNs = 1'000'000;
  // Drives the firmware until `call` (id `id`) is done, the budget without
  // progress runs out (the adaptive spin budget, or drive_yield_ when
  // oversubscribed) or `deadline` passes; hands over to the firmware thread
  // when it stops.
  bool drive_until(CallId id, const CallController::Watch& call, Wakeup::Clock::time_point deadline);
  // DeliveryDriver: a transport's reader thread that delivered a message
  // runs the firmware passes it enables (at most kPassesPerDelivery) as a
  // driver, instead of ringing the firmware thread awake: one thread switch
  // less per arrival when nobody polls (4 ranks on 2 cores: the host thread
  // sleeps and every step of a collective used to go reader -> firmware).
  void delivery_begins() override;
  void delivery_ended() override;
  static constexpr unsigned kPassesPerDelivery = 16;
  // Delivers complete inbound messages on this thread (Transport::poll).
  bool poll_transports();
  // A driving loop begins / ends on this thread: Transport::driver_enters /
  // driver_leaves.
  void driver_enters();
  void driver_leaves();
  // This thread stops polling (it is about to block): Transport::end_polling.
  void end_polling();
  // Transport::peer_writing on any transport.
  bool peer_writing() const;

  // Declaration order = construction order; destruction runs backwards and
  // ~EmuDevice() stops the threads that use these parts first.
  TransportKind kind_;
  NetAddress self_;
  Wakeup doorbell_;
  ExchangeMemory xmem_;
  DeviceMemory memory_;
  KernelStream streams_;
  CallController calls_;
  ReceiveSink sink_;
  TransportSet transports_;
  // The transports that run and have something to poll (Transport::polls),
  // in TransportSet::for_each's order: what poll_transports() walks on
  // every poll (set once, in the constructor).
  std::array<Transport*, 4> polled_{};
  size_t polled_count_ = 0;
  LinkTable links_;
  Mover mover_;
  EmuDataPlane dataplane_;
  void* firmware_state_ = nullptr;
  fw::ControlProgram* program_ = nullptr;  // owned; null without firmware (tests that play it)
  std::mutex firmware_mutex_;                    // the control program runs on one thread at a time
  // Doorbell epoch read before the latest pass when that pass found nothing
  // to do; kNoIdlePass after a pass that progressed. Written by whoever runs
  // the pass (under firmware_mutex_), read by pollers without it.
  static constexpr uint64_t kNoIdlePass = ~uint64_t{0};
  std::atomic<uint64_t> idle_pass_epoch_{kNoIdlePass};
  // Polls that skipped their pass (idle_pass_would_repeat); racy increments
  // between pollers only shift when the next forced pass comes.
  std::atomic<unsigned> passes_skipped_{0};
  const bool core_per_process_;
  SpinBudget drive_spin_;
  const std::chrono::nanoseconds drive_yield_;  // 0: no yielding phase (driving_yield_budget)
  // How long a wait drives on once it finds its core contended
  // (DeviceSettings::contended_spin with a core per process, else 0).
  const std::chrono::nanoseconds contended_spin_;
  std::thread firmware_;
};

}  // namespace accl::emu
