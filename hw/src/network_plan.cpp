// SPDX-License-Identifier: Apache-2.0
//
// The network bring-up's plan: which design, which addresses, which limits
// (accl_hw/network.hpp), from the settings or from the caller.
#include <accl/config.hpp>
#include <accl_hw/hw.hpp>
#include <accl_hw/network.hpp>

#include <set>

namespace accl::hw {

const char* to_string(NetworkDesign design) {
  switch (design) {
    case NetworkDesign::none: return "none";
    case NetworkDesign::udp: return "udp";
    case NetworkDesign::tcp: return "tcp";
  }
  return "?";
}

std::vector<NetworkPeer> public_network_peers(int size) {
  if (size < 1 || size > 254)
    throw HwError("network bring-up: " + std::to_string(size) +
                  " ranks do not fit public ACCL's addresses 10.10.10.1 .. 10.10.10.254");
  std::vector<NetworkPeer> peers;
  for (int r = 0; r < size; ++r)
    peers.push_back(NetworkPeer{"10.10.10." + std::to_string(r + 1), static_cast<uint16_t>(5500 + r)});
  return peers;
}

uint32_t encode_ipv4(const std::string& dotted, const std::string& what) {
  uint32_t address = 0;
  int octets = 0;
  size_t pos = 0;
  while (octets < 4) {
    size_t end = pos;
    while (end < dotted.size() && dotted[end] >= '0' && dotted[end] <= '9') ++end;
    const size_t digits = end - pos;
    if (digits == 0 || digits > 3) break;
    const unsigned value = static_cast<unsigned>(std::stoul(dotted.substr(pos, digits)));
    if (value > 255) break;
    address = (address << 8) | value;
    ++octets;
    pos = end;
    if (octets < 4) {
      if (pos >= dotted.size() || dotted[pos] != '.') break;
      ++pos;
    }
  }
  if (octets != 4 || pos != dotted.size())
    throw HwError(what + " '" + dotted + "' is not an IPv4 address (four numbers 0..255 separated by dots)");
  return address;
}

std::string format_ipv4(uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 0xFF) + "." + std::to_string((a >> 8) & 0xFF) +
         "." + std::to_string(a & 0xFF);
}

void check_network_plan(const NetworkPlan& plan) {
  if (plan.design == NetworkDesign::none) throw HwError("network bring-up: no design chosen (ACCL_HW_NETWORK=none)");
  if (plan.rank < 0 || static_cast<size_t>(plan.rank) >= plan.peers.size())
    throw HwError("network bring-up: rank " + std::to_string(plan.rank) + " is not among the " +
                      std::to_string(plan.peers.size()) + " ranks to connect",
                  plan.rank, "network bring-up");
  std::set<uint32_t> addresses;
  for (size_t r = 0; r < plan.peers.size(); ++r) {
    const std::string what = "rank " + std::to_string(r) + "'s IP address";
    const uint32_t ip = encode_ipv4(plan.peers[r].ip, what);
    if (plan.peers[r].port == 0)
      throw HwError("network bring-up: rank " + std::to_string(r) + " has no port", plan.rank, "network bring-up");
    // One card per address: the socket table and the ARP check tell ranks apart by it.
    if (!addresses.insert(ip).second)
      throw HwError("network bring-up: " + what + " " + plan.peers[r].ip + " is another rank's too", plan.rank,
                    "network bring-up");
  }
}

NetworkPlan network_plan_from_environment(int rank, int size) {
  NetworkPlan plan;
  try {
    const std::string design = config::get_choice("ACCL_HW_NETWORK");
    plan.design = design == "udp" ? NetworkDesign::udp : design == "tcp" ? NetworkDesign::tcp : NetworkDesign::none;
    plan.rsfec = config::get_bool("ACCL_HW_RSFEC");
    plan.timeout = std::chrono::milliseconds(config::get_int("ACCL_HW_NETWORK_TIMEOUT_MS"));
  } catch (const config::SettingError& e) {
    throw HwError(e.what());
  }
  plan.rank = rank;
  if (plan.design == NetworkDesign::none) return plan;
  if (size < 1)
    throw HwError("ACCL_HW_NETWORK=" + std::string(to_string(plan.design)) +
                  ": the network bring-up needs the job's size to address every rank, and the caller did not say it");
  plan.peers = public_network_peers(size);
  return plan;
}

}  // namespace accl::hw
