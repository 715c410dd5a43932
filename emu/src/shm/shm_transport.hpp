// SPDX-License-Identifier: Apache-2.0
//
// The shared-memory transport (shm_transport.cpp describes it): its endpoint,
// the links it dials, the rings it reads and the poll lease. Its control
// thread is in control_thread.cpp.
#pragma once

#include "direct_writes.hpp"
#include "handshake.hpp"
#include "inbound_progress.hpp"
#include "inbound_ring.hpp"
#include "mapping.hpp"
#include "outbound_link.hpp"
#include "outbox.hpp"
#include "poll_activity.hpp"
#include "pollable_rings.hpp"
#include "ring_control.hpp"
#include "shm_segments.hpp"

#include "aligned_buffer.hpp"
#include "hello_protocol.hpp"
#include "job_secret.hpp"
#include "peer_links.hpp"
#include "socket_address.hpp"
#include "socket_io.hpp"
#include "thread_name.hpp"
#include "transport_tuning.hpp"

#include <accl/log.hpp>

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

class ShmTransport final : public Transport, private InboundProgress {
 public:
  ShmTransport(const TransportOptions& options, const ShmTuning& tuning);

  ~ShmTransport() override { stop(); }

  std::string name() const override { return "shm"; }
  NetAddress local_address() const override { return local_; }

  void start(Sink& sink) override {
    std::lock_guard lock(state_mutex_);
    if (started_ || stopped_) throw std::logic_error("shm transport: start() called twice or after stop()");
    started_ = true;
    sink_ = &sink;
    direct_.sink = &sink;
    control_thread_ = std::thread([this] { control_loop(); });
  }

  std::shared_ptr<Link> connect(const NetAddress& peer, Clock::time_point deadline) override {
    // Shared memory only reaches this host: answer "not reachable" at once
    // for other addresses so the caller falls back to a network transport.
    if (!is_local_ipv4(peer.ip)) return nullptr;
    return peers_.connect(peer, deadline, [this](const NetAddress& p, Clock::time_point d) { return dial(p, d); });
  }

  bool polls() const override { return true; }
  bool poll() override {
    if (polls_.touch()) publish_lease();
    bool delivered = false;
    pollable_.for_each([&](InboundRing& ring) { delivered = ring.poll() || delivered; });
    return delivered;
  }

  void driver_enters() override {
    polls_.driver_enters();
    publish_lease(/*always=*/true);
    if (direct_.own_gate) direct_.own_gate->waiter_enters();
  }
  void driver_leaves() override {
    if (direct_.own_gate) direct_.own_gate->waiter_leaves();
    polls_.driver_leaves();
    publish_lease(/*always=*/true);
  }

  void end_polling() override {
    polls_.end();
    publish_lease(/*always=*/true);
    pollable_.for_each([](InboundRing& ring) { ring.polls_ended(); });
  }

  void stop() override;

  bool peer_writing() const override { return direct_.own_gate && direct_.own_gate->writer_in(); }

  bool fence_direct_writes() override {
    constexpr auto kMaxWait = std::chrono::seconds(2);
    return !direct_.own_gate || direct_.own_gate->fence(Clock::now() + kMaxWait);
  }

 private:
  bool poll_inbound() override {
    bool delivered = false;
    // While the poll lease runs (a host or firmware thread polls this
    // transport, often the caller itself: a host thread whose firmware pass
    // sends), a message this poll leaves half consumed stays with the polls,
    // as a host poll's does: the next poll carries it on, here or in the
    // caller's loop, or the reader once the lease has lapsed and the control
    // thread (or a later publish) wakes it. A reader thread that sends (its
    // delivery enabled a firmware pass) polls no further once it has room:
    // its leftovers go to the reader at once, as before. Handing every
    // leftover to the reader at once made two ranks that exchange messages
    // larger than a ring wake their reader threads piece by piece:
    // alternating runs, 2-rank allreduce
    // 4 MiB 494-588 -> 356-367 us, 8 MiB 1248-1334 -> 845-863 us, 4-rank
    // alltoall 1 MiB 579-718 -> 447-451 us. (Only while a driving loop runs:
    // 4 MiB 478-547 us; hosts that poll with test() hold a timed lease.)
    const bool leased = !t_shm_reader_thread && polls_.remaining().count() > 0;
    pollable_.for_each([&](InboundRing& ring) { delivered = ring.poll(leased) || delivered; });
    return delivered;
  }

