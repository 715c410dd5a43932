// SPDX-License-Identifier: Apache-2.0
//
// Direct writes: a rendezvous payload written by the sender straight into
// the receiver's window (process_vm_writev), one copy instead of two.
#pragma once

#include "mapping.hpp"
#include "ring_control.hpp"
#include "socket_io.hpp"
#include "transport.hpp"

#include <accl/log.hpp>

#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

// A rendezvous payload for one peer would be copied twice through a ring
// (sender into it, receiver out of it). Instead, the receiver offers its
// window with the grant and the sender writes the payload there itself with
// process_vm_writev (cross-memory attach, as Open MPI's vader BTL does with
// CMA): one copy, made by the sender, which never waits for a receiver that
// has no core.
//   1. The receiving link frames a grant (kMsgRendezvousAddr) whose window
//      the sink offers (Sink::direct_window) with a DirectGrantDescriptor:
//      the window's address in the receiving process, its size, and the
//      epoch of the receiving transport's gate, read before the sink looked.
//   2. The sender's reader records it (DirectGrants) before the firmware
//      hears of the grant.
//   3. The sender's data message for exactly that window (same ctx, rid,
//      address, size) is written into it in pieces, each under the gate, and
//      the ring carries only the header and a DirectDataDescriptor.
// The gate is a page (a memfd the receiving transport passes to every peer
// with ShmHello) holding an epoch and, per writing peer, a count of pieces
// being written. A writer enters only while the epoch is that of its grant.
// When the sink takes an offered window back before its data arrived (a
// failed receive, a reset), fence() bumps the epoch and waits until no
// writer is in: no grant issued so far lets anybody write any more, and
// those transfers go through the ring like before (and are dropped like any
// late data). A fence is rare, so one epoch per transport is enough; the
// counts are per peer so that a peer that died mid-piece holds up no fence.

// The errors with which a kernel forbids copies between two processes
// (Yama's ptrace_scope, a seccomp filter, no CMA), rather than failing one.
inline bool kernel_forbids_cross_copy(int err) { return err == EPERM || err == ENOSYS || err == EACCES; }

constexpr uint32_t kGrantMagic = 0x544E5247;   // "GRNT"
constexpr uint32_t kDirectMagic = 0x54434944;  // "DICT"

struct DirectGrantDescriptor {
  uint32_t magic;
  uint32_t reserved;
  uint64_t epoch;    // of the receiver's gate when the window was offered
  uint64_t address;  // the window in the receiving process
  uint64_t bytes;    // its size: the data message must carry exactly this
  uint8_t pad[32];
};
static_assert(sizeof(DirectGrantDescriptor) == 64, "one ring slot");

struct DirectDataDescriptor {
  uint32_t magic;
  uint32_t reserved;
  uint64_t address;  // where the payload was written (the granted window)
  uint8_t pad[48];
};
static_assert(sizeof(DirectDataDescriptor) == 64, "one ring slot");

class DirectGate {
 public:
  static constexpr size_t kBytes = kPageBytes;
  // Writing peers one gate serves (one slot each, handed out when we dial
  // the peer); links beyond get no gate and copy through their rings.
  static constexpr uint32_t kSlots = kBytes / 64 - 2;

  // Ours: nullptr when the memfd cannot be made (no window is then offered).
  static std::shared_ptr<DirectGate> create() {
    void* base = nullptr;
    UniqueFd fd = create_shared_memfd("accl-shm-gate", kBytes, base);
    if (!fd) return nullptr;
    new (base) Page{};
    return std::make_shared<DirectGate>(std::move(fd), base);
  }
  // A peer's, passed with its hello.
  static std::shared_ptr<DirectGate> map(int fd, std::string& error) {
    void* base = map_peer_memfd(fd, kBytes, PROT_READ | PROT_WRITE, "gate", error);
    return base != nullptr ? std::make_shared<DirectGate>(UniqueFd(), base) : nullptr;
  }

