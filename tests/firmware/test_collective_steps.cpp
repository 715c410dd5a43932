// SPDX-License-Identifier: Apache-2.0
//
// The step-saving algorithms (allreduce recursive halving + doubling,
// allgather recursive doubling and direct, reduce_scatter recursive halving, 2-rank
// reduce without staging): results for power-of-two rank counts, in and out
// of place, eager and rendezvous sizes, and the number of message steps they
// take. Every rendezvous receive opens one window per piece, so with
// rendezvous-sized messages the windows a rank opens count its receive steps.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "collective_data.hpp"
#include "fake_cclo.hpp"

namespace accl::fw::test {

namespace {

// Windows each rank opened during `fn`.
std::vector<size_t> windows_during(FakeFabric& f, const std::function<void()>& fn) {
  std::vector<size_t> before;
  for (uint32_t r = 0; r < f.size(); ++r) before.push_back(f[r].windows_opened_total());
  fn();
  std::vector<size_t> d;
  for (uint32_t r = 0; r < f.size(); ++r) d.push_back(f[r].windows_opened_total() - before[r]);
  return d;
}

class StepSavingCollectives : public FabricPerCase {};

TEST_P(StepSavingCollectives, AllreduceOutOfAndInPlace) {
  for (const uint64_t dst : {kDst, kSrc}) {
    fill_sources(n());
    run_all(f(), [&](uint32_t) {
      return std::move(CallBuilder(abi::kAllreduce).count(n()).function(abi::kSum).addr(0, kSrc).addr(2, dst));
    });
    for (uint32_t r = 0; r < P(); ++r) {
      const auto got = f()[r].read<int32_t>(dst, n());
      for (uint32_t i = 0; i < n(); ++i) {
        ASSERT_EQ(got[i], sum_over_ranks(P(), i)) << "rank " << r << " i " << i << (dst == kSrc ? " in place" : "");
      }
    }
  }
}

TEST_P(StepSavingCollectives, AllgatherOutOfAndInPlace) {
  std::vector<int32_t> expected;
  for (uint32_t r = 0; r < P(); ++r) {
    const auto d = rank_data(r, n());
    expected.insert(expected.end(), d.begin(), d.end());
  }
  fill_sources(n());
  run_all(f(), [&](uint32_t) { return std::move(CallBuilder(abi::kAllgather).count(n()).addr(0, kSrc).addr(2, kDst)); });
  for (uint32_t r = 0; r < P(); ++r) ASSERT_EQ(f()[r].read<int32_t>(kDst, n() * P()), expected) << r;
  // In place: each rank's contribution already sits in its slot of the result.
  for (uint32_t r = 0; r < P(); ++r) {
    f()[r].write(kDst, std::vector<int32_t>(n() * P(), -1));
    f()[r].write(kDst + uint64_t{r} * n() * 4, rank_data(r, n()));
  }
  run_all(f(), [&](uint32_t r) {
    return std::move(CallBuilder(abi::kAllgather).count(n()).addr(0, kDst + uint64_t{r} * n() * 4).addr(2, kDst));
  });
  for (uint32_t r = 0; r < P(); ++r) ASSERT_EQ(f()[r].read<int32_t>(kDst, n() * P()), expected) << "in place " << r;
}

TEST_P(StepSavingCollectives, ReduceScatterOutOfAndInPlace) {
  for (const uint64_t dst : {kDst, kSrc}) {
    fill_sources(n() * P());
    run_all(f(), [&](uint32_t) {
      return std::move(CallBuilder(abi::kReduceScatter).count(n()).function(abi::kSum).addr(0, kSrc).addr(2, dst));
    });
    for (uint32_t r = 0; r < P(); ++r) {
      const auto got = f()[r].read<int32_t>(dst, n());
      for (uint32_t i = 0; i < n(); ++i) {
        ASSERT_EQ(got[i], sum_over_ranks(P(), r * n() + i)) << "rank " << r << " i " << i << (dst == kSrc ? " in place" : "");
      }
    }
  }
}

TEST_P(StepSavingCollectives, ReduceToEveryRoot) {
  for (uint32_t root = 0; root < P(); ++root) {
    for (const uint64_t dst : {kDst, kSrc}) {
      fill_sources(n());
      run_all(f(), [&](uint32_t) {
        return std::move(
            CallBuilder(abi::kReduce).count(n()).rank(root).function(abi::kSum).addr(0, kSrc).addr(2, dst));
      });
      const auto got = f()[root].read<int32_t>(dst, n());
      for (uint32_t i = 0; i < n(); ++i) ASSERT_EQ(got[i], sum_over_ranks(P(), i)) << "root " << root << " i " << i;
    }
  }
}

// 3: eager and fewer elements than ranks; 1000 / 4096: rendezvous (max eager
// 1 KiB), divisible by P; 1001: not divisible (ring fallback for allreduce);
// 20000 on 4 ranks: half the reduce_scatter source exceeds a 32 KiB spare.
// 3 ranks: the direct allgather for a rank count that is no power of two.
INSTANTIATE_TEST_SUITE_P(Sizes, StepSavingCollectives,
                         testing::Values(Case{2, 3}, Case{2, 20000}, Case{3, 3}, Case{3, 1001}, Case{4, 3},
                                         Case{4, 1000}, Case{4, 1001}, Case{4, 20000}, Case{8, 4096},
                                         Case{16, 256}),
                         case_name);

// Every rank sums its rank_data(r, n) from kSrc into kDst: the windows each
// rank opened.
std::vector<size_t> allreduce_windows(FakeFabric& f, uint32_t n) {
  for (uint32_t r = 0; r < f.size(); ++r) f[r].write(kSrc, rank_data(r, n));
  return windows_during(f, [&] {
    run_all(f, [&](uint32_t) {
      return std::move(CallBuilder(abi::kAllreduce).count(n).function(abi::kSum).addr(0, kSrc).addr(2, kDst));
    });
  });
}

// Rendezvous-sized blocks (4 KiB per rank and block, max eager 1 KiB): every
// receive step opens exactly one window.
TEST(CollectiveSteps, AllreduceOnEightRanksTakesTwoLog2PSteps) {
  FakeFabric f(8);
  f.configure();
  constexpr uint32_t n = 8192;  // 32 KiB: blocks of 4 KiB
  const auto windows = allreduce_windows(f, n);
  for (uint32_t r = 0; r < 8; ++r) EXPECT_EQ(windows[r], 6u) << "rank " << r << " (the ring takes 14)";
  EXPECT_EQ(f[3].read<int32_t>(kDst, n)[n - 1], sum_over_ranks(8, n - 1));
}

// With 4 ranks the ring's reduce-scatter is chosen: its 3 steps reduce on
// landing (halving-doubling would land a partial and then add it in a local
// round); the 3 chunks of the allgather half then come in one direct round.
TEST(CollectiveSteps, AllreduceOnFourRanksUsesTheRingThatReducesOnLanding) {
  FakeFabric f(4);
  f.configure();
  constexpr uint32_t n = 4096;  // 16 KiB: blocks of 4 KiB
  const auto windows = allreduce_windows(f, n);
  for (uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(windows[r], 6u) << "rank " << r;
    EXPECT_EQ(f[r].reducing_windows_opened_total(), 3u) << "rank " << r;
    const auto got = f[r].read<int32_t>(kDst, n);
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], sum_over_ranks(4, i)) << "rank " << r << " i " << i;
  }
}

