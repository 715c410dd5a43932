// SPDX-License-Identifier: Apache-2.0
//
// Test doubles for the transport suites: a sink that records and checks
// every callback, and payload writers that check the PayloadWriter contract.
#pragma once

#include "copy_writer.hpp"  // tests/shared
#include "transport.hpp"
#include "aligned_buffer.hpp"
#include "hello_protocol.hpp"
#include "job_secret.hpp"
#include "socket_address.hpp"
#include "socket_io.hpp"
#include "transport_tuning.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace accl::emu::test {

using namespace std::chrono_literals;

struct AddressLess {
  bool operator()(const NetAddress& a, const NetAddress& b) const {
    return address_key(a) < address_key(b);
  }
};

// Minor page faults of this process so far (every thread).
[[maybe_unused]] inline long minor_faults() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Deterministic payload bytes: a function of the message seed and the byte
// offset, so any misplaced, lost or corrupted piece is caught.
inline std::byte pattern_byte(uint32_t seed, size_t offset) {
  uint64_t x = (uint64_t{seed} << 32) ^ (offset / 8) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<std::byte>(x >> (8 * (offset % 8)));
}

inline void fill_pattern(std::byte* dst, uint32_t seed, size_t offset, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) dst[i] = pattern_byte(seed, offset + i);
}

// Index of the first wrong byte, or npos.
inline size_t check_pattern(const std::vector<std::byte>& data, uint32_t seed) {
  for (size_t i = 0; i < data.size(); ++i)
    if (data[i] != pattern_byte(seed, i)) return i;
  return std::string::npos;
}

inline abi::WireHeader make_header(uint32_t count, uint32_t seed) {
  abi::WireHeader h{};
  h.count = count;
  h.tag = seed;
  h.seqn = seed;
  h.msg_bytes = count;
  h.rid = 0xA5A5A5A5u;
  return h;
}

// Writes the pattern of `seed`, checking that the transport asks for the
// payload in increasing, contiguous, 64-byte multiple pieces.
class PatternWriter final : public PayloadWriter {
 public:
  PatternWriter(uint32_t seed, size_t count) : seed_(seed), count_(count) {}
  uint32_t write(std::byte* dst, size_t offset, size_t bytes) override {
    if (offset != next_ || offset % 64 != 0 || offset + bytes > count_ ||
        (offset + bytes < count_ && bytes % 64 != 0) || bytes == 0)
      contract_violations++;
    fill_pattern(dst, seed_, offset, bytes);
    next_ = offset + bytes;
    if (after_piece) after_piece(offset, bytes);
    return fail_at_offset != SIZE_MAX && offset >= fail_at_offset ? uint32_t{abi::kDmaDecodeError} : 0u;
  }
  int contract_violations = 0;
  size_t fail_at_offset = SIZE_MAX;
  std::function<void(size_t offset, size_t bytes)> after_piece;

 private:
  uint32_t seed_;
  size_t count_;
  size_t next_ = 0;
};

struct Received {
  NetAddress from;
  abi::WireHeader header{};
  std::vector<std::byte> data;
  uint32_t status = 0;
  bool discarded = false;
};

// Records every message; checks that callbacks of one link never overlap.
class RecordingSink final : public Sink {
 public:
  std::byte* begin_message(const NetAddress& from, const abi::WireHeader& header, ReceiveTicket& ticket) override {
    calls++;
    auto msg = std::make_unique<Received>();
    msg->from = from;
    msg->header = header;
    {
      std::lock_guard lock(mutex_);
      if (in_progress_[from]++ != 0) overlap_violations++;
      msg->discarded = discard && discard(header);
    }
    if (begin_hook) begin_hook(header);
    if (!msg->discarded) msg->data.resize(header.count);
    std::byte* dst = msg->discarded ? nullptr : msg->data.data();
    if (lease_messages && dst != nullptr) {
      ticket.lease = std::make_shared<WriteLease>();
      std::lock_guard lock(mutex_);
      leased_.push_back(Leased{ticket.lease, dst, header.count});
      cv_.notify_all();
    }
    ticket.ptr = msg.release();
    return dst;
  }

