// SPDX-License-Identifier: Apache-2.0
//
// The simulator-session device: one accl::Device talking to one instance of
// a public ACCL simulation session (cclo_emu, or the RTL simulation) over
// its ZeroMQ protocol (REQ/REP, one JSON object per message; the server is
// public ACCL's test/model/zmq/zmq_server.cpp). The instance of rank r
// listens on port P+r, P being the port of rank 0's instance, as public
// ACCL's drivers connect to it.
//
// It is CcloDevice (cclo_device.hpp) over a register port and a buffer port
// that speak that protocol: the session runs public ACCL's firmware, so the
// driver sees no capability word there (0x1FC0 reads 0) and must keep to the
// public firmware's rules (docs/architecture.md, "Differences from public
// ACCL").
//
// Memory: the session has no allocator of its own; the driver side picks
// device addresses (bank 0 from address 0, in 4 KiB steps, freed ranges
// reused) and host-memory addresses in the session's separate host address
// space. Host-only memory is shadowed: the host keeps the bytes, and every
// call pushes the host-only buffers it names to the session before it starts
// and pulls its host-only result buffer back when it ends.
//
// Every wait is bounded: one reply takes at most SimOptions::reply_timeout,
// and a session that is not there is a SimError at start-up ("no simulator
// session at tcp://...: ...").
#pragma once

#include <accl/device.hpp>
#include <accl_hw/hw.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace accl::hw {

// Everything the simulator-session device throws.
class SimError : public HwError {
 public:
  explicit SimError(const std::string& what, int rank = -1) : HwError(what, rank, "sim device") {}
};

// Default session of public ACCL (its drivers' and cclo_emu's start port).
inline constexpr const char* kDefaultSimAddress = "tcp://127.0.0.1:5500";

// "tcp://host:port", split.
struct SimAddress {
  std::string host;
  unsigned port = 0;
};
// Throws SimError "<setting>=<value>: ..." unless `value` is tcp://host:port
// with a port in 1..65535 (host: a name or an IPv4 address, no spaces).
SimAddress parse_sim_address(const std::string& value, const std::string& setting = "ACCL_SIM_ADDRESS");
// The endpoint of `rank`'s instance: port + rank. Throws SimError when that
// port passes 65535.
std::string sim_endpoint(const SimAddress& rank0, int rank);

struct SimOptions {
  std::string address = kDefaultSimAddress;  // rank 0's instance
  int rank = 0;                              // this device's instance: port + rank
  int size = 1;                              // instances in the session
  // Longest wait for one reply; also for the first one at start-up
  // (cclo_emu starts answering about 5 s after it was launched).
  std::chrono::milliseconds reply_timeout{30000};
  double clock_mhz = kDefaultClockMhz;  // PERFCNT tick rate (public cclo_emu: 4 ns ticks)
};

// ACCL_SIM_ADDRESS and ACCL_SIM_REPLY_TIMEOUT_MS (validated) for `rank` of
// `size` ranks.
SimOptions sim_options_from_environment(int rank, int size);

// Connects to the instance of options.rank and checks that it answers (an
// MMIO read of the hardware id). Throws SimError "no simulator session at
// tcp://host:port: <why>" when nothing answers within the reply timeout, or
// at once when the port refuses connections.
std::unique_ptr<Device> make_sim_device(const SimOptions& options);

// Whether libaccl_hw was built with ZeroMQ and a JSON library (without them
// make_sim_device always throws).
bool built_with_sim();

}  // namespace accl::hw
