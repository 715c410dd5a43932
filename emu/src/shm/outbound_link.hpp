// SPDX-License-Identifier: Apache-2.0
//
// The sending side of one ring: the link a sender writes messages into,
// piece by piece, through the outbox or straight into a granted window.
#pragma once

#include "direct_writes.hpp"
#include "futex_wait.hpp"
#include "shared_copy.hpp"
#include "inbound_progress.hpp"
#include "mapping.hpp"
#include "outbox.hpp"
#include "ring_control.hpp"

#include "aligned_buffer.hpp"
#include "socket_address.hpp"
#include "socket_io.hpp"
#include "timed_mutex.hpp"
#include "transport.hpp"
#include "transport_tuning.hpp"

#include <accl/log.hpp>
#include <accl/spin.hpp>

#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

// How often a sender looks at the control socket for a dead receiver.
constexpr auto kLivenessCheck = std::chrono::milliseconds(1);

// CLOCK_MONOTONIC_COARSE, in ns: a quarter of the cost of steady_clock on
// every send, and its few milliseconds of granularity suit the liveness
// check's interval.
inline int64_t coarse_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}
// How long a reader thread that sends sleeps between polls of its own
// process's inbound rings while it waits for room (ShmLink::wait_space).
constexpr auto kReaderSendSlice = std::chrono::microseconds(100);

class ShmLink final : public Link {
 public:
  // `outbox`: ours, if the receiver mapped it (null: no shared payloads).
  // `copy_slot`: the receiver's slot in our gate, if it has one (where we
  // share copies with it).
  ShmLink(std::shared_ptr<Mapping> mapping, UniqueFd control_fd, NetAddress peer, const ShmTuning& tuning,
          std::chrono::microseconds spin, InboundProgress& inbound, std::shared_ptr<Outbox> outbox,
          DirectWrites& direct, std::optional<uint32_t> copy_slot)
      : inbound_(inbound),
        outbox_(std::move(outbox)),
        direct_(direct),
        copy_slot_(copy_slot),
        mapping_(std::move(mapping)),
        ctl_(mapping_->control()),
        data_(mapping_->data()),
        ring_bytes_(mapping_->ring_bytes()),
        max_piece_(std::max<size_t>(round_up64(tuning.max_piece_bytes), 4096)),
        control_fd_(std::move(control_fd)),
        peer_(peer),
        spin_(spin) {}

  ~ShmLink() override { close(); }

  uint32_t send(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point deadline) override {
    std::unique_lock lock(send_mutex_, std::defer_lock);
    if (!lock.try_lock_until(deadline)) return abi::kLinkError;
    if (uint32_t err = check_usable()) return err;
    if (direct_.min_bytes != 0 && header.strm == 0 && (header.flags & abi::kHdrTransportFrame) == 0) {
      if (header.msg_type == abi::kMsgRendezvousAddr) return send_grant_locked(header, payload, deadline);
      if (header.msg_type == abi::kMsgRendezvousData) {
        if (auto done = send_direct_locked(header, payload, deadline)) return *done;
      }
    }
    return send_locked(header, payload, deadline);
  }

