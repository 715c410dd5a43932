// SPDX-License-Identifier: Apache-2.0
//
// Dissemination barrier: in round k every rank sends a zero-byte message to
// rank + 2^k and waits for one from rank - 2^k. After ceil(log2 P) rounds
// every rank has (transitively) heard from every other rank.
#include "collective.hpp"

namespace accl::fw::impl {

bool plan_barrier_dissemination(const CollArgs& args, uint32_t round, Round& out) {
  if (round >= 31) return false;
  const uint32_t distance = 1u << round;
  if (distance >= args.P) return false;
  out.send(ring_add(args.rank, distance, args.P), no_buf(), 0);
  out.recv(ring_sub(args.rank, distance, args.P), no_buf(), 0);
  return true;
}

}  // namespace accl::fw::impl
