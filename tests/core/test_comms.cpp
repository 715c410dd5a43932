// SPDX-License-Identifier: Apache-2.0
//
// core-comms: communicators (split_communicator, create_communicator,
// explicit context ids, free) with concurrent traffic on several
// communicators that share ranks, and message matching (tags, TAG_ANY,
// RANK_ANY, non-overtaking order).
#include "common/types.hpp"
#include "common/world.hpp"

#include <accl/accl.hpp>

#include <gtest/gtest.h>

#include <malloc.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <thread>

namespace acclt {
namespace {

using accl::ACCL;
using accl::communicatorId;
using accl::GLOBAL_COMM;
using accl::RANK_ANY;
using accl::RequestPtr;
using accl::TAG_ANY;

// Every comms test gets a fresh world: communicators accumulate otherwise.
World& fresh_world(unsigned P) { return World::fresh(P, WorldConfig{"comms"}); }

TEST(Split, SizesRanksAndGroups) {
  World& w = fresh_world(4);
  w.run([&](unsigned r, ACCL& a) {
    const auto global = a.get_comm_group();
    ASSERT_EQ(global.size(), 4u);
    const std::vector<int> half = r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
    const communicatorId c = a.split_communicator(half);
    EXPECT_NE(c, GLOBAL_COMM);
    EXPECT_EQ(a.get_comm_size(c), 2u);
    EXPECT_EQ(a.get_comm_rank(c), r % 2);
    const auto g = a.get_comm_group(c);
    ASSERT_EQ(g.size(), 2u);
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(g[k].ip, global[half[k]].ip);
      EXPECT_EQ(g[k].port, global[half[k]].port);
    }
    EXPECT_EQ(a.get_comm_size(), 4u);
    EXPECT_EQ(a.get_comm_rank(), r);
  });
}

// Allreduce on the half communicators and on the global one at the same time.
TEST(Split, ConcurrentAllreduceOnHalvesAndGlobal) {
  World& w = fresh_world(4);
  w.run([&](unsigned r, ACCL& a) {
    const std::vector<int> half = r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
    const communicatorId c = a.split_communicator(half);
    const size_t n = 700;  // rendezvous for int32
    for (int round = 0; round < 3; ++round) {
      auto s1 = a.create_buffer<int32_t>(n), d1 = a.create_buffer<int32_t>(n);
      auto s2 = a.create_buffer<int32_t>(n), d2 = a.create_buffer<int32_t>(n);
      for (size_t i = 0; i < n; ++i) {
        (*s1)[i] = static_cast<int32_t>(1000 * r + i);
        (*s2)[i] = static_cast<int32_t>(-7 * r + i + round);
      }
      auto q1 = a.allreduce(*s1, *d1, n, reduceFunction::SUM, c, false, false, dataType::none, true);
      auto q2 = a.allreduce(*s2, *d2, n, reduceFunction::MAX, GLOBAL_COMM, false, false, dataType::none, true);
      q2->wait();
      q1->wait();
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ((*d1)[i], static_cast<int32_t>(1000 * (half[0] + half[1]) + 2 * i)) << "half comm, rank " << r;
        ASSERT_EQ((*d2)[i], static_cast<int32_t>(i + round)) << "global comm (MAX of -7r + i), rank " << r;
      }
    }
  });
}

// Evens and odds: every pair exchanges on both its split communicator and
// the global one with the same tag, receives posted in the opposite order.
TEST(Split, SameTagOnTwoCommunicatorsNeverMixes) {
  World& w = fresh_world(4);
  w.run([&](unsigned r, ACCL& a) {
    const std::vector<int> grp = (r % 2 == 0) ? std::vector<int>{0, 2} : std::vector<int>{1, 3};
    const communicatorId c = a.split_communicator(grp);
    const unsigned peer_local = 1 - a.get_comm_rank(c);
    const unsigned peer_global = static_cast<unsigned>(grp[peer_local]);
    for (size_t n : {size_t{9}, size_t{600}}) {
      auto sc = a.create_buffer<float>(n), sg = a.create_buffer<float>(n);
      auto rc = a.create_buffer<float>(n), rg = a.create_buffer<float>(n);
      for (size_t i = 0; i < n; ++i) {
        (*sc)[i] = static_cast<float>(r * 10000 + i);
        (*sg)[i] = static_cast<float>(-1.0 * (r * 10000 + i));
      }
      RequestPtr q1 = a.recv(*rg, n, peer_global, 5, GLOBAL_COMM, false, dataType::none, true);
      RequestPtr q2 = a.recv(*rc, n, peer_local, 5, c, false, dataType::none, true);
      RequestPtr q3 = a.send(*sc, n, peer_local, 5, c, false, dataType::none, true);
      RequestPtr q4 = a.send(*sg, n, peer_global, 5, GLOBAL_COMM, false, dataType::none, true);
      for (auto& q : {q1, q2, q3, q4}) q->wait();
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ((*rc)[i], static_cast<float>(peer_global * 10000 + i)) << "split comm data, rank " << r;
        ASSERT_EQ((*rg)[i], static_cast<float>(-1.0 * (peer_global * 10000 + i))) << "global data, rank " << r;
      }
    }
  });
}

