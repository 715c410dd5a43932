// SPDX-License-Identifier: Apache-2.0
//
// The direct reductions (coll_direct.hpp): MPI_Reduce, MPI_Allreduce,
// MPI_Reduce_scatter_block and MPI_Reduce_scatter with equal counts, and
// their MPI_I* forms. Reductions need the same datatype on every rank (MPI
// rule), so a non-contiguous reduction type falls back on all of them.
#include "buffer_checks.hpp"
#include "coll_direct.hpp"
#include "decision_memo.hpp"
#include "stats.hpp"

#include <climits>

namespace accl::pmpi {

namespace {

struct ReduceArgs {
  Reason why = Reason::Offloaded;
  CommState* cs = nullptr;
  ReductionType rt;
  uint64_t n = 0;  // device elements (per rank block for reduce_scatter)
  uint64_t bytes = 0;
};

ReduceArgs check_reduction(Call call, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, int blocks) {
  ReduceArgs a;
  a.bytes = bytes_of(count, type) * static_cast<uint64_t>(blocks);
  a.why = direct_pre(comm, &a.cs);
  if (a.why == Reason::Offloaded && count == 0) a.why = Reason::Count0;
  if (a.why == Reason::Offloaded) {
    a.rt = reduction_type(type_info(type), op);
    a.why = a.rt.reason;
  }
  if (a.why == Reason::Offloaded) {
    a.n = static_cast<uint64_t>(count) * a.rt.elems_per_item;
    if (a.n * static_cast<uint64_t>(blocks) > UINT_MAX || a.bytes > static_cast<uint64_t>(INT_MAX))
      a.why = Reason::TooLarge;
  }
  if (a.why == Reason::Offloaded)
    a.why = direct_finish(call, a.bytes, a.bytes / static_cast<uint64_t>(blocks), comm, &a.cs);
  return a;
}

// The buffers of a reduction as the device sees them: the user's own, or,
// for a type the device takes packed (ReductionType::packed), packed into
// staging and unpacked at completion. In-place inputs are staged either way
// so that the device reads and writes distinct buffers.
const void* reduce_operand(Held& h, const ReduceArgs& a, const void* buf, int count, MPI_Datatype type,
                           uint64_t bytes) {
  return a.rt.packed ? pack_to_stage(h, buf, count, type, bytes) : buf;
}
const void* reduce_input(Held& h, const ReduceArgs& a, const void* buf, int count, MPI_Datatype type,
                         uint64_t bytes) {
  return a.rt.packed ? pack_to_stage(h, buf, count, type, bytes) : stage_copy(h, buf, bytes);
}
void* reduce_result(Held& h, PostCopy& post, const ReduceArgs& a, void* buf, int count, MPI_Datatype type,
                    uint64_t bytes) {
  if (!a.rt.packed) return buf;
  void* s = h.stage(bytes);
  post = unpack_step(buf, s, bytes, count, type);
  return s;
}

}  // namespace

int coll_allreduce(Call call, const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request* req) {
  auto native = [&] {
    return req ? PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, req)
               : PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
  };
  const DecisionKey key = decision_key(comm, type, MPI_DATATYPE_NULL, sbuf, rbuf, two_ints(count, 0), handle_word(op));
  if (const Remembered r = remembered(call, key)) return run_remembered(call, r, comm, native);
  CallScope scope(call);
  scope.remember_under(key);
  ReduceArgs a = check_reduction(call, count, type, op, comm, 1);
  if (buffers_checked(a.why, comm, count >= 0 && type != MPI_DATATYPE_NULL && op != MPI_OP_NULL))
    if (const BufferFault f = allreduce_buffers(sbuf, rbuf, count, type))
      return reject_arguments(scope, comm, call, f, a.bytes);
  if (!offload(scope, a.why, a.bytes, comm)) return native();
  return direct_run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
    const void* src = sbuf == MPI_IN_PLACE ? reduce_input(h, a, rbuf, count, type, a.bytes)
                                           : reduce_operand(h, a, sbuf, count, type, a.bytes);
    BaseBuffer& sb = h.wrap(src, a.n, a.rt.dtype);
    BaseBuffer& rb = h.wrap(reduce_result(h, post, a, rbuf, count, type, a.bytes), a.n, a.rt.dtype);
    return state().accl->allreduce(sb, rb, static_cast<unsigned>(a.n), a.rt.func, a.cs->id, false, false,
                                   dataType::none, true);
  });
}

int coll_reduce(Call call, const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request* req) {
  auto native = [&] {
    return req ? PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, req)
               : PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm);
  };
  const DecisionKey key =
      decision_key(comm, type, MPI_DATATYPE_NULL, sbuf, rbuf, two_ints(count, root), handle_word(op));
  if (const Remembered r = remembered(call, key)) return run_remembered(call, r, comm, native);
  CallScope scope(call);
  scope.remember_under(key);
  ReduceArgs a = check_reduction(call, count, type, op, comm, 1);
  int rank = 0, size = 0;
  a.why = check_root(a.why, comm, a.cs, root, &rank, &size);
  if (buffers_checked(a.why, comm, count >= 0 && type != MPI_DATATYPE_NULL && op != MPI_OP_NULL) &&
      valid_root(comm, a.cs, root, &rank, &size))
    if (const BufferFault f = reduce_buffers(sbuf, rbuf, count, type, rank == root))
      return reject_arguments(scope, comm, call, f, a.bytes);
  if (!offload(scope, a.why, a.bytes, comm)) return native();
  return direct_run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
    const void* src = (rank == root && sbuf == MPI_IN_PLACE) ? reduce_input(h, a, rbuf, count, type, a.bytes)
                                                             : reduce_operand(h, a, sbuf, count, type, a.bytes);
    BaseBuffer& sb = h.wrap(src, a.n, a.rt.dtype);
    // Off the root the receive buffer is not significant; the driver needs 0
    // elements there.
    BaseBuffer& rb =
        rank == root ? h.wrap(reduce_result(h, post, a, rbuf, count, type, a.bytes), a.n, a.rt.dtype) : sb;
    return state().accl->reduce(sb, rb, static_cast<unsigned>(a.n), static_cast<unsigned>(root), a.rt.func,
                                a.cs->id, false, false, dataType::none, true);
  });
}

