// SPDX-License-Identifier: Apache-2.0
//
// The arithmetic unit of an emulated CCLO (public ACCL reduce_ops plugin plus
// our extensions): element-wise res = a op b for the function ids of
// abi::ArithFunctionId and abi::extended_function(). Integer arithmetic wraps
// (two's complement) like hardware adders; float MAX/MIN follow x86
// maxps/minps (a NaN in `a` yields `b`). fp16 is computed in fp32 and rounded
// once to nearest even. Logical ops give 0 or 1; MINLOC/MAXLOC work on packed
// (value, index) pairs and keep the lower index of equal values.
#pragma once

#include <accl/abi.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace accl::emu {

enum class ElemType : uint8_t {
  f32, f64, i32, i64, f16,
  i8, u8, i16, u16, u32, u64,
  // packed (value, index) pairs
  i32_i32, f32_i32, f64_i32, i64_i32, i16_i32, f32_f32, f64_f64,
};
enum class ReduceOp : uint8_t { sum, max, min, prod, band, bor, bxor, land, lor, lxor, minloc, maxloc };

struct ArithFunction {
  ReduceOp op;
  ElemType type;
};

constexpr uint32_t elem_bytes(ElemType t) {
  switch (t) {
    case ElemType::i8: case ElemType::u8: return 1;
    case ElemType::f16: case ElemType::i16: case ElemType::u16: return 2;
    case ElemType::f32: case ElemType::i32: case ElemType::u32: return 4;
    case ElemType::f64: case ElemType::i64: case ElemType::u64: return 8;
    case ElemType::i16_i32: return 6;
    case ElemType::i32_i32: case ElemType::f32_i32: case ElemType::f32_f32: return 8;
    case ElemType::f64_i32: case ElemType::i64_i32: return 12;
    case ElemType::f64_f64: return 16;
  }
  return 0;
}

// nullopt for ids the unit does not implement.
std::optional<ArithFunction> decode_function(uint32_t function_id);

// res[i] = a[i] op b[i] for i < n. `res` may be exactly `a` or `b` (in-place
// accumulation); any other overlap is not allowed. No alignment required.
void reduce(ArithFunction f, const void* a, const void* b, void* res, size_t n);

}  // namespace accl::emu
