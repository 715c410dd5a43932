// SPDX-License-Identifier: Apache-2.0
//
// Exchanges of per-peer blocks (neighbourhood collectives, MPI_Alltoallw) as
// device sends and receives on the communicator's ACCL communicator, run by
// the composed collectives' engine (coll_compose.hpp) with each block on its
// own tag (neighbor.hpp) instead of the call's.
//
// * Every block travels as whole 32-bit words (the device's data-movement
//   type): a block that is not contiguous or not a multiple of 4 bytes is
//   packed into staging on the sending side and received into staging and
//   unpacked on completion on the receiving side; the padding of the last
//   word is never copied out. So every datatype signature can be offloaded
//   and all members take the same path whatever their local layouts.
// * Zero-byte blocks move nothing on either side (both sides know the size).
// * Blocks from this rank to itself are copied on the host at the call.
// * All receives are issued before the sends, and the call's device requests
//   are joined by one request (Composed::after_all), so blocking and
//   non-blocking forms wait on one request like the other collectives, and
//   progress on the device alone.
#include "neighbor.hpp"

#include "coll_compose.hpp"
#include "comms.hpp"

#include <stdexcept>
#include <string>

namespace accl::pmpi {

namespace {

// Checks the blocks this rank sends itself and has them copied (copy_own):
// the i-th receive from itself with a tag takes the i-th send to itself with
// that tag, as between peers.
void copy_self_blocks(const Exchange& x, int rank, Composed& c) {
  std::vector<bool> used(x.sends.size(), false);
  for (const Transfer& r : x.recvs) {
    if (r.peer != rank) continue;
    size_t j = 0;
    while (j < x.sends.size() && (used[j] || x.sends[j].peer != rank || x.sends[j].tag != r.tag)) ++j;
    if (j == x.sends.size()) throw std::invalid_argument("a block from this rank to itself has no matching send");
    used[j] = true;
    const Transfer& s = x.sends[j];
    if (s.bytes != r.bytes)
      throw std::invalid_argument("a block from this rank to itself has " + std::to_string(s.bytes) +
                                  " bytes sent and " + std::to_string(r.bytes) + " expected");
    if (x.in_place) continue;  // in place: the block already is where it belongs
    c.copy_own(s.buf, s.count, s.type, r.buf, r.count, r.type, r.bytes);
  }
}

// Issues the device calls of `x` into `c` (mu held).
void issue(const Exchange& x, Composed& c) {
  const int rank = c.cs->rank;
  auto remote = [rank](const Transfer& t) { return t.bytes != 0 && t.peer != MPI_PROC_NULL && t.peer != rank; };

  // Sizes first: nothing may fail once device calls are out.
  for (const Transfer& t : x.sends) Composed::device_words(t.bytes);
  for (const Transfer& t : x.recvs) Composed::device_words(t.bytes);
  // Send sources next: in place, receives may overwrite them.
  std::vector<const void*> sources(x.sends.size(), nullptr);
  for (size_t j = 0; j < x.sends.size(); ++j) {
    const Transfer& t = x.sends[j];
    if (!remote(t)) continue;
    sources[j] = x.in_place ? c.outgoing_copy(t.buf, t.count, t.type, t.bytes)
                            : c.outgoing(t.buf, t.count, t.type, t.bytes);
  }
  copy_self_blocks(x, rank, c);

  for (const Transfer& t : x.recvs)
    if (remote(t)) c.recv_typed(t.buf, t.count, t.type, t.bytes, t.peer, t.tag);
  for (size_t j = 0; j < x.sends.size(); ++j) {
    const Transfer& t = x.sends[j];
    if (remote(t)) c.send_block(sources[j], t.bytes, t.peer, t.tag);
  }
}

}  // namespace

uint64_t Exchange::send_bytes() const {
  uint64_t total = 0;
  for (const Transfer& t : sends)
    if (t.peer != MPI_PROC_NULL) total += t.bytes;
  return total;
}

int exchange_run(Call call, MPI_Comm comm, CommState* cs, const Exchange& x, MPI_Request* req) {
  return composed_run(call, comm, cs, req, [&x](Composed& c) { issue(x, c); });
}

}  // namespace accl::pmpi
