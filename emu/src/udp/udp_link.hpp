// SPDX-License-Identifier: Apache-2.0
//
// The sending side of one UDP link: windowed, acknowledged, retransmitted.
#pragma once

#include "packet.hpp"
#include "udp_socket.hpp"

#include "hello_protocol.hpp"
#include "socket_address.hpp"
#include "socket_io.hpp"
#include "timed_mutex.hpp"
#include "transport.hpp"
#include "transport_tuning.hpp"

#include <accl/log.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace accl::emu::transport_detail {
namespace udp __attribute__((visibility("hidden"))) {

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

}  // namespace udp
}  // namespace accl::emu::transport_detail
