// SPDX-License-Identifier: Apache-2.0
//
// The UDP design's network bring-up against a fake CMAC and network layer,
// compared access by access with what public ACCL's
// accl_network_utils::configure_vnx does through the vnx host library at the
// commit public ACCL pins (xup_vitis_network_example b010ff3). The expected
// sequences are written here from those public sources, one helper per
// public function, with the register offsets spelled out as they appear
// there (not taken from the code under test). Where this bring-up differs
// on purpose, the comment says so.
#include "network_fakes.hpp"

#include <accl/config.hpp>
#include <accl_hw/hw.hpp>
#include <accl_hw/network.hpp>

#include <gtest/gtest.h>

#include <cstdlib>

namespace hw = accl::hw;
using hwtest::Expect;
using hwtest::FakeIp;
using hwtest::Trace;

namespace {

constexpr uint32_t kMacLow = 0x5e000000;  // what the fake's MAC register holds before the bring-up

// A card's CMAC and network layer. The network layer starts with 16 UDP
// sockets; `arp_after[p]` lists the ARP entries (index, dotted IP) that
// exist from the p-th discovery pulse on (1-based).
struct Card {
  Trace trace;
  FakeIp cmac{"cmac", trace};
  FakeIp layer{"nl", trace};
  int pulses = 0;
  std::map<int, std::vector<std::pair<int, std::string>>> arp_after;

