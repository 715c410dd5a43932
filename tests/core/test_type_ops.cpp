// SPDX-License-Identifier: Apache-2.0
//
// The extension types and ops end to end (driver, firmware, emulator):
// allreduce, reduce and reduce_scatter of every 8/16/32/64-bit signed and
// unsigned integer type with SUM..LXOR and of every packed pair type with
// MINLOC/MAXLOC, on 1-4 ranks, eager and rendezvous sizes, each element
// checked against a fold computed here. Also: what the driver reports
// (supports) and refuses (undefined function of a type).
#include "common/world.hpp"

#include <accl/accl.hpp>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace acclt {
namespace {

using accl::ACCL;
using accl::dataType;
using accl::reduceFunction;

// One type x function: how rank r's element i looks and how two elements
// combine (MPI's definition, written out independently of the emulator).
struct Case {
  std::string name;
  dataType type;
  reduceFunction func;
  size_t bytes;
  std::function<void(unsigned rank, size_t i, std::byte* out)> make;
  std::function<void(const std::byte* a, const std::byte* b, std::byte* out)> combine;
};

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x9E3779B97F4A7C15ull;
  return x ^ (x >> 29);
}

template <typename T>
T combine_integers(reduceFunction f, T a, T b) {
  const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (f) {
    case reduceFunction::SUM: return static_cast<T>(ua + ub);
    case reduceFunction::PROD: return static_cast<T>(ua * ub);
    case reduceFunction::MAX: return a < b ? b : a;
    case reduceFunction::MIN: return b < a ? b : a;
    case reduceFunction::BAND: return static_cast<T>(ua & ub);
    case reduceFunction::BOR: return static_cast<T>(ua | ub);
    case reduceFunction::BXOR: return static_cast<T>(ua ^ ub);
    case reduceFunction::LAND: return static_cast<T>(a != 0 && b != 0);
    case reduceFunction::LOR: return static_cast<T>(a != 0 || b != 0);
    case reduceFunction::LXOR: return static_cast<T>((a != 0) != (b != 0));
    default: ADD_FAILURE() << "not an integer function"; return 0;
  }
}

template <typename T>
void add_integer_cases(std::vector<Case>& cases, const char* type_name, dataType type) {
  const reduceFunction funcs[] = {reduceFunction::SUM,  reduceFunction::MAX, reduceFunction::MIN,
                                  reduceFunction::PROD, reduceFunction::BAND, reduceFunction::BOR,
                                  reduceFunction::BXOR, reduceFunction::LAND, reduceFunction::LOR,
                                  reduceFunction::LXOR};
  const char* names[] = {"SUM", "MAX", "MIN", "PROD", "BAND", "BOR", "BXOR", "LAND", "LOR", "LXOR"};
  for (size_t k = 0; k < std::size(funcs); ++k) {
    const reduceFunction f = funcs[k];
    Case c;
    c.name = std::string(type_name) + " " + names[k];
    c.type = type;
    c.func = f;
    c.bytes = sizeof(T);
    c.make = [](unsigned rank, size_t i, std::byte* out) {
      using L = std::numeric_limits<T>;
      const T edges[] = {L::min(), L::max(), static_cast<T>(L::max() - 1), 0, 1, static_cast<T>(-1)};
      T v;
      if (i % 4 == 0) v = edges[(i / 4 + rank) % std::size(edges)];  // wrap-around and sign edges
      else if (i % 7 == rank % 7) v = 0;                               // zeros for the logical ops
      else v = static_cast<T>(mix(i * 131 + rank));
      std::memcpy(out, &v, sizeof v);
    };
    c.combine = [f](const std::byte* a, const std::byte* b, std::byte* out) {
      T x, y;
      std::memcpy(&x, a, sizeof x);
      std::memcpy(&y, b, sizeof y);
      const T r = combine_integers(f, x, y);
      std::memcpy(out, &r, sizeof r);
    };
    cases.push_back(std::move(c));
  }
}

template <typename V, typename I>
void add_pair_cases(std::vector<Case>& cases, const char* type_name, dataType type) {
  for (const bool max : {false, true}) {
    Case c;
    c.name = std::string(type_name) + (max ? " MAXLOC" : " MINLOC");
    c.type = type;
    c.func = max ? reduceFunction::MAXLOC : reduceFunction::MINLOC;
    c.bytes = sizeof(V) + sizeof(I);
    c.make = [](unsigned rank, size_t i, std::byte* out) {
      // Few distinct values (many ties across ranks), negative ones too;
      // indices that are not the rank, so ties are decided by them.
      const V v = static_cast<V>(static_cast<int>(mix(i * 31 + rank) % 5) - 2);
      const I index = static_cast<I>(static_cast<int>((rank * 7 + i) % 11) - 3);
      std::memcpy(out, &v, sizeof v);
      std::memcpy(out + sizeof(V), &index, sizeof index);
    };
    c.combine = [max](const std::byte* a, const std::byte* b, std::byte* out) {
      V va, vb;
      I ia, ib;
      std::memcpy(&va, a, sizeof va);
      std::memcpy(&ia, a + sizeof(V), sizeof ia);
      std::memcpy(&vb, b, sizeof vb);
      std::memcpy(&ib, b + sizeof(V), sizeof ib);
      V v = va;
      I index = ia;
      if (va == vb) index = ia < ib ? ia : ib;
      else if (max ? vb > va : vb < va) v = vb, index = ib;
      std::memcpy(out, &v, sizeof v);
      std::memcpy(out + sizeof(V), &index, sizeof index);
    };
    cases.push_back(std::move(c));
  }
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> c;
    add_integer_cases<int8_t>(c, "int8", dataType::int8);
    add_integer_cases<uint8_t>(c, "uint8", dataType::uint8);
    add_integer_cases<int16_t>(c, "int16", dataType::int16);
    add_integer_cases<uint16_t>(c, "uint16", dataType::uint16);
    add_integer_cases<int32_t>(c, "int32", dataType::int32);
    add_integer_cases<uint32_t>(c, "uint32", dataType::uint32);
    add_integer_cases<int64_t>(c, "int64", dataType::int64);
    add_integer_cases<uint64_t>(c, "uint64", dataType::uint64);
    add_pair_cases<int32_t, int32_t>(c, "int32_int", dataType::int32_int);
    add_pair_cases<float, int32_t>(c, "float32_int", dataType::float32_int);
    add_pair_cases<double, int32_t>(c, "float64_int", dataType::float64_int);
    add_pair_cases<int64_t, int32_t>(c, "int64_int", dataType::int64_int);
    add_pair_cases<int16_t, int32_t>(c, "int16_int", dataType::int16_int);
    add_pair_cases<float, float>(c, "float32_float32", dataType::float32_float32);
    add_pair_cases<double, double>(c, "float64_float64", dataType::float64_float64);
    return c;
  }();
  return cases;
}

