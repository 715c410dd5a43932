// SPDX-License-Identifier: Apache-2.0
//
// Pairwise-exchange alltoall: in exchange i (1..P-1) rank r sends its slot for
// rank r+i and receives rank r-i's slot straight into place. Several exchanges
// run per round (each peer sends to us exactly once, so they cannot be
// confused); the own slot is a local copy.
#include "collective.hpp"

namespace accl::fw::impl {

bool plan_alltoall_pairwise(const CollArgs& args, uint32_t round, Round& out) {
  constexpr uint32_t kExchangesPerRound = (kMaxOps - 1) / 2;
  const uint32_t P = args.P;
  const uint32_t n = args.count;
  const uint32_t r = args.rank;
  const uint32_t first = round * kExchangesPerRound + 1;
  if (first >= P) return false;
  if (round == 0) out.copy(buf_at(args.src, uint64_t{r} * n), buf_at(args.dst, uint64_t{r} * n), n);
  const uint32_t last = min_of(P, first + kExchangesPerRound);
  for (uint32_t i = first; i < last; ++i) {
    const uint32_t to = ring_add(r, i, P);
    const uint32_t from = ring_sub(r, i, P);
    out.send(to, buf_at(args.src, uint64_t{to} * n), n);
    out.recv(from, buf_at(args.dst, uint64_t{from} * n), n);
  }
  return true;
}

}  // namespace accl::fw::impl
