// SPDX-License-Identifier: Apache-2.0
//
// The receiving side of one ring: its reader thread, and the polls of host
// threads that consume in its place.
#pragma once

#include "direct_writes.hpp"
#include "futex_wait.hpp"
#include "inbound_progress.hpp"
#include "mapping.hpp"
#include "outbox.hpp"
#include "poll_activity.hpp"
#include "ring_control.hpp"
#include "shared_copy.hpp"

#include "aligned_buffer.hpp"
#include "socket_address.hpp"
#include "socket_io.hpp"
#include "thread_name.hpp"
#include "transport.hpp"

#include <accl/log.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

// One inbound ring, consumed by its reader thread or by a host thread's
// poll(), whichever holds consumer_mutex_: messages are consumed in ring
// order, and the message being consumed (current_) lives here, not on the
// consumer's stack, so whoever holds the lock next carries it on where the
// last one stopped. The sink thus sees every link's messages once and in
// order. poll() never waits for long: it takes complete messages, and a
// message still streaming in as long as its pieces keep arriving within the
// spin budget (a fused reduce+send or a large copy produces them back to
// back); when the sender falls behind, the poll returns and the next poll
// carries on, or the reader thread once the polls end. Kernel-stream
// messages (they may wait for room) and the end of the link are the
// reader's.
class InboundRing {
 public:
  // Where the grants this ring brings for direct writes go, and what we
  // need to help copy the sender's direct writes (none if the sender has no
  // gate or we write no payload directly).
  struct PeerDirect {
    DirectWrites* direct = nullptr;  // our transport's
    std::shared_ptr<DirectGate> gate;  // the sender's
    pid_t pid = 0;                     // the sender's process
    uint32_t slot = 0;                 // ours in its gate
  };

  // `outbox`: the sender's (null if it has none).
  // `parked_slice`: the longest a parked reader sleeps before it looks at
  // the lease itself (a safety net behind the control thread's check).
  InboundRing(std::shared_ptr<Mapping> mapping, UniqueFd control, NetAddress from, Sink& sink,
              std::chrono::microseconds spin, std::chrono::microseconds parked_slice, size_t max_piece,
              PollActivity& polls, std::shared_ptr<PeerOutbox> outbox, PeerDirect direct)
      : control_fd(std::move(control)),
        outbox_(std::move(outbox)),
        direct_(std::move(direct)),
        mapping_(std::move(mapping)),
        ctl_(mapping_->control()),
        data_(mapping_->data()),
        ring_bytes_(mapping_->ring_bytes()),
        max_piece_(max_piece),
        from_(from),
        sink_(sink),
        spin_(spin),
        parked_slice_(parked_slice),
        polls_(polls) {}

  ~InboundRing() { join(); }

  void start() { thread_ = std::thread([this] { run(); }); }

  // Our transport stops: the reader leaves at its next wait.
  void request_stop() {
    stop_.store(true, std::memory_order_release);
    wake(ctl_.data_futex);
  }
  // The control socket hung up: the sender closed or died.
  void peer_gone() {
    peer_gone_.store(true, std::memory_order_release);
    wake(ctl_.data_futex);
  }
  // The polls stopped (the lease is over): a parked reader resumes at once.
  void polls_ended() {
    if (parked_.load(std::memory_order_seq_cst)) wake(ctl_.data_futex);
  }
  // The poll lease's end, for senders that find the reader parked.
  void publish_lease(int64_t end) { ctl_.consumer_lease_end.store(end, std::memory_order_release); }
  // A poll found a message it must leave to the reader.
  void unpark() {
    takeover_.store(true, std::memory_order_seq_cst);
    if (parked_.load(std::memory_order_seq_cst)) wake(ctl_.data_futex);
  }
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

  // Delivers up to kMaxPollMessages messages; see the class comment. True
  // when it delivered one. `leased`: a poll lease runs (the caller or
  // another poller polls again, or the polls end, or the lease lapses and
  // the reader takes over); otherwise (a sender waiting for room while
  // no lease runs) a message it leaves half consumed goes to the reader at
  // once.
  bool poll(bool leased = true) {
    // Most polls find the ring empty: say so without the lock. A message
    // published right after this check is taken by the next poll (or by the
    // reader once the polls stop). An unleased poll still looks, so that it
    // can hand a half-consumed message to the reader.
    const uint64_t first = ctl_.tail.load(std::memory_order_acquire);
    const uint64_t published = ctl_.head.load(std::memory_order_acquire) - first;
    if (leased && published == 0 && !shared_pending_.load(std::memory_order_acquire)) return false;
    return consume(leased, first, published);
  }

