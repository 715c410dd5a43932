// SPDX-License-Identifier: Apache-2.0
//
// Test data shared by the collective tests on the fake data plane: element i
// of rank r is r * 1000 + i (int32), so every result names where it came from.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fake_cclo.hpp"

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

// Runs the call built by `build(rank)` on every rank and expects success.
inline void run_all(FakeFabric& f, const std::function<CallBuilder(uint32_t)>& build) {
  std::vector<uint64_t> ids;
  for (uint32_t r = 0; r < f.size(); ++r) ids.push_back(f[r].submit(build(r)));
  for (uint32_t r = 0; r < f.size(); ++r) EXPECT_EQ(f[r].wait(ids[r]), std::optional<uint32_t>(0)) << "rank " << r;
}

// A configured fabric of P ranks for each parameter set.
class FabricPerCase : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    fabric_ = std::make_unique<FakeFabric>(GetParam().P);
    fabric_->configure();
  }
  FakeFabric& f() { return *fabric_; }
  uint32_t P() const { return GetParam().P; }
  uint32_t n() const { return GetParam().count; }
  // Every rank's source holds its rank_data of `elems` elements.
  void fill_sources(uint32_t elems) {
    for (uint32_t r = 0; r < P(); ++r) f()[r].write(kSrc, rank_data(r, elems));
  }

 private:
  std::unique_ptr<FakeFabric> fabric_;
};

}  // namespace accl::fw::test