  DirectGate(UniqueFd fd, void* base) : fd_(std::move(fd)), base_(base), page_(*static_cast<Page*>(base)) {}
  ~DirectGate() { ::munmap(base_, kBytes); }
  DirectGate(const DirectGate&) = delete;
  DirectGate& operator=(const DirectGate&) = delete;

  int fd() const { return fd_.get(); }

  // A payload the gate's owner sends to one peer (the process of a slot) is
  // copied by both of them, chunk by chunk (see shared_copy.hpp); this is
  // where they agree on who copies which chunk. Owner and peer both use
  // the slot the owner handed the peer.
  struct CopyState {
    std::atomic<uint64_t> claims{0};       // ticket << 32 | chunks claimed from the front << 16 | from the back
    std::atomic<uint32_t> chunks_done{0};  // chunks of that transfer copied (or given up)
    std::atomic<uint32_t> events{0};       // bumped when the sender may have to act: its futex word
    std::atomic<uint64_t> to_sender{0};    // ticket << 32 | a run of chunks the receiver took but cannot read
    std::atomic<uint64_t> to_receiver{0};  // ticket << 32 | a run of chunks the sender took but may not write
    std::atomic<uint32_t> failed{0};       // the last ticket one of whose chunks nobody could copy
  };
  CopyState& copy_state(uint32_t slot) { return page_.slots[slot].copy; }

  // Ours: a thread starts or stops waiting idle; a direct write of ours
  // starts or ends.
  void waiter_enters() { page_.idle_waiters.fetch_add(1, std::memory_order_relaxed); }
  void waiter_leaves() { page_.idle_waiters.fetch_sub(1, std::memory_order_relaxed); }
  void write_begins() { page_.writes_in_flight.fetch_add(1, std::memory_order_relaxed); }
  void write_ends() { page_.writes_in_flight.fetch_sub(1, std::memory_order_relaxed); }
  // Ours: a peer granted us a window to write. Collectives write within
  // microseconds of their grant; a grant whose data never comes (an
  // abandoned rendezvous) must not count for long.
  static constexpr int64_t kGrantFreshNs = 1'000'000;
  void grant_recorded() {
    page_.grant_fresh_until_ns.store(steady_now_ns() + kGrantFreshNs, std::memory_order_relaxed);
  }
  // Ours: copying peers' payloads would compete with our own writes (under
  // way, or granted and about to start).
  bool writing() const {
    return page_.writes_in_flight.load(std::memory_order_relaxed) != 0 ||
           steady_now_ns() < page_.grant_fresh_until_ns.load(std::memory_order_relaxed);
  }
  // A peer's (the receiver's of a shared copy): whether it would help now.
  // A hint only: the sender takes long runs unless it says yes.
  bool would_help() const {
    return page_.idle_waiters.load(std::memory_order_relaxed) != 0 && !writing();
  }
  uint64_t epoch() const { return page_.epoch.load(std::memory_order_seq_cst); }

  // Ours: a slot for the writing process `pid` (the peer we dial), or
  // nullopt when all are taken.
  // Dials to different peers may run at once: each takes its own slot (two
  // links sharing one would share its copy claims).
  std::optional<uint32_t> assign_slot(pid_t pid) {
    uint32_t slot = slots_used_.load(std::memory_order_relaxed);
    do {
      if (slot >= kSlots) return std::nullopt;
    } while (!slots_used_.compare_exchange_weak(slot, slot + 1, std::memory_order_acq_rel));
    // Until this store the slot's pid reads 0: nobody is writing through it yet.
    page_.slots[slot].pid.store(pid, std::memory_order_release);
    return slot;
  }

  // Writer side, in its slot: true if the grant of `epoch` still holds; then
  // end() after the piece. (seq_cst with fence(): either this sees the new
  // epoch, or the fence sees this writer.)
  bool begin(uint32_t slot, uint64_t epoch) {
    std::atomic<uint32_t>& writers = page_.slots[slot].writers;
    writers.fetch_add(1, std::memory_order_seq_cst);
    if (page_.epoch.load(std::memory_order_seq_cst) == epoch) return true;
    writers.fetch_sub(1, std::memory_order_seq_cst);
    return false;
  }
  void end(uint32_t slot) { page_.slots[slot].writers.fetch_sub(1, std::memory_order_seq_cst); }

