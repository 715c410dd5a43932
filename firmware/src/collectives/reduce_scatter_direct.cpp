// SPDX-License-Identifier: Apache-2.0
//
// Direct reduce-scatter for few ranks (count = elements per rank, source = P
// blocks): in one round every rank sends block j to its owner j and receives
// its own block from each of the P-1 others into spare 1 (packed, in peer
// order r-1, r-2, ...); then local rounds add them up: result = own source
// block + first, then result += each further one. Same bytes per rank as the
// ring and recursive halving, but one message step instead of P-1 or
// log2 P (see allgather_direct.cpp). All sends end in the first round, so
// in place the result may overwrite any source block afterwards. Needs
// (P-1) blocks in spare 1 and 2(P-1) ops in one round.
#include "collective.hpp"

namespace accl::fw::impl {

bool reduce_scatter_direct_fits(const CollArgs& args) {
  const uint32_t P = args.P;
  return P >= 2 && 2 * (P - 1) <= kMaxOps && spare_elems(args) > 0 &&
         uint64_t{args.count} * (P - 1) <= spare_elems(args);
}

bool plan_reduce_scatter_direct(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t r = args.rank;
  const uint64_t n = args.count;
  const uint32_t len = args.count;
  auto incoming = [&](uint32_t i) { return buf_at(args.spare[0], uint64_t{i - 1} * n); };  // from r - i
  if (round == 0) {
    for (uint32_t i = 1; i < P; ++i) out.recv(ring_sub(r, i, P), incoming(i), len);
    for (uint32_t i = 1; i < P; ++i) {
      const uint32_t owner = ring_add(r, i, P);
      out.send(owner, buf_at(args.src, uint64_t{owner} * n), len);
    }
    return true;
  }
  if (round >= P) return false;
  if (round == 1) {
    out.combine(buf_at(args.src, uint64_t{r} * n), incoming(1), args.dst, len);
  } else {
    out.combine(args.dst, incoming(round), args.dst, len);
  }
  return true;
}

}  // namespace accl::fw::impl
