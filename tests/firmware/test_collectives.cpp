// SPDX-License-Identifier: Apache-2.0
//
// Collective algorithms on the fake data plane: every algorithm for several
// rank counts, with eager-sized and rendezvous-sized data, in and out of
// place. Data of rank r, element i = r * 1000 + i (int32).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <thread>

#include "collective_data.hpp"
#include "fake_cclo.hpp"

// Inside accl::fw::test so that `abi::` means accl::abi (gtest pulls in
// <cxxabi.h>, which declares a global `abi` namespace alias).
namespace accl::fw::test {

namespace {

class FirmwareCollectives : public FabricPerCase {
 protected:
  // Alltoall from kSrc into `dst` (kSrc: in place): block q of rank r's
  // result must be block r of rank q's data.
  void check_alltoall_into(uint64_t dst) {
    fill_sources(n() * P());
    run_all(f(), [&](uint32_t) { return std::move(CallBuilder(abi::kAlltoall).count(n()).addr(0, kSrc).addr(2, dst)); });
    for (uint32_t r = 0; r < P(); ++r) {
      const auto got = f()[r].read<int32_t>(dst, n() * P());
      for (uint32_t q = 0; q < P(); ++q) {
        for (uint32_t i = 0; i < n(); ++i) ASSERT_EQ(got[q * n() + i], value(q, r * n() + i)) << r << " " << q << " " << i;
      }
    }
  }
};

TEST_P(FirmwareCollectives, Allreduce) {
  fill_sources(n());
  run_all(f(), [&](uint32_t) {
    return std::move(CallBuilder(abi::kAllreduce).count(n()).function(abi::kSum).addr(0, kSrc).addr(2, kDst));
  });
  for (uint32_t r = 0; r < P(); ++r) {
    const auto got = f()[r].read<int32_t>(kDst, n());
    for (uint32_t i = 0; i < n(); ++i) ASSERT_EQ(got[i], sum_over_ranks(P(), i)) << "rank " << r << " i " << i;
  }
}

TEST_P(FirmwareCollectives, AllreduceInPlaceMax) {
  fill_sources(n());
  run_all(f(), [&](uint32_t) {
    return std::move(CallBuilder(abi::kAllreduce).count(n()).function(abi::kMax).addr(0, kSrc).addr(2, kSrc));
  });
  for (uint32_t r = 0; r < P(); ++r) EXPECT_EQ(f()[r].read<int32_t>(kSrc, n()), rank_data(P() - 1, n())) << r;
}

TEST_P(FirmwareCollectives, BcastFromEveryRoot) {
  for (uint32_t root = 0; root < P(); ++root) {
    for (uint32_t r = 0; r < P(); ++r) f()[r].write(kSrc, rank_data(r == root ? 7 : 0, n()));
    run_all(f(), [&](uint32_t) { return std::move(CallBuilder(abi::kBcast).count(n()).rank(root).addr(0, kSrc).addr(2, kSrc)); });
    for (uint32_t r = 0; r < P(); ++r) ASSERT_EQ(f()[r].read<int32_t>(kSrc, n()), rank_data(7, n())) << root << r;
  }
}

TEST_P(FirmwareCollectives, ScatterAndGather) {
  const uint32_t root = P() - 1;
  std::vector<int32_t> all(n() * P());
  std::iota(all.begin(), all.end(), 3);
  f()[root].write(kSrc, all);
  run_all(f(), [&](uint32_t) { return std::move(CallBuilder(abi::kScatter).count(n()).rank(root).addr(0, kSrc).addr(2, kDst)); });
  for (uint32_t r = 0; r < P(); ++r) {
    ASSERT_EQ(f()[r].read<int32_t>(kDst, n()), std::vector<int32_t>(all.begin() + r * n(), all.begin() + (r + 1) * n()));
  }
  run_all(f(), [&](uint32_t) { return std::move(CallBuilder(abi::kGather).count(n()).rank(0).addr(0, kDst).addr(2, kSrc + 0x80000)); });
  EXPECT_EQ(f()[0].read<int32_t>(kSrc + 0x80000, n() * P()), all);
}

TEST_P(FirmwareCollectives, Allgather) {
  fill_sources(n());
  run_all(f(), [&](uint32_t) { return std::move(CallBuilder(abi::kAllgather).count(n()).addr(0, kSrc).addr(2, kDst)); });
  std::vector<int32_t> expected;
  for (uint32_t r = 0; r < P(); ++r) {
    const auto d = rank_data(r, n());
    expected.insert(expected.end(), d.begin(), d.end());
  }
  for (uint32_t r = 0; r < P(); ++r) ASSERT_EQ(f()[r].read<int32_t>(kDst, n() * P()), expected) << r;
}

TEST_P(FirmwareCollectives, ReduceFlatAndChain) {
  fill_sources(n());
  for (bool chain : {false, true}) {
    if (chain) {
      // force the chain: flat only for <= 1 rank or <= 4 bytes
      for (uint32_t r = 0; r < P(); ++r) {
        f()[r].set_xmem(abi::kReduceFlatTreeMaxRanks, 1);
        f()[r].set_xmem(abi::kReduceFlatTreeMaxCount, 4);
      }
    }
    const uint32_t root = 1 % P();
    run_all(f(), [&](uint32_t) {
      return std::move(CallBuilder(abi::kReduce).count(n()).rank(root).function(abi::kSum).addr(0, kSrc).addr(2, kDst));
    });
    const auto got = f()[root].read<int32_t>(kDst, n());
    for (uint32_t i = 0; i < n(); ++i) ASSERT_EQ(got[i], sum_over_ranks(P(), i)) << "chain " << chain << " i " << i;
  }
}

TEST_P(FirmwareCollectives, ReduceScatter) {
  fill_sources(n() * P());
  run_all(f(), [&](uint32_t) {
    return std::move(CallBuilder(abi::kReduceScatter).count(n()).function(abi::kSum).addr(0, kSrc).addr(2, kDst));
  });
  for (uint32_t r = 0; r < P(); ++r) {
    const auto got = f()[r].read<int32_t>(kDst, n());
    for (uint32_t i = 0; i < n(); ++i) ASSERT_EQ(got[i], sum_over_ranks(P(), r * n() + i)) << "rank " << r << " i " << i;
  }
}

TEST_P(FirmwareCollectives, Alltoall) { check_alltoall_into(kDst); }

TEST_P(FirmwareCollectives, AlltoallInPlace) { check_alltoall_into(kSrc); }

TEST_P(FirmwareCollectives, BarrierTwice) {
  run_all(f(), [&](uint32_t) { return std::move(CallBuilder(abi::kBarrier)); });
  run_all(f(), [&](uint32_t) { return std::move(CallBuilder(abi::kBarrier)); });
}

// 5 elements: eager, fewer than / close to P; 3000: 12 KB per rank, rendezvous
// (max eager 1 KiB) and chunked; 20000: larger than a 32 KiB spare buffer.
INSTANTIATE_TEST_SUITE_P(Sizes, FirmwareCollectives,
                         testing::Values(Case{1, 5}, Case{2, 5}, Case{3, 5}, Case{4, 3000}, Case{5, 5},
                                         Case{3, 20000}, Case{8, 257}),
                         case_name);

TEST(FirmwareCollectiveOrder, CollectivesOnOneCommunicatorRunInIssueOrder) {
  FakeFabric f(3);
  f.configure();
  for (uint32_t r = 0; r < 3; ++r) f[r].write(kSrc, rank_data(r, 64));
  // Each rank issues allreduce then bcast back to back without waiting.
  std::vector<uint64_t> first, second;
  for (uint32_t r = 0; r < 3; ++r) {
    first.push_back(f[r].submit(CallBuilder(abi::kAllreduce).count(64).function(abi::kSum).addr(0, kSrc).addr(2, kDst)));
    second.push_back(f[r].submit(CallBuilder(abi::kBcast).count(64).rank(2).addr(0, kDst).addr(2, kDst)));
  }
  for (uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(f[r].wait(first[r]), std::optional<uint32_t>(0));
    EXPECT_EQ(f[r].wait(second[r]), std::optional<uint32_t>(0));
    const auto got = f[r].read<int32_t>(kDst, 64);
    for (uint32_t i = 0; i < 64; ++i) ASSERT_EQ(got[i], sum_over_ranks(3, i));
  }
}

// Spares 1 and 2 go to collectives in issue order. Both ranks issue C (bcast
// from rank 1), A (reduce_scatter, spares 1/2) on one communicator and B
// (reduce_scatter, spares 1/2) on another. Rank 1 issues its calls late, so on
// rank 0 A waits behind C while B could already start: if B took the spares
// there, rank 1 (where C ends at once and A takes the spares first) and rank 0
// would each hold the spares for the collective the other one cannot start.
TEST(FirmwareCollectiveOrder, SparesGoToCollectivesInIssueOrder) {
  FabricOptions o;
  o.timeout_us = 1'000'000;
  FakeFabric f(2, o);
  f.configure();
  constexpr uint32_t kOther = 0x400;  // second communicator, same members, context 8
  for (uint32_t r = 0; r < 2; ++r) {
    for (uint32_t w = 0; w < abi::comm_record_words(2); ++w) f[r].set_xmem(kOther + 4 * w, f[r].xmem(kCommOffset + 4 * w));
    f[r].set_xmem(kOther + 4 * abi::comm_context_word(2), kContextId + 1);
  }
  constexpr uint32_t n = 64;
  constexpr uint64_t kSrcB = 0x400000, kDstB = 0x500000, kBcastBuf = 0x600000;
  for (uint32_t r = 0; r < 2; ++r) {
    f[r].write(kSrc, rank_data(r, 2 * n));
    f[r].write(kSrcB, rank_data(r + 2, 2 * n));
    f[r].write(kBcastBuf, rank_data(r, n));
  }
  auto issue = [&](uint32_t r) {
    std::vector<uint64_t> ids;
    ids.push_back(f[r].submit(CallBuilder(abi::kBcast).count(n).rank(1).addr(0, kBcastBuf).addr(2, kBcastBuf)));
    ids.push_back(f[r].submit(CallBuilder(abi::kReduceScatter).count(n).addr(0, kSrc).addr(2, kDst)));
    ids.push_back(f[r].submit(CallBuilder(abi::kReduceScatter).count(n).comm(kOther).addr(0, kSrcB).addr(2, kDstB)));
    return ids;
  };
  const auto ids0 = issue(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto ids1 = issue(1);
  for (uint32_t k = 0; k < 3; ++k) {
    EXPECT_EQ(f[0].wait(ids0[k]), std::optional<uint32_t>(0)) << "rank 0 call " << k;
    EXPECT_EQ(f[1].wait(ids1[k]), std::optional<uint32_t>(0)) << "rank 1 call " << k;
  }
  for (uint32_t r = 0; r < 2; ++r) {
    const auto a = f[r].read<int32_t>(kDst, n);
    const auto b = f[r].read<int32_t>(kDstB, n);
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(a[i], value(0, r * n + i) + value(1, r * n + i)) << i;
      ASSERT_EQ(b[i], value(2, r * n + i) + value(3, r * n + i)) << i;
    }
  }
}

TEST(FirmwareCollectiveOrder, ConcurrentCollectivesOnTwoCommunicatorsShareSpares) {
  FakeFabric f(2);
  f.configure();
  constexpr uint32_t kOther = 0x400;  // second communicator, same members, context 8
  for (uint32_t r = 0; r < 2; ++r) {
    for (uint32_t w = 0; w < abi::comm_record_words(2); ++w) f[r].set_xmem(kOther + 4 * w, f[r].xmem(kCommOffset + 4 * w));
    f[r].set_xmem(kOther + 4 * abi::comm_context_word(2), kContextId + 1);
  }
  constexpr uint32_t n = 20000;  // rendezvous, larger than a spare buffer
  constexpr uint64_t kSrcB = 0x400000;
  for (uint32_t r = 0; r < 2; ++r) {
    f[r].write(kSrc, rank_data(r, 3 * n));
    f[r].write(kSrcB, rank_data(r + 2, 3 * n));
  }
  std::vector<uint64_t> ids;
  for (uint32_t r = 0; r < 2; ++r) {
    // in-place allreduces (staged through spare 3) and reduce_scatters (spares 1, 2) on both communicators
    ids.push_back(f[r].submit(CallBuilder(abi::kAllreduce).count(n).addr(0, kSrc).addr(2, kSrc)));
    ids.push_back(f[r].submit(CallBuilder(abi::kAllreduce).count(n).comm(kOther).addr(0, kSrcB).addr(2, kSrcB)));
    ids.push_back(f[r].submit(CallBuilder(abi::kReduceScatter).count(n).addr(0, kSrc + 4 * n).addr(2, kDst)));
    ids.push_back(f[r].submit(
        CallBuilder(abi::kReduceScatter).count(n).comm(kOther).addr(0, kSrcB + 4 * n).addr(2, kDst + 4 * n)));
  }
  for (uint32_t r = 0; r < 2; ++r) {
    for (uint32_t k = 0; k < 4; ++k) EXPECT_EQ(f[r].wait(ids[r * 4 + k]), std::optional<uint32_t>(0)) << r << k;
  }
  for (uint32_t r = 0; r < 2; ++r) {
    const auto a = f[r].read<int32_t>(kSrc, n);
    const auto b = f[r].read<int32_t>(kSrcB, n);
    const auto rs_a = f[r].read<int32_t>(kDst, n);
    const auto rs_b = f[r].read<int32_t>(kDst + 4 * n, n);
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(a[i], value(0, i) + value(1, i)) << i;
      ASSERT_EQ(b[i], value(2, i) + value(3, i)) << i;
      ASSERT_EQ(rs_a[i], value(0, n + r * n + i) + value(1, n + r * n + i)) << i;
      ASSERT_EQ(rs_b[i], value(2, n + r * n + i) + value(3, n + r * n + i)) << i;
    }
  }
}

// A failed collective leaves pre-grants behind: here both ranks call a
// rendezvous-sized bcast naming the *other* rank as root, so each only
// receives and pre-grants the other, and nobody sends. The next collective
// (an allreduce whose sends are pre-granted) must not use those stale
// pre-grants (it would write into windows of the failed call and wait for
// its own data until the timeout): pre-grants carry the collective's number.
TEST(FirmwareCollectiveOrder, PreGrantsOfAFailedCollectiveAreNotUsedByTheNext) {
  FabricOptions o;
  o.timeout_us = 200'000;
  FakeFabric f(2, o);
  f.configure();
  constexpr uint32_t n = 3000;  // 12000 bytes: rendezvous, pre-granted
  std::vector<uint64_t> first;
  for (uint32_t r = 0; r < 2; ++r) {
    first.push_back(f[r].submit(CallBuilder(abi::kBcast).count(n).rank(1 - r).addr(0, kDst).addr(2, kDst)));
  }
  for (uint32_t r = 0; r < 2; ++r) {
    const auto status = f[r].wait(first[r]);
    ASSERT_TRUE(status.has_value());
    EXPECT_NE(*status, 0u) << "rank " << r << ": bcast with disagreeing roots reported success";
  }
  for (uint32_t r = 0; r < 2; ++r) f[r].write(kSrc, rank_data(r, n));
  std::vector<uint64_t> second;
  for (uint32_t r = 0; r < 2; ++r) {
    second.push_back(f[r].submit(CallBuilder(abi::kAllreduce).count(n).addr(0, kSrc).addr(2, kDst)));
  }
  for (uint32_t r = 0; r < 2; ++r) EXPECT_EQ(f[r].wait(second[r]), std::optional<uint32_t>(0)) << "rank " << r;
  for (uint32_t r = 0; r < 2; ++r) {
    const auto got = f[r].read<int32_t>(kDst, n);
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], sum_over_ranks(2, i)) << r << " " << i;
  }
}

