// SPDX-License-Identifier: Apache-2.0
// Fault injection in the emulator's network (ACCL_EMU_FAULTS, see
// emu/src/transport_faults.hpp): the grammar, the Link decorator on its own,
// and end to end with the real firmware and driver in one process:
//   - UDP repairs datagram-level drop/dup/reorder/corrupt: results stay right;
//   - on in-order transports message-level drop/dup/reorder make calls fail
//     with a named device error within the timeout, never a hang and never
//     wrong data reported as success;
//   - delays below the timeout only slow calls down, above it they time out;
//   - a rank that disappears mid-run makes its peers fail within the timeout.
#include "transport_faults.hpp"

#include <accl/error.hpp>
#include <accl_emu/emulator.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>
#include <thread>

namespace accl::emu {
namespace {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

// ACCL_EMU_FAULTS for one scope. Set before the world exists and cleared
// after it is gone: emulator threads read the environment when they open links.
class ScopedFaults {
 public:
  explicit ScopedFaults(const std::string& value) { ::setenv("ACCL_EMU_FAULTS", value.c_str(), 1); }
  ~ScopedFaults() { ::unsetenv("ACCL_EMU_FAULTS"); }
  ScopedFaults(const ScopedFaults&) = delete;
  ScopedFaults& operator=(const ScopedFaults&) = delete;
};

EmuOptions options(TransportKind kind, uint16_t port = 0) {
  EmuOptions o;
  o.transport = kind;
  o.port = port;
  o.bank_bytes = size_t{1} << 30;
  return o;
}

std::vector<std::unique_ptr<ACCL>> world_of(unsigned n, TransportKind kind, Ms timeout, uint16_t port = 0,
                                            const InitOptions& init = {}) {
  auto world = create_local_world(n, init, options(kind, port));
  for (auto& a : world) a->set_timeout(timeout);
  return world;
}

// What one rank saw.
struct Outcome {
  int ok = 0;                 // calls that succeeded with correct data
  std::string wrong;          // a call that "succeeded" with wrong data
  std::string error;          // first error (type and text)
  uint32_t retcode = 0;       // of a DeviceError
  bool device_error = false;
  Ms first_error_after{0};    // from the start of the failing call
};

// Runs fn(accl, rank, outcome) on one thread per rank.
std::vector<Outcome> on_all(std::vector<std::unique_ptr<ACCL>>& world,
                            const std::function<void(ACCL&, int, Outcome&)>& fn) {
  std::vector<Outcome> out(world.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < world.size(); ++r)
    threads.emplace_back([&, r] { fn(*world[r], static_cast<int>(r), out[r]); });
  for (auto& t : threads) t.join();
  return out;
}

// One call: records the error (and how long the call took to fail) and
// returns false on failure.
bool attempt(Outcome& o, const std::function<void()>& call) {
  const auto start = std::chrono::steady_clock::now();
  try {
    call();
    return true;
  } catch (const DeviceError& e) {
    o.device_error = true;
    o.retcode = e.retcode();
    o.error = std::string("DeviceError: ") + e.what();
  } catch (const std::exception& e) {
    o.error = std::string("other error: ") + e.what();
  }
  o.first_error_after = std::chrono::duration_cast<Ms>(std::chrono::steady_clock::now() - start);
  return false;
}

// `iterations` allreduces (sum of rank+1+i over ranks) of `count` floats,
// each rank stopping at its first error.
void allreduce_loop(ACCL& a, int rank, Outcome& o, unsigned count, int iterations, int world_size) {
  auto send = a.create_buffer<float>(count), recv = a.create_buffer<float>(count);
  for (int it = 0; it < iterations; ++it) {
    for (unsigned i = 0; i < count; ++i) (*send)[i] = static_cast<float>(rank + 1 + (i % 7) + it);
    if (!attempt(o, [&] { a.allreduce(*send, *recv, count, reduceFunction::SUM); })) return;
    const int ranks_sum = world_size * (world_size + 1) / 2;
    for (unsigned i = 0; i < count; ++i) {
      const float want = static_cast<float>(ranks_sum + world_size * (static_cast<int>(i % 7) + it));
      if ((*recv)[i] != want) {
        o.wrong = "iteration " + std::to_string(it) + " element " + std::to_string(i) + ": " +
                  std::to_string((*recv)[i]) + " != " + std::to_string(want);
        return;
      }
    }
    ++o.ok;
  }
}

// Rank 0 sends `iterations` messages to rank 1, which checks them.
void sendrecv_loop(ACCL& a, int rank, Outcome& o, unsigned count, int iterations) {
  auto buf = a.create_buffer<int32_t>(count);
  for (int it = 0; it < iterations; ++it) {
    if (rank == 0) {
      for (unsigned i = 0; i < count; ++i) (*buf)[i] = static_cast<int32_t>(i * 3 + it);
      if (!attempt(o, [&] { a.send(*buf, count, 1, 5); })) return;
    } else {
      if (!attempt(o, [&] { a.recv(*buf, count, 0, 5); })) return;
      for (unsigned i = 0; i < count; ++i)
        if ((*buf)[i] != static_cast<int32_t>(i * 3 + it)) {
          o.wrong = "message " + std::to_string(it) + " element " + std::to_string(i);
          return;
        }
    }
    ++o.ok;
  }
}

std::string describe(const std::vector<Outcome>& out) {
  std::string s;
  for (size_t r = 0; r < out.size(); ++r)
    s += "rank " + std::to_string(r) + ": ok " + std::to_string(out[r].ok) + " error [" + out[r].error + "] after " +
         std::to_string(out[r].first_error_after.count()) + " ms" + (out[r].wrong.empty() ? "" : " WRONG " + out[r].wrong) +
         "\n";
  return s;
}

// A base port for worlds that need known addresses (peer=/from=), different
// per test process so parallel meson tests do not collide.
uint16_t base_port() { return static_cast<uint16_t>(30000 + (::getpid() % 2000) * 8); }

// ---------------------------------------------------------------- grammar --

TEST(FaultsGrammar, ParsesEveryKey) {
  FaultSpec s = parse_faults(
      "seed=42,drop=0.01,dup=0.02,reorder=0.03,corrupt=0.04,delay_us=200,slow_us=7,peer=127.0.0.1:5501,"
      "from=10.0.0.2:6000");
  EXPECT_EQ(s.seed, 42u);
  EXPECT_DOUBLE_EQ(s.drop, 0.01);
  EXPECT_DOUBLE_EQ(s.dup, 0.02);
  EXPECT_DOUBLE_EQ(s.reorder, 0.03);
  EXPECT_DOUBLE_EQ(s.corrupt, 0.04);
  EXPECT_EQ(s.delay_us, 200u);
  EXPECT_EQ(s.slow_us, 7u);
  ASSERT_TRUE(s.peer.has_value());
  EXPECT_EQ(*s.peer, (NetAddress{0x7F000001u, 5501}));
  ASSERT_TRUE(s.from.has_value());
  EXPECT_EQ(*s.from, (NetAddress{0x0A000002u, 6000}));
  EXPECT_TRUE(s.any());
  EXPECT_FALSE(parse_faults("").any());
  EXPECT_FALSE(parse_faults("seed=3").any());  // a seed alone injects nothing
}

TEST(FaultsGrammar, RejectsMalformedValues) {
  for (const char* bad : {"drop", "drop=", "drop=1.5", "drop=-0.1", "drop=nan", "drop=0.1x", "bogus=1",
                          "delay_us=-1", "delay_us=abc", "peer=127.0.0.1", "peer=127.0.0.1:0", "peer=1.2.3:80",
                          "seed=-4"}) {
    EXPECT_THROW(parse_faults(bad), std::invalid_argument) << bad;
  }
}

TEST(FaultsGrammar, TargetsOneLink) {
  FaultSpec s = parse_faults("drop=1,peer=127.0.0.1:5501,from=127.0.0.1:5500");
  const NetAddress a{0x7F000001u, 5500}, b{0x7F000001u, 5501}, c{0x7F000001u, 5502};
  EXPECT_TRUE(s.applies(a, b));
  EXPECT_FALSE(s.applies(b, a));
  EXPECT_FALSE(s.applies(a, c));
  EXPECT_FALSE(s.applies(c, b));
}

TEST(FaultsGrammar, MapsOntoUdpDatagramFaults) {
  UdpTuning t;
  apply_udp_faults(t, parse_faults("drop=0.01,dup=0.5,reorder=1,corrupt=0.02"));
  EXPECT_EQ(t.drop_every, 100u);
  EXPECT_EQ(t.duplicate_every, 2u);
  EXPECT_EQ(t.reorder_every, 1u);
  EXPECT_EQ(t.corrupt_every, 50u);
  apply_udp_faults(t, FaultSpec{});
  EXPECT_EQ(t.drop_every + t.duplicate_every + t.reorder_every + t.corrupt_every, 0u);
  {
    ScopedFaults f("seed=3,drop=0.1,peer=127.0.0.1:9,corrupt=0.25");
    apply_udp_faults_from_environment(t);
  }
  EXPECT_EQ(t.drop_every, 10u);
  EXPECT_EQ(t.corrupt_every, 4u);
  EXPECT_EQ(t.duplicate_every + t.reorder_every, 0u);
}

TEST(FaultsGrammar, MalformedSettingFailsDeviceCreation) {
  ScopedFaults f("drop=2");
  EXPECT_THROW(create_device(options(TransportKind::inproc)), std::invalid_argument);
}

// -------------------------------------------------------- the decorator --

// Records what reaches the wire: sequence numbers and first payload byte.
class RecordingLink final : public Link {
 public:
  uint32_t send(const abi::WireHeader& h, PayloadWriter& p, Clock::time_point) override {
    std::vector<std::byte> data(h.count);
    if (h.count > 0) p.write(data.data(), 0, h.count);
    seqs.push_back(h.seqn);
    payloads.push_back(std::move(data));
    return 0;
  }
  std::vector<uint32_t> seqs;
  std::vector<std::vector<std::byte>> payloads;
};

class FixedWriter final : public PayloadWriter {
 public:
  explicit FixedWriter(std::byte fill) : fill_(fill) {}
  uint32_t write(std::byte* dst, size_t, size_t bytes) override {
    std::fill(dst, dst + bytes, fill_);
    return 0;
  }

