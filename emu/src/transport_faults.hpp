// SPDX-License-Identifier: Apache-2.0
//
// Fault injection in the emulator's network (test and resilience work only),
// configured by one setting, ACCL_EMU_FAULTS:
//
//   seed=42,drop=0.01,dup=0.01,reorder=0.01,corrupt=0.01,delay_us=200,slow_us=0,
//   peer=127.0.0.1:5501,from=127.0.0.1:5500
//
// Every key is optional; empty or unset = no faults. drop/dup/reorder/corrupt
// are probabilities per message in [0, 1]; delay_us is a random extra delay
// in [0, delay_us] before each message, slow_us a fixed one (a slow peer);
// peer= limits the faults to links towards that CCLO, from= to links out of
// that CCLO (both ip:port as in communicator records).
//
// On inproc/shm/tcp links a Link decorator applies the faults per message.
// These transports are in order and trust the host, so a dropped, duplicated
// or reordered message shows up at the receiver as a sequence-number error or
// a receive timeout, and a corrupted payload is NOT detected (it is delivered
// as is, like a host bit flip would be). On UDP the probabilities map onto the
// transport's datagram-level faults, which its reliability layer repairs;
// only the delays stay message-level there. See docs/architecture.md.
#pragma once

#include "transport.hpp"
#include "transport_tuning.hpp"

#include <accl/config.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

namespace accl::emu {

struct FaultSpec {
  uint64_t seed = 0;
  double drop = 0;
  double dup = 0;
  double reorder = 0;
  double corrupt = 0;
  uint32_t delay_us = 0;
  uint32_t slow_us = 0;
  std::optional<NetAddress> peer;  // only links to this CCLO
  std::optional<NetAddress> from;  // only links out of this CCLO

  bool any() const;
  bool applies(const NetAddress& self, const NetAddress& to) const;
};

// Parses the grammar above; throws std::invalid_argument naming the bad key or value.
FaultSpec parse_faults(const std::string& text);
// ACCL_EMU_FAULTS (throws std::invalid_argument when malformed).
FaultSpec faults_from_environment();

// `link` (self -> peer) with the faults applied when `spec` targets it, else
// `link` itself. message_faults = false keeps only the delays (UDP, whose
// datagram-level faults stand in for the rest).
std::shared_ptr<Link> wrap_with_faults(std::shared_ptr<Link> link, const FaultSpec& spec, const NetAddress& self,
                                       const NetAddress& peer, bool message_faults);

// Maps drop/dup/reorder/corrupt onto UdpTuning's "one datagram in N" faults
// (N = round(1/p)). Those apply to every outgoing data datagram of the
// transport and are chosen by a hash of the datagram count: reproducible, but
// neither seed=, peer= nor from= can steer them.
// Header-only (like apply_udp_faults_from_environment): udp/udp_transport.cpp
// is also built on its own into tests/transport's library, without our .cpp.
inline void apply_udp_faults(UdpTuning& tuning, const FaultSpec& spec) {
  auto every = [](double p) -> uint32_t { return p <= 0 ? 0 : static_cast<uint32_t>(std::max(1.0, std::round(1.0 / p))); };
  tuning.drop_every = every(spec.drop);
  tuning.duplicate_every = every(spec.dup);
  tuning.reorder_every = every(spec.reorder);
  tuning.corrupt_every = every(spec.corrupt);
}

// The same from ACCL_EMU_FAULTS, reading only the four probabilities.
// Lenient on purpose: the full parser (parse_faults, run when a device's link
// table is created) reports malformed settings; here they are skipped.
inline void apply_udp_faults_from_environment(UdpTuning& tuning) {
  const auto text = config::get("ACCL_EMU_FAULTS");
  if (!text) return;
  FaultSpec spec;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t end = text->find(',', pos);
    if (end == std::string::npos) end = text->size();
    const std::string item = text->substr(pos, end - pos);
    pos = end + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    char* stop = nullptr;
    const double p = std::strtod(value.c_str(), &stop);
    if (value.empty() || *stop != '\0' || !(p >= 0 && p <= 1)) continue;
    if (key == "drop") spec.drop = p;
    else if (key == "dup") spec.dup = p;
    else if (key == "reorder") spec.reorder = p;
    else if (key == "corrupt") spec.corrupt = p;
  }
  apply_udp_faults(tuning, spec);
}

}  // namespace accl::emu
