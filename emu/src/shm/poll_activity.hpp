// SPDX-License-Identifier: Apache-2.0
//
// The poll lease: while host threads poll the inbound rings, the reader
// threads park and leave delivery to them.
#pragma once

#include "ring_control.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

// When a host thread last polled the rings (Transport::poll). While it polls,
// the reader threads keep out of the way: they neither spin nor ask senders
// for every message (consumer_sleeping says parked: a send while the lease
// runs costs no futex wake and the receiving process no thread switch).
// They park instead and take over when the polls stop: a send that finds
// the lease over wakes the reader (notify_consumer), and a message that came
// while the lease ran and was left there waits at most until the control
// thread's next look (below).
// A host thread that stops polling to block (EmuDevice::wait) ends the lease
// at once (end_polling). Only hot polling (polls less than kHotPollGap
// apart) renews the lease: a poller that only looks now and then (the PMPI
// wait loop of a rank that waits long sleeps between polls) saves no
// hand-off worth a parked reader's periodic wake-ups; its readers go back to
// sleeping until a sender wakes them. While the lease runs, only every
// kPollsPerClockRead-th poll reads the clock (a clock read costs as much as
// the rest of an empty poll); the gap then counts as the average over the
// polls since the last read, and the lease starts at most that many polls
// late (far below its length).
// The end of a lease that lapses (nobody renewed it) is not watched by each
// parked reader (4 ranks on 2 cores, 1 MiB allreduce: 12 reader wake-ups per
// millisecond, each taking a core from a rank with work): senders see it in
// the ring (RingControl::consumer_lease_end), and for what came before it
// the transport's control thread, while any reader is parked, looks every
// ShmTuning::lease_backstop, or when the lease would end if that is later,
// and wakes them if it lapsed.
class PollActivity {
 public:
  explicit PollActivity(std::chrono::microseconds lease) : lease_ns_(std::chrono::nanoseconds(lease).count()) {}
  // A poll; true if it renewed the lease.
  bool touch() {
    // Relaxed loads and stores, no read-modify-write: racing pollers only
    // blur the count.
    const uint32_t untimed = untimed_polls_.load(std::memory_order_relaxed);
    if (untimed + 1 < kPollsPerClockRead && last_ns_.load(std::memory_order_relaxed) != kNever) {
      untimed_polls_.store(untimed + 1, std::memory_order_relaxed);
      return false;
    }
    untimed_polls_.store(0, std::memory_order_relaxed);
    const int64_t now = steady_now_ns();
    const int64_t previous = last_poll_ns_.load(std::memory_order_relaxed);
    last_poll_ns_.store(now, std::memory_order_relaxed);  // racing pollers: either time will do
    if (now - previous > kHotPollGapNs * (int64_t{untimed} + 1)) return false;
    last_ns_.store(now, std::memory_order_relaxed);
    return true;
  }
  // When the lease ends, as the rings tell it to senders (RingControl::
  // consumer_lease_end).
  int64_t lease_end_ns() const {
    if (drivers_.load(std::memory_order_seq_cst) > 0) return kLeaseHeld;
    const int64_t last = last_ns_.load(std::memory_order_seq_cst);
    return last == kNever ? kLeaseNone : last + lease_ns_;
  }
  // Whether the rings should be told `end`: it changed in kind, or moved by
  // an eighth of a lease (so a hot poller writes the rings' lease line a few
  // times per lease, not on every renewal; what the rings say then ends at
  // most that much early, which only costs a parked reader an early look).
  // A cheap check before the publisher's lock (ShmTransport::publish_lease).
  bool should_publish(int64_t end) const {
    const int64_t published = published_end_.load(std::memory_order_relaxed);
    const bool both_timed = lease_timed(end) && lease_timed(published);
    return end != published && !(both_timed && end > published && end - published < lease_ns_ / 8);
  }
  // Under the publisher's lock: the end the rings are told now.
  void set_published(int64_t end) { published_end_.store(end, std::memory_order_relaxed); }
  // seq_cst: pairs with a parking reader (parked_ store, then remaining()).
  void end() { last_ns_.store(kNever, std::memory_order_seq_cst); }
  // A reader parks / unparks. The first to park tells the control thread
  // (`watcher_fd`, an eventfd it polls), which may be asleep for a long slice
  // and must now watch the lease. seq_cst: the watcher that sees no parked
  // reader has not missed one that already checked the lease.
  void reader_parks() {
    if (parked_readers_.fetch_add(1, std::memory_order_seq_cst) == 0 && watcher_fd_ >= 0) {
      const uint64_t one = 1;
      [[maybe_unused]] const ssize_t ignored = ::write(watcher_fd_, &one, sizeof one);
    }
  }
  void reader_unparks() { parked_readers_.fetch_sub(1, std::memory_order_seq_cst); }
  bool readers_parked() const { return parked_readers_.load(std::memory_order_seq_cst) > 0; }
  void set_watcher(int fd) { watcher_fd_ = fd; }
  // A driving loop (Transport::driver_enters) keeps a running lease from
  // lapsing; its end renews the lease like a hot poll, unless the polls
  // were ended (the driver blocks).
  void driver_enters() { drivers_.fetch_add(1, std::memory_order_seq_cst); }
  void driver_leaves() {
    // Not over an end() that raced with us: that thread blocks.
    int64_t last = last_ns_.load(std::memory_order_relaxed);
    if (last != kNever) last_ns_.compare_exchange_strong(last, steady_now_ns(), std::memory_order_relaxed);
    drivers_.fetch_sub(1, std::memory_order_seq_cst);
  }
  // Rest of the lease (zero: nobody polls).
  std::chrono::microseconds remaining() const {
    const int64_t last = last_ns_.load(std::memory_order_seq_cst);
    if (last == kNever) return std::chrono::microseconds(0);
    if (drivers_.load(std::memory_order_seq_cst) > 0) return std::chrono::microseconds(lease_ns_ / 1000);
    const int64_t rest = last + lease_ns_ - steady_now_ns();
    return rest <= 0 ? std::chrono::microseconds(0) : std::chrono::microseconds(rest / 1000 + 1);
  }

 private:
  static constexpr int64_t kNever = INT64_MIN;
  static constexpr int64_t kHotPollGapNs = 50'000;
  static constexpr uint32_t kPollsPerClockRead = 8;
  const int64_t lease_ns_;
  std::atomic<int64_t> last_ns_{kNever};  // lease start; relaxed: a hint, parked readers also wake on every event
  std::atomic<int64_t> last_poll_ns_{kNever / 2};  // any poll (kNever / 2: no overflow in now - previous)
  std::atomic<uint32_t> untimed_polls_{0};  // polls since the last clock read
  std::atomic<uint32_t> parked_readers_{0};
  std::atomic<uint32_t> drivers_{0};  // driving loops running (driver_enters)
  std::atomic<int64_t> published_end_{kLeaseNone};  // what the rings were last told
  int watcher_fd_ = -1;  // set before any reader starts
};

}  // namespace shm
}  // namespace accl::emu::transport_detail