TEST(FirmwareCollectiveOrder, CollectiveRendezvousIsGrantedByTheReceiver) {
  FakeFabric f(2);
  f.configure();
  constexpr uint32_t n = 3000;  // ring chunks of 6000 bytes > max eager 1 KiB
  for (uint32_t r = 0; r < 2; ++r) f[r].write(kSrc, rank_data(r, n));
  std::vector<uint64_t> ids;
  for (uint32_t r = 0; r < 2; ++r) {
    ids.push_back(f[r].submit(CallBuilder(abi::kAllreduce).count(n).addr(0, kSrc).addr(2, kDst)));
  }
  for (uint32_t r = 0; r < 2; ++r) EXPECT_EQ(f[r].wait(ids[r]), std::optional<uint32_t>(0));
  for (uint32_t r = 0; r < 2; ++r) {
    // No RTS: per transfer (reduce-scatter and allgather step) each rank
    // sends one pre-grant and one data message, each with a sequence number;
    // one window per transfer, straight into the result.
    const uint32_t peer_record = kCommOffset + 4 * (abi::kCommRanksWord + abi::kCommRankRecordWords * (1 - r));
    EXPECT_EQ(f[r].xmem(peer_record + 4 * abi::kRankOutboundSeq), 4u);
    EXPECT_EQ(f[r].xmem(peer_record + 4 * abi::kRankInboundSeq), 4u);
    EXPECT_EQ(f[r].windows_opened_total(), 2u);
    // The reduce-scatter step's window reduces on landing; the allgather
    // step's only copies.
    EXPECT_EQ(f[r].reducing_windows_opened_total(), 1u);
    EXPECT_EQ(f[r].windows_open(), 0u);
    const auto got = f[r].read<int32_t>(kDst, n);
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], sum_over_ranks(2, i));
  }
  // In place the local operand is the landing place: that step is staged
  // and reduced afterwards, so no window reduces on landing.
  for (uint32_t r = 0; r < 2; ++r) f[r].write(kSrc, rank_data(r, n));
  ids.clear();
  for (uint32_t r = 0; r < 2; ++r) {
    ids.push_back(f[r].submit(CallBuilder(abi::kAllreduce).count(n).addr(0, kSrc).addr(2, kSrc)));
  }
  for (uint32_t r = 0; r < 2; ++r) EXPECT_EQ(f[r].wait(ids[r]), std::optional<uint32_t>(0));
  for (uint32_t r = 0; r < 2; ++r) {
    EXPECT_EQ(f[r].reducing_windows_opened_total(), 1u);
    const auto got = f[r].read<int32_t>(kSrc, n);
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(got[i], sum_over_ranks(2, i));
  }
}