// Communicators {1,2,3} (explicit context id 100) and {0,3} (context 101):
// collectives on the first while the second carries point-to-point traffic,
// rank 3 being in both. Rank order inside {1,2,3} is 0,1,2.
TEST(Split, CollectivesOnSubsetWhileOtherCommTalks) {
  World& w = fresh_world(4);
  w.run([&](unsigned r, ACCL& a) {
    communicatorId A = 0, B = 0;
    if (r >= 1) A = a.split_communicator({1, 2, 3}, 100u);
    if (r == 0 || r == 3) B = a.split_communicator({0, 3}, 101u);
    const size_t nb = 2000;
    std::unique_ptr<accl::Buffer<int64_t>> bsend, brecv;
    RequestPtr bq1, bq2;
    if (r == 0 || r == 3) {
      const unsigned me = r == 0 ? 0 : 1;
      bsend = a.create_buffer<int64_t>(nb);
      brecv = a.create_buffer<int64_t>(nb);
      for (size_t i = 0; i < nb; ++i) (*bsend)[i] = static_cast<int64_t>(r) << 40 | static_cast<int64_t>(i);
      bq1 = a.recv(*brecv, nb, 1 - me, 1, B, false, dataType::none, true);
      bq2 = a.send(*bsend, nb, 1 - me, 1, B, false, dataType::none, true);
    }
    if (r >= 1) {
      const unsigned P = 3, me = r - 1;
      EXPECT_EQ(a.get_comm_rank(A), me);
      const size_t n = 100;
      auto s = a.create_buffer<int32_t>(n * P), d = a.create_buffer<int32_t>(n * P);
      auto v = [](unsigned rank, size_t i) { return static_cast<int32_t>(rank * 1000 + i); };
      for (size_t i = 0; i < n * P; ++i) (*s)[i] = v(me, i);
      a.bcast(*s, n, 1, A);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*s)[i], v(1, i)) << "bcast in A";
      for (size_t i = 0; i < n * P; ++i) (*s)[i] = v(me, i);
      a.allgather(*s, *d, n, A);
      for (unsigned q = 0; q < P; ++q)
        for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[q * n + i], v(q, i)) << "allgather in A";
      a.reduce(*s, *d, n, 2, reduceFunction::SUM, A);
      if (me == 2) {
        for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], v(0, i) + v(1, i) + v(2, i)) << "reduce in A";
      }
      a.alltoall(*s, *d, n, A);
      for (unsigned q = 0; q < P; ++q)
        for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[q * n + i], v(q, me * n + i)) << "alltoall in A";
      a.reduce_scatter(*s, *d, n, reduceFunction::MAX, A);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], v(2, me * n + i)) << "reduce_scatter in A";
      a.gather(*s, *d, n, 0, A);
      if (me == 0) {
        for (unsigned q = 0; q < P; ++q)
          for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[q * n + i], v(q, i)) << "gather in A";
      }
      a.scatter(*s, *d, n, 2, A);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], v(2, me * n + i)) << "scatter in A";
      a.barrier(A);
    }
    if (bq1) {
      bq2->wait();
      bq1->wait();
      const unsigned peer = r == 0 ? 3 : 0;
      for (size_t i = 0; i < nb; ++i)
        ASSERT_EQ((*brecv)[i], static_cast<int64_t>(peer) << 40 | static_cast<int64_t>(i)) << "comm B";
    }
  });
}

