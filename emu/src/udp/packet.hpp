// SPDX-License-Identifier: Apache-2.0
//
// The UDP transport's datagrams: our own framing and a small reliability
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
#pragma once

#include "crc32c.hpp"
#include "hello_protocol.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace accl::emu::transport_detail {
namespace udp __attribute__((visibility("hidden"))) {

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

inline uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Serial-number order for 32-bit sequence numbers that wrap.
inline bool seq_before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

inline void seal(std::byte* datagram, size_t bytes) {
  auto* h = reinterpret_cast<PacketHeader*>(datagram);
  h->crc = 0;
  h->crc = crc32c_update(~0u, datagram, bytes) ^ ~0u;
}

inline bool verify(std::byte* datagram, size_t bytes) {
  if (bytes < sizeof(PacketHeader)) return false;
  auto* h = reinterpret_cast<PacketHeader*>(datagram);
  const uint32_t crc = h->crc;
  h->crc = 0;
  const bool ok = (crc32c_update(~0u, datagram, bytes) ^ ~0u) == crc;
  h->crc = crc;
  return ok && h->magic == kPacketMagic && h->length == bytes - sizeof(PacketHeader);
}

}  // namespace udp
}  // namespace accl::emu::transport_detail