// From 512 KiB chunks on (equal ones, not in place) 3 and 4 ranks take the
// direct allreduce: one round of plain windows for the reduce-scatter (its
// contributions land in the result's other chunks and are added locally), one
// for the allgather; none reduces on landing. Just below the limit, with
// unequal chunks, the ring's reduce-scatter reduces on landing; in place, it
// stages its pieces through spare 3 (many small windows).
TEST(CollectiveSteps, AllreduceOnFewRanksGoesDirectFromHalfMiBChunks) {
  FabricOptions options;
  options.memory_bytes = 24u << 20;
  constexpr uint64_t kBigSrc = 6u << 20;   // above the spares
  constexpr uint64_t kBigDst = 12u << 20;  // 4 chunks of 512 KiB + a few bytes
  constexpr uint32_t kChunk = 128u * 1024;  // int32 elements in 512 KiB
  struct Case {
    uint32_t P, n;
    bool in_place;
    size_t reducing;  // reducing windows per rank
  };
  // 4 * (kChunk + 100): direct, and the local combines end on a partial block.
  for (const Case c : {Case{4, 4 * kChunk, false, 0}, Case{3, 3 * kChunk, false, 0}, Case{4, 4 * (kChunk + 100), false, 0},
                       Case{4, 4 * (kChunk - 1), false, 3}, Case{4, 4 * kChunk + 1, false, 3},
                       Case{4, 4 * kChunk, true, 0}}) {
    FakeFabric f(c.P, options);
    f.configure();
    const uint64_t dst = c.in_place ? kBigSrc : kBigDst;
    for (uint32_t r = 0; r < c.P; ++r) f[r].write(kBigSrc, rank_data(r, c.n));
    const auto windows = windows_during(f, [&] {
      run_all(f, [&](uint32_t) {
        return std::move(CallBuilder(abi::kAllreduce).count(c.n).function(abi::kSum).addr(0, kBigSrc).addr(2, dst));
      });
    });
    for (uint32_t r = 0; r < c.P; ++r) {
      const std::string where = "P " + std::to_string(c.P) + " n " + std::to_string(c.n) +
                                (c.in_place ? " in place" : "") + " rank " + std::to_string(r);
      if (c.in_place) EXPECT_GT(windows[r], 2u * (c.P - 1)) << where;
      else EXPECT_EQ(windows[r], 2u * (c.P - 1)) << where;
      EXPECT_EQ(f[r].reducing_windows_opened_total(), c.reducing) << where;
      const auto got = f[r].read<int32_t>(dst, c.n);
      for (uint32_t i = 0; i < c.n; ++i) ASSERT_EQ(got[i], sum_over_ranks(c.P, i)) << where << " i " << i;
    }
  }
}

