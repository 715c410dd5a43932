// SPDX-License-Identifier: Apache-2.0
//
// Behaviour every network-style transport (TCP, UDP, shared memory) must
// show, as a value-parameterized suite. Each test binary includes this once
// and instantiates it with its transport factory.
#pragma once

#include "transport_test_util.hpp"

#include <algorithm>
#include <future>

namespace accl::emu::test {

struct TransportParam {
  std::string name;
  std::function<std::unique_ptr<Transport>(const TransportOptions&)> make;
};

inline std::string param_name(const ::testing::TestParamInfo<TransportParam>& info) { return info.param.name; }

// Instantiates the suite as `prefix` over the transport `name` that the
// factory given last (a callable from TransportOptions) makes.
#define ACCL_TRANSPORT_CONFORMANCE(prefix, name, ...)                                                          \
  INSTANTIATE_TEST_SUITE_P(prefix, TransportConformance, ::testing::Values(TransportParam{name, __VA_ARGS__}), \
                           param_name)

// Two transports a and b with their sinks. Sinks are declared first so they
// outlive the transports (destroying a transport stops it).
struct Pair {
  RecordingSink sink_a;
  RecordingSink sink_b;
  std::unique_ptr<Transport> a;
  std::unique_ptr<Transport> b;
};

class TransportConformance : public ::testing::TestWithParam<TransportParam> {
 protected:
  std::unique_ptr<Transport> make(const TransportOptions& o = options()) { return GetParam().make(o); }

  std::unique_ptr<Pair> make_pair(bool start = true) {
    auto p = std::make_unique<Pair>();
    p->a = make();
    p->b = make();
    if (start) start_pair(*p);
    return p;
  }
  // Sink hooks must be set before this: transport threads read them.
  static void start_pair(Pair& p) {
    p.a->start(p.sink_a);
    p.b->start(p.sink_b);
  }

