// SPDX-License-Identifier: Apache-2.0
//
// Test helpers: element types, reduction references, value patterns and
// result checks shared by every tests/core executable.
//
// Data is rank dependent and integer valued wherever a result must be exact,
// so SUM / PROD / MIN / MAX references are exact in every type, including
// float16 (all values and partial results stay below 2048 in magnitude).
#pragma once

#include <accl/accl.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iomanip>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace acclt {

using accl::dataType;
using accl::float16_t;
using accl::reduceFunction;

// --- element types ---------------------------------------------------------

template <typename T>
inline double to_double(T v) {
  if constexpr (std::is_same_v<T, float16_t>) return static_cast<double>(accl::half_to_float(v));
  else return static_cast<double>(v);
}

template <typename T>
inline T from_double(double d) {
  if constexpr (std::is_same_v<T, float16_t>) return accl::float_to_half(static_cast<float>(d));
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(std::llround(d));
  else return static_cast<T>(d);
}

// Value after a trip through the given type (exact for the integer-valued
// data the tests use; rounds for float16).
template <typename T>
inline double roundtrip(double d) { return to_double<T>(from_double<T>(d)); }

inline double fp16_roundtrip(double d) { return accl::half_to_float(accl::float_to_half(static_cast<float>(d))); }

std::string type_name(dataType t);
std::string op_name(reduceFunction f);
inline const std::vector<dataType>& all_types() {
  static const std::vector<dataType> v = {dataType::float16, dataType::float32, dataType::float64, dataType::int32,
                                          dataType::int64};
  return v;
}
inline const std::vector<reduceFunction>& all_ops() {
  static const std::vector<reduceFunction> v = {reduceFunction::SUM, reduceFunction::MAX, reduceFunction::MIN,
                                                reduceFunction::PROD};
  return v;
}
inline size_t elem_bytes(dataType t) { return accl::abi::data_type_bytes(t); }
inline bool is_float(dataType t) {
  return t == dataType::float16 || t == dataType::float32 || t == dataType::float64;
}

// Calls f.template operator()<T>() with the C++ type of `t`.
template <typename F>
decltype(auto) dispatch_type(dataType t, F&& f) {
  switch (t) {
    case dataType::float16: return f.template operator()<float16_t>();
    case dataType::float32: return f.template operator()<float>();
    case dataType::float64: return f.template operator()<double>();
    case dataType::int32: return f.template operator()<int32_t>();
    case dataType::int64: return f.template operator()<int64_t>();
    default: break;
  }
  throw std::invalid_argument("dispatch_type: unsupported type " + type_name(t));
}

inline double reduce_ref(reduceFunction f, double a, double b) {
  switch (f) {
    case reduceFunction::SUM: return a + b;
    case reduceFunction::MAX: return a > b ? a : b;
    case reduceFunction::MIN: return a < b ? a : b;
    case reduceFunction::PROD: return a * b;
    default: break;  // the extension functions have tests of their own (test_type_ops.cpp)
  }
  return 0;
}

// --- value patterns --------------------------------------------------------
//
// value(pattern, type, rank, index, seed): every rank gets different data.
enum class Pattern {
  unique,      // data movement: distinct per (rank, index); exact in every type
  sum,         // integers in [-5, 5]: sums over <= 8 ranks exact everywhere
  minmax,      // integers in [-100, 100]
  prod,        // values in {1, 2, -1, -2}: products over <= 8 ranks <= 256
  compressed,  // float32 in [1, 2) mostly not representable in fp16 (wire compression)
};
Pattern pattern_for(reduceFunction f);
double pattern_value(Pattern p, dataType t, unsigned rank, size_t index, uint32_t seed);

// A value no pattern ever produces: fills parts of buffers that must stay untouched.
inline constexpr double kSentinel = -1999.0;

// --- counts ----------------------------------------------------------------
enum class CountKind {
  one, c17, rxbuf, rxbuf_plus1, mib, eager_multi, eager_limit, eager_limit_plus1, rndzv_limit, rndzv_limit_plus1,
};
std::string count_name(CountKind c);
// rx_bytes: RX buffer size of the world; eager_bytes: its max eager size.
// rndzv_bytes: its max rendezvous (scratch buffer) size.
size_t count_of(CountKind c, dataType t, size_t rx_bytes, size_t eager_bytes = 0, size_t rndzv_bytes = 0);

// --- buffers ---------------------------------------------------------------
enum class Placement { device, host, mixed };  // mixed: inputs device, outputs host-only
std::string placement_name(Placement p);

template <typename T>
std::unique_ptr<accl::Buffer<T>> make_buffer(accl::ACCL& a, size_t length, bool host_only) {
  if (host_only) return a.create_buffer_host<T>(length);
  return a.create_buffer<T>(length);
}

// Fills [start, start+n) with gen(i) for i in [0, n).
template <typename T, typename G>
void fill(accl::Buffer<T>& b, size_t start, size_t n, G&& gen) {
  T* p = b.buffer();
  for (size_t i = 0; i < n; ++i) p[start + i] = from_double<T>(gen(i));
}
template <typename T>
void fill_sentinel(accl::Buffer<T>& b) {
  T* p = b.buffer();
  const T s = from_double<T>(kSentinel);
  for (size_t i = 0; i < b.length(); ++i) p[i] = s;
}

// Tolerance: |got - expected| <= atol + rtol * |expected|. {0,0} = exact.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

// Checks [start, start+n) of b against expected(i). `what` names the check
// (rank, call, region) in the failure message; lists the first few mismatches.
template <typename T, typename E>
::testing::AssertionResult check_range(const accl::Buffer<T>& b, size_t start, size_t n, E&& expected,
                                       const std::string& what, Tolerance tol = {}) {
  const T* p = b.buffer();
  size_t bad = 0;
  std::ostringstream os;
  os << std::setprecision(17);
  for (size_t i = 0; i < n; ++i) {
    const double got = to_double<T>(p[start + i]);
    const double exp = expected(i);
    const bool ok = (tol.rtol == 0 && tol.atol == 0)
                        ? got == exp
                        : std::fabs(got - exp) <= tol.atol + tol.rtol * std::fabs(exp);
    if (!ok) {
      if (bad < 6) os << "\n    [" << (start + i) << "] expected " << exp << " got " << got;
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << n << " elements wrong (elements "
                                       << start << ".." << (start + n) << ")" << os.str();
}

// Elements of b from `start` to the end must still hold the sentinel.
template <typename T>
::testing::AssertionResult check_sentinel(const accl::Buffer<T>& b, size_t start, const std::string& what) {
  if (start >= b.length()) return ::testing::AssertionSuccess();
  return check_range(b, start, b.length() - start, [](size_t) { return roundtrip<T>(kSentinel); },
                     what + " (must stay untouched)");
}

// Bounded relative error of fp16 wire compression plus fp16 arithmetic over
// `hops` roundings (positive data: each rounding adds at most 2^-11 relative).
inline Tolerance fp16_tolerance(unsigned hops) {
  return Tolerance{(hops + 1) * std::ldexp(1.0, -11) * 1.05, 1e-6};
}

// Reads an integer option: --name=value from argv (removed by the caller's
// main) or the environment variable; fallback otherwise.
struct Options {
  unsigned world_size = 0;    // --world-size=N
  std::string transport;      // --transport=inproc|shm|tcp|udp ("" = default)
  bool quick = false;         // --quick or ACCL_TEST_QUICK=1: smaller matrix (sanitizer builds)
};
Options& options();
// Strips our options from argv; call before ::testing::InitGoogleTest.
void parse_options(int* argc, char** argv);

}  // namespace acclt
