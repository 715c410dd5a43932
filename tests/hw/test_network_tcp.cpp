// SPDX-License-Identifier: Apache-2.0
//
// The TCP design's network bring-up against a fake POE (network_krnl) and
// session handler, compared step by step with what public ACCL's
// accl_network_utils does: initialize_accl's TCP branch (two 64 MiB network
// buffers) and configure_tcp (buffers synced, network_krnl started with
// (ip, rank, ip, tx, rx), its registers 0x10/0x18 read, OPEN_PORT for every
// rank, OPEN_CONNECTION for every other rank, return code at 0x30 and
// session at 0x28 read after each run). The expected sequences are written
// here from those public sources; the session handler's contract (operation
// codes 1 = OPEN_PORT, 2 = OPEN_CONNECTION, return code 1 = success) from
// ACCL's kernels/plugins/tcp_session_handler and constants.hpp.
#include "network_fakes.hpp"

#include <accl_hw/hw.hpp>
#include <accl_hw/network.hpp>

#include <gtest/gtest.h>

namespace hw = accl::hw;
using hwtest::Expect;
using hwtest::FakeKernel;
using hwtest::Trace;

namespace {

// A card's POE and session handler. The POE latches its scalar arguments
// where an HLS kernel keeps them (ip_addr 0x10, board_number 0x18). The
// session handler answers OPEN_PORT with `port_code` and OPEN_CONNECTION to
// IP x with the next of `answers[x]` (return code, session), then {1, 100 +
// last octet of x}; with refuse_connections, always {0, 0}.
struct Card {
  Trace trace;
  FakeKernel poe{"poe", trace};
  FakeKernel handler{"sh", trace};
  uint32_t port_code = 1;
  bool refuse_connections = false;
  std::map<uint32_t, std::vector<std::pair<uint32_t, uint32_t>>> answers;

