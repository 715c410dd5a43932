// SPDX-License-Identifier: Apache-2.0
//
// Outbound links of an emulated CCLO: picks a transport per peer and caches
// the link. Automatic selection: in-process if the peer's CCLO lives in this
// process, else shared memory if it is on this host, else TCP. An explicit
// transport kind uses only that transport. Messages to ourselves go straight
// into our own sink (any kind), like a loopback port.
#pragma once

#include "transport.hpp"

#include <accl_emu/emulator.hpp>

#include <atomic>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace accl::emu {

// The transports one CCLO runs; unused kinds stay null.
struct TransportSet {
  std::unique_ptr<Transport> inproc;
  std::unique_ptr<Transport> shm;
  std::unique_ptr<Transport> tcp;
  std::unique_ptr<Transport> udp;

  // Calls f(Transport&) on each transport that runs (shared memory first:
  // the one host threads poll most).
  template <class F>
  void for_each(F&& f) const {
    for (const auto* t : {&shm, &tcp, &udp, &inproc})
      if (*t) f(**t);
  }
};

class LinkTable {
 public:
  LinkTable(TransportKind kind, const NetAddress& self, Sink& self_sink, TransportSet& transports);

  // Sends one message to `peer` (connecting on first use). One thread at a
  // time (the CCLO's control program, through its Mover). Error bits:
  // kLinkError when no transport reaches the peer or the link failed (the
  // cached link is dropped then, so the next send reconnects).
  // `shared_key`: fw::Move::shared_payload (0: none).
  // (Out of line on purpose: the hop profile of the benchmark report takes
  // it as the transport layer's entry.)
  uint32_t send(const NetAddress& peer, const abi::WireHeader& header, PayloadWriter& payload,
                Clock::time_point deadline, uint64_t shared_key = 0);
  void forget(const NetAddress& peer);
  void clear();
  size_t cached() const;

 private:
  std::shared_ptr<Link> connect(const NetAddress& peer, Clock::time_point deadline);
  // send() to another peer than the last, or after a forget()/clear().
  [[gnu::noinline]] uint32_t send_looked_up(const NetAddress& peer, uint64_t key, uint64_t generation,
                                            const abi::WireHeader& header, PayloadWriter& payload,
                                            Clock::time_point deadline, uint64_t shared_key);
  // send() on a link found or made.
  uint32_t send_on(Link& link, const NetAddress& peer, const abi::WireHeader& header, PayloadWriter& payload,
                   Clock::time_point deadline, uint64_t shared_key) {
    const uint32_t err =
        shared_key != 0 ? link.send_shared(header, payload, shared_key, deadline) : link.send(header, payload, deadline);
    if (err & abi::kLinkError) link_failed(peer, err);
    return err;
  }
  // Logs the failure and drops the peer's link, so that the next send reconnects.
  [[gnu::noinline, gnu::cold]] void link_failed(const NetAddress& peer, uint32_t err);

  TransportKind kind_;
  NetAddress self_;
  TransportSet& transports_;
  std::shared_ptr<Link> loopback_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<Link>> links_;
  // Bumped under mutex_ whenever links_ loses entries (forget, clear), from
  // any thread.
  std::atomic<uint64_t> generation_{0};
  // The link of the last send() (the firmware sends to the same peer again
  // and again): used without mutex_ or the table while generation_ still
  // reads as when it was looked up. Touched by send() only (one thread at a
  // time). It holds a reference: a link dropped by forget() or clear() lives
  // on until the next send() looks again, or until the table goes (its fd or
  // mapping a little longer; nothing sends on it).
  std::shared_ptr<Link> last_link_;
  uint64_t last_key_ = 0;
  uint64_t last_generation_ = 0;
};

}  // namespace accl::emu
