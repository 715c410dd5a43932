// SPDX-License-Identifier: Apache-2.0
//
// The receive side of an emulated CCLO's data plane (public ACCL: depacketizer
// + RX buffer enqueue/dequeue engines), as the transports' Sink.
//
// Where a message lands:
//   header.strm != 0         -> the local kernel stream (id strm - 9), no arrival
//   rendezvous data (type 1) -> only into an open window matching
//                               (peer, ctx, rid, vaddr, bytes) exactly;
//                               arrival "rendezvous_done" at the end
//   eager/request/address    -> header-only: no storage; else an IDLE RX buffer
//                               big enough (record: ENQUEUED while written,
//                               then RESERVED + tag/len/src/seqn), else the
//                               bounded overflow store; arrival "message"
// Anything that cannot be placed is discarded with an error arrival, so the
// firmware fails the affected receive instead of waiting for it.
//
// Arrivals are queued when a message is complete. A link delivers its
// messages one after the other, so arrivals keep each link's order whatever
// storage each message got.
//
// Contract with transports (also in transport.hpp): every begin_message() is
// followed by exactly one end_message() with the same ticket, also when
// begin_message() returned nullptr; count 0 returns a valid non-null pointer.
#pragma once

#include "exchange_memory.hpp"
#include "kernel_stream.hpp"
#include "memory.hpp"
#include "transport.hpp"
#include "wakeup.hpp"

#include <accl/ring_queue.hpp>
#include <accl_fw/dataplane.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace accl::emu {

// Runs, on a transport's reader thread, the work an arrival it delivered
// enables (EmuDevice: the firmware passes; see Sink::reader_delivers).
class DeliveryDriver {
 public:
  // Before the arrival is queued: the doorbell ring it causes need not wake
  // the firmware thread.
  virtual void delivery_begins() = 0;
  // After: run what the arrival enabled, or hand over to the firmware thread.
  virtual void delivery_ended() = 0;

 protected:
  ~DeliveryDriver() = default;
};

class ReceiveSink final : public Sink {
 public:
  // stream_timeout: how long a stream_put message may wait for room in a
  // full kernel stream before it is dropped (ACCL_TIMEOUT_MS).
  ReceiveSink(ExchangeMemory& xmem, DeviceMemory& memory, KernelStream& streams, Wakeup& firmware_doorbell,
              std::chrono::nanoseconds stream_timeout = std::chrono::seconds(10));
  ~ReceiveSink() override;

  // --- Sink (transport threads) ---
  std::byte* begin_message(const NetAddress& from, const abi::WireHeader& header, ReceiveTicket& ticket) override;
  void end_message(const NetAddress& from, const abi::WireHeader& header, ReceiveTicket& ticket,
                   uint32_t status) override;
  void link_failed(const NetAddress& peer, uint32_t status) override;
  void reader_delivers() override {
    if (auto* d = delivery_driver_.load(std::memory_order_acquire)) d->delivery_begins();
  }
  void reader_delivered() override {
    if (auto* d = delivery_driver_.load(std::memory_order_acquire)) d->delivery_ended();
  }
  // Set once the driver can run (reader threads may already deliver); it
  // must outlive the transports' reader threads. Null: readers only ring.
  void set_delivery_driver(DeliveryDriver* driver) { delivery_driver_.store(driver, std::memory_order_release); }

  // --- firmware side (DataPlane) ---
  bool pop_arrival(fw::Arrival& out);
  bool pop_arrival_for(uint32_t context_id, uint32_t src, fw::Arrival& out);
  void release_payload(const fw::Arrival& a);
  // `landing_fn`: the reduce function of a window with w.reduce set (see
  // fw::Window); required for those, ignored otherwise.
  uint32_t open_window(const fw::Window& w, const ArithFunction* landing_fn = nullptr);
  // Closes a window that is no longer wanted (its receive completed or
  // failed). If its transfer is still in flight, the window is revoked:
  // returns once nothing writes into it any more (bounded wait), so a failed
  // receive never sees its buffer change afterwards; the rest of that
  // transfer is dropped.
  void close_window(const fw::Window& w);
  // Soft reset: drops queued arrivals (freeing their storage), windows (also
  // revoking those being written) and kernel stream data; messages in flight
  // are discarded when they end.
  void reset();

