// SPDX-License-Identifier: Apache-2.0
//
// Collective algorithms are written as *round plans*: plan(args, round, out)
// describes the peer operations of round `round` (sends, receives, local
// moves) and returns false when the algorithm has no round `round`. The
// engine (engine.cpp) runs the ops of a round concurrently, waits until all
// are done, and asks for the next round. Each plan computes its round from
// the round index alone (O(1) or O(log P)), so resuming never replays steps.
//
// Rules for plans:
//  * ops of one round run concurrently: a local move must not depend on a
//    receive of the same round, and two receives from one peer in one round
//    are matched in the order they are added;
//  * every rank must derive the same message sizes (both sides compute them
//    from count, P and the tuning registers);
//  * receives name a specific peer: with FIFO matching per source that keeps
//    consecutive collectives on one communicator apart.
#pragma once

#include "../firmware.hpp"
#include "tuning.hpp"

namespace accl::fw::impl {

class Round {
 public:
  Round(CallSlot& call, uint32_t tag) : call_(call), tag_(tag) {}

  bool full() const { return call_.nops >= kMaxOps; }
  uint32_t size() const { return call_.nops; }

  void send(uint32_t peer, const Buf& from, uint32_t count);
  // Sends a (+) b (the call's reduce function), computed on the fly.
  void send_reduced(uint32_t peer, const Buf& a, const Buf& b, uint32_t count);
  void recv(uint32_t peer, const Buf& into, uint32_t count);
  // into = x (+) incoming. x and into may be the same buffer.
  void recv_reduce(uint32_t peer, const Buf& x, const Buf& into, uint32_t count);
  void copy(const Buf& from, const Buf& to, uint32_t count);
  void combine(const Buf& a, const Buf& b, const Buf& to, uint32_t count);