// 16 MiB per rank: rendezvous chunks land in place (or, in place, are staged
// through spare 3 in 32 KiB pieces). Guards against per-segment overhead and
// step replays: the firmware's share must stay small next to the copies the
// fake data plane itself makes.
TEST(FirmwareCollectivePerformance, LargeAllreduce) {
  FabricOptions o;
  o.memory_bytes = 48u << 20;
  // The device's receive timeout must not fire before this test's own bound
  // (20 s below): under ThreadSanitizer on 2 cores one call takes about 5 s,
  // the default timeout.
  o.timeout_us = 60'000'000;
  FakeFabric f(4, o);
  f.configure();
  constexpr uint32_t n = 4u << 20;
  constexpr uint64_t kBigSrc = 16u << 20;
  constexpr uint64_t kBigDst = 32u << 20;
  for (uint32_t r = 0; r < 4; ++r) f[r].write(kBigSrc, std::vector<int32_t>(n, static_cast<int32_t>(r + 1)));
  for (bool in_place : {false, true}) {
    const uint64_t dst = in_place ? kBigSrc : kBigDst;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<uint64_t> ids;
    for (uint32_t r = 0; r < 4; ++r) {
      ids.push_back(f[r].submit(CallBuilder(abi::kAllreduce).count(n).addr(0, kBigSrc).addr(2, dst)));
    }
    for (uint32_t r = 0; r < 4; ++r) EXPECT_EQ(f[r].wait(ids[r], std::chrono::seconds(60)), std::optional<uint32_t>(0));
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    std::printf("allreduce 16 MiB x 4 ranks %s: %lld ms\n", in_place ? "in place" : "out of place",
                static_cast<long long>(ms.count()));
    const auto got = f[0].read<int32_t>(dst, n);
    EXPECT_EQ(got.front(), 10);
    EXPECT_EQ(got[n / 2 + 3], 10);
    EXPECT_EQ(got.back(), 10);
    EXPECT_LT(ms.count(), 20000);
  }
}

}  // namespace

}  // namespace accl::fw::test