TEST(CollectiveSteps, AllgatherOnEightRanksTakesLog2PSteps) {
  FakeFabric f(8);
  f.configure();
  constexpr uint32_t n = 1024;  // 4 KiB per rank
  for (uint32_t r = 0; r < 8; ++r) f[r].write(kSrc, rank_data(r, n));
  const auto windows = windows_during(f, [&] {
    run_all(f, [&](uint32_t) { return std::move(CallBuilder(abi::kAllgather).count(n).addr(0, kSrc).addr(2, kDst)); });
  });
  for (uint32_t r = 0; r < 8; ++r) EXPECT_EQ(windows[r], 3u) << "rank " << r << " (the ring takes 7)";
  EXPECT_EQ(f[5].read<int32_t>(kDst + 7 * n * 4, n), rank_data(7, n));
}

// Rendezvous-sized blocks on 4 ranks: the direct allgather receives every
// block from its owner in one step, one window per peer (recursive doubling
// opens 2: the second step brings two blocks at once, one step later).
TEST(CollectiveSteps, AllgatherOnFourRanksReceivesEveryBlockFromItsOwner) {
  FakeFabric f(4);
  f.configure();
  constexpr uint32_t n = 1001;  // 4004 bytes per rank: rendezvous
  for (uint32_t r = 0; r < 4; ++r) f[r].write(kSrc, rank_data(r, n));
  const auto windows = windows_during(f, [&] {
    run_all(f, [&](uint32_t) { return std::move(CallBuilder(abi::kAllgather).count(n).addr(0, kSrc).addr(2, kDst)); });
  });
  for (uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(windows[r], 3u) << "rank " << r;
    for (uint32_t owner = 0; owner < 4; ++owner)
      ASSERT_EQ(f[r].read<int32_t>(kDst + uint64_t{owner} * n * 4, n), rank_data(owner, n)) << r << " " << owner;
  }
}

