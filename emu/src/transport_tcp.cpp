// SPDX-License-Identifier: Apache-2.0
//
// TCP transport.
//
// Wire protocol, per directed pair (one connection per direction per peer):
//   connector -> listener  HelloIdentity (48 bytes: magic, version, kind,
//                          connector's identity = the address peers know it
//                          by, job credential)
//   listener  -> connector HelloReply (8 bytes: accepted or why not)
//   connector -> listener  messages: WireHeader (64 bytes) + header.count
//                          payload bytes, back to back, nothing else.
// The listener never sends anything after the reply, so the connector reads
// "readable" on its socket as "peer closed".
//
// Sending: the header and the first payload chunk share one staging buffer
// filled by the PayloadWriter, so a small message is one send() call; large
// payloads stream chunk by chunk from the same reusable buffer.
// Receiving: one thread, epoll over the listener and every inbound socket,
// a per-connection state machine (handshake, header, payload) on non-blocking
// reads. Small messages are parsed out of a 64 KiB read buffer; the rest of a
// large payload is read straight into the memory the sink returned.
#include "aligned_buffer.hpp"
#include "hello_protocol.hpp"
#include "job_secret.hpp"
#include "peer_links.hpp"
#include "socket_address.hpp"
#include "socket_io.hpp"
#include "thread_name.hpp"
#include "timed_mutex.hpp"
#include "transport_tuning.hpp"

