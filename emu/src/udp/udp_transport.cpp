// SPDX-License-Identifier: Apache-2.0
//
// UDP transport: datagrams with our own framing and a small reliability
// layer (udp/packet.hpp describes the protocol). Two sockets per transport,
// both on the configured address: the receive socket (the listening port)
// and the send socket (an ephemeral port), each with its own thread.
//
// The files of emu/src/udp/, one job each:
//   udp_transport.cpp  this transport: sockets, handshakes, delivery, acks
//   udp_link.hpp       UdpLink, the sending side of a link (window, resends)
//   udp_socket.hpp     UdpSocket, one socket and the test-only faults
//   packet.hpp         the datagram header, sequence order and checksums
// Their namespace has hidden visibility, as the one file's anonymous
// namespace was: nothing of it is exported from libaccl_emu.
#include "packet.hpp"
#include "udp_link.hpp"
#include "udp_socket.hpp"

#include "hello_protocol.hpp"
#include "job_secret.hpp"
#include "net_address.hpp"
#include "socket_address.hpp"
#include "socket_io.hpp"
#include "thread_name.hpp"
#include "timed_mutex.hpp"
#include "transport_faults.hpp"
#include "transport_tuning.hpp"

#include <accl/log.hpp>

#include <sys/eventfd.h>

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

namespace accl::emu {
namespace transport_detail {
namespace udp __attribute__((visibility("hidden"))) {
namespace {

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
  UdpTransport(const TransportOptions& options, const UdpTuning& tuning)
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

  ~UdpTransport() override { stop(); }

  std::string name() const override { return "udp"; }
  NetAddress local_address() const override { return local_; }

  void start(Sink& sink) override {
    std::lock_guard lock(links_mutex_);
    if (sink_.load() != nullptr || stopped_) throw std::logic_error("udp transport: start() called twice or after stop()");
    sink_.store(&sink, std::memory_order_release);
  }

