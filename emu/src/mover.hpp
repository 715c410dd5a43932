// SPDX-License-Identifier: Apache-2.0
//
// The data mover of an emulated CCLO (public ACCL: dma_mover + compression
// lanes + reduce unit + packetizer): executes one fw::Move.
//
//   res = [compress/decompress] ( [convert] op0  func  [convert] op1 )
//
// Operands come from memory (device bank or registered host memory) or, for
// op0, from the kernel stream; the result goes to memory, the kernel stream,
// or to a peer as one message. Element types come from the arithmetic
// configuration record at `arcfg` and the operands' `compressed` flags.
//
// Speed: plain copies are one memcpy (or one copy straight into transport
// memory for network results). Fused decompress + reduce + compress runs in
// 64 KiB blocks so intermediate data stays in cache.
#pragma once

#include "arith.hpp"
#include "exchange_memory.hpp"
#include "kernel_stream.hpp"
#include "link_table.hpp"
#include "memory.hpp"

#include <accl_fw/dataplane.hpp>

#include <chrono>
#include <cstdint>
#include <vector>

namespace accl::emu {

class Mover {
 public:
  Mover(ExchangeMemory& xmem, DeviceMemory& memory, KernelStream& streams, LinkTable& links,
        std::chrono::nanoseconds io_timeout);

  // Executes `m` to completion; returns error bits (0 = ok). Never throws.
  // Single-threaded: one Mover per CCLO, used by its firmware thread.
  uint32_t move(const fw::Move& m);

  // The reduce function of a window that reduces on landing
  // (fw::Window::reduce): function `func` of the arithmetic configuration at
  // `arcfg`, applied to uncompressed operands without any conversion. Error
  // bits (kArithError) when the configuration is bad or would convert.
  uint32_t landing_function(uint32_t arcfg, uint32_t func, ArithFunction& out);

  // How long a stream pull / network send may block.
  void set_io_timeout(std::chrono::nanoseconds t) { io_timeout_ = t; }
  // Until when a network send that starts `now` may wait for its link: the
  // deadline of its call (fw::Move::deadline_ns, 0 = none), and at least
  // `io_timeout` (ACCL_TIMEOUT_MS).
  static Clock::time_point send_deadline(Clock::time_point now, std::chrono::nanoseconds io_timeout,
                                         uint64_t call_deadline_ns);

  // Element conversions performed by the compression lanes.
  enum class Conv : uint8_t { none, f32_to_f16, f16_to_f32 };

  // A validated move: element sizes, conversions, function, operand pointers.
  struct Plan {
    uint64_t count = 0;
    uint32_t es0 = 0, es1 = 0, esr = 0;  // element bytes of op0 / op1 / result
    Conv c0 = Conv::none, c1 = Conv::none, cr = Conv::none;
    bool has_op1 = false;
    ArithFunction fn{};
    const std::byte* src0 = nullptr;
    const std::byte* src1 = nullptr;
  };

  // Computes result elements [first, first + n) of `p` into dst.
  void produce(const Plan& p, std::byte* dst, uint64_t first, uint64_t n);
  // Same for result bytes [offset, offset + bytes) (transports may cut
  // anywhere; partial elements are computed into a small buffer).
  void produce_bytes(const Plan& p, std::byte* dst, uint64_t offset, uint64_t bytes);

 private:
  uint32_t plan(const fw::Move& m, Plan& p);
  uint32_t send(const fw::Move& m, const Plan& p);

  ExchangeMemory& xmem_;
  DeviceMemory& memory_;
  KernelStream& streams_;
  LinkTable& links_;
  std::chrono::nanoseconds io_timeout_;
  // Scratch reused across moves (the Mover is single-threaded).
  std::vector<std::byte> stream_in_;
  std::vector<float> scratch_[3];
  std::vector<std::byte> snapshot_[2];
  // Host regions of the last moves' op0, op1 and result (a send reads the
  // same user buffer, a receive writes the same one, again and again).
  DeviceMemory::HostHint host_hints_[3];
};

}  // namespace accl::emu
