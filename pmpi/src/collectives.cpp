// SPDX-License-Identifier: Apache-2.0
//
// Offloaded collectives, blocking and non-blocking.
//
// Decision order per call (cheap first), each step a pure function of
// arguments every member passes identically, so all ranks take the same path:
//   device up -> communicator (intra, size >= 2, not latched native)
//   -> count 0 -> op/datatype (reductions) or signature bytes (movement)
//   -> ACCL_OFFLOAD_CALLS and byte thresholds -> ACCL communicator (created
//   collectively on first use).
// Anything else falls back to PMPI_<call> with the identical arguments.
//
// Data-movement collectives (bcast, gather, scatter, allgather, alltoall) only
// depend on the type *signature* (bytes per block), which MPI requires to
// match across ranks; the local *layout* may differ per rank, so a
// non-contiguous layout is packed/unpacked through staging memory here instead
// of falling back alone. Reductions need the same datatype on every rank
// (MPI rule), so a non-contiguous reduction type falls back on all of them.
//
// MPI_IN_PLACE is emulated with a staging copy of the in-place input: the
// device then reads and writes distinct buffers.
#include "collectives.hpp"

#include "buffer_checks.hpp"
#include "buffers.hpp"
#include "comms.hpp"
#include "errors.hpp"
#include "progress.hpp"
#include "requests.hpp"
#include "state.hpp"
#include "stats.hpp"
#include "types.hpp"

#include <dlfcn.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <optional>