  // Through the outbox (see Outbox): the ring gets the header and a
  // descriptor, the payload is copied into the outbox once for all peers.
  uint32_t send_shared(const abi::WireHeader& header, PayloadWriter& payload, uint64_t shared_key,
                       Clock::time_point deadline) override {
    if (!outbox_ || header.strm != 0 || header.count < kMinSharedBytes || header.count > outbox_->max_payload() ||
        (header.flags & abi::kHdrTransportFrame) != 0)
      return send(header, payload, deadline);
    std::unique_lock lock(send_mutex_, std::defer_lock);
    if (!lock.try_lock_until(deadline)) return abi::kLinkError;
    if (uint32_t err = check_usable()) return err;
    // Shared payloads keep the outbox (one copy by us, one by each receiver,
    // measured as fast as writing every window ourselves); a grant the
    // receiver offered for this window is used up all the same.
    if (direct_.min_bytes != 0 && header.msg_type == abi::kMsgRendezvousData) direct_.grants.take(peer_, header);
    const uint64_t pos = head_;
    const Wait w = wait_space(pos, kFrameBytes, deadline);
    if (w != Wait::ready) return unpublished_failure(w);
    uint32_t err = 0;
    const auto offset =
        outbox_->acquire(shared_key, header.count, payload, Outbox::Reader{mapping_, pos + kFrameBytes}, err);
    if (!offset) return err != 0 ? err : send_locked(header, payload, deadline);
    SharedDescriptor d{};
    d.magic = kSharedMagic;
    d.offset = *offset;
    d.key = shared_key;
    publish_frame(pos, header, &d);
    return 0;
  }

  bool broken() const { return broken_.load(std::memory_order_acquire) || closing_.load(std::memory_order_acquire); }

  // Graceful close (transport stop or last reference gone): the receiver
  // drains what was published, then reports the link closed.
  void close() {
    if (closing_.exchange(true)) return;
    wake(ctl_.space_futex);  // a send sleeping for space sees closing_ at once
    std::lock_guard lock(send_mutex_);  // waits for a send in progress to bail out
    uint32_t open = kProducerOpen;
    ctl_.producer_state.compare_exchange_strong(open, kProducerClosed, std::memory_order_acq_rel);
    wake(ctl_.data_futex);
    ::shutdown(control_fd_.get(), SHUT_RDWR);
  }

 private:
  enum class Wait { ready, timeout, closed };

  uint32_t check_usable() {
    if (broken_.load(std::memory_order_acquire) || closing_.load(std::memory_order_acquire)) return abi::kLinkError;
    if (receiver_gone()) {
      break_link("receiver closed the link");
      return abi::kLinkError;
    }
    return 0;
  }

  // send() once the send lock is held and the link is usable.
  uint32_t send_locked(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point deadline) {
    const size_t count = header.count;
    uint64_t pos = head_;
    Wait w = wait_space(pos, sizeof header, deadline);
    if (w != Wait::ready) return unpublished_failure(w);
    std::memcpy(data_ + pos % ring_bytes_, &header, sizeof header);
    pos += sizeof header;
    if (count == 0) {
      publish(pos);
      return 0;
    }
    bool published = false;  // once true, a failure tears the message: abort the link
    for (size_t offset = 0; offset < count;) {
      w = wait_space(pos, 64, deadline);
      if (w != Wait::ready) {
        if (!published) return unpublished_failure(w);
        if (w == Wait::timeout) {
          // Says why the receiver made no room (issue 37, defect 6: under
          // load a 4 MiB rendezvous send found its ring full for the whole
          // ACCL_TIMEOUT_MS with the receiver's reader marked asleep).
          abort_link(("send timed out mid-message (" + ring_state(pos) + ")").c_str());
        } else {
          abort_link("link closed mid-message");
        }
        return abi::kLinkError;
      }
      const size_t contiguous = ring_bytes_ - pos % ring_bytes_;
      const size_t want = std::min({contiguous, count - offset, max_piece_});
      const size_t piece = std::min(free_space(pos, want), want);
      if (uint32_t err = payload.write(data_ + pos % ring_bytes_, offset, piece)) {
        if (!published) return err;  // the header was never published
        abort_link("payload writer failed mid-message");
        return err | abi::kLinkError;
      }
      pos += round_up64(piece);
      offset += piece;
      publish(pos);
      published = true;
    }
    return 0;
  }