  // Receiver side: whether a peer is writing a piece into one of our
  // windows right now (one whose process died mid-piece does not count).
  bool writer_in() const {
    const uint32_t used = slots_used_.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < used; ++i) {
      const Slot& s = page_.slots[i];
      if (s.writers.load(std::memory_order_acquire) != 0 && alive(s.pid.load(std::memory_order_acquire))) return true;
    }
    return false;
  }

  // Receiver side: voids every grant issued so far and waits, until
  // `deadline`, for the writers still in. A piece is one bounded
  // process_vm_writev, so this normally takes microseconds. A slot whose
  // process is gone (it died mid-piece, leaving its count up) writes no
  // more: it is not waited for.
  bool fence(Clock::time_point deadline) {
    page_.epoch.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t used = slots_used_.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < used; ++i) {
      const Slot& s = page_.slots[i];
      for (int spins = 0; s.writers.load(std::memory_order_seq_cst) != 0; ++spins) {
        if (!alive(s.pid.load(std::memory_order_relaxed))) break;
        if (Clock::now() >= deadline) return false;
        if (spins < 64) std::this_thread::yield();
        else std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    return true;
  }

 private:
  struct Slot {
    alignas(64) std::atomic<uint32_t> writers{0};  // pieces being written by the slot's process
    std::atomic<int32_t> pid{0};                   // that process (set by the gate's owner)
    CopyState copy;                                // the gate owner's sends to that process
  };
  struct Page {
    alignas(64) std::atomic<uint64_t> epoch{1};
    // The owner's threads that wait idle for a call (EmuDevice::drive_until),
    // and its direct writes under way: whether it would help copy now.
    alignas(64) std::atomic<uint32_t> idle_waiters{0};
    std::atomic<uint32_t> writes_in_flight{0};
    std::atomic<int64_t> grant_fresh_until_ns{0};  // a grant recorded lately: a write is about to start
    Slot slots[kSlots];
  };
  static_assert(sizeof(Page) <= kBytes);

  static bool alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH); }

  UniqueFd fd_;  // ours only (passed to peers)
  void* base_;
  Page& page_;
  std::atomic<uint32_t> slots_used_{0};  // ours only
};

// Grants that peers offered this process's sends (recorded by the reader of
// the ring they came on, taken by the link that sends the data). A fixed
// table: recording allocates nothing; when full, the oldest grant is
// forgotten (its transfer then goes through the ring).
class DirectGrants {
 public:
  struct Grant {
    NetAddress peer;  // the receiver (its listening address)
    pid_t pid = 0;
    uint32_t slot = 0;  // ours in the receiver's gate
    uint32_t ctx = 0, rid = 0;
    uint64_t vaddr = 0;
    uint8_t host = 0;
    uint64_t address = 0, bytes = 0, epoch = 0;
    std::shared_ptr<DirectGate> gate;  // null: free entry
    uint64_t stamp = 0;
  };

  void record(Grant g) {
    std::lock_guard lock(mutex_);
    // Where it goes: over a grant for the same transfer and address (a staged
    // receive grants one scratch window piece after piece), else into a free
    // entry, else over the oldest grant.
    Grant* same = nullptr;
    Grant* free = nullptr;
    Grant* oldest = nullptr;
    for (Grant& e : grants_) {
      if (!e.gate) {
        if (free == nullptr) free = &e;
      } else if (same_transfer(e, g.peer, g.ctx, g.rid, g.vaddr, g.host)) {
        same = &e;
      } else if (oldest == nullptr || e.stamp < oldest->stamp) {
        oldest = &e;
      }
    }
    g.stamp = ++stamp_;
    if (owner_gate_ != nullptr) owner_gate_->grant_recorded();
    *(same != nullptr ? same : free != nullptr ? free : oldest) = std::move(g);
  }