  Card() {
    poe.on_start = [](const std::vector<hw::KernelArg>& args, std::map<uint32_t, uint32_t>& regs) {
      regs[0x10] = static_cast<uint32_t>(args.at(0).value);
      regs[0x18] = static_cast<uint32_t>(args.at(1).value);
    };
    handler.on_start = [this](const std::vector<hw::KernelArg>& args, std::map<uint32_t, uint32_t>& regs) {
      const uint32_t ip = static_cast<uint32_t>(args.at(0).value);
      if (args.at(4).value == 1) {
        regs[0x30] = port_code;
      } else if (args.at(4).value == 2) {
        auto& queue = answers[ip];
        std::pair<uint32_t, uint32_t> a{1, 100 + (ip & 0xFF)};
        if (refuse_connections) {
          a = {0, 0};
        } else if (!queue.empty()) {
          a = queue.front();
          queue.erase(queue.begin());
        }
        regs[0x30] = a.first;
        regs[0x28] = a.second;
      }
    };
  }
};

// initialize_accl: tx_buf_network then rx_buf_network, 64 MiB each (here in
// the memory of the POE arguments they are bound to, axi00_ptr0 = 3 and
// axi01_ptr0 = 4; public ACCL names bank 6); configure_tcp syncs both, then
// network_krnl(ip, rank, ip, tx, rx) and reads registers 0x010 and 0x018.
void expect_stack_start(Expect& e, uint32_t ip, uint32_t rank) {
  e.line("poe alloc arg3 67108864");
  e.line("poe alloc arg4 67108864");
  e.line("poe start " + hwtest::hx(ip) + "/4 " + hwtest::hx(rank) + "/4 " + hwtest::hx(ip) + "/4 buf1 buf2");
  e.read("poe", 0x010, ip);
  e.read("poe", 0x018, rank);
}

// configure_tcp: session_krnl(ip_i, port_i, &session, &ret, op), run.wait(),
// then the return code (0x30) and, after OPEN_CONNECTION, the session (0x28).
// The two result arguments are host pointers in public ACCL (the kernel
// never reads them for these operations); this bring-up passes 0.
void expect_session_run(Expect& e, uint32_t ip, uint32_t port, uint32_t op, uint32_t code,
                        std::optional<uint32_t> session = std::nullopt) {
  e.line("sh start " + hwtest::hx(ip) + "/4 " + hwtest::hx(port) + "/2 0x0/2 0x0/1 " + hwtest::hx(op) + "/4");
  e.line("sh wait");
  e.read("sh", 0x30, code);
  if (session) e.read("sh", 0x28, *session);
}

void expect_same(const Trace& want, const Trace& got) {
  EXPECT_EQ(want.size(), got.size());
  EXPECT_EQ(hwtest::first_difference(want, got), "");
}

std::string error_of(Card& card, const hw::NetworkPlan& plan) {
  try {
    hw::bring_up_tcp(card.poe, card.handler, plan);
  } catch (const hw::HwError& e) {
    EXPECT_EQ(e.rank(), plan.rank);
    return e.what();
  }
  return "";
}

TEST(HwNetworkTcp, SequenceFollowsPublicConfigureTcp) {
  // Rank 1 of 3. Rank 0 refuses the first connection (not listening yet:
  // public ACCL's MPI barrier is a retry here); the stack hands out sessions
  // 7 and 3, which are what the communicator must name.
  Card card;
  card.answers[0x0A0A0A01] = {{0, 0}, {1, 7}};
  card.answers[0x0A0A0A03] = {{1, 3}};
  const hw::NetworkResult result =
      hw::bring_up_tcp(card.poe, card.handler, hwtest::test_plan(hw::NetworkDesign::tcp, 1, 3));

  Expect e;
  expect_stack_start(e, 0x0A0A0A02, 1);
  // OPEN_PORT (1) for every rank's port, this rank's included.
  expect_session_run(e, 0x0A0A0A01, 5500, 1, 1);
  expect_session_run(e, 0x0A0A0A02, 5501, 1, 1);
  expect_session_run(e, 0x0A0A0A03, 5502, 1, 1);
  // OPEN_CONNECTION (2) to every other rank.
  expect_session_run(e, 0x0A0A0A01, 5500, 2, 0, 0);  // refused: again
  expect_session_run(e, 0x0A0A0A01, 5500, 2, 1, 7);
  expect_session_run(e, 0x0A0A0A03, 5502, 2, 1, 3);
  expect_same(e.lines, card.trace);

  EXPECT_EQ(result.session_ids, (std::vector<int>{7, -1, 3}));
  EXPECT_NE(result.summary.find("sessions (rank:id) 0:7, 2:3"), std::string::npos) << result.summary;
  ASSERT_EQ(card.poe.buffer_bytes.size(), 2u);
}

TEST(HwNetworkTcp, RefusedPortFailsNamingIt) {
  Card card;
  card.port_code = 0;
  const std::string what = error_of(card, hwtest::test_plan(hw::NetworkDesign::tcp, 0, 2));
  EXPECT_NE(what.find("TCP bring-up, rank 0 (10.10.10.1): OPEN_PORT 5500 (port of rank 0): the TCP stack refused"),
            std::string::npos)
      << what;
  EXPECT_EQ(card.trace.back(), "sh R 0x30 -> 0x0");  // nothing after the refusal
}

TEST(HwNetworkTcp, HandlerThatNeverFinishesFailsWithoutAnotherStart) {
  Card card;
  card.handler.on_wait = [] { return hw::RunStatus{hw::RunState::pending, ""}; };
  const std::string what = error_of(card, hwtest::test_plan(hw::NetworkDesign::tcp, 0, 2));
  EXPECT_NE(what.find("OPEN_PORT 5500 (port of rank 0): the session handler did not finish within 200 ms"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("xbutil reset"), std::string::npos) << what;
  EXPECT_EQ(card.trace.back(), "sh wait");
}

TEST(HwNetworkTcp, HandlerFailureCarriesTheRuntimeDetail) {
  Card card;
  card.handler.on_wait = [] { return hw::RunStatus{hw::RunState::failed, "ended in XRT state ABORT"}; };
  const std::string what = error_of(card, hwtest::test_plan(hw::NetworkDesign::tcp, 1, 2));
  EXPECT_NE(what.find("the session handler failed: ended in XRT state ABORT"), std::string::npos) << what;
}

TEST(HwNetworkTcp, PeerThatNeverAcceptsFailsAfterTheTimeout) {
  Card card;
  card.refuse_connections = true;
  hw::NetworkPlan plan = hwtest::test_plan(hw::NetworkDesign::tcp, 0, 2);
  plan.retry_interval = std::chrono::milliseconds(1);
  const std::string what = error_of(card, plan);
  EXPECT_NE(what.find("OPEN_CONNECTION to rank 1 (10.10.10.2:5501): refused (return code 0)"), std::string::npos)
      << what;
  EXPECT_NE(what.find("in 200 ms (ACCL_HW_NETWORK_TIMEOUT_MS)"), std::string::npos) << what;
}

TEST(HwNetworkTcp, ForeignPoeIsRefusedBeforeAnySession) {
  Card card;
  card.poe.on_start = [](const std::vector<hw::KernelArg>&, std::map<uint32_t, uint32_t>& regs) {
    regs[0x10] = 0;  // does not keep its arguments where network_krnl does
  };
  const std::string what = error_of(card, hwtest::test_plan(hw::NetworkDesign::tcp, 0, 2));
  EXPECT_NE(what.find("TCP stack start: the POE kernel holds IP 0.0.0.0 board 0 after starting it with IP 10.10.10.1"),
            std::string::npos)
      << what;
  for (const auto& line : card.trace) EXPECT_EQ(line.rfind("sh ", 0), std::string::npos) << line;
}

TEST(HwNetworkTcp, SingleRankOpensItsPortAndConnectsNowhere) {
  Card card;
  const hw::NetworkResult result =
      hw::bring_up_tcp(card.poe, card.handler, hwtest::test_plan(hw::NetworkDesign::tcp, 0, 1));
  Expect e;
  expect_stack_start(e, 0x0A0A0A01, 0);
  expect_session_run(e, 0x0A0A0A01, 5500, 1, 1);
  expect_same(e.lines, card.trace);
  EXPECT_EQ(result.session_ids, (std::vector<int>{-1}));
}

TEST(HwNetworkTcp, WrongDesignIsRefused) {
  Card card;
  EXPECT_THROW(hw::bring_up_tcp(card.poe, card.handler, hwtest::test_plan(hw::NetworkDesign::udp, 0, 2)), hw::HwError);
  EXPECT_TRUE(card.trace.empty());
}

}  // namespace
