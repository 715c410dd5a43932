// SPDX-License-Identifier: Apache-2.0
//
// Shared copies: the sender and the receiver of a direct write copy its
// payload together, each taking chunks until none is left.
#pragma once

#include "direct_writes.hpp"
#include "futex_wait.hpp"

#include <accl/log.hpp>

#include <sys/uio.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

// A direct write (direct_writes.hpp) is a copy made by the sender alone.
// Where a receiver waits for that payload, its core idles meanwhile: a
// 2-rank MPI_Scatterv of 1 MiB blocks had the root write 1 MiB into the
// receiver (84 us) and then copy its own block (66 us) while the receiver
// only polled; native MPI, whose receiver reads the root's block itself
// (CMA), took 79-87 us. So the sender publishes the data message's header
// first, with a descriptor naming its source buffer, and both copy: the
// sender writes chunks into the window (process_vm_writev, under the gate as
// before), the receiver, once it reaches the message in its ring, reads
// chunks from the source (process_vm_readv, under its window's lease). A
// chunk goes to whoever claims it first (CopyState::claims, in the sender's
// gate, in the slot it handed that receiver), so the sender never waits for a
// receiver that has no core: it copies everything itself then, as before,
// and only waits for chunks a receiver took and is copying. The sender
// returns once every chunk is in (its buffer is then the caller's again);
// the receiver delivers then too.
// A chunk one side took but cannot copy goes to the other (the sender's
// grant was voided by a fence for another window, or a kernel forbids one
// direction); one neither can copy fails the message on both sides.

constexpr uint32_t kSharedCopyMagic = 0x59504F43;  // "COPY"
// 128 KiB: eight claims for a 1 MiB payload, so the two cores finish within
// about 10 us of each other, and few enough calls that the kernel's per-call
// cost (page pinning starts per call) stays small.
constexpr size_t kSharedCopyChunkBytes = size_t{128} << 10;
// Claims count chunks in 16 bits (and a handed run's first chunk + 1):
// 4 GiB, the largest message, is 32768 chunks.
constexpr uint32_t kMaxSharedCopyChunks = 0xFFFE;
// The sender's runs of chunks after its first (one kernel call each):
// alone, 1 MiB (the receiver may still join between runs); with the
// receiver copying too, 256 KiB.
constexpr uint32_t kSharedCopyRunAlone = 8;
constexpr uint32_t kSharedCopyRunWithReceiver = 2;

struct SharedCopyDescriptor {
  uint32_t magic;
  uint32_t ticket;   // the transfer's, in CopyState::claims
  uint64_t source;   // the payload in the sending process
  uint64_t window;   // the granted window in the receiving process
  uint32_t chunks;
  uint32_t chunk_bytes;
  uint8_t pad[32];
};
static_assert(sizeof(SharedCopyDescriptor) == 64, "one ring slot");

// The claim protocol over one CopyState. One transfer at a time per state:
// the sender opens the next only after the last one's chunks are all done.
// The sender claims runs from the front, long ones while the receiver has
// not joined (fewer kernel calls when it copies alone: eight calls of
// 128 KiB made a 2-rank Alltoallv of 1 MiB 8 us slower than one), the
// receiver claims single chunks from the back.
class SharedCopy {
 public:
  struct Run {
    uint32_t first, count;
  };

  SharedCopy(DirectGate::CopyState& state, uint32_t ticket, uint32_t chunks)
      : s_(&state), ticket_(ticket), chunks_(chunks) {}

  // Sender, before it publishes the descriptor.
  void open() {
    s_->chunks_done.store(0, std::memory_order_relaxed);
    s_->to_sender.store(0, std::memory_order_relaxed);
    s_->to_receiver.store(0, std::memory_order_relaxed);
    s_->claims.store(uint64_t{ticket_} << 32, std::memory_order_release);
  }
  // Sender: up to `most` chunks nobody took yet, from the front.
  std::optional<Run> claim_front(uint32_t most) {
    uint64_t w = s_->claims.load(std::memory_order_acquire);
    for (;;) {
      const uint32_t front = front_of(w), left = left_of(w);
      if ((w >> 32) != ticket_ || left == 0) return std::nullopt;
      const uint32_t n = std::min(most, left);
      if (s_->claims.compare_exchange_weak(w, w + (uint64_t{n} << 16), std::memory_order_acq_rel))
        return Run{front, n};
    }
  }
  // Either side: every chunk nobody took yet (one run: from the front).
  std::optional<Run> claim_rest() { return claim_front(chunks_); }
  // Receiver: one chunk nobody took yet, from the back.
  std::optional<uint32_t> claim_back() {
    uint64_t w = s_->claims.load(std::memory_order_acquire);
    for (;;) {
      if ((w >> 32) != ticket_ || left_of(w) == 0) return std::nullopt;
      if (s_->claims.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel)) return chunks_ - back_of(w) - 1;
    }
  }
  // Sender: whether the receiver claimed a chunk of this transfer.
  bool receiver_joined() const { return back_of(s_->claims.load(std::memory_order_acquire)) != 0; }
  // Either side: chunks it took are in (or nobody needs them any more).
  // The last one wakes the sender.
  void done(uint32_t n = 1) {
    if (s_->chunks_done.fetch_add(n, std::memory_order_acq_rel) + n == chunks_) wake(s_->events);
  }
  // Chunks it took but cannot copy: the other side copies them. (Marked
  // with the ticket: a receiver still on an earlier transfer must not take
  // a run of this one.)
  void hand_to_sender(uint32_t chunk) {
    s_->to_sender.store(pack(Run{chunk, 1}), std::memory_order_release);
    wake(s_->events);
  }
  void hand_to_receiver(Run run) { s_->to_receiver.store(pack(run), std::memory_order_release); }
  std::optional<Run> take_handed(bool sender) {
    std::atomic<uint64_t>& word = sender ? s_->to_sender : s_->to_receiver;
    uint64_t w = word.load(std::memory_order_acquire);
    if ((w >> 32) != ticket_ || !word.compare_exchange_strong(w, 0, std::memory_order_acq_rel)) return std::nullopt;
    return Run{(static_cast<uint32_t>(w) & 0xFFFF) - 1, static_cast<uint32_t>(w) >> 16};
  }
  // Neither side could copy a chunk: the message is lost. Ends the chunks
  // nobody took.
  void fail_rest() {
    s_->failed.store(ticket_, std::memory_order_release);
    if (auto rest = claim_rest()) done(rest->count);
  }
  bool failed() const { return s_->failed.load(std::memory_order_acquire) == ticket_; }
  // Every chunk is in. (A sender that moved on to its next transfer finished
  // this one.)
  bool all_done() const {
    if ((s_->claims.load(std::memory_order_acquire) >> 32) != ticket_) return true;
    return s_->chunks_done.load(std::memory_order_acquire) >= chunks_;
  }
  // The sender sleeps on it: the last chunk and a chunk handed back bump it.
  std::atomic<uint32_t>& events() { return s_->events; }

  // Chunk counts fit 16 bits (kMaxSharedCopyChunks).
  uint64_t pack(Run run) const { return uint64_t{ticket_} << 32 | (run.count << 16) | (run.first + 1); }

 private:
  static uint32_t front_of(uint64_t w) { return static_cast<uint32_t>(w >> 16) & 0xFFFF; }
  static uint32_t back_of(uint64_t w) { return static_cast<uint32_t>(w) & 0xFFFF; }
  uint32_t left_of(uint64_t w) const { return chunks_ - front_of(w) - back_of(w); }

  DirectGate::CopyState* s_;
  uint32_t ticket_;
  uint32_t chunks_;
};

