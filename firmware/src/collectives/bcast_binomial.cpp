// SPDX-License-Identifier: Apache-2.0
//
// Binomial-tree broadcast. With l = (rank - root) mod P, rank l receives from
// l - m, where m is the lowest set bit of l, then sends to l + m' for every
// m' < m (largest subtree first, all in one round). log2(P) steps of latency.
#include "collective.hpp"

namespace accl::fw::impl {
namespace {

// The bit through which relative rank l receives (a power of two >= P for the root).
uint32_t receive_mask(uint32_t l, uint32_t P) {
  uint32_t mask = 1;
  while (mask < P && (l & mask) == 0) mask <<= 1;
  return mask;
}

}  // namespace

bool plan_bcast_binomial(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t l = ring_sub(args.rank, args.root, P);
  const uint32_t mask = receive_mask(l, P);
  const bool is_root = l == 0;
  if (!is_root && round == 0) {
    out.recv(ring_add(l - mask, args.root, P), args.dst, args.count);
    return true;
  }
  const uint32_t send_round = is_root ? 0 : 1;
  if (round != send_round) return false;
  const Buf& data = is_root ? args.src : args.dst;
  for (uint32_t m = mask >> 1; m > 0; m >>= 1) {
    if (l + m < P) out.send(ring_add(l + m, args.root, P), data, args.count);
  }
  return out.size() > 0;
}

}  // namespace accl::fw::impl
