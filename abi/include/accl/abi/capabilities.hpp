// SPDX-License-Identifier: Apache-2.0
//
// Device ABI, what a device can do: the public HWID bits and our capability
// word (memory_map.hpp places both). Part of <accl/abi.hpp>.
#pragma once

#include <stdint.h>

namespace accl::abi {

// HWID bits (public ACCL).
enum HwId : uint32_t {
  kHwIdStackMask = 0x3,  // 0 UDP, 1 TCP, 2 RDMA
  kHwIdDma = 1u << 2,
  kHwIdArith = 1u << 3,
  kHwIdCompression = 1u << 4,
  kHwIdKernelStreams = 1u << 5,
  kHwIdDebug = 1u << 6,
  kHwIdExternalDma = 1u << 7,
};

// Extension: capability word at kCapabilitiesOffset, written by firmware at
// init. Public hardware leaves it 0, which the driver reads as "SUM and MAX,
// eager only".
enum Capability : uint32_t {
  kCapReduceMin = 1u << 0,
  kCapReduceProd = 1u << 1,
  kCapRendezvous = 1u << 2,    // rendezvous on every transport
  kCapAlltoall = 1u << 3,
  kCapBarrier = 1u << 4,
  kCapTagAnyRecv = 1u << 5,    // receive-side TAG_ANY and MPI tag matching
  kCapChaining = 1u << 6,      // waitfor resolved by the device
  kCapLinkStatus = 1u << 7,    // kGetLinkStatus; a RANK_ANY receive reports each member's link failure once
  kCapValid = 1u << 31,        // word was written by a firmware that knows this layout
};

}  // namespace accl::abi
