// SPDX-License-Identifier: Apache-2.0
//
// The direct data-movement collectives (coll_direct.hpp): MPI_Bcast,
// MPI_Gather, MPI_Scatter, MPI_Allgather, MPI_Alltoall, and MPI_Barrier,
// which moves none, with their MPI_I* forms.
//
// They only depend on the type *signature* (bytes per block), which MPI
// requires to match across ranks; the local *layout* may differ per rank, so
// a non-contiguous layout is packed/unpacked through staging memory here
// instead of falling back alone.
#include "buffer_checks.hpp"
#include "coll_direct.hpp"
#include "decision_memo.hpp"
#include "stats.hpp"

#include <climits>
#include <optional>

namespace accl::pmpi {

namespace {

Reason classify_movement(uint64_t block, uint64_t total, const Movement& m) {
  if (block == 0) return Reason::Count0;
  // Pack/unpack and the device count are int/unsigned: keep totals below 2 GiB.
  if (total > static_cast<uint64_t>(INT_MAX)) return Reason::TooLarge;
  if (m.dtype == dataType::none) return Reason::Datatype;
  return Reason::Offloaded;
}

// Contiguous send side as-is, anything else packed into staging.
const void* send_side(Held& h, const void* buf, int count, MPI_Datatype type, uint64_t bytes) {
  if (type_info(type).contiguous) return buf;
  return pack_to_stage(h, buf, count, type, bytes);
}

// An in-place input (stage_copy) in a layout that may not be contiguous:
// packed into staging.
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

// Contiguous receive side as-is, anything else received into staging and
// unpacked when the call completes.
void* recv_side(Held& h, PostCopy& post, void* buf, int count, MPI_Datatype type, uint64_t bytes) {
  if (type_info(type).contiguous) return buf;
  void* s = h.stage(bytes);
  post = unpack_step(buf, s, bytes, count, type);
  return s;
}

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
  a.why = direct_pre(comm, &a.cs);
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
  if (a.why == Reason::Offloaded) a.why = direct_finish(call, a.total, a.block, comm, &a.cs);
  return a;
}


}  // namespace

