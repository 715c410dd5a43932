// SPDX-License-Identifier: Apache-2.0
//
// Algorithm selection. Inputs are the same on every rank (count, P, element
// size, tuning registers at 0x1FC4..0x1FD4, spare size, eager threshold), so
// all ranks pick the same algorithm; per-rank properties such as kernel-stream
// flags never influence the choice. The one exception is working in place
// (alltoall, allreduce), which MPI requires on all ranks or none; the
// algorithm is part of the collective's signature, so ranks that still
// differ fail with INVALID_ARGUMENT instead of exchanging mismatched data.
#include "collective.hpp"

namespace accl::fw::impl {

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

// The direct allgather takes blocks of `block_bytes` on P ranks (also the
// allgather half of the allreduce, whose blocks are its chunks).
static bool direct_allgather_pays(uint32_t P, uint64_t block_bytes, uint32_t max_eager_bytes) {
  return P > 2 && P <= kDirectMaxRanks && block_bytes > max_eager_bytes && block_bytes <= kAllgatherDirectMaxBytes &&
         allgather_direct_fits(P);
}

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

uint32_t select_algorithm(const SelectionInput& in, const CollArgs& args) {
  const uint64_t bytes = uint64_t{args.count} * args.spare[0].elem_bytes;  // uncompressed bytes per rank
  switch (in.scenario) {
    case abi::kBcast:
      // Few ranks: the root serving everybody directly is fastest; otherwise a
      // binomial tree needs only log2(P) steps.
      return args.P <= args.bcast_flat_max_ranks ? kAlgoBcastFlat : kAlgoBcastBinomial;
    case abi::kScatter:
      return kAlgoScatterFlat;
    case abi::kGather:
      // Flat; fan-in is limited by the tuning registers inside the plan.
      return kAlgoGatherFlat;
    case abi::kAllgather:
      // Rendezvous-sized, not too large blocks on 3 or 4 ranks: one step, all
      // blocks at once (same bytes as the others; each step costs a hand-off).
      // Two ranks exchange once whatever the algorithm.
      // Otherwise, power-of-two P: recursive doubling (log2 P steps); else
      // the ring.
      if (direct_allgather_pays(args.P, bytes, in.max_eager_bytes)) return kAlgoAllgatherDirect;
      return is_power_of_two(args.P) ? kAlgoAllgatherDoubling : kAlgoAllgatherRing;
    case abi::kReduce:
      // Flat tree for small data, or few ranks and at most one spare buffer
      // of data: one step, the root drains all peers at once. Larger data
      // goes through a pipelined chain (every rank forwards one block at a
      // time through spares 1 and 2), which spreads the reduction work instead
      // of funnelling every byte through the root's spare 3. Without spare
      // buffers (eager only) the chain cannot stage blocks: flat.
      if (bytes <= args.reduce_flat_max_bytes || spare_elems(args) == 0 ||
          (args.P <= args.reduce_flat_max_ranks && bytes <= args.spare_bytes)) {
        return kAlgoReduceFlat;
      }
      return kAlgoReduceChain;
    case abi::kAllreduce: {
      // Tiny vectors (fewer elements than ranks) or small eager-sized data with
      // more than two ranks: reduce to rank 0 + flat broadcast (2 steps of
      // latency instead of 2(P-1)). Otherwise bandwidth-optimal: recursive
      // halving + doubling where it fits (2 log2 P steps) on 8 or more
      // ranks, else the ring; on 3 or 4 ranks with chunks the direct
      // allgather takes, the ring's allgather half is one direct round
      // (its sends share one payload: 4 ranks on 2 cores, best of 6
      // alternating runs, 1 / 4 / 8 MiB: 536 / 2387 / 5183 against
      // 567 / 2822 / 6027 us with the ring's allgather), and from large
      // equal chunks on the reduce-scatter half is one direct round too
      // (not in place: its receives land in the result's other chunks).
      if (args.count < args.P || (args.P > 2 && bytes <= in.max_eager_bytes)) return kAlgoAllreduceReduceBcast;
      if (args.P >= kHalvingDoublingMinRanks && allreduce_halving_doubling_fits(args.count, args.P))
        return kAlgoAllreduceHalvingDoubling;
      const uint64_t chunk_bytes = ceil_div(uint64_t{args.count}, args.P) * args.spare[0].elem_bytes;
      if (direct_allgather_pays(args.P, chunk_bytes, in.max_eager_bytes)) {
        if (chunk_bytes >= kAllreduceDirectMinChunkBytes && !in.in_place && allreduce_direct_fits(args))
          return kAlgoAllreduceDirect;
        return kAlgoAllreduceRingDirect;
      }
      return kAlgoAllreduceRing;
    }
    case abi::kReduceScatter:
      // Few ranks (3 or 4) and rendezvous-sized blocks up to the direct
      // limit that fit spare 1 P-1 times: one step, like the direct
      // allgather. Else recursive halving (log2 P steps) when P is a power of
      // two above 2 and half the source fits a spare buffer; else the ring in
      // blocks (two ranks: one exchange and one reduction either way).
      if (args.P > 2 && args.P <= kDirectMaxRanks && bytes > in.max_eager_bytes &&
          bytes <= kReduceScatterDirectMaxBytes && reduce_scatter_direct_fits(args)) {
        return kAlgoReduceScatterDirect;
      }
      return reduce_scatter_halving_fits(args) ? kAlgoReduceScatterHalving : kAlgoReduceScatterRing;
    case abi::kAlltoall:
      // Pairwise exchange writes each peer's slot directly, which in place
      // would overwrite slots before they are sent: then exchange through the
      // spare buffers (not available in eager-only mode).
      if (!in.in_place) return kAlgoAlltoallPairwise;
      return spare_elems(args) > 0 ? kAlgoAlltoallInPlace : kAlgoNone;
    case abi::kBarrier:
      return kAlgoBarrierDissemination;
    default:
      return kAlgoNone;
  }
}

bool algorithm_uses_spares(uint32_t algorithm) {
  return algorithm == kAlgoReduceChain || algorithm == kAlgoReduceScatterRing ||
         algorithm == kAlgoReduceScatterHalving || algorithm == kAlgoReduceScatterDirect ||
         algorithm == kAlgoAlltoallInPlace;
}

const char* algorithm_name(uint32_t algorithm) {
  switch (algorithm) {
    case kAlgoBcastFlat: return "bcast flat";
    case kAlgoBcastBinomial: return "bcast binomial";
    case kAlgoScatterFlat: return "scatter flat";
    case kAlgoGatherFlat: return "gather flat";
    case kAlgoAllgatherRing: return "allgather ring";
    case kAlgoAllgatherDoubling: return "allgather recursive doubling";
    case kAlgoAllgatherDirect: return "allgather direct";
    case kAlgoReduceFlat: return "reduce flat";
    case kAlgoReduceChain: return "reduce chain";
    case kAlgoAllreduceRing: return "allreduce ring";
    case kAlgoAllreduceRingDirect: return "allreduce ring + direct allgather";
    case kAlgoAllreduceDirect: return "allreduce direct";
    case kAlgoAllreduceReduceBcast: return "allreduce reduce+bcast";
    case kAlgoAllreduceHalvingDoubling: return "allreduce halving-doubling";
    case kAlgoReduceScatterRing: return "reduce_scatter ring";
    case kAlgoReduceScatterHalving: return "reduce_scatter recursive halving";
    case kAlgoReduceScatterDirect: return "reduce_scatter direct";
    case kAlgoAlltoallPairwise: return "alltoall pairwise";
    case kAlgoAlltoallInPlace: return "alltoall in place";
    case kAlgoBarrierDissemination: return "barrier dissemination";
    default: return "none";
  }
}

}  // namespace accl::fw::impl
