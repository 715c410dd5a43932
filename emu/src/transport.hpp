// SPDX-License-Identifier: Apache-2.0
//
// Network transports of the emulator, all behind one interface (NCCL style).
// A transport moves whole messages (64-byte header + payload) between
// emulated CCLOs. The sending data plane produces the payload straight into
// transport memory through a PayloadWriter; the receiving data plane (a Sink)
// says where each payload must land before the bytes are copied, so every
// transport can deliver with at most one copy on each side.
#pragma once

#include <accl/abi.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace accl::emu {

using Clock = std::chrono::steady_clock;

// IPv4 (host byte order) + port: how a CCLO is named on the network and in
// communicator records.
struct NetAddress {
  uint32_t ip = 0;
  uint16_t port = 0;
  friend bool operator==(const NetAddress&, const NetAddress&) = default;
};
std::string to_string(const NetAddress& a);

// Per-message state a Sink keeps between begin_message and end_message.
struct ReceiveTicket {
  uint64_t token = 0;
  uint32_t rx_index = 0xFFFFFFFFu;
  uint32_t kind = 0;
  void* ptr = nullptr;
};

// The receive side of one emulated CCLO. Called by transports from any
// thread; must be thread-safe.
class Sink {
 public:
  virtual ~Sink() = default;
  // A message from `from` starts. Returns where the header.count payload
  // bytes must be written, or nullptr to discard them (the sink records the
  // error itself). Never blocks for long. Every begin_message() is followed
  // by exactly one end_message() with the same ticket, also after nullptr;
  // for header.count == 0 the result is a valid non-null pointer.
  // `from` is the peer's listening address (the one in communicator records).
  virtual std::byte* begin_message(const NetAddress& from, const abi::WireHeader& header,
                                   ReceiveTicket& ticket) = 0;
  // The payload was written (status 0) or the transport failed mid-message.
  virtual void end_message(const NetAddress& from, const abi::WireHeader& header, ReceiveTicket& ticket,
                           uint32_t status) = 0;
  // The link from `peer` broke (closed, lost or corrupt data): error bits.
  virtual void link_failed(const NetAddress& peer, uint32_t status) = 0;
};

// Produces the payload of one outgoing message in pieces.
class PayloadWriter {
 public:
  virtual ~PayloadWriter() = default;
  // Writes payload bytes [offset, offset + bytes) to `dst`. Transports call
  // it with increasing offsets; offset and bytes are multiples of 64 except
  // for the final piece. Returns error bits (0 = ok).
  virtual uint32_t write(std::byte* dst, size_t offset, size_t bytes) = 0;
};

// One direction to one peer. Messages on a link arrive in order or not at all
// (a loss is reported through Sink::link_failed on the receiver).
class Link {
 public:
  virtual ~Link() = default;
  // Sends header + header.count payload bytes; returns once the transport
  // owns the message. Bounded by `deadline`; returns error bits
  // (abi::kLinkError on failure or timeout).
  virtual uint32_t send(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point deadline) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string name() const = 0;
  // The address peers use to reach this CCLO through this transport.
  virtual NetAddress local_address() const = 0;
  // Starts delivering incoming messages to `sink` (until stop()).
  virtual void start(Sink& sink) = 0;
  // A link to `peer`, or nullptr if this transport cannot reach it
  // (e.g. the peer is not in this process / not on this host).
  virtual std::shared_ptr<Link> connect(const NetAddress& peer, Clock::time_point deadline) = 0;
  // Stops delivery and closes links; returns when no transport thread calls the sink any more.
  virtual void stop() = 0;
};

struct TransportOptions {
  NetAddress bind;             // address to listen on (port 0 = any free port)
  std::string job_secret;      // peers must present it; empty = no check
};

// Factories (emu/src/transport_*.cpp).
std::unique_ptr<Transport> make_inproc_transport(const TransportOptions& options);
std::unique_ptr<Transport> make_tcp_transport(const TransportOptions& options);
std::unique_ptr<Transport> make_udp_transport(const TransportOptions& options);
std::unique_ptr<Transport> make_shm_transport(const TransportOptions& options);

}  // namespace accl::emu