  UniqueFd control_fd;  // owned here, watched by the control thread

 private:
  // poll() once it found something published (or was not leased): out of
  // line, so that the empty poll stays a few loads.
  [[gnu::noinline]] bool consume(bool leased, uint64_t first, uint64_t published) {
    // When something is published, fetch the header's slot and, if it is
    // published too, the next one (a small message's payload) from the
    // sender's cache together. Read one after the other, they were two
    // cross-core transfers in sequence on every small message's way. Slots
    // not yet published are left alone: they are the sender's next writes.
    if (published >= sizeof(abi::WireHeader)) __builtin_prefetch(data_ + first % ring_bytes_);
    if (published > sizeof(abi::WireHeader)) __builtin_prefetch(data_ + (first + sizeof(abi::WireHeader)) % ring_bytes_);
    std::unique_lock lock(consumer_mutex_, std::try_to_lock);
    if (!lock.owns_lock() || ended_) return false;
    bool delivered = false;
    uint64_t tail = ctl_.tail.load(std::memory_order_relaxed);  // only the lock holder moves it
    for (int n = 0; n < kMaxPollMessages; ++n) {
      if (!current_.active) {
        abi::WireHeader header{};
        if (ctl_.head.load(std::memory_order_acquire) - tail < sizeof header) break;
        std::memcpy(&header, data_ + tail % ring_bytes_, sizeof header);
        if (header.strm != 0) {
          lock.unlock();
          unpark();
          break;
        }
        begin_current(tail);
      }
      copy_published(tail);
      // Streaming in: keep copying while the sender keeps publishing.
      while (!current_complete() && !current_.shared && spin_until([&] { return published_beyond(tail); }, spin_))
        copy_published(tail);
      if (!current_complete()) {
        // The sender fell behind: the next poll carries on from here, or
        // the reader thread once the polls stop (end_polling or the end of
        // their lease).
        if (!leased) {
          lock.unlock();
          unpark();
        }
        break;
      }
      end_current(0);
      delivered = true;
    }
    return delivered;
  }

  const std::shared_ptr<PeerOutbox> outbox_;
  const PeerDirect direct_;
  enum class Wait { ready, stopped, closed, aborted };
  // Bounds the time one poll() spends in one ring.
  static constexpr int kMaxPollMessages = 16;

  // The message being consumed; guarded by consumer_mutex_.
  struct Current {
    bool active = false;
    abi::WireHeader header{};
    ReceiveTicket ticket;
    std::byte* dst = nullptr;  // nullptr: discard (the sink refused it or revoked its window)
    size_t got = 0;            // payload bytes consumed so far
    uint32_t status = 0;       // error bits to end the message with (a bad descriptor)
    // A direct write being copied with the sender (see shared_copy.hpp): got
    // stays 0 until every chunk is in.
    std::optional<SharedCopyReceiver> shared;
  };

  // Takes the header at `tail` (published) and asks the sink where the
  // payload goes.
  void begin_current(uint64_t& tail) {
    current_ = Current{};
    current_.active = true;
    std::memcpy(&current_.header, data_ + tail % ring_bytes_, sizeof current_.header);
    tail += sizeof current_.header;
    if ((current_.header.flags & abi::kHdrTransportFrame) != 0) {
      take_frame(tail);
      return;
    }
    release(tail);
    current_.dst = sink_.begin_message(from_, current_.header, current_.ticket);
  }