// Public ACCL's allgather_comms: each half gathers only its own members and
// the rest of the receive buffer stays untouched.
TEST(Split, AllgatherInHalvesLeavesRestUntouched) {
  World& w = fresh_world(4);
  w.run([&](unsigned r, ACCL& a) {
    const std::vector<int> half = r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
    const communicatorId c = a.split_communicator(half);
    const size_t n = 33;
    auto s = a.create_buffer<float>(n), d = a.create_buffer<float>(4 * n);
    for (size_t i = 0; i < n; ++i) (*s)[i] = static_cast<float>(r * 100 + i);
    for (size_t i = 0; i < 4 * n; ++i) (*d)[i] = 0;
    d->sync_to_device();
    a.allgather(*s, *d, n, c);
    for (unsigned k = 0; k < 2; ++k)
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[k * n + i], static_cast<float>(half[k] * 100 + i));
    for (size_t i = 2 * n; i < 4 * n; ++i) ASSERT_EQ((*d)[i], 0.0f) << i;
  });
}

// Public ACCL's multicomm: {0,2,3}, rank 1 sits out; pairwise traffic with
// distinct tags, then allreduce. Rank 1 meanwhile uses the global comm with
// nobody: it just does local work.
TEST(Split, MulticommWithRankSittingOut) {
  World& w = fresh_world(4);
  w.run([&](unsigned r, ACCL& a) {
    if (r == 1) return;
    const communicatorId c = a.split_communicator({0, 2, 3}, 7u);
    const unsigned me = a.get_comm_rank(c);
    const size_t n = 64;
    auto s = a.create_buffer<int32_t>(n), d = a.create_buffer<int32_t>(n);
    for (size_t i = 0; i < n; ++i) (*s)[i] = static_cast<int32_t>(me * 100 + i);
    std::vector<RequestPtr> qs;
    std::vector<std::unique_ptr<accl::Buffer<int32_t>>> rb;
    for (unsigned p = 0; p < 3; ++p) {
      if (p == me) continue;
      rb.push_back(a.create_buffer<int32_t>(n));
      qs.push_back(a.recv(*rb.back(), n, p, p * 3 + me, c, false, dataType::none, true));
    }
    for (unsigned p = 0; p < 3; ++p)
      if (p != me) qs.push_back(a.send(*s, n, p, me * 3 + p, c, false, dataType::none, true));
    for (auto& q : qs) q->wait();
    size_t k = 0;
    for (unsigned p = 0; p < 3; ++p) {
      if (p == me) continue;
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*rb[k])[i], static_cast<int32_t>(p * 100 + i)) << "from " << p;
      ++k;
    }
    a.allreduce(*s, *d, n, reduceFunction::SUM, c);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], static_cast<int32_t>(300 + 3 * i));
  });
}

// create_communicator with the ranks in reverse order: communicator rank k is
// global rank P-1-k.
TEST(Create, ReversedOrderCommunicator) {
  World& w = fresh_world(3);
  w.run([&](unsigned r, ACCL& a) {
    auto g = a.get_comm_group();
    std::reverse(g.begin(), g.end());
    const communicatorId c = a.create_communicator(g, static_cast<int>(2 - r));
    EXPECT_EQ(a.get_comm_rank(c), 2 - r);
    const size_t n = 20;
    auto s = a.create_buffer<int32_t>(3 * n), d = a.create_buffer<int32_t>(3 * n);
    for (size_t i = 0; i < n; ++i) (*s)[i] = static_cast<int32_t>(r * 1000 + i);
    a.gather(*s, *d, n, 0, c);  // root: communicator rank 0 = global rank 2
    if (r == 2) {
      for (unsigned k = 0; k < 3; ++k)
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ((*d)[k * n + i], static_cast<int32_t>((2 - k) * 1000 + i)) << "slot " << k;
    }
  });
}

TEST(Create, FreeAndSplitAgain) {
  World& w = fresh_world(2);
  w.run([&](unsigned r, ACCL& a) {
    for (int round = 0; round < 10; ++round) {
      const communicatorId c = a.split_communicator({0, 1}, 500u + round);
      auto s = a.create_buffer<int32_t>(1), d = a.create_buffer<int32_t>(1);
      (*s)[0] = round + static_cast<int>(r);
      a.allreduce(*s, *d, 1, reduceFunction::SUM, c);
      ASSERT_EQ((*d)[0], 2 * round + 1);
      a.free_communicator(c);
    }
  });
}

// Bytes the process holds on the heap (all arenas, mmapped blocks included).
size_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

