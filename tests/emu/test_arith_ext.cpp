// SPDX-License-Identifier: Apache-2.0
// Arithmetic unit, extension functions (abi::extended_function): every
// integer type x op with edge values (wrap-around, signed/unsigned order,
// logical 0/1 results) and MINLOC/MAXLOC on every packed pair type (ties
// keep the lower index, negative values and indices).
#include "arith.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace accl::emu::test {
namespace {

using abi::ArithElem;
using abi::ArithOp;

constexpr ArithOp kIntegerOps[] = {ArithOp::sum,  ArithOp::max, ArithOp::min,  ArithOp::prod, ArithOp::band,
                                   ArithOp::bor,  ArithOp::bxor, ArithOp::land, ArithOp::lor,  ArithOp::lxor};

// Reference computed through 64-bit unsigned arithmetic (mod 2^64, then the
// conversion to T keeps the low bits): independent of the unit's kernels.
template <typename T>
T expected(ArithOp op, T a, T b) {
  const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case ArithOp::sum: return static_cast<T>(ua + ub);
    case ArithOp::prod: return static_cast<T>(ua * ub);
    case ArithOp::max: return a < b ? b : a;
    case ArithOp::min: return b < a ? b : a;
    case ArithOp::band: return static_cast<T>(ua & ub);
    case ArithOp::bor: return static_cast<T>(ua | ub);
    case ArithOp::bxor: return static_cast<T>(ua ^ ub);
    case ArithOp::land: return static_cast<T>(a != 0 && b != 0 ? 1 : 0);
    case ArithOp::lor: return static_cast<T>(a != 0 || b != 0 ? 1 : 0);
    case ArithOp::lxor: return static_cast<T>((a != 0) != (b != 0) ? 1 : 0);
    default: ADD_FAILURE() << "not an integer op"; return 0;
  }
}

template <typename T>
std::vector<T> edge_values() {
  using L = std::numeric_limits<T>;
  std::vector<T> v = {L::min(), static_cast<T>(L::min() + 1), static_cast<T>(L::max() - 1), L::max(), 0, 1, 2,
                      static_cast<T>(0x55), static_cast<T>(0xAA)};
  if constexpr (std::is_signed_v<T>) {
    v.push_back(static_cast<T>(-1));
    v.push_back(static_cast<T>(-2));
  }
  return v;
}

template <typename T>
void check_integer(ArithElem elem) {
  std::mt19937_64 rng(7);
  for (ArithOp op : kIntegerOps) {
    SCOPED_TRACE("op " + std::to_string(static_cast<int>(op)) + " elem " + std::to_string(static_cast<int>(elem)));
    const auto f = decode_function(abi::extended_function(op, elem));
    ASSERT_TRUE(f);
    ASSERT_EQ(elem_bytes(f->type), sizeof(T));
    // Every pair of edge values (both orders), then random values.
    std::vector<T> a, b;
    for (T x : edge_values<T>())
      for (T y : edge_values<T>()) {
        a.push_back(x);
        b.push_back(y);
      }
    for (int i = 0; i < 4099; ++i) {
      a.push_back(static_cast<T>(rng()));
      b.push_back(static_cast<T>(i % 5 == 0 ? 0 : rng()));  // zeros for the logical ops
    }
    std::vector<T> r(a.size());
    reduce(*f, a.data(), b.data(), r.data(), a.size());
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(r[i], expected(op, a[i], b[i])) << "element " << i << ": " << +a[i] << " op " << +b[i];
    // In place over op1, as the firmware accumulates.
    std::vector<T> acc = b;
    reduce(*f, a.data(), acc.data(), acc.data(), a.size());
    EXPECT_EQ(acc, r);
  }
}

TEST(EmuArithExt, SignedIntegers) {
  check_integer<int8_t>(ArithElem::i8);
  check_integer<int16_t>(ArithElem::i16);
  check_integer<int32_t>(ArithElem::i32);
  check_integer<int64_t>(ArithElem::i64);
}

