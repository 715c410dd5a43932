// SPDX-License-Identifier: Apache-2.0
// Arithmetic unit (every function id) and fp16 conversion.
#include "arith.hpp"
#include "fp16.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace accl::emu::test {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Obviously-correct (slow) reference: exact value of a half.
double half_value(uint16_t h) {
  int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * std::ldexp(m, -24);
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : s * INFINITY;
  return s * std::ldexp(1024 + m, e - 25);
}

TEST(EmuArith, HalfToFloatExhaustive) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> bulk(65536), portable(65536);
  fp16::to_float(all.data(), bulk.data(), all.size());
  fp16::to_float_portable(all.data(), portable.data(), all.size());
  for (uint32_t i = 0; i < 65536; ++i) {
    double ref = half_value(static_cast<uint16_t>(i));
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(portable[i])) << i;
      EXPECT_EQ(bits(portable[i]) & 0x00400000u, 0x00400000u) << "NaN is quieted " << i;
    } else {
      ASSERT_EQ(static_cast<double>(portable[i]), ref) << i;
    }
    ASSERT_EQ(bits(bulk[i]), bits(portable[i])) << "hardware and portable differ at 0x" << std::hex << i;
    ASSERT_EQ(bits(fp16::to_float(static_cast<uint16_t>(i))), bits(portable[i]));
  }
}

TEST(EmuArith, FloatToHalfRoundsToNearestEven) {
  EXPECT_EQ(fp16::from_float(1.0f), 0x3C00);
  EXPECT_EQ(fp16::from_float(-2.0f), 0xC000);
  EXPECT_EQ(fp16::from_float(65504.0f), 0x7BFF);
  EXPECT_EQ(fp16::from_float(65519.0f), 0x7BFF);
  EXPECT_EQ(fp16::from_float(65520.0f), 0x7C00);  // ties to even -> overflow to inf
  EXPECT_EQ(fp16::from_float(INFINITY), 0x7C00);
  EXPECT_EQ(fp16::from_float(-INFINITY), 0xFC00);
  EXPECT_EQ(fp16::from_float(std::ldexp(1.0f, -24)), 0x0001);   // smallest subnormal
  EXPECT_EQ(fp16::from_float(std::ldexp(1.0f, -25)), 0x0000);   // tie to even: 0
  EXPECT_EQ(fp16::from_float(std::ldexp(3.0f, -25)), 0x0002);   // tie to even: 2
  EXPECT_EQ(fp16::from_float(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(fp16::from_float(1.0f + std::ldexp(3.0f, -11)), 0x3C02);
  EXPECT_EQ(fp16::from_float(-0.0f), 0x8000);
  uint16_t nan = fp16::from_float(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x3FF, 0);
  // Every half converts back to itself.
  for (uint32_t i = 0; i < 65536; ++i) {
    if ((i & 0x7C00) == 0x7C00 && (i & 0x3FF)) continue;  // NaN payloads get quieted
    ASSERT_EQ(fp16::from_float(fp16::to_float(static_cast<uint16_t>(i))), i) << i;
  }
}

TEST(EmuArith, FloatToHalfBulkMatchesPortable) {
  std::mt19937 rng(7);
  std::vector<float> in;
  for (int i = 0; i < 200000; ++i) in.push_back(from_bits(static_cast<uint32_t>(rng())));
  for (int e = -30; e < 18; ++e)
    for (int k = 0; k < 64; ++k) in.push_back(std::ldexp(1.0f + static_cast<float>(k) / 64.0f, e));
  std::vector<uint16_t> bulk(in.size()), portable(in.size());
  fp16::from_float(in.data(), bulk.data(), in.size());
  fp16::from_float_portable(in.data(), portable.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i)
    ASSERT_EQ(bulk[i], portable[i]) << "input bits 0x" << std::hex << bits(in[i]);
  if (!fp16::hardware_conversion()) GTEST_SKIP() << "no F16C: only the portable path was checked";
}

template <typename T>
T apply_ref(ReduceOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::sum: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case ReduceOp::prod: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case ReduceOp::max: return a > b ? a : b;
      case ReduceOp::min: return a < b ? a : b;
      default: ADD_FAILURE() << "not a public op"; break;
    }
  } else {
    switch (op) {
      case ReduceOp::sum: return a + b;
      case ReduceOp::prod: return a * b;
      case ReduceOp::max: return a > b ? a : b;
      case ReduceOp::min: return a < b ? a : b;
      default: ADD_FAILURE() << "not a public op"; break;
    }
  }
  return a;
}