// Element `i` of the fold over all ranks.
std::vector<std::byte> folded(const Case& c, unsigned ranks, size_t i) {
  std::vector<std::byte> acc(c.bytes), next(c.bytes);
  c.make(0, i, acc.data());
  for (unsigned r = 1; r < ranks; ++r) {
    c.make(r, i, next.data());
    c.combine(acc.data(), next.data(), acc.data());
  }
  return acc;
}

void expect_elements(const Case& c, const std::byte* got, unsigned ranks, size_t first, size_t n, const char* call,
                     unsigned rank) {
  for (size_t i = 0; i < n; ++i) {
    const auto want = folded(c, ranks, first + i);
    ASSERT_EQ(std::memcmp(got + i * c.bytes, want.data(), c.bytes), 0)
        << call << " " << c.name << " on " << ranks << " ranks: rank " << rank << " element " << first + i;
  }
}

// Eager (one element, a few dozen) and rendezvous (above 1 KiB) sizes.
std::vector<size_t> counts() { return options().quick ? std::vector<size_t>{1, 41} : std::vector<size_t>{1, 41, 1500}; }

void run_case_on(World& w, const Case& c) {
  const unsigned P = w.size();
  w.run([&](unsigned rank, ACCL& a) {
    ASSERT_TRUE(a.supports(c.func, c.type)) << c.name;
    for (size_t n : counts()) {
      auto src = a.create_buffer<std::byte>(n * P, c.type);
      auto dst = a.create_buffer<std::byte>(n * P, c.type);
      for (size_t i = 0; i < n * P; ++i) c.make(rank, i, src->buffer() + i * c.bytes);
      a.allreduce(*src, *dst, static_cast<unsigned>(n), c.func);
      expect_elements(c, dst->buffer(), P, 0, n, "allreduce", rank);
      const unsigned root = P - 1;
      std::memset(dst->buffer(), 0, dst->size());
      a.reduce(*src, *dst, static_cast<unsigned>(n), root, c.func);
      if (rank == root) expect_elements(c, dst->buffer(), P, 0, n, "reduce", rank);
      std::memset(dst->buffer(), 0, dst->size());
      a.reduce_scatter(*src, *dst, static_cast<unsigned>(n), c.func);
      expect_elements(c, dst->buffer(), P, rank * n, n, "reduce_scatter", rank);
    }
  });
}

TEST(TypeOps, EveryTypeAndFunctionOnOneToFourRanks) {
  for (unsigned P : {1u, 2u, 3u, 4u}) {
    World& w = World::get(P);
    for (const Case& c : all_cases()) {
      SCOPED_TRACE(c.name + " on " + std::to_string(P) + " ranks");
      run_case_on(w, c);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(TypeOps, DriverReportsAndRefuses) {
  World& w = World::get(2);
  ACCL& a = w.at(0);
  EXPECT_TRUE(a.supports(reduceFunction::BXOR));
  EXPECT_TRUE(a.supports(reduceFunction::MINLOC));
  EXPECT_TRUE(a.supports(reduceFunction::MAX, dataType::uint16));
  EXPECT_TRUE(a.supports(reduceFunction::LAND, dataType::int64));
  EXPECT_FALSE(a.supports(reduceFunction::BAND, dataType::float32)) << "no bitwise ops on floats";
  EXPECT_FALSE(a.supports(reduceFunction::SUM, dataType::float64_int)) << "a pair has MINLOC/MAXLOC only";
  EXPECT_FALSE(a.supports(reduceFunction::MINLOC, dataType::int32)) << "MINLOC needs a pair";
  // The driver refuses an undefined function of a type before the device sees it.
  auto s = a.create_buffer<std::byte>(4, dataType::int32_int);
  auto d = a.create_buffer<std::byte>(4, dataType::int32_int);
  try {
    a.combine(4, reduceFunction::SUM, *s, *s, *d);
    ADD_FAILURE() << "SUM of a pair type was accepted";
  } catch (const accl::ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("not defined"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace acclt
