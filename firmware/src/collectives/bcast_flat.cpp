// SPDX-License-Identifier: Apache-2.0
//
// Flat-tree broadcast: the root sends the whole buffer to every other rank,
// up to kMaxOps transfers in flight per round; non-roots receive once.
// Best for few ranks (one step of latency).
#include "collective.hpp"

namespace accl::fw::impl {

bool plan_bcast_flat(const CollArgs& args, uint32_t round, Round& out) {
  if (args.rank != args.root) {
    if (round > 0) return false;
    out.recv(args.root, args.dst, args.count);
    return true;
  }
  const uint32_t peers = args.P - 1;
  const uint32_t first = round * kMaxOps;
  if (first >= peers) return false;
  const uint32_t last = min_of(peers, first + kMaxOps);
  for (uint32_t i = first; i < last; ++i) out.send(ring_add(args.root, i + 1, args.P), args.src, args.count);
  return true;
}

}  // namespace accl::fw::impl