  // A frame: the header is followed by a descriptor (published together)
  // that says where the payload is, or, for a grant, what it offers.
  void take_frame(uint64_t& tail) {
    current_.header.flags &= ~uint32_t{abi::kHdrTransportFrame};
    uint32_t magic = 0;
    std::memcpy(&magic, data_ + tail % ring_bytes_, sizeof magic);
    if (magic == kSharedMagic) {
      take_shared(tail);  // copies out of the outbox before it releases the descriptor
      return;
    }
    const abi::WireHeader& h = current_.header;
    DirectDataDescriptor direct{};
    SharedCopyDescriptor shared{};
    if (magic == kGrantMagic) {
      DirectGrantDescriptor d{};
      std::memcpy(&d, data_ + tail % ring_bytes_, sizeof d);
      // Recorded before the firmware hears of the grant, so its data finds it.
      if (direct_.direct != nullptr && h.count == 0)
        direct_.direct->grants.record({from_, direct_.pid, direct_.slot, h.ctx, h.rid, h.vaddr, h.host, d.address, d.bytes,
                                d.epoch, direct_.gate, 0});
    } else if (magic == kDirectMagic) {
      std::memcpy(&direct, data_ + tail % ring_bytes_, sizeof direct);
    } else if (magic == kSharedCopyMagic) {
      std::memcpy(&shared, data_ + tail % ring_bytes_, sizeof shared);
    } else {
      ACCL_LOG_ERROR("shm: link from {} sent a frame of unknown kind 0x{:x}", format_address(from_), magic);
      current_.status = abi::kLinkError;
    }
    tail += 64;
    release(tail);
    current_.dst = sink_.begin_message(from_, h, current_.ticket);
    // No payload follows in the ring: a direct write put it in the window
    // already, a grant has none, and anything else is malformed.
    current_.got = h.count;
    if (magic == kDirectMagic) {
      if (current_.dst != nullptr && reinterpret_cast<uintptr_t>(current_.dst) != direct.address) {
        ACCL_LOG_ERROR("shm: link from {} wrote a payload of {} bytes directly at 0x{:x}, but its window is at {}",
                       format_address(from_), h.count, direct.address, static_cast<void*>(current_.dst));
        current_.status = abi::kLinkError;
      }
    } else if (magic == kSharedCopyMagic) {
      take_shared_copy(shared);
    } else if (h.count != 0) {
      current_.status = abi::kLinkError;
    }
  }

  // A direct write the sender copies with our help (see shared_copy.hpp):
  // the message stays current until every chunk is in (copy_published
  // carries it on).
  void take_shared_copy(const SharedCopyDescriptor& d) {
    const abi::WireHeader& h = current_.header;
    const uint64_t covered = uint64_t{d.chunks} * d.chunk_bytes;
    if (!direct_.gate || d.chunks == 0 || d.chunks > kMaxSharedCopyChunks || d.chunk_bytes != kSharedCopyChunkBytes ||
        covered < h.count || covered - d.chunk_bytes >= h.count) {
      ACCL_LOG_ERROR("shm: link from {} sent a bad shared-copy descriptor ({} chunks of {} bytes for {})",
                     format_address(from_), d.chunks, d.chunk_bytes, h.count);
      current_.status = abi::kLinkError;
      return;
    }
    if (current_.dst != nullptr &&
        (reinterpret_cast<uintptr_t>(current_.dst) != d.window || current_.ticket.landing != nullptr)) {
      ACCL_LOG_ERROR("shm: link from {} shares the copy of {} bytes for a window at 0x{:x}, but its window is at {}",
                     format_address(from_), h.count, d.window, static_cast<void*>(current_.dst));
      current_.status = abi::kLinkError;
      current_.dst = nullptr;  // we copy nothing; the sender's writes go where it was granted
    }
    current_.shared.emplace(direct_.gate->copy_state(direct_.slot), d, h.count, direct_.pid,
                            direct_.direct->kernel_refuses_reads);
    current_.got = 0;
    advance_shared();
  }

  // Carries the current shared copy on: helps copy it on a thread that
  // waits idle or on our reader thread (not on a thread that tests between
  // pieces of its own work, nor on the firmware thread's polls), unless a
  // direct write of ours keeps this process busy (both ranks of a 2-rank
  // Alltoallv then copy their own sends; helping each other made it slower:
  // 168 -> 177 us).
  void advance_shared() {
    const DirectGate* own = direct_.direct->own_gate.get();
    const bool help = (t_thread_waits_idle || t_shm_reader_thread) && (own == nullptr || !own->writing());
    const bool complete = current_.shared->advance(help, current_.dst, current_.ticket);
    // No ring data announces the end of a shared copy: polls and the reader
    // come back for it while this is set.
    shared_pending_.store(!complete, std::memory_order_release);
    if (!complete) return;
    current_.status |= current_.shared->status();
    current_.got = current_.header.count;
  }

  // The payload of the current message is in the sender's outbox, named by
  // the descriptor at `tail` (published together with the header). Copies it
  // and only then releases the descriptor: from then on the sender may reuse
  // the slot.
  void take_shared(uint64_t& tail) {
    SharedDescriptor d{};
    std::memcpy(&d, data_ + tail % ring_bytes_, sizeof d);
    current_.dst = sink_.begin_message(from_, current_.header, current_.ticket);
    const size_t count = current_.header.count;
    const std::byte* src = outbox_ ? outbox_->payload(d, count) : nullptr;
    if (src == nullptr) {
      ACCL_LOG_ERROR("shm: link from {} sent a bad shared-payload descriptor (offset {}, {} bytes)",
                     format_address(from_), d.offset, count);
      current_.status = abi::kLinkError;
    } else if (current_.dst != nullptr && !store_payload(current_.ticket, current_.dst, 0, src, count)) {
      current_.dst = nullptr;  // the window was revoked
    }
    current_.got = count;
    tail += sizeof d;
    release(tail);
  }