  // Checks that `got` holds messages seed first_seed.. in order, intact.
  static void expect_in_order(const std::vector<Received>& got, const NetAddress& from, uint32_t first_seed,
                              const std::vector<size_t>& sizes) {
    ASSERT_EQ(got.size(), sizes.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const Received& m = got[i];
      SCOPED_TRACE("message " + std::to_string(i));
      EXPECT_EQ(m.status, 0u);
      EXPECT_TRUE(m.from == from) << transport_detail::format_address(m.from);
      EXPECT_EQ(m.header.tag, first_seed + i);
      EXPECT_EQ(m.header.count, sizes[i]);
      EXPECT_EQ(m.header.rid, 0xA5A5A5A5u);
      EXPECT_EQ(m.data.size(), sizes[i]);
      EXPECT_EQ(check_pattern(m.data, first_seed + static_cast<uint32_t>(i)), std::string::npos);
    }
  }
};

// Every completed (status 0) message is intact; at most one per link (the
// torn one) ended with an error.
inline void expect_no_corruption(const std::vector<Received>& got, int links = 1) {
  int errors = 0;
  for (const Received& m : got) {
    if (m.status != 0) {
      ++errors;
      continue;
    }
    if (m.discarded) continue;
    EXPECT_EQ(check_pattern(m.data, m.header.tag), std::string::npos) << "message " << m.header.tag;
  }
  EXPECT_LE(errors, links);
}

TEST_P(TransportConformance, ReportsTheBoundAddress) {
  auto t = make();
  EXPECT_EQ(t->local_address().ip, 0x7F000001u);
  EXPECT_NE(t->local_address().port, 0);
  EXPECT_EQ(t->name(), GetParam().name);
}

// Issue 38 (4): a transport bound to the wildcard 0.0.0.0 (every interface,
// the natural setting for a job spanning hosts) is known by a concrete
// address of this host, and its messages are delivered as coming from that
// identity, the one in the peers' records, not from whatever source address
// the route gave them (a connection to 127.0.0.1 comes from 127.0.0.1).
// Before, TCP and UDP delivered them as 127.0.0.1:port while the records held
// 0.0.0.0:port, so no rendezvous window matched (DMA_DECODE_ERROR), and the
// shared-memory transport could not reach 0.0.0.0 at all (LINK_ERROR).
TEST_P(TransportConformance, AWildcardBoundTransportIsKnownAndDeliveredByItsIdentity) {
  TransportOptions wildcard = options();
  wildcard.bind = NetAddress{0, 0};
  RecordingSink sink_a, sink_b;
  auto a = make(wildcard);
  auto b = make(wildcard);  // every rank of a job has the same setting
  for (const auto* t : {a.get(), b.get()}) {
    const NetAddress id = t->local_address();
    EXPECT_NE(id.ip, 0u) << "a wildcard bind must not be the identity";
    EXPECT_TRUE(transport_detail::is_local_ipv4(id.ip)) << transport_detail::format_address(id);
    EXPECT_NE(id.port, 0);
  }
  a->start(sink_a);
  b->start(sink_b);
  auto ab = a->connect(b->local_address(), in(5000ms));
  auto ba = b->connect(a->local_address(), in(5000ms));
  ASSERT_NE(ab, nullptr);
  ASSERT_NE(ba, nullptr);
  const std::vector<size_t> sizes = {0, 100, 1 << 20};
  for (size_t i = 0; i < sizes.size(); ++i) {
    PatternWriter x(static_cast<uint32_t>(i), sizes[i]), y(static_cast<uint32_t>(i), sizes[i]);
    const auto h = make_header(static_cast<uint32_t>(sizes[i]), static_cast<uint32_t>(i));
    ASSERT_EQ(ab->send(h, x, in(10000ms)), 0u);
    ASSERT_EQ(ba->send(h, y, in(10000ms)), 0u);
  }
  ASSERT_TRUE(sink_b.wait_messages(sizes.size(), 30000ms));
  ASSERT_TRUE(sink_a.wait_messages(sizes.size(), 30000ms));
  expect_in_order(sink_b.messages(), a->local_address(), 0, sizes);
  expect_in_order(sink_a.messages(), b->local_address(), 0, sizes);
}

TEST_P(TransportConformance, MessagesOfEverySizeArriveIntactAndInOrder) {
  auto p = make_pair();
  auto link = p->a->connect(p->b->local_address(), in(5000ms));
  ASSERT_NE(link, nullptr);
  const std::vector<size_t> sizes = {0,      1,         7,       63,      64,         65,      100,    4095,
                                     4096,   65535,     65536,   65537,   1 << 20,    8 << 20, 0,      (8 << 20) + 13,
                                     3,      123457,    61440,   61441,   61440 - 64, 122880};
  for (size_t i = 0; i < sizes.size(); ++i) {
    PatternWriter writer(static_cast<uint32_t>(i), sizes[i]);
    ASSERT_EQ(link->send(make_header(static_cast<uint32_t>(sizes[i]), static_cast<uint32_t>(i)), writer, in(10000ms)),
              0u);
    EXPECT_EQ(writer.contract_violations, 0);
  }
  ASSERT_TRUE(p->sink_b.wait_messages(sizes.size(), 30000ms));
  expect_in_order(p->sink_b.messages(), p->a->local_address(), 0, sizes);
  EXPECT_EQ(p->sink_b.overlap_violations, 0);
  EXPECT_EQ(p->sink_b.ticket_violations, 0);
  EXPECT_TRUE(p->sink_b.failures().empty());
}

TEST_P(TransportConformance, ManyMessagesInFlightBothWays) {
  auto p = make_pair();
  auto ab = p->a->connect(p->b->local_address(), in(5000ms));
  auto ba = p->b->connect(p->a->local_address(), in(5000ms));
  ASSERT_NE(ab, nullptr);
  ASSERT_NE(ba, nullptr);
  constexpr int kMessages = 2000;
  std::vector<size_t> sizes;
  for (int i = 0; i < kMessages; ++i) sizes.push_back((static_cast<size_t>(i) * 7919) % 20000);
  auto sender = [&](Link& link) {
    int failures = 0;
    for (int i = 0; i < kMessages; ++i) {
      PatternWriter writer(static_cast<uint32_t>(i), sizes[i]);
      failures += link.send(make_header(static_cast<uint32_t>(sizes[i]), static_cast<uint32_t>(i)), writer,
                            in(10000ms)) != 0;
    }
    return failures;
  };
  auto fa = std::async(std::launch::async, sender, std::ref(*ab));
  auto fb = std::async(std::launch::async, sender, std::ref(*ba));
  EXPECT_EQ(fa.get(), 0);
  EXPECT_EQ(fb.get(), 0);
  ASSERT_TRUE(p->sink_b.wait_messages(kMessages, 30000ms));
  ASSERT_TRUE(p->sink_a.wait_messages(kMessages, 30000ms));
  expect_in_order(p->sink_b.messages(), p->a->local_address(), 0, sizes);
  expect_in_order(p->sink_a.messages(), p->b->local_address(), 0, sizes);
}

TEST_P(TransportConformance, SeveralSendersToOneReceiverKeepPerLinkOrder) {
  RecordingSink sink;
  auto receiver = make();
  receiver->start(sink);
  constexpr int kSenders = 3;
  constexpr int kMessages = 200;
  std::vector<RecordingSink> sender_sinks(kSenders);
  std::vector<std::unique_ptr<Transport>> senders;
  for (int s = 0; s < kSenders; ++s) {
    senders.push_back(make());
    senders.back()->start(sender_sinks[s]);
  }
  std::vector<std::future<int>> done;
  for (int s = 0; s < kSenders; ++s) {
    done.push_back(std::async(std::launch::async, [&, s] {
      auto link = senders[s]->connect(receiver->local_address(), in(5000ms));
      if (!link) return -1;
      int failures = 0;
      for (int i = 0; i < kMessages; ++i) {
        const uint32_t seed = static_cast<uint32_t>(s * 100000 + i);
        const size_t count = (static_cast<size_t>(i) * 104729 + static_cast<size_t>(s) * 31) % 200000;
        PatternWriter writer(seed, count);
        failures += link->send(make_header(static_cast<uint32_t>(count), seed), writer, in(10000ms)) != 0;
      }
      return failures;
    }));
  }
  for (auto& f : done) EXPECT_EQ(f.get(), 0);
  ASSERT_TRUE(sink.wait_messages(kSenders * kMessages, 30000ms));
  std::map<NetAddress, uint32_t, AddressLess> next;
  for (int s = 0; s < kSenders; ++s) next[senders[s]->local_address()] = static_cast<uint32_t>(s * 100000);
  for (const Received& m : sink.messages()) {
    ASSERT_TRUE(next.count(m.from));
    EXPECT_EQ(m.header.tag, next[m.from]++);
    EXPECT_EQ(m.status, 0u);
    EXPECT_EQ(check_pattern(m.data, m.header.tag), std::string::npos);
  }
  EXPECT_EQ(sink.overlap_violations, 0);
}

TEST_P(TransportConformance, SinkMayDiscardPayloads) {
  auto p = make_pair(false);
  p->sink_b.discard = [](const abi::WireHeader& h) { return h.tag % 2 == 1; };
  start_pair(*p);
  auto link = p->a->connect(p->b->local_address(), in(5000ms));
  ASSERT_NE(link, nullptr);
  const std::vector<size_t> sizes = {100, 3 << 20, 5000, 200000, 0, 64, 9 << 20, 17};
  for (size_t i = 0; i < sizes.size(); ++i) {
    PatternWriter writer(static_cast<uint32_t>(i), sizes[i]);
    ASSERT_EQ(link->send(make_header(static_cast<uint32_t>(sizes[i]), static_cast<uint32_t>(i)), writer, in(10000ms)),
              0u);
  }
  ASSERT_TRUE(p->sink_b.wait_messages(sizes.size(), 30000ms));
  auto got = p->sink_b.messages();
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].header.tag, i);
    EXPECT_EQ(got[i].status, 0u);
    if (i % 2 == 0) {
      EXPECT_EQ(check_pattern(got[i].data, static_cast<uint32_t>(i)), std::string::npos);
    }
  }
}