  // A frame: the header, marked as one, and a 64-byte descriptor, both
  // whole slots of the ring (positions are multiples of 64).
  static constexpr size_t kFrameBytes = sizeof(abi::WireHeader) + 64;
  void publish_frame(uint64_t pos, const abi::WireHeader& header, const void* descriptor) {
    abi::WireHeader framed = header;
    framed.flags |= abi::kHdrTransportFrame;
    std::memcpy(data_ + pos % ring_bytes_, &framed, sizeof framed);
    std::memcpy(data_ + (pos + sizeof framed) % ring_bytes_, descriptor, 64);
    publish(pos + kFrameBytes);
  }

  // A grant: offers its window for direct writes if the sink allows (see
  // DirectGate).
  uint32_t send_grant_locked(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point deadline) {
    if (!direct_.own_gate || direct_.sink == nullptr || header.count != 0 || header.msg_bytes < direct_.min_bytes)
      return send_locked(header, payload, deadline);
    // The epoch is read before the sink looks: a fence after this read voids
    // the grant, and one before it closed the window, so the sink refuses.
    const uint64_t epoch = direct_.own_gate->epoch();
    size_t bytes = 0;
    std::byte* window = direct_.sink->direct_window(peer_, header, bytes);
    if (window == nullptr) return send_locked(header, payload, deadline);
    const uint64_t pos = head_;
    const Wait w = wait_space(pos, kFrameBytes, deadline);
    if (w != Wait::ready) return unpublished_failure(w);
    DirectGrantDescriptor d{};
    d.magic = kGrantMagic;
    d.epoch = epoch;
    d.address = reinterpret_cast<uintptr_t>(window);
    d.bytes = bytes;
    publish_frame(pos, header, &d);
    return 0;
  }

  // Rendezvous data for a window the receiver granted for direct writes: the
  // payload goes straight into it, the ring carries the header. nullopt: no
  // such grant, a payload that is not a plain copy, or the write was refused
  // (the caller sends through the ring).
  std::optional<uint32_t> send_direct_locked(const abi::WireHeader& header, PayloadWriter& payload,
                                             Clock::time_point deadline) {
    // The grant is used up whatever happens: one window, one transfer. (Only
    // windows of at least min_bytes were offered, and take() checks the size.)
    const auto grant = direct_.grants.take(peer_, header);
    if (!grant || direct_.kernel_refuses.load(std::memory_order_relaxed)) return std::nullopt;
    const std::byte* src = payload.contiguous_source(header.count);
    if (src == nullptr) return std::nullopt;
    // While it lasts, this process helps copy no peer's payload (and peers
    // see it in our gate).
    struct InFlight {
      DirectGate* gate;
      explicit InFlight(DirectGate* g) : gate(g) {
        if (gate != nullptr) gate->write_begins();
      }
      ~InFlight() {
        if (gate != nullptr) gate->write_ends();
      }
    } in_flight(direct_.own_gate.get());
    // Shared only once a plain direct write reached this peer: a kernel that
    // forbids copies between the two processes (Yama's ptrace_scope, say)
    // then refuses that write, and the payload takes the ring instead.
    if (copy_slot_ && direct_.share_copies && direct_.own_gate && wrote_directly_)
      return send_shared_copy_locked(*grant, header, src, deadline);
    if (direct_.write(*grant, src, header.count) != DirectWrites::Wrote::all) return std::nullopt;
    wrote_directly_ = true;
    const uint64_t pos = head_;
    const Wait w = wait_space(pos, kFrameBytes, deadline);
    if (w != Wait::ready) return unpublished_failure(w);
    DirectDataDescriptor d{};
    d.magic = kDirectMagic;
    d.address = grant->address;
    publish_frame(pos, header, &d);
    return 0;
  }