namespace accl::pmpi {

namespace {

Reason pre(MPI_Comm comm, CommState** cs) {
  State& st = state();
  if (!st.active) return inactive_reason();
  return comm_check(comm, cs);
}

// `message` is the bytes of one device message (the count word times the
// element size), which the public firmware compares with its eager size.
Reason finish_checks(Call call, uint64_t bytes, uint64_t message, MPI_Comm comm, CommState** cs) {
  int size = 0;
  if (*cs != nullptr) size = (*cs)->size;
  else PMPI_Comm_size(comm, &size);
  Reason r = policy_call(call, static_cast<uint64_t>(size), bytes);
  if (r != Reason::Offloaded) return r;
  const uint64_t limit = state().eager_only_limit;
  if (limit != 0 && message > limit) return Reason::PublicRendezvous;
  if (*cs == nullptr) *cs = comm_materialize(comm);
  return (*cs)->accl ? Reason::Offloaded : (*cs)->native_reason;
}

Reason classify_movement(uint64_t block, uint64_t total, const Movement& m) {
  if (block == 0) return Reason::Count0;
  // Pack/unpack and the device count are int/unsigned: keep totals below 2 GiB.
  if (total > static_cast<uint64_t>(INT_MAX)) return Reason::TooLarge;
  if (m.dtype == dataType::none) return Reason::Datatype;
  return Reason::Offloaded;
}

void rank_size(MPI_Comm comm, CommState* cs, int* rank, int* size) {
  if (cs != nullptr) {
    *rank = cs->rank;
    *size = cs->size;
  } else {
    PMPI_Comm_rank(comm, rank);
    PMPI_Comm_size(comm, size);
  }
}

// A rooted call's root must name a member; rank and size come back for the
// issue. Checked only while the call can still be offloaded.
Reason check_root(Reason why, MPI_Comm comm, CommState* cs, int root, int* rank, int* size) {
  if (why != Reason::Offloaded) return why;
  rank_size(comm, cs, rank, size);
  return (root < 0 || root >= *size) ? Reason::BadArgs : Reason::Offloaded;
}

// This rank and the communicator's size, and whether `root` names a member.
bool valid_root(MPI_Comm comm, CommState* cs, int root, int* rank, int* size) {
  if (comm == MPI_COMM_NULL) return false;
  rank_size(comm, cs, rank, size);
  return root >= 0 && root < *size;
}

void* pack_to_stage(Held& h, const void* buf, int count, MPI_Datatype type, uint64_t bytes) {
  void* s = h.stage(bytes);
  pack_to(s, bytes, buf, count, type);
  return s;
}

// Contiguous send side as-is, anything else packed into staging.
const void* send_side(Held& h, const void* buf, int count, MPI_Datatype type, uint64_t bytes) {
  if (type_info(type).contiguous) return buf;
  return pack_to_stage(h, buf, count, type, bytes);
}

// An in-place input: copied to staging so that the device reads and writes
// distinct buffers.
const void* stage_copy(Held& h, const void* buf, uint64_t bytes) {
  void* s = h.stage(bytes);
  std::memcpy(s, buf, bytes);
  return s;
}

// The same for a layout that may not be contiguous: packed into staging.
const void* stage_in_place(Held& h, const void* buf, int count, MPI_Datatype type, uint64_t bytes) {
  if (type_info(type).contiguous) return stage_copy(h, buf, bytes);
  return pack_to_stage(h, buf, count, type, bytes);
}

// The in-place input of gather and allgather: block `index` of the receive
// buffer.
const void* stage_own_block(Held& h, const void* rbuf, int index, int rcount, MPI_Datatype rtype, uint64_t block) {
  const char* mine = static_cast<const char*>(rbuf) + static_cast<MPI_Aint>(index) * rcount * type_info(rtype).extent;
  return stage_in_place(h, mine, rcount, rtype, block);
}

// Where `bytes` of staged data go into `count` items of a non-contiguous
// `type`: unpacked by basic elements when the call completes, with the
// type's layout taken now (the application's thread) in case they end
// inside an item.
PostCopy unpack_step(void* buf, const void* staged, uint64_t bytes, int count, MPI_Datatype type) {
  return PostCopy{PostCopy::unpack, buf, staged, bytes, count, type, type_layout(type)};
}

// Contiguous receive side as-is, anything else received into staging and
// unpacked when the call completes.
void* recv_side(Held& h, PostCopy& post, void* buf, int count, MPI_Datatype type, uint64_t bytes) {
  if (type_info(type).contiguous) return buf;
  void* s = h.stage(bytes);
  post = unpack_step(buf, s, bytes, count, type);
  return s;
}

// Waits for a blocking offloaded collective. Unlike wait_until() it does not
// poll: it waits in the device (which spins briefly, then sleeps until the
// call completes) in slices of kCollectiveWaitSlice, with a progress pass of
// the point-to-point engine and of Open MPI between slices (only a peer's
// point-to-point traffic to this rank can need them while it sits in a
// collective). A collective of a megabyte or more runs for hundreds of
// microseconds in the emulator's threads, and on few cores a rank that keeps
// yielding in a poll loop takes their time slices: in a 2-rank 16 MiB
// allreduce 15-30% of a rank's CPU samples were sched_yield, and waiting in
// the device made 2-8 MiB allreduces 1.3-1.8x faster on 2 cores.
constexpr std::chrono::milliseconds kCollectiveWaitSlice{1};

}  // namespace

// The wait is bounded as the driver bounds its own (device timeout x 1.25 +
// 100 ms): our firmware ends a stuck call at the device timeout, which comes
// first, but public ACCL's firmware keeps set_timeout's value unused, and a
// call it cannot finish would otherwise hold the rank forever.
void wait_collective(Request& dev) {
  State& st = state();
  const auto bound = std::chrono::milliseconds(st.s.timeout_ms + st.s.timeout_ms / 4 + 100);
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    {
      std::lock_guard lock(st.mu);
      progress_locked();
      if (dev.test()) return;
    }
    native_progress();
    if (dev.wait(kCollectiveWaitSlice)) return;
    if (std::chrono::steady_clock::now() > deadline)
      throw TimeoutError(dev.call_name(), st.world_rank,
                         "call '" + dev.call_name() + "' on rank " + std::to_string(st.world_rank) +
                             " did not complete within " + std::to_string(st.s.timeout_ms) +
                             " ms (the device did not end it)");
  }
}

ShadowReq* collective_request(Call call, MPI_Comm comm, CommState* cs, RequestPtr dev) {
  ShadowReq* r = shadow_alloc(ReqKind::coll, call);
  r->cs = cs;
  ++cs->refs;
  r->comm = comm;
  r->r[0] = std::move(dev);
  return r;
}

void start_collective_request(ShadowReq* r, MPI_Request* req) {
  r->active = true;
  flight_add(r);  // completes in a progress round, at once when it has no device work
  *req = as_request(r);
}