// A freed communicator leaves nothing behind in the driver: an application
// that creates and frees communicators forever (MPI_Comm_dup/MPI_Comm_free in
// a loop, through the PMPI layer) runs in constant memory. The driver once
// kept a table entry per id ever created (~56 bytes a cycle, growing by
// doubling: > 1 MB per rank over these cycles). Ids still increase and a
// freed one stays invalid.
TEST(Create, FreeCyclesKeepNoMemoryAndNeverReuseIds) {
  World& w = fresh_world(2);
  constexpr int kWarmup = 1000, kCycles = 20000;
  std::vector<communicatorId> last(2, GLOBAL_COMM);
  auto cycles = [&](int n) {
    w.run([&](unsigned r, ACCL& a) {
      const auto group = a.get_comm_group();
      for (int i = 0; i < n; ++i) {
        const communicatorId c = a.create_communicator(group, static_cast<int>(r), 1000u);
        ASSERT_GT(c, last[r]) << "ids increase, a freed one is not handed out again";
        last[r] = c;
        a.free_communicator(c);
      }
      EXPECT_THROW(a.get_comm_size(last[r]), std::exception) << "a freed id stays invalid";
    });
  };
  cycles(kWarmup);
  const size_t before = heap_in_use();
  cycles(kCycles);
  const size_t after = heap_in_use();
  const long grown = static_cast<long>(after) - static_cast<long>(before);
  EXPECT_LT(grown, 256 * 1024) << kCycles << " create/free cycles per rank grew the heap by " << grown << " bytes";
  // The driver still works on a fresh communicator after all that.
  w.run([&](unsigned r, ACCL& a) {
    const communicatorId c = a.create_communicator(a.get_comm_group(), static_cast<int>(r), 1001u);
    auto s = a.create_buffer<int32_t>(1), d = a.create_buffer<int32_t>(1);
    (*s)[0] = static_cast<int32_t>(r) + 1;
    a.allreduce(*s, *d, 1, reduceFunction::SUM, c);
    EXPECT_EQ((*d)[0], 3);
    a.free_communicator(c);
  });
}

// --- matching --------------------------------------------------------------------

TEST(Matching, ReceivesByTagOutOfSendOrder) {
  World& w = fresh_world(2);
  w.run([&](unsigned r, ACCL& a) {
    for (size_t n : {size_t{4}, size_t{800}}) {  // eager and rendezvous
      std::vector<std::unique_ptr<accl::Buffer<int32_t>>> b;
      for (int t = 0; t < 3; ++t) b.push_back(a.create_buffer<int32_t>(n));
      if (r == 0) {
        for (int t = 0; t < 3; ++t) {
          for (size_t i = 0; i < n; ++i) (*b[t])[i] = t * 1000 + static_cast<int>(i);
        }
        std::vector<RequestPtr> qs;
        for (int t = 0; t < 3; ++t) qs.push_back(a.send(*b[t], n, 1, 10 + t, GLOBAL_COMM, false, dataType::none, true));
        for (auto& q : qs) q->wait();
      } else {
        for (int t = 2; t >= 0; --t) {
          a.recv(*b[t], n, 0, 10 + t);
          for (size_t i = 0; i < n; ++i) ASSERT_EQ((*b[t])[i], t * 1000 + static_cast<int>(i)) << "tag " << 10 + t;
        }
      }
    }
  });
}

TEST(Matching, TagAnyTakesOldestAndKeepsOrder) {
  World& w = fresh_world(2);
  w.run([&](unsigned r, ACCL& a) {
    const size_t n = 8;
    if (r == 0) {
      auto b = a.create_buffer<int32_t>(n);
      for (int k = 0; k < 5; ++k) {
        for (size_t i = 0; i < n; ++i) (*b)[i] = k;
        a.send(*b, n, 1, 40 + k);  // eager: completes without the receiver
      }
    } else {
      for (int k = 0; k < 5; ++k) {
        auto b = a.create_buffer<int32_t>(n);
        a.recv(*b, n, 0, TAG_ANY);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ((*b)[i], k) << "TAG_ANY receive " << k << " matched out of order";
      }
    }
  });
}

