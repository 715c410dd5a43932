// SPDX-License-Identifier: Apache-2.0
//
// Control program unit tests on the fake data plane: power-on, decode and
// validation, config calls, local moves, point-to-point protocols (eager,
// rendezvous, matching order, errors, timeouts).
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "fake_cclo.hpp"

// Inside accl::fw::test so that `abi::` means accl::abi (gtest pulls in
// <cxxabi.h>, which declares a global `abi` namespace alias).
namespace accl::fw::test {
using namespace std::chrono_literals;

namespace {

constexpr uint64_t kSrc = 0x10000;
constexpr uint64_t kDst = 0x80000;

std::vector<int32_t> iota_from(int32_t first, size_t n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

CallBuilder send(uint32_t dst, uint32_t count, uint32_t tag, uint64_t addr = kSrc) {
  return std::move(CallBuilder(abi::kSend).rank(dst).count(count).tag(tag).addr(0, addr));
}
CallBuilder recv(uint32_t src, uint32_t count, uint32_t tag, uint64_t addr = kDst) {
  return std::move(CallBuilder(abi::kRecv).rank(src).count(count).tag(tag).addr(2, addr));
}

uint32_t seq_word(FakeCclo& c, uint32_t rank, uint32_t field) {
  return c.xmem(kCommOffset + 4 * (abi::kCommRanksWord + abi::kCommRankRecordWords * rank + field));
}

}  // namespace

TEST(FirmwarePowerOn, WritesIdentityAndStaysUnconfigured) {
  FakeFabric f(1);
  for (int i = 0; i < 100 && f[0].xmem(abi::kHwIdOffset) == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(f[0].xmem(abi::kHwIdOffset), 0x00ABCD2Fu);
  EXPECT_EQ(f[0].xmem(abi::kCapabilitiesOffset), 0x8000007Fu);
  EXPECT_EQ(f[0].xmem(abi::kConfigReadyOffset), 0u);
  EXPECT_EQ(f[0].call(CallBuilder(abi::kNop)), 0u);
  EXPECT_EQ(f[0].call(CallBuilder(abi::kCopy).count(4)), uint32_t{abi::kNotConfigured});
  EXPECT_EQ(f[0].call(send(0, 4, 0)), uint32_t{abi::kNotConfigured});
}

TEST(FirmwareValidation, RejectsMalformedCalls) {
  FakeFabric f(2);
  f.configure();
  EXPECT_EQ(f[0].call(CallBuilder(77)), uint32_t{abi::kCollectiveNotImplemented});
  EXPECT_EQ(f[0].call(send(2, 4, 0)), uint32_t{abi::kInvalidArgument});
  EXPECT_EQ(f[0].call(recv(9, 4, 0)), uint32_t{abi::kInvalidArgument});
  EXPECT_EQ(f[0].call(CallBuilder(abi::kCombine).count(4).function(4)), uint32_t{abi::kInvalidArgument});
  EXPECT_EQ(f[0].call(CallBuilder(abi::kAllreduce).count(4).function(9)), uint32_t{abi::kInvalidArgument});
  EXPECT_EQ(f[0].call(CallBuilder(abi::kBcast).count(4).rank(2)), uint32_t{abi::kInvalidArgument});
  EXPECT_EQ(f[0].call(send(1, 4, 0).comm(0x1FC4)), uint32_t{abi::kInvalidArgument});
  EXPECT_EQ(f[0].call(send(1, 4, 0).comm(0x1002)), uint32_t{abi::kInvalidArgument});  // misaligned
  EXPECT_EQ(f[0].call(send(1, 4, 0).comm(0x1000)), uint32_t{abi::kInvalidArgument});  // size 0
  EXPECT_EQ(f[0].call(send(1, 4, 0).arith(0x1FBC)), uint32_t{abi::kInvalidArgument});
  EXPECT_EQ(f[0].call(CallBuilder(abi::kSend).rank(1).streams(abi::kResStream).tag(247)),
            uint32_t{abi::kInvalidArgument});
}

TEST(FirmwareConfig, ThresholdRules) {
  FakeFabric f(1);
  f.configure();  // 16 RX buffers of 1 KiB
  auto config = [&](uint32_t function, uint32_t count) {
    return f[0].call(CallBuilder(abi::kConfig).function(function).count(count));
  };
  EXPECT_EQ(config(abi::kSetMaxEagerSize, 16 * 1024), 0u);
  EXPECT_EQ(config(abi::kSetMaxEagerSize, 16 * 1024 + 1), uint32_t{abi::kEagerThresholdInvalid});
  EXPECT_EQ(config(abi::kSetMaxRendezvousSize, 10), uint32_t{abi::kRendezvousThresholdInvalid});
  EXPECT_EQ(config(abi::kSetMaxRendezvousSize, 0), 0u);
  EXPECT_EQ(config(abi::kSetMaxRendezvousSize, 64 * 1024), 0u);
  EXPECT_EQ(config(abi::kEnablePackets, 0), 0u);
  EXPECT_EQ(config(abi::kSetTimeout, 1000), 0u);
  EXPECT_EQ(config(42, 0), uint32_t{abi::kInvalidArgument});
}

TEST(FirmwareConfig, ResetDropsPendingCallsAndClearsConfigReady) {
  FakeFabric f(2);
  f.configure();
  const uint64_t pending = f[1].submit(recv(0, 4, 0));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(f[1].call(CallBuilder(abi::kConfig).function(abi::kResetPeripherals)), 0u);
  EXPECT_EQ(f[1].wait(pending, 1s), std::optional<uint32_t>(abi::kNotReady));
  EXPECT_EQ(f[1].xmem(abi::kConfigReadyOffset), 0u);
  EXPECT_EQ(f[1].call(recv(0, 4, 0)), uint32_t{abi::kNotConfigured});
}

TEST(FirmwareLocal, CopyCombineAndStreams) {
  FakeFabric f(1);
  f.configure();
  FakeCclo& c = f[0];
  c.write(kSrc, iota_from(1, 100));
  c.write(kSrc + 0x1000, std::vector<int32_t>(100, 50));
  EXPECT_EQ(c.call(CallBuilder(abi::kCopy).count(100).addr(0, kSrc).addr(2, kDst)), 0u);
  EXPECT_EQ(c.read<int32_t>(kDst, 100), iota_from(1, 100));

  auto combine = [&](uint32_t func) {
    return c.call(CallBuilder(abi::kCombine).count(100).function(func).addr(0, kSrc).addr(1, kSrc + 0x1000).addr(2, kDst));
  };
  ASSERT_EQ(combine(abi::kSum), 0u);
  EXPECT_EQ(c.read<int32_t>(kDst, 3), (std::vector<int32_t>{51, 52, 53}));
  ASSERT_EQ(combine(abi::kMax), 0u);
  EXPECT_EQ(c.read<int32_t>(kDst + 4 * 98, 2), (std::vector<int32_t>{99, 100}));
  ASSERT_EQ(combine(abi::kMin), 0u);
  EXPECT_EQ(c.read<int32_t>(kDst + 4 * 98, 2), (std::vector<int32_t>{50, 50}));

  // copy_to_stream, then copy_from_stream
  ASSERT_EQ(c.call(CallBuilder(abi::kCopy).count(10).addr(0, kSrc).streams(abi::kResStream)), 0u);
  EXPECT_EQ(c.stream_contents().size(), 40u);
  ASSERT_EQ(c.call(CallBuilder(abi::kCopy).count(10).addr(2, kDst + 0x2000).streams(abi::kOp0Stream)), 0u);
  EXPECT_EQ(c.read<int32_t>(kDst + 0x2000, 10), iota_from(1, 10));
}

TEST(FirmwareP2P, EagerSegmentsAndSequenceNumbers) {
  FabricOptions o;
  o.max_segment = 256;
  o.max_eager = 4096;
  FakeFabric f(2, o);
  f.configure();
  const auto data = iota_from(7, 700);  // 2800 bytes: 11 segments of <= 256 bytes
  f[0].write(kSrc, data);
  const uint64_t r = f[1].submit(recv(0, 700, 3));
  EXPECT_EQ(f[0].call(send(1, 700, 3)), 0u);
  EXPECT_EQ(f[1].wait(r), std::optional<uint32_t>(0));
  EXPECT_EQ(f[1].read<int32_t>(kDst, 700), data);
  EXPECT_EQ(seq_word(f[0], 1, abi::kRankOutboundSeq), 11u);
  EXPECT_EQ(seq_word(f[1], 0, abi::kRankInboundSeq), 11u);
  EXPECT_EQ(f[1].payloads_held(), 0u);

  // A zero-byte message is one header-only segment.
  const uint64_t r0 = f[1].submit(recv(0, 0, 4));
  EXPECT_EQ(f[0].call(send(1, 0, 4)), 0u);
  EXPECT_EQ(f[1].wait(r0), std::optional<uint32_t>(0));
  EXPECT_EQ(seq_word(f[1], 0, abi::kRankInboundSeq), 12u);
}

// A pass reports drained only when nothing is left in flight and it
// emptied the call and arrival queues: the emulator then skips the idle pass
// it would otherwise run to learn that (one pass per eager send, not two).
TEST(FirmwarePoll, APassIsDrainedOnlyWithNothingInFlight) {
  FakeFabric f(2);
  f.configure();
  f[0].stop();  // passes by hand from here on
  f[1].stop();

  auto pass = f[1].poll_once();
  EXPECT_FALSE(pass.progressed);
  EXPECT_TRUE(pass.drained);

  const uint64_t r = f[1].submit(recv(0, 4, 5));
  pass = f[1].poll_once();  // posted, waiting for the sender
  EXPECT_TRUE(pass.progressed);
  EXPECT_FALSE(pass.drained);
  pass = f[1].poll_once();
  EXPECT_FALSE(pass.progressed);
  EXPECT_FALSE(pass.drained);

  const auto data = iota_from(40, 4);
  f[0].write(kSrc, data);
  const uint64_t s1 = f[0].submit(send(1, 4, 5));
  const uint64_t s2 = f[0].submit(send(1, 4, 6));
  pass = f[0].poll_once();  // both eager sends end in this pass
  EXPECT_TRUE(pass.progressed);
  EXPECT_TRUE(pass.drained);
  EXPECT_EQ(f[0].wait(s1, 0ms), std::optional<uint32_t>(0));
  EXPECT_EQ(f[0].wait(s2, 0ms), std::optional<uint32_t>(0));

  // The receive ends; the message for tag 6 stays unmatched in the arrival
  // table, which leaves nothing a pass could do: drained.
  pass = f[1].poll_once();
  EXPECT_TRUE(pass.progressed);
  EXPECT_TRUE(pass.drained);
  EXPECT_EQ(f[1].wait(r, 0ms), std::optional<uint32_t>(0));
  EXPECT_EQ(f[1].read<int32_t>(kDst, 4), data);

  // A call whose peer never answers keeps every pass undrained.
  const uint64_t lone = f[1].submit(recv(0, 4, 7));
  EXPECT_FALSE(f[1].poll_once().drained);
  EXPECT_FALSE(f[1].poll_once().drained);
  EXPECT_EQ(f[1].wait(lone, 0ms), std::nullopt);
}

TEST(FirmwareP2P, MatchesOldestMessageByTagAndSource) {
  FakeFabric f(2);
  f.configure();
  for (int32_t tag = 1; tag <= 3; ++tag) {
    f[0].write(kSrc + 0x100 * tag, std::vector<int32_t>(4, tag * 10));
    ASSERT_EQ(f[0].call(send(1, 4, tag, kSrc + 0x100 * tag)), 0u);
  }
  ASSERT_EQ(f[1].call(recv(0, 4, 2, kDst)), 0u);
  ASSERT_EQ(f[1].call(recv(0, 4, abi::kTagAny, kDst + 0x100)), 0u);
  ASSERT_EQ(f[1].call(recv(abi::kRankAny, 4, abi::kTagAny, kDst + 0x200)), 0u);
  EXPECT_EQ(f[1].read<int32_t>(kDst, 1)[0], 20);
  EXPECT_EQ(f[1].read<int32_t>(kDst + 0x100, 1)[0], 10);
  EXPECT_EQ(f[1].read<int32_t>(kDst + 0x200, 1)[0], 30);
}

TEST(FirmwareP2P, PostedReceivesMatchInPostingOrder) {
  FakeFabric f(3);
  f.configure();
  const uint64_t any = f[2].submit(recv(abi::kRankAny, 4, abi::kTagAny, kDst));
  const uint64_t specific = f[2].submit(recv(1, 4, 5, kDst + 0x100));
  std::this_thread::sleep_for(10ms);
  f[1].write(kSrc, std::vector<int32_t>(4, 111));
  f[1].write(kSrc + 0x100, std::vector<int32_t>(4, 222));
  ASSERT_EQ(f[1].call(send(2, 4, 5, kSrc)), 0u);
  ASSERT_EQ(f[1].call(send(2, 4, 5, kSrc + 0x100)), 0u);
  EXPECT_EQ(f[2].wait(any), std::optional<uint32_t>(0));
  EXPECT_EQ(f[2].wait(specific), std::optional<uint32_t>(0));
  EXPECT_EQ(f[2].read<int32_t>(kDst, 1)[0], 111);
  EXPECT_EQ(f[2].read<int32_t>(kDst + 0x100, 1)[0], 222);
}

TEST(FirmwareP2P, RendezvousHandshake) {
  FakeFabric f(2);
  f.configure();
  const auto data = iota_from(-5, 20000);  // 80 KB > max eager 1 KiB
  f[0].write(kSrc, data);
  const uint64_t s = f[0].submit(send(1, 20000, 9));
  std::this_thread::sleep_for(10ms);  // the RTS waits at the receiver until the receive is posted
  EXPECT_EQ(f[1].call(recv(0, 20000, 9)), 0u);
  EXPECT_EQ(f[0].wait(s), std::optional<uint32_t>(0));
  EXPECT_EQ(f[1].read<int32_t>(kDst, 20000), data);
  EXPECT_EQ(f[1].windows_opened_total(), 1u);  // landed in place: one window
  EXPECT_EQ(f[1].windows_open(), 0u);
  // The RTS and the data message take sequence numbers, and so does the grant
  // in the other direction (a duplicated one must be detectable).
  EXPECT_EQ(seq_word(f[0], 1, abi::kRankOutboundSeq), 2u);
  EXPECT_EQ(seq_word(f[1], 0, abi::kRankInboundSeq), 2u);
  EXPECT_EQ(seq_word(f[1], 0, abi::kRankOutboundSeq), 1u);
  EXPECT_EQ(seq_word(f[0], 1, abi::kRankInboundSeq), 1u);
}

TEST(FirmwareP2P, RendezvousIntoKernelStreamIsStagedInPieces) {
  FakeFabric f(2);  // spare buffers of 32 KiB
  f.configure();
  const auto data = iota_from(0, 20000);
  f[0].write(kSrc, data);
  const uint64_t s = f[0].submit(send(1, 20000, 1));
  EXPECT_EQ(f[1].call(recv(0, 20000, 1).streams(abi::kResStream)), 0u);
  EXPECT_EQ(f[0].wait(s), std::optional<uint32_t>(0));
  EXPECT_EQ(f[1].windows_opened_total(), 3u);  // 80 KB in 32 KiB pieces
  const auto bytes = f[1].stream_contents();
  ASSERT_EQ(bytes.size(), 80000u);
  EXPECT_EQ(std::memcmp(bytes.data(), data.data(), bytes.size()), 0);
}

TEST(FirmwareP2P, TruncationIsReportedByTheReceiver) {
  FakeFabric f(2);
  f.configure();
  f[0].write(kSrc, iota_from(0, 4096));
  // rendezvous
  const uint64_t s = f[0].submit(send(1, 4096, 1));
  EXPECT_EQ(f[1].call(recv(0, 1000, 1)), uint32_t{abi::kTruncationError});
  EXPECT_EQ(f[0].wait(s), std::optional<uint32_t>(0));
  EXPECT_EQ(f[1].read<int32_t>(kDst, 1000), iota_from(0, 1000));
  // eager
  EXPECT_EQ(f[0].call(send(1, 100, 2)), 0u);
  EXPECT_EQ(f[1].call(recv(0, 50, 2)), uint32_t{abi::kTruncationError});
  EXPECT_EQ(f[1].payloads_held(), 0u);
}

TEST(FirmwareP2P, SequenceGapFailsTheWaitingReceive) {
  FakeFabric f(2);
  f.configure();
  const uint64_t r = f[1].submit(recv(0, 4, 0));
  std::this_thread::sleep_for(10ms);
  Arrival a;
  a.header.src = 0;
  a.header.seqn = 5;  // expected 0
  a.header.ctx = kContextId << 1;
  a.header.msg_type = abi::kMsgEager;
  a.peer_ip = f[0].ip();
  a.peer_port = f[0].port();
  f[1].inject(a);
  EXPECT_EQ(f[1].wait(r), std::optional<uint32_t>(abi::kPackSeqNumberError));
  // resynchronised: the next message is accepted
  EXPECT_EQ(seq_word(f[1], 0, abi::kRankInboundSeq), 6u);
}

TEST(FirmwareP2P, DeadlineEndsWaitingCalls) {
  FabricOptions o;
  o.timeout_us = 50'000;
  FakeFabric f(2, o);
  f.configure();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(f[1].call(recv(0, 4, 0)), uint32_t{abi::kReceiveTimeoutError});
  EXPECT_EQ(f[0].call(send(1, 10000, 0)), uint32_t{abi::kReceiveTimeoutError});  // rendezvous, nobody receives
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  // other calls keep working while one waits
  const uint64_t waiting = f[1].submit(recv(0, 4, 99));
  EXPECT_EQ(f[1].call(CallBuilder(abi::kNop)), 0u);
  EXPECT_EQ(f[1].wait(waiting), std::optional<uint32_t>(abi::kReceiveTimeoutError));
}

// Issue 37, defect 6: a network move carries its call's deadline (the
// CCLO's timeout from the call's start), so the data plane may let a send
// wait for a slow peer as long as the call may wait, not only for its own
// I/O timeout (the emulator's was 10 s under a 300 s call deadline).
TEST(FirmwareP2P, NetworkMovesCarryTheirCallsDeadline) {
  FabricOptions o;
  o.timeout_us = 123'000'000;
  FakeFabric f(2, o);
  f.configure();
  const auto ns = [] {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  };
  const uint64_t before = ns();
  const uint64_t s = f[0].submit(send(1, 16, 4));
  EXPECT_EQ(f[1].call(recv(0, 16, 4)), 0u);
  EXPECT_EQ(f[0].wait(s), std::optional<uint32_t>(0));
  const uint64_t after = ns();  // the call started (and took its deadline) in between
  const auto sent = f[0].sent();
  ASSERT_FALSE(sent.empty());
  for (const auto& m : sent) {
    EXPECT_GE(m.deadline_ns, before + 123'000'000'000ull);
    EXPECT_LE(m.deadline_ns, after + 123'000'000'000ull);
  }
}

TEST(FirmwareP2P, LinkErrorFailsCallsWaitingOnThatPeer) {
  FakeFabric f(3);
  f.configure();
  const uint64_t from0 = f[1].submit(recv(0, 4, 0));
  const uint64_t from2 = f[1].submit(recv(2, 4, 0));
  std::this_thread::sleep_for(10ms);
  Arrival a;
  a.kind = ArrivalKind::link_error;
  a.peer_ip = f[0].ip();
  a.peer_port = f[0].port();
  a.status = abi::kDmaNotOkayError;
  f[1].inject(a);
  const auto rc = f[1].wait(from0);
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, uint32_t{abi::kLinkError | abi::kDmaNotOkayError});
  EXPECT_EQ(f[2].call(send(1, 4, 0)), 0u);  // the other peer is unaffected
  EXPECT_EQ(f[1].wait(from2), std::optional<uint32_t>(0));
}

// A RANK_ANY receive learns of each member's link failure once (and its
// caller asks kGetLinkStatus who failed); later ones wait for the members
// left, until none is left.
TEST(FirmwareP2P, AnySourceReceiveReportsEachLinkFailureOnce) {
  FakeFabric f(3);
  f.configure();
  auto link_error_from = [&](uint32_t rank) {
    Arrival a;
    a.kind = ArrivalKind::link_error;
    a.peer_ip = f[rank].ip();
    a.peer_port = f[rank].port();
    f[1].inject(a);
  };
  auto link_status = [&](uint32_t rank) {
    return f[1].call(CallBuilder(abi::kConfig).function(abi::kGetLinkStatus).comm(kCommOffset).rank(rank));
  };
  EXPECT_EQ(link_status(2), 0u);
  link_error_from(2);  // nobody waits: the next RANK_ANY receive is told
  EXPECT_EQ(f[1].call(recv(abi::kRankAny, 4, abi::kTagAny)), uint32_t{abi::kLinkError});
  EXPECT_EQ(link_status(2), uint32_t{abi::kLinkError});
  EXPECT_EQ(link_status(0), 0u);
  EXPECT_EQ(link_status(3), uint32_t{abi::kInvalidArgument});
  const uint64_t later = f[1].submit(recv(abi::kRankAny, 4, abi::kTagAny));  // told already: waits for rank 0
  EXPECT_EQ(f[0].call(send(1, 4, 0)), 0u);
  EXPECT_EQ(f[1].wait(later), std::optional<uint32_t>(0));
  EXPECT_EQ(f[1].call(recv(2, 4, 0)), uint32_t{abi::kLinkError});  // from the failed member: at once
  const uint64_t pending = f[1].submit(recv(abi::kRankAny, 4, abi::kTagAny));
  std::this_thread::sleep_for(10ms);
  link_error_from(0);  // a waiting receive is told at once
  EXPECT_EQ(f[1].wait(pending), std::optional<uint32_t>(abi::kLinkError));
  // Nobody is left to send.
  EXPECT_EQ(f[1].call(recv(abi::kRankAny, 4, abi::kTagAny)), uint32_t{abi::kLinkError});
}

TEST(FirmwareP2P, EagerOnlyModeRejectsMessagesBeyondRxCapacity) {
  FabricOptions o;
  o.max_rendezvous = 0;
  o.max_eager = 16 * 1024;
  FakeFabric f(2, o);
  f.configure();
  EXPECT_EQ(f[0].call(send(1, 4097, 0)), uint32_t{abi::kDmaSizeError});
  EXPECT_EQ(f[1].call(recv(0, 4097, 0)), uint32_t{abi::kDmaSizeError});
  f[0].write(kSrc, iota_from(3, 4096));  // exactly the RX capacity still works
  EXPECT_EQ(f[0].call(send(1, 4096, 0)), 0u);
  EXPECT_EQ(f[1].call(recv(0, 4096, 0)), 0u);
  EXPECT_EQ(f[1].read<int32_t>(kDst, 4096), iota_from(3, 4096));
}

TEST(FirmwareP2P, StreamPutBypassesMatching) {
  FakeFabric f(2);
  f.configure();
  f[0].write(kSrc, iota_from(40, 8));
  EXPECT_EQ(f[0].call(send(1, 8, 9).streams(abi::kResStream)), 0u);
  for (int i = 0; i < 100 && f[1].stream_contents().size() < 32; ++i) std::this_thread::sleep_for(1ms);
  const auto bytes = f[1].stream_contents();
  ASSERT_EQ(bytes.size(), 32u);
  EXPECT_EQ(seq_word(f[0], 1, abi::kRankOutboundSeq), 0u);
}

TEST(FirmwareP2P, CommunicatorsAndCollectiveTrafficNeverMix) {
  FakeFabric f(2);
  f.configure();
  // A second communicator record with another context id, same members.
  constexpr uint32_t kOther = 0x400;
  for (uint32_t r = 0; r < 2; ++r) {
    for (uint32_t w = 0; w < abi::comm_record_words(2); ++w) f[r].set_xmem(kOther + 4 * w, f[r].xmem(kCommOffset + 4 * w));
    f[r].set_xmem(kOther + 4 * abi::comm_context_word(2), kContextId + 1);
  }
  f[0].write(kSrc, std::vector<int32_t>(4, 1));
  f[0].write(kSrc + 0x100, std::vector<int32_t>(4, 2));
  ASSERT_EQ(f[0].call(send(1, 4, abi::kTagAny, kSrc).comm(kOther)), 0u);
  ASSERT_EQ(f[0].call(send(1, 4, abi::kTagAny, kSrc + 0x100)), 0u);
  ASSERT_EQ(f[1].call(recv(0, 4, abi::kTagAny, kDst)), 0u);
  ASSERT_EQ(f[1].call(recv(0, 4, abi::kTagAny, kDst + 0x100).comm(kOther)), 0u);
  EXPECT_EQ(f[1].read<int32_t>(kDst, 1)[0], 2);
  EXPECT_EQ(f[1].read<int32_t>(kDst + 0x100, 1)[0], 1);
}

}  // namespace accl::fw::test