TEST(EmuArithExt, UnsignedIntegers) {
  check_integer<uint8_t>(ArithElem::u8);
  check_integer<uint16_t>(ArithElem::u16);
  check_integer<uint32_t>(ArithElem::u32);
  check_integer<uint64_t>(ArithElem::u64);
}

TEST(EmuArithExt, SpotValues) {
  // 8-bit wrap and the signed/unsigned difference MAX makes.
  int8_t a8[] = {127, -128, -1};
  int8_t b8[] = {1, -1, 1};
  int8_t r8[3];
  reduce(*decode_function(abi::extended_function(ArithOp::sum, ArithElem::i8)), a8, b8, r8, 3);
  EXPECT_EQ(r8[0], -128);
  EXPECT_EQ(r8[1], 127);
  EXPECT_EQ(r8[2], 0);
  uint8_t ua[] = {0xFF, 0x80}, ub[] = {0x01, 0x7F}, ur[2];
  reduce(*decode_function(abi::extended_function(ArithOp::max, ArithElem::u8)), ua, ub, ur, 2);
  EXPECT_EQ(ur[0], 0xFF);
  EXPECT_EQ(ur[1], 0x80);
  reduce(*decode_function(abi::extended_function(ArithOp::max, ArithElem::i8)), ua, ub, ur, 2);
  EXPECT_EQ(ur[0], 0x01);  // -1 < 1 as signed
  EXPECT_EQ(ur[1], 0x7F);
  // 16-bit product wraps (65535 * 65535 overflows int after promotion).
  uint16_t pa[] = {65535, 300}, pb[] = {65535, 300}, pr[2];
  reduce(*decode_function(abi::extended_function(ArithOp::prod, ArithElem::u16)), pa, pb, pr, 2);
  EXPECT_EQ(pr[0], 1);
  EXPECT_EQ(pr[1], static_cast<uint16_t>(90000));
  // Logical ops answer 0 or 1 whatever the non-zero inputs.
  int32_t la[] = {-7, 0, 4, 0}, lb[] = {2, 9, 0, 0}, lr[4];
  reduce(*decode_function(abi::extended_function(ArithOp::land, ArithElem::i32)), la, lb, lr, 4);
  EXPECT_EQ(std::vector<int32_t>(lr, lr + 4), (std::vector<int32_t>{1, 0, 0, 0}));
  reduce(*decode_function(abi::extended_function(ArithOp::lxor, ArithElem::i32)), la, lb, lr, 4);
  EXPECT_EQ(std::vector<int32_t>(lr, lr + 4), (std::vector<int32_t>{0, 1, 1, 0}));
}

// A packed pair as the device stores it: value at byte 0, index right after.
template <typename V, typename I>
struct Packed {
  static constexpr size_t kBytes = sizeof(V) + sizeof(I);
  static std::vector<std::byte> make(const std::vector<std::pair<V, I>>& items) {
    std::vector<std::byte> out(items.size() * kBytes);
    for (size_t i = 0; i < items.size(); ++i) {
      std::memcpy(&out[i * kBytes], &items[i].first, sizeof(V));
      std::memcpy(&out[i * kBytes + sizeof(V)], &items[i].second, sizeof(I));
    }
    return out;
  }
  static std::pair<V, I> at(const std::vector<std::byte>& bytes, size_t i) {
    std::pair<V, I> p;
    std::memcpy(&p.first, &bytes[i * kBytes], sizeof(V));
    std::memcpy(&p.second, &bytes[i * kBytes + sizeof(V)], sizeof(I));
    return p;
  }
};

// MPI's definition, written out: the smaller (larger) value wins; equal
// values keep the lower index.
template <typename V, typename I>
std::pair<V, I> loc_expected(bool max, std::pair<V, I> a, std::pair<V, I> b) {
  if (a.first == b.first) return {a.first, a.second < b.second ? a.second : b.second};
  const bool a_first = max ? a.first > b.first : a.first < b.first;
  return a_first ? a : b;
}