  bool current_complete() const { return current_.got == current_.header.count; }
  bool published_beyond(uint64_t tail) const { return ctl_.head.load(std::memory_order_acquire) != tail; }

  // Copies what is published of the current message's payload, piece by
  // piece (each released at once, so the sender can refill the ring while
  // we copy). Pieces are 64-byte multiples except the last, whose padding
  // the producer published with it.
  void copy_published(uint64_t& tail) {
    if (current_.shared) {
      if (!current_complete()) advance_shared();
      return;
    }
    while (!current_complete()) {
      const size_t avail = ctl_.head.load(std::memory_order_acquire) - tail;
      if (avail == 0) return;
      const size_t contiguous = ring_bytes_ - tail % ring_bytes_;
      const size_t n = std::min({avail, contiguous, size_t{current_.header.count} - current_.got, max_piece_});
      if (current_.dst != nullptr &&
          !store_payload(current_.ticket, current_.dst, current_.got, data_ + tail % ring_bytes_, n))
        current_.dst = nullptr;
      current_.got += n;
      tail += round_up64(n);
      release(tail);
    }
  }

  void end_current(uint32_t status) {
    current_.active = false;
    sink_.end_message(from_, current_.header, current_.ticket, status | current_.status);
  }

  void run() {
    name_this_thread("accl-shm-rx");
    t_shm_reader_thread = true;
    Wait w = Wait::ready;
    std::unique_lock lock(consumer_mutex_, std::defer_lock);
    for (;;) {
      // Between messages (or when a poller left a message half consumed)
      // the lock is free, so host threads may poll. Any published data is
      // at least 64 bytes: a header or a padded piece.
      w = wait_data(sizeof(abi::WireHeader), /*may_park=*/true);
      lock.lock();
      uint64_t tail = ctl_.tail.load(std::memory_order_relaxed);
      if (!current_.active) {
        const bool header_ready = ctl_.head.load(std::memory_order_acquire) - tail >= sizeof(abi::WireHeader);
        if (w != Wait::ready && !header_ready) break;  // what was published has been delivered
        if (!header_ready) {  // a poll took it
          lock.unlock();
          continue;
        }
        begin_current(tail);
      }
      w = Wait::ready;  // the link may have ended, but after this message
      while (!current_complete()) {
        w = current_.shared ? wait_shared() : wait_data(1, /*may_park=*/false);
        if (w != Wait::ready) break;
        copy_published(tail);
      }
      if (w != Wait::ready) break;
      sink_.reader_delivers();
      end_current(0);
      lock.unlock();
      sink_.reader_delivered();  // no lock held: the work it runs may send and wait for ring space
    }
    // Still holding the lock: no poll() delivers anything after this.
    ended_ = true;
    shared_pending_.store(false, std::memory_order_release);
    const bool in_message = current_.active;
    if (in_message) {
      if (w != Wait::stopped)
        ACCL_LOG_WARN("shm: link from {} broke mid-message", format_address(from_));
      end_current(abi::kLinkError);
    }
    if (w != Wait::stopped) {
      if (!in_message) ACCL_LOG_INFO("shm: link from {} closed", format_address(from_));
      sink_.link_failed(from_, abi::kLinkError);
    }
    lock.unlock();
    // A sender still writing must fail instead of waiting for space.
    ctl_.consumer_state.store(kConsumerClosed, std::memory_order_release);
    wake(ctl_.space_futex);
    finished_.store(true, std::memory_order_release);
  }

