// SPDX-License-Identifier: Apache-2.0
//
// Flat scatter: the root copies its own chunk locally and sends chunk i of
// its source to rank i (up to kMaxOps in flight per round); every other rank
// receives its chunk once.
#include "collective.hpp"

namespace accl::fw::impl {

bool plan_scatter_flat(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t n = args.count;
  if (args.rank != args.root) {
    if (round > 0) return false;
    out.recv(args.root, args.dst, n);
    return true;
  }
  // One op per round is left for the local copy of round 0.
  constexpr uint32_t kSendsPerRound = kMaxOps - 1;
  const uint32_t peers = args.P - 1;
  const uint32_t first = round * kSendsPerRound;
  if (first >= peers) return false;
  if (round == 0) out.copy(buf_at(args.src, uint64_t{args.root} * n), args.dst, n);
  const uint32_t last = min_of<uint32_t>(peers, first + kSendsPerRound);
  for (uint32_t i = first; i < last; ++i) {
    const uint32_t peer = ring_add(args.root, i + 1, args.P);
    out.send(peer, buf_at(args.src, uint64_t{peer} * n), n);
  }
  return true;
}

}  // namespace accl::fw::impl
