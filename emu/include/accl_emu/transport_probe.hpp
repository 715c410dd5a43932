// SPDX-License-Identifier: Apache-2.0
//
// One network transport of the emulator on its own, without a CCLO: what
// accl-bench-pingpong --layer transport measures. A message is the 64-byte
// wire header, carrying a round number, plus a payload whose first word
// repeats it; the probe lands every message that arrives in one buffer and
// counts them.
#pragma once

#include <accl_emu/emulator.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace accl::emu {

class TransportProbe {
 public:
  using Clock = std::chrono::steady_clock;
  // Where a probe is reached; plain data, to hand to the peer process as bytes.
  struct Address {
    uint32_t ipv4 = 0;  // host byte order
    uint16_t port = 0;
  };

  // A started shm or tcp transport on 127.0.0.1 (any free port) for payloads
  // of up to `max_bytes`; `host_processes` as in EmuOptions. Throws
  // std::runtime_error for another kind or one not built in.
  TransportProbe(TransportKind kind, size_t max_bytes, unsigned host_processes);
  ~TransportProbe();
  TransportProbe(const TransportProbe&) = delete;
  TransportProbe& operator=(const TransportProbe&) = delete;

  Address local_address() const;
  // Links to the peer's probe; throws std::runtime_error when it cannot.
  void connect(const Address& peer, Clock::time_point deadline);
  // Between these a host thread drives the transport (as the emulated CCLO's
  // waiting host thread does): the shm reader threads leave the rings to
  // await()'s polls.
  void driver_enters();
  void driver_leaves();
  // Sends `max_bytes` bytes as round `round`; false when the transport failed.
  bool send(uint32_t round, Clock::time_point deadline);
  // Waits until `messages` have arrived in all: polling the transport if it
  // is polled (shm), else yielding the core to its reader threads (tcp).
  // false at the deadline or on a failure.
  bool await(uint64_t messages, Clock::time_point deadline);
  // The round number of the last message and the first word of its payload.
  uint32_t last_round() const;
  uint32_t first_word() const;
  // Stops the transport (also done by the destructor).
  void stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace accl::emu
