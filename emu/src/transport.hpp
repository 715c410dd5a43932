// SPDX-License-Identifier: Apache-2.0
//
// Network transports of the emulator, all behind one interface (NCCL style).
// A transport moves whole messages (64-byte header + payload) between
// emulated CCLOs. The sending data plane produces the payload straight into
// transport memory through a PayloadWriter; the receiving data plane (a Sink)
// says where each payload must land before the bytes are copied, so every
// transport can deliver with at most one copy on each side.
#pragma once

#include "arith.hpp"

#include <accl/abi.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
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

// Revocable permission to write one message's payload into memory the sink
// does not own for good (a rendezvous window in a user buffer: the receive
// may fail at its deadline while the data is still arriving). The transport
// brackets every piece it stores with begin_write()/end_write() and stores
// nothing more once begin_write() returned false; revoke() returns when no
// piece is being stored, so afterwards the memory is the user's again.
// Pieces are bounded (kMaxPieceBytes) and never wait for I/O while leased,
// so a revoke waits for at most one memcpy or non-blocking recv.
class WriteLease {
 public:
  static constexpr size_t kMaxPieceBytes = size_t{1} << 20;

  // true: the caller may store one piece now and must call end_write().
  bool begin_write() {
    uint32_t prev = state_.fetch_add(kWriter, std::memory_order_acq_rel);
    if ((prev & kRevoked) == 0) return true;
    end_write();
    return false;
  }
  void end_write() {
    uint32_t prev = state_.fetch_sub(kWriter, std::memory_order_acq_rel);
    if ((prev & kRevoked) != 0) {
      // A revoker may be waiting: taking the mutex orders this wake-up after
      // its predicate check, so it cannot be lost.
      { std::lock_guard<std::mutex> lock(mutex_); }
      idle_.notify_all();
    }
  }
  // Forbids further pieces and waits, until `deadline`, for the piece being
  // stored. false: a piece was still being stored at the deadline.
  bool revoke(std::chrono::steady_clock::time_point deadline) {
    state_.fetch_or(kRevoked, std::memory_order_acq_rel);
    std::unique_lock<std::mutex> lock(mutex_);
    return idle_.wait_until(lock, deadline,
                            [&] { return state_.load(std::memory_order_acquire) < kWriter; });
  }
  bool revoked() const { return (state_.load(std::memory_order_acquire) & kRevoked) != 0; }
  // Makes a lease usable for another transfer. Only for its sole owner (no
  // transport and no revoker holds it any more).
  void rearm() { state_.store(0, std::memory_order_release); }

 private:
  static constexpr uint32_t kRevoked = 1;
  static constexpr uint32_t kWriter = 2;  // state_ = writers * kWriter | revoked bit
  std::atomic<uint32_t> state_{0};
  std::mutex mutex_;
  std::condition_variable idle_;
};

// Reduce on landing (fw::Window::reduce): a window whose memory must end up
// holding operand[i] (+) payload[i]. Transports need not know: store_payload()
// and produce_payload() go through it, and the sink reduces whatever is left
// when the message ends (transports that write the destination themselves).
// The payload bytes of one message are stored by one thread at a time.
class LandingReduce {
 public:
  LandingReduce() = default;
  LandingReduce(ArithFunction fn, const std::byte* operand, std::byte* result)
      : fn_(fn), elem_bytes_(emu::elem_bytes(fn.type)), operand_(operand), result_(result) {}

  // Stores payload bytes [offset, offset + bytes) from `src`. In order and
  // element-aligned (the normal case), the result is computed straight from
  // `src`, which is then read once; otherwise the bytes land raw first.
  void store(size_t offset, const std::byte* src, size_t bytes) {
    if (offset == stored_ && reduced_ == stored_) {
      const size_t whole = bytes / elem_bytes_ * elem_bytes_;
      reduce(fn_, operand_ + offset, src, result_ + offset, whole / elem_bytes_);
      std::memcpy(result_ + offset + whole, src + whole, bytes - whole);
      stored_ += bytes;
      reduced_ += whole;
      return;
    }
    std::memcpy(result_ + offset, src, bytes);
    stored_raw(offset, bytes);
  }
  // Payload bytes [offset, offset + bytes) were written raw into the result:
  // reduces the whole elements of the in-order prefix now, while they are in
  // cache. Out-of-order bytes wait for finish().
  void stored_raw(size_t offset, size_t bytes) {
    if (offset != stored_) return;
    stored_ += bytes;
    reduce_raw_up_to(stored_);
  }
  // Every payload byte (`count` in all) is in place: reduces the rest.
  void finish(size_t count) { reduce_raw_up_to(count); }

 private:
  void reduce_raw_up_to(size_t end) {
    const size_t upto = end / elem_bytes_ * elem_bytes_;
    if (upto <= reduced_) return;
    reduce(fn_, operand_ + reduced_, result_ + reduced_, result_ + reduced_, (upto - reduced_) / elem_bytes_);
    reduced_ = upto;
  }