  std::shared_ptr<Link> connect(const NetAddress& peer, Clock::time_point deadline) override {
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

  void stop() override {
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

  static UniqueFd open_socket(const NetAddress& bind) {
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

  void send_loop() {
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

  void handle_reply(const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes) {
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

  bool run_link_timers(Clock::time_point now) {
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

  // ---- receive thread: handshakes and delivery -------------------------------

  void receive_loop() {
    name_this_thread("accl-udp-rx");
    auto next_sweep = Clock::now();
    while (!stopping_.load(std::memory_order_acquire)) {
      receive_burst(rx_->fd(), true, rx_buffer_, 50,
                    [this](const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes) {
                      handle_request(src, h, body, bytes);
                    });
      flush_acks();
      const auto now = Clock::now();
      if (now >= next_sweep) {
        expire_silent_senders(now);
        next_sweep = now + std::chrono::milliseconds(20);
      }
    }
    // Our own stop: end messages the sink started, tell senders we are gone.
    Sink* sink = sink_.load(std::memory_order_acquire);
    for (auto& [key, in] : inbound_) {
      if (in->in_message && sink != nullptr) sink->end_message(in->from, in->header, in->ticket, abi::kLinkError);
      send_receiver_close(in->src, in->conn_id);
    }
    inbound_.clear();
  }

  void handle_request(const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes) {
    switch (h.type) {
      case kData:
        handle_data(src, h, body, bytes);
        break;
      case kHello:
        handle_hello(src, h, body, bytes);
        break;
      case kClose:
        if (auto it = inbound_.find(key_of(src, h.conn_id)); it != inbound_.end() && !(h.flags & kFromReceiver)) {
          fail_inbound(it, (h.flags & kAbort) ? "sender aborted the link" : "sender closed the link",
                       (h.flags & kAbort) != 0, false);
        }
        break;
      case kPing:
        if (auto it = inbound_.find(key_of(src, h.conn_id)); it != inbound_.end()) {
          it->second->last_heard = Clock::now();
          it->second->ack_pending = true;
        } else {
          send_receiver_close(src, h.conn_id);
        }
        break;
      default:
        on_corrupt(src, true);
    }
  }

  // A datagram failed its checksum (or is not ours). With retransmission it
  // is just lost (and will be resent); without, every link from that source
  // is broken: we cannot know what it carried.
  void on_corrupt(const sockaddr_in& src, bool on_receive_socket) {
    ACCL_LOG_DEBUG("udp: dropping a corrupt datagram from {}", format_address(from_sockaddr(src)));
    // Replies (send socket) carry no data: a lost one is repaired by the
    // sender's timers in any mode.
    if (tuning_.retransmit || !on_receive_socket) return;
    for (auto it = inbound_.begin(); it != inbound_.end();) {
      auto next = std::next(it);
      if (it->first.first == address_key(from_sockaddr(src))) fail_inbound(it, "corrupt datagram", true, true);
      it = next;
    }
  }

  void handle_hello(const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes) {
    if (sink_.load(std::memory_order_acquire) == nullptr) return;  // not started: the peer retries
    HelloReplyBody reply;
    HelloIdentity id;
    if (bytes != sizeof id) {
      reply.reply.status = kHelloMalformed;
    } else {
      std::memcpy(&id, body, sizeof id);
      reply.reply.status = check_identity(id, kHelloUdp, credential_, check_secret_);
    }
    if (reply.reply.status != kHelloAccepted) {
      ACCL_LOG_WARN("udp: refusing link from {}: {}", format_address(from_sockaddr(src)),
                    describe(static_cast<HelloStatus>(reply.reply.status)));
    } else {
      auto& in = inbound_[key_of(src, h.conn_id)];
      if (!in) {  // a repeated hello (our reply was lost) keeps the state
        in = std::make_unique<InboundLink>();
        in->src = src;
        in->conn_id = h.conn_id;
        // Its identity, not the datagrams' source (an ephemeral send socket).
        in->from = NetAddress{id.listen_ip, id.listen_port};
        in->last_heard = Clock::now();
        ACCL_LOG_DEBUG("udp: accepted link {} -> {}", format_address(in->from), format_address(local_));
      }
      reply.window = advertised_window_;
    }
    PacketHeader rh;
    rh.type = kHelloReply;
    rh.conn_id = h.conn_id;
    rx_->send_control(src, rh, &reply, sizeof reply);
  }

  void handle_data(const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes) {
    auto it = inbound_.find(key_of(src, h.conn_id));
    if (it == inbound_.end()) {
      // No such link (closed, failed, or never opened): make the sender stop.
      send_receiver_close(src, h.conn_id);
      return;
    }
    InboundLink& in = *it->second;
    in.last_heard = Clock::now();
    if (seq_before(h.seq, in.expected_seq)) {
      in.ack_pending = true;  // a duplicate: already delivered; re-ack
      return;
    }
    if (h.seq != in.expected_seq) {
      if (!tuning_.retransmit) {
        fail_inbound(it, "datagram lost or out of order", true, true);
        return;
      }
      // Early: keep it (within the window we advertised) until the gap is
      // filled, and tell the sender at once what is missing.
      if (h.seq - in.expected_seq <= advertised_window_ && !in.early.count(h.seq))
        in.early[h.seq].assign(rx_buffer_.data(), rx_buffer_.data() + sizeof h + bytes);
      send_ack(in);
      return;
    }
    if (!deliver(in, h, body, bytes)) {
      fail_inbound(it, "framing violation", true, true);
      return;
    }
    ++in.expected_seq;
    // The gap may be filled now: deliver what waited behind it.
    for (auto e = in.early.find(in.expected_seq); e != in.early.end(); e = in.early.find(in.expected_seq)) {
      PacketHeader eh;
      std::memcpy(&eh, e->second.data(), sizeof eh);
      if (!deliver(in, eh, e->second.data() + sizeof eh, e->second.size() - sizeof eh)) {
        fail_inbound(it, "framing violation", true, true);
        return;
      }
      in.early.erase(e);
      ++in.expected_seq;
    }
    in.received_data = true;
    in.ack_pending = true;
    if (++in.since_ack >= kAckEvery) send_ack(in);
  }

  // Copies one in-order fragment into the sink's memory. false = the
  // fragment does not continue the stream as the framing requires.
  bool deliver(InboundLink& in, const PacketHeader& h, const std::byte* body, size_t bytes) {
    Sink* sink = sink_.load(std::memory_order_acquire);
    size_t skip = 0;
    if (h.flags & kFirst) {
      if (in.in_message || h.msg_id != in.expected_msg || h.offset != 0 || bytes < sizeof in.header) return false;
      std::memcpy(&in.header, body, sizeof in.header);
      skip = sizeof in.header;
      if (bytes - skip > in.header.count) return false;
      in.ticket = ReceiveTicket{};
      in.got = 0;
      in.in_message = true;
      in.dst = sink->begin_message(in.from, in.header, in.ticket);
    } else if (!in.in_message || h.msg_id != in.expected_msg || h.offset != in.got) {
      return false;
    }
    const size_t n = bytes - skip;
    if (n > in.header.count - in.got) return false;
    if (n > 0 && in.dst != nullptr && !store_payload(in.ticket, in.dst, in.got, body + skip, n)) in.dst = nullptr;
    in.got += n;
    const bool complete = in.got == in.header.count;
    if (complete != ((h.flags & kLast) != 0)) return false;
    if (complete) {
      in.in_message = false;
      ++in.expected_msg;
      sink->end_message(in.from, in.header, in.ticket, 0);
    }
    return true;
  }

  void fail_inbound(std::map<InboundKey, std::unique_ptr<InboundLink>>::iterator it, const char* why, bool error,
                    bool tell_sender) {
    InboundLink& in = *it->second;
    Sink* sink = sink_.load(std::memory_order_acquire);
    if (error || in.in_message)
      ACCL_LOG_WARN("udp: link from {} failed: {}", format_address(in.from), why);
    else
      ACCL_LOG_INFO("udp: link from {} closed: {}", format_address(in.from), why);
    if (in.in_message) sink->end_message(in.from, in.header, in.ticket, abi::kLinkError);
    sink->link_failed(in.from, abi::kLinkError);
    if (tell_sender) send_receiver_close(in.src, in.conn_id);
    inbound_.erase(it);
  }

  void send_ack(InboundLink& in) {
    PacketHeader h;
    h.type = kAck;
    h.conn_id = in.conn_id;
    h.seq = in.expected_seq;
    uint64_t selective = 0;
    for (const auto& [seq, datagram] : in.early) {
      const uint32_t bit = seq - in.expected_seq - 1;
      if (bit < 64) selective |= uint64_t{1} << bit;
    }
    h.msg_id = static_cast<uint32_t>(selective >> 32);
    h.offset = static_cast<uint32_t>(selective);
    rx_->send_control(in.src, h);
    in.ack_pending = false;
    in.since_ack = 0;
  }

  void flush_acks() {
    for (auto& [key, in] : inbound_)
      if (in->ack_pending) send_ack(*in);
  }

  void send_receiver_close(const sockaddr_in& to, uint32_t conn_id) {
    PacketHeader h;
    h.type = kClose;
    h.flags = kFromReceiver;
    h.conn_id = conn_id;
    rx_->send_control(to, h);
  }

  void expire_silent_senders(Clock::time_point now) {
    for (auto it = inbound_.begin(); it != inbound_.end();) {
      auto next = std::next(it);
      if (now - it->second->last_heard > tuning_.liveness_timeout) {
        if (it->second->received_data || it->second->in_message)
          fail_inbound(it, "sender silent", true, false);
        else
          inbound_.erase(it);  // never used (e.g. the sender gave up connecting)
      }
      it = next;
    }
  }

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

}  // namespace
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