template <typename V, typename I>
void check_loc(ArithElem elem) {
  SCOPED_TRACE("pair elem " + std::to_string(static_cast<int>(elem)));
  std::mt19937 rng(11);
  std::vector<std::pair<V, I>> a = {{V(5), I(3)},  {V(5), I(1)},   {V(-2), I(9)}, {V(7), I(0)},
                                    {V(-3), I(-4)}, {V(-3), I(2)}, {V(0), I(6)},  {std::numeric_limits<V>::lowest(), I(8)}};
  std::vector<std::pair<V, I>> b = {{V(5), I(1)},  {V(5), I(3)},   {V(4), I(0)},  {V(-7), I(2)},
                                    {V(-3), I(-5)}, {V(-3), I(2)}, {V(0), I(6)},  {std::numeric_limits<V>::max(), I(1)}};
  for (int i = 0; i < 3000; ++i) {  // few distinct values: many ties
    a.push_back({static_cast<V>(static_cast<int>(rng() % 7) - 3), static_cast<I>(rng() % 100)});
    b.push_back({static_cast<V>(static_cast<int>(rng() % 7) - 3), static_cast<I>(rng() % 100)});
  }
  for (const bool max : {false, true}) {
    const auto f = decode_function(abi::extended_function(max ? ArithOp::maxloc : ArithOp::minloc, elem));
    ASSERT_TRUE(f);
    ASSERT_EQ(elem_bytes(f->type), (Packed<V, I>::kBytes));
    const auto pa = Packed<V, I>::make(a), pb = Packed<V, I>::make(b);
    std::vector<std::byte> r(pa.size());
    reduce(*f, pa.data(), pb.data(), r.data(), a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const auto want = loc_expected(max, a[i], b[i]);
      const auto got = Packed<V, I>::at(r, i);
      ASSERT_EQ(got.first, want.first) << (max ? "MAXLOC" : "MINLOC") << " element " << i;
      ASSERT_EQ(got.second, want.second) << (max ? "MAXLOC" : "MINLOC") << " element " << i;
    }
    // In place on either operand.
    auto acc = pb;
    reduce(*f, pa.data(), acc.data(), acc.data(), a.size());
    EXPECT_EQ(acc, r);
    acc = pa;
    reduce(*f, acc.data(), pb.data(), acc.data(), a.size());
    EXPECT_EQ(acc, r);
  }
}

TEST(EmuArithExt, MinLocMaxLocEveryPairType) {
  check_loc<int32_t, int32_t>(ArithElem::i32_i32);
  check_loc<float, int32_t>(ArithElem::f32_i32);
  check_loc<double, int32_t>(ArithElem::f64_i32);
  check_loc<int64_t, int32_t>(ArithElem::i64_i32);
  check_loc<int16_t, int32_t>(ArithElem::i16_i32);
  check_loc<float, float>(ArithElem::f32_f32);
  check_loc<double, double>(ArithElem::f64_f64);
}

TEST(EmuArithExt, PackedPairSizes) {
  EXPECT_EQ(elem_bytes(decode_function(abi::extended_function(ArithOp::minloc, ArithElem::f64_i32))->type), 12u);
  EXPECT_EQ(elem_bytes(decode_function(abi::extended_function(ArithOp::minloc, ArithElem::i16_i32))->type), 6u);
  EXPECT_EQ(abi::data_type_bytes(abi::DataType::float64_int), 12u);
  EXPECT_EQ(abi::data_type_bytes(abi::DataType::int16_int), 6u);
}

TEST(EmuArithExt, RejectsWhatTheUnitDoesNotHave) {
  EXPECT_FALSE(decode_function(abi::extended_function(ArithOp::sum, ArithElem::f64_i32)));  // arithmetic on a pair
  EXPECT_FALSE(decode_function(abi::extended_function(ArithOp::minloc, ArithElem::i32)));   // loc on a scalar
  EXPECT_FALSE(decode_function(abi::kFnExtendedBase + (12u << 5)));                         // no op 12
  EXPECT_FALSE(decode_function(abi::kFnExtendedBase + 9));                                  // no element 9
  EXPECT_FALSE(decode_function(abi::kFnExtendedBase + 23));                                 // no pair 23
  EXPECT_FALSE(decode_function(abi::kFnNone));
  EXPECT_FALSE(decode_function(abi::kFnExtendedBase - 1));
}

}  // namespace
}  // namespace accl::emu::test