// The direct allgather stops at 2 MiB blocks (select.cpp): a block of
// exactly 2 MiB still comes from each owner in its own window, one element
// more and 4 ranks take recursive doubling's 2 steps.
TEST(CollectiveSteps, AllgatherOnFourRanksGoesDirectUpToTwoMiBBlocks) {
  FabricOptions options;
  options.memory_bytes = 32u << 20;
  FakeFabric f(4, options);
  f.configure();
  constexpr uint64_t kBigSrc = 6u << 20;   // above the spares
  constexpr uint64_t kBigDst = 16u << 20;  // room for 4 blocks of 2 MiB + 4 bytes
  for (const auto& [n, steps] : {std::pair<uint32_t, size_t>{512u * 1024, 3}, {512u * 1024 + 1, 2}}) {
    for (uint32_t r = 0; r < 4; ++r) f[r].write(kBigSrc, rank_data(r, n));
    const auto windows = windows_during(f, [&] {
      run_all(f, [&](uint32_t) {
        return std::move(CallBuilder(abi::kAllgather).count(n).addr(0, kBigSrc).addr(2, kBigDst));
      });
    });
    for (uint32_t r = 0; r < 4; ++r) {
      EXPECT_EQ(windows[r], steps) << "rank " << r << " block elements " << n;
      for (uint32_t owner = 0; owner < 4; ++owner)
        ASSERT_EQ(f[r].read<int32_t>(kBigDst + uint64_t{owner} * n * 4, n), rank_data(owner, n)) << r << " " << owner;
    }
  }
}

// Payload data each rank sent during `fn`: (destination, shared_payload key).
std::vector<std::vector<FakeCclo::Sent>> data_sent_during(FakeFabric& f, const std::function<void()>& fn) {
  std::vector<size_t> before;
  for (uint32_t r = 0; r < f.size(); ++r) before.push_back(f[r].sent().size());
  fn();
  std::vector<std::vector<FakeCclo::Sent>> out(f.size());
  for (uint32_t r = 0; r < f.size(); ++r) {
    const auto all = f[r].sent();
    for (size_t i = before[r]; i < all.size(); ++i)
      if (all[i].msg_type == abi::kMsgRendezvousData) out[r].push_back(all[i]);
  }
  return out;
}