  Card() {
    layer.regs[0x0A10] = 16;
    layer.regs[0x0010] = kMacLow;
    layer.on_write = [this](uint32_t offset, uint32_t value) {
      if (offset != 0x1010 || value != 1) return;
      ++pulses;
      for (const auto& [index, ip] : arp_after[pulses]) add_arp(index, ip);
    };
  }
  // The ARP table's layout (vnx read_arp_table): valid bit 0 of byte
  // index%4 of word 0x1100 + index/4*4, IP in network byte order at
  // 0x1400 + 4*index, MAC at 0x1800 + 8*index (low word) and +4 (high word).
  void add_arp(int index, const std::string& ip) {
    const uint32_t i = static_cast<uint32_t>(index);
    layer.regs[0x1100 + i / 4 * 4] |= 1u << ((i % 4) * 8);
    layer.regs[0x1400 + 4 * i] = __builtin_bswap32(hw::encode_ipv4(ip));
    layer.regs[0x1800 + 8 * i] = 0x0a350000u + i;
    layer.regs[0x1800 + 8 * i + 4] = 0x0000u;
  }
};

// vnx::CMAC::get_rs_fec: one read of rsfec_config_enable (0x107C), "on" = 3;
// configure_vnx calls set_rs_fec only when it differs, which (at b010ff3)
// writes 3 or 0 there.
void expect_rs_fec(Expect& e, uint32_t now, bool want) {
  e.read("cmac", 0x107C, now);
  if ((now == 3) != want) e.write("cmac", 0x107C, want ? 3 : 0);
}

// vnx::CMAC::link_status: stat_rx_status (0x204) then stat_tx_status (0x200).
// configure_vnx looks once; this bring-up polls until rx_status (bit 0).
void expect_link_poll(Expect& e, uint32_t rx, uint32_t tx = 0) {
  e.read("cmac", 0x0204, rx);
  e.read("cmac", 0x0200, tx);
}

// vnx::Networklayer::update_ip_address: IP (0x18), gateway .1 (0x1C), then
// the MAC's low word (0x10) read and rewritten with the IP's last byte.
void expect_update_ip_address(Expect& e, uint32_t ip) {
  e.write("nl", 0x0018, ip);
  e.write("nl", 0x001C, (ip & 0xFFFFFF00u) + 1);
  e.read("nl", 0x0010, kMacLow);
  e.write("nl", 0x0010, (kMacLow & 0xFFFFFF00u) + (ip & 0xFFu));
}

// configure_vnx's configure_socket(i, ip_i, port_i, my_port, true) for every
// other rank, then vnx::Networklayer::populate_socket_table: read
// udp_number_sockets (0xA10); write their IP (0x810), their port (0x890),
// my port (0x910) and valid (0x990) of every socket, stride 8 (unused ones:
// vnx socket_t defaults, IP 0, ports 62781, invalid); then read back valid
// and, for valid sockets, IP, their port and my port.
void expect_socket_table(Expect& e, int rank, int size, uint32_t slots = 16) {
  struct S {
    uint32_t ip = 0, their = 62781, mine = 62781, valid = 0;
  };
  std::vector<S> s(slots);
  for (int r = 0; r < size; ++r)
    if (r != rank)
      s[static_cast<size_t>(r)] = S{0x0A0A0A01u + static_cast<uint32_t>(r), 5500u + static_cast<uint32_t>(r),
                                    5500u + static_cast<uint32_t>(rank), 1};
  e.read("nl", 0x0A10, slots);
  for (uint32_t i = 0; i < slots; ++i) {
    e.write("nl", 0x0810 + 8 * i, s[i].ip);
    e.write("nl", 0x0890 + 8 * i, s[i].their);
    e.write("nl", 0x0910 + 8 * i, s[i].mine);
    e.write("nl", 0x0990 + 8 * i, s[i].valid);
  }
  for (uint32_t i = 0; i < slots; ++i) {
    e.read("nl", 0x0990 + 8 * i, s[i].valid);
    if (s[i].valid == 0) continue;
    e.read("nl", 0x0810 + 8 * i, s[i].ip);
    e.read("nl", 0x0890 + 8 * i, s[i].their);
    e.read("nl", 0x0910 + 8 * i, s[i].mine);
  }
}

// vnx::Networklayer::arp_discovery: 0, 1, 0 to 0x1010; then read_arp_table:
// a valid word (0x1100 + i) before every fourth entry, and for each valid
// entry its MAC low word, MAC high word and IP. configure_vnx reads the
// first `size` entries after its second discovery; this bring-up reads all
// 256 after every discovery, until every peer is there.
void expect_arp_round(Expect& e, const Card& card) {
  e.write("nl", 0x1010, 0);
  e.write("nl", 0x1010, 1);
  e.write("nl", 0x1010, 0);
  auto reg = [&](uint32_t offset) {
    auto it = card.layer.regs.find(offset);
    return it == card.layer.regs.end() ? 0u : it->second;
  };
  uint32_t valid = 0;
  for (uint32_t i = 0; i < 256; ++i) {
    if (i % 4 == 0) e.read("nl", 0x1100 + i, valid = reg(0x1100 + i));
    if (((valid >> ((i % 4) * 8)) & 1u) == 0) continue;
    e.read("nl", 0x1800 + 8 * i, reg(0x1800 + 8 * i));
    e.read("nl", 0x1800 + 8 * i + 4, reg(0x1800 + 8 * i + 4));
    e.read("nl", 0x1400 + 4 * i, reg(0x1400 + 4 * i));
  }
}

void expect_same(const Trace& want, const Trace& got) {
  EXPECT_EQ(want.size(), got.size());
  EXPECT_EQ(hwtest::first_difference(want, got), "");
}

std::string error_of(Card& card, const hw::NetworkPlan& plan) {
  try {
    hw::bring_up_udp(card.cmac, card.layer, plan);
  } catch (const hw::HwError& e) {
    EXPECT_EQ(e.rank(), plan.rank);
    return e.what();
  }
  return "";
}

TEST(HwNetworkUdp, SequenceFollowsPublicConfigureVnx) {
  // Rank 1 of 3 (10.10.10.2:5501). RS-FEC is on and must go off; the link
  // comes up at the second poll; ARP answers arrive after the second pulse.
  Card card;
  card.cmac.regs[0x107C] = 3;
  int rx_polls = 0;
  card.cmac.on_read = [&](uint32_t offset) -> std::optional<uint32_t> {
    if (offset == 0x0204) return ++rx_polls >= 2 ? 0x3u : 0x0u;
    return std::nullopt;
  };
  card.arp_after[2] = {{1, "10.10.10.1"}, {3, "10.10.10.3"}};
  hw::NetworkPlan plan = hwtest::test_plan(hw::NetworkDesign::udp, 1, 3);
  const hw::NetworkResult result = hw::bring_up_udp(card.cmac, card.layer, plan);

  // Rebuild the model's history to know what each ARP round saw.
  Card replay;
  Expect e;
  expect_rs_fec(e, 3, false);
  expect_link_poll(e, 0x0);
  expect_link_poll(e, 0x3);
  expect_update_ip_address(e, 0x0A0A0A02);
  expect_socket_table(e, 1, 3);
  expect_arp_round(e, replay);  // pulse 1: nothing yet
  replay.add_arp(1, "10.10.10.1");
  replay.add_arp(3, "10.10.10.3");
  expect_arp_round(e, replay);  // pulse 2: both peers
  expect_same(e.lines, card.trace);

  // Socket r = rank r (public ACCL's session_id = rank); none to itself.
  EXPECT_EQ(result.session_ids, (std::vector<int>{0, -1, 2}));
  EXPECT_NE(result.summary.find("2 rounds"), std::string::npos) << result.summary;
}

TEST(HwNetworkUdp, RsFecAlreadyAsAskedIsLeftAlone) {
  Card card;
  card.cmac.regs[0x107C] = 3;
  card.cmac.regs[0x0204] = 1;
  card.arp_after[1] = {{1, "10.10.10.1"}};
  hw::NetworkPlan plan = hwtest::test_plan(hw::NetworkDesign::udp, 1, 2);
  plan.rsfec = true;
  hw::bring_up_udp(card.cmac, card.layer, plan);
  Expect e;
  expect_rs_fec(e, 3, true);  // no write
  expect_link_poll(e, 0x1);
  ASSERT_GE(card.trace.size(), 3u);
  expect_same(e.lines, Trace(card.trace.begin(), card.trace.begin() + 3));
}

TEST(HwNetworkUdp, RsFecTurnedOnWhenAsked) {
  Card card;
  card.cmac.regs[0x0204] = 1;
  card.arp_after[1] = {{2, "10.10.10.2"}};
  hw::NetworkPlan plan = hwtest::test_plan(hw::NetworkDesign::udp, 0, 2);
  plan.rsfec = true;
  hw::bring_up_udp(card.cmac, card.layer, plan);
  ASSERT_GE(card.trace.size(), 2u);
  EXPECT_EQ(card.trace[1], "cmac W 0x107c 0x3");
  EXPECT_EQ(card.cmac.regs[0x107C], 3u);
}

TEST(HwNetworkUdp, NoLinkFailsNamingTheFlagsAfterTheTimeout) {
  Card card;
  card.cmac.regs[0x0204] = 0x40;  // rx_local_fault, no rx_status
  card.cmac.regs[0x0200] = 0x1;   // tx_local_fault
  hw::NetworkPlan plan = hwtest::test_plan(hw::NetworkDesign::udp, 2, 3);
  const std::string what = error_of(card, plan);
  EXPECT_NE(what.find("UDP bring-up, rank 2 (10.10.10.3): CMAC link: no link within 200 ms"), std::string::npos)
      << what;
  EXPECT_NE(what.find("rx_local_fault"), std::string::npos) << what;
  EXPECT_NE(what.find("tx_local_fault"), std::string::npos) << what;
  for (const auto& line : card.trace)
    EXPECT_EQ(line.rfind("nl ", 0), std::string::npos) << "touched the layer: " << line;
}

TEST(HwNetworkUdp, TooFewSocketsForTheJobFails) {
  Card card;
  card.cmac.regs[0x0204] = 1;
  card.layer.regs[0x0A10] = 2;
  const std::string what = error_of(card, hwtest::test_plan(hw::NetworkDesign::udp, 0, 3));
  EXPECT_NE(what.find("socket table: the network layer has 2 UDP sockets and the job has 3 ranks"), std::string::npos)
      << what;
}

TEST(HwNetworkUdp, ForeignSocketCountIsRefusedBeforeWriting) {
  Card card;
  card.cmac.regs[0x0204] = 1;
  card.layer.regs[0x0A10] = 0xFFFFFFFF;  // not the pinned layer: its blocks hold 16 sockets
  const std::string what = error_of(card, hwtest::test_plan(hw::NetworkDesign::udp, 0, 3));
  EXPECT_NE(what.find("not the network layer of a public ACCL UDP xclbin"), std::string::npos) << what;
  EXPECT_EQ(card.trace.back(), "nl R 0xa10 -> 0xffffffff");
}

TEST(HwNetworkUdp, SocketThatDoesNotReadBackFails) {
  Card card;
  card.cmac.regs[0x0204] = 1;
  card.layer.on_read = [](uint32_t offset) -> std::optional<uint32_t> {
    if (offset == 0x0990) return 0u;  // socket 0's valid flag does not stick
    return std::nullopt;
  };
  const std::string what = error_of(card, hwtest::test_plan(hw::NetworkDesign::udp, 1, 2));
  EXPECT_NE(what.find("socket 0 reads back valid=0"), std::string::npos) << what;
  EXPECT_NE(what.find("after writing valid=1 10.10.10.1:5500 from port 5501"), std::string::npos) << what;
}

TEST(HwNetworkUdp, PeerMissingFromArpFailsNamingItAndTheTable) {
  Card card;
  card.cmac.regs[0x0204] = 1;
  card.arp_after[1] = {{1, "10.10.10.1"}};  // rank 2 never answers
  const std::string what = error_of(card, hwtest::test_plan(hw::NetworkDesign::udp, 1, 3));
  EXPECT_NE(what.find("ARP discovery: no ARP answer from rank 2 (10.10.10.3:5502)"), std::string::npos) << what;
  EXPECT_NE(what.find("[1] 10.10.10.1 01:00:35:0a:00:00"), std::string::npos) << what;
  EXPECT_GE(card.pulses, 1);
}

TEST(HwNetworkUdp, TwoEntriesForOneRankFail) {
  Card card;
  card.cmac.regs[0x0204] = 1;
  card.arp_after[1] = {{1, "10.10.10.1"}, {9, "10.10.10.1"}};
  const std::string what = error_of(card, hwtest::test_plan(hw::NetworkDesign::udp, 1, 2));
  EXPECT_NE(what.find("ARP check: rank 0 (10.10.10.1:5500) answers from 2 ARP entries"), std::string::npos) << what;
  EXPECT_EQ(card.pulses, 1);  // at once, not after the timeout
}

TEST(HwNetworkPlan, PublicAddressesAndTheirChecks) {
  const auto peers = hw::public_network_peers(3);
  ASSERT_EQ(peers.size(), 3u);
  EXPECT_EQ(peers[2].ip, "10.10.10.3");
  EXPECT_EQ(peers[2].port, 5502);
  EXPECT_THROW(hw::public_network_peers(0), hw::HwError);
  EXPECT_THROW(hw::public_network_peers(255), hw::HwError);
  EXPECT_EQ(hw::encode_ipv4("10.10.10.3"), 0x0A0A0A03u);
  EXPECT_EQ(hw::format_ipv4(0xC0A80001u), "192.168.0.1");
  for (const char* bad : {"10.10.10", "10.10.10.256", "10.10.10.1.", "a.b.c.d", "10..10.1", " 10.10.10.1"})
    EXPECT_THROW(hw::encode_ipv4(bad), hw::HwError) << bad;

  hw::NetworkPlan plan = hwtest::test_plan(hw::NetworkDesign::tcp, 0, 2);
  EXPECT_NO_THROW(hw::check_network_plan(plan));
  plan.peers[1].ip = plan.peers[0].ip;
  EXPECT_THROW(hw::check_network_plan(plan), hw::HwError);
  plan = hwtest::test_plan(hw::NetworkDesign::udp, 2, 2);
  EXPECT_THROW(hw::check_network_plan(plan), hw::HwError);
  plan.design = hw::NetworkDesign::none;
  plan.rank = 0;
  EXPECT_THROW(hw::check_network_plan(plan), hw::HwError);
}

TEST(HwNetworkPlan, FromTheSettings) {
  unsetenv("ACCL_HW_NETWORK");
  EXPECT_EQ(hw::network_plan_from_environment(0, 0).design, hw::NetworkDesign::none);  // default: as before
  setenv("ACCL_HW_NETWORK", "udp", 1);
  setenv("ACCL_HW_RSFEC", "on", 1);
  setenv("ACCL_HW_NETWORK_TIMEOUT_MS", "1500", 1);
  hw::NetworkPlan plan = hw::network_plan_from_environment(1, 4);
  EXPECT_EQ(plan.design, hw::NetworkDesign::udp);
  EXPECT_TRUE(plan.rsfec);
  EXPECT_EQ(plan.timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(plan.rank, 1);
  ASSERT_EQ(plan.peers.size(), 4u);
  EXPECT_EQ(plan.peers[3].ip, "10.10.10.4");
  try {
    hw::network_plan_from_environment(0, 0);
    ADD_FAILURE() << "no job size accepted";
  } catch (const hw::HwError& e) {
    EXPECT_NE(std::string(e.what()).find("needs the job's size"), std::string::npos) << e.what();
  }
  setenv("ACCL_HW_NETWORK", "rdma", 1);
  EXPECT_THROW(hw::network_plan_from_environment(0, 2), hw::HwError);
  EXPECT_THROW(hw::validate_settings(), hw::HwError);
  unsetenv("ACCL_HW_NETWORK");
  unsetenv("ACCL_HW_RSFEC");
  unsetenv("ACCL_HW_NETWORK_TIMEOUT_MS");
}

}  // namespace
