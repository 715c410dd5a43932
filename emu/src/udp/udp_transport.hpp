// SPDX-License-Identifier: Apache-2.0
//
// The UDP transport (udp_transport.cpp describes it): its sockets, the
// links it dials and its send thread; the receive thread is in
// receive_thread.cpp.
#pragma once

#include "packet.hpp"
#include "udp_link.hpp"
#include "udp_socket.hpp"

#include "hello_protocol.hpp"
#include "job_secret.hpp"
#include "net_address.hpp"
#include "socket_address.hpp"
#include "socket_io.hpp"
#include "timed_mutex.hpp"
#include "transport_tuning.hpp"

#include <accl/log.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace accl::emu::transport_detail {
namespace udp __attribute__((visibility("hidden"))) {

// Receive state of one inbound link (receive thread only).
struct InboundLink {
  sockaddr_in src{};
  uint32_t conn_id = 0;
  NetAddress from;
  uint32_t expected_seq = 0;
  uint32_t expected_msg = 0;
  Clock::time_point last_heard;
  bool received_data = false;
  size_t since_ack = 0;
  bool ack_pending = false;

  bool in_message = false;
  abi::WireHeader header{};
  ReceiveTicket ticket;
  std::byte* dst = nullptr;
  size_t got = 0;

  // Datagrams that arrived before a missing one (whole datagrams), by seq.
  std::map<uint32_t, std::vector<std::byte>> early;
};

class UdpTransport final : public Transport {
 public:
  UdpTransport(const TransportOptions& options, const UdpTuning& tuning);

  ~UdpTransport() override { stop(); }

  std::string name() const override { return "udp"; }
  NetAddress local_address() const override { return local_; }

  void start(Sink& sink) override {
    std::lock_guard lock(links_mutex_);
    if (sink_.load() != nullptr || stopped_) throw std::logic_error("udp transport: start() called twice or after stop()");
    sink_.store(&sink, std::memory_order_release);
  }

  std::shared_ptr<Link> connect(const NetAddress& peer, Clock::time_point deadline) override;

  void stop() override;

 private:
  struct PeerSlot {
    TimedMutex connect_mutex;
    std::shared_ptr<UdpLink> link;  // guarded by links_mutex_
  };
  using InboundKey = std::pair<uint64_t, uint32_t>;  // (source address, conn_id)

  static InboundKey key_of(const sockaddr_in& src, uint32_t conn_id) {
    return {address_key(from_sockaddr(src)), conn_id};
  }

  std::shared_ptr<UdpLink> find_outbound(uint32_t conn_id, const sockaddr_in& src) {
    std::lock_guard lock(links_mutex_);
    auto it = outbound_.find(conn_id);
    if (it == outbound_.end() || !it->second->from_peer(src)) return nullptr;
    return it->second;
  }

  static UniqueFd open_socket(const NetAddress& bind);

  // Waits up to `timeout_ms` for datagrams on `fd` (or the stop signal),
  // then hands every queued datagram (up to a burst) that passes its
  // checksum to `handle`.
  template <class Handle>
  void receive_burst(int fd, bool requests, std::vector<std::byte>& buffer, int timeout_ms, Handle handle) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}};
    int rc = ::poll(fds, 2, timeout_ms);
    if (rc <= 0 || (fds[0].revents & POLLIN) == 0) return;
    for (int i = 0; i < 256; ++i) {
      sockaddr_in src{};
      socklen_t len = sizeof src;
      ssize_t n = ::recvfrom(fd, buffer.data(), buffer.size(), MSG_TRUNC, reinterpret_cast<sockaddr*>(&src), &len);
      if (n < 0) return;  // EAGAIN: drained
      const auto bytes = static_cast<size_t>(n);
      if (bytes > kMaxDatagram || !verify(buffer.data(), bytes)) {
        on_corrupt(src, requests);
        continue;
      }
      PacketHeader h;
      std::memcpy(&h, buffer.data(), sizeof h);
      handle(src, h, buffer.data() + sizeof h, bytes - sizeof h);
    }
  }

  // ---- send thread: acks, replies, retransmission ----------------------------

  void send_loop();

  void handle_reply(const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes);

  bool run_link_timers(Clock::time_point now);

  // ---- receive thread: handshakes and delivery -------------------------------

  void receive_loop();

  void handle_request(const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes);

  // A datagram failed its checksum (or is not ours). With retransmission it
  // is just lost (and will be resent); without, every link from that source
  // is broken: we cannot know what it carried.
  void on_corrupt(const sockaddr_in& src, bool on_receive_socket);

  void handle_hello(const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes);

  void handle_data(const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes);

  // Copies one in-order fragment into the sink's memory. false = the
  // fragment does not continue the stream as the framing requires.
  bool deliver(InboundLink& in, const PacketHeader& h, const std::byte* body, size_t bytes);

  void fail_inbound(std::map<InboundKey, std::unique_ptr<InboundLink>>::iterator it, const char* why, bool error,
                    bool tell_sender);

  void send_ack(InboundLink& in);

  void flush_acks();

  void send_receiver_close(const sockaddr_in& to, uint32_t conn_id);

  void expire_silent_senders(Clock::time_point now);

  UdpTuning tuning_;
  const Credential credential_;
  const bool check_secret_;
  std::shared_ptr<UdpSocket> rx_;  // listening address: requests in, replies out
  std::shared_ptr<UdpSocket> tx_;  // links send from here and get replies here
  NetAddress local_;
  uint32_t advertised_window_ = 2;
  UniqueFd wake_fd_;
  std::mt19937 random_{std::random_device{}()};  // guarded by links_mutex_

  std::mutex links_mutex_;
  bool stopped_ = false;
  std::map<uint32_t, std::shared_ptr<UdpLink>> outbound_;  // by conn_id
  std::map<uint64_t, std::shared_ptr<PeerSlot>> peers_;
  std::atomic<Sink*> sink_{nullptr};
  std::atomic<bool> stopping_{false};

  // Receive thread only.
  std::vector<std::byte> rx_buffer_;
  std::map<InboundKey, std::unique_ptr<InboundLink>> inbound_;
  // Send thread only.
  std::vector<std::byte> tx_buffer_;

  std::thread tx_thread_;
  std::thread rx_thread_;
};

}  // namespace udp
}  // namespace accl::emu::transport_detail