  size_t arrival_count() const { return arrival_count_.load(std::memory_order_acquire); }
  size_t open_windows() const;
  // Called (outside the sink's lock) when a link from `peer` fails, so the
  // sending side can drop its cached link too.
  void set_link_failure_hook(std::function<void(const NetAddress&)> hook) { on_link_failure_ = std::move(hook); }
  // Direct writes (see Sink::direct_window): `fence` is called, outside the
  // sink's lock, before a window offered for them is taken back without its
  // data (close_window of a still open window, reset); the window's memory
  // is the user's again once it returned. Unset: no window is offered.
  std::byte* direct_window(const NetAddress& peer, const abi::WireHeader& grant, size_t& bytes) override;
  void set_direct_write_fence(std::function<bool()> fence) { direct_write_fence_ = std::move(fence); }

 private:
  enum TicketKind : uint32_t {
    kDiscard = 0,
    kHeaderOnly = 1,
    kRxBuffer = 2,
    kOverflow = 3,
    kWindow = 4,
    kStream = 5,
  };
  // Per-message state for windows and kernel-stream messages (keyed by
  // ticket.token). RX buffer / overflow tickets carry their state inline.
  struct InFlight {
    uint32_t generation = 0;
    fw::Window window{};
    std::vector<std::byte> data;
    // Windows: the transport writes into the window only under this lease,
    // so close_window()/reset() can take the memory back mid-message.
    std::shared_ptr<WriteLease> lease;
    LandingReduce landing;  // windows that reduce on landing (window.reduce)
  };
  struct OpenWindow {
    fw::Window w;
    std::byte* ptr;
    LandingReduce landing;  // when w.reduce
    bool direct = false;    // offered for direct writes (direct_window)
  };
  using InFlightMap = std::unordered_map<uint64_t, std::unique_ptr<InFlight>>;
  static constexpr size_t kPreparedInFlight = 16;  // records made with the sink
  static constexpr size_t kMaxSpareInFlight = 64;  // records kept for reuse at most

  std::byte* place_eager(const NetAddress& from, const abi::WireHeader& h, ReceiveTicket& t);  // holds mutex_
  std::byte* place_rendezvous(const NetAddress& from, const abi::WireHeader& h, ReceiveTicket& t);  // holds mutex_
  // The open window of the transfer that rendezvous message `h` from `peer`
  // belongs to (peer, ctx, rid), or windows_.end(). Holds mutex_.
  std::vector<OpenWindow>::iterator window_of(const NetAddress& peer, const abi::WireHeader& h);
  void push_arrival(const fw::Arrival& a);  // holds mutex_
  // In-flight records are recycled with their map node (and the write lease
  // when nobody else holds it any more), so a rendezvous transfer allocates
  // nothing once the sink has seen as many at once as it ever will. Both hold mutex_.
  InFlight& add_in_flight(uint64_t token);
  void retire_in_flight(InFlightMap::iterator it);
  void release_locked(uint64_t token);
  void error_arrival(fw::ArrivalKind kind, const NetAddress& from, const abi::WireHeader& h, uint32_t status);
  // Revokes the leases (outside mutex_) and waits, bounded, until no piece is
  // being written into their windows.
  static void revoke_all(const std::vector<std::shared_ptr<WriteLease>>& leases, const char* why);
  // Runs the direct-write fence (outside mutex_) after an offered window was
  // taken back.
  void fence_direct_writes(const char* why);

  ExchangeMemory& xmem_;
  DeviceMemory& memory_;
  KernelStream& streams_;
  Wakeup& doorbell_;
  const std::chrono::nanoseconds stream_timeout_;
  std::function<void(const NetAddress&)> on_link_failure_;
  std::function<bool()> direct_write_fence_;
  std::atomic<DeliveryDriver*> delivery_driver_{nullptr};

  mutable std::mutex mutex_;
  uint32_t generation_ = 1;  // bumped by reset(); stale tickets/tokens are ignored
  RingQueue<fw::Arrival> arrivals_;  // no allocation per message (std::deque had one every few)
  std::atomic<size_t> arrival_count_{0};
  std::vector<OpenWindow> windows_;
  // A window was offered for direct writes since the last fence: a reset
  // fences even if that window is gone (a grant for it may still be held).
  bool offered_since_fence_ = false;
  uint64_t next_token_ = 1;
  InFlightMap in_flight_;
  std::vector<InFlightMap::node_type> spare_in_flight_;
  // Overflow payloads delivered and not yet released: bank offset -> generation.
  std::unordered_map<uint64_t, uint32_t> overflow_live_;
};

}  // namespace accl::emu