namespace {

// Issues the call built by `issue` (under mu) and either returns a shadow
// request (non-blocking) or waits for it. Errors go through the comm's
// error handler.
template <typename Issue>
int run(Call call, MPI_Comm comm, CommState* cs, MPI_Request* req, Issue&& issue) {
  State& st = state();
  Held held;
  PostCopy post;
  RequestPtr dev;
  std::string text;
  int code = MPI_SUCCESS;
  {
    std::lock_guard lock(st.mu);
    try {
      dev = issue(held, post);
      if (req != nullptr) {
        ShadowReq* r = collective_request(call, comm, cs, std::move(dev));
        std::swap(r->held.b, held.b);
        std::swap(r->held.s, held.s);
        r->post = post;
        if (post.kind == PostCopy::unpack) {
          // Unpacked at completion: the application may free the type before that.
          r->type_ref = type_hold(post.type);
          if (r->type_ref != MPI_DATATYPE_NULL) r->post.type = r->type_ref;
        }
        start_collective_request(r, req);
        return MPI_SUCCESS;
      }
    } catch (...) {
      code = error_code_from_current_exception(call, &text);
      held.release();
    }
  }
  if (code != MPI_SUCCESS) return raise_error(comm, call, code, text);
  try {
    wait_collective(*dev);
  } catch (...) {
    code = error_code_from_current_exception(call, &text);
  }
  {
    std::lock_guard lock(st.mu);
    if (code == MPI_SUCCESS) run_post_copy(post);
    held.release();
  }
  if (code != MPI_SUCCESS) return raise_error(comm, call, code, text);
  return MPI_SUCCESS;
}

// --- reductions ------------------------------------------------------------

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
  a.why = pre(comm, &a.cs);
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
    a.why = finish_checks(call, a.bytes, a.bytes / static_cast<uint64_t>(blocks), comm, &a.cs);
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

// --- data movement in blocks ---------------------------------------------------

// One rank's block of a data-movement call.
struct Block {
  int count;
  MPI_Datatype type;
};

struct BlockArgs {
  Reason why = Reason::Offloaded;
  CommState* cs = nullptr;
  int rank = -1;
  int size = 0;
  bool in_place = false;
  uint64_t block = 0;  // bytes per rank: the type signature every member must match
  uint64_t total = 0;  // bytes over the communicator
  Movement m;
};

// The decision for gather, scatter, allgather and alltoall. Each rank's block
// is `own` (the send side of gather/allgather/alltoall, the receive side of
// scatter); MPI_IN_PLACE (`in_place_arg`, significant only at the root of a
// rooted call) replaces it, and then the other side, `other`, describes it.
// `device_cap` is Reason::DeviceCap when the device cannot run the call.
BlockArgs check_blocks(Call call, MPI_Comm comm, std::optional<int> root, Reason device_cap, bool in_place_arg,
                       Block own, Block other) {
  BlockArgs a;
  a.why = pre(comm, &a.cs);
  if (root) a.why = check_root(a.why, comm, a.cs, *root, &a.rank, &a.size);
  else if (a.why == Reason::Offloaded) rank_size(comm, a.cs, &a.rank, &a.size);
  a.in_place = in_place_arg && (!root || a.rank == *root);
  const Block b = a.in_place ? other : own;
  a.block = bytes_of(b.count, b.type);
  a.total = a.block * static_cast<uint64_t>(a.size);
  a.m = movement(a.block);
  if (a.why == Reason::Offloaded) a.why = device_cap;
  if (a.why == Reason::Offloaded) a.why = classify_movement(a.block, a.total, a.m);
  // Unrooted calls: every rank receives blocks of the size it sends.
  if (!root && a.why == Reason::Offloaded && bytes_of(other.count, other.type) != a.block) a.why = Reason::Signature;
  if (a.why == Reason::Offloaded) a.why = finish_checks(call, a.total, a.block, comm, &a.cs);
  return a;
}

}  // namespace

