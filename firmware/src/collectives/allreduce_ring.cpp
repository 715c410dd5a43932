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
//
// Variant with a direct allgather (few ranks): after the same reduce-scatter,
// one round in which every rank sends its complete chunk to all others and
// receives theirs. The P-1 sends carry the same bytes, so the data plane may
// copy them out once (fw::Move::shared_payload); the ring forwards each chunk
// with a copy per step instead.
#include "collective.hpp"

namespace accl::fw::impl {

namespace {

bool plan_ring_reduce_scatter_and(bool direct_allgather, const CollArgs& args, uint32_t round, Round& out) {
  const uint32_t P = args.P;
  const uint32_t r = args.rank;
  const uint32_t next = ring_add(r, 1, P);
  const uint32_t prev = ring_sub(r, 1, P);
  const uint32_t steps = P - 1;
  if (round >= (direct_allgather ? steps + 1 : 2 * steps)) return false;
  if (round < steps) {
    const uint32_t s = round;
    const Chunk out_chunk = split_chunk(args.count, P, ring_sub(r, s, P));
    const Buf& out_from = s == 0 ? args.src : args.dst;
    out.send(next, buf_at(out_from, out_chunk.begin), out_chunk.len);
    const Chunk in_chunk = split_chunk(args.count, P, ring_sub(r, s + 1, P));
    out.recv_reduce(prev, buf_at(args.src, in_chunk.begin), buf_at(args.dst, in_chunk.begin), in_chunk.len);
    return true;
  }
  if (direct_allgather) {
    direct_allgather_round(args, 1, out);  // rank q ends the reduce-scatter holding chunk q + 1
    return true;
  }
  const uint32_t s = round - steps;
  const Chunk out_chunk = split_chunk(args.count, P, ring_sub(ring_add(r, 1, P), s, P));
  out.send(next, buf_at(args.dst, out_chunk.begin), out_chunk.len);
  const Chunk in_chunk = split_chunk(args.count, P, ring_sub(r, s, P));
  out.recv(prev, buf_at(args.dst, in_chunk.begin), in_chunk.len);
  return true;
}

}  // namespace

void direct_allgather_round(const CollArgs& args, uint32_t shift, Round& out) {
  const uint32_t P = args.P;
  const uint32_t r = args.rank;
  for (uint32_t i = 1; i < P; ++i) {
    const uint32_t from = ring_sub(r, i, P);
    const Chunk c = split_chunk(args.count, P, ring_add(from, shift, P));
    out.recv(from, buf_at(args.dst, c.begin), c.len);
  }
  const Chunk own = split_chunk(args.count, P, ring_add(r, shift, P));
  for (uint32_t i = 1; i < P; ++i) out.send(ring_add(r, i, P), buf_at(args.dst, own.begin), own.len);
}

bool plan_allreduce_ring(const CollArgs& args, uint32_t round, Round& out) {
  return plan_ring_reduce_scatter_and(false, args, round, out);
}

bool plan_allreduce_ring_direct(const CollArgs& args, uint32_t round, Round& out) {
  return plan_ring_reduce_scatter_and(true, args, round, out);
}

}  // namespace accl::fw::impl
