// SPDX-License-Identifier: Apache-2.0
//
// Device ABI, calls: the 15 argument words of a call, the values they carry
// and the host controller registers that hold them. Part of <accl/abi.hpp>.
#pragma once

#include <stdint.h>

namespace accl::abi {

// ---------------------------------------------------------------------------
// Calls: 15 argument words, as written by the host controller
// ---------------------------------------------------------------------------
enum Scenario : uint32_t {
  kConfig = 0,
  kCopy = 1,
  kCombine = 2,
  kSend = 3,
  kRecv = 4,
  kBcast = 5,
  kScatter = 6,
  kGather = 7,
  kReduce = 8,
  kAllgather = 9,
  kAllreduce = 10,
  kReduceScatter = 11,
  kBarrier = 12,
  kAlltoall = 13,
  kNop = 255,
};

enum ConfigFunction : uint32_t {
  kResetPeripherals = 0,
  kEnablePackets = 1,
  kSetTimeout = 2,          // count = timeout in microseconds (extension: unit defined)
  kSetMaxEagerSize = 3,     // count = bytes
  kSetMaxRendezvousSize = 4,// count = bytes; 0 disables rendezvous (extension)
  // Extension (kCapLinkStatus): comm = communicator address, root/src/dst =
  // rank; RETCODE = the error bits of that rank's failed link (kLinkError
  // plus the transport's detail), 0 while the link is up or unused.
  kGetLinkStatus = 5,
};

enum ReduceFunction : uint32_t {
  kSum = 0,
  kMax = 1,
  kMin = 2,   // extension, advertised by kCapReduceMin
  kProd = 3,  // extension, advertised by kCapReduceProd
  // Extensions on integer types.
  kBand = 4,  // kCapReduceBitwise
  kBor = 5,
  kBxor = 6,
  kLand = 7,  // kCapReduceLogical
  kLor = 8,
  kLxor = 9,
  // Extensions on the pair types (kCapReduceLoc).
  kMinLoc = 10,
  kMaxLoc = 11,
};

enum CompressionFlags : uint32_t {
  kNoCompression = 0,
  kOp0Compressed = 1,
  kOp1Compressed = 2,
  kResCompressed = 4,
  kEthCompressed = 8,
};

enum StreamFlags : uint32_t {
  kNoStream = 0,
  kOp0Stream = 1,
  kResStream = 2,
};

enum HostFlags : uint32_t {
  kNoHost = 0,
  kOp0Host = 1,
  kOp1Host = 2,
  kResHost = 4,
};

inline constexpr uint32_t kTagAny = 0xFFFFFFFFu;
inline constexpr uint32_t kRankAny = 0xFFFFFFFFu;  // extension: receive from any source
inline constexpr uint32_t kMaxStreamId = 246;
inline constexpr uint32_t kStreamIdOffset = 9;      // header strm = stream id + 9

// Index of each word in the 15-word call.
enum CallWord : uint32_t {
  kWordScenario = 0,
  kWordCount = 1,
  kWordComm = 2,
  kWordRootSrcDst = 3,
  kWordFunction = 4,
  kWordTag = 5,
  kWordArithConfig = 6,
  kWordCompressionFlags = 7,
  kWordStreamFlags = 8,  // (host_flags << 8) | stream_flags
  kWordAddr0Low = 9,
  kWordAddr0High = 10,
  kWordAddr1Low = 11,
  kWordAddr1High = 12,
  kWordAddr2Low = 13,
  kWordAddr2High = 14,
  kCallWords = 15,
};

// Host controller register offsets (public ACCL hostctrl AXI-Lite map), used
// by register-level backends.
enum HostCtrlRegister : uint32_t {
  kHostCtrlApCtrl = 0x00,
  kHostCtrlScenario = 0x10,
  kHostCtrlCount = 0x18,
  kHostCtrlComm = 0x20,
  kHostCtrlRootSrcDst = 0x28,
  kHostCtrlFunction = 0x30,
  kHostCtrlTag = 0x38,
  kHostCtrlArithConfig = 0x40,
  kHostCtrlCompressionFlags = 0x48,
  kHostCtrlStreamFlags = 0x50,
  kHostCtrlAddr0 = 0x58,
  kHostCtrlAddr1 = 0x64,
  kHostCtrlAddr2 = 0x70,
};

}  // namespace accl::abi
