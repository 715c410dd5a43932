// SPDX-License-Identifier: Apache-2.0
//
// Ring allreduce = ring reduce-scatter + ring allgather, without scratch
// buffers. The vector is split into P chunks. Reduce-scatter step s (0..P-2):
// rank r sends chunk (r - s) to the next rank (its source chunk at s = 0,
// afterwards the partial sum it produced in step s-1) and receives chunk
// (r - s - 1) from the previous rank, reducing it with its own source chunk
// straight into that chunk of the result. After P-1 steps rank r holds the
// complete chunk (r + 1). Allgather step s: send chunk (r + 1 - s), receive
// chunk (r - s) into place. Incoming rendezvous chunks land directly in the
// result; in place (source == result) the receive stages pieces through
// spare 3 so the source chunk is read before it is overwritten.
#include "collective.hpp"

namespace accl::fw::impl {

bool plan_allreduce_ring(const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t r = args.rank;
  const uint32_t next = ring_add(r, 1, P);
  const uint32_t prev = ring_sub(r, 1, P);
  const uint32_t steps = P - 1;
  if (round >= 2 * steps) return false;
  if (round < steps) {
    const uint32_t s = round;
    const Chunk out_chunk = split_chunk(args.count, P, ring_sub(r, s, P));
    const Buf& out_from = s == 0 ? args.src : args.dst;
    out.send(next, buf_at(out_from, out_chunk.begin), out_chunk.len);
    const Chunk in_chunk = split_chunk(args.count, P, ring_sub(r, s + 1, P));
    out.recv_reduce(prev, buf_at(args.src, in_chunk.begin), buf_at(args.dst, in_chunk.begin), in_chunk.len);
    return true;
  }
  const uint32_t s = round - steps;
  const Chunk out_chunk = split_chunk(args.count, P, ring_sub(ring_add(r, 1, P), s, P));
  out.send(next, buf_at(args.dst, out_chunk.begin), out_chunk.len);
  const Chunk in_chunk = split_chunk(args.count, P, ring_sub(r, s, P));
  out.recv(prev, buf_at(args.dst, in_chunk.begin), in_chunk.len);
  return true;
}

}  // namespace accl::fw::impl