// MPI_Reduce_scatter_block, and MPI_Reduce_scatter (unequal counts: coll_reduce_scatter_v).
int coll_reduce_scatter(Call call, const void* sbuf, void* rbuf, int rcount, const int* rcounts, MPI_Datatype type,
                        MPI_Op op, MPI_Comm comm, MPI_Request* req) {
  auto native = [&] {
    if (rcounts != nullptr)
      return req ? PMPI_Ireduce_scatter(sbuf, rbuf, rcounts, type, op, comm, req)
                 : PMPI_Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm);
    return req ? PMPI_Ireduce_scatter_block(sbuf, rbuf, rcount, type, op, comm, req)
               : PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm);
  };
  // Remembered only with equal counts given as one (MPI_Reduce_scatter_block):
  // the decision depends on the contents of rcounts.
  const DecisionKey key =
      decision_key(comm, type, MPI_DATATYPE_NULL, sbuf, rbuf, two_ints(rcount, 0), handle_word(op));
  if (rcounts == nullptr)
    if (const Remembered r = remembered(call, key)) return run_remembered(call, r, comm, native);
  int size = 0;
  PMPI_Comm_size(comm, &size);
  if (rcounts != nullptr) {
    // recvcounts is significant and identical on every rank.
    rcount = size > 0 ? rcounts[0] : 0;
    for (int i = 1; i < size; ++i)
      if (rcounts[i] != rcount) return coll_reduce_scatter_v(call, sbuf, rbuf, rcounts, type, op, comm, req);
  }
  CallScope scope(call);
  if (rcounts == nullptr) scope.remember_under(key);
  ReduceArgs a = check_reduction(call, rcount, type, op, comm, size);
  if (buffers_checked(a.why, comm, rcount >= 0 && type != MPI_DATATYPE_NULL && op != MPI_OP_NULL))
    if (const BufferFault f = reduce_scatter_buffers(sbuf, rbuf, rcount, size, type))
      return reject_arguments(scope, comm, call, f, a.bytes);
  if (!offload(scope, a.why, a.bytes, comm)) return native();
  return direct_run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
    // In place: the whole input is in rbuf, the result goes to its start.
    const int items = rcount * size;
    const void* src = sbuf == MPI_IN_PLACE ? reduce_input(h, a, rbuf, items, type, a.bytes)
                                           : reduce_operand(h, a, sbuf, items, type, a.bytes);
    BaseBuffer& sb = h.wrap(src, a.n * static_cast<uint64_t>(size), a.rt.dtype);
    const uint64_t block_bytes = a.bytes / static_cast<uint64_t>(size);
    BaseBuffer& rb = h.wrap(reduce_result(h, post, a, rbuf, rcount, type, block_bytes), a.n, a.rt.dtype);
    return state().accl->reduce_scatter(sb, rb, static_cast<unsigned>(a.n), a.rt.func, a.cs->id, false, false,
                                        dataType::none, true);
  });
}
}  // namespace accl::pmpi

// ---------------------------------------------------------------------------
// C entry points. The first line of each is the whole cost of interposition
// when offload is off: one predictable branch on a global, then PMPI.
// ---------------------------------------------------------------------------
using namespace accl::pmpi;

ACCL_PMPI_EXPORT int MPI_Reduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                                MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm);
  return coll_reduce(Call::Reduce, sbuf, rbuf, count, type, op, root, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ireduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                                 MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, req));
  return coll_reduce(Call::Ireduce, sbuf, rbuf, count, type, op, root, comm, req);
}

ACCL_PMPI_EXPORT int MPI_Allreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op,
                                   MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
  return coll_allreduce(Call::Allreduce, sbuf, rbuf, count, type, op, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Iallreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op,
                                    MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, req));
  return coll_allreduce(Call::Iallreduce, sbuf, rbuf, count, type, op, comm, req);
}

ACCL_PMPI_EXPORT int MPI_Reduce_scatter_block(const void* sbuf, void* rbuf, int rcount, MPI_Datatype type,
                                              MPI_Op op, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm);
  return coll_reduce_scatter(Call::ReduceScatterBlock, sbuf, rbuf, rcount, nullptr, type, op, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ireduce_scatter_block(const void* sbuf, void* rbuf, int rcount, MPI_Datatype type,
                                               MPI_Op op, MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Ireduce_scatter_block(sbuf, rbuf, rcount, type, op, comm, req));
  return coll_reduce_scatter(Call::IreduceScatterBlock, sbuf, rbuf, rcount, nullptr, type, op, comm, req);
}

ACCL_PMPI_EXPORT int MPI_Reduce_scatter(const void* sbuf, void* rbuf, const int rcounts[], MPI_Datatype type,
                                        MPI_Op op, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm);
  return coll_reduce_scatter(Call::ReduceScatter, sbuf, rbuf, 0, rcounts, type, op, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ireduce_scatter(const void* sbuf, void* rbuf, const int rcounts[], MPI_Datatype type,
                                         MPI_Op op, MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Ireduce_scatter(sbuf, rbuf, rcounts, type, op, comm, req));
  return coll_reduce_scatter(Call::IreduceScatter, sbuf, rbuf, 0, rcounts, type, op, comm, req);
}
