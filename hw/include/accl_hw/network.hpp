// SPDX-License-Identifier: Apache-2.0
//
// Bringing up a card's network before the CCLO uses it, as public ACCL's
// accl_network_utils (initialize_accl, configure_vnx, configure_tcp) does for
// its two Alveo reference designs:
//
//  * UDP (xup_vitis_network_example's CMAC + network layer): RS-FEC as asked,
//    CMAC link up, this card's IP, the UDP socket table (one socket per peer
//    rank, index = rank), ARP discovery until every peer has answered.
//  * TCP (the 100 Gbps TCP/IP stack "POE" + tcp_session_handler): the stack's
//    TX/RX buffers, the POE kernel started with this card's IP and rank, a
//    listening port for every rank's port, then a connection to every other
//    rank; the session ids the stack hands out are what the communicator must
//    name (public ACCL drops them and assumes session = rank).
//
// The steps talk to the card only through the two ports below, so tests run
// them against a fake card and compare the exact register and kernel-argument
// sequence with the public utilities'. src/xrt_port.cpp implements the ports
// on XRT (xrt::ip, xrt::kernel) and runs the bring-up in create_xrt_device()
// (hw.hpp) when XrtOptions::network.design is not none. Errors are
// accl::hw::HwError (hw.hpp, which includes this header).
//
// Public ACCL synchronizes the ranks' steps with MPI barriers (or 3 s sleeps
// without MPI). This library has no MPI, so every step that needs a peer
// retries until it succeeds or NetworkPlan::timeout passes: ARP discovery is
// repeated until every peer answered, a refused connection is opened again
// (its peer may not listen yet). Every wait is bounded by that timeout and
// fails with an HwError naming the step, the rank and the cause.
#pragma once

#include <accl_hw/port.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace accl::hw {

enum class NetworkDesign { none, udp, tcp };
const char* to_string(NetworkDesign design);  // "none", "udp", "tcp"

// Instance names of the network kernels in public ACCL's xclbins
// (accl_network_utils::initialize_accl).
inline constexpr const char* kCmacIp = "cmac_0:{cmac_0}";
inline constexpr const char* kNetworkLayerIp = "networklayer:{networklayer_0}";
inline constexpr const char* kPoeKernel = "network_krnl:{poe_0}";
inline constexpr const char* kSessionHandlerKernel = "tcp_session_handler:{session_handler_0}";

// Bytes of each of the TCP stack's TX and RX buffers (public ACCL: 64 MiB).
inline constexpr size_t kTcpStackBufferBytes = size_t{64} << 20;

// Where one rank's card is reachable.
struct NetworkPeer {
  std::string ip;  // IPv4 dotted quad
  uint16_t port = 0;
};

// Public ACCL's addressing of a job's cards (generate_ranks for a cluster):
// rank r at 10.10.10.<r+1>, port 5500 + r. Throws HwError for a size outside
// 1..254 (the last octet).
std::vector<NetworkPeer> public_network_peers(int size);

// "10.10.10.1" -> 0x0A0A0A01 (the first octet is the high byte). Throws
// HwError naming `what` unless it is four decimal octets 0..255.
uint32_t encode_ipv4(const std::string& dotted, const std::string& what = "IP address");
std::string format_ipv4(uint32_t address);

struct NetworkPlan {
  NetworkDesign design = NetworkDesign::none;
  int rank = 0;
  std::vector<NetworkPeer> peers;  // every rank of the job, this one included, by rank
  bool rsfec = false;              // UDP: Reed-Solomon FEC on the CMAC (both ends must agree)
  // Longest wait of each step that depends on the link or on a peer: link
  // up, ARP discovery of every peer, one session-handler execution,
  // connecting to one peer.
  std::chrono::milliseconds timeout{60000};
  // Pause between polls of the link and between ARP rounds / connection
  // attempts (tests use 0).
  std::chrono::milliseconds retry_interval{200};
};

// ACCL_HW_NETWORK, ACCL_HW_RSFEC and ACCL_HW_NETWORK_TIMEOUT_MS for `rank`
// of `size` ranks addressed as public_network_peers(size). Throws HwError for
// a bad setting, or for udp/tcp with an unknown job size (size < 1).
NetworkPlan network_plan_from_environment(int rank, int size);

// Registers of an IP without a control protocol (the CMAC and the UDP
// network layer; xrt::ip on a card).
class IpRegisterPort {
 public:
  virtual ~IpRegisterPort() = default;
  virtual uint32_t read32(uint32_t offset) = 0;
  virtual void write32(uint32_t offset, uint32_t value) = 0;
};

// One argument of a kernel execution: a scalar of `bytes` bytes (the width
// of its C type in the HLS source; a card's port uses the width the xclbin
// declares), or a buffer the port allocated (value = its handle).
struct KernelArg {
  uint64_t value = 0;
  uint32_t bytes = 4;
  bool buffer = false;
  friend bool operator==(const KernelArg&, const KernelArg&) = default;
};

// A kernel with a control protocol (the POE and the session handler;
// xrt::kernel on a card). One execution at a time.
class KernelPort {
 public:
  virtual ~KernelPort() = default;
  // A device buffer in the memory the kernel's argument `arg` is connected
  // to, synchronized to the card; lives as long as the port. Returns its handle.
  virtual uint64_t allocate_buffer(int arg, size_t bytes) = 0;
  virtual void start(const std::vector<KernelArg>& args) = 0;
  // Waits at most `timeout` (>= 1 ms) for the running execution.
  virtual RunStatus wait(std::chrono::milliseconds timeout) = 0;
  // The kernel's AXI-Lite registers (results it leaves there).
  virtual uint32_t read32(uint32_t offset) = 0;
};

struct NetworkResult {
  // Per rank: the session the CCLO sends to it through (the communicator's
  // session word): UDP: its socket index (= rank); TCP: the stack's session
  // id of the connection. -1 for this rank (nothing is sent to itself).
  std::vector<int> session_ids;
  std::string summary;  // one line for the log: "udp: link up, 3 sockets, ARP 3/3 after 2 rounds"
};

// The UDP design's bring-up (accl_network_utils::configure_vnx).
NetworkResult bring_up_udp(IpRegisterPort& cmac, IpRegisterPort& network_layer, const NetworkPlan& plan);
// The TCP design's bring-up (initialize_accl's TCP branch + configure_tcp).
NetworkResult bring_up_tcp(KernelPort& poe, KernelPort& session_handler, const NetworkPlan& plan);

// Throws HwError unless `plan` is usable: a design, rank within peers,
// every peer a valid IPv4 address with a port, no address given twice.
void check_network_plan(const NetworkPlan& plan);

}  // namespace accl::hw
