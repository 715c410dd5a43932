// SPDX-License-Identifier: Apache-2.0
//
// Ring reduce-scatter (count = elements per rank, source = P chunks). Step s
// (0..P-2): rank r sends chunk (r - 1 - s) to the next rank (its source
// chunk at s = 0, later the partial sum of the previous step) and receives
// chunk (r - 2 - s), reducing it with its own source chunk. The last step
// receives chunk r and reduces it into the result.
//
// Partial sums need scratch of one chunk: with spare buffers the work is
// done in blocks of one spare buffer (spares 1 and 2 alternate so a step can
// receive while it sends the previous partial). Without spare buffers
// (eager-only mode, where every send completes at once) the result buffer
// holds the partial: each step sends first and then receives.
#include "collective.hpp"

namespace accl::fw::impl {

bool plan_reduce_scatter_ring(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t n = args.count;
  const uint32_t r = args.rank;
  const uint32_t next = ring_add(r, 1, P);
  const uint32_t prev = ring_sub(r, 1, P);
  const uint32_t steps = P - 1;
  const uint32_t block = spare_elems(args);

  if (block == 0) {  // eager-only: send, then receive, per step
    const uint32_t s = round / 2;
    if (s >= steps) return false;
    if (round % 2 == 0) {
      const uint32_t c_out = ring_sub(r, 1 + s, P);
      out.send(next, s == 0 ? buf_at(args.src, uint64_t{c_out} * n) : args.dst, n);
    } else {
      const uint32_t c_in = ring_sub(r, 2 + s, P);
      out.recv_reduce(prev, buf_at(args.src, uint64_t{c_in} * n), args.dst, n);
    }
    return true;
  }

  const uint32_t nblocks = max_of<uint32_t>(1, static_cast<uint32_t>(ceil_div(n, block)));
  auto block_begin = [&](uint32_t k) { return k * block; };
  auto block_len = [&](uint32_t k) { return k * block >= n ? 0 : min_of(block, n - k * block); };
  if (steps == 1 && buf_overlap(args.dst, buf_at(args.src, uint64_t{ring_sub(r, 1, P)} * n), n)) {
    // Two ranks, result over the chunk we send (in place on rank 1): the
    // send and the receive of one block run concurrently, so the reduced
    // block lands in a spare and is copied into place one round later,
    // after its chunk's block has been sent.
    if (round > nblocks) return false;
    if (round < nblocks) {
      const uint32_t begin = block_begin(round);
      out.send(next, buf_at(args.src, uint64_t{ring_sub(r, 1, P)} * n + begin), block_len(round));
      out.recv_reduce(prev, buf_at(args.src, uint64_t{r} * n + begin), args.spare[round % 2], block_len(round));
    }
    if (round > 0) {
      const uint32_t k = round - 1;
      out.copy(args.spare[k % 2], buf_at(args.dst, block_begin(k)), block_len(k));
    }
    return true;
  }
  const uint32_t b = round / steps;
  const uint32_t s = round % steps;
  if (b >= nblocks) return false;
  const uint32_t begin = block_begin(b);
  const uint32_t len = block_len(b);
  const uint32_t c_out = ring_sub(r, 1 + s, P);
  const uint32_t c_in = ring_sub(r, 2 + s, P);
  if (s == 0) {
    out.send(next, buf_at(args.src, uint64_t{c_out} * n + begin), len);
  } else {
    out.send(next, args.spare[(s - 1) % 2], len);
  }
  const Buf into = s + 1 == steps ? buf_at(args.dst, begin) : args.spare[s % 2];
  out.recv_reduce(prev, buf_at(args.src, uint64_t{c_in} * n + begin), into, len);
  return true;
}

}  // namespace accl::fw::impl
