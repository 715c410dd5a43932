// SPDX-License-Identifier: Apache-2.0
//
// UDP transport: datagrams with our own framing and a small reliability
// layer (udp/packet.hpp describes the protocol). Two sockets per transport,
// both on the configured address: the receive socket (the listening port)
// and the send socket (an ephemeral port), each with its own thread.
//
// The files of emu/src/udp/, one job each:
//   udp_transport.*    this transport: sockets, dialling, the send thread
//   receive_thread.cpp its receive thread: handshakes, delivery, acks
//   udp_link.hpp       UdpLink, the sending side of a link (window, resends)
//   udp_socket.hpp     UdpSocket, one socket and the test-only faults
//   packet.hpp         the datagram header, sequence order and checksums
// Their namespace has hidden visibility, as the one file's anonymous
// namespace was: nothing of it is exported from libaccl_emu.
#include "udp_transport.hpp"

#include "thread_name.hpp"
#include "transport_faults.hpp"

#include <accl/log.hpp>

#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace accl::emu {
namespace transport_detail {
namespace udp __attribute__((visibility("hidden"))) {

UdpTransport::UdpTransport(const TransportOptions& options, const UdpTuning& tuning)
    : tuning_(tuning), credential_(make_credential(options.job_secret)), check_secret_(!options.job_secret.empty()) {
  tuning_.datagram_payload =
      std::clamp<size_t>(tuning_.datagram_payload & ~size_t{63}, 64,
                         (kMaxDatagram - sizeof(PacketHeader) - sizeof(abi::WireHeader)) & ~size_t{63});
  // Selective acks cover 64 datagrams past the cumulative ack.
  tuning_.max_window = std::clamp<uint32_t>(tuning_.max_window, 1, 64);
  UniqueFd rx_fd = open_socket(options.bind);
  local_ = identity_address(bound_address(rx_fd.get()));
  UniqueFd tx_fd = open_socket(NetAddress{options.bind.ip, 0});
  int rcvbuf = 0;
  socklen_t len = sizeof rcvbuf;
  ::getsockopt(rx_fd.get(), SOL_SOCKET, SO_RCVBUF, &rcvbuf, &len);
  // Each datagram costs about its size plus bookkeeping in the buffer;
  // leave half for other senders.
  const size_t per_datagram = tuning_.datagram_payload + 4096;
  advertised_window_ = static_cast<uint32_t>(
      std::clamp<size_t>(static_cast<size_t>(rcvbuf) / 2 / per_datagram, 2, tuning_.max_window));
  rx_ = std::make_shared<UdpSocket>(std::move(rx_fd), UdpTuning{});  // replies are never faulted
  tx_ = std::make_shared<UdpSocket>(std::move(tx_fd), tuning_);
  wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_fd_) throw_errno("udp: eventfd");
  rx_buffer_.resize(kMaxDatagram + 1);
  tx_buffer_.resize(kMaxDatagram + 1);
  // The send thread runs from the start: connect() needs it for replies.
  // The receive thread ignores peers' handshakes until start() gives it
  // a sink.
  tx_thread_ = std::thread([this] { send_loop(); });
  rx_thread_ = std::thread([this] { receive_loop(); });
}

std::shared_ptr<Link> UdpTransport::connect(const NetAddress& peer, Clock::time_point deadline) {
  std::shared_ptr<PeerSlot> slot;
  {
    std::lock_guard lock(links_mutex_);
    if (stopped_) return nullptr;
    auto& entry = peers_[address_key(peer)];
    if (!entry) entry = std::make_shared<PeerSlot>();
    slot = entry;
    if (slot->link && slot->link->usable()) return slot->link;
  }
  std::unique_lock connecting(slot->connect_mutex, std::defer_lock);
  if (!connecting.try_lock_until(deadline)) return nullptr;
  std::shared_ptr<UdpLink> link;
  {
    std::lock_guard lock(links_mutex_);
    if (slot->link && slot->link->usable()) return slot->link;
    if (stopped_) return nullptr;
    uint32_t id = 0;
    while (id == 0 || outbound_.count(id)) id = static_cast<uint32_t>(random_());
    link = std::make_shared<UdpLink>(tx_, peer, id, tuning_);
    outbound_[id] = link;
  }
  const HelloIdentity identity = make_identity(kHelloUdp, local_, credential_);
  auto interval = tuning_.handshake_interval;
  HelloStatus status = kHelloRefused;
  bool answered = false;
  // The peer may not be up yet: a datagram to nobody is simply lost, so
  // repeat the hello until it answers or the deadline passes.
  while (!answered && !stopping_.load() && Clock::now() < deadline) {
    link->send_hello(identity);
    answered = link->wait_reply(std::min(deadline, Clock::now() + interval), status);
    interval = std::min(interval * 2, std::chrono::milliseconds(500));
  }
  std::lock_guard lock(links_mutex_);
  if (stopped_) return nullptr;
  if (answered && status == kHelloAccepted) {
    slot->link = link;
    ACCL_LOG_DEBUG("udp: connected {} -> {}", format_address(local_), format_address(peer));
    return link;
  }
  outbound_.erase(link->conn_id());
  if (answered && status != kHelloAccepted)
    ACCL_LOG_ERROR("udp: {} refused our connection: {}", format_address(peer), describe(status));
  else
    ACCL_LOG_INFO("udp: cannot reach {}: no handshake reply", format_address(peer));
  return nullptr;
}

void UdpTransport::stop() {
  std::vector<std::shared_ptr<UdpLink>> links;
  {
    std::lock_guard lock(links_mutex_);
    if (stopped_) return;
    stopped_ = true;
    for (auto& [id, link] : outbound_) links.push_back(link);
  }
  // Drain outbound links while the send thread still processes acks.
  const auto drain_deadline = Clock::now() + std::chrono::milliseconds(200);
  for (auto& link : links) link->close(drain_deadline);
  stopping_.store(true, std::memory_order_release);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t ignored = ::write(wake_fd_.get(), &one, sizeof one);
  if (rx_thread_.joinable()) rx_thread_.join();
  if (tx_thread_.joinable()) tx_thread_.join();
  std::lock_guard lock(links_mutex_);
  outbound_.clear();
}

UniqueFd UdpTransport::open_socket(const NetAddress& bind) {
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno("udp: socket");
  // Room for a full window from a few senders; the kernel caps it at
  // net.core.rmem_max, and the window we advertise follows what we got.
  int want = 8 << 20;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &want, sizeof want);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDBUF, &want, sizeof want);
  // Only the configured address: 0.0.0.0 is used only when asked for.
  sockaddr_in sa = to_sockaddr(bind);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    throw_errno("udp: bind " + format_address(bind));
  return fd;
}

