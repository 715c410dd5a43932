// SPDX-License-Identifier: Apache-2.0
//
// The DataPlane the firmware runs on (firmware/include/accl_fw/dataplane.hpp),
// implemented over the emulator's parts. Every method is called by the thread
// that runs the control program, one thread at a time (EmuDevice's firmware
// mutex; tests call them from one thread), and never throws: the firmware is
// built without exceptions.
#pragma once

#include "call_controller.hpp"
#include "exchange_memory.hpp"
#include "kernel_stream.hpp"
#include "link_table.hpp"
#include "mover.hpp"
#include "receive_sink.hpp"
#include "wakeup.hpp"

#include <accl_fw/dataplane.hpp>

#include <atomic>
#include <chrono>

namespace accl::emu {

class EmuDataPlane final : public fw::DataPlane {
 public:
  EmuDataPlane(ExchangeMemory& xmem, CallController& calls, ReceiveSink& sink, KernelStream& streams,
               LinkTable& links, Mover& mover, Wakeup& doorbell);
  ~EmuDataPlane() = default;

  uint32_t xmem_read(uint32_t offset) override;
  void xmem_write(uint32_t offset, uint32_t value) override;

  bool pop_call(fw::Call& out) override;
  void finish_call(uint64_t id, uint32_t retcode, uint64_t duration_ns) override;

  uint32_t move(const fw::Move& m) override;

  bool pop_arrival(fw::Arrival& out) override;
  bool pop_arrival_for(uint32_t context_id, uint32_t src, fw::Arrival& out) override;
  void release_payload(const fw::Arrival& a) override;
  uint32_t open_window(const fw::Window& w) override;
  void close_window(const fw::Window& w) override;

  void reset_datapath() override;
  uint32_t hw_id() override;
  uint32_t capabilities() override;

  uint64_t now_ns() override;
  void idle(uint64_t deadline_ns) override;
  bool stop_requested() override;

  bool log_enabled(int level) override;
  void log(int level, const char* message) override;

  // The CCLO's rank for log lines of the firmware thread (-1 until the
  // driver configured a communicator). Passes also run on driver threads,
  // whose own log rank stays theirs.
  int log_rank() const { return log_rank_.load(std::memory_order_relaxed); }

  static constexpr uint32_t kHwId = 1 /* TCP stack */ | abi::kHwIdDma | abi::kHwIdArith | abi::kHwIdCompression |
                                    abi::kHwIdKernelStreams;
  static constexpr uint32_t kCapabilities = abi::kCapReduceMin | abi::kCapReduceProd | abi::kCapRendezvous |
                                            abi::kCapAlltoall | abi::kCapBarrier | abi::kCapTagAnyRecv |
                                            abi::kCapChaining | abi::kCapLinkStatus | abi::kCapInt8 |
                                            abi::kCapInt16 | abi::kCapUnsigned | abi::kCapReduceBitwise |
                                            abi::kCapReduceLogical | abi::kCapReduceLoc | abi::kCapValid;

 private:
  void update_thread_rank();

  ExchangeMemory& xmem_;
  CallController& calls_;
  ReceiveSink& sink_;
  KernelStream& streams_;
  LinkTable& links_;
  Mover& mover_;
  Wakeup& doorbell_;
  uint64_t seen_epoch_ = 0;  // doorbell epoch when idle() last returned
  bool rank_known_ = false;
  std::atomic<int> log_rank_{-1};
};

}  // namespace accl::emu
