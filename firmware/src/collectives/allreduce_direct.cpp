// SPDX-License-Identifier: Apache-2.0
//
// Direct allreduce for few ranks: a direct reduce-scatter, then the direct
// allgather, with no chain of steps between ranks. The vector is split into
// P equal chunks; rank r owns chunk r.
//   round 0:        every rank sends chunk j of its source to owner j, and
//                   receives the contribution of each peer q to its own
//                   chunk into chunk q of the result, which the allgather
//                   overwrites later anyway (no spare buffer is needed);
//   rounds 1..P-1:  local: result chunk r = own source chunk + the first
//                   contribution, then += each further one;
//   round P:        every rank sends its complete chunk to all others (one
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

bool plan_allreduce_direct(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t r = args.rank;
  const uint32_t len = args.count / P;
  auto chunk = [&](const Buf& b, uint32_t index) { return buf_at(b, uint64_t{index} * len); };
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
  if (round < P) {
    const Buf& sum = round == 1 ? args.src : args.dst;
    out.combine(chunk(sum, r), chunk(args.dst, ring_sub(r, round, P)), chunk(args.dst, r), len);
    return true;
  }
  if (round > P) return false;
  direct_allgather_round(args, 0, out);  // rank q holds chunk q
  return true;
}

}  // namespace accl::fw::impl
