// SPDX-License-Identifier: Apache-2.0
//
// The UDP design's network bring-up: what public ACCL's
// accl_network_utils::configure_vnx does through xup_vitis_network_example's
// host library (vnx::CMAC, vnx::Networklayer) at the commit public ACCL pins
// (b010ff3), register by register, with its one-shot checks turned into
// bounded waits:
//
//   1. RS-FEC on or off as asked (CMAC::get_rs_fec / set_rs_fec);
//   2. the CMAC link up (CMAC::link_status; public ACCL looks once, we poll);
//   3. this card's IP, gateway and MAC (Networklayer::update_ip_address);
//   4. the socket table: socket r = rank r, written in full and read back
//      (configure_socket + populate_socket_table; public ACCL ignores the
//      read-back, we compare it with what we wrote);
//   5. ARP discovery until every other rank's IP is in the ARP table once
//      (arp_discovery + check_arp; public ACCL pulses discovery twice, 3 s
//      apart, reads the first `size` of 256 entries and accepts size - 1
//      hosts; we read all entries and require every peer).
#include <accl/log.hpp>
#include <accl_hw/network.hpp>

#include "network_common.hpp"

#include <cstdio>
#include <map>

namespace accl::hw {
namespace {

using network_detail::Deadline;
using network_detail::network_error;
using network_detail::peer_name;

// CMAC kernel (vnx cmac.hpp, from Ethernet/template.xml).
constexpr uint32_t kCmacTxStatus = 0x0200;
constexpr uint32_t kCmacRxStatus = 0x0204;
constexpr uint32_t kCmacRsFecEnable = 0x107C;
constexpr uint32_t kRsFecOn = 0x3;  // vnx: enable = 3 means "on" (TX and RX FEC)

// Network layer kernel (vnx networklayer.hpp, NetLayers/kernel.xml).
constexpr uint32_t kMacAddress = 0x0010;
constexpr uint32_t kIpAddress = 0x0018;
constexpr uint32_t kGateway = 0x001C;
constexpr uint32_t kSocketTheirIp = 0x0810;
constexpr uint32_t kSocketTheirPort = 0x0890;
constexpr uint32_t kSocketMyPort = 0x0910;
constexpr uint32_t kSocketValid = 0x0990;
constexpr uint32_t kSocketStride = 8;
constexpr uint32_t kSocketCount = 0x0A10;
// Each socket field's block holds 16 entries before the next field's starts.
constexpr uint32_t kSocketSlots = (kSocketTheirPort - kSocketTheirIp) / kSocketStride;
constexpr uint16_t kUnusedSocketPort = 62781;  // vnx socket_t's default port
constexpr uint32_t kArpDiscovery = 0x1010;
constexpr uint32_t kArpValid = 0x1100;  // one byte per entry, bit 0; four entries per word
constexpr uint32_t kArpIp = 0x1400;     // one word per entry, network byte order
constexpr uint32_t kArpMac = 0x1800;    // two words per entry, low word first
constexpr int kArpEntries = 256;        // the table's size: the IP block is 0x400 bytes

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

// The flags of the CMAC's status registers that explain a link that is down.
std::string describe_link(uint32_t rx, uint32_t tx) {
  static constexpr std::pair<int, const char*> rx_bits[] = {
      {0, "rx_status"},       {1, "rx_aligned"},      {2, "rx_misaligned"},    {3, "rx_aligned_err"},
      {4, "rx_hi_ber"},       {5, "rx_remote_fault"}, {6, "rx_local_fault"},   {14, "rx_got_signal_os"}};
  std::string set;
  for (auto [bit, name] : rx_bits)
    if ((rx >> bit) & 1u) set += (set.empty() ? "" : " ") + std::string(name);
  std::string out = "RX status " + hex(rx) + " (set: " + (set.empty() ? "none" : set) + ")";
  if (tx & 1u) out += ", tx_local_fault";
  return out;
}

void set_rs_fec(IpRegisterPort& cmac, const NetworkPlan& plan) {
  const bool on = cmac.read32(kCmacRsFecEnable) == kRsFecOn;  // CMAC::get_rs_fec
  if (on == plan.rsfec) return;
  ACCL_LOG_INFO("network: rank {}: turning RS-FEC {}", plan.rank, plan.rsfec ? "on" : "off");
  cmac.write32(kCmacRsFecEnable, plan.rsfec ? kRsFecOn : 0);  // CMAC::set_rs_fec
}

void wait_for_link(IpRegisterPort& cmac, const NetworkPlan& plan) {
  const Deadline deadline(plan);
  int polls = 0;
  for (;;) {
    const uint32_t rx = cmac.read32(kCmacRxStatus);  // CMAC::link_status: RX first, then TX
    const uint32_t tx = cmac.read32(kCmacTxStatus);
    ++polls;
    if (rx & 1u) return;
    if (deadline.passed())
      throw network_error(plan, "CMAC link",
                          "no link within " + deadline.limit() + " (" + std::to_string(polls) + " polls; last " +
                              describe_link(rx, tx) + "); check the cable and that both ends use RS-FEC " +
                              (plan.rsfec ? "on" : "off") + " (ACCL_HW_RSFEC)");
    deadline.pause();
  }
}

void set_address(IpRegisterPort& layer, uint32_t ip) {
  // Networklayer::update_ip_address: IP, gateway .1 of its /24, and the
  // MAC's last byte = the IP's last byte so every card's MAC differs.
  layer.write32(kIpAddress, ip);
  layer.write32(kGateway, (ip & 0xFFFFFF00u) + 1);
  const uint32_t mac_low = layer.read32(kMacAddress);
  layer.write32(kMacAddress, (mac_low & 0xFFFFFF00u) | (ip & 0xFFu));
}

struct Socket {
  uint32_t their_ip = 0;
  uint32_t their_port = kUnusedSocketPort;
  uint32_t my_port = kUnusedSocketPort;
  uint32_t valid = 0;
};

void fill_socket_table(IpRegisterPort& layer, const NetworkPlan& plan) {
  const uint32_t slots = layer.read32(kSocketCount);
  if (slots > kSocketSlots)
    throw network_error(plan, "socket table",
                        "the network layer reports " + std::to_string(slots) + " UDP sockets, but public ACCL's " +
                            "network layer (xup_vitis_network_example b010ff3) has room for " +
                            std::to_string(kSocketSlots) + ": not the network layer of a public ACCL UDP xclbin");
  if (slots < plan.peers.size())
    throw network_error(plan, "socket table",
                        "the network layer has " + std::to_string(slots) + " UDP sockets and the job has " +
                            std::to_string(plan.peers.size()) + " ranks (one socket per rank)");
  const uint16_t my_port = plan.peers[static_cast<size_t>(plan.rank)].port;
  std::vector<Socket> table(slots);
  for (size_t r = 0; r < plan.peers.size(); ++r) {
    if (static_cast<int>(r) == plan.rank) continue;  // configure_socket for every other rank
    table[r] = Socket{encode_ipv4(plan.peers[r].ip), plan.peers[r].port, my_port, 1};
  }
  // populate_socket_table: every slot the hardware has, unused ones invalid.
  for (uint32_t i = 0; i < slots; ++i) {
    layer.write32(kSocketTheirIp + i * kSocketStride, table[i].their_ip);
    layer.write32(kSocketTheirPort + i * kSocketStride, table[i].their_port);
    layer.write32(kSocketMyPort + i * kSocketStride, table[i].my_port);
    layer.write32(kSocketValid + i * kSocketStride, table[i].valid);
  }
  // Its read-back, in its order; a slot that does not hold what was written
  // means the registers are not a socket table.
  for (uint32_t i = 0; i < slots; ++i) {
    Socket got;
    got.valid = layer.read32(kSocketValid + i * kSocketStride);
    if (got.valid != 0) {
      got.their_ip = layer.read32(kSocketTheirIp + i * kSocketStride);
      got.their_port = layer.read32(kSocketTheirPort + i * kSocketStride);
      got.my_port = layer.read32(kSocketMyPort + i * kSocketStride);
    }
    const Socket& want = table[i];
    const bool same =
        (got.valid != 0) == (want.valid != 0) &&
        (want.valid == 0 || (got.their_ip == want.their_ip && (got.their_port & 0xFFFF) == want.their_port &&
                             (got.my_port & 0xFFFF) == want.my_port));
    if (!same)
      throw network_error(plan, "socket table",
                          "socket " + std::to_string(i) + " reads back valid=" + std::to_string(got.valid) + " " +
                              format_ipv4(got.their_ip) + ":" + std::to_string(got.their_port) + " from port " +
                              std::to_string(got.my_port) + " after writing valid=" + std::to_string(want.valid) +
                              " " + format_ipv4(want.their_ip) + ":" + std::to_string(want.their_port) +
                              " from port " + std::to_string(want.my_port));
  }
}

struct ArpEntry {
  uint32_t ip = 0;   // host order
  uint64_t mac = 0;  // first byte on the wire in the low byte
};

std::string format_mac(uint64_t mac) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", static_cast<unsigned>(mac & 0xFF),
                static_cast<unsigned>((mac >> 8) & 0xFF), static_cast<unsigned>((mac >> 16) & 0xFF),
                static_cast<unsigned>((mac >> 24) & 0xFF), static_cast<unsigned>((mac >> 32) & 0xFF),
                static_cast<unsigned>((mac >> 40) & 0xFF));
  return buf;
}

