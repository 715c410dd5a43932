// SPDX-License-Identifier: Apache-2.0
//
// Test data shared by the collective tests on the fake data plane: element i
// of rank r is r * 1000 + i (int32), so every result names where it came from.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace accl::fw::test {

inline constexpr uint64_t kSrc = 0x10000;
inline constexpr uint64_t kDst = 0x180000;

inline int32_t value(uint32_t rank, uint32_t i) { return static_cast<int32_t>(rank * 1000 + i); }

inline std::vector<int32_t> rank_data(uint32_t rank, uint32_t n) {
  std::vector<int32_t> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = value(rank, i);
  return v;
}

inline int32_t sum_over_ranks(uint32_t P, uint32_t i) {
  int32_t s = 0;
  for (uint32_t r = 0; r < P; ++r) s += value(r, i);
  return s;
}

// One parameter set: rank count and element count.
struct Case {
  uint32_t P;
  uint32_t count;
};

inline std::string case_name(const testing::TestParamInfo<Case>& info) {
  return "P" + std::to_string(info.param.P) + "_n" + std::to_string(info.param.count);
}

}  // namespace accl::fw::test
