// SPDX-License-Identifier: Apache-2.0
//
// Built with -O3 (see emu/meson.build): the loops below are written so GCC
// vectorizes them, and each kernel is cloned for AVX2 with runtime dispatch
// (target_clones), so one binary runs everywhere and uses wide vectors where
// they exist.
#include "arith.hpp"

#include "fp16.hpp"

#include <algorithm>
#include <type_traits>

namespace accl::emu {

std::optional<ArithFunction> decode_function(uint32_t id) {
  if (id >= abi::kNumArithFunctions) return std::nullopt;
  static constexpr ElemType types[] = {ElemType::f32, ElemType::f64, ElemType::i32, ElemType::i64, ElemType::f16};
  static constexpr ReduceOp ops[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::prod};
  return ArithFunction{ops[id / 5], types[id % 5]};
}

namespace {

template <typename T>
struct Sum {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;  // wrap instead of signed-overflow UB
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};
template <typename T>
struct Prod {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};
// Written as the compare-select that maps onto maxps/minps one to one.
template <typename T>
struct Max {
  T operator()(T a, T b) const { return a > b ? a : b; }
};
template <typename T>
struct Min {
  T operator()(T a, T b) const { return a < b ? a : b; }
};

// ivdep: the only allowed overlap is res == a or res == b, which is no
// loop-carried dependence, so GCC may vectorize without runtime alias checks
// (those checks would send exact in-place accumulation to the scalar loop).
template <typename T, typename Op>
__attribute__((always_inline)) inline void apply(const T* a, const T* b, T* r, size_t n, Op op) {
#pragma GCC ivdep
  for (size_t i = 0; i < n; ++i) r[i] = op(a[i], b[i]);
}

#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define ACCL_EMU_CLONES __attribute__((target_clones("default", "avx2")))
#else
// TSan does not support ifunc-based dispatch well; one generic version.
#define ACCL_EMU_CLONES
#endif

#define ACCL_EMU_KERNEL(name, T, OP)                                          \
  ACCL_EMU_CLONES void name(const void* a, const void* b, void* r, size_t n) { \
    apply(static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(r), n, OP<T>{}); \
  }

ACCL_EMU_KERNEL(sum_f32, float, Sum)
ACCL_EMU_KERNEL(sum_f64, double, Sum)
ACCL_EMU_KERNEL(sum_i32, int32_t, Sum)
ACCL_EMU_KERNEL(sum_i64, int64_t, Sum)
ACCL_EMU_KERNEL(max_f32, float, Max)
ACCL_EMU_KERNEL(max_f64, double, Max)
ACCL_EMU_KERNEL(max_i32, int32_t, Max)
ACCL_EMU_KERNEL(max_i64, int64_t, Max)
ACCL_EMU_KERNEL(min_f32, float, Min)
ACCL_EMU_KERNEL(min_f64, double, Min)
ACCL_EMU_KERNEL(min_i32, int32_t, Min)
ACCL_EMU_KERNEL(min_i64, int64_t, Min)
ACCL_EMU_KERNEL(prod_f32, float, Prod)
ACCL_EMU_KERNEL(prod_f64, double, Prod)
ACCL_EMU_KERNEL(prod_i32, int32_t, Prod)
ACCL_EMU_KERNEL(prod_i64, int64_t, Prod)

using Kernel = void (*)(const void*, const void*, void*, size_t);

Kernel f32_kernel(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return sum_f32;
    case ReduceOp::max: return max_f32;
    case ReduceOp::min: return min_f32;
    case ReduceOp::prod: return prod_f32;
  }
  return sum_f32;
}

// fp16: widen a block to fp32 (exact), compute, round once. Blocks of 2 KiB
// elements keep the scratch in L1 and on the stack.
void reduce_f16(ReduceOp op, const void* a, const void* b, void* r, size_t n) {
  constexpr size_t kBlock = 2048;
  alignas(64) float fa[kBlock];
  alignas(64) float fb[kBlock];
  Kernel k = f32_kernel(op);
  auto* pa = static_cast<const uint16_t*>(a);
  auto* pb = static_cast<const uint16_t*>(b);
  auto* pr = static_cast<uint16_t*>(r);
  for (size_t i = 0; i < n; i += kBlock) {
    size_t m = std::min(kBlock, n - i);
    fp16::to_float(pa + i, fa, m);
    fp16::to_float(pb + i, fb, m);
    k(fa, fb, fa, m);
    fp16::from_float(fa, pr + i, m);
  }
}

}  // namespace

void reduce(ArithFunction f, const void* a, const void* b, void* res, size_t n) {
  if (n == 0) return;
  switch (f.type) {
    case ElemType::f16: reduce_f16(f.op, a, b, res, n); return;
    case ElemType::f32: f32_kernel(f.op)(a, b, res, n); return;
    case ElemType::f64: {
      static constexpr Kernel k[] = {sum_f64, max_f64, min_f64, prod_f64};
      k[static_cast<int>(f.op)](a, b, res, n);
      return;
    }
    case ElemType::i32: {
      static constexpr Kernel k[] = {sum_i32, max_i32, min_i32, prod_i32};
      k[static_cast<int>(f.op)](a, b, res, n);
      return;
    }
    case ElemType::i64: {
      static constexpr Kernel k[] = {sum_i64, max_i64, min_i64, prod_i64};
      k[static_cast<int>(f.op)](a, b, res, n);
      return;
    }
  }
}

}  // namespace accl::emu
