// SPDX-License-Identifier: Apache-2.0
//
// UDP transport: datagrams with our own framing and a small reliability
// layer. Two sockets per transport, both on the configured address:
//   receive socket (the listening port): takes DATA, HELLO, PING, CLOSE from
//     peers' senders, answers with ACK, HELLO_REPLY, CLOSE; its thread
//     delivers to the sink.
//   send socket (an ephemeral port): every outbound link sends from it and
//     gets its ACKs and replies on it; its thread runs retransmission.
// Keeping acknowledgements off the delivering thread means a sink callback
// that sends on a UDP link (and waits for window space) cannot stall the
// very acks it waits for.
//
// Every datagram starts with a 32-byte PacketHeader carrying a CRC32C of the
// whole datagram (header with crc = 0, then body). Types:
//   HELLO        sender -> receiver  HelloIdentity; conn_id = random link id
//   HELLO_REPLY  receiver -> sender  HelloReply + receive window (datagrams)
//   DATA         sender -> receiver  seq (per link, +1 per datagram), msg_id
//                                    (per link, +1 per message), offset of
//                                    the payload bytes in the message; the
//                                    FIRST fragment carries the 64-byte
//                                    WireHeader before its payload, the LAST
//                                    one ends the message
//   PING         sender -> receiver  keepalive when idle; answered by ACK
//   CLOSE        either way         link over (FROM_RECEIVER: the receiver
//                                    refuses it; ABORT: a message was torn)
//   ACK          receiver -> sender  seq = next expected (cumulative),
//                                    msg_id:offset = 64-bit selective ack of
//                                    seq+1 .. seq+64 (datagrams held out of
//                                    order)
// Reliability (selective repeat): the receiver delivers in seq order
// straight into the sink's memory, drops duplicates and datagrams outside
// the window, holds early datagrams until the gap before them is filled,
// and acks cumulatively (every 8 datagrams and after each receive burst; an
// early datagram triggers an immediate duplicate ack). The sender keeps
// unacknowledged datagrams (at most the window the receiver advertised),
// resends the holes the selective acks reveal after two duplicate acks, on
// partial acks and on timeouts (doubling, bounded retries), and breaks the
// link when retries run out. With UdpTuning::retransmit = false, any gap or
// corrupt datagram breaks the link instead (detect and report). Either way
// nothing corrupt, partial, duplicated or out of order reaches the sink.
#include "crc32c.hpp"
#include "hello_protocol.hpp"
#include "job_secret.hpp"
#include "net_address.hpp"
#include "socket_address.hpp"
#include "socket_io.hpp"
#include "thread_name.hpp"
#include "timed_mutex.hpp"
#include "transport_faults.hpp"
#include "transport_tuning.hpp"

#include <sys/eventfd.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace accl::emu {
namespace {

using namespace transport_detail;

constexpr uint32_t kPacketMagic = 0x50445541;  // "AUDP"
enum PacketType : uint8_t { kData = 1, kAck = 2, kHello = 3, kHelloReply = 4, kClose = 5, kPing = 6 };
enum PacketFlags : uint8_t { kFirst = 1, kLast = 2, kFromReceiver = 4, kAbort = 8 };

struct PacketHeader {
  uint32_t magic = kPacketMagic;
  uint8_t type = 0;
  uint8_t flags = 0;
  uint16_t reserved = 0;
  uint32_t conn_id = 0;
  uint32_t seq = 0;
  uint32_t msg_id = 0;
  uint32_t offset = 0;
  uint32_t length = 0;  // body bytes after this header
  uint32_t crc = 0;
};
static_assert(sizeof(PacketHeader) == 32);

struct HelloReplyBody {
  HelloReply reply;
  uint32_t window = 0;
  uint32_t reserved = 0;
};

constexpr size_t kMaxDatagram = 65507;  // IPv4 UDP payload limit
constexpr size_t kAckEvery = 8;         // in-order datagrams between acks within a burst
constexpr int kFastRetransmitDupAcks = 2;
// A hole is not resent again sooner than this after its last transmission
// (except on a timeout): it may still be on its way.
constexpr auto kResendGap = std::chrono::milliseconds(2);

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Serial-number order for 32-bit sequence numbers that wrap.
bool seq_before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

void seal(std::byte* datagram, size_t bytes) {
  auto* h = reinterpret_cast<PacketHeader*>(datagram);
  h->crc = 0;
  h->crc = crc32c_update(~0u, datagram, bytes) ^ ~0u;
}

bool verify(std::byte* datagram, size_t bytes) {
  if (bytes < sizeof(PacketHeader)) return false;
  auto* h = reinterpret_cast<PacketHeader*>(datagram);
  const uint32_t crc = h->crc;
  h->crc = 0;
  const bool ok = (crc32c_update(~0u, datagram, bytes) ^ ~0u) == crc;
  h->crc = crc;
  return ok && h->magic == kPacketMagic && h->length == bytes - sizeof(PacketHeader);
}

// One UDP socket. The send socket is shared with the links, so a link
// outliving its transport never touches a closed descriptor; it also
// applies the test-only fault injection to data datagrams.
class UdpSocket {
 public:
  UdpSocket(UniqueFd fd, const UdpTuning& tuning) : fd_(std::move(fd)), faults_(tuning) {}
  int fd() const { return fd_.get(); }

