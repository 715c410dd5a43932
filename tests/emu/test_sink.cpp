// SPDX-License-Identifier: Apache-2.0
// Receive side: RX buffer placement, overflow store, rendezvous windows,
// kernel-stream messages, link failures, reset. A fake transport drives the
// sink with a fake PayloadWriter.
#include "copy_writer.hpp"  // tests/shared
#include "emu_test_util.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <thread>
#include <utility>

namespace accl::emu::test {
namespace {

// Payload byte i = seed + i.
class PatternWriter final : public PayloadWriter {
 public:
  explicit PatternWriter(uint8_t seed) : seed_(seed) {}
  uint32_t write(std::byte* dst, size_t offset, size_t bytes) override {
    for (size_t i = 0; i < bytes; ++i) dst[i] = static_cast<std::byte>(seed_ + offset + i);
    return 0;
  }

 private:
  uint8_t seed_;
};

const NetAddress kPeer{0x7F000001, 4000};

// What a transport does: begin, write in 64-byte pieces, end.
bool deliver(Sink& sink, const NetAddress& from, const abi::WireHeader& h, uint8_t seed = 1, uint32_t fail = 0) {
  PatternWriter w(seed);
  ReceiveTicket t;
  std::byte* dst = sink.begin_message(from, h, t);
  if (dst != nullptr)
    for (size_t off = 0; off < h.count; off += 64) w.write(dst + off, off, std::min<size_t>(64, h.count - off));
  sink.end_message(from, h, t, fail);
  return dst != nullptr;
}

bool pattern_ok(const std::byte* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != static_cast<std::byte>(seed + i)) return false;
  return true;
}

// The next arrival ends a rendezvous transfer with `status`.
::testing::AssertionResult rendezvous_done(EmuDataPlane& dp, uint32_t status) {
  fw::Arrival a;
  if (!dp.pop_arrival(a)) return ::testing::AssertionFailure() << "no arrival";
  if (a.kind != fw::ArrivalKind::rendezvous_done)
    return ::testing::AssertionFailure() << "arrival kind " << static_cast<int>(a.kind);
  if (a.status != status) return ::testing::AssertionFailure() << "status " << a.status << ", want " << status;
  return ::testing::AssertionSuccess();
}

const std::byte* payload(EmuDevice& d, const fw::Arrival& a) {
  const std::byte* p = nullptr;  // RX buffer or overflow store: what the firmware reads
  EXPECT_EQ(d.memory().resolve_source(a.payload_addr, a.payload_host, a.header.count, p), 0u);
  return p;
}

TEST(EmuSink, EagerLandsInIdleRxBuffer) {
  auto d = make_device();
  auto bufs = setup_rx(*d, 4, 1024);
  auto& x = d->exchange_memory();
  ASSERT_TRUE(deliver(d->sink(), kPeer, header(100, 9), 3));
  fw::Arrival a;
  ASSERT_TRUE(d->dataplane().pop_arrival(a));
  EXPECT_EQ(a.kind, fw::ArrivalKind::message);
  EXPECT_EQ(a.rx_index, 0u);
  EXPECT_EQ(a.payload_addr, bufs[0].address);
  EXPECT_FALSE(a.payload_host);
  EXPECT_EQ(a.peer_ip, kPeer.ip);
  EXPECT_EQ(a.peer_port, kPeer.port);
  EXPECT_EQ(a.header.tag, 9u);
  EXPECT_TRUE(pattern_ok(payload(*d, a), 100, 3));
  EXPECT_EQ(rx_field(x, 0, abi::kRxStatus), static_cast<uint32_t>(abi::kRxReserved));
  EXPECT_EQ(rx_field(x, 0, abi::kRxTag), 9u);
  EXPECT_EQ(rx_field(x, 0, abi::kRxLen), 100u);
  EXPECT_EQ(rx_field(x, 0, abi::kRxSrc), 1u);
  EXPECT_EQ(rx_field(x, 0, abi::kRxSeqn), 3u);
  // Next message takes the next idle buffer; releasing frees the first.
  ASSERT_TRUE(deliver(d->sink(), kPeer, header(64)));
  fw::Arrival b;
  ASSERT_TRUE(d->dataplane().pop_arrival(b));
  EXPECT_EQ(b.rx_index, 1u);
  d->dataplane().release_payload(a);
  EXPECT_EQ(rx_field(x, 0, abi::kRxStatus), static_cast<uint32_t>(abi::kRxIdle));
  d->dataplane().release_payload(a);  // double release is harmless
  d->dataplane().release_payload(b);
  EXPECT_FALSE(d->dataplane().pop_arrival(a));
}

TEST(EmuSink, OverflowWhenRxBuffersAreBusyKeepsOrder) {
  auto d = make_device();
  setup_rx(*d, 2, 256);
  auto& dp = d->dataplane();
  for (uint8_t i = 0; i < 5; ++i) {
    auto h = header(i == 3 ? 1000 : 200);  // message 3 is larger than an RX buffer
    h.seqn = i;
    ASSERT_TRUE(deliver(d->sink(), kPeer, h, i));
  }
  std::vector<fw::Arrival> got(5);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(dp.pop_arrival(got[i]));
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(got[i].header.seqn, i);  // arrival order == link order
    EXPECT_TRUE(pattern_ok(payload(*d, got[i]), got[i].header.count, static_cast<uint8_t>(i)));
  }
  EXPECT_EQ(got[0].rx_index, 0u);
  EXPECT_EQ(got[1].rx_index, 1u);
  for (int i = 2; i < 5; ++i) {
    EXPECT_EQ(got[i].rx_index, 0xFFFFFFFFu);
    EXPECT_EQ(got[i].payload_addr >> 40, DeviceMemory::kOverflowBankTag);
  }
  EXPECT_GT(d->memory().overflow().used_bytes(), 0u);
  for (auto& a : got) dp.release_payload(a);
  EXPECT_EQ(d->memory().overflow().used_bytes(), 0u);
}

