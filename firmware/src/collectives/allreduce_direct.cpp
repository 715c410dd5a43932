// SPDX-License-Identifier: Apache-2.0
//
// Direct allreduce for few ranks: a direct reduce-scatter, then the direct
// allgather, with no chain of steps between ranks. The vector is split into
// P equal chunks; rank r owns chunk r.
//   round 0:        every rank sends chunk j of its source to owner j, and
//                   receives the contribution of each peer q to its own
//                   chunk into chunk q of the result, which the allgather
//                   overwrites later anyway (no spare buffer is needed);
//   local rounds:   result chunk r = own source chunk + the first
//                   contribution, then += each further one, block by block
//                   (kCombineBlockBytes): the P-1 combines of one block run
//                   back to back, so the partial sum they read and write
//                   stays in cache instead of streaming the whole chunk
//                   through memory P-1 times;
//   last round:     every rank sends its complete chunk to all others (one
//                   payload for all: fw::Move::shared_payload) and receives
//                   theirs in place.
// Same bytes per rank as the ring, but the ring's reduce-scatter is a chain:
// a rank forwards a partial sum only once it has received and reduced the
// previous one, so with more ranks than cores every step waits for a peer to
// be scheduled. Here every transfer of the reduce-scatter is posted at once.
// Not in place: round 0 would receive into source chunks it still sends.
#include "collective.hpp"

namespace accl::fw::impl {

bool allreduce_direct_fits(const CollArgs& args) {
  return args.P >= 3 && 2 * (args.P - 1) <= kMaxOps && args.count % args.P == 0;
}

namespace {
// Small enough that a block's partial sum and its operands (P + 1 blocks)
// stay in a core's L2 between the combines.
constexpr uint32_t kCombineBlockBytes = 64 * 1024;
}  // namespace

bool plan_allreduce_direct(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t r = args.rank;
  const uint32_t len = args.count / P;
  auto chunk = [&](const Buf& b, uint32_t index) { return buf_at(b, uint64_t{index} * len); };
  const uint32_t block = max_of<uint32_t>(1, kCombineBlockBytes / max_of<uint32_t>(1, args.src.elem_bytes));
  const uint32_t nblocks = max_of<uint32_t>(1, static_cast<uint32_t>(ceil_div(len, block)));
  const uint32_t blocks_per_round = kMaxOps / (P - 1);  // allreduce_direct_fits: P - 1 <= kMaxOps / 2
  const uint32_t local_rounds = static_cast<uint32_t>(ceil_div(nblocks, blocks_per_round));
  if (round == 0) {
    for (uint32_t i = 1; i < P; ++i) {
      const uint32_t from = ring_sub(r, i, P);
      out.recv(from, chunk(args.dst, from), len);
    }
    for (uint32_t i = 1; i < P; ++i) {
      const uint32_t owner = ring_add(r, i, P);
      out.send(owner, chunk(args.src, owner), len);
    }
    return true;
  }
  if (round <= local_rounds) {
    const uint32_t first = (round - 1) * blocks_per_round;
    const uint32_t end = min_of(nblocks, first + blocks_per_round);
    for (uint32_t b = first; b < end; ++b) {
      const uint32_t begin = b * block;
      const uint32_t n = min_of(block, len - begin);
      const Buf own = buf_at(chunk(args.dst, r), begin);
      for (uint32_t k = 1; k < P; ++k) {
        const Buf& sum = k == 1 ? buf_at(chunk(args.src, r), begin) : own;
        out.combine(sum, buf_at(chunk(args.dst, ring_sub(r, k, P)), begin), own, n);
      }
    }
    return true;
  }
  if (round > local_rounds + 1) return false;
  direct_allgather_round(args, 0, out);  // rank q holds chunk q
  return true;
}

}  // namespace accl::fw::impl