  // The reader waits for the sender's last chunks of a shared copy (a
  // chunk of work on a running process, or one it hands us).
  Wait wait_shared() {
    for (int spins = 0;; ++spins) {
      advance_shared();
      if (current_complete()) return Wait::ready;
      if (stop_.load(std::memory_order_acquire)) return Wait::stopped;
      const uint32_t state = ctl_.producer_state.load(std::memory_order_acquire);
      if (state == kProducerAborted) return Wait::aborted;
      if (state == kProducerClosed || peer_gone_.load(std::memory_order_acquire)) return Wait::closed;
      if (spins < 64) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  void release(uint64_t tail) {
    ctl_.tail.store(tail, std::memory_order_release);
    notify(ctl_.space_futex, ctl_.producer_sleeping);
  }

  // Waits until `need` bytes past the released tail are published.
  // `may_park`: between messages, where a host thread's poll() may consume
  // instead of us (see PollActivity).
  Wait wait_data(size_t need, bool may_park) {
    auto ready = [&] {
      return ctl_.head.load(std::memory_order_acquire) - ctl_.tail.load(std::memory_order_acquire) >= need ||
             shared_pending_.load(std::memory_order_acquire);
    };
    auto event = [&] {
      return stop_.load(std::memory_order_acquire) || peer_gone_.load(std::memory_order_acquire) ||
             ctl_.producer_state.load(std::memory_order_acquire) != kProducerOpen;
    };
    // A poll left us a message it must not take (unpark): we deliver it
    // even while the polls go on.
    bool must_take = false;
    auto leave_to_pollers = [&] {
      if (!may_park) return false;
      if (takeover_.exchange(false, std::memory_order_seq_cst)) must_take = true;
      return !must_take && polls_.remaining().count() > 0;
    };
    bool spun = false;
    for (;;) {
      if (!event() && leave_to_pollers()) {
        // Parked: the pollers consume, even what is in the ring right now.
        // Senders wake us only once the lease is over (consumer_sleeping
        // says parked; notify_consumer); every other event (stop, hang-up,
        // close, abort, unpark, end of the polls) bumps the word. We take
        // over when a send finds the lease over, when a poll asks us to, or
        // when the control thread finds it lapsed (ShmTransport::watch_lease).
        parked_.store(true, std::memory_order_seq_cst);
        polls_.reader_parks();
        ctl_.consumer_sleeping.exchange(kConsumerParked, std::memory_order_acq_rel);
        const uint32_t seen = ctl_.data_futex.load(std::memory_order_acquire);
        if (!event() && !takeover_.load(std::memory_order_seq_cst) && polls_.remaining().count() > 0)
          futex_wait(ctl_.data_futex, seen, parked_slice_);
        ctl_.consumer_sleeping.store(kConsumerAwake, std::memory_order_relaxed);
        polls_.reader_unparks();
        parked_.store(false, std::memory_order_relaxed);
        continue;
      }
      if (ready()) return Wait::ready;
      if (stop_.load(std::memory_order_acquire)) return Wait::stopped;
      // Published data stays valid after the producer closed or died:
      // deliver it first (ready() above), then report the end.
      uint32_t state = ctl_.producer_state.load(std::memory_order_acquire);
      if (state == kProducerAborted) return Wait::aborted;
      if (state == kProducerClosed || peer_gone_.load(std::memory_order_acquire)) {
        return ready() ? Wait::ready : Wait::closed;
      }
      if (!spun) {
        // Spin once per wait; stop spinning as soon as a host or firmware
        // thread polls again (it takes the message without a wake-up).
        spun = true;
        if (spin_until([&] { return ready() || event() || leave_to_pollers(); }, spin_)) continue;
      }
      sleep_until(ctl_.data_futex, ctl_.consumer_sleeping,
                  [&] { return ready() || event() || takeover_.load(std::memory_order_seq_cst); },
                  std::chrono::duration_cast<std::chrono::microseconds>(kSleepSlice));
    }
  }

  const std::shared_ptr<Mapping> mapping_;
  RingControl& ctl_;
  std::byte* const data_;
  const size_t ring_bytes_;
  const size_t max_piece_;
  const NetAddress from_;
  Sink& sink_;
  const std::chrono::microseconds spin_;
  const std::chrono::microseconds parked_slice_;
  PollActivity& polls_;  // the transport's; readers count themselves in while parked
  std::mutex consumer_mutex_;  // held by whoever consumes: the reader thread or a poll()
  bool ended_ = false;         // guarded by consumer_mutex_: the reader reported the link's end
  Current current_;            // guarded by consumer_mutex_
  std::atomic<bool> stop_{false};
  std::atomic<bool> peer_gone_{false};
  std::atomic<bool> parked_{false};
  std::atomic<bool> takeover_{false};  // a poll left a message to us (unpark)
  std::atomic<bool> finished_{false};
  std::atomic<bool> shared_pending_{false};  // the current message is a shared copy not yet complete
  std::thread thread_;
};

}  // namespace shm
}  // namespace accl::emu::transport_detail
