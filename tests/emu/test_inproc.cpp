// SPDX-License-Identifier: Apache-2.0
// In-process transport, link selection and the loopback link.
#include "emu_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>

namespace accl::emu::test {
namespace {

// Records messages like a minimal sink.
class RecordingSink final : public Sink {
 public:
  std::byte* begin_message(const NetAddress& from, const abi::WireHeader& h, ReceiveTicket& t) override {
    std::lock_guard<std::mutex> lock(mutex_);
    froms.push_back(from);
    headers.push_back(h);
    payloads.emplace_back(h.count);
    t.token = payloads.size() - 1;
    return payloads.back().data();
  }
  void end_message(const NetAddress&, const abi::WireHeader&, ReceiveTicket&, uint32_t status) override {
    std::lock_guard<std::mutex> lock(mutex_);
    statuses.push_back(status);
  }
  void link_failed(const NetAddress&, uint32_t) override {}

  std::mutex mutex_;
  std::vector<NetAddress> froms;
  std::vector<abi::WireHeader> headers;
  std::vector<std::vector<std::byte>> payloads;
  std::vector<uint32_t> statuses;
};

class FillWriter final : public PayloadWriter {
 public:
  uint32_t write(std::byte* dst, size_t offset, size_t bytes) override {
    calls++;
    for (size_t i = 0; i < bytes; ++i) dst[i] = static_cast<std::byte>((offset + i) * 7);
    return 0;
  }
  int calls = 0;
};

TransportOptions at(uint16_t port) {
  TransportOptions o;
  o.bind = NetAddress{parse_ipv4("127.0.0.1"), port};
  return o;
}

TEST(EmuInproc, DeliversWithOneWriterCall) {
  auto a = make_inproc_transport(at(0));
  auto b = make_inproc_transport(at(0));
  EXPECT_NE(a->local_address().port, 0);
  EXPECT_NE(a->local_address().port, b->local_address().port);
  RecordingSink sa, sb;
  a->start(sa);
  b->start(sb);
  auto deadline = Clock::now() + 1s;
  auto link = a->connect(b->local_address(), deadline);
  ASSERT_NE(link, nullptr);
  auto h = header(1000);
  FillWriter w;
  EXPECT_EQ(link->send(h, w, deadline), 0u);
  EXPECT_EQ(w.calls, 1);
  ASSERT_EQ(sb.headers.size(), 1u);
  EXPECT_EQ(sb.froms[0], a->local_address());
  EXPECT_EQ(sb.statuses[0], 0u);
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(sb.payloads[0][i], static_cast<std::byte>(i * 7));
  // Unknown peers are not reachable in-process.
  EXPECT_EQ(a->connect(NetAddress{parse_ipv4("127.0.0.1"), 1}, deadline), nullptr);
  // After the peer stops, its links fail cleanly.
  b->stop();
  EXPECT_EQ(link->send(h, w, deadline), static_cast<uint32_t>(abi::kLinkError));
  EXPECT_EQ(a->connect(b->local_address(), deadline), nullptr);
  a->stop();
}

// Issue 7 on the in-process link, where the sender produces the payload
// straight into the receiver's window: a receive that fails while its
// rendezvous data is being produced closes the window; close_window waits
// for the piece being produced and nothing is produced into the window
// afterwards.
TEST(EmuInproc, ClosedWindowStopsAProducingSender) {
  auto d = make_device();
  auto& dp = d->dataplane();
  auto a = make_inproc_transport(at(0));
  auto b = make_inproc_transport(at(0));
  RecordingSink sa;
  a->start(sa);
  b->start(d->sink());  // the device's receive side behind a second address
  constexpr size_t kPiece = WriteLease::kMaxPieceBytes;
  constexpr uint32_t kBytes = 4 * kPiece;
  auto buf = d->allocate(kBytes, MemoryKind::device, 0);
  auto h = rendezvous_data_header(kBytes, 9, buf.address);
  fw::Window w = window_for(h, a->local_address());
  ASSERT_EQ(dp.open_window(w), 0u);

  // The receive fails while the sender produces its second piece (the
  // firmware thread may also come late, after some more pieces).
  class SlowWriter final : public PayloadWriter {
   public:
    explicit SlowWriter(std::function<void()> on_second) : on_second_(std::move(on_second)) {}
    uint32_t write(std::byte* dst, size_t, size_t bytes) override {
      const int n = ++calls;
      if (n == 2) {
        on_second_();
        std::this_thread::sleep_for(100ms);  // a close meanwhile must wait for this piece
      }
      std::memset(dst, 0x5A, bytes);
      pieces_done = n;
      return 0;
    }
    std::atomic<int> calls{0};
    std::atomic<int> pieces_done{0};

   private:
    std::function<void()> on_second_;
  };
  std::thread firmware;
  int calls_at_close = -1, done_at_close = -1;
  SlowWriter writer([&] {
    firmware = std::thread([&] {
      dp.close_window(w);
      calls_at_close = writer.calls;
      done_at_close = writer.pieces_done;
    });
  });
  auto deadline = Clock::now() + 5s;
  auto link = a->connect(b->local_address(), deadline);
  ASSERT_NE(link, nullptr);
  EXPECT_EQ(link->send(h, writer, deadline), 0u);
  ASSERT_TRUE(firmware.joinable()) << "the payload was produced in one piece, not under a lease";
  firmware.join();
  EXPECT_GE(done_at_close, 2) << "close_window returned while a piece was being produced";
  EXPECT_EQ(done_at_close, calls_at_close);
  EXPECT_EQ(writer.calls.load(), calls_at_close) << "a piece was produced into the window after it was closed";
  ASSERT_LT(calls_at_close, 4) << "the close came too late to test anything";
  const auto written = static_cast<long>(calls_at_close * kPiece);
  auto back = read_back<uint8_t>(*d, buf.address, kBytes);
  EXPECT_EQ(std::count(back.begin(), back.begin() + written, 0x5A), written);
  EXPECT_EQ(std::count(back.begin() + written, back.end(), 0), static_cast<long>(kBytes) - written);
  fw::Arrival arrival;
  ASSERT_TRUE(dp.pop_arrival(arrival));  // counted, with an error (EmuSink.ClosingAWindowInFlightRevokesIt)
  EXPECT_EQ(arrival.kind, fw::ArrivalKind::rendezvous_done);
  EXPECT_EQ(arrival.status, abi::kDmaDecodeError);
  EXPECT_FALSE(dp.pop_arrival(arrival));
  a->stop();
  b->stop();
  d->free(buf);
}

TEST(EmuInproc, SameAddressTwiceIsRejected) {
  auto a = make_inproc_transport(at(0));
  RecordingSink s;
  a->start(s);
  auto b = make_inproc_transport(at(a->local_address().port));
  EXPECT_THROW(b->start(s), std::runtime_error);
}

TEST(EmuInproc, StopWaitsForSendersInsideTheSink) {
  auto a = make_inproc_transport(at(0));
  auto b = make_inproc_transport(at(0));
  RecordingSink sa, sb;
  a->start(sa);
  b->start(sb);
  auto link = a->connect(b->local_address(), Clock::now() + 1s);
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  std::thread sender([&] {
    FillWriter w;
    auto h = header(256);
    while (!stop.load())
      if (link->send(h, w, Clock::now() + 1s) == 0) sent++;
  });
  while (sent.load() < 100) std::this_thread::yield();
  b->stop();  // must not return while the sender is inside sb
  size_t n;
  {
    std::lock_guard<std::mutex> lock(sb.mutex_);
    n = sb.statuses.size();
  }
  std::this_thread::sleep_for(5ms);
  {
    std::lock_guard<std::mutex> lock(sb.mutex_);
    EXPECT_EQ(sb.statuses.size(), n);
    EXPECT_EQ(sb.headers.size(), sb.statuses.size());
  }
  stop = true;
  sender.join();
}

// `to` gets two RX buffers of 1 KiB, then `from` sends it `bytes`: what
// arrived at `to`.
fw::Arrival send_into_rx(EmuDevice& from, EmuDevice& to, uint32_t bytes) {
  setup_rx(to, 2, 1024);
  FillWriter w;
  EXPECT_EQ(from.links().send(to.address(), header(bytes), w, Clock::now() + 1s), 0u);
  fw::Arrival arr;
  EXPECT_TRUE(to.dataplane().pop_arrival(arr)) << "nothing arrived";
  return arr;
}

TEST(EmuInproc, DevicesFindEachOtherAutomatically) {
  auto a = make_device(TransportKind::automatic);
  auto b = make_device(TransportKind::automatic);
  EXPECT_NE(a->address().port, 0);
  EXPECT_EQ(a->endpoint().ip, "127.0.0.1");
  EXPECT_EQ(endpoint(*a).port, a->address().port);
  EXPECT_EQ(send_into_rx(*a, *b, 100).peer_port, a->address().port);
  EXPECT_EQ(a->links().cached(), 1u);
  // Unreachable peer: a link error, nothing cached.
  auto c = make_device(TransportKind::inproc);
  FillWriter w;
  EXPECT_EQ(c->links().send(NetAddress{parse_ipv4("127.0.0.1"), 9}, header(0), w, Clock::now() + 1s),
            static_cast<uint32_t>(abi::kLinkError));
  EXPECT_EQ(c->links().cached(), 0u);
}

TEST(EmuInproc, SelfSendUsesOwnSink) {
  auto a = make_device(TransportKind::inproc);
  const fw::Arrival arr = send_into_rx(*a, *a, 64);
  EXPECT_EQ(arr.peer_port, a->address().port);
  EXPECT_EQ(arr.rx_index, 0u);
}

TEST(EmuInproc, ParseAndPrint) {
  EXPECT_EQ(parse_ipv4("10.10.10.1"), 0x0A0A0A01u);
  EXPECT_EQ(ipv4_to_string(0x0A0A0A01u), "10.10.10.1");
  EXPECT_EQ(to_string(NetAddress{0x7F000001, 80}), "127.0.0.1:80");
  EXPECT_THROW(parse_ipv4("localhost"), std::invalid_argument);
  EXPECT_EQ(parse_transport("auto"), TransportKind::automatic);
  EXPECT_EQ(parse_transport("TCP"), TransportKind::tcp);
  EXPECT_EQ(to_string(TransportKind::shm), "shm");
  EXPECT_THROW(parse_transport("carrier-pigeon"), std::invalid_argument);
}

}  // namespace
}  // namespace accl::emu::test
