// SPDX-License-Identifier: Apache-2.0
//
// The simulator-session device's settings: the session address grammar and
// SimOptions from the environment. Built with or without ZeroMQ, so the hw
// layer's start-up check (validate_settings) always covers ACCL_SIM_*.
#include <accl/config.hpp>
#include <accl_hw/sim.hpp>

#include <cctype>

namespace accl::hw {
namespace {

constexpr unsigned kMaxPort = 65535;

bool host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
}

}  // namespace

SimAddress parse_sim_address(const std::string& value, const std::string& setting) {
  auto bad = [&](const std::string& why) {
    return SimError(setting + "=" + value + ": " + why + "; allowed: tcp://host:port (e.g. " + kDefaultSimAddress +
                    ", the port of rank 0's simulator instance)");
  };
  static const std::string kScheme = "tcp://";
  if (value.rfind(kScheme, 0) != 0) throw bad("not a tcp:// address");
  const std::string rest = value.substr(kScheme.size());
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) throw bad("no port");
  SimAddress a;
  a.host = rest.substr(0, colon);
  if (a.host.empty()) throw bad("no host");
  for (char c : a.host)
    if (!host_char(c)) throw bad("'" + a.host + "' is not a host name or IPv4 address");
  const std::string port = rest.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    throw bad("port '" + port + "' is not a number");
  const unsigned long p = std::stoul(port);
  if (p == 0 || p > kMaxPort) throw bad("port " + port + " is outside 1..65535");
  a.port = static_cast<unsigned>(p);
  return a;
}

std::string sim_endpoint(const SimAddress& rank0, int rank) {
  if (rank < 0) throw SimError("simulator session: rank " + std::to_string(rank) + " is negative");
  const unsigned long port = static_cast<unsigned long>(rank0.port) + static_cast<unsigned long>(rank);
  if (port > kMaxPort)
    throw SimError("simulator session at tcp://" + rank0.host + ":" + std::to_string(rank0.port) + ": rank " +
                   std::to_string(rank) + " would listen on port " + std::to_string(port) + ", beyond 65535");
  return "tcp://" + rank0.host + ":" + std::to_string(port);
}

SimOptions sim_options_from_environment(int rank, int size) {
  validate_settings();
  SimOptions o;
  o.address = config::get_string("ACCL_SIM_ADDRESS");
  o.rank = rank;
  o.size = size;
  o.reply_timeout = config::get_ms("ACCL_SIM_REPLY_TIMEOUT_MS");
  o.clock_mhz = config::get_real("ACCL_CCLO_CLOCK_MHZ");
  return o;
}

}  // namespace accl::hw
