// SPDX-License-Identifier: Apache-2.0
//
// Shared-memory transport: the fast path between processes on one host.
//
// Per directed pair, the sender creates a POSIX shm segment
//   /accl-<secret hash>-<receiver ip>-<receiver port>-<sender port>-<pid>-<n>
// (shm_segments.hpp; a new transport removes those of dead processes)
// (mode 0600): one 4 KiB control page plus a data ring of whole pages. It
// announces the segment over the receiver's control socket, a Unix
// SOCK_SEQPACKET socket at the abstract address "accl-emu-shm-v1/<ip>:<port>"
// of the receiver's NetAddress:
//   sender   -> receiver  ShmHello (identity + credential, ring size, name)
//   receiver -> sender    HelloReply
// The receiver checks the peer's uid (SO_PEERCRED) and credential, maps the
// segment and starts a reader thread for it; the sender then unlinks the
// name (both sides hold the mapping), so nothing is left in /dev/shm even if
// a process dies later. The control socket stays open for the life of the
// link: its hang-up is how each side learns that the other process died.
//
// Ring: single producer, single consumer, monotonically increasing 64-bit
// byte positions (head: published by the sender, tail: released by the
// reader). A message is a 64-byte WireHeader followed by the payload padded
// to 64 bytes. The sender publishes the header together with the first
// payload piece and then piece by piece (at most max_piece_bytes), so
// payloads larger than the ring stream through it while the reader copies
// out of it into the sink's memory. Waiting spins for ACCL_EMU_SPIN_US, then
// sleeps on a shared futex word with a bounded timeout. Host threads that wait for a call may consume messages
// themselves, also ones still streaming in (Transport::poll; see InboundRing and PollActivity).
// A payload that several sends repeat goes through the sender's outbox instead of every ring (see Outbox).
// A rendezvous payload for one peer is written by the sender straight into the receiver's window (see DirectGate).
//
// The files of emu/src/shm/, one job each:
//   shm_transport.*       this transport: endpoint, dialling, polls
//   control_thread.cpp    its control thread: handshakes, hang-ups, the lease
//   handshake.*           ShmHello on the control socket
//   mapping.*             ring segments and the memfds passed to peers
//   ring_control.hpp      the control page producer and consumer share
//   futex_wait.hpp        spinning and futex sleeps on the shared words
//   outbound_link.hpp     ShmLink, the sending side of a ring
//   inbound_ring.hpp      InboundRing, the receiving side (reader thread, polls)
//   inbound_progress.hpp  what a sender waiting for room does for its own rings
//   poll_activity.hpp     PollActivity, the poll lease
//   pollable_rings.hpp    the lock-free list of rings host threads poll
//   outbox.hpp            Outbox, payloads shared by several sends
//   direct_writes.hpp     DirectGate and grants, writes into a peer's window
//   shm_segments.*        segment names, and removing those of dead processes
//   tuning.cpp            the poll lease and direct-write threshold of a host
// Their namespace has hidden visibility: the rings' code binds within
// libaccl_emu as it did when it was one file's anonymous namespace (no call
// through the PLT on a message's way, nothing exported).
#include "shm_transport.hpp"

#include "shm_segments.hpp"

