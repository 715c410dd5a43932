// SPDX-License-Identifier: Apache-2.0
//
// Shared payloads: the sender's outbox, which every peer maps read-only.
#pragma once

#include "aligned_buffer.hpp"
#include "mapping.hpp"
#include "ring_control.hpp"
#include "socket_io.hpp"
#include "transport.hpp"

#include <accl/log.hpp>

#include <sys/mman.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

// A payload that several sends repeat (fw::Move::shared_payload: the direct
// allgather, the flat bcast and the allgather round of the 3- and 4-rank
// allreduce send one buffer to each peer) is copied once
// into the sending transport's outbox, a memfd that every peer maps read-only
// when its link is set up (the descriptor travels with ShmHello, SCM_RIGHTS).
// The rings then carry only the header, marked with abi::kHdrTransportFrame
// in the ring's copy, and a 64-byte SharedDescriptor. The receiver copies the
// payload from the outbox straight into the sink's memory and releases the
// descriptor only then. Sender copies per payload: 1 instead of one per peer
// (4 ranks, 1 MiB allgather: 5 instead of 7 MiB copied per rank and call).
//
// A slot of the outbox is written once and reused only after every ring that
// carries a descriptor for it released that descriptor or closed its
// consumer: nobody can be reading it then. When the outbox has no room the
// send copies the payload into the ring as usual, so a receiver that stalls
// (or dies) costs the sharing, never a wait or a wrong byte.

constexpr uint32_t kSharedMagic = 0x44524853;  // "SHRD"
// Smaller payloads go through the rings: the copy is cheap and in cache.
constexpr size_t kMinSharedBytes = size_t{64} << 10;

struct SharedDescriptor {
  uint32_t magic;
  uint32_t reserved;
  uint64_t offset;  // the payload is outbox bytes [offset, offset + header.count)
  uint64_t key;     // fw::Move::shared_payload (diagnostics)
  uint8_t pad[40];
};
static_assert(sizeof(SharedDescriptor) == 64, "one ring slot");

// The peer's outbox as a receiver maps it (read-only).
class PeerOutbox {
 public:
  PeerOutbox(const void* base, size_t bytes) : base_(static_cast<const std::byte*>(base)), bytes_(bytes) {}
  ~PeerOutbox() { ::munmap(const_cast<std::byte*>(base_), bytes_); }
  PeerOutbox(const PeerOutbox&) = delete;
  PeerOutbox& operator=(const PeerOutbox&) = delete;

  // The payload a descriptor names, or nullptr if it lies outside the outbox.
  // The first one maps and reads every page of the outbox (see
  // Outbox::pages_ready). Called by the ring's one consumer at a time; the
  // once_flag keeps that an assumption nothing depends on.
  const std::byte* payload(const SharedDescriptor& d, size_t count) {
    if (d.magic != kSharedMagic || d.offset > bytes_ || count > bytes_ - d.offset) return nullptr;
    std::call_once(mapped_, [this] {
      prefault_segment(const_cast<std::byte*>(base_), bytes_, /*creator=*/false, /*writable=*/false);
    });
    return base_ + d.offset;
  }

  static std::shared_ptr<PeerOutbox> map(int fd, size_t bytes, std::string& error) {
    void* base = map_peer_memfd(fd, bytes, PROT_READ, "outbox", error);
    return base != nullptr ? std::make_shared<PeerOutbox>(base, bytes) : nullptr;
  }

 private:
  const std::byte* base_;
  size_t bytes_;
  std::once_flag mapped_;
};

class Outbox {
 public:
  // nullptr when the memfd cannot be made: every send then uses the rings.
  static std::shared_ptr<Outbox> create(size_t bytes) {
    bytes = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
    void* base = nullptr;
    UniqueFd fd = create_shared_memfd("accl-shm-outbox", bytes, base);
    if (!fd) return nullptr;
    return std::make_shared<Outbox>(std::move(fd), static_cast<std::byte*>(base), bytes);
  }

  Outbox(UniqueFd fd, std::byte* base, size_t bytes) : fd_(std::move(fd)), base_(base), bytes_(bytes) {}
  ~Outbox() { ::munmap(base_, bytes_); }
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  int fd() const { return fd_.get(); }
  size_t bytes() const { return bytes_; }
  // Larger payloads go through the rings (two slots in flight at least).
  size_t max_payload() const { return bytes_ / 2; }

  // A ring that carries a descriptor for a slot.
  struct Reader {
    std::shared_ptr<Mapping> ring;
    uint64_t pos;  // ring position just past the descriptor
  };

