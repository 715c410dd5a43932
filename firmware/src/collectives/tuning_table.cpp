// SPDX-License-Identifier: Apache-2.0
//
// The default tuning table: which algorithm each collective uses for which
// communicator and message sizes (see tuning.hpp for how rules are read).
// The inputs are the same on every rank (count, P, element size, tuning
// registers at 0x1FC4..0x1FD4, spare size, eager threshold), so all ranks
// pick the same algorithm; per-rank properties such as kernel-stream flags
// never influence the choice. Whether an algorithm can run the call at all
// (power-of-two P, equal blocks, room in the spares, in place) is the
// algorithm's business: select.cpp asks it before taking a rule.
#include "collective.hpp"

namespace accl::fw::impl {
namespace {

// Direct allgather / reduce_scatter up to this many ranks: P-1 concurrent
// streams per rank pay off while the ranks roughly fit the cores.
constexpr uint32_t kDirectMaxRanks = 4;
// ... and up to these bytes per block. Allgather, 4 ranks on 2 cores,
// alternating runs on 2026-11-27, direct against recursive doubling: 1 MiB
// blocks about 1245 against 1400 us (medians of 8), 2 MiB 2651 against
// 2789 us (best of 5, direct ahead in every pair), 4 MiB no better (6132
// against 5905 us); 3 ranks, 1 MiB: direct 630 us, ring 727 us. Before the
// shared-memory rings held 1 MiB + 64 KiB, a 1 MiB block made its sender wait
// for room and direct lost there. The direct reduce_scatter stages every
// incoming block through spare 1 and adds them up in local rounds, so it
// stops earlier: with 1 MiB blocks it lost (498 against 443 us).
constexpr uint64_t kAllgatherDirectMaxBytes = uint64_t{2} << 20;
constexpr uint64_t kReduceScatterDirectMaxBytes = uint64_t{512} << 10;

// The direct allreduce (direct reduce-scatter + direct allgather) from
// chunks of this size on; below, the ring's reduce-scatter, whose steps
// reduce on landing, moves less. 4 ranks on 2 cores, alternating runs with
// -c on 2026-11-27, ring + direct allgather against direct (us): 1 MiB
// (256 KiB chunks) 701 against 796, 2 MiB 1433 against 1401, 4 MiB 2929
// against 2569, 8 MiB 5797 against 5561 (best of 4-5).
constexpr uint64_t kAllreduceDirectMinChunkBytes = uint64_t{512} << 10;

// Allreduce by recursive halving + doubling from this many ranks on. Below,
// the ring moves fewer bytes: each of its reduce-scatter steps reduces on
// landing, where halving-doubling's later steps land a partial and add it in
// a local round. With 4 ranks that outweighs the ring's 2 extra steps (4 ranks
// on 2 cores, 1-4 MiB: 15-25 % faster); with 8 the 8 extra steps cost more
// than the bytes save.
constexpr uint32_t kHalvingDoublingMinRanks = 8;

// Three or four ranks, where the direct algorithms pay.
constexpr TuningRule direct_ranks(uint32_t scenario, uint32_t algorithm) {
  return use(scenario, algorithm).ranks(3, constant(kDirectMaxRanks)).only(Protocol::kRendezvous);
}

constexpr TuningRule kDefaultRules[] = {
    // Few ranks: the root serving everybody directly is fastest; otherwise a
    // binomial tree needs only log2(P) steps.
    use(abi::kBcast, kAlgoBcastFlat).ranks(0, from(LimitSource::kBcastFlatMaxRanks)),
    use(abi::kBcast, kAlgoBcastBinomial),

    use(abi::kScatter, kAlgoScatterFlat),
    // Flat; fan-in is limited by the tuning registers inside the plan.
    use(abi::kGather, kAlgoGatherFlat),

    // Rendezvous-sized, not too large blocks on 3 or 4 ranks: one step, all
    // blocks at once (same bytes as the others; each step costs a hand-off).
    // Two ranks exchange once whatever the algorithm. Otherwise recursive
    // doubling (log2 P steps) where P is a power of two; else the ring.
    direct_ranks(abi::kAllgather, kAlgoAllgatherDirect)
        .sizes(SizeMeasure::kMessageBytes, 0, constant(kAllgatherDirectMaxBytes)),
    use(abi::kAllgather, kAlgoAllgatherDoubling),
    use(abi::kAllgather, kAlgoAllgatherRing),

    // Flat tree for small data, or few ranks and at most one spare buffer of
    // data: one step, the root drains all peers at once. Larger data goes
    // through a pipelined chain (every rank forwards one block at a time
    // through spares 1 and 2), which spreads the reduction work instead of
    // funnelling every byte through the root's spare 3. Without spare
    // buffers (eager only) the chain cannot stage blocks: flat.
    use(abi::kReduce, kAlgoReduceFlat).sizes(SizeMeasure::kMessageBytes, 0, from(LimitSource::kReduceFlatMaxBytes)),
    use(abi::kReduce, kAlgoReduceFlat)
        .ranks(0, from(LimitSource::kReduceFlatMaxRanks))
        .sizes(SizeMeasure::kMessageBytes, 0, from(LimitSource::kSpareBytes)),
    use(abi::kReduce, kAlgoReduceChain),
    use(abi::kReduce, kAlgoReduceFlat),

    // Tiny vectors (fewer elements than ranks) or small eager-sized data with
    // more than two ranks: reduce to rank 0 + flat broadcast (2 steps of
    // latency instead of 2(P-1)). Otherwise bandwidth-optimal: recursive
    // halving + doubling where it fits (2 log2 P steps) on 8 or more ranks,
    // else the ring; on 3 or 4 ranks with chunks the direct allgather takes,
    // the ring's allgather half is one direct round (its sends share one
    // payload: 4 ranks on 2 cores, best of 6 alternating runs, 1 / 4 / 8 MiB:
    // 536 / 2387 / 5183 against 567 / 2822 / 6027 us with the ring's
    // allgather), and from large equal chunks on the reduce-scatter half is
    // one direct round too (not in place: its receives land in the result's
    // other chunks).
    use(abi::kAllreduce, kAlgoAllreduceReduceBcast).sizes(SizeMeasure::kElementsPerRank, 0, constant(0)),
    use(abi::kAllreduce, kAlgoAllreduceReduceBcast).ranks(3, kUnlimited).only(Protocol::kEager),
    use(abi::kAllreduce, kAlgoAllreduceHalvingDoubling).ranks(kHalvingDoublingMinRanks, kUnlimited),
    direct_ranks(abi::kAllreduce, kAlgoAllreduceDirect)
        .sizes(SizeMeasure::kChunkBytes, kAllreduceDirectMinChunkBytes, constant(kAllgatherDirectMaxBytes)),
    direct_ranks(abi::kAllreduce, kAlgoAllreduceRingDirect)
        .sizes(SizeMeasure::kChunkBytes, 0, constant(kAllgatherDirectMaxBytes)),
    use(abi::kAllreduce, kAlgoAllreduceRing),

    // Few ranks (3 or 4) and rendezvous-sized blocks up to the direct limit
    // that fit spare 1 P-1 times: one step, like the direct allgather. Else
    // recursive halving (log2 P steps) when P is a power of two above 2 and
    // half the source fits a spare buffer; else the ring in blocks (two
    // ranks: one exchange and one reduction either way).
    direct_ranks(abi::kReduceScatter, kAlgoReduceScatterDirect)
        .sizes(SizeMeasure::kMessageBytes, 0, constant(kReduceScatterDirectMaxBytes)),
    use(abi::kReduceScatter, kAlgoReduceScatterHalving),
    use(abi::kReduceScatter, kAlgoReduceScatterRing),

    // Pairwise exchange writes each peer's slot directly, which in place
    // would overwrite slots before they are sent: then exchange through the
    // spare buffers (not available in eager-only mode: no algorithm).
    use(abi::kAlltoall, kAlgoAlltoallPairwise),
    use(abi::kAlltoall, kAlgoAlltoallInPlace),

    use(abi::kBarrier, kAlgoBarrierDissemination),
};

}  // namespace

TuningTable default_tuning_table() {
  return TuningTable{kDefaultRules, sizeof(kDefaultRules) / sizeof(kDefaultRules[0])};
}

}  // namespace accl::fw::impl