#include <accl/log.hpp>

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace accl::emu {
namespace transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

ShmTransport::ShmTransport(const TransportOptions& options, const ShmTuning& tuning)
    : tuning_(tuning),
      credential_(make_credential(options.job_secret)),
      check_secret_(!options.job_secret.empty()),
      spin_(spin_duration()) {
  const size_t ring = std::clamp(tuning_.ring_bytes, kMinRingBytes, kMaxRingBytes);
  tuning_.ring_bytes = (ring + kPageBytes - 1) / kPageBytes * kPageBytes;
  tuning_.max_piece_bytes = std::clamp(round_up64(tuning_.max_piece_bytes), size_t{4096}, tuning_.ring_bytes / 2);
  job_hash_ = shm_name_hash(options.job_secret);
  // Segments of killed jobs would hold /dev/shm memory until reboot.
  remove_stale_shm_segments();

  local_ = options.bind;
  if (local_.port == 0) {
    // The shm endpoint is named by ip:port like the network transports;
    // hold a bound (not listening) TCP socket so no other process on this
    // host gets the same name.
    port_reservation_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in sa = to_sockaddr(options.bind);
    if (!port_reservation_ || ::bind(port_reservation_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
      throw_errno("shm: reserve a port on " + format_address(options.bind));
    local_ = bound_address(port_reservation_.get());
  }
  // Named (control socket, ring names, handshakes) by its identity: the
  // address peers dial, also when bound to the wildcard.
  local_ = identity_address(local_);

  listen_fd_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listen_fd_) throw_errno("shm: socket");
  socklen_t len = 0;
  sockaddr_un sa = control_address(local_, len);
  if (::bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0)
    throw_errno("shm: bind control socket for " + format_address(local_));
  if (::listen(listen_fd_.get(), 128) != 0) throw_errno("shm: listen");
  epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_ || !wake_fd_) throw_errno("shm: epoll/eventfd");
  polls_.set_watcher(wake_fd_.get());
  watch(listen_fd_.get(), EPOLLIN);
  watch(wake_fd_.get(), EPOLLIN);
  if (tuning_.outbox_bytes != 0) {
    outbox_ = Outbox::create(std::min(tuning_.outbox_bytes, kMaxRingBytes));
    if (!outbox_) ACCL_LOG_INFO("shm: no outbox ({}); every payload goes through the rings", std::strerror(errno));
  }
  direct_.min_bytes = tuning_.direct_min_bytes;
  direct_.share_copies = tuning_.share_copies;
  if (direct_.min_bytes != 0) {
    direct_.own_gate = DirectGate::create();
    direct_.grants.report_grants_to(direct_.own_gate.get());
    if (!direct_.own_gate)
      ACCL_LOG_INFO("shm: no direct-write gate ({}); peers copy payloads through the rings", std::strerror(errno));
  }
}

void ShmTransport::stop() {
  if (!begin_stop(state_mutex_, stopped_, stopping_, wake_fd_.get())) return;
  if (control_thread_.joinable()) control_thread_.join();
  // The control thread is gone: the rings are ours now. No poll() (nor a
  // sender's poll_inbound()) may reach the sink once stop() returns; a
  // send still waiting for room is ended by close_all() below, which waits
  // for it to leave, so no link uses this transport after stop().
  pollable_.clear();
  for (auto& [fd, ring] : rings_) ring->request_stop();
  for (auto& [fd, ring] : rings_) ring->join();
  rings_.clear();  // closes control sockets: senders see the hang-up
  listen_fd_.reset();
  std::lock_guard lock(state_mutex_);
  peers_.close_all();
  if (outbox_) outbox_->clear();
  direct_.grants.clear();
  port_reservation_.reset();
}

std::shared_ptr<ShmLink> ShmTransport::dial(const NetAddress& peer, Clock::time_point deadline) {
  const auto find_deadline = std::min(deadline, Clock::now() + tuning_.local_connect_grace);
  auto backoff = std::chrono::milliseconds(1);
  UniqueFd fd;
  for (;;) {
    fd = try_connect_control(peer);  // a peer bound to 0.0.0.0 is named by its identity too
    if (fd) break;
    if (stopping_.load(std::memory_order_acquire) || Clock::now() >= find_deadline) {
      ACCL_LOG_DEBUG("shm: no shared-memory endpoint for {} on this host", format_address(peer));
      return nullptr;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, find_deadline - Clock::now()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }

  std::shared_ptr<Mapping> mapping;
  std::string name;
  for (int attempt = 0; !mapping && attempt < 16; ++attempt) {
    name = "/" + format_shm_segment_name({job_hash_, peer.ip, peer.port, local_.port, static_cast<int>(::getpid()),
                                          name_counter_.fetch_add(1)});
    mapping = Mapping::create(name, tuning_.ring_bytes);
    if (!mapping && errno != EEXIST) break;
  }
  if (!mapping) {
    ACCL_LOG_ERROR("shm: cannot create a ring for {}: {}", format_address(peer), std::strerror(errno));
    return nullptr;
  }
  ShmHello hello;
  hello.id = make_identity(kHelloShm, local_, credential_);
  hello.ring_bytes = tuning_.ring_bytes;
  hello.sender_pid = static_cast<uint32_t>(::getpid());
  std::memcpy(hello.shm_name, name.c_str(), std::min(name.size() + 1, sizeof hello.shm_name));
  hello.outbox_bytes = outbox_ ? outbox_->bytes() : 0;
  // The peer writes into our windows through its own slot of our gate; the
  // kernel names the peer's process (SO_PEERCRED of the socket we dialled).
  std::optional<uint32_t> gate_slot;
  ucred peer_cred{};
  socklen_t cred_len = sizeof peer_cred;
  if (direct_.own_gate && ::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &peer_cred, &cred_len) == 0)
    gate_slot = direct_.own_gate->assign_slot(peer_cred.pid);
  hello.gate_bytes = gate_slot ? DirectGate::kBytes : 0;
  hello.gate_slot = gate_slot.value_or(0);
  HelloReply reply;
  IoStatus io = send_hello(fd.get(), hello, {outbox_ ? outbox_->fd() : -1, gate_slot ? direct_.own_gate->fd() : -1},
                           deadline, &stopping_);
  if (io == IoStatus::ok) io = read_exact(fd.get(), &reply, sizeof reply, deadline, &stopping_, true);
  // Mapped on both sides (or given up): the name is no longer needed.
  ::shm_unlink(name.c_str());
  if (io != IoStatus::ok) {
    ACCL_LOG_INFO("shm: handshake with {} failed: {}", format_address(peer),
                  io == IoStatus::timeout ? "timed out" : "closed");
    return nullptr;
  }
  if (reply.magic != kHelloMagic || reply.status != kHelloAccepted) {
    ACCL_LOG_ERROR("shm: {} refused our connection: {}", format_address(peer),
                   describe(reply.magic == kHelloMagic ? static_cast<HelloStatus>(reply.status) : kHelloMalformed));
    return nullptr;
  }
  ACCL_LOG_DEBUG("shm: connected {} -> {} ({})", format_address(local_), format_address(peer), name);
  return std::make_shared<ShmLink>(std::move(mapping), std::move(fd), peer, tuning_, spin_,
                                   static_cast<InboundProgress&>(*this), outbox_, direct_, gate_slot);
}

UniqueFd ShmTransport::try_connect_control(const NetAddress& a) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return fd;
  socklen_t len = 0;
  sockaddr_un sa = control_address(a, len);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) fd.reset();
  return fd;
}

}  // namespace shm
}  // namespace transport_detail

std::unique_ptr<Transport> make_shm_transport(const TransportOptions& options, const ShmTuning& tuning) {
  return std::make_unique<transport_detail::shm::ShmTransport>(options, tuning);
}

}  // namespace accl::emu