// One buffer sent to several peers in one round carries one shared_payload
// key (the data plane may then copy it once); a new call gets a new key, and
// sends of different bytes get none.
TEST(CollectiveSteps, SendsOfOneBufferInOneRoundShareAPayloadKey) {
  FakeFabric f(4);
  f.configure();
  constexpr uint32_t n = 1001;  // rendezvous: direct allgather, flat bcast
  for (uint32_t r = 0; r < 4; ++r) f[r].write(kSrc, rank_data(r, n * 4));
  auto allgather = [&] {
    run_all(f, [&](uint32_t) { return std::move(CallBuilder(abi::kAllgather).count(n).addr(0, kSrc).addr(2, kDst)); });
  };
  const auto first = data_sent_during(f, allgather);
  // A soft reset does not start the keys over.
  for (uint32_t r = 0; r < 4; ++r)
    ASSERT_EQ(f[r].call(CallBuilder(abi::kConfig).function(abi::kResetPeripherals)), 0u) << "rank " << r;
  f.configure();
  const auto second = data_sent_during(f, allgather);
  for (uint32_t r = 0; r < 4; ++r) {
    ASSERT_EQ(first[r].size(), 3u) << "rank " << r;
    ASSERT_EQ(second[r].size(), 3u) << "rank " << r;
    EXPECT_NE(first[r][0].shared_payload, 0u) << "rank " << r;
    for (const auto& s : first[r]) EXPECT_EQ(s.shared_payload, first[r][0].shared_payload) << "rank " << r;
    for (const auto& s : second[r]) EXPECT_EQ(s.shared_payload, second[r][0].shared_payload) << "rank " << r;
    EXPECT_GT(second[r][0].shared_payload, first[r][0].shared_payload) << "keys are never reused";
  }
  for (uint32_t r = 0; r < 4; ++r) f[r].set_xmem(abi::kBcastFlatTreeMaxRanks, 4);  // flat on 4 ranks
  const auto bcast = data_sent_during(f, [&] {
    run_all(f, [&](uint32_t) { return std::move(CallBuilder(abi::kBcast).count(n).rank(2).addr(0, kSrc).addr(2, kSrc)); });
  });
  ASSERT_EQ(bcast[2].size(), 3u);
  EXPECT_NE(bcast[2][0].shared_payload, 0u);
  for (const auto& s : bcast[2]) EXPECT_EQ(s.shared_payload, bcast[2][0].shared_payload);
  const auto alltoall = data_sent_during(f, [&] {
    run_all(f, [&](uint32_t) { return std::move(CallBuilder(abi::kAlltoall).count(n).addr(0, kSrc).addr(2, kDst)); });
  });
  for (uint32_t r = 0; r < 4; ++r) {
    ASSERT_EQ(alltoall[r].size(), 3u);
    for (const auto& s : alltoall[r]) EXPECT_EQ(s.shared_payload, 0u) << "each peer gets other bytes";
  }
  // Allreduce on 4 ranks: the reduce-scatter sends other bytes each step,
  // the direct allgather round sends the rank's chunk to all three peers.
  for (uint32_t r = 0; r < 4; ++r) f[r].write(kSrc, rank_data(r, 4 * n));
  const auto allreduce = data_sent_during(f, [&] {
    run_all(f, [&](uint32_t) {
      return std::move(CallBuilder(abi::kAllreduce).count(4 * n).function(abi::kSum).addr(0, kSrc).addr(2, kDst));
    });
  });
  for (uint32_t r = 0; r < 4; ++r) {
    ASSERT_EQ(allreduce[r].size(), 6u) << "rank " << r;
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(allreduce[r][i].shared_payload, 0u) << "rank " << r << " step " << i;
    EXPECT_NE(allreduce[r][3].shared_payload, 0u) << "rank " << r;
    for (size_t i = 3; i < 6; ++i) EXPECT_EQ(allreduce[r][i].shared_payload, allreduce[r][3].shared_payload);
  }
  for (uint32_t r = 0; r < 4; ++r) {
    const auto got = f[r].read<int32_t>(kDst, 4 * n);
    for (uint32_t i = 0; i < 4 * n; ++i) ASSERT_EQ(got[i], sum_over_ranks(4, i)) << "rank " << r << " i " << i;
  }
}

TEST(CollectiveSteps, ReduceScatterOnEightRanksTakesLog2PSteps) {
  FakeFabric f(8);
  f.configure();
  constexpr uint32_t n = 1024;  // 4 KiB per block; half the source (16 KiB) fits a 32 KiB spare
  for (uint32_t r = 0; r < 8; ++r) f[r].write(kSrc, rank_data(r, n * 8));
  const auto windows = windows_during(f, [&] {
    run_all(f, [&](uint32_t) {
      return std::move(CallBuilder(abi::kReduceScatter).count(n).function(abi::kSum).addr(0, kSrc).addr(2, kDst));
    });
  });
  for (uint32_t r = 0; r < 8; ++r) EXPECT_EQ(windows[r], 3u) << "rank " << r << " (the ring takes 7)";
  EXPECT_EQ(f[2].read<int32_t>(kDst, n)[5], sum_over_ranks(8, 2 * n + 5));
}