// Networklayer::read_arp_table over the whole table, in its register order:
// a valid word before each group of four entries, then per valid entry the
// MAC's low word, its high word and the IP.
std::map<int, ArpEntry> read_arp_table(IpRegisterPort& layer) {
  std::map<int, ArpEntry> table;
  uint32_t valid = 0;
  for (int i = 0; i < kArpEntries; ++i) {
    const uint32_t u = static_cast<uint32_t>(i);
    if (i % 4 == 0) valid = layer.read32(kArpValid + u);
    if (((valid >> ((u % 4) * 8)) & 1u) == 0) continue;
    const uint64_t mac_low = layer.read32(kArpMac + u * 8);
    const uint64_t mac_high = layer.read32(kArpMac + u * 8 + 4);
    const uint32_t ip = layer.read32(kArpIp + u * 4);
    // The IP register holds the address in network byte order.
    table[i] = ArpEntry{__builtin_bswap32(ip), ((mac_high << 32) | mac_low) & 0xFFFFFFFFFFFFull};
  }
  return table;
}

std::string describe_arp(const std::map<int, ArpEntry>& table) {
  if (table.empty()) return "the ARP table is empty";
  std::string out = "ARP table:";
  for (const auto& [index, e] : table)
    out += " [" + std::to_string(index) + "] " + format_ipv4(e.ip) + " " + format_mac(e.mac);
  return out;
}

