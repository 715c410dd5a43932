// SPDX-License-Identifier: Apache-2.0
//
// Algorithm selection: walks a tuning table (tuning.hpp; the defaults and
// the measurements behind them are in tuning_table.cpp) and asks each
// candidate algorithm whether it can run the call. The choice may depend on
// working in place (alltoall, allreduce), which MPI requires on all ranks or
// none; the algorithm is part of the collective's signature, so ranks that
// still differ fail with INVALID_ARGUMENT instead of exchanging mismatched
// data.
#include "collective.hpp"

namespace accl::fw::impl {
namespace {

uint64_t limit_value(const Limit& limit, const CollArgs& args) {
  switch (limit.source) {
    case LimitSource::kConstant: return limit.value;
    case LimitSource::kSpareBytes: return args.spare_bytes;
    case LimitSource::kBcastFlatMaxRanks: return args.bcast_flat_max_ranks;
    case LimitSource::kReduceFlatMaxRanks: return args.reduce_flat_max_ranks;
    case LimitSource::kReduceFlatMaxBytes: return args.reduce_flat_max_bytes;
  }
  return 0;
}

uint64_t measured_size(SizeMeasure measure, const CollArgs& args) {
  const uint32_t elem_bytes = args.spare[0].elem_bytes;  // uncompressed
  switch (measure) {
    case SizeMeasure::kMessageBytes: return uint64_t{args.count} * elem_bytes;
    case SizeMeasure::kChunkBytes: return ceil_div(uint64_t{args.count}, args.P) * elem_bytes;
    case SizeMeasure::kElementsPerRank: return args.count / args.P;
  }
  return 0;
}

bool rule_holds(const TuningRule& rule, const SelectionInput& in, const CollArgs& args) {
  if (rule.scenario != in.scenario) return false;
  if (args.P < rule.min_ranks || args.P > limit_value(rule.max_ranks, args)) return false;
  const uint64_t size = measured_size(rule.measure, args);
  if (size < rule.min_size || size > limit_value(rule.max_size, args)) return false;
  switch (rule.protocol) {
    case Protocol::kAny: return true;
    case Protocol::kEager: return size <= in.max_eager_bytes;
    case Protocol::kRendezvous: return size > in.max_eager_bytes;
  }
  return false;
}

// Whether the algorithm can run this call at all, whatever the table says.
bool algorithm_fits(uint32_t algorithm, const SelectionInput& in, const CollArgs& args) {
  switch (algorithm) {
    case kAlgoAllgatherDirect:
    case kAlgoAllreduceRingDirect:
      return allgather_direct_fits(args.P);
    case kAlgoAllgatherDoubling:
      return is_power_of_two(args.P);
    case kAlgoReduceChain:
    case kAlgoAlltoallInPlace:
      return spare_elems(args) > 0;  // staged through the spare buffers
    case kAlgoAllreduceHalvingDoubling:
      return allreduce_halving_doubling_fits(args.count, args.P);
    case kAlgoAllreduceDirect:
      // Its receives land in the result's other chunks: never in place.
      return allgather_direct_fits(args.P) && !in.in_place && allreduce_direct_fits(args);
    case kAlgoReduceScatterDirect:
      return reduce_scatter_direct_fits(args);
    case kAlgoReduceScatterHalving:
      return reduce_scatter_halving_fits(args);
    case kAlgoAlltoallPairwise:
      // Writes each peer's slot directly, which in place would overwrite
      // slots before they are sent.
      return !in.in_place;
    default:
      return true;
  }
}

}  // namespace

uint32_t select_algorithm(const TuningTable& table, const SelectionInput& in, const CollArgs& args) {
  for (uint32_t i = 0; i < table.count; ++i) {
    const TuningRule& rule = table.rules[i];
    if (rule_holds(rule, in, args) && algorithm_fits(rule.algorithm, in, args)) return rule.algorithm;
  }
  return kAlgoNone;
}

uint32_t select_algorithm(const SelectionInput& in, const CollArgs& args) {
  return select_algorithm(default_tuning_table(), in, args);
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
