// SPDX-License-Identifier: Apache-2.0
//
// The control page at the start of every ring segment: the words producer
// and consumer share (positions, states, futex words, the receiver's poll
// lease), and the wake-up of a ring's consumer.
#pragma once

#include "futex_wait.hpp"
#include "transport.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

constexpr uint32_t kRingMagic = 0x474E4952;  // "RING"
constexpr uint32_t kRingVersion = 3;
constexpr size_t kControlBytes = 4096;
constexpr size_t kPageBytes = 4096;  // rings are whole pages (so every 64-byte slot is whole too)
constexpr size_t kMinRingBytes = size_t{64} << 10;
constexpr size_t kMaxRingBytes = size_t{1} << 30;

enum ProducerState : uint32_t { kProducerOpen = 0, kProducerClosed = 1, kProducerAborted = 2 };
enum ConsumerState : uint32_t { kConsumerOpen = 0, kConsumerClosed = 1 };
// consumer_sleeping: awake (0), asleep until the next publish (1), or parked
// while host threads poll (2): wake it only if their poll lease is over.
enum ConsumerSleeping : uint32_t { kConsumerAwake = 0, kConsumerAsleep = 1, kConsumerParked = 2 };
constexpr int64_t kLeaseNone = 0;  // a fresh (zeroed) segment has no lease
constexpr int64_t kLeaseHeld = INT64_MAX;
// A lease end that is a time (neither none nor held).
constexpr bool lease_timed(int64_t end) { return end != kLeaseNone && end != kLeaseHeld; }

// The clock of poll leases, in ns: the receiver's PollActivity and the
// senders that read its lease end from the ring use the same one.
inline int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// The control page at the start of each segment. Producer and consumer
// words live on separate cache lines.
struct RingControl {
  uint32_t magic;
  uint32_t version;
  uint64_t ring_bytes;
  uint32_t sender_pid;  // diagnostics (ipcs-style inspection of a live segment)
  uint32_t reserved;

  alignas(64) std::atomic<uint64_t> head;  // bytes published by the producer
  std::atomic<uint32_t> data_futex;        // bumped to wake the consumer
  std::atomic<uint32_t> consumer_sleeping;
  std::atomic<uint32_t> producer_state;    // ProducerState

  alignas(64) std::atomic<uint64_t> tail;  // bytes released by the consumer
  std::atomic<uint32_t> space_futex;       // bumped to wake the producer
  std::atomic<uint32_t> producer_sleeping;

  // Apart from tail: the producer reads it on every send, and the line stays
  // shared in both caches because it changes only when the consumer closes.
  // (On tail's line each read would pull the line from the consumer's core.)
  alignas(64) std::atomic<uint32_t> consumer_state;  // ConsumerState

  // The receiving process's poll lease (PollActivity), for a producer that
  // finds the reader parked (consumer_sleeping == kConsumerParked): when the
  // lease ends (steady-clock ns, the same clock in every process of a host),
  // kLeaseNone (no lease) or kLeaseHeld (a driving loop holds it). Written
  // by the receiving process a few times per lease at most, on a line of its
  // own (ShmTransport::publish_lease). It may say the lease ends up to an
  // eighth of a lease earlier than it does (a reader woken early parks
  // again), never later. Processes in different time namespaces would not
  // share the clock: the emulator's processes of one job share a host and
  // namespace.
  alignas(64) std::atomic<int64_t> consumer_lease_end;
};
static_assert(sizeof(RingControl) <= kControlBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "ring words are shared between processes: they must be lock-free");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex words are 32-bit");

// notify() for the consumer of a ring, after publishing: a reader parked
// under the receiving process's poll lease is left to the pollers while the
// lease runs and woken once it is over, so a message that comes after the
// polls stopped is taken at once (same handshake as notify()).
inline void notify_consumer(RingControl& ctl) {
  const uint32_t sleeping = ctl.consumer_sleeping.fetch_add(0, std::memory_order_acq_rel);
  if (sleeping == kConsumerAwake) return;
  if (sleeping == kConsumerParked) {
    const int64_t end = ctl.consumer_lease_end.load(std::memory_order_acquire);
    if (end == kLeaseHeld || (lease_timed(end) && steady_now_ns() < end)) return;
  }
  wake(ctl.data_futex);
}

}  // namespace shm
}  // namespace accl::emu::transport_detail