  // The offset of the slot holding payload `key` (`count` bytes), filled by
  // `payload` if it is new; `reader` is registered before this returns, so
  // the slot stays until that ring releases it. nullopt: no room (err 0,
  // the caller sends through its ring) or the writer failed (err != 0).
  std::optional<uint64_t> acquire(uint64_t key, size_t count, PayloadWriter& payload, Reader reader,
                                  uint32_t& err) {
    err = 0;
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < used_; ++i) {
      Slot& s = slot(i);
      if (s.key != key || s.bytes != count) continue;
      if (s.readers_used == kMaxReaders) return std::nullopt;
      s.readers[s.readers_used++] = std::move(reader);
      return s.begin % bytes_;
    }
    while (used_ > 0 && released(slot(0))) {
      slot(0) = Slot{};  // drops its references to the rings
      first_ = (first_ + 1) % kMaxSlots;
      --used_;
    }
    if (used_ == kMaxSlots || !pages_ready()) return std::nullopt;
    const size_t need = round_up64(count);
    uint64_t begin = head_;
    if (begin % bytes_ + need > bytes_) begin += bytes_ - begin % bytes_;  // a slot never wraps
    const uint64_t oldest = used_ == 0 ? begin : slot(0).begin;
    if (begin + need - oldest > bytes_) return std::nullopt;
    err = payload.write(base_ + begin % bytes_, 0, count);
    if (err != 0) return std::nullopt;
    head_ = begin + need;
    Slot& s = slot(used_++);
    s.begin = begin;
    s.bytes = count;
    s.key = key;
    s.readers[0] = std::move(reader);
    s.readers_used = 1;
    return begin % bytes_;
  }

  // Transport stop: no more sends.
  void clear() {
    std::lock_guard lock(mutex_);
    for (Slot& s : slots_) s = Slot{};
    used_ = 0;
  }

 private:
  // Fixed tables: a send allocates nothing. More slots than payloads of
  // kMinSharedBytes fit a default outbox; a payload shared by more peers than
  // kMaxReaders goes to the rest of them through the rings.
  static constexpr size_t kMaxSlots = 64;
  static constexpr size_t kMaxReaders = 15;

  struct Slot {
    uint64_t begin = 0;  // monotonically increasing position; offset = begin % bytes_
    size_t bytes = 0;
    uint64_t key = 0;
    size_t readers_used = 0;
    std::array<Reader, kMaxReaders> readers{};
  };

  Slot& slot(size_t i) { return slots_[(first_ + i) % kMaxSlots]; }

  // The first shared payload allocates and touches every page of the outbox
  // (and each peer's first one maps and reads them all, PeerOutbox::payload):
  // left to their first use, the writer and every reader faulted a fresh
  // page in each 4 KiB of payload until the outbox had wrapped once, which a
  // 64 KiB bcast on 4 ranks does after 64 calls; 10-15 % of its calls took
  // 200-400 us instead of 30. Not when the outbox is made: a rank whose
  // collectives never share a payload (point-to-point only, or 8 ranks)
  // would keep its own and every peer's outbox resident for nothing. False
  // from then on (every shared send goes through the rings) when there is no
  // memory for the pages (a memory limit), where a touch would have died of
  // SIGBUS.
  bool pages_ready() {
    if (pages_ == Pages::untouched) {
      if (reserve_pages(fd_.get(), bytes_)) {
        prefault_segment(base_, bytes_, /*creator=*/true);
        pages_ = Pages::ready;
      } else {
        const int err = errno;
        ACCL_LOG_INFO("shm: no memory for the outbox ({}); shared payloads go through the rings", std::strerror(err));
        pages_ = Pages::unavailable;
      }
    }
    return pages_ == Pages::ready;
  }

  // Every reader's consumer released the descriptor (its tail passed it) or
  // closed for good. (A consumer whose process died keeps its slot: the
  // outbox then fills up and sends use the rings.)
  static bool released(const Slot& s) {
    for (size_t i = 0; i < s.readers_used; ++i) {
      const Reader& r = s.readers[i];
      const RingControl& ctl = r.ring->control();
      if (ctl.tail.load(std::memory_order_acquire) < r.pos &&
          ctl.consumer_state.load(std::memory_order_acquire) == kConsumerOpen)
        return false;
    }
    return true;
  }

  UniqueFd fd_;
  std::byte* const base_;
  const size_t bytes_;
  std::mutex mutex_;
  std::array<Slot, kMaxSlots> slots_{};  // slots [first_, first_ + used_) in allocation order
  size_t first_ = 0;
  size_t used_ = 0;
  uint64_t head_ = 0;  // where the next slot starts
  enum class Pages { untouched, ready, unavailable } pages_ = Pages::untouched;  // under mutex_
};

}  // namespace shm
}  // namespace accl::emu::transport_detail
