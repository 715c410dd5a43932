// SPDX-License-Identifier: Apache-2.0
//
// File descriptors, deadlines and bounded I/O on non-blocking sockets, for
// the socket-based transports.
#pragma once

#include "transport.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <string>
#include <system_error>
#include <utility>

namespace accl::emu::transport_detail {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

[[noreturn]] inline void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// ---------------------------------------------------------------------------
// Deadlines
// ---------------------------------------------------------------------------
// Milliseconds to pass to poll()/epoll_wait() so that a wait never passes
// `deadline` and never lasts longer than `cap` (callers re-check their stop
// flags at least that often). Rounds up so a 300 µs rest is not a busy loop.
inline int wait_ms(Clock::time_point deadline, std::chrono::milliseconds cap) {
  auto rest = deadline - Clock::now();
  if (rest <= Clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(rest);
  return static_cast<int>(std::min(ms, cap).count());
}

// ---------------------------------------------------------------------------
// Bounded I/O on non-blocking sockets
// ---------------------------------------------------------------------------
inline constexpr std::chrono::milliseconds kWaitSlice{100};

// Waits until `fd` reports one of `events`, the deadline passes or `cancel`
// becomes true; polls in slices so a cancel is seen within kWaitSlice.
// Returns the revents (0 on timeout or cancel).
inline short wait_fd(int fd, short events, Clock::time_point deadline, const std::atomic<bool>* cancel) {
  for (;;) {
    if (cancel != nullptr && cancel->load(std::memory_order_acquire)) return 0;
    pollfd p{fd, events, 0};
    int ms = wait_ms(deadline, kWaitSlice);
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return p.revents;
    if (rc < 0 && errno != EINTR) return POLLERR;
    if (ms == 0 || Clock::now() >= deadline) return 0;
  }
}

enum class IoStatus { ok, timeout, closed };

// Writes all `bytes` (MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE).
// `written` counts what went out, so callers know whether a stream is torn.
inline IoStatus write_all(int fd, const void* data, size_t bytes, Clock::time_point deadline,
                          const std::atomic<bool>* cancel, size_t& written) {
  const auto* p = static_cast<const char*>(data);
  written = 0;
  while (written < bytes) {
    ssize_t n = ::send(fd, p + written, bytes - written, MSG_NOSIGNAL);
    if (n > 0) {
      written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      short ev = wait_fd(fd, POLLOUT, deadline, cancel);
      if (ev == 0) return (cancel != nullptr && cancel->load()) ? IoStatus::closed : IoStatus::timeout;
      continue;
    }
    return IoStatus::closed;
  }
  return IoStatus::ok;
}

// Reads exactly `bytes` (stream sockets) or one datagram/record of exactly
// `bytes` (SOCK_SEQPACKET: pass seqpacket = true; a record of another size is
// reported as closed, i.e. a protocol error).
inline IoStatus read_exact(int fd, void* data, size_t bytes, Clock::time_point deadline,
                           const std::atomic<bool>* cancel, bool seqpacket = false) {
  auto* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::recv(fd, p + got, bytes - got, seqpacket ? MSG_TRUNC : 0);
    if (n > 0) {
      if (seqpacket) return static_cast<size_t>(n) == bytes ? IoStatus::ok : IoStatus::closed;
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return IoStatus::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      short ev = wait_fd(fd, POLLIN, deadline, cancel);
      if (ev == 0) return (cancel != nullptr && cancel->load()) ? IoStatus::closed : IoStatus::timeout;
      continue;
    }
    return IoStatus::closed;
  }
  return IoStatus::ok;
}

// True if the peer closed or reset a connection on which it never sends
// anything after the handshake (so "readable" can only mean end of stream).
inline bool peer_hung_up(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace accl::emu::transport_detail
