// SPDX-License-Identifier: Apache-2.0
//
// Built with -O3 (see emu/meson.build): the loops below are written so GCC
// vectorizes them, and each kernel is cloned for AVX2 with runtime dispatch
// (target_clones), so one binary runs everywhere and uses wide vectors where
// they exist.
#include "arith.hpp"

#include "fp16.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

namespace accl::emu {

namespace {

// Integer arithmetic in an unsigned type at least as wide as unsigned int:
// wraps instead of signed-overflow UB, also after the promotion of 8/16-bit
// operands to int (65535 * 65535 overflows int).
template <typename T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
struct Sum {
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = Wide<T>;
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
      using U = Wide<T>;
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
template <typename T>
struct BitAnd {
  T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
template <typename T>
struct BitOr {
  T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
template <typename T>
struct BitXor {
  T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};
template <typename T>
struct LogAnd {
  T operator()(T a, T b) const { return static_cast<T>((a != 0) & (b != 0)); }
};
template <typename T>
struct LogOr {
  T operator()(T a, T b) const { return static_cast<T>((a != 0) | (b != 0)); }
};
template <typename T>
struct LogXor {
  T operator()(T a, T b) const { return static_cast<T>((a != 0) ^ (b != 0)); }
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
ACCL_EMU_KERNEL(max_f32, float, Max)
ACCL_EMU_KERNEL(max_f64, double, Max)
ACCL_EMU_KERNEL(min_f32, float, Min)
ACCL_EMU_KERNEL(min_f64, double, Min)
ACCL_EMU_KERNEL(prod_f32, float, Prod)
ACCL_EMU_KERNEL(prod_f64, double, Prod)

using Kernel = void (*)(const void*, const void*, void*, size_t);

// Every integer op on one element type, and their table in ReduceOp order.
#define ACCL_EMU_INT_KERNELS(suffix, T)                                                         \
  ACCL_EMU_KERNEL(sum_##suffix, T, Sum)                                                         \
  ACCL_EMU_KERNEL(max_##suffix, T, Max)                                                         \
  ACCL_EMU_KERNEL(min_##suffix, T, Min)                                                         \
  ACCL_EMU_KERNEL(prod_##suffix, T, Prod)                                                       \
  ACCL_EMU_KERNEL(band_##suffix, T, BitAnd)                                                     \
  ACCL_EMU_KERNEL(bor_##suffix, T, BitOr)                                                       \
  ACCL_EMU_KERNEL(bxor_##suffix, T, BitXor)                                                     \
  ACCL_EMU_KERNEL(land_##suffix, T, LogAnd)                                                     \
  ACCL_EMU_KERNEL(lor_##suffix, T, LogOr)                                                       \
  ACCL_EMU_KERNEL(lxor_##suffix, T, LogXor)                                                     \
  constexpr Kernel kernels_##suffix[] = {sum_##suffix,  max_##suffix, min_##suffix, prod_##suffix, \
                                         band_##suffix, bor_##suffix, bxor_##suffix, land_##suffix, \
                                         lor_##suffix,  lxor_##suffix};

ACCL_EMU_INT_KERNELS(i8, int8_t)
ACCL_EMU_INT_KERNELS(u8, uint8_t)
ACCL_EMU_INT_KERNELS(i16, int16_t)
ACCL_EMU_INT_KERNELS(u16, uint16_t)
ACCL_EMU_INT_KERNELS(i32, int32_t)
ACCL_EMU_INT_KERNELS(u32, uint32_t)
ACCL_EMU_INT_KERNELS(i64, int64_t)
ACCL_EMU_INT_KERNELS(u64, uint64_t)

// MINLOC / MAXLOC on packed pairs: value V at byte 0, index I right after
// it. Loaded through memcpy (the pairs are packed, so unaligned); both
// operands are read before the result is written, so res may be a or b.
template <typename V, typename I, bool kMax>
void locate(const void* a, const void* b, void* r, size_t n) {
  constexpr size_t kBytes = sizeof(V) + sizeof(I);
  const auto* pa = static_cast<const std::byte*>(a);
  const auto* pb = static_cast<const std::byte*>(b);
  auto* pr = static_cast<std::byte*>(r);
  for (size_t i = 0; i < n; ++i, pa += kBytes, pb += kBytes, pr += kBytes) {
    V va, vb;
    I ia, ib;
    std::memcpy(&va, pa, sizeof(V));
    std::memcpy(&ia, pa + sizeof(V), sizeof(I));
    std::memcpy(&vb, pb, sizeof(V));
    std::memcpy(&ib, pb + sizeof(V), sizeof(I));
    const bool a_wins = kMax ? vb < va : va < vb;
    const bool b_wins = kMax ? va < vb : vb < va;
    const V v = b_wins ? vb : va;
    const I index = a_wins ? ia : b_wins ? ib : (ib < ia ? ib : ia);
    std::memcpy(pr, &v, sizeof(V));
    std::memcpy(pr + sizeof(V), &index, sizeof(I));
  }
}

template <typename V, typename I>
Kernel loc_kernel(ReduceOp op) {
  return op == ReduceOp::maxloc ? locate<V, I, true> : locate<V, I, false>;
}

Kernel f32_kernel(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return sum_f32;
    case ReduceOp::max: return max_f32;
    case ReduceOp::min: return min_f32;
    case ReduceOp::prod: return prod_f32;
    default: break;  // decode_function() gives floats these four only
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
    // decode_function() pairs integer types with the ten integer ops and
    // pairs with MINLOC/MAXLOC only.
    case ElemType::i8: kernels_i8[static_cast<int>(f.op)](a, b, res, n); return;
    case ElemType::u8: kernels_u8[static_cast<int>(f.op)](a, b, res, n); return;
    case ElemType::i16: kernels_i16[static_cast<int>(f.op)](a, b, res, n); return;
    case ElemType::u16: kernels_u16[static_cast<int>(f.op)](a, b, res, n); return;
    case ElemType::i32: kernels_i32[static_cast<int>(f.op)](a, b, res, n); return;
    case ElemType::u32: kernels_u32[static_cast<int>(f.op)](a, b, res, n); return;
    case ElemType::i64: kernels_i64[static_cast<int>(f.op)](a, b, res, n); return;
    case ElemType::u64: kernels_u64[static_cast<int>(f.op)](a, b, res, n); return;
    case ElemType::i32_i32: loc_kernel<int32_t, int32_t>(f.op)(a, b, res, n); return;
    case ElemType::f32_i32: loc_kernel<float, int32_t>(f.op)(a, b, res, n); return;
    case ElemType::f64_i32: loc_kernel<double, int32_t>(f.op)(a, b, res, n); return;
    case ElemType::i64_i32: loc_kernel<int64_t, int32_t>(f.op)(a, b, res, n); return;
    case ElemType::i16_i32: loc_kernel<int16_t, int32_t>(f.op)(a, b, res, n); return;
    case ElemType::f32_f32: loc_kernel<float, float>(f.op)(a, b, res, n); return;
    case ElemType::f64_f64: loc_kernel<double, double>(f.op)(a, b, res, n); return;
  }
}

std::optional<ArithFunction> decode_function(uint32_t id) {
  if (id < abi::kNumArithFunctions) {
    static constexpr ElemType types[] = {ElemType::f32, ElemType::f64, ElemType::i32, ElemType::i64, ElemType::f16};
    static constexpr ReduceOp ops[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::prod};
    return ArithFunction{ops[id / 5], types[id % 5]};
  }
  if (id < abi::kFnExtendedBase) return std::nullopt;
  const uint32_t op = (id - abi::kFnExtendedBase) >> 5;
  const uint32_t elem = (id - abi::kFnExtendedBase) & 31;
  if (op > static_cast<uint32_t>(abi::ArithOp::maxloc) ||
      !abi::extended_function_valid(static_cast<abi::ArithOp>(op), static_cast<abi::ArithElem>(elem)))
    return std::nullopt;
  static constexpr ElemType ints[] = {ElemType::i8,  ElemType::u8,  ElemType::i16, ElemType::u16,
                                      ElemType::i32, ElemType::u32, ElemType::i64, ElemType::u64};
  static constexpr ElemType pairs[] = {ElemType::i32_i32, ElemType::f32_i32, ElemType::f64_i32, ElemType::i64_i32,
                                       ElemType::i16_i32, ElemType::f32_f32, ElemType::f64_f64};
  return ArithFunction{static_cast<ReduceOp>(op), elem < 16 ? ints[elem] : pairs[elem - 16]};
}

}  // namespace accl::emu
