// SPDX-License-Identifier: Apache-2.0
//
// Device ABI, exchange memory: the 8 KiB configuration space the driver
// writes and the firmware reads (RX buffer table, communicator records,
// tuning registers, status words). Part of <accl/abi.hpp>.
#pragma once

#include <stdint.h>

namespace accl::abi {

// ---------------------------------------------------------------------------
// Exchange memory (8 KiB configuration space, 32-bit words at byte offsets)
// ---------------------------------------------------------------------------
inline constexpr uint32_t kExchangeMemorySize = 0x2000;

inline constexpr uint32_t kRxBufferCountOffset = 0x0000;  // written last by the driver
inline constexpr uint32_t kRxBufferSizeOffset = 0x0004;   // bytes per RX buffer
inline constexpr uint32_t kRxBufferTableOffset = 0x0008;  // 7-word records follow
inline constexpr uint32_t kRxBufferRecordWords = 7;
inline constexpr uint32_t kRxBufferRecordBytes = kRxBufferRecordWords * 4;

// Word indices inside one RX buffer record.
enum RxBufferField : uint32_t {
  kRxStatus = 0,
  kRxAddrLow = 1,
  kRxAddrHigh = 2,
  kRxTag = 3,
  kRxLen = 4,
  kRxSrc = 5,
  kRxSeqn = 6,
};

enum RxBufferStatus : uint32_t {
  kRxIdle = 0,
  kRxEnqueued = 1,
  kRxReserved = 2,  // holds a received message not yet consumed
  kRxError = 4,
};

// Communicator record: word 0 size, word 1 local rank, then one 6-word record
// per rank, then (extension) one word holding the communicator context id that
// is carried in every message header so two communicators never mix.
inline constexpr uint32_t kCommSizeWord = 0;
inline constexpr uint32_t kCommLocalRankWord = 1;
inline constexpr uint32_t kCommRanksWord = 2;
inline constexpr uint32_t kCommRankRecordWords = 6;
enum CommRankField : uint32_t {
  kRankIp = 0,        // IPv4, host byte order (10.10.10.1 == 0x0A0A0A01)
  kRankPort = 1,
  kRankInboundSeq = 2,   // next sequence number expected from this rank
  kRankOutboundSeq = 3,  // next sequence number to send to this rank
  kRankSession = 4,      // 0xFFFFFFFF when unused
  kRankMaxSegment = 5,   // max bytes of one eager message segment to this rank
};
constexpr uint32_t comm_record_words(uint32_t nranks) {
  return kCommRanksWord + kCommRankRecordWords * nranks + 1;
}
constexpr uint32_t comm_context_word(uint32_t nranks) {
  return kCommRanksWord + kCommRankRecordWords * nranks;
}


// Tuning registers and status words at the top of exchange memory.
inline constexpr uint32_t kCapabilitiesOffset = 0x1FC0;  // extension: see Capability
inline constexpr uint32_t kGatherFlatTreeMaxFanin = 0x1FC4;
inline constexpr uint32_t kGatherFlatTreeMaxCount = 0x1FC8;
inline constexpr uint32_t kBcastFlatTreeMaxRanks = 0x1FCC;
inline constexpr uint32_t kReduceFlatTreeMaxRanks = 0x1FD0;
inline constexpr uint32_t kReduceFlatTreeMaxCount = 0x1FD4;
inline constexpr uint32_t kSpare1Offset = 0x1FD8;  // lo, hi
inline constexpr uint32_t kSpare2Offset = 0x1FE0;
inline constexpr uint32_t kSpare3Offset = 0x1FE8;
inline constexpr uint32_t kPerfCounterOffset = 0x1FF0;
inline constexpr uint32_t kConfigReadyOffset = 0x1FF4;
inline constexpr uint32_t kHwIdOffset = 0x1FF8;
inline constexpr uint32_t kRetcodeOffset = 0x1FFC;

// Everything the driver may bump-allocate (RX table, communicators, arith
// configs) must end below this offset.
inline constexpr uint32_t kConfigAreaEnd = kCapabilitiesOffset;

}  // namespace accl::abi