void UdpTransport::send_loop() {
  name_this_thread("accl-udp-tx");
  bool busy = false;
  auto next_timer = Clock::now();
  while (!stopping_.load(std::memory_order_acquire)) {
    receive_burst(tx_->fd(), false, tx_buffer_, busy ? 2 : 20,
                  [this](const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes) {
                    handle_reply(src, h, body, bytes);
                  });
    const auto now = Clock::now();
    if (now >= next_timer) {
      busy = run_link_timers(now);
      next_timer = now + std::chrono::milliseconds(busy ? 2 : 20);
    }
  }
}

void UdpTransport::handle_reply(const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes) {
  auto link = find_outbound(h.conn_id, src);
  if (!link) return;  // not ours, or a link already forgotten
  switch (h.type) {
    case kAck:
      link->on_ack(h.seq, (uint64_t{h.msg_id} << 32) | h.offset);
      break;
    case kHelloReply:
      if (bytes == sizeof(HelloReplyBody)) {
        HelloReplyBody reply;
        std::memcpy(&reply, body, sizeof reply);
        link->on_hello_reply(reply);
      }
      break;
    case kClose:
      if (h.flags & kFromReceiver) link->on_close((h.flags & kAbort) != 0);
      break;
    default:
      break;
  }
}

bool UdpTransport::run_link_timers(Clock::time_point now) {
  std::vector<std::shared_ptr<UdpLink>> links;
  {
    std::lock_guard lock(links_mutex_);
    for (auto it = outbound_.begin(); it != outbound_.end();) {
      // Broken links are done: forget them (their owners keep the object).
      if (it->second->finished()) {
        it = outbound_.erase(it);
      } else {
        links.push_back(it->second);
        ++it;
      }
    }
  }
  bool busy = false;
  for (auto& link : links) busy |= link->on_timer(now);
  return busy;
}

}  // namespace udp
}  // namespace transport_detail

std::unique_ptr<Transport> make_udp_transport(const TransportOptions& options, const UdpTuning& tuning) {
  return std::make_unique<transport_detail::udp::UdpTransport>(options, tuning);
}

std::unique_ptr<Transport> make_udp_transport(const TransportOptions& options) {
  UdpTuning tuning;
  apply_udp_faults_from_environment(tuning);  // ACCL_EMU_FAULTS: datagram-level faults to recover from
  return make_udp_transport(options, tuning);
}

}  // namespace accl::emu
