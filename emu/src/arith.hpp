// SPDX-License-Identifier: Apache-2.0
//
// The arithmetic unit of an emulated CCLO (public ACCL reduce_ops plugin plus
// our MIN/PROD extension): element-wise res = a op b for the function ids of
// abi::ArithFunctionId. Integer arithmetic wraps (two's complement) like
// hardware adders; float MAX/MIN follow x86 maxps/minps (a NaN in `a` yields
// `b`). fp16 is computed in fp32 and rounded once to nearest even.
#pragma once

#include <accl/abi.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace accl::emu {

enum class ElemType : uint8_t { f32, f64, i32, i64, f16 };
enum class ReduceOp : uint8_t { sum, max, min, prod };

struct ArithFunction {
  ReduceOp op;
  ElemType type;
};

constexpr uint32_t elem_bytes(ElemType t) {
  switch (t) {
    case ElemType::f32: case ElemType::i32: return 4;
    case ElemType::f64: case ElemType::i64: return 8;
    case ElemType::f16: return 2;
  }
  return 0;
}

// nullopt for ids outside abi::ArithFunctionId.
std::optional<ArithFunction> decode_function(uint32_t function_id);

// res[i] = a[i] op b[i] for i < n. `res` may be exactly `a` or `b` (in-place
// accumulation); any other overlap is not allowed. No alignment required.
void reduce(ArithFunction f, const void* a, const void* b, void* res, size_t n);

}  // namespace accl::emu