  void stop_polling_inbound() override { end_polling(); }

  // Tells the inbound rings' senders when our poll lease ends (see
  // RingControl::consumer_lease_end): after a poll renewed it, when that
  // moved it enough to matter; `always` after a change of kind (a driver
  // came or left, the polls ended) and for a new ring. Publishers recompute
  // the end under one lock, and whoever changed the lease's kind publishes
  // after the change, so the rings never keep an end older than the last
  // change (a racing poller's Held after the driver left, say); a skipped
  // renewal only leaves them an end that comes early.
  void publish_lease(bool always = false) {
    if (!always && !polls_.should_publish(polls_.lease_end_ns())) return;
    std::lock_guard lock(lease_publish_mutex_);
    const int64_t end = polls_.lease_end_ns();
    polls_.set_published(end);
    pollable_.for_each([end](InboundRing& ring) { ring.publish_lease(end); });
  }

  void watch(int fd, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno("shm: epoll_ctl");
  }

  // Finds the peer's control socket (retrying briefly: it may still be
  // starting), announces a fresh segment and waits for the reply.
  std::shared_ptr<ShmLink> dial(const NetAddress& peer, Clock::time_point deadline);

  static UniqueFd try_connect_control(const NetAddress& a);

  // ---- control thread ----------------------------------------------------

  struct Pending {
    UniqueFd fd;
    Clock::time_point accepted_at;
  };

  void control_loop();

  // epoll_wait to the microsecond (a lease is about a millisecond); kernels
  // before 5.11 lack epoll_pwait2: there, whole milliseconds, rounded up.
  int wait_events(std::vector<epoll_event>& events, std::chrono::microseconds timeout);

  // The lapse of the poll lease, for the parked readers (see PollActivity):
  // wakes them if it lapsed, and returns how long the control thread may
  // sleep. Woken readers that have not run yet by the next check (a busy
  // core) are woken again one lease later, not in a loop. While the lease
  // runs the next check is a backstop (ShmTuning::lease_backstop) rather
  // than the lease's end: senders wake a parked reader themselves once the
  // lease is over, so the check only serves a message that came while the
  // lease ran and found the polls stopped before they took it.
  std::chrono::microseconds watch_lease();

  void accept_all();

  void handle_hello(std::map<int, Pending>::iterator it);

  // An established control socket became readable: hang-up (the sender
  // closed or died) or stray bytes, which the protocol does not allow.
  void watch_established(InboundRing& ring);

  void sweep();

  ShmTuning tuning_;
  const Credential credential_;
  const bool check_secret_;
  const std::chrono::microseconds spin_;
  std::string job_hash_;  // names this job's ring segments (shm_segments.hpp)
  NetAddress local_;
  UniqueFd port_reservation_;
  UniqueFd listen_fd_;
  UniqueFd epoll_fd_;
  UniqueFd wake_fd_;
  std::atomic<uint64_t> name_counter_{0};
  std::shared_ptr<Outbox> outbox_;  // null: none (every payload through the rings)
  DirectWrites direct_;              // links and readers refer to it: declared before them

  std::mutex state_mutex_;
  bool started_ = false;
  bool stopped_ = false;
  PeerLinks<ShmLink> peers_{state_mutex_, stopped_};
  Sink* sink_ = nullptr;
  std::thread control_thread_;
  std::atomic<bool> stopping_{false};
  PollActivity polls_{tuning_.poll_lease};  // read by the reader threads: declared before the rings
  std::mutex lease_publish_mutex_;           // see publish_lease()

  // Control thread only (stop() takes them over after joining it).
  std::map<int, Pending> pending_;
  std::map<int, std::shared_ptr<InboundRing>> rings_;
  bool epoll_pwait2_missing_ = false;

  // The rings host threads poll (the control thread adds and removes them).
  PollableRings pollable_;
};

}  // namespace shm
}  // namespace accl::emu::transport_detail