  void send_control(const sockaddr_in& to, PacketHeader h, const void* body = nullptr, size_t bytes = 0) {
    std::byte buf[sizeof(PacketHeader) + 64];
    h.length = static_cast<uint32_t>(bytes);
    std::memcpy(buf, &h, sizeof h);
    if (bytes > 0) std::memcpy(buf + sizeof h, body, bytes);
    seal(buf, sizeof h + bytes);
    transmit(to, buf, sizeof h + bytes);
  }

  void send_data(const sockaddr_in& to, const std::byte* datagram, size_t bytes) {
    const uint64_t n = ++data_sent_;
    // "1 in k" chosen by a hash of the datagram count, not every k-th:
    // a strict period lines up with retransmission rounds of the same size
    // and would hit the same datagram forever.
    auto every = [n](uint32_t k, uint64_t salt) { return k != 0 && mix64(n * 4 + salt) % k == 0; };
    if (every(faults_.drop_every, 0)) return;
    if (every(faults_.corrupt_every, 1)) {
      std::vector<std::byte> bad(datagram, datagram + bytes);
      bad[bytes / 2] ^= std::byte{0x10};  // after sealing: the CRC no longer matches
      transmit(to, bad.data(), bytes);
    } else if (every(faults_.reorder_every, 2)) {
      std::lock_guard lock(held_mutex_);
      held_.assign(datagram, datagram + bytes);  // goes out after the next one
      held_to_ = to;
      return;
    } else {
      transmit(to, datagram, bytes);
      if (every(faults_.duplicate_every, 3)) transmit(to, datagram, bytes);
    }
    if (faults_.reorder_every != 0) {
      std::lock_guard lock(held_mutex_);
      if (!held_.empty()) {
        transmit(held_to_, held_.data(), held_.size());
        held_.clear();
      }
    }
  }

 private:
  // A full socket buffer waits briefly; anything else counts as a lost
  // datagram, which the reliability layer repairs or reports.
  void transmit(const sockaddr_in& to, const std::byte* data, size_t bytes) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      ssize_t n = ::sendto(fd_.get(), data, bytes, MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&to), sizeof to);
      if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ENOBUFS)) return;
      pollfd p{fd_.get(), POLLOUT, 0};
      ::poll(&p, 1, 1);
    }
  }

  UniqueFd fd_;
  const UdpTuning faults_;
  std::atomic<uint64_t> data_sent_{0};
  std::mutex held_mutex_;
  std::vector<std::byte> held_;
  sockaddr_in held_to_{};
};

class UdpLink final : public Link {
 public:
  UdpLink(std::shared_ptr<UdpSocket> socket, NetAddress peer, uint32_t conn_id, const UdpTuning& tuning)
      : socket_(std::move(socket)),
        peer_(peer),
        peer_sa_(to_sockaddr(peer)),
        conn_id_(conn_id),
        tuning_(tuning),
        rto_(tuning.initial_rto) {}

