// SPDX-License-Identifier: Apache-2.0
//
// The CCLO device ABI: everything the host driver, the firmware and the
// emulator must agree on. This header is freestanding (only <stdint.h>) so the
// firmware can include it without a C++ runtime.
//
// Layout follows public ACCL (exchange memory map, 15-word call, 64-byte
// message header). Our extensions live in places public hardware ignores and
// are marked "extension"; docs/architecture.md lists every one of them.
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

// Arithmetic configuration record (public ACCL layout).
enum ArithField : uint32_t {
  kArithUncompressedBytes = 0,
  kArithCompressedBytes = 1,
  kArithRatioLog = 2,
  kArithCompressorId = 3,
  kArithDecompressorId = 4,
  kArithNumFunctions = 5,
  kArithIsCompressed = 6,
  kArithFunctionIds = 7,  // arith_tdest[kArithNumFunctions]
};
inline constexpr uint32_t kMaxReduceFunctions = 10;

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

// ---------------------------------------------------------------------------
// 64-byte message header (first datapath word of every message)
// ---------------------------------------------------------------------------
enum MessageType : uint8_t {
  kMsgEager = 0,             // payload for RX buffers
  kMsgRendezvousData = 1,    // payload written at vaddr of a window opened by a CTS
  kMsgRendezvousAddr = 2,    // "clear to send": receiver publishes vaddr (public RNDZVS_INIT)
  kMsgRendezvousDone = 3,    // public RNDZVS_WR_DONE; we signal completion locally instead
  kMsgRendezvousRequest = 4, // extension: "request to send", matched like an eager message
};

// Header flags (extension word).
enum HeaderFlags : uint32_t {
  kHdrCompressed = 1u << 0,    // payload is fp16-compressed float32
  kHdrContinuation = 1u << 1,  // not the first segment of an eager message
  // Never set by the firmware: a transport may mark frames of its own with it
  // (the emulator's shared-memory rings: payload in the sender's outbox) and
  // clears it before the header reaches the receiving data plane.
  kHdrTransportFrame = 1u << 31,
};

struct WireHeader {
  uint32_t count;      // payload bytes following this header
  uint32_t tag;
  uint32_t src;        // sender's rank in the communicator
  uint32_t seqn;       // per (communicator, peer) sequence number
  uint32_t strm;       // 0 = memory; otherwise kernel stream id + 9
  uint16_t dst;        // destination session
  uint8_t msg_type;    // MessageType
  uint8_t host;        // rendezvous target in host memory
  uint64_t vaddr;      // rendezvous target address
  // extension words (zero on public hardware)
  uint32_t ctx;        // (communicator context id << 1) | 1 for collective traffic
  uint32_t msg_bytes;  // total payload bytes of the whole message
  uint32_t rid;        // rendezvous transfer id chosen by the sender
  uint32_t flags;      // HeaderFlags
  uint32_t reserved[4];
};
static_assert(sizeof(WireHeader) == 64, "the message header is one 64-byte datapath word");

// ---------------------------------------------------------------------------
// Host-side data types (never sent to hardware; used to pick arith configs)
// ---------------------------------------------------------------------------
enum class DataType : uint32_t {
  none = 0,
  int8 = 1,
  float16 = 2,
  float32 = 3,
  float64 = 4,
  int32 = 5,
  int64 = 6,
};

constexpr uint32_t data_type_bytes(DataType t) {
  switch (t) {
    case DataType::int8: return 1;
    case DataType::float16: return 2;
    case DataType::float32: return 4;
    case DataType::float64: return 8;
    case DataType::int32: return 4;
    case DataType::int64: return 8;
    default: return 0;
  }
}

// Arithmetic function ids (the arith_tdest values) understood by the
// emulator's arithmetic unit. 0..9 are the public reduce_ops plugin ids.
enum ArithFunctionId : uint32_t {
  kFnSumF32 = 0, kFnSumF64 = 1, kFnSumI32 = 2, kFnSumI64 = 3, kFnSumF16 = 4,
  kFnMaxF32 = 5, kFnMaxF64 = 6, kFnMaxI32 = 7, kFnMaxI64 = 8, kFnMaxF16 = 9,
  kFnMinF32 = 10, kFnMinF64 = 11, kFnMinI32 = 12, kFnMinI64 = 13, kFnMinF16 = 14,
  kFnProdF32 = 15, kFnProdF64 = 16, kFnProdI32 = 17, kFnProdI64 = 18, kFnProdF16 = 19,
  kNumArithFunctions = 20,
};

// Compression lane ids (compressor_tdest / decompressor_tdest).
enum CompressionLaneId : uint32_t {
  kLaneF32ToF16 = 0,
  kLaneF16ToF32 = 1,
};

}  // namespace accl::abi
