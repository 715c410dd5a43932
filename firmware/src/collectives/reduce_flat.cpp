// SPDX-License-Identifier: Apache-2.0
//
// Flat-tree reduce: every non-root sends its source to the root. The root
// first copies its source into the result, then reduces all contributions
// into it *concurrently* (result = result (+) incoming, in whatever order
// segments arrive; the reduce functions are commutative). Draining every
// peer at once matters: with one peer at a time, eager segments of the other
// peers could fill the arrival table and starve the peer being served.
// Eager contributions are reduced straight out of the RX buffers; rendezvous
// ones are staged through spare 3 (the result is also the operand). With a
// single peer (P = 2) the root skips the copy and reduces the contribution
// with its source into the result, which needs no staging.
#include "collective.hpp"

namespace accl::fw::impl {

bool plan_reduce_flat(const CollArgs& args, uint32_t round, Round& out) {
  if (args.rank != args.root) {
    if (round > 0) return false;
    out.send(args.root, args.src, args.count);
    return true;
  }
  return plan_flat_reduce_at_root(args, round, out);
}

namespace {
// One peer and a result apart from the source: the contribution is reduced
// with the source straight into the result (no copy first, and no staging
// through spare 3, which an operand overlapping the result needs).
bool single_peer_direct(const CollArgs& args) {
  return args.P == 2 && !buf_overlap(args.src, args.dst, args.count);
}
}  // namespace

bool plan_flat_reduce_at_root(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t n = args.count;
  if (single_peer_direct(args)) {
    if (round > 0) return false;
    out.recv_reduce(ring_add(args.root, 1, args.P), args.src, args.dst, n);
    return true;
  }
  if (round == 0) {
    if (!same_memory(args.src, args.dst)) out.copy(args.src, args.dst, n);
    return true;
  }
  const uint32_t peers = args.P - 1;
  const uint32_t first = (round - 1) * kMaxOps;
  if (first >= peers) return false;
  const uint32_t last = min_of(peers, first + kMaxOps);
  for (uint32_t i = first; i < last; ++i) {
    out.recv_reduce(ring_add(args.root, i + 1, args.P), args.dst, args.dst, n);
  }
  return true;
}

uint32_t flat_reduce_at_root_rounds(const CollArgs& args) {
  if (single_peer_direct(args)) return 1;
  return 1 + static_cast<uint32_t>(ceil_div(args.P - 1, kMaxOps));
}

}  // namespace accl::fw::impl