// Issue 7: the sink may take a destination back mid-message (a rendezvous
// window whose receive failed). Once WriteLease::revoke() returned, the
// transport must not store a single byte more into it, although the rest of
// the message is still arriving; the link must stay usable.
TEST_P(TransportConformance, RevokedDestinationIsNotWrittenAnyMore) {
  auto p = make_pair(false);
  p->sink_b.lease_messages = true;
  start_pair(*p);
  auto link = p->a->connect(p->b->local_address(), in(5000ms));
  ASSERT_NE(link, nullptr);
  constexpr size_t kBytes = 6 << 20;
  constexpr size_t kPauseAt = 1 << 20;
  // The sender stops after the piece that reaches kPauseAt until the test has
  // revoked the destination: everything after that piece is sent later.
  std::mutex m;
  std::condition_variable cv;
  bool paused = false, resume = false;
  size_t pause_end = 0;
  PatternWriter writer(1, kBytes);
  writer.after_piece = [&](size_t offset, size_t bytes) {
    if (offset + bytes < kPauseAt || pause_end != 0) return;
    std::unique_lock lock(m);
    pause_end = offset + bytes;
    paused = true;
    cv.notify_all();
    cv.wait_for(lock, 20s, [&] { return resume; });
  };
  uint32_t send_rc = 0xFFFFFFFFu;
  std::thread sender([&] { send_rc = link->send(make_header(kBytes, 1), writer, in(60000ms)); });
  auto release_sender = [&] {
    std::lock_guard lock(m);
    resume = true;
    cv.notify_all();
  };
  {
    std::unique_lock lock(m);
    if (!cv.wait_for(lock, 20s, [&] { return paused; })) ADD_FAILURE() << "the sender never reached the pause";
  }
  RecordingSink::Leased leased;
  if (!p->sink_b.wait_leased(1, 20000ms, leased)) {
    release_sender();
    sender.join();
    FAIL() << "the message never began at the receiver";
  }
  ASSERT_EQ(leased.bytes, kBytes);
  EXPECT_TRUE(leased.lease->revoke(Clock::now() + 5s)) << "the transport held the lease for seconds";
  // From here on the destination is ours: nothing may change it any more.
  std::vector<std::byte> at_revoke(leased.dst, leased.dst + kBytes);
  release_sender();
  sender.join();
  EXPECT_EQ(send_rc, 0u);
  ASSERT_TRUE(p->sink_b.wait_messages(1, 30000ms));
  ASSERT_GT(pause_end, 0u);
  ASSERT_LT(pause_end, kBytes);

  // The link still carries messages, intact and in order.
  PatternWriter next(2, 100000);
  ASSERT_EQ(link->send(make_header(100000, 2), next, in(10000ms)), 0u);
  ASSERT_TRUE(p->sink_b.wait_messages(2, 30000ms));
  auto got = p->sink_b.messages();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].header.tag, 1u);
  EXPECT_EQ(got[0].data.size(), kBytes);
  EXPECT_TRUE(got[0].data == at_revoke) << "the destination changed after revoke()";
  const size_t late = static_cast<size_t>(
      std::count(got[0].data.begin() + static_cast<std::ptrdiff_t>(pause_end), got[0].data.end(), std::byte{0}));
  EXPECT_EQ(late, kBytes - pause_end) << "bytes sent after the revocation were stored";
  EXPECT_EQ(got[1].status, 0u);
  EXPECT_EQ(got[1].header.tag, 2u);
  EXPECT_EQ(check_pattern(got[1].data, 2), std::string::npos);
  EXPECT_EQ(p->sink_b.overlap_violations.load(), 0);
  EXPECT_EQ(p->sink_b.ticket_violations.load(), 0);
}

