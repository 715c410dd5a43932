// SPDX-License-Identifier: Apache-2.0
//
// A driver over a FakeDevice, initialized on a communicator of `size` ranks.
#pragma once

#include "fake_device.hpp"

#include <accl/accl.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace accl::testing {

inline std::vector<rank_t> make_ranks(unsigned size, uint64_t max_segment = 0) {
  std::vector<rank_t> ranks;
  for (unsigned r = 0; r < size; ++r) {
    rank_t rank;
    rank.ip = "10.10.10." + std::to_string(r + 1);
    rank.port = 5500 + static_cast<int>(r);
    rank.session_id = static_cast<int>(r);
    rank.max_segment_size = max_segment;
    ranks.push_back(rank);
  }
  return ranks;
}

// A firmware that writes the capability word but advertises nothing beyond
// it (this project's rules; no capability word = public rules).
inline constexpr uint32_t kOurFirmware = abi::kCapValid;

struct Rig {
  std::shared_ptr<FakeDevice::State> state = std::make_shared<FakeDevice::State>();
  FakeDevice* device = nullptr;  // owned by accl
  std::unique_ptr<ACCL> accl;

  explicit Rig(unsigned size = 4, int rank = 2, uint32_t capabilities = kOurFirmware, bool initialize = true) {
    state->capabilities_after_reset = capabilities;
    auto dev = std::make_unique<FakeDevice>(state);
    device = dev.get();
    accl = std::make_unique<ACCL>(std::move(dev));
    if (initialize) accl->initialize(make_ranks(size), rank);
  }

  // The words of the only data call started since the last clear().
  CallWords last_call() {
    auto calls = state->data_calls();
    EXPECT_FALSE(calls.empty());
    return calls.empty() ? CallWords{} : calls.back().words;
  }
  size_t data_call_count() { return state->data_calls().size(); }
  void clear_log() {
    std::lock_guard lock(state->mutex);
    state->calls.clear();
    state->to_device.clear();
    state->from_device.clear();
    state->writes.clear();
  }
  uint32_t arith(dataType a, dataType b) { return accl->get_arithmetic_config_addr({a, b}); }
};

// Runs `body`, expects it to throw E, and returns the message.
template <typename E, typename F>
std::string message_of(F&& body) {
  try {
    body();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "unexpected exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception thrown";
  return {};
}

}  // namespace accl::testing
