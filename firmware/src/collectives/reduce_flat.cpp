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
// single peer (P = 2), or rendezvous-sized data, the root skips the copy and
// reduces the first peer's contribution with its source into the result,
// which needs no staging.
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
// The first peer's contribution is reduced with the root's source straight
// into the result (no copy of the source first, and no staging through
// spare 3, which an operand overlapping the result needs) when the result
// lies apart from the source and either that peer is the only one or the
// data is rendezvous-sized. The other peers follow in later rounds,
// concurrently; with eager-sized data all peers are drained at once from the
// start instead (see above).
bool first_peer_direct(const CollArgs& args) {
  if (buf_overlap(args.src, args.dst, args.count)) return false;
  const uint64_t bytes = uint64_t{args.count} * args.src.elem_bytes;
  return args.P == 2 || (args.spare_bytes > 0 && bytes > args.max_eager_bytes);
}
}  // namespace

bool plan_flat_reduce_at_root(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t n = args.count;
  const bool direct = first_peer_direct(args);
  if (round == 0) {
    if (direct) {
      out.recv_reduce(ring_add(args.root, 1, args.P), args.src, args.dst, n);
    } else if (!same_memory(args.src, args.dst)) {
      out.copy(args.src, args.dst, n);
    }
    return true;
  }
  const uint32_t peers = args.P - 1;
  const uint32_t first = (direct ? 1 : 0) + (round - 1) * kMaxOps;
  if (first >= peers) return false;
  const uint32_t last = min_of(peers, first + kMaxOps);
  for (uint32_t i = first; i < last; ++i) {
    out.recv_reduce(ring_add(args.root, i + 1, args.P), args.dst, args.dst, n);
  }
  return true;
}

uint32_t flat_reduce_at_root_rounds(const CollArgs& args) {
  const uint32_t remaining = first_peer_direct(args) ? args.P - 2 : args.P - 1;
  return 1 + static_cast<uint32_t>(ceil_div(remaining, kMaxOps));
}

}  // namespace accl::fw::impl