 private:
  bool reserve();
  PeerOp& add(OpKind kind, uint32_t count);
  CallSlot& call_;
  uint32_t tag_;
};

enum Algorithm : uint32_t {
  kAlgoNone = 0,
  kAlgoBcastFlat,
  kAlgoBcastBinomial,
  kAlgoScatterFlat,
  kAlgoGatherFlat,
  kAlgoAllgatherRing,
  kAlgoAllgatherDoubling,
  kAlgoReduceFlat,
  kAlgoReduceChain,
  kAlgoAllreduceRing,
  kAlgoAllreduceReduceBcast,
  kAlgoAllreduceHalvingDoubling,
  kAlgoReduceScatterRing,
  kAlgoReduceScatterHalving,
  kAlgoAlltoallPairwise,
  kAlgoAlltoallInPlace,
  kAlgoBarrierDissemination,
  kAlgoAllgatherDirect,
  kAlgoReduceScatterDirect,
  kAlgoAllreduceRingDirect,
  kAlgoAllreduceDirect,
};

// Inputs of algorithm selection; identical on every rank of a collective.
struct SelectionInput {
  uint32_t scenario;
  uint32_t max_eager_bytes;
  bool in_place;  // source and result overlap (MPI_IN_PLACE)
};

// The first rule of `table` that holds for the call and whose algorithm
// fits it; kAlgoNone if there is none. The second form uses the defaults.
uint32_t select_algorithm(const TuningTable& table, const SelectionInput& in, const CollArgs& args);
uint32_t select_algorithm(const SelectionInput& in, const CollArgs& args);
const char* algorithm_name(uint32_t algorithm);
// True if the algorithm uses spare buffers 1 and 2 itself (then kernel-stream
// operands, which are staged there, cannot be used with it).
bool algorithm_uses_spares(uint32_t algorithm);

bool plan_bcast_flat(const CollArgs& args, uint32_t round, Round& out);
bool plan_bcast_binomial(const CollArgs& args, uint32_t round, Round& out);
bool plan_scatter_flat(const CollArgs& args, uint32_t round, Round& out);
bool plan_gather_flat(const CollArgs& args, uint32_t round, Round& out);
bool plan_allgather_ring(const CollArgs& args, uint32_t round, Round& out);
bool plan_allgather_doubling(const CollArgs& args, uint32_t round, Round& out);
bool plan_allgather_direct(const CollArgs& args, uint32_t round, Round& out);
// Every send and receive of the direct allgather fit in one round.
bool allgather_direct_fits(uint32_t P);
bool plan_reduce_flat(const CollArgs& args, uint32_t round, Round& out);
// The root's part of the flat reduce (shared with allreduce reduce+bcast):
// flat_reduce_at_root_rounds() rounds, the result ends in args.dst.
bool plan_flat_reduce_at_root(const CollArgs& args, uint32_t round, Round& out);
uint32_t flat_reduce_at_root_rounds(const CollArgs& args);
bool plan_reduce_chain(const CollArgs& args, uint32_t round, Round& out);
bool plan_allreduce_ring(const CollArgs& args, uint32_t round, Round& out);
// The ring's reduce-scatter, then a direct allgather of the chunks.
bool plan_allreduce_ring_direct(const CollArgs& args, uint32_t round, Round& out);
// One direct allgather round over the P chunks of args.dst (split_chunk),
// where rank q holds chunk (q + shift) % P: every other rank's chunk is
// received in place, ours is sent to all (one payload for all those sends).
void direct_allgather_round(const CollArgs& args, uint32_t shift, Round& out);
// Direct reduce-scatter + direct allgather (few ranks).
bool plan_allreduce_direct(const CollArgs& args, uint32_t round, Round& out);
// P equal chunks, 3 ranks or more, and all transfers of a round fit one round.
bool allreduce_direct_fits(const CollArgs& args);
bool plan_allreduce_reduce_bcast(const CollArgs& args, uint32_t round, Round& out);
bool plan_allreduce_halving_doubling(const CollArgs& args, uint32_t round, Round& out);
// Power-of-two P > 2 and a count of equal blocks (count % P == 0).
bool allreduce_halving_doubling_fits(uint32_t count, uint32_t P);
bool plan_reduce_scatter_ring(const CollArgs& args, uint32_t round, Round& out);
bool plan_reduce_scatter_halving(const CollArgs& args, uint32_t round, Round& out);
// Power-of-two P > 2 and half of the source fits a spare buffer.
bool reduce_scatter_halving_fits(const CollArgs& args);
bool plan_reduce_scatter_direct(const CollArgs& args, uint32_t round, Round& out);
// P-1 blocks fit spare 1 and all transfers fit one round.
bool reduce_scatter_direct_fits(const CollArgs& args);
bool plan_alltoall_pairwise(const CollArgs& args, uint32_t round, Round& out);
bool plan_alltoall_inplace(const CollArgs& args, uint32_t round, Round& out);
bool plan_barrier_dissemination(const CollArgs& args, uint32_t round, Round& out);

// ---------------------------------------------------------------------------
// small helpers for plans
// ---------------------------------------------------------------------------
// (a - b) mod P for ranks / chunk indices in [0, P).
constexpr uint32_t ring_sub(uint32_t a, uint32_t b, uint32_t P) { return (a + P - (b % P)) % P; }
constexpr uint32_t ring_add(uint32_t a, uint32_t b, uint32_t P) { return (a + b) % P; }

// Elements [begin, begin+len) of chunk `index` when `total` elements are split
// into P chunks of ceil(total / P) (the last ones may be short or empty).
struct Chunk {
  uint32_t begin;
  uint32_t len;
};
constexpr Chunk split_chunk(uint32_t total, uint32_t P, uint32_t index) {
  const uint32_t bulk = static_cast<uint32_t>(ceil_div(total, P));
  const uint64_t begin = uint64_t{bulk} * index;
  if (begin >= total) return Chunk{total, 0};
  return Chunk{static_cast<uint32_t>(begin), min_of<uint32_t>(bulk, total - static_cast<uint32_t>(begin))};
}

// Same memory range start (used to skip copies onto themselves).
inline bool same_memory(const Buf& x, const Buf& y) {
  return !x.stream && !y.stream && !x.none && !y.none && x.addr == y.addr && x.host == y.host &&
         x.compressed == y.compressed;
}

// Rank arithmetic of the recursive halving / doubling algorithms.
inline bool is_power_of_two(uint32_t P) { return (P & (P - 1)) == 0; }  // P >= 1 here
// log2(P) for a power of two P (the smallest L with 2^L >= P otherwise).
inline uint32_t log2_ceil(uint32_t P) {
  uint32_t L = 0;
  while ((1u << L) < P) ++L;
  return L;
}
// First block of rank r's range at level k: P >> k blocks, aligned.
inline uint32_t range_start(uint32_t r, uint32_t P, uint32_t k) { return r & ~((P >> k) - 1); }

// Spare buffers hold this many uncompressed elements (0: no scratch).
inline uint32_t spare_elems(const CollArgs& args) {
  return args.spare[0].elem_bytes == 0 ? 0 : args.spare_bytes / args.spare[0].elem_bytes;
}

}  // namespace accl::fw::impl