TEST_P(TransportConformance, ConnectReusesTheLink) {
  auto p = make_pair();
  auto l1 = p->a->connect(p->b->local_address(), in(5000ms));
  auto l2 = p->a->connect(p->b->local_address(), in(5000ms));
  ASSERT_NE(l1, nullptr);
  EXPECT_EQ(l1, l2);
}

TEST_P(TransportConformance, WrongSecretIsRefusedAndNothingReachesTheSink) {
  RecordingSink sink_b, sink_a, sink_c;
  auto b = make(options("right secret"));
  b->start(sink_b);
  auto a = make(options("wrong secret"));
  a->start(sink_a);
  auto c = make(options(""));
  c->start(sink_c);
  auto t0 = Clock::now();
  EXPECT_EQ(a->connect(b->local_address(), in(2000ms)), nullptr);
  EXPECT_EQ(c->connect(b->local_address(), in(2000ms)), nullptr);
  EXPECT_LT(Clock::now() - t0, 4500ms);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(sink_b.calls, 0u);
}

TEST_P(TransportConformance, ReceiverWithoutSecretAcceptsAnyPeer) {
  RecordingSink sink_b, sink_a;
  auto b = make(options(""));
  b->start(sink_b);
  auto a = make(options("some secret"));
  a->start(sink_a);
  auto link = a->connect(b->local_address(), in(5000ms));
  ASSERT_NE(link, nullptr);
  PatternWriter writer(7, 1000);
  ASSERT_EQ(link->send(make_header(1000, 7), writer, in(5000ms)), 0u);
  ASSERT_TRUE(sink_b.wait_messages(1, 5000ms));
}

TEST_P(TransportConformance, ConnectToAbsentPeerGivesUpAtTheDeadline) {
  RecordingSink sink;
  auto a = make();
  a->start(sink);
  auto t0 = Clock::now();
  EXPECT_EQ(a->connect(loopback(free_port()), in(300ms)), nullptr);
  auto took = Clock::now() - t0;
  EXPECT_LT(took, 1500ms);
}

