// SPDX-License-Identifier: Apache-2.0
#include "link_table.hpp"

#include "net_address.hpp"
#include "transport_faults.hpp"

#include <accl/log.hpp>

namespace accl::emu {

namespace {
// Our own address: the message goes through our own sink on the sending
// thread, with the same one copy as the in-process transport.
class LoopbackLink final : public Link {
 public:
  LoopbackLink(Sink& sink, const NetAddress& self) : sink_(sink), self_(self) {}
  uint32_t send(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point) override {
    ReceiveTicket ticket;
    std::byte* dst = sink_.begin_message(self_, header, ticket);
    uint32_t err = 0;
    if (dst != nullptr && header.count > 0) err = produce_payload(payload, dst, header.count, ticket);
    sink_.end_message(self_, header, ticket, err);
    return err;
  }

 private:
  Sink& sink_;
  NetAddress self_;
};
}  // namespace

LinkTable::LinkTable(TransportKind kind, const NetAddress& self, Sink& self_sink, TransportSet& transports)
    : kind_(kind), self_(self), transports_(transports), loopback_(std::make_shared<LoopbackLink>(self_sink, self)) {
  faults_from_environment();  // a malformed ACCL_EMU_FAULTS fails device creation, not a later send
}

std::shared_ptr<Link> LinkTable::connect(const NetAddress& peer, Clock::time_point deadline) {
  if (peer == self_) return loopback_;
  auto try_one = [&](const std::unique_ptr<Transport>& t) -> std::shared_ptr<Link> {
    return t ? t->connect(peer, deadline) : nullptr;
  };
  switch (kind_) {
    case TransportKind::automatic:
      if (auto l = try_one(transports_.inproc)) return l;
      if (auto l = try_one(transports_.shm)) return l;
      return try_one(transports_.tcp);
    case TransportKind::inproc: return try_one(transports_.inproc);
    case TransportKind::shm: return try_one(transports_.shm);
    case TransportKind::tcp: return try_one(transports_.tcp);
    case TransportKind::udp: return try_one(transports_.udp);
  }
  return nullptr;
}

uint32_t LinkTable::send(const NetAddress& peer, const abi::WireHeader& header, PayloadWriter& payload,
                         Clock::time_point deadline, uint64_t shared_key) {
  // The common case, the peer of the last send, is a few checks; the rest
  // (and its locals' clean-up) out of line.
  const uint64_t key = address_key(peer);
  // Read before the table: a forget() after it makes the next send look again.
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  if (last_link_ != nullptr && key == last_key_ && generation == last_generation_) [[likely]]
    return send_on(*last_link_, peer, header, payload, deadline, shared_key);
  return send_looked_up(peer, key, generation, header, payload, deadline, shared_key);
}

uint32_t LinkTable::send_looked_up(const NetAddress& peer, uint64_t key, uint64_t generation,
                                   const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point deadline,
                                   uint64_t shared_key) {
  std::shared_ptr<Link> link;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = links_.find(key);
    if (it != links_.end()) link = it->second;
  }
  if (link == nullptr) {
    // Connect without holding the lock: TCP connects can take a while.
    link = connect(peer, deadline);
    if (link == nullptr) {
      ACCL_LOG_ERROR("emulated CCLO: no {} transport reaches {}", to_string(kind_), to_string(peer));
      return abi::kLinkError;
    }
    // Test-only fault injection (ACCL_EMU_FAULTS); UDP gets datagram-level
    // faults inside the transport instead, so only delays apply here.
    if (!(peer == self_))
      link = wrap_with_faults(std::move(link), faults_from_environment(), self_, peer, kind_ != TransportKind::udp);
    std::lock_guard<std::mutex> lock(mutex_);
    links_.emplace(key, link);
  }
  last_link_ = std::move(link);
  last_key_ = key;
  last_generation_ = generation;
  return send_on(*last_link_, peer, header, payload, deadline, shared_key);
}

void LinkTable::link_failed(const NetAddress& peer, uint32_t err) {
  ACCL_LOG_WARN("emulated CCLO: sending to {} failed (0x{:x}); the link will be reopened", to_string(peer), err);
  forget(peer);
}

void LinkTable::forget(const NetAddress& peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  links_.erase(address_key(peer));
  generation_.fetch_add(1, std::memory_order_release);
}

void LinkTable::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  links_.clear();
  generation_.fetch_add(1, std::memory_order_release);
}

size_t LinkTable::cached() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return links_.size();
}

}  // namespace accl::emu