TEST(Matching, RankAnyReceivesFromEverySource) {
  World& w = fresh_world(4);
  w.run([&](unsigned r, ACCL& a) {
    const size_t n = 16;
    if (r == 0) {
      std::set<int> seen;
      for (int k = 0; k < 3; ++k) {
        auto b = a.create_buffer<int32_t>(n);
        a.recv(*b, n, RANK_ANY, 3);
        const int src = (*b)[0] / 100;
        EXPECT_TRUE(src >= 1 && src <= 3) << src;
        for (size_t i = 0; i < n; ++i) ASSERT_EQ((*b)[i], src * 100 + static_cast<int>(i));
        seen.insert(src);
      }
      EXPECT_EQ(seen.size(), 3u) << "each source received exactly once";
    } else {
      auto b = a.create_buffer<int32_t>(n);
      for (size_t i = 0; i < n; ++i) (*b)[i] = static_cast<int>(r) * 100 + static_cast<int>(i);
      a.send(*b, n, 0, 3);
    }
  });
}

// Every ordered pair exchanges at once, with a tag naming the pair.
TEST(Matching, AllPairsConcurrently) {
  for (unsigned P : {3u, 4u}) {
    World& w = fresh_world(P);
    w.run([&](unsigned r, ACCL& a) {
      for (size_t n : {size_t{17}, size_t{300}}) {
        std::vector<RequestPtr> qs;
        std::vector<std::unique_ptr<accl::Buffer<float>>> in(P), out(P);
        for (unsigned p = 0; p < P; ++p) {
          if (p == r) continue;
          in[p] = a.create_buffer<float>(n);
          qs.push_back(a.recv(*in[p], n, p, p * P + r, GLOBAL_COMM, false, dataType::none, true));
        }
        for (unsigned p = 0; p < P; ++p) {
          if (p == r) continue;
          out[p] = a.create_buffer<float>(n);
          for (size_t i = 0; i < n; ++i) (*out[p])[i] = static_cast<float>(r * 1000 + p * 100 + i % 100);
          qs.push_back(a.send(*out[p], n, p, r * P + p, GLOBAL_COMM, false, dataType::none, true));
        }
        for (auto& q : qs) q->wait();
        for (unsigned p = 0; p < P; ++p) {
          if (p == r) continue;
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ((*in[p])[i], static_cast<float>(p * 1000 + r * 100 + i % 100)) << "from " << p << " n=" << n;
        }
      }
    });
  }
}

// Public ACCL's sender-side wildcard: a message sent with TAG_ANY matches a
// receive for any tag.
TEST(Matching, SentWithTagAnyMatchesAnyReceiveTag) {
  World& w = fresh_world(2);
  w.run([&](unsigned r, ACCL& a) {
    for (size_t n : {size_t{10}, size_t{900}}) {
      auto b = a.create_buffer<int32_t>(n);
      if (r == 0) {
        for (size_t i = 0; i < n; ++i) (*b)[i] = static_cast<int32_t>(3 * i + n);
        a.send(*b, n, 1, TAG_ANY);
      } else {
        a.recv(*b, n, 0, 1234);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ((*b)[i], static_cast<int32_t>(3 * i + n)) << "n=" << n;
      }
    }
  });
}

TEST(Matching, RankAnyTagAnyForRendezvousMessages) {
  World& w = fresh_world(3);
  w.run([&](unsigned r, ACCL& a) {
    const size_t n = 5000;
    if (r == 0) {
      int seen = 0;
      for (int k = 0; k < 2; ++k) {
        auto b = a.create_buffer<int32_t>(n);
        a.recv(*b, n, RANK_ANY, TAG_ANY);
        const int src = (*b)[0];
        ASSERT_TRUE(src == 1 || src == 2) << src;
        for (size_t i = 0; i < n; ++i) ASSERT_EQ((*b)[i], src + static_cast<int>(i) * 10);
        seen |= 1 << src;
      }
      EXPECT_EQ(seen, 6);
    } else {
      auto b = a.create_buffer<int32_t>(n);
      for (size_t i = 0; i < n; ++i) (*b)[i] = static_cast<int>(r) + static_cast<int>(i) * 10;
      a.send(*b, n, 0, 40 + r);
    }
  });
}