TEST_P(TransportConformance, ConnectWaitsForAPeerThatStartsLater) {
  RecordingSink sink_a, sink_b;
  auto a = make();
  a->start(sink_a);
  const uint16_t port = free_port();
  std::unique_ptr<Transport> b;
  std::thread late([&] {
    std::this_thread::sleep_for(300ms);
    b = make(options("test-secret", port));
    b->start(sink_b);
  });
  auto link = a->connect(loopback(port), in(5000ms));
  late.join();
  ASSERT_NE(link, nullptr);
  PatternWriter writer(1, 5000);
  ASSERT_EQ(link->send(make_header(5000, 1), writer, in(5000ms)), 0u);
  ASSERT_TRUE(sink_b.wait_messages(1, 5000ms));
  EXPECT_TRUE(sink_b.messages()[0].from == a->local_address());
}

TEST_P(TransportConformance, ConnectToAPeerThatIsNotStartedIsBounded) {
  RecordingSink sink_a;
  auto a = make();
  a->start(sink_a);
  auto b = make();  // listening, never started: no handshake reply
  auto t0 = Clock::now();
  auto link = a->connect(b->local_address(), in(300ms));
  EXPECT_LT(Clock::now() - t0, 1500ms);
  if (link) {
    // A transport may accept before start(); sends must still be bounded.
    PatternWriter writer(1, 64);
    link->send(make_header(64, 1), writer, in(300ms));
  }
}

TEST_P(TransportConformance, WriterErrorBeforeAnythingIsSentKeepsTheLink) {
  auto p = make_pair();
  auto link = p->a->connect(p->b->local_address(), in(5000ms));
  ASSERT_NE(link, nullptr);
  PatternWriter bad(0, 4096);
  bad.fail_at_offset = 0;
  EXPECT_EQ(link->send(make_header(4096, 0), bad, in(5000ms)), abi::kDmaDecodeError);
  PatternWriter good(1, 4096);
  ASSERT_EQ(link->send(make_header(4096, 1), good, in(5000ms)), 0u);
  ASSERT_TRUE(p->sink_b.wait_messages(1, 5000ms));
  std::this_thread::sleep_for(50ms);
  auto got = p->sink_b.messages();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].header.tag, 1u);
  EXPECT_EQ(check_pattern(got[0].data, 1), std::string::npos);
  EXPECT_TRUE(p->sink_b.failures().empty());
}

TEST_P(TransportConformance, WriterErrorMidMessageBreaksTheLinkVisibly) {
  auto p = make_pair();
  auto link = p->a->connect(p->b->local_address(), in(5000ms));
  ASSERT_NE(link, nullptr);
  PatternWriter ok(0, 1000);
  ASSERT_EQ(link->send(make_header(1000, 0), ok, in(5000ms)), 0u);
  constexpr size_t kBig = 24 << 20;
  PatternWriter bad(1, kBig);
  bad.fail_at_offset = 12 << 20;
  uint32_t rc = link->send(make_header(kBig, 1), bad, in(10000ms));
  EXPECT_NE(rc & abi::kDmaDecodeError, 0u);
  EXPECT_NE(rc & abi::kLinkError, 0u);
  ASSERT_TRUE(p->sink_b.wait_failure(5000ms));
  auto got = p->sink_b.messages();
  expect_no_corruption(got);
  ASSERT_GE(got.size(), 1u);
  EXPECT_EQ(got[0].status, 0u);
  for (const Received& m : got)
    if (m.header.tag == 1) {
      EXPECT_NE(m.status, 0u);
    }
  // The link stays down.
  PatternWriter after(2, 100);
  EXPECT_EQ(link->send(make_header(100, 2), after, in(1000ms)), abi::kLinkError);
}