  // A direct write that the receiver helps copy (see shared_copy.hpp): the
  // header and descriptor go first, then we copy the chunks nobody took yet
  // and wait for the ones the receiver is copying.
  uint32_t send_shared_copy_locked(const DirectGrants::Grant& grant, const abi::WireHeader& header,
                                   const std::byte* src, Clock::time_point deadline) {
    const size_t bytes = header.count;
    static_assert((uint64_t{1} << 32) / kSharedCopyChunkBytes <= kMaxSharedCopyChunks, "any message's chunks fit");
    const auto chunks = static_cast<uint32_t>((bytes + kSharedCopyChunkBytes - 1) / kSharedCopyChunkBytes);
    const uint64_t pos = head_;
    const Wait w = wait_space(pos, kFrameBytes, deadline);
    if (w != Wait::ready) return unpublished_failure(w);
    if (++copy_ticket_ == 0) copy_ticket_ = 1;
    SharedCopy copy(direct_.own_gate->copy_state(*copy_slot_), copy_ticket_, chunks);
    copy.open();
    SharedCopyDescriptor d{};
    d.magic = kSharedCopyMagic;
    d.ticket = copy_ticket_;
    d.source = reinterpret_cast<uintptr_t>(src);
    d.window = grant.address;
    d.chunks = chunks;
    d.chunk_bytes = static_cast<uint32_t>(kSharedCopyChunkBytes);
    publish_frame(pos, header, &d);

    bool can_write = true;
    auto write_run = [&](SharedCopy::Run run) {
      const size_t offset = size_t{run.first} * kSharedCopyChunkBytes;
      const size_t n = std::min(size_t{run.count} * kSharedCopyChunkBytes, bytes - offset);
      switch (direct_.write(grant, src + offset, n, offset)) {
        case DirectWrites::Wrote::all:
          return copy.done(run.count);
        case DirectWrites::Wrote::voided:  // a fence for some window: the receiver's lease decides
        case DirectWrites::Wrote::refused: {
          // The receiver reads this run and every chunk nobody took (runs
          // from the front are contiguous): we write no more.
          can_write = false;
          if (auto rest = copy.claim_rest()) run.count += rest->count;
          return copy.hand_to_receiver(run);
        }
        case DirectWrites::Wrote::failed:
          copy.fail_rest();
          return copy.done(run.count);
      }
    };
    // Short runs while the receiver copies too or says it would (the two
    // then finish together), long ones otherwise (fewer kernel calls).
    auto next_run = [&] {
      return copy.receiver_joined() ? kSharedCopyRunWithReceiver : grant.gate->would_help() ? 1 : kSharedCopyRunAlone;
    };
    for (uint32_t most = next_run(); can_write; most = next_run()) {
      const auto run = copy.claim_front(most);
      if (!run) break;
      write_run(*run);
    }
    if (uint32_t err = wait_shared_copy(copy, can_write, write_run, deadline)) return err;
    // The reader may sleep on this ring while the message waits for its
    // chunks (no ring data tells it they are in).
    notify_consumer(ctl_);
    if (copy.failed()) {
      // The receiver gets the message with an error; later messages could
      // not tell whether this one failed (one failure word per slot).
      abort_link("a shared copy failed: neither side could copy a chunk");
      return abi::kLinkError;
    }
    return 0;
  }

  // Until every chunk of `copy` is in: copies what the receiver hands back,
  // and otherwise waits like a sender waiting for room (it consumes our
  // inbound rings meanwhile: the receiver may be waiting for us too). On
  // any early return the chunks nobody took are failed, so that the
  // receiver copies nothing from our buffer, which is the caller's again.
  template <class WriteRun>
  uint32_t wait_shared_copy(SharedCopy& copy, bool& can_write, WriteRun& write_run, Clock::time_point deadline) {
    const auto spin_end = Clock::now() + spin_;
    bool spinning = true;
    for (;;) {
      const uint32_t seen = copy.events().load(std::memory_order_acquire);
      if (copy.all_done()) return 0;
      if (auto run = copy.take_handed(/*sender=*/true)) {
        if (can_write) {
          write_run(*run);
        } else {  // neither side can copy it: the rest is lost
          copy.fail_rest();
          copy.done(run->count);
        }
        continue;
      }
      const bool consumed = inbound_.poll_inbound();
      if (spinning) {
        if (Clock::now() < spin_end) {
          if (!consumed) std::this_thread::yield();
          continue;
        }
        spinning = false;
        inbound_.stop_polling_inbound();
      }
      if (consumed && t_shm_reader_thread) continue;
      const char* why = closing_.load(std::memory_order_acquire) || broken_.load(std::memory_order_acquire)
                            ? "the link closed during a shared copy"
                        : receiver_gone()               ? "receiver closed the link during a shared copy"
                        : Clock::now() >= deadline ? "a shared copy timed out waiting for the receiver's chunks"
                                                        : nullptr;
      if (why != nullptr) {
        copy.fail_rest();
        abort_link(why);
        return abi::kLinkError;
      }
      const auto slice = t_shm_reader_thread ? kReaderSendSlice : std::chrono::microseconds(1000);
      futex_wait(copy.events(), seen, until(deadline, slice));
    }
  }

