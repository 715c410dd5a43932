// SPDX-License-Identifier: Apache-2.0
//
// Pipelined chain (ring) reduce for many ranks and large data. With
// l = (rank - root) mod P the data flows l=1 -> 2 -> ... -> P-1 -> root in
// blocks of one spare buffer: rank l receives block k from l-1 into a spare
// buffer while it forwards block k-1 reduced with its own source to l+1
// (spares 1 and 2 alternate). The root reduces each incoming block into its
// result. Every rank sends the data once: bandwidth-optimal, and the blocks
// pipeline along the chain.
#include "collective.hpp"

namespace accl::fw::impl {

bool plan_reduce_chain(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t n = args.count;
  const uint32_t block = spare_elems(args);
  if (block == 0) return false;  // selection never picks this without spare buffers
  const uint32_t nblocks = max_of<uint32_t>(1, static_cast<uint32_t>(ceil_div(n, block)));
  const uint32_t l = ring_sub(args.rank, args.root, P);
  const uint32_t next = ring_add(args.rank, 1, P);
  const uint32_t prev = ring_sub(args.rank, 1, P);
  auto block_begin = [&](uint32_t k) { return k * block; };
  auto block_len = [&](uint32_t k) { return k * block >= n ? 0 : min_of(block, n - k * block); };

  if (l == 1) {  // start of the chain: plain sends of the source
    if (round >= nblocks) return false;
    out.send(next, buf_at(args.src, block_begin(round)), block_len(round));
    return true;
  }
  if (l == 0) {  // root: reduce each block into the result
    if (round >= nblocks) return false;
    const uint32_t begin = block_begin(round);
    out.recv_reduce(prev, buf_at(args.src, begin), buf_at(args.dst, begin), block_len(round));
    return true;
  }
  // middle of the chain: receive block k, forward block k-1 reduced
  if (round > nblocks) return false;
  if (round < nblocks) out.recv(prev, args.spare[round % 2], block_len(round));
  if (round >= 1) {
    const uint32_t k = round - 1;
    out.send_reduced(next, buf_at(args.src, block_begin(k)), args.spare[k % 2], block_len(k));
  }
  return true;
}

}  // namespace accl::fw::impl