template <typename T>
void check_function(ArithFunction f, size_t n, std::mt19937& rng) {
  std::vector<T> a(n), b(n), r(n);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<T>) {
      a[i] = static_cast<T>(rng() * 2654435761u);
      b[i] = static_cast<T>(rng());
    } else {
      a[i] = static_cast<T>(std::uniform_real_distribution<double>(-100, 100)(rng));
      b[i] = static_cast<T>(std::uniform_real_distribution<double>(-100, 100)(rng));
    }
  }
  reduce(f, a.data(), b.data(), r.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(r[i], apply_ref(f.op, a[i], b[i])) << i;
  // In place, as firmware accumulates: res == op1.
  std::vector<T> acc = b;
  reduce(f, a.data(), acc.data(), acc.data(), n);
  EXPECT_EQ(acc, r);
}

void check_f16(ArithFunction f, size_t n, std::mt19937& rng) {
  std::vector<uint16_t> a(n), b(n), r(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = fp16::from_float(std::uniform_real_distribution<float>(-20, 20)(rng));
    b[i] = fp16::from_float(std::uniform_real_distribution<float>(-20, 20)(rng));
  }
  reduce(f, a.data(), b.data(), r.data(), n);
  for (size_t i = 0; i < n; ++i) {
    uint16_t want = fp16::from_float(apply_ref(f.op, fp16::to_float(a[i]), fp16::to_float(b[i])));
    ASSERT_EQ(r[i], want) << i;
  }
  reduce(f, a.data(), b.data(), a.data(), n);  // in place on op0
  EXPECT_EQ(a, r);
}

TEST(EmuArith, EveryFunctionAndType) {
  std::mt19937 rng(42);
  for (uint32_t id = 0; id < abi::kNumArithFunctions; ++id) {
    SCOPED_TRACE("function id " + std::to_string(id));
    auto f = decode_function(id);
    ASSERT_TRUE(f);
    for (size_t n : {size_t{1}, size_t{7}, size_t{64}, size_t{5003}}) {
      switch (f->type) {
        case ElemType::f32: check_function<float>(*f, n, rng); break;
        case ElemType::f64: check_function<double>(*f, n, rng); break;
        case ElemType::i32: check_function<int32_t>(*f, n, rng); break;
        case ElemType::i64: check_function<int64_t>(*f, n, rng); break;
        case ElemType::f16: check_f16(*f, n, rng); break;
        default: FAIL() << "a public id decoded to an extension type";
      }
    }
  }
  EXPECT_FALSE(decode_function(abi::kNumArithFunctions));
  // Spot-check the id table against abi::ArithFunctionId.
  EXPECT_EQ(decode_function(abi::kFnSumF32)->op, ReduceOp::sum);
  EXPECT_EQ(decode_function(abi::kFnMaxF16)->type, ElemType::f16);
  EXPECT_EQ(decode_function(abi::kFnMinI64)->type, ElemType::i64);
  EXPECT_EQ(decode_function(abi::kFnMinI64)->op, ReduceOp::min);
  EXPECT_EQ(decode_function(abi::kFnProdF64)->op, ReduceOp::prod);
  EXPECT_EQ(decode_function(abi::kFnProdF64)->type, ElemType::f64);
}

TEST(EmuArith, IntegerWrapAndMinMaxEdges) {
  int32_t a[] = {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), -1};
  int32_t b[] = {1, -1, 0};
  int32_t r[3];
  reduce(*decode_function(abi::kFnSumI32), a, b, r, 3);
  EXPECT_EQ(r[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(r[1], std::numeric_limits<int32_t>::max());
  reduce(*decode_function(abi::kFnMinI32), a, b, r, 3);
  EXPECT_EQ(r[1], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(r[2], -1);
  reduce(*decode_function(abi::kFnMaxI32), a, b, r, 3);
  EXPECT_EQ(r[2], 0);
}

}  // namespace
}  // namespace accl::emu::test
