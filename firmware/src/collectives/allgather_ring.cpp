// SPDX-License-Identifier: Apache-2.0
//
// Ring allgather: P-1 steps; in step s every rank forwards slot (rank - s) to
// the next rank and receives slot (rank - s - 1) from the previous one,
// straight into its place in the result. Bandwidth-optimal: every rank sends
// and receives (P-1) chunks.
#include "collective.hpp"

namespace accl::fw::impl {

bool plan_allgather_ring(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t n = args.count;
  if (round + 1 >= P) return false;
  const uint32_t r = args.rank;
  const uint32_t next = ring_add(r, 1, P);
  const uint32_t prev = ring_sub(r, 1, P);
  const uint32_t s = round;
  if (s == 0) {
    const Buf own_slot = buf_at(args.dst, uint64_t{r} * n);
    if (!same_memory(args.src, own_slot)) out.copy(args.src, own_slot, n);
    out.send(next, args.src, n);  // our own chunk, read from the source (no dependency on the copy)
  } else {
    out.send(next, buf_at(args.dst, uint64_t{ring_sub(r, s, P)} * n), n);
  }
  out.recv(prev, buf_at(args.dst, uint64_t{ring_sub(r, s + 1, P)} * n), n);
  return true;
}

}  // namespace accl::fw::impl