  uint32_t send(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point deadline) override {
    std::unique_lock sending(send_mutex_, std::defer_lock);
    if (!sending.try_lock_until(deadline)) return abi::kLinkError;
    const size_t count = header.count;
    const size_t max_piece = tuning_.datagram_payload;
    bool published = false;  // once true, a failure tears the message
    size_t offset = 0;
    do {
      const bool first = !published;
      const size_t piece = std::min(max_piece, count - offset);
      const bool last = offset + piece == count;
      std::vector<std::byte> datagram;
      {
        std::unique_lock lock(mutex_);
        while (state_ == State::open && !closing_ && unacked_.size() >= window_ && Clock::now() < deadline)
          cv_.wait_until(lock, std::min(deadline, Clock::now() + kWaitSlice));
        if (state_ != State::open || closing_ || unacked_.size() >= window_) {
          lock.unlock();
          return fail_send(published, "window did not open before the deadline");
        }
        if (!spare_.empty()) {
          datagram = std::move(spare_.back());
          spare_.pop_back();
        }
      }
      const size_t head_bytes = sizeof(PacketHeader) + (first ? sizeof header : 0);
      datagram.resize(head_bytes + piece);
      if (first) std::memcpy(datagram.data() + sizeof(PacketHeader), &header, sizeof header);
      if (piece > 0) {
        if (uint32_t err = payload.write(datagram.data() + head_bytes, offset, piece)) {
          if (!published) return err;  // nothing on the wire yet: the link stays usable
          return err | fail_send(true, "payload writer failed mid-message");
        }
      }
      PacketHeader h;
      h.type = kData;
      h.flags = static_cast<uint8_t>((first ? kFirst : 0) | (last ? kLast : 0));
      h.conn_id = conn_id_;
      h.seq = next_seq_;
      h.msg_id = next_msg_id_;
      h.offset = static_cast<uint32_t>(offset);
      h.length = static_cast<uint32_t>(datagram.size() - sizeof h);
      std::memcpy(datagram.data(), &h, sizeof h);
      seal(datagram.data(), datagram.size());
      {
        std::lock_guard lock(mutex_);
        if (state_ != State::open || closing_) return fail_send_locked(published, "link closed");
        const auto now = Clock::now();
        if (unacked_.empty()) rto_deadline_ = now + rto_;
        unacked_.push_back(Slot{next_seq_, std::move(datagram), now});
        socket_->send_data(peer_sa_, unacked_.back().bytes.data(), unacked_.back().bytes.size());
        last_sent_ = now;
      }
      ++next_seq_;
      published = true;
      offset += piece;
    } while (offset < count);
    ++next_msg_id_;
    return 0;
  }

  bool usable() const {
    std::lock_guard lock(mutex_);
    return state_ == State::open && !closing_;
  }
  bool finished() const {
    std::lock_guard lock(mutex_);
    return state_ == State::broken || state_ == State::closed;
  }
  uint32_t conn_id() const { return conn_id_; }
  bool from_peer(const sockaddr_in& src) const {
    return src.sin_addr.s_addr == peer_sa_.sin_addr.s_addr && src.sin_port == peer_sa_.sin_port;
  }

  // ---- connect ----
  void send_hello(const HelloIdentity& id) {
    PacketHeader h;
    h.type = kHello;
    h.conn_id = conn_id_;
    socket_->send_control(peer_sa_, h, &id, sizeof id);
  }

  // Waits for the HELLO_REPLY until `until`. true once answered.
  bool wait_reply(Clock::time_point until, HelloStatus& status) {
    std::unique_lock lock(mutex_);
    cv_.wait_until(lock, until, [&] { return state_ != State::connecting; });
    if (state_ == State::connecting) return false;
    status = hello_status_;
    return true;
  }

