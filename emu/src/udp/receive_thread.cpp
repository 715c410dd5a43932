// SPDX-License-Identifier: Apache-2.0
//
// The UDP transport's receive thread: peers' handshakes, data delivered in
// order into the sink's memory, acknowledgements, and the end of links whose
// senders fell silent.
#include "udp_transport.hpp"

#include "thread_name.hpp"

#include <accl/log.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace accl::emu::transport_detail {
namespace udp __attribute__((visibility("hidden"))) {

void UdpTransport::receive_loop() {
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

void UdpTransport::handle_request(const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes) {
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

void UdpTransport::on_corrupt(const sockaddr_in& src, bool on_receive_socket) {
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

void UdpTransport::handle_hello(const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes) {
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

void UdpTransport::handle_data(const sockaddr_in& src, const PacketHeader& h, const std::byte* body, size_t bytes) {
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

bool UdpTransport::deliver(InboundLink& in, const PacketHeader& h, const std::byte* body, size_t bytes) {
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

void UdpTransport::fail_inbound(std::map<InboundKey, std::unique_ptr<InboundLink>>::iterator it, const char* why, bool error, bool tell_sender) {
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

void UdpTransport::send_ack(InboundLink& in) {
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

void UdpTransport::flush_acks() {
  for (auto& [key, in] : inbound_)
    if (in->ack_pending) send_ack(*in);
}

void UdpTransport::send_receiver_close(const sockaddr_in& to, uint32_t conn_id) {
  PacketHeader h;
  h.type = kClose;
  h.flags = kFromReceiver;
  h.conn_id = conn_id;
  rx_->send_control(to, h);
}

void UdpTransport::expire_silent_senders(Clock::time_point now) {
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

}  // namespace udp
}  // namespace accl::emu::transport_detail
