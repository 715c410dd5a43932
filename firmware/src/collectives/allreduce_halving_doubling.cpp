// SPDX-License-Identifier: Apache-2.0
//
// Recursive-halving reduce-scatter + recursive-doubling allgather
// (Rabenseifner) for a power-of-two P and a count divisible by P. The vector
// is cut into P equal blocks; rank r ends the reduce-scatter holding block r.
// Same bytes per rank as the ring (2 (P-1)/P of the vector each way) but
// 2 log2(P) message steps instead of 2 (P-1): on few, oversubscribed cores
// every step is a round of thread hand-offs, which costs more than copying.
//
// Reduce-scatter step k (0 .. L-1, L = log2 P): the rank's current range R_k
// (P >> k blocks, aligned) is split in halves of d = P >> (k+1) blocks; the
// partner r ^ d gets the half it keeps, we keep the other. Step 0 reduces the
// incoming half with our source straight into the result. Later steps hold
// our partial sums in the result, so the partner's partial cannot land on
// them: it lands in the sibling range of R_k (sent away at step k-1, free
// until the allgather fills it) and a local round adds it in. No spare
// buffers are used. In place (source == result) is fine: the source is only
// read at step 0, and only the half that step does not write.
// Allgather step j: level k = L-1-j in reverse, exchange R_{k+1} with the
// partner r ^ (P >> (k+1)), landing in place.
#include "collective.hpp"

namespace accl::fw::impl {

bool allreduce_halving_doubling_fits(uint32_t count, uint32_t P) {
  return P > 2 && is_power_of_two(P) && count % P == 0 && count >= P;
}

bool plan_allreduce_halving_doubling(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t r = args.rank;
  const uint32_t L = log2_ceil(P);
  const uint64_t bs = args.count / P;  // elements per block
  auto at = [&](const Buf& b, uint32_t block) { return buf_at(b, uint64_t{block} * bs); };

  // Reduce-scatter: round 0 is step 0; step k >= 1 takes rounds 2k-1
  // (exchange) and 2k (local add).
  const uint32_t rs_rounds = 2 * L - 1;
  if (round < rs_rounds) {
    const uint32_t k = round == 0 ? 0 : (round + 1) / 2;
    const uint32_t d = P >> (k + 1);
    const uint32_t partner = r ^ d;
    const uint32_t lo = range_start(r, P, k);
    const uint32_t keep = lo + (r & d);
    const uint32_t give = lo + (~r & d);
    const uint32_t n = static_cast<uint32_t>(bs * d);
    if (k == 0) {
      out.send(partner, at(args.src, give), n);
      out.recv_reduce(partner, at(args.src, keep), at(args.dst, keep), n);
      return true;
    }
    const uint32_t scratch = lo ^ (P >> k);  // sibling of R_k: free until the allgather
    if (round % 2 == 1) {
      out.send(partner, at(args.dst, give), n);
      out.recv(partner, at(args.dst, scratch), n);
    } else {
      out.combine(at(args.dst, keep), at(args.dst, scratch), at(args.dst, keep), n);
    }
    return true;
  }
  const uint32_t j = round - rs_rounds;
  if (j >= L) return false;
  const uint32_t k = L - 1 - j;
  const uint32_t d = P >> (k + 1);
  const uint32_t partner = r ^ d;
  const uint32_t mine = range_start(r, P, k + 1);
  const uint32_t n = static_cast<uint32_t>(bs * d);
  out.send(partner, at(args.dst, mine), n);
  out.recv(partner, at(args.dst, mine ^ d), n);
  return true;
}

}  // namespace accl::fw::impl
