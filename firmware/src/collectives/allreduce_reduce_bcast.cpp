// SPDX-License-Identifier: Apache-2.0
//
// Latency-oriented allreduce for small vectors: flat reduce to rank 0 into
// its result (see reduce_flat.cpp), then flat broadcast of that result. Two
// message steps instead of the ring's 2(P-1), at the cost of rank 0 handling
// all traffic, which is fine while the data is small.
#include "collective.hpp"

namespace accl::fw::impl {

bool plan_allreduce_reduce_bcast(const CollArgs& args, uint32_t round, Round& out) {
  constexpr uint32_t kRoot = 0;
  const uint32_t P = args.P;
  const uint32_t n = args.count;
  const bool is_root = args.rank == kRoot;
  // phase 1: reduce to rank 0
  const uint32_t reduce_rounds = is_root ? flat_reduce_at_root_rounds(args) : 1;
  if (round < reduce_rounds) {
    if (!is_root) {
      out.send(kRoot, args.src, n);
      return true;
    }
    CollArgs at_root = args;
    at_root.root = kRoot;
    return plan_flat_reduce_at_root(at_root, round, out);
  }
  // phase 2: broadcast the result
  const uint32_t b = round - reduce_rounds;
  if (!is_root) {
    if (b > 0) return false;
    out.recv(kRoot, args.dst, n);
    return true;
  }
  const uint32_t first = b * kMaxOps + 1;
  if (first >= P) return false;
  const uint32_t last = min_of(P, first + kMaxOps);
  for (uint32_t peer = first; peer < last; ++peer) out.send(peer, args.dst, n);
  return true;
}

}  // namespace accl::fw::impl
