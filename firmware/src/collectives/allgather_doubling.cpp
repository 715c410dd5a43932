// SPDX-License-Identifier: Apache-2.0
//
// Recursive-doubling allgather for a power-of-two P: in step k (0..log2 P - 1)
// rank r exchanges the 2^k slots it holds (aligned at a multiple of 2^k) with
// rank r ^ 2^k, landing in place. Same bytes per rank as the ring, but
// log2(P) message steps instead of P-1 (see allreduce_halving_doubling.cpp
// for why steps are what costs on few cores). Step 0 sends the own slot from
// the source, concurrently with its copy into the result.
#include "collective.hpp"

namespace accl::fw::impl {

bool plan_allgather_doubling(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t n = args.count;
  const uint32_t r = args.rank;
  const uint32_t d = 1u << round;
  if (round >= 32 || d >= P) return false;
  const uint32_t partner = r ^ d;
  const uint32_t mine = r & ~(d - 1);
  if (round == 0) {
    const Buf own_slot = buf_at(args.dst, uint64_t{r} * n);
    if (!same_memory(args.src, own_slot)) out.copy(args.src, own_slot, n);
    out.send(partner, args.src, n);
  } else {
    out.send(partner, buf_at(args.dst, uint64_t{mine} * n), d * n);
  }
  out.recv(partner, buf_at(args.dst, uint64_t{mine ^ d} * n), d * n);
  return true;
}

}  // namespace accl::fw::impl