TEST(EmuSink, OverflowLimitDiscardsWithError) {
  auto d = make_device();  // overflow store: 1 MiB, no RX table configured
  auto& dp = d->dataplane();
  ASSERT_TRUE(deliver(d->sink(), kPeer, header(700 * 1024)));
  EXPECT_FALSE(deliver(d->sink(), kPeer, header(700 * 1024)));
  fw::Arrival a, b;
  ASSERT_TRUE(dp.pop_arrival(a));
  ASSERT_TRUE(dp.pop_arrival(b));
  EXPECT_EQ(a.status, 0u);
  EXPECT_EQ(b.status, static_cast<uint32_t>(abi::kDmaSizeError));
  EXPECT_EQ(b.token, 0u);
  dp.release_payload(a);
  EXPECT_TRUE(deliver(d->sink(), kPeer, header(700 * 1024)));  // space again
}

// The firmware's pop past a full arrival table: the oldest arrival of one
// (communicator context, source), past older ones of others, each source's
// order kept, the rest left in arrival order; a link error always qualifies.
TEST(EmuSink, PopForOneSourceTakesItsOldestPastOthers) {
  auto d = make_device();
  setup_rx(*d, 2, 256);
  auto& dp = d->dataplane();
  struct Sent { uint32_t ctx, src, seqn; };
  const Sent sent[] = {{2 << 1 | 1, 2, 0}, {2 << 1 | 1, 2, 1}, {3 << 1 | 1, 3, 0}, {2 << 1, 3, 0}, {2 << 1 | 1, 3, 1}};
  for (const Sent& m : sent) {
    auto h = header(64);
    h.ctx = m.ctx;
    h.src = m.src;
    h.seqn = m.seqn;
    ASSERT_TRUE(deliver(d->sink(), kPeer, h));
  }
  fw::Arrival a;
  EXPECT_FALSE(dp.pop_arrival_for(7, abi::kRankAny, a));  // no such communicator
  ASSERT_TRUE(dp.pop_arrival_for(2, 3, a));  // context 2, rank 3: its p2p message first
  EXPECT_EQ(a.header.ctx, 2u << 1);
  dp.release_payload(a);
  ASSERT_TRUE(dp.pop_arrival_for(2, 3, a));
  EXPECT_EQ(a.header.ctx, 2u << 1 | 1);
  EXPECT_EQ(a.header.seqn, 1u);
  dp.release_payload(a);
  EXPECT_FALSE(dp.pop_arrival_for(2, 3, a));
  ASSERT_TRUE(dp.pop_arrival_for(3, abi::kRankAny, a));
  EXPECT_EQ(a.header.src, 3u);
  dp.release_payload(a);
  d->sink().link_failed(kPeer, abi::kLinkError);
  ASSERT_TRUE(dp.pop_arrival_for(9, 0, a));
  EXPECT_EQ(a.kind, fw::ArrivalKind::link_error);
  for (uint32_t seqn = 0; seqn < 2; ++seqn) {  // the rest, in arrival order
    ASSERT_TRUE(dp.pop_arrival(a));
    EXPECT_EQ(a.header.src, 2u);
    EXPECT_EQ(a.header.seqn, seqn);
    dp.release_payload(a);
  }
  EXPECT_FALSE(dp.pop_arrival(a));
}

