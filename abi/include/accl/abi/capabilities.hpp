// SPDX-License-Identifier: Apache-2.0
//
// Device ABI, what a device can do: the public HWID bits and our capability
// word (memory_map.hpp places both). Part of <accl/abi.hpp>.
#pragma once

#include <accl/abi/arith.hpp>
#include <accl/abi/call_words.hpp>

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
  // More of the MPI type x op matrix (each reported on its own so a device
  // may have a subset; the driver loads an arith config only when its type's
  // bits are set).
  kCapInt8 = 1u << 8,            // int8 / uint8 types: SUM MAX MIN PROD
  kCapInt16 = 1u << 9,           // int16 / uint16 types
  kCapUnsigned = 1u << 10,       // uint8..uint64 types (MAX/MIN compare unsigned)
  kCapReduceBitwise = 1u << 11,  // BAND BOR BXOR on integer types
  kCapReduceLogical = 1u << 12,  // LAND LOR LXOR on integer types
  kCapReduceLoc = 1u << 13,      // MINLOC MAXLOC on the pair types
  kCapValid = 1u << 31,        // word was written by a firmware that knows this layout
};

// Capability bits a reduce function needs (0: every CCLO has it).
constexpr uint32_t reduce_function_capabilities(uint32_t function) {
  switch (function) {
    case kSum: case kMax: return 0;
    case kMin: return kCapReduceMin;
    case kProd: return kCapReduceProd;
    case kBand: case kBor: case kBxor: return kCapReduceBitwise;
    case kLand: case kLor: case kLxor: return kCapReduceLogical;
    case kMinLoc: case kMaxLoc: return kCapReduceLoc;
    default: return 0xFFFFFFFFu;  // no such function: no device has it
  }
}

// Capability bits a data type needs (0: public ACCL's types).
constexpr uint32_t data_type_capabilities(DataType t) {
  switch (t) {
    case DataType::int8: return kCapInt8;
    case DataType::int16: return kCapInt16;
    case DataType::uint8: return kCapInt8 | kCapUnsigned;
    case DataType::uint16: return kCapInt16 | kCapUnsigned;
    case DataType::uint32: case DataType::uint64: return kCapUnsigned;
    case DataType::int32_int: case DataType::float32_int: case DataType::float64_int: case DataType::int64_int:
    case DataType::int16_int: case DataType::float32_float32: case DataType::float64_float64:
      return kCapReduceLoc;
    default: return 0;
  }
}

}  // namespace accl::abi
