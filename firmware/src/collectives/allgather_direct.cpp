// SPDX-License-Identifier: Apache-2.0
//
// Direct allgather for few ranks: in one round every rank sends its block to
// each of the P-1 others and receives theirs straight into their slots of the
// result (pre-granted, so all transfers start at once). Same bytes per rank
// as the ring and recursive doubling, but a single message step: with
// rendezvous-sized blocks on few cores the steps (a hand-off to the peer and
// back per step) cost more than the concurrency of P-1 streams. Sends go to
// r+1, r+2, ... in that order so no two ranks start with the same receiver.
// 2(P-1)+1 ops must fit in one round (P <= 8).
#include "collective.hpp"

namespace accl::fw::impl {

bool allgather_direct_fits(uint32_t P) { return 2 * (P - 1) + 1 <= kMaxOps; }

bool plan_allgather_direct(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t n = args.count;
  const uint32_t r = args.rank;
  if (round > 0) return false;
  for (uint32_t i = 1; i < P; ++i) out.recv(ring_sub(r, i, P), buf_at(args.dst, uint64_t{ring_sub(r, i, P)} * n), n);
  for (uint32_t i = 1; i < P; ++i) out.send(ring_add(r, i, P), args.src, n);
  const Buf own_slot = buf_at(args.dst, uint64_t{r} * n);
  if (!same_memory(args.src, own_slot)) out.copy(args.src, own_slot, n);
  return true;
}

}  // namespace accl::fw::impl
