// SPDX-License-Identifier: Apache-2.0
//
// Device ABI, results: the error bits a call returns in RETCODE. Part of
// <accl/abi.hpp>.
#pragma once

#include <stdint.h>

namespace accl::abi {

// ---------------------------------------------------------------------------
// Error bits returned in RETCODE (seed 003 ErrorCode + extensions 27..30)
// ---------------------------------------------------------------------------
enum ErrorBit : uint32_t {
  kDmaMismatchError = 1u << 0,
  kDmaInternalError = 1u << 1,
  kDmaDecodeError = 1u << 2,
  kDmaSlaveError = 1u << 3,
  kDmaNotOkayError = 1u << 4,
  kDmaNotEndOfPacketError = 1u << 5,
  kDmaNotExpectedBttError = 1u << 6,
  kDmaTimeoutError = 1u << 7,
  kConfigSwitchError = 1u << 8,
  kDequeueBufferTimeoutError = 1u << 9,
  kDequeueBufferSpareBufferStatusError = 1u << 10,
  kReceiveTimeoutError = 1u << 11,
  kDequeueBufferSpareBufferDmatagMismatch = 1u << 12,
  kDequeueBufferSpareBufferIndexError = 1u << 13,
  kCollectiveNotImplemented = 1u << 14,
  kReceiveOffchipSpareBuffIdNotValid = 1u << 15,
  kEagerThresholdInvalid = 1u << 16,
  kRendezvousThresholdInvalid = 1u << 17,
  kDmaSizeError = 1u << 18,
  kArithError = 1u << 19,
  kPackTimeoutStsError = 1u << 20,
  kPackSeqNumberError = 1u << 21,
  kCompressionError = 1u << 22,
  kKrnlTimeoutStsError = 1u << 23,
  kKrnlStsCountError = 1u << 24,
  kSegmenterExpectedBttError = 1u << 25,
  kDmaTagMismatchError = 1u << 26,
  // extensions
  kInvalidArgument = 1u << 27,   // bad count, rank, root, function, communicator
  kNotConfigured = 1u << 28,     // call before configuration or after reset
  kLinkError = 1u << 29,         // transport failure: peer unreachable, closed, lost or corrupt data
  kTruncationError = 1u << 30,   // incoming message larger than the posted receive
  kNotReady = 1u << 31,          // firmware-internal: call must be retried
};

}  // namespace accl::abi