TEST(EmuSink, HeaderOnlyMessagesNeedNoStorage) {
  auto d = make_device();
  auto h = header(0, 1, abi::kMsgRendezvousRequest);
  h.msg_bytes = 1 << 20;
  h.rid = 77;
  ASSERT_TRUE(deliver(d->sink(), kPeer, h));
  fw::Arrival a;
  ASSERT_TRUE(d->dataplane().pop_arrival(a));
  EXPECT_EQ(a.header.msg_type, abi::kMsgRendezvousRequest);
  EXPECT_EQ(a.header.rid, 77u);
  EXPECT_EQ(a.token, 0u);
  EXPECT_EQ(a.rx_index, 0xFFFFFFFFu);
}

TEST(EmuSink, StreamMessagesGoToKernelStream) {
  auto d = make_device();
  auto h = header(128);
  h.strm = abi::kStreamIdOffset + 3;
  ASSERT_TRUE(deliver(d->sink(), kPeer, h, 11));
  fw::Arrival a;
  EXPECT_FALSE(d->dataplane().pop_arrival(a));
  EXPECT_EQ(d->streams().available(), 128u);
  EXPECT_EQ(d->streams().front_stream_id(), 3);
  std::vector<std::byte> out(128);
  ASSERT_TRUE(d->streams().pull(out.data(), 128, std::chrono::steady_clock::now()));
  EXPECT_TRUE(pattern_ok(out.data(), 128, 11));
}

// Issue 7: stream_put data from peers no longer queues without limit. A
// message that finds the kernel stream full waits (back-pressure on its
// link) until the kernel pulls, or is dropped at the timeout.
TEST(EmuSink, StreamMessagesWaitForRoomThenAreDropped) {
  ExchangeMemory xmem;
  DeviceMemory memory(1, 1 << 20, 1 << 20);
  KernelStream streams(256);
  Wakeup doorbell(std::chrono::nanoseconds(0));
  ReceiveSink sink(xmem, memory, streams, doorbell, 50ms);
  auto h = header(200);
  h.strm = abi::kStreamIdOffset + 1;
  ASSERT_TRUE(deliver(sink, kPeer, h, 1));
  EXPECT_EQ(streams.available(), 200u);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(deliver(sink, kPeer, h, 2));  // no room: dropped after the timeout
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 50ms);
  EXPECT_EQ(streams.available(), 200u);
  // The kernel pulls meanwhile: the waiting message gets in.
  std::thread kernel([&] {
    std::this_thread::sleep_for(20ms);
    std::vector<std::byte> out(200);
    EXPECT_TRUE(streams.pull(out.data(), 200, std::chrono::steady_clock::now() + 1s));
    EXPECT_TRUE(pattern_ok(out.data(), 200, 1));
  });
  ASSERT_TRUE(deliver(sink, kPeer, h, 3));
  kernel.join();
  ASSERT_EQ(streams.available(), 200u);
  std::vector<std::byte> out(200);
  ASSERT_TRUE(streams.pull(out.data(), 200, std::chrono::steady_clock::now()));
  EXPECT_TRUE(pattern_ok(out.data(), 200, 3));
}