  ArithFunction fn_{};
  size_t elem_bytes_ = 1;
  const std::byte* operand_ = nullptr;
  std::byte* result_ = nullptr;
  size_t stored_ = 0;   // payload bytes [0, stored_) were stored, in order
  size_t reduced_ = 0;  // result bytes [0, reduced_) hold operand (+) payload; the rest of the stored prefix is raw
};

// Set while a host thread waits for a call with nothing else to do
// (EmuDevice::drive_until): a transport that consumes a message on that
// thread may spend its core on the message's payload (the shm transport's
// shared copies), where a thread that only tests between pieces of its own
// work (or the firmware thread) should not.
inline thread_local bool t_thread_waits_idle = false;

// Per-message state a Sink keeps between begin_message and end_message.
struct ReceiveTicket {
  uint64_t token = 0;
  uint32_t rx_index = 0xFFFFFFFFu;
  uint32_t kind = 0;
  void* ptr = nullptr;
  // Set by the sink when the destination may be taken back mid-message;
  // transports then store the payload through store_payload() (or bracket
  // their own pieces with the lease). Null: the memory stays valid until
  // end_message.
  std::shared_ptr<WriteLease> lease;
  // Set by the sink for a window that reduces on landing; owned by the sink
  // until end_message. Always comes with a lease.
  LandingReduce* landing = nullptr;
};

// Stores payload bytes [offset, offset + bytes) of a message whose
// destination `dst` (from begin_message) is governed by `ticket`. false: the
// destination was revoked, nothing more may be stored (the caller discards
// the rest of the message but still calls end_message).
inline bool store_payload(const ReceiveTicket& ticket, std::byte* dst, size_t offset, const void* src,
                          size_t bytes) {
  if (!ticket.lease) {
    std::memcpy(dst + offset, src, bytes);
    return true;
  }
  const auto* from = static_cast<const std::byte*>(src);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(bytes - done, WriteLease::kMaxPieceBytes);
    if (!ticket.lease->begin_write()) return false;
    if (ticket.landing != nullptr) ticket.landing->store(offset + done, from + done, n);
    else std::memcpy(dst + offset + done, from + done, n);
    ticket.lease->end_write();
    done += n;
  }
  return true;
}

// The receive side of one emulated CCLO. Called by transports from any
// thread; must be thread-safe.
class Sink {
 public:
  virtual ~Sink() = default;
  // A message from `from` starts. Returns where the header.count payload
  // bytes must be written, or nullptr to discard them (the sink records the
  // error itself). Never blocks for long. Every begin_message() is followed
  // by exactly one end_message() with the same ticket, also after nullptr;
  // for header.count == 0 the result is a valid non-null pointer. If the
  // sink sets ticket.lease, the pointer is valid only while the lease is
  // held (see WriteLease).
  // `from` is the peer's listening address (the one in communicator records).
  virtual std::byte* begin_message(const NetAddress& from, const abi::WireHeader& header,
                                   ReceiveTicket& ticket) = 0;
  // The payload was written (status 0) or the transport failed mid-message.
  virtual void end_message(const NetAddress& from, const abi::WireHeader& header, ReceiveTicket& ticket,
                           uint32_t status) = 0;
  // The link from `peer` broke (closed, lost or corrupt data): error bits.
  virtual void link_failed(const NetAddress& peer, uint32_t status) = 0;
  // A transport's own reader thread (not a poll() from the receiver's
  // threads) is about to end a message, and then has ended it while holding
  // no transport lock. The receiver may do the work the arrival enables
  // right there, on a thread that is awake anyway, instead of waking another
  // one for it (the emulated CCLO runs its firmware passes).
  virtual void reader_delivers() {}
  virtual void reader_delivered() {}
  // Direct writes (the shared-memory transport's kernel-assisted single
  // copy): `grant` is a rendezvous grant (kMsgRendezvousAddr) this CCLO is
  // about to send to `peer`. Returns the memory of the open window it grants
  // (its size in `bytes`) if the peer's transport may write the payload there
  // itself, before the data message's header arrives; nullptr if not (no
  // such window, or one that reduces on landing). From then on, taking that
  // window back before its data arrived first calls the direct-write fence
  // (Transport::fence_direct_writes), so nothing lands after a failed receive.
  virtual std::byte* direct_window(const NetAddress& /*peer*/, const abi::WireHeader& /*grant*/, size_t& /*bytes*/) {
    return nullptr;
  }
};

// Produces the payload of one outgoing message in pieces.
class PayloadWriter {
 public:
  virtual ~PayloadWriter() = default;
  // Writes payload bytes [offset, offset + bytes) to `dst`. Transports call
  // it with increasing offsets; offset and bytes are multiples of 64 except
  // for the final piece. Returns error bits (0 = ok).
  virtual uint32_t write(std::byte* dst, size_t offset, size_t bytes) = 0;
  // The payload, if it is a plain copy of `bytes` contiguous bytes of this
  // process's memory (no arithmetic, no conversion); nullptr otherwise.
  // Transports that move bytes without a local copy (direct writes) need it.
  virtual const std::byte* contiguous_source(size_t /*bytes*/) const { return nullptr; }
};

