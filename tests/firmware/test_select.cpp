// SPDX-License-Identifier: Apache-2.0
//
// Pins the collective algorithm the firmware selects for each (collective,
// communicator size, message size, in place or not, protocol settings,
// tuning registers). The expectations were written by hand from the rules of
// the if-chain in select.cpp before it became a tuning table, at and around
// every boundary of those rules (eager threshold, direct limits of 512 KiB
// and 2 MiB, spare-buffer fits, divisibility, count < P, the tuning
// registers), and checked against that chain: the table must pick exactly
// the same algorithm.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "collectives/collective.hpp"

namespace accl::fw::impl {
namespace {

constexpr uint32_t kElemBytes = 4;  // float32: element counts below are 4 bytes each

// Settings of the device at the time of the call.
struct Settings {
  const char* name;
  uint32_t max_eager_bytes;
  uint32_t spare_bytes;  // max rendezvous size; 0 = eager only
  uint32_t bcast_flat_max_ranks;
  uint32_t reduce_flat_max_ranks;
  uint32_t reduce_flat_max_bytes;
};

// The driver's defaults: eager up to 1 KiB, 32 KiB spares, registers as
// engine.cpp derives them when the driver leaves them 0.
constexpr Settings kDefault{"default", 1024, 32 * 1024, 3, 4, 8192};
// Eager only (no spare buffers): the register default follows spare_bytes / 4.
constexpr Settings kEagerOnly{"eager only", 1024, 0, 3, 4, 0};
// Larger protocol settings and a raised flat-broadcast register.
constexpr Settings kLarge{"large", 64 * 1024, 4 * 1024 * 1024, 8, 4, 32768};
// An eager threshold above the 512 KiB direct-allreduce chunk.
constexpr Settings kHugeEager{"huge eager", 1024 * 1024, 4 * 1024 * 1024, 3, 4, 32768};

struct SelectCase {
  const Settings* settings;
  uint32_t scenario;
  uint32_t P;
  uint32_t count;
  bool in_place;
  uint32_t expected;
};

uint32_t select(const SelectCase& c) {
  CollArgs args{};
  args.P = c.P;
  args.count = c.count;
  args.spare[0].elem_bytes = kElemBytes;
  args.spare_bytes = c.settings->spare_bytes;
  args.max_eager_bytes = c.settings->max_eager_bytes;
  args.bcast_flat_max_ranks = c.settings->bcast_flat_max_ranks;
  args.reduce_flat_max_ranks = c.settings->reduce_flat_max_ranks;
  args.reduce_flat_max_bytes = c.settings->reduce_flat_max_bytes;
  SelectionInput in{};
  in.scenario = c.scenario;
  in.max_eager_bytes = c.settings->max_eager_bytes;
  in.in_place = c.in_place;
  return select_algorithm(in, args);
}

std::string describe(const SelectCase& c) {
  return std::string(c.settings->name) + ", scenario " + std::to_string(c.scenario) + ", P " + std::to_string(c.P) +
         ", count " + std::to_string(c.count) + (c.in_place ? ", in place" : "");
}

void expect_all(std::initializer_list<SelectCase> cases) {
  for (const SelectCase& c : cases) {
    EXPECT_STREQ(algorithm_name(select(c)), algorithm_name(c.expected)) << describe(c);
  }
}

constexpr uint32_t kKiB = 1024 / kElemBytes;  // elements per KiB
constexpr uint32_t kMiB = 1024 * kKiB;

TEST(AlgorithmSelection, BcastScatterGatherBarrier) {
  expect_all({
      // Flat up to the register's rank count, binomial above.
      {&kDefault, abi::kBcast, 2, 1000, false, kAlgoBcastFlat},
      {&kDefault, abi::kBcast, 3, 1000, false, kAlgoBcastFlat},
      {&kDefault, abi::kBcast, 4, 1000, false, kAlgoBcastBinomial},
      {&kDefault, abi::kBcast, 8, 1, false, kAlgoBcastBinomial},
      {&kLarge, abi::kBcast, 8, 1000, false, kAlgoBcastFlat},
      {&kLarge, abi::kBcast, 9, 1000, false, kAlgoBcastBinomial},
      {&kDefault, abi::kBcast, 16, 0, true, kAlgoBcastBinomial},
      {&kDefault, abi::kScatter, 2, 1, false, kAlgoScatterFlat},
      {&kEagerOnly, abi::kScatter, 16, 4 * kMiB, true, kAlgoScatterFlat},
      {&kDefault, abi::kGather, 3, 1000, false, kAlgoGatherFlat},
      {&kLarge, abi::kGather, 16, 4 * kMiB, true, kAlgoGatherFlat},
      {&kDefault, abi::kBarrier, 2, 0, false, kAlgoBarrierDissemination},
      {&kEagerOnly, abi::kBarrier, 7, 0, false, kAlgoBarrierDissemination},
  });
}

TEST(AlgorithmSelection, Allgather) {
  expect_all({
      // Two ranks: recursive doubling whatever the size.
      {&kDefault, abi::kAllgather, 2, 1, false, kAlgoAllgatherDoubling},
      {&kDefault, abi::kAllgather, 2, 100000, false, kAlgoAllgatherDoubling},
      // 3 and 4 ranks: direct for blocks above the eager threshold up to 2 MiB.
      {&kDefault, abi::kAllgather, 3, 256, false, kAlgoAllgatherRing},
      {&kDefault, abi::kAllgather, 3, 257, false, kAlgoAllgatherDirect},
      {&kDefault, abi::kAllgather, 3, 2 * kMiB, false, kAlgoAllgatherDirect},
      {&kDefault, abi::kAllgather, 3, 2 * kMiB + 1, false, kAlgoAllgatherRing},
      {&kDefault, abi::kAllgather, 4, 256, false, kAlgoAllgatherDoubling},
      {&kDefault, abi::kAllgather, 4, 257, true, kAlgoAllgatherDirect},
      {&kDefault, abi::kAllgather, 4, 2 * kMiB, false, kAlgoAllgatherDirect},
      {&kDefault, abi::kAllgather, 4, 2 * kMiB + 1, false, kAlgoAllgatherDoubling},
      {&kEagerOnly, abi::kAllgather, 3, 257, false, kAlgoAllgatherDirect},
      {&kHugeEager, abi::kAllgather, 4, kMiB, false, kAlgoAllgatherDoubling},
      {&kHugeEager, abi::kAllgather, 4, kMiB + 1, false, kAlgoAllgatherDirect},
      {&kHugeEager, abi::kAllgather, 3, kMiB + 1, false, kAlgoAllgatherDirect},
      // More ranks: doubling for powers of two, else the ring.
      {&kDefault, abi::kAllgather, 5, 1000, false, kAlgoAllgatherRing},
      {&kDefault, abi::kAllgather, 6, 257, false, kAlgoAllgatherRing},
      {&kDefault, abi::kAllgather, 8, 1000, false, kAlgoAllgatherDoubling},
      {&kDefault, abi::kAllgather, 16, 1, false, kAlgoAllgatherDoubling},
      {&kLarge, abi::kAllgather, 12, 4 * kMiB, false, kAlgoAllgatherRing},
  });
}

TEST(AlgorithmSelection, Reduce) {
  expect_all({
      // Default registers: flat up to 8 KiB, then up to a spare (32 KiB) on
      // at most 4 ranks; the chain beyond.
      {&kDefault, abi::kReduce, 8, 0, false, kAlgoReduceFlat},
      {&kDefault, abi::kReduce, 8, 8 * kKiB, false, kAlgoReduceFlat},
      {&kDefault, abi::kReduce, 8, 8 * kKiB + 1, false, kAlgoReduceChain},
      {&kDefault, abi::kReduce, 2, 8 * kKiB + 1, false, kAlgoReduceFlat},
      {&kDefault, abi::kReduce, 4, 32 * kKiB, false, kAlgoReduceFlat},
      {&kDefault, abi::kReduce, 4, 32 * kKiB + 1, false, kAlgoReduceChain},
      {&kDefault, abi::kReduce, 2, 32 * kKiB + 1, true, kAlgoReduceChain},
      {&kDefault, abi::kReduce, 5, 32 * kKiB, false, kAlgoReduceChain},
      {&kDefault, abi::kReduce, 5, 8 * kKiB, false, kAlgoReduceFlat},
      // No spares: the chain cannot stage, always flat.
      {&kEagerOnly, abi::kReduce, 8, 0, false, kAlgoReduceFlat},
      {&kEagerOnly, abi::kReduce, 8, 4 * kMiB, false, kAlgoReduceFlat},
      // 4 MiB spares, 32 KiB register.
      {&kLarge, abi::kReduce, 4, 4 * kMiB, false, kAlgoReduceFlat},
      {&kLarge, abi::kReduce, 4, 4 * kMiB + 1, false, kAlgoReduceChain},
      {&kLarge, abi::kReduce, 5, 32 * kKiB, false, kAlgoReduceFlat},
      {&kLarge, abi::kReduce, 5, 32 * kKiB + 1, false, kAlgoReduceChain},
  });
}

TEST(AlgorithmSelection, Allreduce) {
  expect_all({
      // Fewer elements than ranks: reduce + broadcast.
      {&kDefault, abi::kAllreduce, 2, 1, false, kAlgoAllreduceReduceBcast},
      {&kDefault, abi::kAllreduce, 2, 2, false, kAlgoAllreduceRing},
      {&kLarge, abi::kAllreduce, 8, 7, false, kAlgoAllreduceReduceBcast},
      // Eager-sized data on more than two ranks: reduce + broadcast.
      {&kDefault, abi::kAllreduce, 2, 100, false, kAlgoAllreduceRing},
      {&kDefault, abi::kAllreduce, 3, 256, false, kAlgoAllreduceReduceBcast},
      {&kDefault, abi::kAllreduce, 8, 8, false, kAlgoAllreduceReduceBcast},
      {&kDefault, abi::kAllreduce, 8, 256, true, kAlgoAllreduceReduceBcast},
      {&kHugeEager, abi::kAllreduce, 4, kMiB, false, kAlgoAllreduceReduceBcast},
      // 3 and 4 ranks: the ring until chunks are rendezvous-sized, then its
      // allgather half direct; direct throughout from 512 KiB equal chunks
      // (not in place), up to 2 MiB chunks.
      {&kDefault, abi::kAllreduce, 3, 257, false, kAlgoAllreduceRing},
      {&kDefault, abi::kAllreduce, 3, 768, false, kAlgoAllreduceRing},
      {&kDefault, abi::kAllreduce, 3, 769, false, kAlgoAllreduceRingDirect},
      {&kDefault, abi::kAllreduce, 4, 1024, false, kAlgoAllreduceRing},
      {&kDefault, abi::kAllreduce, 4, 1025, false, kAlgoAllreduceRingDirect},
      {&kDefault, abi::kAllreduce, 4, 4 * 512 * kKiB - 4, false, kAlgoAllreduceRingDirect},
      {&kDefault, abi::kAllreduce, 4, 4 * 512 * kKiB - 1, false, kAlgoAllreduceRingDirect},
      {&kDefault, abi::kAllreduce, 4, 4 * 512 * kKiB, false, kAlgoAllreduceDirect},
      {&kDefault, abi::kAllreduce, 4, 4 * 512 * kKiB, true, kAlgoAllreduceRingDirect},
      {&kDefault, abi::kAllreduce, 3, 3 * 512 * kKiB, false, kAlgoAllreduceDirect},
      {&kDefault, abi::kAllreduce, 3, 3 * 512 * kKiB + 1, false, kAlgoAllreduceRingDirect},
      {&kDefault, abi::kAllreduce, 4, 4 * 2 * kMiB, false, kAlgoAllreduceDirect},
      {&kDefault, abi::kAllreduce, 4, 4 * 2 * kMiB + 1, false, kAlgoAllreduceRing},
      {&kEagerOnly, abi::kAllreduce, 4, 4 * 512 * kKiB, false, kAlgoAllreduceDirect},
      {&kHugeEager, abi::kAllreduce, 4, 4 * kMiB, false, kAlgoAllreduceRing},
      {&kHugeEager, abi::kAllreduce, 4, 4 * kMiB + 4, false, kAlgoAllreduceDirect},
      {&kHugeEager, abi::kAllreduce, 4, 4 * kMiB + 4, true, kAlgoAllreduceRingDirect},
      // 8 ranks and more: halving + doubling for powers of two and equal
      // blocks, else the ring.
      {&kDefault, abi::kAllreduce, 8, 1024, false, kAlgoAllreduceHalvingDoubling},
      {&kDefault, abi::kAllreduce, 8, 1025, false, kAlgoAllreduceRing},
      {&kDefault, abi::kAllreduce, 16, 4096, true, kAlgoAllreduceHalvingDoubling},
      {&kLarge, abi::kAllreduce, 8, 16 * kMiB, false, kAlgoAllreduceHalvingDoubling},
      {&kDefault, abi::kAllreduce, 5, 5 * 512 * kKiB, false, kAlgoAllreduceRing},
      {&kDefault, abi::kAllreduce, 6, 6000, false, kAlgoAllreduceRing},
      {&kDefault, abi::kAllreduce, 12, 12000, false, kAlgoAllreduceRing},
  });
}

TEST(AlgorithmSelection, ReduceScatter) {
  expect_all({
      // Default: 32 KiB spares hold 8192 elements.
      {&kDefault, abi::kReduceScatter, 2, 1000, false, kAlgoReduceScatterRing},
      {&kDefault, abi::kReduceScatter, 3, 256, false, kAlgoReduceScatterRing},
      {&kDefault, abi::kReduceScatter, 3, 257, false, kAlgoReduceScatterDirect},
      {&kDefault, abi::kReduceScatter, 3, 4096, false, kAlgoReduceScatterDirect},
      {&kDefault, abi::kReduceScatter, 3, 4097, false, kAlgoReduceScatterRing},
      {&kDefault, abi::kReduceScatter, 4, 256, false, kAlgoReduceScatterHalving},
      {&kDefault, abi::kReduceScatter, 4, 257, true, kAlgoReduceScatterDirect},
      {&kDefault, abi::kReduceScatter, 4, 2730, false, kAlgoReduceScatterDirect},
      {&kDefault, abi::kReduceScatter, 4, 2731, false, kAlgoReduceScatterHalving},
      {&kDefault, abi::kReduceScatter, 4, 4096, false, kAlgoReduceScatterHalving},
      {&kDefault, abi::kReduceScatter, 4, 4097, false, kAlgoReduceScatterRing},
      {&kDefault, abi::kReduceScatter, 8, 2048, false, kAlgoReduceScatterHalving},
      {&kDefault, abi::kReduceScatter, 8, 2049, false, kAlgoReduceScatterRing},
      {&kDefault, abi::kReduceScatter, 5, 300, false, kAlgoReduceScatterRing},
      // 4 MiB spares: the direct limit of 512 KiB blocks decides.
      {&kLarge, abi::kReduceScatter, 4, 64 * kKiB, false, kAlgoReduceScatterHalving},
      {&kLarge, abi::kReduceScatter, 4, 64 * kKiB + 1, false, kAlgoReduceScatterDirect},
      {&kLarge, abi::kReduceScatter, 4, 512 * kKiB, false, kAlgoReduceScatterDirect},
      {&kLarge, abi::kReduceScatter, 4, 512 * kKiB + 1, false, kAlgoReduceScatterHalving},
      {&kLarge, abi::kReduceScatter, 3, 512 * kKiB + 1, false, kAlgoReduceScatterRing},
      // No spares: the ring.
      {&kEagerOnly, abi::kReduceScatter, 4, 1000, false, kAlgoReduceScatterRing},
      {&kEagerOnly, abi::kReduceScatter, 8, 1, false, kAlgoReduceScatterRing},
  });
}

TEST(AlgorithmSelection, Alltoall) {
  expect_all({
      {&kDefault, abi::kAlltoall, 3, 10, false, kAlgoAlltoallPairwise},
      {&kEagerOnly, abi::kAlltoall, 8, 10, false, kAlgoAlltoallPairwise},
      {&kDefault, abi::kAlltoall, 3, 10, true, kAlgoAlltoallInPlace},
      {&kLarge, abi::kAlltoall, 16, kMiB, true, kAlgoAlltoallInPlace},
      // In place without spares: no algorithm.
      {&kEagerOnly, abi::kAlltoall, 4, 10, true, kAlgoNone},
  });
}

TEST(AlgorithmSelection, UnknownScenarioHasNoAlgorithm) {
  expect_all({
      {&kDefault, abi::kSend, 2, 10, false, kAlgoNone},
      {&kDefault, abi::kCopy, 4, 10, false, kAlgoNone},
  });
}

}  // namespace
}  // namespace accl::fw::impl