  // ---- send thread ----
  void on_hello_reply(const HelloReplyBody& body) {
    std::lock_guard lock(mutex_);
    if (state_ != State::connecting) return;
    hello_status_ = body.reply.magic == kHelloMagic ? static_cast<HelloStatus>(body.reply.status) : kHelloMalformed;
    if (hello_status_ == kHelloAccepted) {
      state_ = State::open;
      window_ = std::clamp<uint32_t>(body.window, 1, tuning_.max_window);
      last_heard_ = last_sent_ = Clock::now();
    } else {
      state_ = State::broken;
    }
    cv_.notify_all();
  }

  void on_ack(uint32_t next_expected, uint64_t selective) {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    last_heard_ = now;
    if (state_ != State::open) return;
    bool progress = false;
    while (!unacked_.empty() && seq_before(unacked_.front().seq, next_expected)) {
      recycle(std::move(unacked_.front().bytes));
      unacked_.pop_front();
      progress = true;
    }
    for (Slot& slot : unacked_) {
      const uint32_t bit = slot.seq - next_expected - 1;
      if (bit < 64 && ((selective >> bit) & 1) != 0) slot.sacked = true;
    }
    if (progress) {
      retries_ = 0;
      dup_acks_ = 0;
      rto_ = tuning_.initial_rto;
      rto_deadline_ = now + rto_;
      cv_.notify_all();
      if (recovering_) {
        // A partial ack: the next hole is at the new front.
        if (!unacked_.empty() && seq_before(next_expected, recover_seq_)) resend_holes(now, false);
        else recovering_ = false;
      }
    } else if (!unacked_.empty() && next_expected == unacked_.front().seq && tuning_.retransmit) {
      if (recovering_) {
        resend_holes(now, false);  // newer selective acks may show more holes
      } else if (++dup_acks_ >= kFastRetransmitDupAcks) {
        enter_recovery(now);
      }
    }
  }

  void on_close(bool abort) {
    std::lock_guard lock(mutex_);
    if (state_ == State::open || state_ == State::connecting) {
      ACCL_LOG_WARN("udp: {} closed the link{}", format_address(peer_), abort ? " (error)" : "");
      state_ = State::broken;
      cv_.notify_all();
    }
  }

  // Retransmission, keepalive and liveness; returns true while the link
  // has data in flight (the send thread then wakes more often).
  bool on_timer(Clock::time_point now) {
    std::lock_guard lock(mutex_);
    if (state_ != State::open) return false;
    if (!unacked_.empty() && now >= rto_deadline_) {
      // Detect-and-report mode waits just as long before it calls a datagram
      // lost, only without resending: an acknowledgement merely slower than
      // the initial RTO (a receiver thread descheduled for 20 ms on a loaded
      // machine or under ThreadSanitizer) is not a loss. Real losses are
      // mostly seen sooner by the receiver (a gap in the sequence).
      if (++retries_ > tuning_.max_retries) {
        break_locked(tuning_.retransmit ? "no acknowledgement after retries" : "datagram not acknowledged", true);
        return false;
      }
      if (tuning_.retransmit) enter_recovery(now, true);
      rto_ = std::min(rto_ * 2, tuning_.max_rto);
      rto_deadline_ = now + rto_;
    }
    if (unacked_.empty() && now - last_sent_ >= tuning_.keepalive_interval) {
      PacketHeader h;
      h.type = kPing;
      h.conn_id = conn_id_;
      socket_->send_control(peer_sa_, h);
      last_sent_ = now;
    }
    if (now - last_heard_ > tuning_.liveness_timeout) {
      break_locked("peer silent", true);
      return false;
    }
    return !unacked_.empty();
  }