constexpr size_t kLandingPieceBytes = size_t{64} << 10;

// Lets `payload` produce a whole message straight into the destination `dst`
// (count bytes) that begin_message returned with `ticket` (in-process links:
// one copy). A leased destination is produced in bounded pieces, each under
// the lease; once revoked, the rest is not produced and 0 is returned (the
// message still ends normally and the sink drops it). Returns error bits.
inline uint32_t produce_payload(PayloadWriter& payload, std::byte* dst, size_t count, const ReceiveTicket& ticket) {
  if (!ticket.lease) return payload.write(dst, 0, count);
  // Reducing on landing: pieces small enough that the landed bytes are
  // still in cache when they are reduced.
  const size_t max_piece = ticket.landing != nullptr ? kLandingPieceBytes : WriteLease::kMaxPieceBytes;
  for (size_t offset = 0; offset < count;) {
    const size_t n = std::min(count - offset, max_piece);  // a multiple of 64 unless last
    if (!ticket.lease->begin_write()) return 0;
    const uint32_t err = payload.write(dst + offset, offset, n);
    if (err == 0 && ticket.landing != nullptr) ticket.landing->stored_raw(offset, n);
    ticket.lease->end_write();
    if (err != 0) return err;
    offset += n;
  }
  return 0;
}

// One direction to one peer. Messages on a link arrive in order or not at all
// (a loss is reported through Sink::link_failed on the receiver).
class Link {
 public:
  virtual ~Link() = default;
  // Sends header + header.count payload bytes; returns once the transport
  // owns the message. Bounded by `deadline`; returns error bits
  // (abi::kLinkError on failure or timeout).
  virtual uint32_t send(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point deadline) = 0;
  // The same for a payload that other sends with the same `shared_key`
  // repeat byte for byte (fw::Move::shared_payload), usually to other peers:
  // a transport may produce it once and let every receiver read that copy.
  // Keys are never reused for other bytes.
  virtual uint32_t send_shared(const abi::WireHeader& header, PayloadWriter& payload, uint64_t /*shared_key*/,
                               Clock::time_point deadline) {
    return send(header, payload, deadline);
  }
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
  // Stops delivery and closes links; returns when no transport thread (and
  // no poll()) calls the sink any more.
  virtual void stop() = 0;
  // Delivers, on the calling thread, messages that arrived completely and
  // that nobody else is delivering right now; never blocks. True when it
  // delivered something. Host threads that wait for a call poll so that a
  // message is taken, matched and completed without waking a transport
  // thread (see EmuDevice::test). Transports without reader threads of
  // their own (in-process: the sender delivers) have nothing to poll.
  virtual bool poll() { return false; }
  // Whether poll() can ever deliver (false: it is the default above), so
  // that pollers call it only on the transports where it can.
  virtual bool polls() const { return false; }
  // The polling host thread is about to block: transport threads must take
  // over delivery now rather than when they notice the polls stopped.
  virtual void end_polling() {}
  // A host thread begins / ends a loop that polls until its call completes
  // or it blocks (EmuDevice::drive_until). While one runs, transport threads
  // leave delivery to it however long it is off its core between polls
  // (oversubscribed, it yields); end_polling() still hands over at once. The
  // end starts the lease a poll would (the thread may poll again soon).
  virtual void driver_enters() {}
  virtual void driver_leaves() {}
  // The sink takes back a window it offered for direct writes
  // (Sink::direct_window) before its data arrived: returns once no peer
  // writes into any window of this CCLO any more and none will (direct
  // grants issued so far are void; their transfers go the normal way).
  // Bounded; false if a writer was still busy at the bound.
  virtual bool fence_direct_writes() { return true; }
  // A peer is writing a payload straight into this CCLO's memory right now
  // (a direct write under way): a call waiting for it is making progress
  // that no delivery shows until the whole payload is in.
  virtual bool peer_writing() const { return false; }
};

struct TransportOptions {
  NetAddress bind;             // address to listen on (port 0 = any free port)
  std::string job_secret;      // peers must present it; empty = no check
  unsigned host_processes = 0;  // ACCL processes on this host (EmuOptions); 0 = unknown
  unsigned host_cores = 0;      // CPUs they may use (EmuOptions); 0 = all the host's
};

// Factories (emu/src/transport_*.cpp).
std::unique_ptr<Transport> make_inproc_transport(const TransportOptions& options);
std::unique_ptr<Transport> make_tcp_transport(const TransportOptions& options);
std::unique_ptr<Transport> make_udp_transport(const TransportOptions& options);
std::unique_ptr<Transport> make_shm_transport(const TransportOptions& options);

}  // namespace accl::emu
