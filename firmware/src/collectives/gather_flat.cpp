// SPDX-License-Identifier: Apache-2.0
//
// Flat gather: every non-root sends its chunk to the root, which receives
// chunk i straight into slot i of its result (rendezvous windows land there
// directly). The root copies its own chunk locally. Large chunks limit the
// root's fan-in (receives in flight) to GATHER_FLAT_TREE_MAX_FANIN so the
// root is not flooded; small ones use up to kMaxOps at once.
#include "collective.hpp"

namespace accl::fw::impl {

bool plan_gather_flat(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t n = args.count;
  if (args.rank != args.root) {
    if (round > 0) return false;
    out.send(args.root, args.src, n);
    return true;
  }
  const uint64_t bytes = uint64_t{n} * args.dst.elem_bytes;
  uint32_t fanin = bytes > args.gather_flat_max_bytes ? args.gather_flat_max_fanin : kMaxOps;
  fanin = max_of<uint32_t>(1, min_of<uint32_t>(fanin, kMaxOps - 1));  // one op left for the local copy
  const uint32_t peers = args.P - 1;
  const uint32_t first = round * fanin;
  if (first >= peers) return false;
  if (round == 0) out.copy(args.src, buf_at(args.dst, uint64_t{args.root} * n), n);
  const uint32_t last = min_of(peers, first + fanin);
  for (uint32_t i = first; i < last; ++i) {
    const uint32_t peer = ring_add(args.root, i + 1, args.P);
    out.recv(peer, buf_at(args.dst, uint64_t{peer} * n), n);
  }
  return true;
}

}  // namespace accl::fw::impl