  // Transport stop: lets sends in progress bail out, gives what was sent
  // until `drain_deadline` to be acknowledged, then tells the receiver.
  void close(Clock::time_point drain_deadline) {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
      cv_.notify_all();
    }
    std::lock_guard sending(send_mutex_);
    std::unique_lock lock(mutex_);
    cv_.wait_until(lock, drain_deadline, [&] { return unacked_.empty() || state_ != State::open; });
    if (state_ == State::open) {
      state_ = State::closed;
      send_close_locked(false);
    } else if (state_ == State::connecting) {
      state_ = State::closed;
    }
    cv_.notify_all();
  }

 private:
  enum class State { connecting, open, broken, closed };
  struct Slot {
    uint32_t seq;
    std::vector<std::byte> bytes;
    Clock::time_point last_sent;
    bool sacked = false;  // the receiver holds it (selective ack)
  };

  uint32_t fail_send(bool torn, const char* why) {
    std::lock_guard lock(mutex_);
    return fail_send_locked(torn, why);
  }

  // A send cannot go on. Before anything was published the link stays as it
  // is (a timeout is not a failure of the link); a torn message aborts it so
  // the receiver drops the partial message.
  uint32_t fail_send_locked(bool torn, const char* why) {
    if (torn && state_ == State::open) break_locked(why, true);
    return abi::kLinkError;
  }

  void break_locked(const char* why, bool tell_peer) {
    ACCL_LOG_WARN("udp: link to {} is down: {}", format_address(peer_), why);
    state_ = State::broken;
    if (tell_peer) send_close_locked(true);
    cv_.notify_all();
  }

  void send_close_locked(bool abort) {
    PacketHeader h;
    h.type = kClose;
    h.flags = abort ? kAbort : 0;
    h.conn_id = conn_id_;
    // Best effort, twice: if both are lost the receiver's liveness timeout
    // still ends the link.
    socket_->send_control(peer_sa_, h);
    socket_->send_control(peer_sa_, h);
  }

  void enter_recovery(Clock::time_point now, bool timeout = false) {
    recovering_ = true;
    recover_seq_ = unacked_.back().seq + 1;
    resend_holes(now, timeout);
  }

  // Resends the front (the receiver's next expected datagram, missing by
  // definition of a duplicate or partial ack) and every datagram the
  // receiver lacks below one it selectively acked: lost, not in flight.
  void resend_holes(Clock::time_point now, bool force) {
    uint32_t highest_sacked = unacked_.front().seq;
    for (const Slot& slot : unacked_)
      if (slot.sacked) highest_sacked = slot.seq;
    for (Slot& slot : unacked_) {
      const bool hole = &slot == &unacked_.front() || (!slot.sacked && seq_before(slot.seq, highest_sacked));
      if (!hole || slot.sacked) continue;
      if (!force && now - slot.last_sent < kResendGap) continue;
      socket_->send_data(peer_sa_, slot.bytes.data(), slot.bytes.size());
      slot.last_sent = now;
      last_sent_ = now;
    }
  }

  void recycle(std::vector<std::byte>&& bytes) {
    if (spare_.size() < tuning_.max_window) spare_.push_back(std::move(bytes));
  }

  const std::shared_ptr<UdpSocket> socket_;
  const NetAddress peer_;
  const sockaddr_in peer_sa_;
  const uint32_t conn_id_;
  const UdpTuning tuning_;

  TimedMutex send_mutex_;
  uint32_t next_seq_ = 0;     // guarded by send_mutex_
  uint32_t next_msg_id_ = 0;  // guarded by send_mutex_

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  State state_ = State::connecting;
  bool closing_ = false;
  HelloStatus hello_status_ = kHelloRefused;
  uint32_t window_ = 1;
  std::deque<Slot> unacked_;
  std::vector<std::vector<std::byte>> spare_;
  std::chrono::milliseconds rto_;
  Clock::time_point rto_deadline_{};
  Clock::time_point last_sent_{};
  Clock::time_point last_heard_{};
  uint32_t retries_ = 0;
  int dup_acks_ = 0;
  bool recovering_ = false;
  uint32_t recover_seq_ = 0;  // recovery ends when everything before it is acked
};

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

std::unique_ptr<Transport> make_udp_transport(const TransportOptions& options, const UdpTuning& tuning) {
  return std::make_unique<UdpTransport>(options, tuning);
}

std::unique_ptr<Transport> make_udp_transport(const TransportOptions& options) {
  UdpTuning tuning;
  apply_udp_faults_from_environment(tuning);  // ACCL_EMU_FAULTS: datagram-level faults to recover from
  return make_udp_transport(options, tuning);
}

}  // namespace accl::emu