int coll_bcast(Call call, void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* req) {
  auto native = [&] {
    return req ? PMPI_Ibcast(buf, count, type, root, comm, req) : PMPI_Bcast(buf, count, type, root, comm);
  };
  const DecisionKey key = decision_key(comm, type, MPI_DATATYPE_NULL, buf, nullptr, two_ints(count, root), 0);
  if (const Remembered r = remembered(call, key)) return run_remembered(call, r, comm, native);
  CallScope scope(call);
  scope.remember_under(key);
  CommState* cs = nullptr;
  const uint64_t bytes = bytes_of(count, type);
  const Movement m = movement(bytes);
  int rank = 0, size = 0;
  Reason why = check_root(direct_pre(comm, &cs), comm, cs, root, &rank, &size);
  if (why == Reason::Offloaded) why = classify_movement(bytes, bytes, m);
  if (why == Reason::Offloaded) why = direct_finish(call, bytes, bytes, comm, &cs);
  if (buffers_checked(why, comm, count >= 0 && type != MPI_DATATYPE_NULL) && valid_root(comm, cs, root, &rank, &size))
    if (const BufferFault f = bcast_buffer(buf, count, type)) return reject_arguments(scope, comm, call, f, bytes);
  if (!offload(scope, why, bytes, comm)) return native();
  return direct_run(call, comm, cs, req, [&](Held& h, PostCopy& post) {
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
  auto native = [&] {
    return req ? PMPI_Igather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req)
               : PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
  };
  const DecisionKey key = decision_key(comm, stype, rtype, sbuf, rbuf, two_ints(scount, rcount), two_ints(root, 0));
  if (const Remembered r = remembered(call, key)) return run_remembered(call, r, comm, native);
  CallScope scope(call);
  scope.remember_under(key);
  // The per-rank block signature: what each rank sends (the root's own
  // block sits in rbuf when in place).
  const BlockArgs a = check_blocks(call, comm, root, Reason::Offloaded, sbuf == MPI_IN_PLACE, {scount, stype},
                                   {rcount, rtype});
  if (int rank = 0, size = 0; buffers_checked(a.why, comm, movement_args_valid(scount, stype, rcount, rtype)) &&
                              valid_root(comm, a.cs, root, &rank, &size))
    if (const BufferFault f = gather_buffers(sbuf, scount, stype, rbuf, rcount, rtype, size, rank == root))
      return reject_arguments(scope, comm, call, f, a.total);
  if (!offload(scope, a.why, a.total, comm)) return native();
  return direct_run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
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
  auto native = [&] {
    return req ? PMPI_Iscatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm, req)
               : PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm);
  };
  const DecisionKey key = decision_key(comm, stype, rtype, sbuf, rbuf, two_ints(scount, rcount), two_ints(root, 0));
  if (const Remembered r = remembered(call, key)) return run_remembered(call, r, comm, native);
  CallScope scope(call);
  scope.remember_under(key);
  const BlockArgs a = check_blocks(call, comm, root, Reason::Offloaded, rbuf == MPI_IN_PLACE, {rcount, rtype},
                                   {scount, stype});
  if (int rank = 0, size = 0; buffers_checked(a.why, comm, movement_args_valid(scount, stype, rcount, rtype)) &&
                              valid_root(comm, a.cs, root, &rank, &size))
    if (const BufferFault f = scatter_buffers(sbuf, scount, stype, rbuf, rcount, rtype, size, rank == root))
      return reject_arguments(scope, comm, call, f, a.total);
  if (!offload(scope, a.why, a.total, comm)) return native();
  return direct_run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
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
  auto native = [&] {
    return req ? PMPI_Iallgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req)
               : PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  };
  const DecisionKey key = decision_key(comm, stype, rtype, sbuf, rbuf, two_ints(scount, rcount), 0);
  if (const Remembered r = remembered(call, key)) return run_remembered(call, r, comm, native);
  CallScope scope(call);
  scope.remember_under(key);
  const BlockArgs a = check_blocks(call, comm, std::nullopt, Reason::Offloaded, sbuf == MPI_IN_PLACE,
                                   {scount, stype}, {rcount, rtype});
  if (int rank = 0, size = 0; buffers_checked(a.why, comm, movement_args_valid(scount, stype, rcount, rtype)) &&
                              valid_root(comm, a.cs, 0, &rank, &size))
    if (const BufferFault f = all_to_all_buffers(sbuf, scount, stype, rbuf, rcount, rtype, size, 1))
      return reject_arguments(scope, comm, call, f, a.total);
  if (!offload(scope, a.why, a.total, comm)) return native();
  return direct_run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
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
  auto native = [&] {
    return req ? PMPI_Ialltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req)
               : PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  };
  const DecisionKey key = decision_key(comm, stype, rtype, sbuf, rbuf, two_ints(scount, rcount), 0);
  if (const Remembered r = remembered(call, key)) return run_remembered(call, r, comm, native);
  CallScope scope(call);
  scope.remember_under(key);
  const BlockArgs a = check_blocks(call, comm, std::nullopt,
                                   state().can_alltoall      ? Reason::Offloaded
                                   : state().public_firmware ? Reason::PublicRendezvous
                                                             : Reason::DeviceCap,
                                   sbuf == MPI_IN_PLACE, {scount, stype}, {rcount, rtype});
  if (int rank = 0, size = 0; buffers_checked(a.why, comm, movement_args_valid(scount, stype, rcount, rtype)) &&
                              valid_root(comm, a.cs, 0, &rank, &size))
    if (const BufferFault f = all_to_all_buffers(sbuf, scount, stype, rbuf, rcount, rtype, size, size))
      return reject_arguments(scope, comm, call, f, a.total);
  if (!offload(scope, a.why, a.total, comm)) return native();
  return direct_run(call, comm, a.cs, req, [&](Held& h, PostCopy& post) {
    const void* src = a.in_place ? stage_in_place(h, rbuf, rcount * a.size, rtype, a.total)
                                 : send_side(h, sbuf, scount * a.size, stype, a.total);
    void* dst = recv_side(h, post, rbuf, rcount * a.size, rtype, a.total);
    BaseBuffer& sb = h.wrap(src, a.m.elems * static_cast<uint64_t>(a.size), a.m.dtype);
    BaseBuffer& rb = h.wrap(dst, a.m.elems * static_cast<uint64_t>(a.size), a.m.dtype);
    return state().accl->alltoall(sb, rb, static_cast<unsigned>(a.m.elems), a.cs->id, false, false,
                                  dataType::none, true);
  });
}

// noinline: MPI_Barrier's straight path stays free of this frame.
[[gnu::noinline]] int coll_barrier(Call call, MPI_Comm comm, MPI_Request* req) {
  auto native = [&] { return req ? PMPI_Ibarrier(comm, req) : PMPI_Barrier(comm); };
  const DecisionKey key = decision_key(comm, MPI_DATATYPE_NULL, MPI_DATATYPE_NULL, nullptr, nullptr, 0, 0);
  if (const Remembered r = remembered(call, key)) return run_remembered(call, r, comm, native);
  CallScope scope(call);
  scope.remember_under(key);
  CommState* cs = nullptr;
  Reason why = direct_pre(comm, &cs);
  if (why == Reason::Offloaded && !state().can_barrier)
    why = state().public_firmware ? Reason::PublicRendezvous : Reason::DeviceCap;
  if (why == Reason::Offloaded) why = direct_finish(call, 0, 0, comm, &cs);
  if (!offload(scope, why, 0, comm)) return native();
  return direct_run(call, comm, cs, req, [&](Held&, PostCopy&) { return state().accl->barrier(cs->id, true); });
}

}  // namespace accl::pmpi

// ---------------------------------------------------------------------------
// C entry points. The first line of each is the whole cost of interposition
// when offload is off: one predictable branch on a global, then PMPI.
// ---------------------------------------------------------------------------
using namespace accl::pmpi;

ACCL_PMPI_EXPORT int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Bcast(buf, count, type, root, comm);
  return coll_bcast(Call::Bcast, buf, count, type, root, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                                MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Ibcast(buf, count, type, root, comm, req));
  return coll_bcast(Call::Ibcast, buf, count, type, root, comm, req);
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

ACCL_PMPI_EXPORT int MPI_Barrier(MPI_Comm comm) {
  if (ACCL_LIKELY(g_barrier_straight)) return PMPI_Barrier(comm);
  return coll_barrier(Call::Barrier, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ibarrier(MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Ibarrier(comm, req));
  return coll_barrier(Call::Ibarrier, comm, req);
}