#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace accl::emu {
namespace {

using namespace transport_detail;

// Payload bytes still to come at which reading straight into the sink's
// memory beats a trip through the read buffer.
constexpr size_t kDirectReadMin = 32 << 10;
constexpr size_t kReadBufferBytes = 64 << 10;
// Bytes one connection may consume per wakeup before the others get a turn.
constexpr size_t kReadBudget = 8 << 20;

// Options of every connection: no Nagle delay for small messages, and
// keepalive probes so a peer host that vanished without FIN or RST (power
// loss, cable) is noticed in about 20 s even on an idle link, not after the
// kernel's two hours. TCP_USER_TIMEOUT bounds unacknowledged data the same way.
void tune_connection(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  int idle_s = 10, interval_s = 3, probes = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
  unsigned user_timeout_ms = 20000;
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

class TcpLink final : public Link {
 public:
  TcpLink(UniqueFd fd, NetAddress peer, size_t staging_bytes)
      : fd_(std::move(fd)), peer_(peer), staging_bytes_(staging_bytes) {}

  uint32_t send(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point deadline) override {
    std::unique_lock lock(send_mutex_, std::defer_lock);
    if (!lock.try_lock_until(deadline)) return abi::kLinkError;
    if (broken_.load(std::memory_order_acquire)) return abi::kLinkError;
    if (peer_hung_up(fd_.get())) {
      break_link("peer closed the connection");
      return abi::kLinkError;
    }
    const size_t count = header.count;
    const size_t first = std::min(count, staging_bytes_);
    // Later chunks are at most staging_bytes_, which `first` equals whenever
    // there are later chunks.
    staging_.ensure(sizeof header + first);
    std::memcpy(staging_.get(), &header, sizeof header);
    std::byte* chunk = staging_.get() + sizeof header;
    if (first > 0) {
      // Nothing is on the wire yet: a writer error leaves the link usable.
      if (uint32_t err = payload.write(chunk, 0, first)) return err;
    }
    size_t written = 0;
    IoStatus st = write_all(fd_.get(), staging_.get(), sizeof header + first, deadline, &broken_, written);
    if (st != IoStatus::ok) {
      // A timeout before the first byte left keeps the stream intact.
      if (written > 0 || st == IoStatus::closed) break_link(st == IoStatus::closed ? "connection lost" : "send timed out");
      return abi::kLinkError;
    }
    for (size_t offset = first; offset < count;) {
      const size_t piece = std::min(staging_bytes_, count - offset);
      if (uint32_t err = payload.write(chunk, offset, piece)) {
        // Part of the message is on the wire: the receiver must not take the
        // rest of the stream for a new header, so the link goes down.
        break_link("payload writer failed mid-message");
        return err | abi::kLinkError;
      }
      st = write_all(fd_.get(), chunk, piece, deadline, &broken_, written);
      if (st != IoStatus::ok) {
        break_link(st == IoStatus::closed ? "connection lost" : "send timed out mid-message");
        return abi::kLinkError;
      }
      offset += piece;
    }
    return 0;
  }

  bool broken() const { return broken_.load(std::memory_order_acquire); }

  // Transport stop: wakes a blocked send (shutdown makes poll return) and
  // fails later ones. The descriptor stays open until the link is destroyed
  // so a concurrent send never touches a reused fd number.
  void close() {
    broken_.store(true, std::memory_order_release);
    ::shutdown(fd_.get(), SHUT_RDWR);
  }

 private:
  void break_link(const char* why) {
    if (!broken_.exchange(true)) ACCL_LOG_WARN("tcp: link to {} is down: {}", format_address(peer_), why);
    ::shutdown(fd_.get(), SHUT_RDWR);
  }

  TimedMutex send_mutex_;  // one message at a time on the stream
  UniqueFd fd_;
  const NetAddress peer_;
  const size_t staging_bytes_;
  AlignedBuffer staging_;  // header + one payload chunk; reused by every send
  std::atomic<bool> broken_{false};
};

// One accepted connection, owned by the receive thread.
struct Inbound {
  enum class Phase { handshake, header, payload };

  UniqueFd fd;
  Phase phase = Phase::handshake;
  Clock::time_point accepted_at;
  NetAddress socket_peer;  // ephemeral address, for log lines before the handshake
  NetAddress from;         // the peer's identity (from the handshake)

  HelloIdentity hello;
  size_t hello_got = 0;

  abi::WireHeader header{};
  size_t header_got = 0;
  ReceiveTicket ticket;
  std::byte* dst = nullptr;  // sink memory, nullptr = discard
  size_t payload_got = 0;
  bool in_message = false;  // begin_message called, end_message not yet

  AlignedBuffer buffer;
  size_t buf_pos = 0;
  size_t buf_len = 0;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(const TransportOptions& options, const TcpTuning& tuning)
      : tuning_(tuning),
        credential_(make_credential(options.job_secret)),
        check_secret_(!options.job_secret.empty()) {
    tuning_.staging_bytes = std::max<size_t>(round_up64(tuning_.staging_bytes), 4096);
    listen_fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!listen_fd_) throw_errno("tcp: socket");
    int one = 1;
    // Lets a restarted job reuse a port still in TIME_WAIT; never shares a
    // port with a live listener (that would need SO_REUSEPORT).
    ::setsockopt(listen_fd_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // Only the configured address: 0.0.0.0 is used only when asked for.
    sockaddr_in sa = to_sockaddr(options.bind);
    if (::bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
      throw_errno("tcp: bind " + format_address(options.bind));
    if (::listen(listen_fd_.get(), 256) != 0) throw_errno("tcp: listen");
    local_ = identity_address(bound_address(listen_fd_.get()));

    epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
    wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!epoll_fd_ || !wake_fd_) throw_errno("tcp: epoll/eventfd");
    watch(listen_fd_.get());
    watch(wake_fd_.get());
    ACCL_LOG_DEBUG("tcp: listening on {}", format_address(local_));
  }

  ~TcpTransport() override { stop(); }

  std::string name() const override { return "tcp"; }
  NetAddress local_address() const override { return local_; }

  void start(Sink& sink) override {
    std::lock_guard lock(state_mutex_);
    if (started_ || stopped_) throw std::logic_error("tcp transport: start() called twice or after stop()");
    started_ = true;
    sink_ = &sink;
    receiver_ = std::thread([this] { receive_loop(); });
  }

  std::shared_ptr<Link> connect(const NetAddress& peer, Clock::time_point deadline) override {
    return peers_.connect(peer, deadline, [this](const NetAddress& p, Clock::time_point d) { return dial(p, d); });
  }

  void stop() override {
    if (!begin_stop(state_mutex_, stopped_, stopping_, wake_fd_.get())) return;
    // Only start() (under state_mutex_, before stopped_) creates the thread.
    if (receiver_.joinable()) receiver_.join();
    std::lock_guard lock(state_mutex_);
    peers_.close_all();
    listen_fd_.reset();
  }

 private:
  void watch(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno("tcp: epoll_ctl");
  }

  // Connects (retrying while the peer is not listening yet), then performs
  // the handshake. nullptr when the peer stays unreachable until the
  // deadline, refuses us, or the transport stops.
  std::shared_ptr<TcpLink> dial(const NetAddress& peer, Clock::time_point deadline) {
    auto backoff = std::chrono::milliseconds(2);
    std::string last_error = "deadline passed";
    while (!stopping_.load(std::memory_order_acquire)) {
      UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      if (!fd) {
        last_error = std::strerror(errno);
        break;
      }
      tune_connection(fd.get());
      sockaddr_in sa = to_sockaddr(peer);
      int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      int err = rc == 0 ? 0 : errno;
      if (err == EINPROGRESS) {
        short ev = wait_fd(fd.get(), POLLOUT, deadline, &stopping_);
        socklen_t len = sizeof err;
        if (ev == 0) err = ETIMEDOUT;
        else if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
      if (err == 0) {
        HelloStatus status = kHelloRefused;
        IoStatus io = handshake(fd.get(), deadline, status);
        if (io == IoStatus::ok && status == kHelloAccepted) {
          ACCL_LOG_DEBUG("tcp: connected {} -> {}", format_address(local_), format_address(peer));
          return std::make_shared<TcpLink>(std::move(fd), peer, tuning_.staging_bytes);
        }
        if (io == IoStatus::ok) {
          // A refusal is final: retrying with the same secret cannot help.
          ACCL_LOG_ERROR("tcp: {} refused our connection: {}", format_address(peer), describe(status));
          return nullptr;
        }
        last_error = io == IoStatus::timeout ? "handshake timed out" : "closed during handshake";
      } else {
        last_error = std::strerror(err);
      }
      fd.reset();
      if (Clock::now() >= deadline) break;
      // The peer may not listen yet (ECONNREFUSED): back off and retry.
      std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - Clock::now()));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
    }
    ACCL_LOG_INFO("tcp: cannot reach {}: {}", format_address(peer), last_error);
    return nullptr;
  }

  IoStatus handshake(int fd, Clock::time_point deadline, HelloStatus& status) {
    HelloIdentity id = make_identity(kHelloTcp, local_, credential_);
    size_t written = 0;
    IoStatus io = write_all(fd, &id, sizeof id, deadline, &stopping_, written);
    if (io != IoStatus::ok) return io;
    HelloReply reply;
    io = read_exact(fd, &reply, sizeof reply, deadline, &stopping_);
    if (io != IoStatus::ok) return io;
    status = reply.magic == kHelloMagic ? static_cast<HelloStatus>(reply.status) : kHelloMalformed;
    return IoStatus::ok;
  }

  // ---- receive thread ----------------------------------------------------

  void receive_loop() {
    name_this_thread("accl-tcp-rx");
    std::vector<epoll_event> events(64);
    auto next_sweep = Clock::now() + kWaitSlice;
    while (!stopping_.load(std::memory_order_acquire)) {
      int n = ::epoll_wait(epoll_fd_.get(), events.data(), static_cast<int>(events.size()),
                           static_cast<int>(kWaitSlice.count()));
      if (n < 0 && errno != EINTR) {
        ACCL_LOG_ERROR("tcp: epoll_wait: {}", std::strerror(errno));
        break;
      }
      for (int i = 0; i < n && !stopping_.load(std::memory_order_acquire); ++i) {
        int fd = events[i].data.fd;
        if (fd == wake_fd_.get()) continue;
        if (fd == listen_fd_.get()) {
          accept_all();
          continue;
        }
        auto it = inbound_.find(fd);
        if (it != inbound_.end() && !pump(*it->second)) inbound_.erase(it);
      }
      if (Clock::now() >= next_sweep) {
        expire_handshakes();
        next_sweep = Clock::now() + kWaitSlice;
      }
    }
    // Our own stop: finish what the sink started, but a link we close
    // ourselves is not reported as failed.
    for (auto& [fd, conn] : inbound_)
      if (conn->in_message) sink_->end_message(conn->from, conn->header, conn->ticket, abi::kLinkError);
    inbound_.clear();
  }

  void accept_all() {
    for (;;) {
      sockaddr_in sa{};
      socklen_t len = sizeof sa;
      int fd = ::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          // Out of descriptors: the listener stays readable, so pause instead
          // of spinning on it.
          ACCL_LOG_ERROR("tcp: accept: {}", std::strerror(errno));
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return;
      }
      auto conn = std::make_unique<Inbound>();
      conn->fd.reset(fd);
      conn->accepted_at = Clock::now();
      conn->socket_peer = from_sockaddr(sa);
      tune_connection(fd);
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.fd = fd;
      if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
        ACCL_LOG_ERROR("tcp: epoll_ctl: {}", std::strerror(errno));
        continue;
      }
      inbound_[fd] = std::move(conn);
    }
  }

  void expire_handshakes() {
    const auto now = Clock::now();
    for (auto it = inbound_.begin(); it != inbound_.end();) {
      const Inbound& c = *it->second;
      if (c.phase == Inbound::Phase::handshake && now - c.accepted_at > tuning_.handshake_timeout) {
        ACCL_LOG_WARN("tcp: closing connection from {}: no handshake within {} ms", format_address(c.socket_peer),
                      tuning_.handshake_timeout.count());
        it = inbound_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // Reads what is available on one connection. false = the connection is
  // finished (already reported) and must be dropped.
  bool pump(Inbound& c) {
    if (c.phase == Inbound::Phase::handshake) return read_handshake(c);
    size_t budget = kReadBudget;
    for (;;) {
      consume_buffered(c);
      c.buf_pos = c.buf_len = 0;
      ssize_t n;
      const size_t remaining = c.header.count - c.payload_got;
      if (c.phase == Inbound::Phase::payload && c.dst != nullptr && remaining >= kDirectReadMin) {
        // A leased destination is written in bounded pieces, each under the
        // lease (the recv is non-blocking: it never holds the lease long).
        WriteLease* lease = c.ticket.lease.get();
        if (lease != nullptr && !lease->begin_write()) {
          c.dst = nullptr;  // revoked: the rest of the payload is read and dropped
          continue;
        }
        n = ::recv(c.fd.get(), c.dst + c.payload_got,
                   lease != nullptr ? std::min(remaining, WriteLease::kMaxPieceBytes) : remaining, 0);
        if (n > 0 && c.ticket.landing != nullptr) c.ticket.landing->stored_raw(c.payload_got, static_cast<size_t>(n));
        if (lease != nullptr) lease->end_write();
        if (n > 0) {
          c.payload_got += static_cast<size_t>(n);
          if (c.payload_got == c.header.count) finish_message(c);
        }
      } else {
        c.buffer.ensure(kReadBufferBytes);
        n = ::recv(c.fd.get(), c.buffer.get(), kReadBufferBytes, 0);
        if (n > 0) c.buf_len = static_cast<size_t>(n);
      }
      if (n > 0) {
        if (static_cast<size_t>(n) >= budget) {
          consume_buffered(c);
          // Level-triggered epoll brings us back for the rest; keep the
          // unconsumed bytes (none: consume_buffered took them all).
          c.buf_pos = c.buf_len = 0;
          return true;
        }
        budget -= static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      fail(c, n == 0 ? "closed by peer" : std::strerror(errno));
      return false;
    }
  }

  // Advances the message state machine over the buffered bytes.
  void consume_buffered(Inbound& c) {
    while (c.buf_pos < c.buf_len) {
      const size_t avail = c.buf_len - c.buf_pos;
      const std::byte* src = c.buffer.get() + c.buf_pos;
      if (c.phase == Inbound::Phase::header) {
        const size_t take = std::min(sizeof c.header - c.header_got, avail);
        std::memcpy(reinterpret_cast<std::byte*>(&c.header) + c.header_got, src, take);
        c.header_got += take;
        c.buf_pos += take;
        if (c.header_got == sizeof c.header) begin_message(c);
      } else {
        const size_t take = std::min<size_t>(c.header.count - c.payload_got, avail);
        if (c.dst != nullptr && !store_payload(c.ticket, c.dst, c.payload_got, src, take)) c.dst = nullptr;
        c.payload_got += take;
        c.buf_pos += take;
        if (c.payload_got == c.header.count) finish_message(c);
      }
    }
  }

  void begin_message(Inbound& c) {
    c.ticket = ReceiveTicket{};
    c.payload_got = 0;
    c.in_message = true;
    c.dst = sink_->begin_message(c.from, c.header, c.ticket);
    c.phase = Inbound::Phase::payload;
    if (c.header.count == 0) finish_message(c);
  }

  void finish_message(Inbound& c) {
    c.in_message = false;
    c.phase = Inbound::Phase::header;
    c.header_got = 0;
    sink_->end_message(c.from, c.header, c.ticket, 0);
  }

  bool read_handshake(Inbound& c) {
    for (;;) {
      ssize_t n = ::recv(c.fd.get(), reinterpret_cast<char*>(&c.hello) + c.hello_got, sizeof c.hello - c.hello_got, 0);
      if (n > 0) {
        c.hello_got += static_cast<size_t>(n);
        if (c.hello_got < sizeof c.hello) continue;
        break;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      ACCL_LOG_WARN("tcp: connection from {} closed during handshake", format_address(c.socket_peer));
      return false;
    }
    HelloReply reply;
    reply.status = check_identity(c.hello, kHelloTcp, credential_, check_secret_);
    // The reply is 8 bytes into an empty socket buffer: it cannot block.
    [[maybe_unused]] ssize_t sent = ::send(c.fd.get(), &reply, sizeof reply, MSG_NOSIGNAL);
    if (reply.status != kHelloAccepted) {
      ACCL_LOG_WARN("tcp: refusing connection from {}: {}", format_address(c.socket_peer),
                    describe(static_cast<HelloStatus>(reply.status)));
      return false;
    }
    // The peer is who its handshake says (its identity in the communicator
    // records), whatever address the connection came from.
    c.from = NetAddress{c.hello.listen_ip, c.hello.listen_port};
    c.phase = Inbound::Phase::header;
    ACCL_LOG_DEBUG("tcp: accepted link {} -> {}", format_address(c.from), format_address(local_));
    return true;
  }

  void fail(Inbound& c, const std::string& why) {
    if (c.in_message) {
      ACCL_LOG_WARN("tcp: link from {} broke mid-message ({} of {} bytes): {}", format_address(c.from),
                    c.payload_got, c.header.count, why);
      sink_->end_message(c.from, c.header, c.ticket, abi::kLinkError);
      c.in_message = false;
    } else {
      ACCL_LOG_INFO("tcp: link from {} closed: {}", format_address(c.from), why);
    }
    sink_->link_failed(c.from, abi::kLinkError);
  }

  TcpTuning tuning_;
  const Credential credential_;
  const bool check_secret_;
  UniqueFd listen_fd_;
  UniqueFd epoll_fd_;
  UniqueFd wake_fd_;
  NetAddress local_;

  std::mutex state_mutex_;
  bool started_ = false;
  bool stopped_ = false;
  PeerLinks<TcpLink> peers_{state_mutex_, stopped_};
  Sink* sink_ = nullptr;
  std::thread receiver_;
  std::atomic<bool> stopping_{false};

  // Receive thread only.
  std::map<int, std::unique_ptr<Inbound>> inbound_;
};

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(const TransportOptions& options, const TcpTuning& tuning) {
  return std::make_unique<TcpTransport>(options, tuning);
}

std::unique_ptr<Transport> make_tcp_transport(const TransportOptions& options) {
  return make_tcp_transport(options, TcpTuning{});
}

}  // namespace accl::emu
