// SPDX-License-Identifier: Apache-2.0
#include <accl_emu/transport_probe.hpp>

#include "transport.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace accl::emu {
namespace {

// Takes every payload into one buffer and counts the messages.
class EchoSink final : public Sink {
 public:
  explicit EchoSink(size_t max_bytes) : landing_(std::max<size_t>(max_bytes, 64)) {}
  std::byte* begin_message(const NetAddress&, const abi::WireHeader& header, ReceiveTicket&) override {
    return header.count <= landing_.size() ? landing_.data() : nullptr;
  }
  void end_message(const NetAddress&, const abi::WireHeader& header, ReceiveTicket&, uint32_t status) override {
    if (status != 0 || header.count > landing_.size()) failed.store(true, std::memory_order_relaxed);
    last_round.store(header.seqn, std::memory_order_relaxed);
    arrived.fetch_add(1, std::memory_order_release);
  }
  void link_failed(const NetAddress&, uint32_t) override { failed.store(true, std::memory_order_relaxed); }
  uint32_t first_word() const {
    uint32_t w = 0;
    std::memcpy(&w, landing_.data(), sizeof w);
    return w;
  }
  std::atomic<uint64_t> arrived{0};
  std::atomic<uint32_t> last_round{0};  // header.seqn of the last message (the round number)
  std::atomic<bool> failed{false};

 private:
  std::vector<std::byte> landing_;
};

class RoundWriter final : public PayloadWriter {
 public:
  explicit RoundWriter(size_t bytes) : bytes_(bytes, std::byte{0x5a}) {}
  void set_round(uint32_t round) {
    if (bytes_.size() >= sizeof round) std::memcpy(bytes_.data(), &round, sizeof round);
  }
  uint32_t write(std::byte* dst, size_t offset, size_t bytes) override {
    std::memcpy(dst, bytes_.data() + offset, bytes);
    return 0;
  }
  const std::byte* contiguous_source(size_t) const override { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

 private:
  std::vector<std::byte> bytes_;
};

std::unique_ptr<Transport> make_transport(TransportKind kind, const TransportOptions& options) {
  switch (kind) {
#if ACCL_EMU_HAVE_SHM
    case TransportKind::shm: return make_shm_transport(options);
#endif
#if ACCL_EMU_HAVE_TCP
    case TransportKind::tcp: return make_tcp_transport(options);
#endif
    default: break;
  }
  throw std::runtime_error("transport probe: no " + to_string(kind) + " transport (shm and tcp, when built in)");
}

}  // namespace

struct TransportProbe::State {
  State(TransportKind k, size_t max_bytes) : kind(k), sink(max_bytes), writer(max_bytes) {}
  TransportKind kind;
  EchoSink sink;
  RoundWriter writer;
  std::unique_ptr<Transport> transport;
  std::shared_ptr<Link> link;
  bool stopped = false;
};

TransportProbe::TransportProbe(TransportKind kind, size_t max_bytes, unsigned host_processes)
    : state_(std::make_unique<State>(kind, max_bytes)) {
  TransportOptions options;
  options.bind = NetAddress{0x7f000001, 0};  // 127.0.0.1, any free port
  options.host_processes = host_processes;
  state_->transport = make_transport(kind, options);
  state_->transport->start(state_->sink);
}

TransportProbe::~TransportProbe() { stop(); }

TransportProbe::Address TransportProbe::local_address() const {
  const NetAddress a = state_->transport->local_address();
  return Address{a.ip, a.port};
}

void TransportProbe::connect(const Address& peer, Clock::time_point deadline) {
  state_->link = state_->transport->connect(NetAddress{peer.ipv4, peer.port}, deadline);
  if (!state_->link) throw std::runtime_error("cannot connect to the peer over " + to_string(state_->kind));
}

void TransportProbe::driver_enters() { state_->transport->driver_enters(); }

void TransportProbe::driver_leaves() { state_->transport->driver_leaves(); }

bool TransportProbe::send(uint32_t round, Clock::time_point deadline) {
  state_->writer.set_round(round);
  abi::WireHeader h{};
  h.count = h.msg_bytes = static_cast<uint32_t>(state_->writer.size());
  h.seqn = round;
  return state_->link->send(h, state_->writer, deadline) == 0;
}

bool TransportProbe::await(uint64_t messages, Clock::time_point deadline) {
  Transport& t = *state_->transport;
  const EchoSink& sink = state_->sink;
  const bool polled = state_->kind == TransportKind::shm;
  unsigned spins = 0;
  while (sink.arrived.load(std::memory_order_acquire) < messages) {
    if (polled) t.poll();
    else sched_yield();  // the transport's reader thread delivers: let it run
    if (sink.failed.load(std::memory_order_relaxed)) return false;
    if ((++spins & 1023) == 0 && Clock::now() >= deadline) return false;
  }
  return !sink.failed.load(std::memory_order_relaxed);
}

uint32_t TransportProbe::last_round() const { return state_->sink.last_round.load(); }

uint32_t TransportProbe::first_word() const { return state_->sink.first_word(); }

void TransportProbe::stop() {
  if (state_->stopped) return;
  state_->stopped = true;
  state_->transport->stop();
}

}  // namespace accl::emu