  // The grant for data message `h` to `peer`, removed from the table.
  std::optional<Grant> take(const NetAddress& peer, const abi::WireHeader& h) {
    std::lock_guard lock(mutex_);
    for (Grant& e : grants_) {
      if (e.gate && same_transfer(e, peer, h.ctx, h.rid, h.vaddr, h.host)) {
        std::optional<Grant> g(std::move(e));
        e = Grant{};
        if (g->bytes != h.count) return std::nullopt;  // not the whole window: the sink decides
        return g;
      }
    }
    return std::nullopt;
  }

  void clear() {
    std::lock_guard lock(mutex_);
    for (Grant& e : grants_) e = Grant{};
  }

  // Our gate, which a recorded grant marks as about to write
  // (DirectGate::writing): a process that will soon write its own sends does
  // not help copy its peers'. Set before any grant is recorded.
  void report_grants_to(DirectGate* gate) { owner_gate_ = gate; }

 private:
  static bool same_transfer(const Grant& e, const NetAddress& peer, uint32_t ctx, uint32_t rid, uint64_t vaddr,
                            uint8_t host) {
    return e.peer == peer && e.ctx == ctx && e.rid == rid && e.vaddr == vaddr && e.host == host;
  }

  std::mutex mutex_;
  std::array<Grant, 64> grants_{};
  DirectGate* owner_gate_ = nullptr;
  uint64_t stamp_ = 0;
};

// What links and readers of one transport share for direct writes.
struct DirectWrites {
  size_t min_bytes = 0;                   // smallest payload written directly; 0: off
  std::shared_ptr<DirectGate> own_gate;   // null: we offer no windows
  Sink* sink = nullptr;                   // set by start()
  DirectGrants grants;
  std::atomic<bool> kernel_refuses{false};  // process_vm_writev is not allowed here

  // Whether the receivers of our direct writes help copy (shared_copy.hpp).
  bool share_copies = true;
  // process_vm_readv from a peer is not allowed here: as a receiver we
  // leave shared copies to their senders.
  std::atomic<bool> kernel_refuses_reads{false};

  enum class Wrote { all, voided, refused, failed };
  // Writes `bytes` from `src` at `offset` into the granted window, piece by
  // piece under the receiver's gate. voided: the receiver's fence voided the
  // grant; refused: the kernel does not allow the write here (nothing is
  // wrong with the window in either case); failed: anything else (the
  // receiver died, say).
  Wrote write(const DirectGrants::Grant& g, const std::byte* src, size_t bytes, size_t offset = 0) {
    for (size_t done = 0; done < bytes;) {
      const size_t n = std::min(bytes - done, WriteLease::kMaxPieceBytes);
      if (!g.gate->begin(g.slot, g.epoch)) return Wrote::voided;
      iovec local{const_cast<std::byte*>(src + done), n};
      iovec remote{reinterpret_cast<void*>(g.address + offset + done), n};
      const ssize_t wrote = ::process_vm_writev(g.pid, &local, 1, &remote, 1, 0);
      const int err = errno;
      g.gate->end(g.slot);
      if (wrote != static_cast<ssize_t>(n)) {
        if (wrote < 0 && kernel_forbids_cross_copy(err)) {
          if (!kernel_refuses.exchange(true))
            ACCL_LOG_INFO("shm: process_vm_writev is not allowed ({}); payloads go through the rings",
                          std::strerror(err));
          return Wrote::refused;
        }
        if (wrote < 0 && err != ESRCH)
          ACCL_LOG_WARN("shm: direct write of {} bytes to pid {} failed: {}", n, g.pid, std::strerror(err));
        return Wrote::failed;
      }
      done += n;
    }
    return Wrote::all;
  }
};

}  // namespace shm
}  // namespace accl::emu::transport_detail