int coll_allreduce(Call call, const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request* req) {
  CallScope scope(call);
  ReduceArgs a = check_reduction(call, count, type, op, comm, 1);
  if (buffers_checked(a.why, comm, count >= 0 && type != MPI_DATATYPE_NULL && op != MPI_OP_NULL))
    if (const BufferFault f = allreduce_buffers(sbuf, rbuf, count, type))
      return reject_arguments(scope, comm, call, f, a.bytes);
  if (!offload(scope, a.why, a.bytes, comm))
    return req ? PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, req)
               : PMPI_Allreduce(sbuf, rbuf, count, type, op, comm);
  return run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
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
  CallScope scope(call);
  ReduceArgs a = check_reduction(call, count, type, op, comm, 1);
  int rank = 0, size = 0;
  a.why = check_root(a.why, comm, a.cs, root, &rank, &size);
  if (buffers_checked(a.why, comm, count >= 0 && type != MPI_DATATYPE_NULL && op != MPI_OP_NULL) &&
      valid_root(comm, a.cs, root, &rank, &size))
    if (const BufferFault f = reduce_buffers(sbuf, rbuf, count, type, rank == root))
      return reject_arguments(scope, comm, call, f, a.bytes);
  if (!offload(scope, a.why, a.bytes, comm))
    return req ? PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, req)
               : PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm);
  return run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
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
  int size = 0;
  PMPI_Comm_size(comm, &size);
  if (rcounts != nullptr) {
    // recvcounts is significant and identical on every rank.
    rcount = size > 0 ? rcounts[0] : 0;
    for (int i = 1; i < size; ++i)
      if (rcounts[i] != rcount) return coll_reduce_scatter_v(call, sbuf, rbuf, rcounts, type, op, comm, req);
  }
  CallScope scope(call);
  ReduceArgs a = check_reduction(call, rcount, type, op, comm, size);
  if (buffers_checked(a.why, comm, rcount >= 0 && type != MPI_DATATYPE_NULL && op != MPI_OP_NULL))
    if (const BufferFault f = reduce_scatter_buffers(sbuf, rbuf, rcount, size, type))
      return reject_arguments(scope, comm, call, f, a.bytes);
  if (!offload(scope, a.why, a.bytes, comm)) return native();
  return run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
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

// --- data movement -----------------------------------------------------------

int coll_bcast(Call call, void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* req) {
  CallScope scope(call);
  CommState* cs = nullptr;
  const uint64_t bytes = bytes_of(count, type);
  const Movement m = movement(bytes);
  int rank = 0, size = 0;
  Reason why = check_root(pre(comm, &cs), comm, cs, root, &rank, &size);
  if (why == Reason::Offloaded) why = classify_movement(bytes, bytes, m);
  if (why == Reason::Offloaded) why = finish_checks(call, bytes, bytes, comm, &cs);
  if (buffers_checked(why, comm, count >= 0 && type != MPI_DATATYPE_NULL) && valid_root(comm, cs, root, &rank, &size))
    if (const BufferFault f = bcast_buffer(buf, count, type)) return reject_arguments(scope, comm, call, f, bytes);
  if (!offload(scope, why, bytes, comm))
    return req ? PMPI_Ibcast(buf, count, type, root, comm, req) : PMPI_Bcast(buf, count, type, root, comm);
  return run(call, comm, cs, req, [&](Held& h, PostCopy& post) {
    void* data = buf;
    if (!type_info(type).contiguous) {
      data = h.stage(bytes);
      if (rank == root) pack_to(data, bytes, buf, count, type);
      else post = unpack_step(buf, data, bytes, count, type);
    }
    BaseBuffer& b = h.wrap(data, m.elems, m.dtype);
    return state().accl->bcast(b, static_cast<unsigned>(m.elems), static_cast<unsigned>(root), cs->id, false,
                               false, dataType::none, true);
  });
}

int coll_gather(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req) {
  CallScope scope(call);
  // The per-rank block signature: what each rank sends (the root's own
  // block sits in rbuf when in place).
  const BlockArgs a = check_blocks(call, comm, root, Reason::Offloaded, sbuf == MPI_IN_PLACE, {scount, stype},
                                   {rcount, rtype});
  if (int rank = 0, size = 0; buffers_checked(a.why, comm, movement_args_valid(scount, stype, rcount, rtype)) &&
                              valid_root(comm, a.cs, root, &rank, &size))
    if (const BufferFault f = gather_buffers(sbuf, scount, stype, rbuf, rcount, rtype, size, rank == root))
      return reject_arguments(scope, comm, call, f, a.total);
  if (!offload(scope, a.why, a.total, comm))
    return req ? PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req)
               : PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
  return run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
    const void* src = a.in_place ? stage_own_block(h, rbuf, root, rcount, rtype, a.block)
                                 : send_side(h, sbuf, scount, stype, a.block);
    BaseBuffer& sb = h.wrap(src, a.m.elems, a.m.dtype);
    BaseBuffer* rb = &sb;  // not significant off the root
    if (a.rank == root) {
      void* dst = recv_side(h, post, rbuf, rcount * a.size, rtype, a.total);
      rb = &h.wrap(dst, a.m.elems * static_cast<uint64_t>(a.size), a.m.dtype);
    }
    return state().accl->gather(sb, *rb, static_cast<unsigned>(a.m.elems), static_cast<unsigned>(root), a.cs->id,
                                false, false, dataType::none, true);
  });
}