// A communicator whose ranks accept eager segments of at most 256 bytes:
// 1 KiB eager messages travel as 4 segments.
TEST(Create, SmallMaxSegmentSize) {
  World& w = fresh_world(2);
  w.run([&](unsigned r, ACCL& a) {
    auto g = a.get_comm_group();
    for (auto& rk : g) rk.max_segment_size = 256;
    const communicatorId c = a.create_communicator(g, static_cast<int>(r));
    for (size_t n : {size_t{64}, size_t{65}, size_t{256}, size_t{1000}}) {
      auto s = a.create_buffer<float>(n), d = a.create_buffer<float>(n);
      for (size_t i = 0; i < n; ++i) (*s)[i] = static_cast<float>(r * 10000 + i);
      auto q = a.recv(*d, n, 1 - r, 3, c, false, dataType::none, true);
      a.send(*s, n, 1 - r, 3, c);
      q->wait();
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], static_cast<float>((1 - r) * 10000 + i)) << "n=" << n;
      a.allreduce(*s, *d, n, reduceFunction::SUM, c);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], static_cast<float>(10000 + 2 * i)) << "allreduce n=" << n;
    }
  });
}

// Protocol thresholds changed at run time on every rank.
TEST(Protocol, RuntimeEagerAndRendezvousLimits) {
  World& w = fresh_world(3);
  w.run([&](unsigned r, ACCL& a) {
    auto check_round = [&](const std::string& what) {
      for (size_t n : {size_t{17}, size_t{700}, size_t{3000}}) {
        auto s = a.create_buffer<int32_t>(n * 3), d = a.create_buffer<int32_t>(n * 3);
        for (size_t i = 0; i < n * 3; ++i) (*s)[i] = static_cast<int32_t>(r * 100000 + i);
        a.allgather(*s, *d, n);
        for (unsigned q = 0; q < 3; ++q)
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ((*d)[q * n + i], static_cast<int32_t>(q * 100000 + i)) << what << " allgather n=" << n;
        a.reduce_scatter(*s, *d, n, reduceFunction::SUM);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ((*d)[i], static_cast<int32_t>(300000 + 3 * (r * n + i))) << what << " reduce_scatter n=" << n;
        const unsigned next = (r + 1) % 3, prev = (r + 2) % 3;
        auto q = a.recv(*d, n, prev, 9, GLOBAL_COMM, false, dataType::none, true);
        a.send(*s, n, next, 9);
        q->wait();
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ((*d)[i], static_cast<int32_t>(prev * 100000 + i)) << what << " send/recv n=" << n;
      }
    };
    a.set_max_eager_msg_size(8 * 1024);  // multi-segment eager up to 8 KiB
    a.barrier();
    check_round("eager <= 8 KiB");
    a.set_max_eager_msg_size(64);  // almost everything rendezvous
    a.barrier();
    check_round("eager <= 64 B");
    a.set_max_rendezvous_msg_size(0);  // eager only
    a.barrier();
    check_round("rendezvous disabled");
  });
}

// Two host threads per rank use one ACCL object at the same time: one runs
// point-to-point traffic on the global communicator, the other collectives on
// a split communicator.
TEST(Threads, TwoHostThreadsShareOneDriver) {
  World& w = fresh_world(4);
  w.run([&](unsigned r, ACCL& a) {
    const std::vector<int> half = r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
    const communicatorId c = a.split_communicator(half);
    std::string err;
    std::thread p2p([&] {
      try {
        const unsigned peer = r ^ 2;  // 0<->2, 1<->3: across the halves
        auto s = a.create_buffer<int64_t>(500), d = a.create_buffer<int64_t>(500);
        for (int it = 0; it < 100; ++it) {
          const size_t n = it % 2 ? 500 : 7;
          for (size_t i = 0; i < n; ++i) (*s)[i] = it * 1000 + r;
          auto q = a.recv(*d, n, peer, it, GLOBAL_COMM, false, dataType::none, true);
          a.send(*s, n, peer, it);
          q->wait();
          for (size_t i = 0; i < n; ++i)
            if ((*d)[i] != it * 1000 + peer) throw std::runtime_error("p2p data wrong at iteration " + std::to_string(it));
        }
      } catch (const std::exception& e) {
        err = e.what();
      }
    });
    auto s = a.create_buffer<int32_t>(300), d = a.create_buffer<int32_t>(300);
    for (int it = 0; it < 100; ++it) {
      const size_t n = it % 2 ? 300 : 5;
      for (size_t i = 0; i < n; ++i) (*s)[i] = static_cast<int32_t>(it + r);
      a.allreduce(*s, *d, n, reduceFunction::SUM, c);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], 2 * it + half[0] + half[1]) << "iteration " << it;
    }
    p2p.join();
    EXPECT_EQ(err, "") << "rank " << r << " point-to-point thread";
  });
}

}  // namespace
}  // namespace acclt
