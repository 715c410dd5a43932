// SPDX-License-Identifier: Apache-2.0
//
// Recursive-halving reduce-scatter for a power-of-two P > 2 whose half vector
// fits a spare buffer (count = elements per rank, source = P blocks). Step k
// (0..L-1, L = log2 P): the rank's range R_k (P >> k blocks, aligned) splits
// in halves of d = P >> (k+1) blocks; it sends the half partner r ^ d keeps
// and receives the partner's partial of the half it keeps, reduced with its
// own partial of that half. Partials of step k land in spare (k mod 2),
// packed from the range's first block; the last step lands in the result.
// log2(P) message steps instead of the ring's P-1, same bytes per rank.
// Operand and result of every receive are distinct buffers (source or one
// spare -> the other spare or the result), so nothing is staged; in place,
// the result (inside the source) is written only in the last step, when the
// source is no longer read (P > 2).
#include "collective.hpp"

namespace accl::fw::impl {

bool reduce_scatter_halving_fits(const CollArgs& args) {
  const uint32_t P = args.P;
  if (P <= 2 || !is_power_of_two(P) || spare_elems(args) == 0) return false;
  return uint64_t{args.count} * (P / 2) <= spare_elems(args);
}

bool plan_reduce_scatter_halving(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t r = args.rank;
  const uint64_t n = args.count;
  const uint32_t L = log2_ceil(P);
  const uint32_t k = round;
  if (k >= L) return false;
  const uint32_t d = P >> (k + 1);
  const uint32_t partner = r ^ d;
  const uint32_t lo = range_start(r, P, k);  // first block of R_k
  const uint32_t keep = lo + (r & d);
  const uint32_t give = lo + (~r & d);
  // Block b of R_k: in the source at step 0, else packed in the previous spare.
  auto from = [&](uint32_t b) {
    return k == 0 ? buf_at(args.src, uint64_t{b} * n) : buf_at(args.spare[(k - 1) % 2], uint64_t{b - lo} * n);
  };
  const Buf into = k + 1 == L ? args.dst : args.spare[k % 2];
  const uint32_t len = static_cast<uint32_t>(d * n);
  out.send(partner, from(give), len);
  out.recv_reduce(partner, from(keep), into, len);
  return true;
}

}  // namespace accl::fw::impl