int coll_scatter(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req) {
  CallScope scope(call);
  const BlockArgs a = check_blocks(call, comm, root, Reason::Offloaded, rbuf == MPI_IN_PLACE, {rcount, rtype},
                                   {scount, stype});
  if (int rank = 0, size = 0; buffers_checked(a.why, comm, movement_args_valid(scount, stype, rcount, rtype)) &&
                              valid_root(comm, a.cs, root, &rank, &size))
    if (const BufferFault f = scatter_buffers(sbuf, scount, stype, rbuf, rcount, rtype, size, rank == root))
      return reject_arguments(scope, comm, call, f, a.total);
  if (!offload(scope, a.why, a.total, comm))
    return req ? PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req)
               : PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
  return run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
    // In place the root's own block stays where it is.
    void* dst = a.in_place ? h.stage(a.block) : recv_side(h, post, rbuf, rcount, rtype, a.block);
    BaseBuffer& rb = h.wrap(dst, a.m.elems, a.m.dtype);
    BaseBuffer* sb = &rb;  // not significant off the root
    if (a.rank == root) {
      const void* src = send_side(h, sbuf, scount * a.size, stype, a.total);
      sb = &h.wrap(src, a.m.elems * static_cast<uint64_t>(a.size), a.m.dtype);
    }
    return state().accl->scatter(*sb, rb, static_cast<unsigned>(a.m.elems), static_cast<unsigned>(root), a.cs->id,
                                 false, false, dataType::none, true);
  });
}

int coll_allgather(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
  CallScope scope(call);
  const BlockArgs a = check_blocks(call, comm, std::nullopt, Reason::Offloaded, sbuf == MPI_IN_PLACE,
                                   {scount, stype}, {rcount, rtype});
  if (int rank = 0, size = 0; buffers_checked(a.why, comm, movement_args_valid(scount, stype, rcount, rtype)) &&
                              valid_root(comm, a.cs, 0, &rank, &size))
    if (const BufferFault f = all_to_all_buffers(sbuf, scount, stype, rbuf, rcount, rtype, size, 1))
      return reject_arguments(scope, comm, call, f, a.total);
  if (!offload(scope, a.why, a.total, comm))
    return req ? PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req)
               : PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  return run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
    const void* src = a.in_place ? stage_own_block(h, rbuf, a.rank, rcount, rtype, a.block)
                                 : send_side(h, sbuf, scount, stype, a.block);
    void* dst = recv_side(h, post, rbuf, rcount * a.size, rtype, a.total);
    BaseBuffer& sb = h.wrap(src, a.m.elems, a.m.dtype);
    BaseBuffer& rb = h.wrap(dst, a.m.elems * static_cast<uint64_t>(a.size), a.m.dtype);
    return state().accl->allgather(sb, rb, static_cast<unsigned>(a.m.elems), a.cs->id, false, false,
                                   dataType::none, true);
  });
}