  void end_message(const NetAddress& from, const abi::WireHeader& header, ReceiveTicket& ticket,
                   uint32_t status) override {
    calls++;
    std::unique_ptr<Received> msg(static_cast<Received*>(ticket.ptr));
    std::lock_guard lock(mutex_);
    if (msg == nullptr || !(msg->from == from) || std::memcmp(&msg->header, &header, sizeof header) != 0)
      ticket_violations++;
    if (--in_progress_[from] != 0) overlap_violations++;
    if (msg) {
      msg->status = status;
      messages_.push_back(std::move(*msg));
    }
    if (reader_delivering_) ended_by_reader_++;
    cv_.notify_all();
  }

  // A reader thread brackets each message it ends with these two calls.
  void reader_delivers() override {
    std::lock_guard lock(mutex_);
    if (reader_delivering_) reader_violations++;  // brackets never nest or overlap
    reader_delivering_ = true;
  }
  void reader_delivered() override {
    {
      std::lock_guard lock(mutex_);
      if (!reader_delivering_) reader_violations++;
      reader_delivering_ = false;
      reader_brackets_++;
    }
    if (reader_delivered_hook) reader_delivered_hook();
  }
  // Messages whose end_message came inside a reader's bracket, and brackets closed.
  size_t ended_by_reader() {
    std::lock_guard lock(mutex_);
    return ended_by_reader_;
  }
  size_t reader_brackets() {
    std::lock_guard lock(mutex_);
    return reader_brackets_;
  }

  void link_failed(const NetAddress& peer, uint32_t status) override {
    calls++;
    std::lock_guard lock(mutex_);
    failures_.emplace_back(peer, status);
    cv_.notify_all();
  }

  // Waits until `n` messages ended; false on timeout.
  bool wait_messages(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return messages_.size() >= n; });
  }
  bool wait_failure(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return !failures_.empty(); });
  }
  std::vector<Received> messages() {
    std::lock_guard lock(mutex_);
    return messages_;
  }
  size_t message_count() {
    std::lock_guard lock(mutex_);
    return messages_.size();
  }
  // A destination handed out under a lease (lease_messages).
  struct Leased {
    std::shared_ptr<WriteLease> lease;
    std::byte* dst = nullptr;
    size_t bytes = 0;
  };
  // Waits until `n` leased messages began; false on timeout.
  bool wait_leased(size_t n, std::chrono::milliseconds timeout, Leased& out) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [&] { return leased_.size() >= n; })) return false;
    out = leased_[n - 1];
    return true;
  }
  std::vector<std::pair<NetAddress, uint32_t>> failures() {
    std::lock_guard lock(mutex_);
    return failures_;
  }

  std::atomic<uint64_t> calls{0};
  std::atomic<int> overlap_violations{0};
  std::atomic<int> ticket_violations{0};
  std::atomic<int> reader_violations{0};
  // Set before start(): runs on the reader thread inside reader_delivered
  // (no transport lock held), as the emulator's firmware passes do.
  std::function<void()> reader_delivered_hook;
  // Set before start(): which messages to discard (sink returns nullptr).
  std::function<bool(const abi::WireHeader&)> discard;
  // Set before start(): hand out every destination under a WriteLease, as
  // the emulator's sink does for rendezvous windows.
  bool lease_messages = false;
  // Set before start(): runs inside begin_message (e.g. to slow the reader).
  std::function<void(const abi::WireHeader&)> begin_hook;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Received> messages_;
  std::vector<std::pair<NetAddress, uint32_t>> failures_;
  std::map<NetAddress, int, AddressLess> in_progress_;
  std::vector<Leased> leased_;
  bool reader_delivering_ = false;
  size_t ended_by_reader_ = 0;
  size_t reader_brackets_ = 0;
};

inline NetAddress loopback(uint16_t port = 0) { return NetAddress{0x7F000001u, port}; }

inline TransportOptions options(const std::string& secret = "test-secret", uint16_t port = 0) {
  TransportOptions o;
  o.bind = loopback(port);
  o.job_secret = secret;
  return o;
}

inline Clock::time_point in(std::chrono::milliseconds ms) { return Clock::now() + ms; }

// A port that was free a moment ago (for "peer starts later" tests).
inline uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa = transport_detail::to_sockaddr(loopback(0));
  ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  uint16_t port = transport_detail::bound_address(fd).port;
  ::close(fd);
  return port;
}

}  // namespace accl::emu::test
