// SPDX-License-Identifier: Apache-2.0
//
// Reductions the device has no collective for, composed from device calls
// (coll_compose.hpp):
//   MPI_Scan / MPI_Exscan: a chain along the ranks. Rank r receives the
//   prefix of ranks 0..r-1 from r-1, combines it with its own input on the
//   device and sends the result on to r+1; every step waits on the device for
//   the one before it, so the host only issues the calls. P-1 hops of one
//   message each: the latency grows with the communicator, the bytes moved do
//   not.
//   MPI_Reduce_scatter with unequal counts: an allreduce of the whole vector
//   into staging, then this rank's part copied out.
// Reductions need the same datatype and op on every rank (MPI), so these
// decisions, like those of the other reductions, are rank-uniform.
#include "coll_compose.hpp"
#include "collectives.hpp"
#include "state.hpp"
#include "types.hpp"

#include <climits>
#include <cstring>

namespace accl::pmpi {

namespace {

struct ScanArgs {
  Reason why = Reason::Offloaded;
  CommState* cs = nullptr;
  int rank = 0;
  int size = 0;
  ReductionType rt;
  uint64_t n = 0;  // device elements of the whole vector
  uint64_t bytes = 0;
};

// `count` items of `type` per rank, reduced with `op`; `total_count` (>=
// count) is the vector the device reduces (reduce_scatter: all blocks).
ScanArgs check_scan(Call call, int count, int64_t total_count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  ScanArgs a;
  a.why = composed_pre(comm, &a.cs, &a.rank, &a.size);
  if (a.why == Reason::Offloaded && (count < 0 || type == MPI_DATATYPE_NULL || op == MPI_OP_NULL))
    a.why = Reason::BadArgs;
  if (a.why == Reason::Offloaded) a.bytes = bytes_of(1, type) * static_cast<uint64_t>(total_count);
  if (a.why == Reason::Offloaded && total_count == 0) a.why = Reason::Count0;
  if (a.why == Reason::Offloaded) {
    a.rt = reduction_type(type_info(type), op);
    a.why = a.rt.reason;
    // A padded pair type goes to the device packed; the chain here works on
    // the user's buffers as they are.
    if (a.why == Reason::Offloaded && a.rt.packed) a.why = Reason::NonContiguous;
  }
  if (a.why == Reason::Offloaded) {
    a.n = static_cast<uint64_t>(total_count) * a.rt.elems_per_item;
    if (a.n > UINT_MAX || a.bytes > static_cast<uint64_t>(INT_MAX)) a.why = Reason::TooLarge;
  }
  a.why = composed_finish(a.why, call, comm, true, a.bytes, &a.cs);
  return a;
}

// The input of an in-place call, copied: the receive buffer is overwritten
// while the input may still be needed.
const void* input(Composed& c, const void* sbuf, const void* rbuf, uint64_t bytes) {
  if (sbuf != MPI_IN_PLACE) return sbuf;
  void* copy = c.stage(bytes);
  std::memcpy(copy, rbuf, bytes);
  return copy;
}

}  // namespace

int coll_scan(Call call, const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
              MPI_Request* req, bool exclusive) {
  CallScope scope(call);
  const ScanArgs a = check_scan(call, count, count, type, op, comm);
  if (!offload(scope, a.why, a.bytes, comm)) {
    if (exclusive)
      return req ? PMPI_Iexscan(sbuf, rbuf, count, type, op, comm, req)
                 : PMPI_Exscan(sbuf, rbuf, count, type, op, comm);
    return req ? PMPI_Iscan(sbuf, rbuf, count, type, op, comm, req) : PMPI_Scan(sbuf, rbuf, count, type, op, comm);
  }
  return composed_run(call, comm, a.cs, req, [&](Composed& c) {
    ACCL& accl = *state().accl;
    const unsigned n = static_cast<unsigned>(a.n);
    const dataType dt = a.rt.dtype;
    const communicatorId id = a.cs->id;
    const bool last = a.rank == a.size - 1;
    BaseBuffer& own = c.wrap(input(c, sbuf, rbuf, a.bytes), a.n, dt);
    if (a.rank == 0) {
      c.calls.push_back(accl.send(own, n, 1, c.tag, id, false, dataType::none, true));
      // Scan: rank 0's result is its input (copied once the send is out).
      // Exscan: its result is undefined.
      if (!exclusive && sbuf != MPI_IN_PLACE) c.copy_own(sbuf, count, type, rbuf, count, type, a.bytes);
      return;
    }
    // Rank 0 never hands its receive buffer to the device (Exscan leaves it undefined).
    BaseBuffer& result = c.wrap(rbuf, a.n, dt);
    if (!exclusive) {
      BaseBuffer& prefix = c.wrap(c.stage(a.bytes), a.n, dt);
      RequestPtr got = accl.recv(prefix, n, static_cast<unsigned>(a.rank - 1), c.tag, id, false, dataType::none, true);
      RequestPtr sum = accl.combine(n, a.rt.func, prefix, own, result, false, false, false, true, {got});
      c.calls.push_back(got);
      c.calls.push_back(sum);
      if (!last)
        c.calls.push_back(
            accl.send(result, n, static_cast<unsigned>(a.rank + 1), c.tag, id, false, dataType::none, true, {sum}));
      return;
    }
    // Exscan: the prefix of ranks 0..r-1 is this rank's result.
    RequestPtr got = accl.recv(result, n, static_cast<unsigned>(a.rank - 1), c.tag, id, false, dataType::none, true);
    c.calls.push_back(got);
    if (last) return;
    BaseBuffer& onward = c.wrap(c.stage(a.bytes), a.n, dt);
    RequestPtr sum = accl.combine(n, a.rt.func, result, own, onward, false, false, false, true, {got});
    c.calls.push_back(sum);
    c.calls.push_back(
        accl.send(onward, n, static_cast<unsigned>(a.rank + 1), c.tag, id, false, dataType::none, true, {sum}));
  });
}

int coll_reduce_scatter_v(Call call, const void* sbuf, void* rbuf, const int* rcounts, MPI_Datatype type, MPI_Op op,
                          MPI_Comm comm, MPI_Request* req) {
  CallScope scope(call);
  int size = 0;
  if (comm != MPI_COMM_NULL) PMPI_Comm_size(comm, &size);
  int64_t total = 0, before = 0;
  int rank = 0;
  if (comm != MPI_COMM_NULL) PMPI_Comm_rank(comm, &rank);
  bool valid = rcounts != nullptr;
  for (int i = 0; valid && i < size; ++i) {
    if (rcounts[i] < 0) valid = false;
    if (i < rank) before += rcounts[i];
    total += rcounts[i];
  }
  ScanArgs a = check_scan(call, valid ? rcounts[rank] : -1, total, type, op, comm);
  if (!offload(scope, a.why, a.bytes, comm))
    return req ? PMPI_Ireduce_scatter(sbuf, rbuf, rcounts, type, op, comm, req)
               : PMPI_Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm);
  return composed_run(call, comm, a.cs, req, [&](Composed& c) {
    // In place the whole input is in rbuf; the result goes to its start.
    const void* src = sbuf == MPI_IN_PLACE ? rbuf : sbuf;
    void* whole = c.stage(a.bytes);
    BaseBuffer& in = c.wrap(src, a.n, a.rt.dtype);
    BaseBuffer& out = c.wrap(whole, a.n, a.rt.dtype);
    c.calls.push_back(state().accl->allreduce(in, out, static_cast<unsigned>(a.n), a.rt.func, a.cs->id, false, false,
                                              dataType::none, true));
    const uint64_t item = bytes_of(1, type);
    const uint64_t mine = item * static_cast<uint64_t>(rcounts[rank]);
    if (mine > 0)
      c.posts.push_back(PostCopy{PostCopy::memcpy_, rbuf, static_cast<char*>(whole) + item * before, mine, 0,
                                 MPI_DATATYPE_NULL, nullptr});
  });
}

}  // namespace accl::pmpi

