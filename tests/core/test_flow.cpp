// SPDX-License-Identifier: Apache-2.0
//
// core-flow: eager flow control when one sender runs thousands of calls
// ahead of its receivers (issue 37, defect 2). A root that broadcasts
// without waiting fills its receivers' arrival tables with messages for
// later calls; a message a receiver needs *now* (from another rank, e.g. a
// relay of the binomial tree, or the next root) must still be taken past
// them, whatever the interleaving. Every value of every call is checked.
//
// Ranks are held back with a bounded wait on what the others have done
// (atomics shared by the rank threads of the in-process world), never with
// timing assertions.
#include "common/world.hpp"

#include <accl/accl.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace acclt {
namespace {

using accl::ACCL;
using namespace std::chrono_literals;

// Eager only (16 x 1 KiB RX buffers; larger messages travel as several
// segments), so a sender never waits for its receiver: rendezvous would make
// it wait for the receiver's grant. A short call timeout: a lost or hidden
// message ends the test in seconds, not minutes.
WorldConfig flow_config() {
  WorldConfig c = eager_only_config();
  c.name = "flow";
  c.timeout = 5s;
  return c;
}

// Calls each rank finished, for holding a rank back until another ran ahead.
struct Progress {
  explicit Progress(unsigned ranks) : done(ranks) {}
  std::vector<std::atomic<unsigned>> done;
  // Waits until rank `r` finished `calls` calls, at most `limit` (a rank
  // that cannot get that far because it needs the waiting one only makes
  // the stress milder, never wrong).
  void wait_for(unsigned r, unsigned calls, std::chrono::milliseconds limit = 2s) const {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (done[r].load(std::memory_order_acquire) < calls && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(200us);
    }
  }
  void finished_one(unsigned r) { done[r].fetch_add(1, std::memory_order_release); }
};

int32_t bcast_value(unsigned call, unsigned element) { return static_cast<int32_t>(call * 1000 + element); }

// Broadcasts `per_root` calls from root 0, then as many from root 1, and so
// on; rank `hold` starts only once rank `hold_until_rank` finished
// `hold_until_calls` calls. Sizes vary between one element and three
// segments.
void bcast_phases(World& w, unsigned per_root, unsigned hold, unsigned hold_until_rank, unsigned hold_until_calls,
                  bool vary_sizes) {
  const unsigned P = w.size();
  Progress progress(P);
  w.run([&](unsigned r, ACCL& a) {
    constexpr unsigned kMaxCount = 600;  // 2400 B: three segments of 1 KiB
    auto buf = a.create_buffer<int32_t>(kMaxCount);
    if (r == hold) progress.wait_for(hold_until_rank, hold_until_calls);
    for (unsigned call = 0; call < per_root * P; ++call) {
      const unsigned root = call / per_root;
      const unsigned count = !vary_sizes ? 1 : call % 97 == 0 ? kMaxCount : 1 + (call * 13) % 64;
      for (unsigned e = 0; e < count; ++e) (*buf)[e] = r == root ? bcast_value(call, e) : -1;
      a.bcast(*buf, count, root);
      for (unsigned e = 0; e < count; ++e) {
        ASSERT_EQ((*buf)[e], bcast_value(call, e)) << "rank " << r << " call " << call << " (root " << root
                                                     << ") element " << e << " of " << count;
      }
      progress.finished_one(r);
    }
  });
}

// The repro of issue 37 made deterministic (4 ranks, binomial tree, 1 int):
// rank 3 starts only after rank 2 finished its calls as root of the third
// phase. Rank 0 then waits for rank 3's relay of the second phase while its
// arrival table is full of rank 2's third-phase messages; before the fix
// that relay stayed queued behind them until the call timed out.
TEST(Flow, RelayedBcastIsTakenPastATableFullOfLaterCalls) {
  World& w = World::get(4, flow_config());
  constexpr unsigned kPerRoot = 1100;  // more than the firmware's arrival table holds
  bcast_phases(w, kPerRoot, /*hold=*/3, /*hold_until_rank=*/2, /*hold_until_calls=*/3 * kPerRoot,
               /*vary_sizes=*/false);
}

// A receive from RANK_ANY is taken past a table full of another
// communicator's messages for later calls (issue 37, the BLACS tester under
// the PMPI layer, whose point-to-point traffic has a communicator of its
// own): rank 0 broadcasts kCalls calls ahead on a communicator of the
// broadcasts, and only then rank 2 sends rank 1 a message on the world
// communicator, which queues behind them. Before the fix a RANK_ANY receive
// never asked for the arrivals a full table kept out, and timed out.
TEST(Flow, AnySourceReceiveIsTakenPastATableFullOfAnotherCommunicator) {
  World& w = World::get(3, flow_config());
  constexpr unsigned kCalls = 1100;  // more than the firmware's arrival table holds
  constexpr uint32_t kBcastContext = 77;
  constexpr int32_t kMessage = 4242;
  Progress progress(w.size());
  w.run([&](unsigned r, ACCL& a) {
    const accl::communicatorId bcasts = a.split_communicator({0, 1, 2}, kBcastContext);
    auto buf = a.create_buffer<int32_t>(1);
    if (r != 0) progress.wait_for(0, kCalls);  // the root's messages are all on their way
    if (r == 2) {
      (*buf)[0] = kMessage;
      a.send(*buf, 1, 1, 7);
    } else if (r == 1) {
      (*buf)[0] = -1;
      a.recv(*buf, 1, accl::RANK_ANY, 7);
      EXPECT_EQ((*buf)[0], kMessage) << "the RANK_ANY receive";
    }
    for (unsigned call = 0; call < kCalls; ++call) {
      (*buf)[0] = r == 0 ? bcast_value(call, 0) : -1;
      a.bcast(*buf, 1, 0, bcasts);
      ASSERT_EQ((*buf)[0], bcast_value(call, 0)) << "rank " << r << " broadcast " << call;
      progress.finished_one(r);
    }
    a.free_communicator(bcasts);
  });
}

class FlowStress : public ::testing::TestWithParam<unsigned> {};

// Every root in turn broadcasts thousands of calls; the rank after it starts
// only once the root is done, so its table fills with the root's messages
// while the others relay and the next root starts ahead.
TEST_P(FlowStress, BcastFromOneRootThousandsOfCallsAheadThenRootChanges) {
  World& w = World::get(GetParam(), flow_config());
  const unsigned P = w.size();
  constexpr unsigned kPerRoot = 1200;
  bcast_phases(w, kPerRoot, /*hold=*/1 % P, /*hold_until_rank=*/0, /*hold_until_calls=*/kPerRoot,
               /*vary_sizes=*/true);
  // And a rank in the middle held back until the last root is done.
  bcast_phases(w, kPerRoot, /*hold=*/P / 2, /*hold_until_rank=*/P - 1, /*hold_until_calls=*/P * kPerRoot,
               /*vary_sizes=*/false);
}

// A slow root: every other rank reduces and gathers thousands of calls ahead
// of it (as far as the algorithm lets them), then the root changes.
TEST_P(FlowStress, ReduceAndGatherToASlowRoot) {
  World& w = World::get(GetParam(), flow_config());
  const unsigned P = w.size();
  constexpr unsigned kPerRoot = 1200;
  const unsigned roots[] = {0, P - 1};
  Progress progress(P);
  w.run([&](unsigned r, ACCL& a) {
    auto src = a.create_buffer<int32_t>(1), dst = a.create_buffer<int32_t>(P);
    unsigned calls = 0;
    for (unsigned root : roots) {
      if (r == root) {
        for (unsigned other = 0; other < P; ++other) {
          if (other != root) progress.wait_for(other, calls + 2 * kPerRoot);
        }
      }
      for (unsigned i = 0; i < kPerRoot; ++i, ++calls) {
        (*src)[0] = static_cast<int32_t>(calls + r);
        (*dst)[0] = -1;
        a.reduce(*src, *dst, 1, root, reduceFunction::SUM);
        if (r == root) {
          const auto expected = static_cast<int32_t>(P * calls + P * (P - 1) / 2);
          ASSERT_EQ((*dst)[0], expected) << "reduce call " << calls << " at root " << root;
        }
        progress.finished_one(r);
      }
      for (unsigned i = 0; i < kPerRoot; ++i, ++calls) {
        (*src)[0] = static_cast<int32_t>(calls * 10 + r);
        for (unsigned q = 0; q < P; ++q) (*dst)[q] = -1;
        a.gather(*src, *dst, 1, root);
        if (r == root) {
          for (unsigned q = 0; q < P; ++q) {
            ASSERT_EQ((*dst)[q], static_cast<int32_t>(calls * 10 + q))
                << "gather call " << calls << " at root " << root << " block of rank " << q;
          }
        }
        progress.finished_one(r);
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, FlowStress, ::testing::Values(2u, 3u, 4u, 5u),
                         [](const ::testing::TestParamInfo<unsigned>& size) {
                           return "np" + std::to_string(size.param);
                         });

}  // namespace
}  // namespace acclt
