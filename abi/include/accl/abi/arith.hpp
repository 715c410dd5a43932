// SPDX-License-Identifier: Apache-2.0
//
// Device ABI, arithmetic: the arithmetic configuration record in exchange
// memory and the ids it holds (reduce functions per data type, compression
// lanes). Part of <accl/abi.hpp>.
#pragma once

#include <stdint.h>

namespace accl::abi {

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
