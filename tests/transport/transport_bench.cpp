// SPDX-License-Identifier: Apache-2.0
//
// Loopback latency and throughput of the TCP, UDP and shared-memory
// transports (two transports in one process). Run with `meson test
// --benchmark transport-bench` or directly: transport_bench [tcp|udp|shm]...
#include "transport_test_util.hpp"

#include <cstdio>

namespace accl::emu::test {
namespace {

// Each side answers every message with one of the same size from inside
// end_message, so a round trip never involves the main thread.
class PingPongSink final : public Sink {
 public:
  std::byte* begin_message(const NetAddress&, const abi::WireHeader& h, ReceiveTicket&) override {
    scratch.ensure(std::max<size_t>(h.count, 64));
    return scratch.get();
  }
  void end_message(const NetAddress&, const abi::WireHeader& h, ReceiveTicket&, uint32_t status) override {
    if (status != 0) errors++;
    uint64_t n = ++received;
    if (n >= rounds) {
      std::lock_guard lock(mutex);
      cv.notify_all();
      if (n > rounds) return;
    }
    if (n < rounds || reply_last) {
      CopyWriter w(source);
      if (back->send(h, w, Clock::now() + 5s) != 0) errors++;
    }
  }
  // Stopping the other side at the end closes the link: not an error here.
  void link_failed(const NetAddress&, uint32_t) override {}

  transport_detail::AlignedBuffer scratch;
  const std::byte* source = nullptr;
  std::shared_ptr<Link> back;
  uint64_t rounds = 0;
  bool reply_last = false;
  std::atomic<uint64_t> received{0};
  std::atomic<int> errors{0};
  std::mutex mutex;
  std::condition_variable cv;
};

// Counts arrivals; payloads land in one reused buffer.
class CountingSink final : public Sink {
 public:
  std::byte* begin_message(const NetAddress&, const abi::WireHeader& h, ReceiveTicket&) override {
    dst.ensure(std::max<size_t>(h.count, 64));
    return dst.get();
  }
  void end_message(const NetAddress&, const abi::WireHeader&, ReceiveTicket&, uint32_t status) override {
    if (status != 0) errors++;
    if (++received >= expected) {
      std::lock_guard lock(mutex);
      cv.notify_all();
    }
  }
  void link_failed(const NetAddress&, uint32_t) override { errors++; }

  transport_detail::AlignedBuffer dst;
  uint64_t expected = 0;
  std::atomic<uint64_t> received{0};
  std::atomic<int> errors{0};
  std::mutex mutex;
  std::condition_variable cv;
};

using Factory = std::unique_ptr<Transport> (*)(const TransportOptions&);

double latency_us(Factory make, size_t bytes, uint64_t rounds) {
  std::vector<std::byte> source(std::max<size_t>(bytes, 64));
  PingPongSink sa, sb;
  auto a = make(options());
  auto b = make(options());
  a->start(sa);
  b->start(sb);
  sa.back = a->connect(b->local_address(), in(5000ms));
  sb.back = b->connect(a->local_address(), in(5000ms));
  if (!sa.back || !sb.back) return -1;
  sa.source = sb.source = source.data();
  sa.rounds = sb.rounds = rounds;
  sb.reply_last = true;  // b answers the last ping so a sees `rounds` replies
  abi::WireHeader h = make_header(static_cast<uint32_t>(bytes), 0);
  CopyWriter w(source.data());
  auto t0 = Clock::now();
  if (sa.back->send(h, w, in(5000ms)) != 0) return -1;
  std::unique_lock lock(sa.mutex);
  if (!sa.cv.wait_for(lock, 60s, [&] { return sa.received >= rounds; })) return -1;
  auto t1 = Clock::now();
  lock.unlock();
  a->stop();
  b->stop();
  if (sa.errors > 0 || sb.errors > 0) std::fprintf(stderr, "  (errors: %d %d)\n", sa.errors.load(), sb.errors.load());
  // One round = two one-way trips.
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / (2.0 * static_cast<double>(rounds));
}

// Returns {GB/s, messages/s}.
std::pair<double, double> throughput(Factory make, size_t bytes, uint64_t messages) {
  std::vector<std::byte> source(std::max<size_t>(bytes, 64));
  fill_pattern(source.data(), 1, 0, source.size());
  CountingSink sink_a, sink_b;
  auto a = make(options());
  auto b = make(options());
  a->start(sink_a);
  b->start(sink_b);
  sink_b.expected = messages;
  auto link = a->connect(b->local_address(), in(5000ms));
  if (!link) return {-1, -1};
  abi::WireHeader h = make_header(static_cast<uint32_t>(bytes), 0);
  auto t0 = Clock::now();
  for (uint64_t i = 0; i < messages; ++i) {
    CopyWriter w(source.data());
    if (link->send(h, w, in(10000ms)) != 0) return {-1, -1};
  }
  std::unique_lock lock(sink_b.mutex);
  if (!sink_b.cv.wait_for(lock, 120s, [&] { return sink_b.received >= messages; })) return {-1, -1};
  auto t1 = Clock::now();
  lock.unlock();
  double s = std::chrono::duration<double>(t1 - t0).count();
  return {static_cast<double>(bytes * messages) / s / 1e9, static_cast<double>(messages) / s};
}

void run(const char* name, Factory make) {
  double lat8 = latency_us(make, 8, 20000);
  double lat4m = latency_us(make, 4 << 20, 100);
  auto [gbs4m, rate4m] = throughput(make, 4 << 20, 300);
  auto [gbs8, rate8] = throughput(make, 8, 200000);
  std::printf("%-4s  latency 8 B: %7.1f us   4 MiB: %8.1f us   |  throughput 4 MiB: %5.2f GB/s   8 B: %8.0f msg/s\n",
              name, lat8, lat4m, gbs4m, rate8);
  (void)rate4m;
  (void)gbs8;
}

}  // namespace
}  // namespace accl::emu::test

int main(int argc, char** argv) {
  using namespace accl::emu;
  struct Entry {
    const char* name;
    test::Factory make;
  };
  const Entry all[] = {
      {"shm", [](const TransportOptions& o) { return make_shm_transport(o); }},
      {"tcp", [](const TransportOptions& o) { return make_tcp_transport(o); }},
      {"udp", [](const TransportOptions& o) { return make_udp_transport(o); }},
  };
  for (const Entry& e : all) {
    bool selected = argc < 2;
    for (int i = 1; i < argc; ++i) selected |= std::string(argv[i]) == e.name;
    if (selected) test::run(e.name, e.make);
  }
  return 0;
}