  uint32_t unpublished_failure(Wait w) {
    // Nothing of this message is visible to the receiver: only a closed
    // link is broken, a timeout leaves it usable.
    if (w == Wait::closed) break_link("receiver closed the link");
    return abi::kLinkError;
  }

  bool receiver_gone() {
    if (ctl_.consumer_state.load(std::memory_order_acquire) != kConsumerOpen) return true;
    const int64_t now = coarse_now_ns();
    if (now - last_liveness_check_ns_ < std::chrono::nanoseconds(kLivenessCheck).count()) return false;
    last_liveness_check_ns_ = now;
    return peer_hung_up(control_fd_.get());
  }

  // Bytes free from `pos` on. The consumer's tail is read only when the
  // last value seen leaves too little room: with a roomy ring most sends
  // never touch the tail's cache line, which the consumer keeps writing.
  size_t free_space(uint64_t pos, size_t need) {
    size_t free = ring_bytes_ - (pos - seen_tail_);
    if (free < need) {
      seen_tail_ = ctl_.tail.load(std::memory_order_acquire);
      free = ring_bytes_ - (pos - seen_tail_);
    }
    return free;
  }

  // The common case, room at once, inline; the waiting out of line.
  Wait wait_space(uint64_t pos, size_t need, Clock::time_point deadline) {
    if (free_space(pos, need) >= need) return Wait::ready;
    return wait_for_space(pos, need, deadline);
  }

  // Called when wait_space() found no room; every loop below looks again
  // before it waits.
  [[gnu::noinline]] Wait wait_for_space(uint64_t pos, size_t need, Clock::time_point deadline) {
    auto ready = [&] { return free_space(pos, need) >= need; };
    // The receiver may be a host thread sending to us just the same (the
    // exchanges of an allreduce): consuming its messages meanwhile frees its
    // ring while it frees ours, with no reader thread woken on either side.
    if (spin_.count() > 0) {
      const auto spin_end = Clock::now() + spin_;
      for (;;) {
        const bool consumed = inbound_.poll_inbound();
        if (ready()) return Wait::ready;
        if (Clock::now() >= spin_end) break;
        if (!consumed) {
          for (int i = 0; i < 32 && !ready(); ++i) cpu_relax();
          std::this_thread::yield();
        }
      }
    }
    // Sleeping now: our readers must not stay parked for a poll lease.
    inbound_.stop_polling_inbound();
    // A reader thread that sends (it runs the firmware passes its arrival
    // enabled) is the one that would drain its own ring: the receiver may
    // be a reader sending to us just the same, and both would wait for room
    // until their deadline. It keeps consuming its process's inbound rings
    // between short sleeps instead.
    const bool drains_rings = t_shm_reader_thread;
    for (;;) {
      if (ready()) return Wait::ready;
      if (closing_.load(std::memory_order_acquire) || broken_.load(std::memory_order_acquire)) return Wait::closed;
      if (receiver_gone()) return Wait::closed;
      if (Clock::now() >= deadline) return Wait::timeout;
      if (drains_rings && inbound_.poll_inbound()) continue;
      auto stop_or_ready = [&] { return ready() || closing_.load(std::memory_order_acquire) ||
                                        ctl_.consumer_state.load(std::memory_order_acquire) != kConsumerOpen; };
      // The ring is full: if its reader is parked and the receiving
      // process's polls stopped, only the reader can make room, and no
      // publish of ours will wake it. Wake it if the lease is over, and
      // look again when the lease ends.
      notify_consumer(ctl_);
      auto slice = drains_rings ? kReaderSendSlice : std::chrono::microseconds(20000);
      if (ctl_.consumer_sleeping.load(std::memory_order_acquire) == kConsumerParked) {
        const int64_t end = ctl_.consumer_lease_end.load(std::memory_order_acquire);
        if (lease_timed(end))
          slice = std::clamp(std::chrono::microseconds((end - steady_now_ns()) / 1000 + 1),
                             std::chrono::microseconds(1), slice);
      }
      // Short slices: a receiver that dies without closing is only seen on
      // the control socket.
      sleep_until(ctl_.space_futex, ctl_.producer_sleeping, stop_or_ready, until(deadline, slice));
    }
  }