TEST(EmuSink, RendezvousNeedsAnExactlyMatchingWindow) {
  auto d = make_device();
  auto& dp = d->dataplane();
  auto buf = d->allocate(4096, MemoryKind::device, 0);
  auto h = rendezvous_data_header(4096, 5, buf.address);
  // No window at all.
  EXPECT_FALSE(deliver(d->sink(), kPeer, h));
  fw::Arrival a;
  ASSERT_TRUE(dp.pop_arrival(a));
  EXPECT_EQ(a.kind, fw::ArrivalKind::rendezvous_done);
  EXPECT_EQ(a.status, static_cast<uint32_t>(abi::kDmaDecodeError));

  fw::Window w = window_for(h, kPeer);
  w.bytes = 2048;  // smaller than the data
  EXPECT_EQ(dp.open_window(w), 0u);
  EXPECT_EQ(dp.open_window(w), static_cast<uint32_t>(abi::kInvalidArgument));  // already open
  EXPECT_FALSE(deliver(d->sink(), kPeer, h));
  ASSERT_TRUE(dp.pop_arrival(a));
  EXPECT_EQ(a.status, static_cast<uint32_t>(abi::kDmaSizeError));
  dp.close_window(w);
  EXPECT_EQ(d->sink().open_windows(), 0u);

  // Wrong peer port, then the right window.
  w.bytes = 4096;
  w.peer_port = kPeer.port + 1;
  EXPECT_EQ(dp.open_window(w), 0u);
  EXPECT_FALSE(deliver(d->sink(), kPeer, h));
  ASSERT_TRUE(dp.pop_arrival(a));
  EXPECT_NE(a.status, 0u);
  dp.close_window(w);
  w.peer_port = kPeer.port;
  EXPECT_EQ(dp.open_window(w), 0u);
  EXPECT_TRUE(deliver(d->sink(), kPeer, h, 42));
  ASSERT_TRUE(dp.pop_arrival(a));
  EXPECT_EQ(a.kind, fw::ArrivalKind::rendezvous_done);
  EXPECT_EQ(a.status, 0u);
  EXPECT_EQ(a.header.rid, 5u);
  std::vector<std::byte> back(4096);
  d->copy_from_device(buf.address, back.data(), 4096);
  EXPECT_TRUE(pattern_ok(back.data(), 4096, 42));
  EXPECT_EQ(d->sink().open_windows(), 0u);  // one window, one transfer
  EXPECT_FALSE(deliver(d->sink(), kPeer, h));  // a duplicate finds no window
  ASSERT_TRUE(dp.pop_arrival(a));
  EXPECT_NE(a.status, 0u);

  // Windows must be valid memory.
  w.addr = 0x1234;
  EXPECT_EQ(dp.open_window(w), static_cast<uint32_t>(abi::kInvalidArgument));
  d->free(buf);
}

// Direct writes (the shm transport's single copy): a window is offered only
// for an exact grant and never when it reduces on landing; taking an offered
// window back without its data runs the fence first (a peer may be writing
// into it), while a window whose data arrived, or one never offered, does not.
TEST(EmuSink, WindowsOfferedForDirectWritesAreFencedWhenTakenBack) {
  auto d = make_device();
  auto& dp = d->dataplane();
  auto& sink = d->sink();
  auto buf = d->allocate(8192, MemoryKind::device, 0);
  auto data = rendezvous_data_header(4096, 9, buf.address);
  auto grant = data;  // the receiver's grant for that transfer
  grant.msg_type = abi::kMsgRendezvousAddr;
  grant.count = 0;
  const fw::Window w = window_for(data, kPeer);
  size_t bytes = 0;
  ASSERT_EQ(dp.open_window(w), 0u);
  EXPECT_EQ(sink.direct_window(kPeer, grant, bytes), nullptr) << "no fence, no offer";

  int fences = 0;
  sink.set_direct_write_fence([&] {
    ++fences;
    // The fence waits for other processes: it must run outside the sink's
    // lock (taking it here would deadlock otherwise).
    (void)sink.open_windows();
    return true;
  });
  std::byte* expected = nullptr;
  ASSERT_EQ(d->memory().resolve(buf.address, false, 4096, expected), 0u);
  auto other = grant;
  other.rid = 10;
  EXPECT_EQ(sink.direct_window(kPeer, other, bytes), nullptr) << "another transfer's grant";
  EXPECT_EQ(sink.direct_window(NetAddress{kPeer.ip, static_cast<uint16_t>(kPeer.port + 1)}, grant, bytes), nullptr)
      << "another peer";
  dp.close_window(w);
  EXPECT_EQ(fences, 0) << "a window never offered needs no fence";

  ASSERT_EQ(dp.open_window(w), 0u);
  EXPECT_EQ(sink.direct_window(kPeer, grant, bytes), expected);
  EXPECT_EQ(bytes, 4096u);
  dp.close_window(w);
  EXPECT_EQ(fences, 1) << "closing an offered window before its data fences";

  // Offered, then its data arrives: closing it later has nothing to fence.
  ASSERT_EQ(dp.open_window(w), 0u);
  ASSERT_EQ(sink.direct_window(kPeer, grant, bytes), expected);
  EXPECT_TRUE(deliver(sink, kPeer, data, 11));
  fw::Arrival a;
  ASSERT_TRUE(dp.pop_arrival(a));
  EXPECT_EQ(a.status, 0u);
  dp.close_window(w);
  EXPECT_EQ(fences, 1);

  // A reset takes offered windows back too.
  ASSERT_EQ(dp.open_window(w), 0u);
  ASSERT_EQ(sink.direct_window(kPeer, grant, bytes), expected);
  sink.reset();
  EXPECT_EQ(fences, 2);
  EXPECT_EQ(sink.open_windows(), 0u);

  // A window that reduces on landing is never offered.
  auto operand = d->allocate(4096, MemoryKind::device, 0);
  fw::Window r = w;
  r.reduce = true;
  r.operand_addr = operand.address;
  const ArithFunction sum{ReduceOp::sum, ElemType::f32};
  ASSERT_EQ(sink.open_window(r, &sum), 0u);
  EXPECT_EQ(sink.direct_window(kPeer, grant, bytes), nullptr);
  dp.close_window(r);
  EXPECT_EQ(fences, 2);
  d->free(operand);
  d->free(buf);
}

