// SPDX-License-Identifier: Apache-2.0
//
// What the UDP and TCP bring-ups share: their errors and their bounded waits.
#pragma once

#include <accl_hw/hw.hpp>
#include <accl_hw/network.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

namespace accl::hw::network_detail {

// "UDP bring-up, rank 1 (10.10.10.2): <step>: <cause>". Call = "network
// bring-up" so logs and callers can tell it from a CCLO call.
inline HwError network_error(const NetworkPlan& plan, const std::string& step, const std::string& cause) {
  const std::string design = plan.design == NetworkDesign::tcp ? "TCP" : "UDP";
  std::string where = design + " bring-up, rank " + std::to_string(plan.rank);
  if (plan.rank >= 0 && static_cast<size_t>(plan.rank) < plan.peers.size())
    where += " (" + plan.peers[static_cast<size_t>(plan.rank)].ip + ")";
  return HwError(where + ": " + step + ": " + cause, plan.rank, "network bring-up");
}

inline std::string peer_name(const NetworkPlan& plan, size_t r) {
  return "rank " + std::to_string(r) + " (" + plan.peers[r].ip + ":" + std::to_string(plan.peers[r].port) + ")";
}

// One bounded wait: started when constructed, over after plan.timeout.
class Deadline {
 public:
  explicit Deadline(const NetworkPlan& plan)
      : plan_(plan), end_(std::chrono::steady_clock::now() + plan.timeout) {}
  bool passed() const { return std::chrono::steady_clock::now() >= end_; }
  // Time left, at least 1 ms (a port wait of 0 would mean "forever").
  std::chrono::milliseconds left() const {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - std::chrono::steady_clock::now());
    return ms < std::chrono::milliseconds(1) ? std::chrono::milliseconds(1) : ms;
  }
  // Sleeps one retry interval (never past the end).
  void pause() const {
    auto nap = std::min(plan_.retry_interval, left());
    if (plan_.retry_interval.count() > 0) std::this_thread::sleep_for(nap);
  }
  std::string limit() const { return std::to_string(plan_.timeout.count()) + " ms (ACCL_HW_NETWORK_TIMEOUT_MS)"; }

 private:
  const NetworkPlan& plan_;
  std::chrono::steady_clock::time_point end_;
};

}  // namespace accl::hw::network_detail
