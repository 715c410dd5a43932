// SPDX-License-Identifier: Apache-2.0
//
// The rules of public ACCL's firmware (ccl_offload_control.c), which the
// driver applies itself on a device without a capability word (0x1FC0 reads
// 0: a public bitstream, public cclo_emu, the RTL simulation). A request the
// public firmware would refuse mid-run, or take a path that cannot finish,
// is refused here with a message before the device sees it
// (docs/architecture.md, "Deliberate differences from public ACCL").
#pragma once

#include <accl/abi.hpp>
#include <accl/call_encoding.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

namespace accl::detail::public_fw {

// No capability word: public firmware.
inline bool applies(uint32_t capabilities) { return (capabilities & abi::kCapValid) == 0; }

// The public firmware keeps set_timeout's count as a raw counter (it has no
// unit there; public ACCL's driver documents milliseconds and sends
// 1,000,000 at start-up). The driver passes whole milliseconds, rounded up,
// and bounds its own waits with the exact duration.
inline uint32_t timeout_counter(std::chrono::microseconds timeout) {
  const int64_t ms = (timeout.count() + 999) / 1000;
  return static_cast<uint32_t>(std::clamp<int64_t>(ms, 1, UINT32_MAX));
}

// Why the public firmware would refuse these thresholds ("" when it takes
// them): set_max_eager answers EAGER_THRESHOLD_INVALID below the RX buffer
// size, set_max_rendezvous RENDEZVOUS_THRESHOLD_INVALID at or below the eager
// size (so never 0: there is no eager-only mode).
inline std::string threshold_problem(uint64_t rx_buffer_size, uint64_t max_eager, uint64_t max_rendezvous) {
  if (max_eager < rx_buffer_size)
    return "max_eager_size " + std::to_string(max_eager) + " is below the RX buffer size " +
           std::to_string(rx_buffer_size) + "; the public firmware (no capability word) requires at least that";
  if (max_rendezvous <= max_eager)
    return "max_rendezvous_size " + std::to_string(max_rendezvous) + " is not above max_eager_size " +
           std::to_string(max_eager) + (max_rendezvous == 0 ? " (0 = eager only does not exist there)" : "") +
           "; the public firmware (no capability word) requires it above";
  return "";
}

// Whether the CCLO's network stack is RDMA (HWID bits 0-1: 0 UDP, 1 TCP,
// 2 RDMA). Public rendezvous moves its data by RDMA write only.
inline bool rdma_stack(uint32_t hwid) { return (hwid & abi::kHwIdStackMask) == 2; }

// Why a call cannot run on the public firmware ("" when it can), judged from
// what the firmware looks at: the scenario, the count word times the
// uncompressed element size, the compression flags, the stream operands and
// the communicator size. An uncompressed message without a stream operand
// above max_eager goes by rendezvous there, and so does every uncompressed
// alltoall (a compressed or streamed one is COLLECTIVE_NOT_IMPLEMENTED).
// Public rendezvous needs the RDMA stack: on the UDP and TCP designs, and on
// cclo_emu (its HWID reads 0, UDP) over tcp, it never finishes (a 2 KiB
// allreduce polled "running" for 7 minutes).
inline std::string call_problem(const encoding::CallSpec& spec, const CallWords& words, uint32_t comm_size,
                                uint64_t max_eager, bool rdma) {
  switch (spec.scenario) {
    case abi::kSend:
    case abi::kRecv:
    case abi::kBcast:
    case abi::kScatter:
    case abi::kGather:
    case abi::kAllgather:
    case abi::kReduce:
    case abi::kAllreduce:
    case abi::kReduceScatter:
    case abi::kAlltoall: break;
    default: return "";  // local moves, config, nop, barrier: no payload over the network
  }
  if (comm_size <= 1) return "";  // the public firmware copies locally
  const bool uncompressed = words[abi::kWordCompressionFlags] == abi::kNoCompression;
  const bool streamed = spec.op0.stream || spec.result.stream;
  static const std::string kNoRdma =
      "the public firmware (no capability word) sends it by rendezvous, which needs the RDMA network stack; this "
      "CCLO's HWID names UDP or TCP";
  if (spec.scenario == abi::kAlltoall) {
    if (!uncompressed || streamed)
      return "alltoall with compression or streams is not implemented by the public firmware (no capability word)";
    return rdma ? "" : "alltoall: " + kNoRdma;
  }
  if (!uncompressed || streamed || rdma) return "";
  const uint64_t elem_bytes =
      std::max({abi::data_type_bytes(spec.op0.type), abi::data_type_bytes(spec.op1.type),
                abi::data_type_bytes(spec.result.type)});
  const uint64_t bytes = uint64_t{spec.count} * elem_bytes;
  if (bytes <= max_eager) return "";
  return std::to_string(bytes) + " bytes per message is above max_eager_size " + std::to_string(max_eager) + ": " +
         kNoRdma + " (raise max_eager_size with the RX buffer size, compress, or split the call)";
}

}  // namespace accl::detail::public_fw
