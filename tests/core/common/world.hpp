// SPDX-License-Identifier: Apache-2.0
//
// In-process test world: N emulated CCLOs with initialized drivers
// (accl::emu::create_local_world), created once and reused by every test
// that asks for the same size and configuration. Each rank's part of a test
// runs on a thread of its own; all ranks are released together.
//
// A world in which a test failed is rebuilt before the next test uses it, so
// one failure (stale messages, sequence numbers) does not cascade.
#pragma once

#include "types.hpp"

#include <accl/accl.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace acclt {

struct WorldConfig {
  std::string name = "default";   // cache key together with the size
  accl::InitOptions init{};       // 16 x 1 KiB RX buffers, eager <= 1 KiB, rendezvous above
  std::string transport;          // "" = --transport option, else the environment's default
  std::chrono::microseconds timeout{0};  // 0 = the driver default (ACCL_TIMEOUT_MS)
};

// Eager-only configuration: rendezvous disabled, so every message is eager
// and messages above one RX buffer travel as several segments.
WorldConfig eager_only_config();
// The PMPI layer's defaults: 16 x 64 KiB RX buffers, eager up to 64 KiB,
// 4 MiB scratch buffers (an eager message fits one RX buffer).
WorldConfig large_rx_config();

class World {
 public:
  // The cached world of this size and configuration (created on first use,
  // recreated after a failed test).
  static World& get(unsigned size, const WorldConfig& config = {});
  // A newly created world (replacing the cached one), for tests that leave
  // state behind (communicators, timeouts).
  static World& fresh(unsigned size, const WorldConfig& config);
  // Destroys every cached world.
  static void discard_all();

  World(unsigned size, const WorldConfig& config);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  unsigned size() const { return static_cast<unsigned>(ranks_.size()); }
  accl::ACCL& at(unsigned r) { return *ranks_.at(r); }
  const WorldConfig& config() const { return config_; }
  // RX buffer size in bytes as configured in the devices' exchange memory.
  size_t rx_buffer_bytes();

  // Runs body(rank, accl) on one thread per rank and waits for all of them.
  // An exception on a rank becomes a test failure naming that rank. A rank
  // still running after the watchdog (4 x timeout + 15 s) means a hang: the
  // process prints what is stuck and aborts.
  void run(const std::function<void(unsigned rank, accl::ACCL& a)>& body);
  // Same, on the ranks listed only.
  void run_on(const std::vector<unsigned>& ranks, const std::function<void(unsigned rank, accl::ACCL& a)>& body);

  // Rebuild this world before its next use.
  void poison() { poisoned_ = true; }
  bool poisoned() const { return poisoned_; }
  std::chrono::milliseconds watchdog() const;

 private:
  WorldConfig config_;
  std::vector<std::unique_ptr<accl::ACCL>> ranks_;
  bool poisoned_ = false;
};

// Name of the running test ("Suite.Name/param") for messages.
std::string current_test_name();

}  // namespace acclt