// Issue 7: a receive that failed (its window closed) must never see its
// buffer change afterwards, although the transport took the window's pointer
// at message begin and is still writing the rest of the message.
TEST(EmuSink, ClosingAWindowInFlightRevokesIt) {
  auto d = make_device();
  auto& dp = d->dataplane();
  constexpr size_t kPiece = WriteLease::kMaxPieceBytes;
  constexpr uint32_t kBytes = 3 * kPiece;
  auto buf = d->allocate(kBytes, MemoryKind::device, 0);
  auto h = rendezvous_data_header(kBytes, 6, buf.address);
  fw::Window w = window_for(h, kPeer);
  ASSERT_EQ(dp.open_window(w), 0u);
  ReceiveTicket t;
  std::byte* dst = d->sink().begin_message(kPeer, h, t);
  ASSERT_NE(dst, nullptr);
  ASSERT_TRUE(t.lease) << "a window must be handed out under a revocable lease";
  const std::vector<std::byte> ones(kPiece, std::byte{1});
  EXPECT_TRUE(store_payload(t, dst, 0, ones.data(), kPiece));

  // The transport is in the middle of its second piece when the receive
  // fails: close_window must wait for that piece, then forbid the rest.
  ASSERT_TRUE(t.lease->begin_write());
  std::atomic<bool> closed{false};
  std::thread firmware([&] {
    dp.close_window(w);
    closed = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(closed.load()) << "close_window returned while a piece was being written";
  std::memcpy(dst + kPiece, ones.data(), kPiece);
  t.lease->end_write();
  firmware.join();
  EXPECT_TRUE(closed.load());
  EXPECT_TRUE(t.lease->revoked());
  EXPECT_FALSE(store_payload(t, dst, 2 * kPiece, ones.data(), kPiece));
  d->sink().end_message(kPeer, h, t, 0);
  // Still reported, with an error, so that the firmware counts the message's
  // sequence number (nobody waits for the completion; it is dropped there).
  ASSERT_TRUE(rendezvous_done(dp, abi::kDmaDecodeError))
      << "a revoked transfer's sequence number must still reach the firmware";
  fw::Arrival a;
  EXPECT_FALSE(dp.pop_arrival(a));
  auto back = read_back<uint8_t>(*d, buf.address, kBytes);
  EXPECT_EQ(std::count(back.begin(), back.begin() + 2 * kPiece, 1), static_cast<long>(2 * kPiece));
  EXPECT_EQ(std::count(back.begin() + 2 * kPiece, back.end(), 0), static_cast<long>(kPiece));

  // A reset revokes transfers in flight the same way.
  ASSERT_EQ(dp.open_window(w), 0u);
  ReceiveTicket t2;
  dst = d->sink().begin_message(kPeer, h, t2);
  ASSERT_NE(dst, nullptr);
  ASSERT_TRUE(t2.lease);
  dp.reset_datapath();
  EXPECT_FALSE(store_payload(t2, dst, 0, ones.data(), kPiece));
  d->sink().end_message(kPeer, h, t2, 0);
  EXPECT_FALSE(dp.pop_arrival(a));

  // A transfer that completes is not affected by the later close.
  ASSERT_EQ(dp.open_window(w), 0u);
  EXPECT_TRUE(deliver(d->sink(), kPeer, h, 9));
  ASSERT_TRUE(rendezvous_done(dp, 0));
  dp.close_window(w);
  d->free(buf);
}

// A window that reduces on landing ends up holding operand + payload however
// the transport stores the payload: in pieces that split elements, out of
// order, produced in place by an in-process sender, or written raw (TCP's
// direct recv) and reduced when the message ends.
TEST(EmuSink, WindowThatReducesOnLandingHoldsOperandPlusPayload) {
  auto d = make_device();
  auto& dp = d->dataplane();
  write_standard_arith(d->exchange_memory());
  constexpr uint32_t kElems = 20000;
  constexpr uint32_t kBytes = kElems * 4;
  auto operand_buf = d->allocate(kBytes, MemoryKind::device, 0);
  auto result_buf = d->allocate(kBytes, MemoryKind::device, 0);
  std::vector<int32_t> operand(kElems), incoming(kElems);
  for (uint32_t i = 0; i < kElems; ++i) {
    operand[i] = static_cast<int32_t>(i * 7) - 50;
    incoming[i] = 1000 + static_cast<int32_t>(i * 3);
  }
  d->copy_to_device(operand_buf.address, operand.data(), kBytes);
  const auto* src = reinterpret_cast<const std::byte*>(incoming.data());

  // Fills the result with -1 and opens a window (rid `id`) over it that sums
  // the operand into it; returns the data header and the window.
  auto open_reducing_window = [&](uint32_t id) {
    std::vector<int32_t> stale(kElems, -1);
    d->copy_to_device(result_buf.address, stale.data(), kBytes);
    auto h = rendezvous_data_header(kBytes, id, result_buf.address);
    fw::Window w = window_for(h, kPeer);
    w.reduce = true;
    w.arcfg = kArithI32;
    w.func = 0;  // SUM
    w.operand_addr = operand_buf.address;
    EXPECT_EQ(dp.open_window(w), 0u);
    return std::make_pair(h, w);
  };

  enum class Style { odd_pieces, out_of_order, produced, raw_then_finish };
  uint32_t rid = 20;
  for (Style style : {Style::odd_pieces, Style::out_of_order, Style::produced, Style::raw_then_finish}) {
    SCOPED_TRACE(static_cast<int>(style));
    const auto [h, w] = open_reducing_window(++rid);
    ReceiveTicket t;
    std::byte* dst = d->sink().begin_message(kPeer, h, t);
    ASSERT_NE(dst, nullptr);
    ASSERT_NE(t.landing, nullptr);
    switch (style) {
      case Style::odd_pieces:  // pieces that end inside an element
        for (size_t off = 0, n = 1; off < kBytes; off += n, n = n * 3 + 1)
          ASSERT_TRUE(store_payload(t, dst, off, src + off, std::min<size_t>(n, kBytes - off)));
        break;
      case Style::out_of_order:
        ASSERT_TRUE(store_payload(t, dst, 4096, src + 4096, 1000));
        ASSERT_TRUE(store_payload(t, dst, 0, src, 4096));
        ASSERT_TRUE(store_payload(t, dst, 5096, src + 5096, kBytes - 5096));
        break;
      case Style::produced: {
        CopyWriter writer(src);
        ASSERT_EQ(produce_payload(writer, dst, kBytes, t), 0u);
        break;
      }
      case Style::raw_then_finish:
        ASSERT_TRUE(store_payload(t, dst, 0, src, 1001));
        std::memcpy(dst + 1001, src + 1001, kBytes - 1001);  // written without telling the landing
        break;
    }
    d->sink().end_message(kPeer, h, t, 0);
    ASSERT_TRUE(rendezvous_done(dp, 0));
    auto back = read_back<int32_t>(*d, result_buf.address, kElems);
    for (uint32_t i = 0; i < kElems; ++i) ASSERT_EQ(back[i], operand[i] + incoming[i]) << "element " << i;
  }

  // A receive that fails mid-message: its window is revoked, and nothing
  // after that point is written or reduced, also not when the message ends.
  const auto [h, w] = open_reducing_window(++rid);
  ReceiveTicket t;
  std::byte* dst = d->sink().begin_message(kPeer, h, t);
  ASSERT_NE(dst, nullptr);
  ASSERT_TRUE(store_payload(t, dst, 0, src, 4002));  // 1000 elements reduced, 2 bytes raw
  dp.close_window(w);
  EXPECT_FALSE(store_payload(t, dst, 4002, src + 4002, kBytes - 4002));
  d->sink().end_message(kPeer, h, t, 0);
  // Counted, with an error (see ClosingAWindowInFlightRevokesIt).
  ASSERT_TRUE(rendezvous_done(dp, abi::kDmaDecodeError));
  fw::Arrival a;
  EXPECT_FALSE(dp.pop_arrival(a));
  auto back = read_back<int32_t>(*d, result_buf.address, kElems);
  for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(back[i], operand[i] + incoming[i]) << "element " << i;
  for (uint32_t i = 1001; i < kElems; ++i) ASSERT_EQ(back[i], -1) << "element " << i;
  d->free(operand_buf);
  d->free(result_buf);
}

// Windows that reduce on landing need a function without conversions, whole
// elements and an operand in valid memory apart from the window.
TEST(EmuSink, WindowThatReducesOnLandingChecksItsArguments) {
  auto d = make_device();
  auto& dp = d->dataplane();
  write_standard_arith(d->exchange_memory());
  auto operand_buf = d->allocate(8192, MemoryKind::device, 0);
  auto result_buf = d->allocate(8192, MemoryKind::device, 0);
  fw::Window w;
  w.peer_ip = kPeer.ip;
  w.peer_port = kPeer.port;
  w.rid = 40;
  w.addr = result_buf.address;
  w.bytes = 4096;
  w.reduce = true;
  w.arcfg = kArithF32;
  w.operand_addr = operand_buf.address;
  w.func = 9;  // no such function
  EXPECT_EQ(dp.open_window(w), static_cast<uint32_t>(abi::kArithError));
  w.func = 0;
  w.arcfg = kArithF32F16;  // arithmetic on fp16: the fp32 operands would need converting
  EXPECT_EQ(dp.open_window(w), static_cast<uint32_t>(abi::kArithError));
  w.arcfg = kArithF32;
  w.bytes = 4098;  // not whole elements
  EXPECT_EQ(dp.open_window(w), static_cast<uint32_t>(abi::kArithError));
  w.bytes = 4096;
  w.operand_addr = result_buf.address + 2048;  // overlaps the window
  EXPECT_EQ(dp.open_window(w), static_cast<uint32_t>(abi::kInvalidArgument));
  w.operand_addr = 0x1234;  // not memory
  EXPECT_EQ(dp.open_window(w), static_cast<uint32_t>(abi::kInvalidArgument));
  EXPECT_EQ(d->sink().open_windows(), 0u);
  w.operand_addr = operand_buf.address;
  w.arcfg = kArithF32F16u;  // compression lanes configured, arithmetic on fp32: no conversion needed
  EXPECT_EQ(dp.open_window(w), 0u);
  dp.close_window(w);
  d->free(operand_buf);
  d->free(result_buf);
}

// Fuzz finding rendezvous-no-arrival: while data is still being written into
// a window, a window with the same (peer, ctx, rid) is opened again and then
// closed. That close concerns only the new window; the transfer into the old
// one must still complete and report its arrival.
TEST(EmuSink, ClosingAReopenedWindowLeavesTheEarlierTransferAlone) {
  auto d = make_device();
  auto& dp = d->dataplane();
  constexpr uint32_t kBytes = 2327;
  auto buf = d->allocate(8192, MemoryKind::device, 0);
  auto h = rendezvous_data_header(kBytes, 0x80000001u, buf.address);
  fw::Window w = window_for(h, kPeer);
  ASSERT_EQ(dp.open_window(w), 0u);
  ReceiveTicket t;
  std::byte* dst = d->sink().begin_message(kPeer, h, t);
  ASSERT_NE(dst, nullptr);

  fw::Window again = w;
  again.bytes = 0;
  ASSERT_EQ(dp.open_window(again), 0u);
  dp.close_window(again);
  EXPECT_EQ(d->sink().open_windows(), 0u);
  ASSERT_TRUE(t.lease);
  EXPECT_FALSE(t.lease->revoked()) << "closing the reopened window cut off the earlier transfer";

  const std::vector<std::byte> ones(kBytes, std::byte{1});
  EXPECT_TRUE(store_payload(t, dst, 0, ones.data(), kBytes));
  d->sink().end_message(kPeer, h, t, 0);
  ASSERT_TRUE(rendezvous_done(dp, 0));
  auto back = read_back<uint8_t>(*d, buf.address, kBytes);
  EXPECT_EQ(std::count(back.begin(), back.end(), 1), static_cast<long>(kBytes));
  d->free(buf);
}

TEST(EmuSink, BrokenMessageFreesItsBuffer) {
  auto d = make_device();
  setup_rx(*d, 1, 1024);
  EXPECT_TRUE(deliver(d->sink(), kPeer, header(500), 1, abi::kLinkError));
  fw::Arrival a;
  EXPECT_FALSE(d->dataplane().pop_arrival(a));
  EXPECT_EQ(rx_field(d->exchange_memory(), 0, abi::kRxStatus), static_cast<uint32_t>(abi::kRxIdle));
}

TEST(EmuSink, LinkFailureBecomesArrival) {
  auto d = make_device();
  d->sink().link_failed(kPeer, abi::kLinkError);
  fw::Arrival a;
  ASSERT_TRUE(d->dataplane().pop_arrival(a));
  EXPECT_EQ(a.kind, fw::ArrivalKind::link_error);
  EXPECT_EQ(a.peer_ip, kPeer.ip);
  EXPECT_EQ(a.peer_port, kPeer.port);
  EXPECT_EQ(a.status, static_cast<uint32_t>(abi::kLinkError));
}

TEST(EmuSink, ResetDropsEverything) {
  auto d = make_device();
  setup_rx(*d, 1, 256);
  auto& dp = d->dataplane();
  ASSERT_TRUE(deliver(d->sink(), kPeer, header(100)));
  ASSERT_TRUE(deliver(d->sink(), kPeer, header(100)));  // overflow
  fw::Arrival held;
  ASSERT_TRUE(dp.pop_arrival(held));  // popped, never released before the reset
  // A message in flight across the reset is dropped when it ends.
  ReceiveTicket t;
  auto h = header(100);
  ASSERT_NE(d->sink().begin_message(kPeer, h, t), nullptr);
  auto s = header(64);
  s.strm = 10;
  ASSERT_TRUE(deliver(d->sink(), kPeer, s));
  dp.reset_datapath();
  d->sink().end_message(kPeer, h, t, 0);
  fw::Arrival a;
  EXPECT_FALSE(dp.pop_arrival(a));
  EXPECT_EQ(d->streams().available(), 0u);
  EXPECT_EQ(d->memory().overflow().used_bytes(), 0u);
  dp.release_payload(held);  // stale token: ignored
  // The driver reconfigures the table after a reset.
  setup_rx(*d, 1, 256);
  ASSERT_TRUE(deliver(d->sink(), kPeer, header(10)));
  ASSERT_TRUE(dp.pop_arrival(a));
  EXPECT_EQ(a.rx_index, 0u);
}

TEST(EmuSink, ConcurrentLinksKeepTheirOrder) {
  auto d = make_device();
  setup_rx(*d, 8, 512);
  auto& dp = d->dataplane();
  constexpr int kLinks = 4, kMessages = 300;
  std::atomic<bool> done{false};
  std::map<uint16_t, uint32_t> next;
  int received = 0;
  bool in_order = true;
  std::thread consumer([&] {
    fw::Arrival a;
    while (received < kLinks * kMessages) {
      if (!dp.pop_arrival(a)) {
        dp.idle(dp.now_ns() + 1'000'000);
        continue;
      }
      if (a.header.seqn != next[static_cast<uint16_t>(a.peer_port)]++) in_order = false;
      if (!pattern_ok(payload(*d, a), a.header.count, static_cast<uint8_t>(a.header.seqn))) in_order = false;
      dp.release_payload(a);
      ++received;
    }
    done = true;
  });
  std::vector<std::thread> links;
  for (int l = 0; l < kLinks; ++l) {
    links.emplace_back([&, l] {
      for (uint32_t i = 0; i < kMessages; ++i) {
        auto h = header(64 + (i % 7) * 64);
        h.seqn = i;
        deliver(d->sink(), NetAddress{kPeer.ip, static_cast<uint16_t>(5000 + l)}, h, static_cast<uint8_t>(i));
      }
    });
  }
  for (auto& t : links) t.join();
  consumer.join();
  EXPECT_TRUE(done.load());
  EXPECT_TRUE(in_order);
  EXPECT_EQ(d->memory().overflow().used_bytes(), 0u);
}

}  // namespace
}  // namespace accl::emu::test