int coll_alltoall(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
  CallScope scope(call);
  const BlockArgs a = check_blocks(call, comm, std::nullopt,
                                   state().can_alltoall      ? Reason::Offloaded
                                   : state().public_firmware ? Reason::PublicRendezvous
                                                             : Reason::DeviceCap,
                                   sbuf == MPI_IN_PLACE, {scount, stype}, {rcount, rtype});
  if (int rank = 0, size = 0; buffers_checked(a.why, comm, movement_args_valid(scount, stype, rcount, rtype)) &&
                              valid_root(comm, a.cs, 0, &rank, &size))
    if (const BufferFault f = all_to_all_buffers(sbuf, scount, stype, rbuf, rcount, rtype, size, size))
      return reject_arguments(scope, comm, call, f, a.total);
  if (!offload(scope, a.why, a.total, comm))
    return req ? PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req)
               : PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  return run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
    const void* src = a.in_place ? stage_in_place(h, rbuf, rcount * a.size, rtype, a.total)
                                 : send_side(h, sbuf, scount * a.size, stype, a.total);
    void* dst = recv_side(h, post, rbuf, rcount * a.size, rtype, a.total);
    BaseBuffer& sb = h.wrap(src, a.m.elems * static_cast<uint64_t>(a.size), a.m.dtype);
    BaseBuffer& rb = h.wrap(dst, a.m.elems * static_cast<uint64_t>(a.size), a.m.dtype);
    return state().accl->alltoall(sb, rb, static_cast<unsigned>(a.m.elems), a.cs->id, false, false,
                                  dataType::none, true);
  });
}

int coll_barrier(Call call, MPI_Comm comm, MPI_Request* req) {
  CallScope scope(call);
  CommState* cs = nullptr;
  Reason why = pre(comm, &cs);
  if (why == Reason::Offloaded && !state().can_barrier)
    why = state().public_firmware ? Reason::PublicRendezvous : Reason::DeviceCap;
  if (why == Reason::Offloaded) why = finish_checks(call, 0, 0, comm, &cs);
  if (!offload(scope, why, 0, comm)) return req ? PMPI_Ibarrier(comm, req) : PMPI_Barrier(comm);
  return run(call, comm, cs, req, [&](Held&, PostCopy&) { return state().accl->barrier(cs->id, true); });
}

}  // namespace accl::pmpi

// ---------------------------------------------------------------------------
// C entry points. The first line of each is the whole cost of interposition
// when offload is off: one predictable branch on a global, then PMPI.
// ---------------------------------------------------------------------------
using namespace accl::pmpi;

// Open MPI's own components call a few MPI_* (not PMPI_*) functions: ROMIO
// calls MPI_Ialltoall and completes the request with PMPI_Wait, which knows
// nothing of shadow requests. Non-blocking collectives started from inside
// Open MPI therefore stay native.
bool accl::pmpi::from_open_mpi(void* return_address) {
  Dl_info info;
  if (dladdr(return_address, &info) == 0 || info.dli_fname == nullptr) return false;
  const char* base = std::strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  return std::strncmp(base, "mca_", 4) == 0 || std::strncmp(base, "libmpi", 6) == 0 ||
         std::strncmp(base, "libompi", 7) == 0 || std::strncmp(base, "libopen-", 8) == 0;
}

ACCL_PMPI_EXPORT int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Bcast(buf, count, type, root, comm);
  return coll_bcast(Call::Bcast, buf, count, type, root, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                                MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Ibcast(buf, count, type, root, comm, req));
  return coll_bcast(Call::Ibcast, buf, count, type, root, comm, req);
}

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

ACCL_PMPI_EXPORT int MPI_Gather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                                MPI_Datatype rtype, int root, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
  return coll_gather(Call::Gather, sbuf, scount, stype, rbuf, rcount, rtype, root, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Igather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req));
  return coll_gather(Call::Igather, sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req);
}

ACCL_PMPI_EXPORT int MPI_Scatter(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                                 MPI_Datatype rtype, int root, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
  return coll_scatter(Call::Scatter, sbuf, scount, stype, rbuf, rcount, rtype, root, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Iscatter(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                                  MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req));
  return coll_scatter(Call::Iscatter, sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req);
}

ACCL_PMPI_EXPORT int MPI_Allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                                   MPI_Datatype rtype, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  return coll_allgather(Call::Allgather, sbuf, scount, stype, rbuf, rcount, rtype, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Iallgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                                    MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
  return coll_allgather(Call::Iallgather, sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
}

ACCL_PMPI_EXPORT int MPI_Alltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                                  MPI_Datatype rtype, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  return coll_alltoall(Call::Alltoall, sbuf, scount, stype, rbuf, rcount, rtype, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ialltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
  return coll_alltoall(Call::Ialltoall, sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
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

ACCL_PMPI_EXPORT int MPI_Barrier(MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Barrier(comm);
  return coll_barrier(Call::Barrier, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ibarrier(MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Ibarrier(comm, req));
  return coll_barrier(Call::Ibarrier, comm, req);
}