TEST_P(TransportConformance, SenderStopMidStreamReportsLinkFailed) {
  auto p = make_pair();
  auto link = p->a->connect(p->b->local_address(), in(5000ms));
  ASSERT_NE(link, nullptr);
  std::promise<void> reached;
  std::atomic<bool> signalled{false};
  auto sender = std::async(std::launch::async, [&] {
    for (uint32_t i = 0; i < 100; ++i) {
      const size_t count = 4 << 20;
      PatternWriter writer(i, count);
      if (i == 3) {
        writer.after_piece = [&](size_t offset, size_t) {
          if (offset >= (1 << 20) && !signalled.exchange(true)) {
            reached.set_value();
            std::this_thread::sleep_for(100ms);
          }
        };
      }
      if (link->send(make_header(static_cast<uint32_t>(count), i), writer, in(5000ms)) != 0) return i;
    }
    return 100u;
  });
  ASSERT_EQ(reached.get_future().wait_for(20s), std::future_status::ready);
  p->a->stop();
  uint32_t failed_at = sender.get();
  EXPECT_LT(failed_at, 100u);
  ASSERT_TRUE(p->sink_b.wait_failure(5000ms));
  auto failures = p->sink_b.failures();
  EXPECT_TRUE(failures[0].first == p->a->local_address());
  EXPECT_EQ(failures[0].second, abi::kLinkError);
  std::this_thread::sleep_for(50ms);
  expect_no_corruption(p->sink_b.messages());
  EXPECT_EQ(p->sink_b.overlap_violations, 0);
  PatternWriter after(0, 10);
  EXPECT_EQ(link->send(make_header(10, 0), after, in(1000ms)), abi::kLinkError);
}

TEST_P(TransportConformance, ReceiverStopMakesSendsFail) {
  auto p = make_pair();
  auto link = p->a->connect(p->b->local_address(), in(5000ms));
  ASSERT_NE(link, nullptr);
  PatternWriter first(0, 1000);
  ASSERT_EQ(link->send(make_header(1000, 0), first, in(5000ms)), 0u);
  ASSERT_TRUE(p->sink_b.wait_messages(1, 5000ms));
  p->b->stop();
  const auto t0 = Clock::now();
  uint32_t rc = 0;
  for (uint32_t i = 1; rc == 0 && Clock::now() - t0 < 10s; ++i) {
    PatternWriter w(i, 64 << 10);
    rc = link->send(make_header(64 << 10, i), w, in(1000ms));
    if (rc == 0) std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(rc, abi::kLinkError);
  EXPECT_LT(Clock::now() - t0, 5s);
}

TEST_P(TransportConformance, SendIsBoundedByItsDeadline) {
  auto p = make_pair(false);
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  p->sink_b.begin_hook = [opened](const abi::WireHeader& h) {
    if (h.tag == 0) opened.wait_for(20s);  // the receiver stalls
  };
  start_pair(*p);
  auto link = p->a->connect(p->b->local_address(), in(5000ms));
  ASSERT_NE(link, nullptr);
  PatternWriter w0(0, 64);
  ASSERT_EQ(link->send(make_header(64, 0), w0, in(5000ms)), 0u);
  uint32_t rc = 0;
  Clock::duration longest{};
  for (uint32_t i = 1; rc == 0 && i < 200; ++i) {
    PatternWriter w(i, 4 << 20);
    auto t0 = Clock::now();
    rc = link->send(make_header(4 << 20, i), w, in(300ms));
    longest = std::max(longest, Clock::now() - t0);
  }
  gate.set_value();
  EXPECT_EQ(rc, abi::kLinkError);
  EXPECT_LT(longest, 1500ms);
  std::this_thread::sleep_for(200ms);
  expect_no_corruption(p->sink_b.messages());
}

TEST_P(TransportConformance, StopEndsAllSinkCalls) {
  RecordingSink sink;
  auto receiver = make();
  receiver->start(sink);
  std::vector<RecordingSink> sender_sinks(2);
  std::vector<std::unique_ptr<Transport>> senders;
  std::vector<std::shared_ptr<Link>> links;
  for (int s = 0; s < 2; ++s) {
    senders.push_back(make());
    senders.back()->start(sender_sinks[s]);
    links.push_back(senders.back()->connect(receiver->local_address(), in(5000ms)));
    ASSERT_NE(links.back(), nullptr);
  }
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int s = 0; s < 2; ++s) {
    threads.emplace_back([&, s] {
      for (uint32_t i = 0; !done; ++i) {
        PatternWriter w(i, (i * 7919u) % (3u << 20));
        if (links[s]->send(make_header((i * 7919u) % (3u << 20), i), w, in(1000ms)) != 0) break;
      }
    });
  }
  ASSERT_TRUE(sink.wait_messages(5, 10000ms));
  receiver->stop();
  const uint64_t calls = sink.calls;
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(sink.calls, calls);
  receiver->stop();  // idempotent
  done = true;
  for (auto& t : threads) t.join();
  expect_no_corruption(sink.messages(), 2);
}

TEST_P(TransportConformance, StopWithoutStartAndDestroyAreClean) {
  auto t = make();
  t->stop();
  t->stop();
  auto u = make();  // destroyed without stop
}

}  // namespace accl::emu::test