// ---------------------------------------------------------------------------
// C entry points (MPI_Reduce_scatter is collectives_reduce.cpp's: equal
// counts run the device's reduce_scatter, unequal ones coll_reduce_scatter_v).
// ---------------------------------------------------------------------------
using namespace accl::pmpi;

ACCL_PMPI_EXPORT int MPI_Scan(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Scan(sbuf, rbuf, count, type, op, comm);
  return coll_scan(Call::Scan, sbuf, rbuf, count, type, op, comm, nullptr, false);
}
ACCL_PMPI_EXPORT int MPI_Iscan(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                               MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Iscan(sbuf, rbuf, count, type, op, comm, req));
  return coll_scan(Call::Iscan, sbuf, rbuf, count, type, op, comm, req, false);
}
ACCL_PMPI_EXPORT int MPI_Exscan(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op,
                                MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Exscan(sbuf, rbuf, count, type, op, comm);
  return coll_scan(Call::Exscan, sbuf, rbuf, count, type, op, comm, nullptr, true);
}
ACCL_PMPI_EXPORT int MPI_Iexscan(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op,
                                 MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Iexscan(sbuf, rbuf, count, type, op, comm, req));
  return coll_scan(Call::Iexscan, sbuf, rbuf, count, type, op, comm, req, true);
}