  // The receiving side of the ring as this producer sees it, for errors.
  std::string ring_state(uint64_t pos) const {
    static constexpr const char* kSleeping[] = {"awake", "asleep", "parked"};
    const uint32_t sleeping = ctl_.consumer_sleeping.load(std::memory_order_acquire);
    const int64_t lease = ctl_.consumer_lease_end.load(std::memory_order_acquire);
    std::string lease_text = lease == kLeaseNone   ? "no poll lease"
                             : lease == kLeaseHeld ? "poll lease held by a driving loop"
                                                   : "poll lease ends in " +
                                                         std::to_string((lease - steady_now_ns()) / 1000000) + " ms";
    return std::to_string(pos - ctl_.tail.load(std::memory_order_acquire)) + " of " + std::to_string(ring_bytes_) +
           " ring bytes unread, reader " + (sleeping < 3 ? kSleeping[sleeping] : "?") + ", " + lease_text;
  }

  void publish(uint64_t pos) {
    head_ = pos;
    ctl_.head.store(pos, std::memory_order_release);
    notify_consumer(ctl_);
  }

  void break_link(const char* why) {
    if (!broken_.exchange(true)) ACCL_LOG_WARN("shm: link to {} is down: {}", format_address(peer_), why);
  }

  // The message being written is torn: tell the reader not to deliver it.
  void abort_link(const char* why) {
    break_link(why);
    ctl_.producer_state.store(kProducerAborted, std::memory_order_release);
    wake(ctl_.data_futex);
  }

  TimedMutex send_mutex_;
  InboundProgress& inbound_;
  const std::shared_ptr<Outbox> outbox_;
  DirectWrites& direct_;
  const std::optional<uint32_t> copy_slot_;
  uint32_t copy_ticket_ = 0;  // guarded by send_mutex_: the last shared copy's
  bool wrote_directly_ = false;  // guarded by send_mutex_: a plain direct write to this peer worked
  const std::shared_ptr<Mapping> mapping_;
  RingControl& ctl_;
  std::byte* const data_;
  const size_t ring_bytes_;
  const size_t max_piece_;
  UniqueFd control_fd_;
  const NetAddress peer_;
  const std::chrono::microseconds spin_;
  uint64_t head_ = 0;  // guarded by send_mutex_
  uint64_t seen_tail_ = 0;  // guarded by send_mutex_; the consumer's tail as last read (free_space)
  int64_t last_liveness_check_ns_ = 0;  // guarded by send_mutex_; coarse_now_ns()
  std::atomic<bool> broken_{false};
  std::atomic<bool> closing_{false};
};

}  // namespace shm
}  // namespace accl::emu::transport_detail