 private:
  std::byte fill_;
};

std::shared_ptr<RecordingLink> run_decorated(const std::string& spec, int messages, uint32_t count = 64) {
  auto rec = std::make_shared<RecordingLink>();
  const NetAddress self{0x7F000001u, 1000}, peer{0x7F000001u, 1001};
  auto link = wrap_with_faults(rec, parse_faults(spec), self, peer, true);
  for (int i = 0; i < messages; ++i) {
    abi::WireHeader h{};
    h.count = count;
    h.seqn = static_cast<uint32_t>(i);
    FixedWriter w(std::byte{0x5A});
    EXPECT_EQ(link->send(h, w, Clock::now() + 1s), 0u);
  }
  return rec;
}

TEST(FaultsDecorator, NoFaultsNoWrapper) {
  auto rec = std::make_shared<RecordingLink>();
  std::shared_ptr<Link> plain = rec;
  EXPECT_EQ(wrap_with_faults(plain, FaultSpec{}, NetAddress{1, 1}, NetAddress{1, 2}, true), plain);
  // A fault aimed at another link leaves this one alone.
  EXPECT_EQ(wrap_with_faults(plain, parse_faults("drop=1,peer=1.2.3.4:5"), NetAddress{1, 1}, NetAddress{1, 2}, true),
            plain);
}

TEST(FaultsDecorator, SameSeedSameFaultsOtherSeedOtherFaults) {
  const std::string spec = "drop=0.1,dup=0.1,reorder=0.1,corrupt=0.1";
  auto a = run_decorated(spec + ",seed=7", 500), b = run_decorated(spec + ",seed=7", 500);
  auto c = run_decorated(spec + ",seed=8", 500);
  EXPECT_EQ(a->seqs, b->seqs);
  EXPECT_EQ(a->payloads, b->payloads);
  EXPECT_NE(a->seqs, c->seqs);
}

TEST(FaultsDecorator, EachFaultDoesWhatItSays) {
  // drop everything
  EXPECT_TRUE(run_decorated("drop=1", 10)->seqs.empty());
  // every message twice
  EXPECT_EQ(run_decorated("dup=1", 3)->seqs, (std::vector<uint32_t>{0, 0, 1, 1, 2, 2}));
  // each message held back and sent after the next one
  EXPECT_EQ(run_decorated("reorder=1", 4)->seqs, (std::vector<uint32_t>{1, 0, 3, 2}));
  // one byte flipped in every payload
  auto rec = run_decorated("corrupt=1", 5);
  ASSERT_EQ(rec->payloads.size(), 5u);
  for (auto& p : rec->payloads) {
    int changed = 0;
    for (auto b : p) changed += b != std::byte{0x5A};
    EXPECT_EQ(changed, 1);
  }
  // probabilities come out about right
  auto many = run_decorated("seed=1,drop=0.25", 4000);
  EXPECT_NEAR(static_cast<double>(many->seqs.size()), 3000.0, 150.0);
}

TEST(FaultsDecorator, DelaysEveryMessage) {
  const auto start = std::chrono::steady_clock::now();
  auto rec = run_decorated("slow_us=20000", 5);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  EXPECT_EQ(rec->seqs.size(), 5u);
  // delay_us alone on a "UDP" link (message faults off) still wraps.
  std::shared_ptr<Link> plain = std::make_shared<RecordingLink>();
  EXPECT_NE(wrap_with_faults(plain, parse_faults("delay_us=10"), NetAddress{1, 1}, NetAddress{1, 2}, false), plain);
  EXPECT_EQ(wrap_with_faults(plain, parse_faults("drop=0.5"), NetAddress{1, 1}, NetAddress{1, 2}, false), plain);
}

// -------------------------------------------- (a) UDP recovers, end to end --

TEST(FaultsUdp, CollectivesAndSendRecvRecover) {
  // One datagram in 20 dropped, duplicated, reordered and corrupted: the UDP
  // reliability layer must repair all of it.
  ScopedFaults f("seed=42,drop=0.05,dup=0.05,reorder=0.05,corrupt=0.05");
  auto world = world_of(3, TransportKind::udp, 20000ms);
  // 200k floats = 800 KB: rendezvous, many datagrams per message.
  for (unsigned count : {100u, 5000u, 200000u}) {
    SCOPED_TRACE("allreduce count " + std::to_string(count));
    auto out = on_all(world, [&](ACCL& a, int r, Outcome& o) { allreduce_loop(a, r, o, count, 3, 3); });
    for (auto& o : out) {
      EXPECT_EQ(o.error, "");
      EXPECT_EQ(o.wrong, "");
      EXPECT_EQ(o.ok, 3);
    }
  }
  std::vector<std::unique_ptr<ACCL>> pair;
  pair.push_back(std::move(world[0]));
  pair.push_back(std::move(world[1]));
  for (unsigned count : {16u, 100000u}) {
    SCOPED_TRACE("send/recv count " + std::to_string(count));
    auto out = on_all(pair, [&](ACCL& a, int r, Outcome& o) { sendrecv_loop(a, r, o, count, 5); });
    for (auto& o : out) {
      EXPECT_EQ(o.error, "");
      EXPECT_EQ(o.wrong, "");
      EXPECT_EQ(o.ok, 5);
    }
  }
}

// --------------------------- (b) in-order transports report, never hang --

constexpr Ms kShortTimeout = 500ms;
// A failing call must fail within the device timeout plus scheduling slack
// (2 cores, sanitizers): far below the meson timeout.
constexpr Ms kFailBound = 10s;

struct MessageFault {
  std::string name;
  std::string spec;
  TransportKind kind;
  // Eager only (no rendezvous): every message carries a sequence number.
  // (Duplicates with rendezvous: DuplicateRendezvousNeverWrongData below.)
  bool eager_only = false;
};

InitOptions eager_only() {
  InitOptions init;
  init.max_rendezvous_size = 0;
  return init;
}

void run_in_order_case(const MessageFault& param) {
  ScopedFaults f(param.spec);
  auto world = world_of(3, param.kind, kShortTimeout, 0, param.eager_only ? eager_only() : InitOptions{});
  const auto start = std::chrono::steady_clock::now();
  auto out = on_all(world, [&](ACCL& a, int r, Outcome& o) { allreduce_loop(a, r, o, 3000, 40, 3); });
  const auto took = std::chrono::steady_clock::now() - start;
  SCOPED_TRACE(describe(out));
  int failed = 0;
  for (auto& o : out) {
    EXPECT_EQ(o.wrong, "") << "wrong data reported as success";
    if (o.error.empty()) continue;
    ++failed;
    EXPECT_LE(o.first_error_after, kFailBound);
    // Every failure is a named device error, and the set of names is the
    // one the architecture promises for lost/duplicated/reordered messages
    // (plus the errors of ranks whose peers gave up).
    EXPECT_TRUE(o.device_error) << o.error;
    const auto names = error_bit_names(o.retcode);
    ASSERT_FALSE(names.empty());
    for (auto& n : names)
      EXPECT_TRUE(n == "PACK_SEQ_NUMBER_ERROR" || n == "RECEIVE_TIMEOUT_ERROR" || n == "LINK_ERROR") << n;
  }
  EXPECT_GT(failed, 0) << "40 allreduces under " << param.spec << " never noticed a fault";
  EXPECT_LT(took, 40 * kFailBound);
}

class FaultsInOrder : public ::testing::TestWithParam<MessageFault> {};

TEST_P(FaultsInOrder, CallsFailWithNamedErrorNeverWrongData) { run_in_order_case(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    Faults, FaultsInOrder,
    ::testing::Values(MessageFault{"tcp_drop", "seed=1,drop=0.2", TransportKind::tcp},
                      MessageFault{"tcp_dup_eager", "seed=2,dup=0.2", TransportKind::tcp, true},
                      MessageFault{"tcp_drop_eager", "seed=7,drop=0.2", TransportKind::tcp, true},
                      MessageFault{"inproc_reorder_eager", "seed=8,reorder=0.2", TransportKind::inproc, true},
                      MessageFault{"tcp_reorder", "seed=3,reorder=0.2", TransportKind::tcp},
                      MessageFault{"inproc_drop", "seed=4,drop=0.2", TransportKind::inproc},
                      MessageFault{"inproc_dup_eager", "seed=5,dup=0.2", TransportKind::inproc, true},
                      MessageFault{"inproc_reorder", "seed=6,reorder=0.2", TransportKind::inproc}),
    [](const ::testing::TestParamInfo<MessageFault>& i) { return i.param.name; });

// With rendezvous, grants, pre-grants, ready notices and rendezvous data
// take sequence numbers too, so a duplicated one is a sequence error (the
// data plane also accepts one write per window), never a piece written twice.
// (Found by this suite: before, an allreduce could return wrong data as success.)
TEST(FaultsInOrderNamed, DuplicateRendezvousNeverWrongData) {
  for (auto kind : {TransportKind::inproc, TransportKind::tcp})
    run_in_order_case(MessageFault{"dup_rendezvous", "seed=5,dup=0.2", kind});
}

// The receiver of a duplicated eager message sees the sequence-number error
// by name (not just "some error").
TEST(FaultsInOrderNamed, DuplicateIsSequenceError) {
  ScopedFaults f("dup=1");
  auto world = world_of(2, TransportKind::inproc, kShortTimeout);
  auto out = on_all(world, [&](ACCL& a, int r, Outcome& o) { sendrecv_loop(a, r, o, 16, 3); });
  SCOPED_TRACE(describe(out));
  EXPECT_EQ(out[1].wrong, "");
  ASSERT_TRUE(out[1].device_error);
  EXPECT_TRUE(out[1].retcode != 0);
  bool seq = false;
  for (auto& n : error_bit_names(out[1].retcode)) seq |= n == "PACK_SEQ_NUMBER_ERROR";
  EXPECT_TRUE(seq) << error_code_to_string(out[1].retcode);
}

TEST(FaultsInOrderNamed, DropIsReceiveTimeout) {
  ScopedFaults f("drop=1");
  auto world = world_of(2, TransportKind::tcp, kShortTimeout);
  auto out = on_all(world, [&](ACCL& a, int r, Outcome& o) { sendrecv_loop(a, r, o, 16, 1); });
  SCOPED_TRACE(describe(out));
  ASSERT_TRUE(out[1].device_error);
  EXPECT_NE(out[1].retcode & abi::kReceiveTimeoutError, 0u) << error_code_to_string(out[1].retcode);
  EXPECT_LE(out[1].first_error_after, kFailBound);
}

// ------------------------------------------------ (c) delays and slow peers --

TEST(FaultsDelay, BelowTimeoutOnlySlower) {
  ScopedFaults f("seed=9,delay_us=3000,slow_us=1000");
  auto world = world_of(3, TransportKind::tcp, 5000ms);
  auto out = on_all(world, [&](ACCL& a, int r, Outcome& o) { allreduce_loop(a, r, o, 1000, 5, 3); });
  SCOPED_TRACE(describe(out));
  for (auto& o : out) {
    EXPECT_EQ(o.error, "");
    EXPECT_EQ(o.ok, 5);
  }
}

TEST(FaultsDelay, SlowPeerBeyondTimeoutIsReceiveTimeout) {
  // Only rank 1's outgoing links are slow (from=), by 2 s per message, with
  // a 500 ms timeout: rank 0 waiting for rank 1 must time out by name.
  const uint16_t port = base_port();
  ScopedFaults f("slow_us=2000000,from=127.0.0.1:" + std::to_string(port + 1));
  auto world = world_of(2, TransportKind::inproc, kShortTimeout, port);
  Outcome o;
  std::thread sender([&] {
    Outcome ignored;  // rank 1's own call may succeed or time out while it sleeps
    auto data = world[1]->create_buffer<int32_t>(16);
    attempt(ignored, [&] { world[1]->send(*data, 16, 0, 5); });
  });
  auto buf = world[0]->create_buffer<int32_t>(16);
  attempt(o, [&] { world[0]->recv(*buf, 16, 1, 5); });
  sender.join();
  ASSERT_TRUE(o.device_error) << o.error;
  EXPECT_NE(o.retcode & abi::kReceiveTimeoutError, 0u) << error_code_to_string(o.retcode);
  EXPECT_LE(o.first_error_after, kFailBound);
}

// ------------------------------------------------ (d) a rank disappears --

class FaultsPeerDies : public ::testing::TestWithParam<TransportKind> {};

TEST_P(FaultsPeerDies, OthersFailWithinTimeout) {
  auto world = world_of(3, GetParam(), kShortTimeout);
  std::atomic<int> first_done{0};
  std::vector<Outcome> out(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      allreduce_loop(*world[r], r, out[r], 2000, 1, 3);
      ++first_done;
      // The second allreduce never completes: rank 2 is gone.
      Outcome second;
      allreduce_loop(*world[r], r, second, 2000, 1, 3);
      out[r].error = second.error;
      out[r].wrong = second.wrong;
      out[r].device_error = second.device_error;
      out[r].retcode = second.retcode;
      out[r].first_error_after = second.first_error_after;
    });
  allreduce_loop(*world[2], 2, out[2], 2000, 1, 3);
  // Let the others enter the next allreduce, then destroy rank 2's driver and
  // device under them.
  while (first_done < 2) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(50ms);
  world[2].reset();
  for (auto& t : threads) t.join();
  SCOPED_TRACE(describe(out));
  EXPECT_EQ(out[2].ok, 1);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out[r].ok, 1);
    EXPECT_EQ(out[r].wrong, "");
    EXPECT_TRUE(out[r].device_error) << out[r].error;
    EXPECT_LE(out[r].first_error_after, kFailBound);
    const uint32_t expected = abi::kReceiveTimeoutError | abi::kLinkError | abi::kPackSeqNumberError;
    EXPECT_NE(out[r].retcode & expected, 0u) << error_code_to_string(out[r].retcode);
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, FaultsPeerDies,
                         ::testing::Values(TransportKind::inproc, TransportKind::tcp, TransportKind::udp),
                         [](const ::testing::TestParamInfo<TransportKind>& i) { return to_string(i.param); });

}  // namespace
}  // namespace accl::emu
