// SPDX-License-Identifier: Apache-2.0
//
// The TCP design's network bring-up: what public ACCL's
// accl_network_utils::initialize_accl (TCP branch) and configure_tcp do with
// the 100 Gbps TCP/IP stack ("POE", kernel network_krnl) and ACCL's
// tcp_session_handler kernel, step by step, with every wait bounded:
//
//   1. the stack's TX and RX buffers, 64 MiB each, synchronized to the card;
//   2. the POE started with (this card's IP, rank, IP, TX buffer, RX buffer),
//      and its IP and board-number registers read back (public ACCL only
//      logs them; we check them);
//   3. OPEN_PORT through the session handler for every rank's port, each
//      return code checked;
//   4. OPEN_CONNECTION to every other rank, return code and session id read
//      back. Public ACCL separates 3 and 4 by an MPI barrier and fails at the
//      first refusal; we retry a refused connection (its peer may not listen
//      yet) until the timeout. Public ACCL also drops the session ids the
//      stack returns and keeps session = rank; we return them, since they
//      are what the CCLO must send through.
//
// The session handler (kernels/plugins/tcp_session_handler) takes
// (ip, port_nr, session_id, return_code, operation) and leaves its results
// in AXI-Lite registers: the session id at 0x28, the return code at 0x30
// (1 = success, 0 = refused). Public ACCL passes host pointers for the two
// result arguments, which the kernel never reads for OPEN_PORT and
// OPEN_CONNECTION; we pass 0.
#include <accl/log.hpp>
#include <accl_hw/network.hpp>

#include "network_common.hpp"

namespace accl::hw {
namespace {

using network_detail::Deadline;
using network_detail::network_error;
using network_detail::peer_name;

// network_krnl (Vitis_with_100Gbps_TCP-IP kernel.xml): arguments and the
// registers they land in.
constexpr int kPoeArgTxBuffer = 3;  // axi00_ptr0
constexpr int kPoeArgRxBuffer = 4;  // axi01_ptr0
constexpr uint32_t kPoeIpRegister = 0x010;
constexpr uint32_t kPoeBoardRegister = 0x018;

// tcp_session_handler: result registers and operations (ACCL constants.hpp
// tcpSessionHandlerOperation).
constexpr uint32_t kSessionIdRegister = 0x28;
constexpr uint32_t kReturnCodeRegister = 0x30;
constexpr uint64_t kOpenPort = 1;
constexpr uint64_t kOpenConnection = 2;

std::vector<KernelArg> session_args(uint32_t ip, uint16_t port, uint64_t operation) {
  return {KernelArg{ip, 4, false}, KernelArg{port, 2, false}, KernelArg{0, 2, false}, KernelArg{0, 1, false},
          KernelArg{operation, 4, false}};
}

// One session-handler execution, bounded by its own timeout (a connection
// attempt started just before the connection's deadline still gets the time
// the stack needs to answer); returns its return code.
uint32_t run_session_handler(KernelPort& handler, const NetworkPlan& plan, const std::vector<KernelArg>& args,
                             const std::string& step) {
  const Deadline deadline(plan);
  handler.start(args);
  const RunStatus status = handler.wait(deadline.left());
  if (status.state == RunState::pending)
    throw network_error(plan, step,
                        "the session handler did not finish within " + deadline.limit() +
                            ": the TCP stack never answered (the kernel stays busy until the card is reset with "
                            "'xbutil reset')");
  if (status.state == RunState::failed) throw network_error(plan, step, "the session handler failed: " + status.detail);
  return handler.read32(kReturnCodeRegister) & 0xFFu;
}

void start_stack(KernelPort& poe, const NetworkPlan& plan, uint32_t ip) {
  const uint64_t tx = poe.allocate_buffer(kPoeArgTxBuffer, kTcpStackBufferBytes);
  const uint64_t rx = poe.allocate_buffer(kPoeArgRxBuffer, kTcpStackBufferBytes);
  // The POE keeps running for the life of the xclbin: started, never waited for.
  poe.start({KernelArg{ip, 4, false}, KernelArg{static_cast<uint64_t>(plan.rank), 4, false}, KernelArg{ip, 4, false},
             KernelArg{tx, 8, true}, KernelArg{rx, 8, true}});
  const uint32_t ip_seen = poe.read32(kPoeIpRegister);
  const uint32_t board_seen = poe.read32(kPoeBoardRegister);
  if (ip_seen != ip || board_seen != static_cast<uint32_t>(plan.rank))
    throw network_error(plan, "TCP stack start",
                        "the POE kernel holds IP " + format_ipv4(ip_seen) + " board " + std::to_string(board_seen) +
                            " after starting it with IP " + format_ipv4(ip) + " board " + std::to_string(plan.rank) +
                            ": not public ACCL's network_krnl");
}

void open_ports(KernelPort& handler, const NetworkPlan& plan) {
  // Every rank's port, this rank's included, as configure_tcp does.
  for (size_t r = 0; r < plan.peers.size(); ++r) {
    const NetworkPeer& p = plan.peers[r];
    const std::string step = "OPEN_PORT " + std::to_string(p.port) + " (port of rank " + std::to_string(r) + ")";
    const uint32_t code =
        run_session_handler(handler, plan, session_args(encode_ipv4(p.ip), p.port, kOpenPort), step);
    if (code == 0)
      throw network_error(plan, step, "the TCP stack refused to listen on it (return code 0; is it open already?)");
  }
}

int connect(KernelPort& handler, const NetworkPlan& plan, size_t r, int& attempts) {
  const NetworkPeer& p = plan.peers[r];
  const std::string step = "OPEN_CONNECTION to " + peer_name(plan, r);
  const Deadline deadline(plan);
  for (;;) {
    ++attempts;
    const uint32_t code =
        run_session_handler(handler, plan, session_args(encode_ipv4(p.ip), p.port, kOpenConnection), step);
    const uint32_t session = handler.read32(kSessionIdRegister) & 0xFFFFu;
    if (code != 0) return static_cast<int>(session);
    if (deadline.passed())
      throw network_error(plan, step,
                          "refused (return code 0) " + std::to_string(attempts) + " times in " + deadline.limit() +
                              " (rank " + std::to_string(r) + "'s card must run the TCP bring-up and listen on port " +
                              std::to_string(p.port) + ")");
    deadline.pause();
  }
}

}  // namespace

NetworkResult bring_up_tcp(KernelPort& poe, KernelPort& session_handler, const NetworkPlan& plan) {
  check_network_plan(plan);
  if (plan.design != NetworkDesign::tcp) throw network_error(plan, "plan", "bring_up_tcp called for another design");
  start_stack(poe, plan, encode_ipv4(plan.peers[static_cast<size_t>(plan.rank)].ip));
  open_ports(session_handler, plan);

  NetworkResult result;
  result.session_ids.assign(plan.peers.size(), -1);
  std::string sessions;
  for (size_t r = 0; r < plan.peers.size(); ++r) {
    if (static_cast<int>(r) == plan.rank) continue;
    int attempts = 0;
    result.session_ids[r] = connect(session_handler, plan, r, attempts);
    ACCL_LOG_DEBUG("network: rank {}: session {} to rank {} after {} attempt(s)", plan.rank, result.session_ids[r], r,
                   attempts);
    sessions += (sessions.empty() ? "" : ", ") + std::to_string(r) + ":" + std::to_string(result.session_ids[r]);
  }
  result.summary = "tcp: stack started, " + std::to_string(plan.peers.size()) + " ports open, sessions (rank:id) " +
                   (sessions.empty() ? "none" : sessions);
  return result;
}

}  // namespace accl::hw
