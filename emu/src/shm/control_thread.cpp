// SPDX-License-Identifier: Apache-2.0
//
// The shm transport's control thread: accepts connections on the control
// socket, checks their hellos and starts a reader per ring, notices hang-ups,
// reaps finished readers, and wakes parked readers when the poll lease lapses.
#include "shm_transport.hpp"

#include "handshake.hpp"
#include "thread_name.hpp"

#include <accl/log.hpp>

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

void ShmTransport::control_loop() {
  name_this_thread("accl-shm-ctl");
  std::vector<epoll_event> events(32);
  while (!stopping_.load(std::memory_order_acquire)) {
    const int n = wait_events(events, watch_lease());
    if (n < 0 && errno != EINTR) {
      ACCL_LOG_ERROR("shm: epoll_wait: {}", std::strerror(errno));
      break;
    }
    for (int i = 0; i < n && !stopping_.load(std::memory_order_acquire); ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_.get()) {  // stop(), or the first reader parked (watch_lease)
        uint64_t count = 0;
        [[maybe_unused]] const ssize_t ignored = ::read(wake_fd_.get(), &count, sizeof count);
        continue;
      }
      if (fd == listen_fd_.get()) {
        accept_all();
      } else if (auto p = pending_.find(fd); p != pending_.end()) {
        handle_hello(p);
      } else if (auto r = rings_.find(fd); r != rings_.end()) {
        watch_established(*r->second);
      }
    }
    sweep();
  }
  pending_.clear();
}

int ShmTransport::wait_events(std::vector<epoll_event>& events, std::chrono::microseconds timeout) {
  const int max = static_cast<int>(events.size());
  if (!epoll_pwait2_missing_) {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
    ts.tv_nsec = static_cast<long>((timeout.count() % 1000000) * 1000);
    const int n = ::epoll_pwait2(epoll_fd_.get(), events.data(), max, &ts, nullptr);
    if (n >= 0 || errno != ENOSYS) return n;
    epoll_pwait2_missing_ = true;
  }
  return ::epoll_wait(epoll_fd_.get(), events.data(), max, static_cast<int>((timeout.count() + 999) / 1000));
}

std::chrono::microseconds ShmTransport::watch_lease() {
  constexpr auto kIdleSlice = std::chrono::duration_cast<std::chrono::microseconds>(kWaitSlice);
  if (!polls_.readers_parked()) return kIdleSlice;
  if (const auto rest = polls_.remaining(); rest.count() > 0)
    return std::min(std::max(rest, tuning_.lease_backstop), kIdleSlice);
  for (auto& [fd, ring] : rings_) ring->polls_ended();
  return std::clamp(tuning_.poll_lease, std::chrono::microseconds(1), kIdleSlice);
}

void ShmTransport::accept_all() {
  for (;;) {
    int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        ACCL_LOG_ERROR("shm: accept: {}", std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return;
    }
    Pending p{UniqueFd(fd), Clock::now()};
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) continue;
    pending_.emplace(fd, std::move(p));
  }
}

void ShmTransport::handle_hello(std::map<int, Pending>::iterator it) {
  const int fd = it->first;
  ShmHello hello;
  std::array<UniqueFd, 2> passed;
  ssize_t n = receive_hello(fd, hello, passed);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  UniqueFd conn = std::move(it->second.fd);
  pending_.erase(it);
  if (n == 0) return;  // gave up before sending anything
  HelloReply reply;
  std::string why;
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::geteuid()) {
    reply.status = kHelloRefused;
    why = "process of another user";
  } else {
    reply.status = check_hello(hello, n, passed, credential_, check_secret_, why);
  }
  const HelloMemfds memfds = hello_memfds(hello, passed);
  const int outbox_fd = memfds.outbox;
  const int gate_fd = memfds.gate;
  std::shared_ptr<Mapping> mapping;
  std::shared_ptr<PeerOutbox> outbox;
  std::shared_ptr<DirectGate> gate;
  if (reply.status == kHelloAccepted) {
    mapping = Mapping::open(hello.shm_name, hello.ring_bytes, why);
    if (mapping && outbox_fd >= 0) outbox = PeerOutbox::map(outbox_fd, hello.outbox_bytes, why);
    if (mapping && gate_fd >= 0) gate = DirectGate::map(gate_fd, why);
    if (!mapping || (outbox_fd >= 0 && !outbox) || (gate_fd >= 0 && !gate)) reply.status = kHelloRefused;
  }
  if (reply.status != kHelloAccepted) {
    ACCL_LOG_WARN("shm: refusing connection from pid {}: {}", cred.pid, why);
    [[maybe_unused]] ssize_t sent = ::send(fd, &reply, sizeof reply, MSG_NOSIGNAL);
    return;  // closes the connection
  }
  NetAddress from{hello.id.listen_ip, hello.id.listen_port};
  // Grants from this peer let our sends write into its windows when both
  // sides allow direct writes (the gate is the peer's, its pid the
  // kernel's word for it); its direct writes to us we help copy.
  InboundRing::PeerDirect peer_direct;
  if (gate && direct_.min_bytes != 0) peer_direct = {&direct_, std::move(gate), cred.pid, hello.gate_slot};
  const auto parked_slice =
      std::max(std::chrono::duration_cast<std::chrono::microseconds>(kSleepSlice), tuning_.lease_backstop);
  auto ring = std::make_shared<InboundRing>(std::move(mapping), std::move(conn), from, *sink_, spin_,
                                            parked_slice, tuning_.max_piece_bytes, polls_, std::move(outbox),
                                            std::move(peer_direct));
  // Start reading before accepting: the sender may publish right after
  // the reply.
  ring->start();
  if (::send(fd, &reply, sizeof reply, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof reply)) {
    ring->peer_gone();
  }
  ACCL_LOG_DEBUG("shm: accepted link {} -> {}", format_address(from), format_address(local_));
  pollable_.add(ring);
  publish_lease(/*always=*/true);
  rings_.emplace(fd, std::move(ring));
}

void ShmTransport::watch_established(InboundRing& ring) {
  char scratch[64];
  ssize_t n = ::recv(ring.control_fd.get(), scratch, sizeof scratch, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, ring.control_fd.get(), nullptr);
  ring.peer_gone();
}

void ShmTransport::sweep() {
  const auto now = Clock::now();
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now - it->second.accepted_at > tuning_.handshake_timeout) {
      ACCL_LOG_WARN("shm: closing a control connection without handshake");
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  // Reap readers whose link ended, so reconnecting peers do not pile up
  // threads.
  for (auto it = rings_.begin(); it != rings_.end();) {
    if (it->second->finished()) {
      ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, it->first, nullptr);
      pollable_.remove(it->second.get());
      it = rings_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace shm
}  // namespace accl::emu::transport_detail