// Rendezvous-sized blocks on 4 ranks: the direct reduce_scatter receives its
// block from each peer in one step (one window per peer; recursive halving
// opened 2 windows in 2 steps, the first for two blocks), and nothing passes
// through spare 3.
TEST(CollectiveSteps, ReduceScatterOnFourRanksReceivesEveryBlockFromItsPeers) {
  FakeFabric f(4);
  f.configure();
  constexpr uint32_t n = 1001;  // 4004 bytes per block, three of them fit a 32 KiB spare
  constexpr uint64_t kSpare3 = kSpareBase + 2 * kSpareStride;
  const std::vector<int32_t> untouched(n, -7);
  for (uint32_t r = 0; r < 4; ++r) {
    f[r].write(kSrc, rank_data(r, n * 4));
    f[r].write(kSpare3, untouched);
  }
  const auto windows = windows_during(f, [&] {
    run_all(f, [&](uint32_t) {
      return std::move(CallBuilder(abi::kReduceScatter).count(n).function(abi::kSum).addr(0, kSrc).addr(2, kDst));
    });
  });
  for (uint32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(windows[r], 3u) << "rank " << r;
    EXPECT_EQ(f[r].read<int32_t>(kSpare3, n), untouched) << "rank " << r;
    const auto got = f[r].read<int32_t>(kDst, n);
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], sum_over_ranks(4, r * n + i)) << "rank " << r << " i " << i;
  }
}

// The root of a 2-rank reduce reduces the peer's contribution with its source
// straight into the result: nothing passes through spare 3, which staged it
// before (the result was also the operand).
TEST(CollectiveSteps, TwoRankReduceIsNotStagedThroughSpare3) {
  FakeFabric f(2);
  f.configure();
  constexpr uint32_t n = 6000;  // 24 KiB: rendezvous, flat (fits a 32 KiB spare)
  constexpr uint64_t kSpare3 = kSpareBase + 2 * kSpareStride;
  const std::vector<int32_t> untouched(n, -7);
  for (uint32_t r = 0; r < 2; ++r) {
    f[r].write(kSrc, rank_data(r, n));
    f[r].write(kSpare3, untouched);
  }
  run_all(f, [&](uint32_t) {
    return std::move(CallBuilder(abi::kReduce).count(n).rank(0).function(abi::kSum).addr(0, kSrc).addr(2, kDst));
  });
  const auto got = f[0].read<int32_t>(kDst, n);
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], sum_over_ranks(2, i)) << i;
  EXPECT_EQ(f[0].read<int32_t>(kSpare3, n), untouched);
}

// Rendezvous-sized flat reduce on 4 ranks: the first peer's 48 KiB land
// straight in the root's result (one window); the other two are staged
// through the 32 KiB spare 3 (two pieces each). Staging all three took 6.
TEST(CollectiveSteps, FlatReduceLandsTheFirstContributionWithoutStaging) {
  FakeFabric f(4);
  f.configure();
  constexpr uint32_t n = 12000;
  for (uint32_t r = 0; r < 4; ++r) {
    f[r].write(kSrc, rank_data(r, n));
    f[r].set_xmem(abi::kReduceFlatTreeMaxCount, 1u << 20);  // flat although larger than a spare
  }
  for (const uint32_t root : {0u, 3u}) {
    const auto windows = windows_during(f, [&] {
      run_all(f, [&](uint32_t) {
        return std::move(CallBuilder(abi::kReduce).count(n).rank(root).function(abi::kSum).addr(0, kSrc).addr(2, kDst));
      });
    });
    EXPECT_EQ(windows[root], 5u) << "root " << root;
    const auto got = f[root].read<int32_t>(kDst, n);
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], sum_over_ranks(4, i)) << "root " << root << " i " << i;
  }
}

}  // namespace

}  // namespace accl::fw::test
