// SPDX-License-Identifier: Apache-2.0
//
// In-place alltoall (source == result). Pairwise exchange cannot write the
// incoming slot straight into place: that slot still has to be sent. Instead
// every rank exchanges with its partners in increasing rank order (a
// consistent global order of pairs, so rendezvous handshakes never wait in a
// cycle), one block of one spare buffer at a time: send our slot for partner
// j, receive j's block into a spare, and in the next round copy it over the
// slot that has just been sent. Spares 1 and 2 alternate so the copy of item
// t-1 overlaps the exchange of item t.
#include "collective.hpp"

namespace accl::fw::impl {

bool plan_alltoall_inplace(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t n = args.count;
  const uint32_t r = args.rank;
  const uint32_t block = spare_elems(args);
  if (block == 0) return false;  // selection requires spare buffers
  const uint32_t nblocks = max_of<uint32_t>(1, static_cast<uint32_t>(ceil_div(n, block)));
  const uint32_t items = (P - 1) * nblocks;  // (partner, block) pairs
  if (round > items) return false;

  auto partner = [&](uint32_t item) {
    const uint32_t p = item / nblocks;
    return p < r ? p : p + 1;  // skip ourselves
  };
  auto block_begin = [&](uint32_t item) { return (item % nblocks) * block; };
  auto block_len = [&](uint32_t item) {
    const uint32_t begin = block_begin(item);
    return begin >= n ? 0 : min_of(block, n - begin);
  };
  auto slot = [&](uint32_t item) { return buf_at(args.dst, uint64_t{partner(item)} * n + block_begin(item)); };

  if (round < items) {
    const uint32_t t = round;
    out.send(partner(t), slot(t), block_len(t));
    out.recv(partner(t), args.spare[t % 2], block_len(t));
  }
  if (round > 0) {
    const uint32_t t = round - 1;
    out.copy(args.spare[t % 2], slot(t), block_len(t));
  }
  return true;
}

}  // namespace accl::fw::impl