void discover_peers(IpRegisterPort& layer, const NetworkPlan& plan, int& rounds) {
  const Deadline deadline(plan);
  for (;;) {
    // Networklayer::arp_discovery: a 0-1-0 pulse asks every address of the subnet.
    layer.write32(kArpDiscovery, 0);
    layer.write32(kArpDiscovery, 1);
    layer.write32(kArpDiscovery, 0);
    ++rounds;
    const auto table = read_arp_table(layer);
    std::string missing;
    for (size_t r = 0; r < plan.peers.size(); ++r) {
      if (static_cast<int>(r) == plan.rank) continue;
      const uint32_t ip = encode_ipv4(plan.peers[r].ip);
      std::vector<int> at;
      for (const auto& [index, e] : table)
        if (e.ip == ip) at.push_back(index);
      // Two entries for one rank: two cards answer for its address (check_arp's "double entry").
      if (at.size() > 1)
        throw network_error(plan, "ARP check",
                            peer_name(plan, r) + " answers from " + std::to_string(at.size()) +
                                " ARP entries: two cards use its address; " + describe_arp(table));
      if (at.empty()) missing += (missing.empty() ? "" : ", ") + peer_name(plan, r);
    }
    if (missing.empty()) return;
    if (deadline.passed())
      throw network_error(plan, "ARP discovery",
                          "no ARP answer from " + missing + " after " + std::to_string(rounds) + " rounds in " +
                              deadline.limit() + " (their cards must run the UDP bring-up on the same network); " +
                              describe_arp(table));
    deadline.pause();
  }
}

}  // namespace

NetworkResult bring_up_udp(IpRegisterPort& cmac, IpRegisterPort& network_layer, const NetworkPlan& plan) {
  check_network_plan(plan);
  if (plan.design != NetworkDesign::udp) throw network_error(plan, "plan", "bring_up_udp called for another design");
  set_rs_fec(cmac, plan);
  wait_for_link(cmac, plan);
  set_address(network_layer, encode_ipv4(plan.peers[static_cast<size_t>(plan.rank)].ip));
  fill_socket_table(network_layer, plan);
  int rounds = 0;
  discover_peers(network_layer, plan, rounds);

  NetworkResult result;
  for (size_t r = 0; r < plan.peers.size(); ++r)
    result.session_ids.push_back(static_cast<int>(r) == plan.rank ? -1 : static_cast<int>(r));
  result.summary = "udp: link up (RS-FEC " + std::string(plan.rsfec ? "on" : "off") + "), " +
                   std::to_string(plan.peers.size() - 1) + " sockets, every peer in the ARP table after " +
                   std::to_string(rounds) + " round" + (rounds == 1 ? "" : "s");
  return result;
}

}  // namespace accl::hw
