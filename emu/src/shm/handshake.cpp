// SPDX-License-Identifier: Apache-2.0
#include "handshake.hpp"

#include "direct_writes.hpp"
#include "ring_control.hpp"
#include "socket_address.hpp"

#include <poll.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

IoStatus send_hello(int fd, const ShmHello& hello, std::array<int, 2> pass_fds, Clock::time_point deadline,
                    const std::atomic<bool>* cancel) {
  iovec iov{const_cast<ShmHello*>(&hello), sizeof hello};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  int fds[2];
  size_t count = 0;
  for (int f : pass_fds)
    if (f >= 0) fds[count++] = f;
  if (count > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(count * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(count * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, count * sizeof(int));
  }
  for (;;) {
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(sizeof hello)) return IoStatus::ok;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (wait_fd(fd, POLLOUT, deadline, cancel) == 0)
        return (cancel != nullptr && cancel->load()) ? IoStatus::closed : IoStatus::timeout;
      continue;
    }
    return IoStatus::closed;
  }
}

ssize_t receive_hello(int fd, ShmHello& hello, std::array<UniqueFd, 2>& passed) {
  iovec iov{&hello, sizeof hello};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(fd, &msg, MSG_TRUNC | MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  size_t taken = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t fds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < fds; ++i) {
      int got = -1;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (taken < passed.size()) passed[taken++].reset(got);
      else ::close(got);  // more than the protocol sends
    }
  }
  return n;
}

sockaddr_un control_address(const NetAddress& a, socklen_t& len) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  // Abstract namespace (leading NUL): no file to clean up, vanishes with
  // the process. Anyone in the network namespace may connect, which is why
  // the handshake checks uid and job credential.
  std::string name = "accl-emu-shm-v1/" + format_address(a);
  std::memcpy(sa.sun_path + 1, name.data(), name.size());
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return sa;
}

bool valid_shm_name(const char* name, size_t capacity) {
  size_t len = ::strnlen(name, capacity);
  if (len == capacity || len < 7 || std::strncmp(name, "/accl-", 6) != 0) return false;
  for (size_t i = 1; i < len; ++i)
    if (name[i] == '/' || name[i] < 0x21 || name[i] > 0x7E) return false;
  return true;
}

HelloMemfds hello_memfds(const ShmHello& hello, const std::array<UniqueFd, 2>& passed) {
  // The descriptors come in order: the outbox's, then the gate's.
  HelloMemfds fds;
  fds.outbox = hello.outbox_bytes != 0 ? passed[0].get() : -1;
  fds.gate = hello.gate_bytes != 0 ? passed[hello.outbox_bytes != 0 ? 1 : 0].get() : -1;
  return fds;
}

HelloStatus check_hello(const ShmHello& hello, ssize_t bytes, const std::array<UniqueFd, 2>& passed,
                        const Credential& expected, bool check_secret, std::string& why) {
  if (bytes != static_cast<ssize_t>(sizeof hello)) {
    why = "malformed handshake";
    return kHelloMalformed;
  }
  if (const HelloStatus status = check_identity(hello.id, kHelloShm, expected, check_secret);
      status != kHelloAccepted) {
    why = describe(status);
    return status;
  }
  if (!valid_shm_name(hello.shm_name, sizeof hello.shm_name) || hello.ring_bytes < kMinRingBytes ||
      hello.ring_bytes > kMaxRingBytes || hello.ring_bytes % kPageBytes != 0) {
    why = "bad segment name or size";
    return kHelloMalformed;
  }
  const size_t fds_expected = (hello.outbox_bytes != 0 ? 1 : 0) + (hello.gate_bytes != 0 ? 1 : 0);
  const size_t fds_passed = (passed[0] ? 1 : 0) + (passed[1] ? 1 : 0);
  if (hello.outbox_bytes > kMaxRingBytes ||
      (hello.gate_bytes != 0 && (hello.gate_bytes != DirectGate::kBytes || hello.gate_slot >= DirectGate::kSlots)) ||
      fds_passed != fds_expected) {
    why = "bad outbox or gate";
    return kHelloMalformed;
  }
  return kHelloAccepted;
}

}  // namespace shm
}  // namespace accl::emu::transport_detail
