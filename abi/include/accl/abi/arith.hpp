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
// Public ACCL's plugin knows 10; our firmware takes the whole ReduceFunction
// range (MINLOC/MAXLOC are 10 and 11).
inline constexpr uint32_t kMaxReduceFunctions = 12;

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
  // Extensions (capability word: kCapInt16, kCapUnsigned, kCapReduceLoc).
  int16 = 7,
  uint8 = 8,
  uint16 = 9,
  uint32 = 10,
  uint64 = 11,
  // MINLOC/MAXLOC pairs, packed: the value, then the index right after it
  // (no padding; MPI_DOUBLE_INT is 12 bytes here, 16 in a C struct).
  int32_int = 12,      // MPI_2INT, MPI_2INTEGER
  float32_int = 13,    // MPI_FLOAT_INT
  float64_int = 14,    // MPI_DOUBLE_INT
  int64_int = 15,      // MPI_LONG_INT
  int16_int = 16,      // MPI_SHORT_INT
  float32_float32 = 17,  // MPI_2REAL
  float64_float64 = 18,  // MPI_2DOUBLE_PRECISION
};
inline constexpr uint32_t kNumDataTypes = 19;

constexpr uint32_t data_type_bytes(DataType t) {
  switch (t) {
    case DataType::int8: return 1;
    case DataType::float16: return 2;
    case DataType::float32: return 4;
    case DataType::float64: return 8;
    case DataType::int32: return 4;
    case DataType::int64: return 8;
    case DataType::int16: return 2;
    case DataType::uint8: return 1;
    case DataType::uint16: return 2;
    case DataType::uint32: return 4;
    case DataType::uint64: return 8;
    case DataType::int32_int: return 8;
    case DataType::float32_int: return 8;
    case DataType::float64_int: return 12;
    case DataType::int64_int: return 12;
    case DataType::int16_int: return 6;
    case DataType::float32_float32: return 8;
    case DataType::float64_float64: return 16;
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

// Extension function ids (capability word): 0x1000 | op << 5 | element. The
// element says how the bytes are read; the op what is computed.
enum class ArithOp : uint32_t {
  sum = 0, max = 1, min = 2, prod = 3,
  band = 4, bor = 5, bxor = 6,  // integers only
  land = 7, lor = 8, lxor = 9,  // integers only; result 0 or 1
  minloc = 10, maxloc = 11,     // pairs only; equal values keep the lower index
};
enum class ArithElem : uint32_t {
  i8 = 0, u8 = 1, i16 = 2, u16 = 3, i32 = 4, u32 = 5, i64 = 6, u64 = 7,
  // packed pairs (see DataType)
  i32_i32 = 16, f32_i32 = 17, f64_i32 = 18, i64_i32 = 19, i16_i32 = 20, f32_f32 = 21, f64_f64 = 22,
};
inline constexpr uint32_t kFnExtendedBase = 0x1000;  // above every op << 5 | element
constexpr uint32_t extended_function(ArithOp op, ArithElem elem) {
  return kFnExtendedBase | static_cast<uint32_t>(op) << 5 | static_cast<uint32_t>(elem);
}
constexpr bool is_pair_elem(ArithElem e) { return static_cast<uint32_t>(e) >= 16; }
// Whether the arithmetic unit implements `op` on `elem`.
constexpr bool extended_function_valid(ArithOp op, ArithElem elem) {
  const uint32_t o = static_cast<uint32_t>(op), e = static_cast<uint32_t>(elem);
  if (o > static_cast<uint32_t>(ArithOp::maxloc)) return false;
  if (e > static_cast<uint32_t>(ArithElem::u64) && (e < 16 || e > static_cast<uint32_t>(ArithElem::f64_f64)))
    return false;
  const bool loc = op == ArithOp::minloc || op == ArithOp::maxloc;
  return loc == is_pair_elem(elem);
}
// An arith_tdest entry for a reduce function the type does not have (e.g.
// SUM of a pair): the arithmetic unit rejects it with ARITH_ERROR.
inline constexpr uint32_t kFnNone = 0xFFFFFFFFu;

// Compression lane ids (compressor_tdest / decompressor_tdest).
enum CompressionLaneId : uint32_t {
  kLaneF32ToF16 = 0,
  kLaneF16ToF32 = 1,
};

}  // namespace accl::abi