// The receiver's side of one shared copy, carried from poll to poll: the
// message stays the ring's current one until every chunk is in.
class SharedCopyReceiver {
 public:
  SharedCopyReceiver(DirectGate::CopyState& state, const SharedCopyDescriptor& d, size_t bytes, pid_t sender,
                     std::atomic<bool>& kernel_refuses_reads)
      : copy_(state, d.ticket, d.chunks), d_(d), bytes_(bytes), sender_(sender), refuses_(&kernel_refuses_reads) {}

  // Copies the chunks the sender handed us and, when `help`, the chunks
  // nobody took yet, into `dst` (null: the sink takes no payload; such
  // chunks are only counted, whoever polls; set to null when the window's
  // lease is revoked meanwhile). True once every chunk is in.
  bool advance(bool help, std::byte*& dst, const ReceiveTicket& ticket) {
    if (copy_.all_done()) return true;
    if (auto run = copy_.take_handed(/*sender=*/false)) {
      // The sender may not write these: if we cannot read one either, it is lost.
      for (uint32_t i = 0; i < run->count; ++i) {
        const Read r = read_chunk(run->first + i, dst, ticket);
        if (r == Read::refused || r == Read::failed) {
          copy_.fail_rest();
          copy_.done(run->count - i);
          break;
        }
        copy_.done();
      }
    }
    // After a refused read we claim no more: one chunk at most goes back.
    while ((help && !refused()) || dst == nullptr) {
      const auto chunk = copy_.claim_back();
      if (!chunk) break;
      switch (read_chunk(*chunk, dst, ticket)) {
        case Read::refused:
          copy_.hand_to_sender(*chunk);
          break;
        case Read::failed:
          copy_.fail_rest();
          copy_.done();
          break;
        default:
          copy_.done();
      }
    }
    return copy_.all_done();
  }
  uint32_t status() const { return copy_.failed() ? uint32_t{abi::kLinkError} : 0u; }

 private:
  enum class Read { copied, not_wanted, refused, failed };

  bool refused() const { return refuses_->load(std::memory_order_relaxed); }

  Read read_chunk(uint32_t chunk, std::byte*& dst, const ReceiveTicket& ticket) {
    const size_t offset = size_t{chunk} * d_.chunk_bytes;
    const size_t n = std::min<size_t>(d_.chunk_bytes, bytes_ - offset);
    if (dst == nullptr) return Read::not_wanted;
    if (refused()) return Read::refused;
    if (ticket.lease && !ticket.lease->begin_write()) {
      dst = nullptr;  // the window was taken back: its payload is not wanted any more
      return Read::not_wanted;
    }
    iovec local{dst + offset, n};
    iovec remote{reinterpret_cast<void*>(d_.source + offset), n};
    const ssize_t got = ::process_vm_readv(sender_, &local, 1, &remote, 1, 0);
    const int err = errno;
    if (ticket.lease) ticket.lease->end_write();
    if (got == static_cast<ssize_t>(n)) return Read::copied;
    if (got < 0 && kernel_forbids_cross_copy(err)) {
      if (!refuses_->exchange(true))
        ACCL_LOG_INFO("shm: process_vm_readv is not allowed ({}); senders copy direct writes alone",
                      std::strerror(err));
      return Read::refused;
    }
    ACCL_LOG_WARN("shm: reading {} bytes of a payload from pid {} failed: {}", n, sender_,
                  got < 0 ? std::strerror(err) : "short read");
    return Read::failed;
  }

  SharedCopy copy_;
  SharedCopyDescriptor d_;
  size_t bytes_;
  pid_t sender_;
  std::atomic<bool>* refuses_;
};

}  // namespace shm
}  // namespace accl::emu::transport_detail
