// SPDX-License-Identifier: Apache-2.0
//
// Buffer arguments the layer refuses before anything reaches the device:
// NULL with a non-zero count, MPI_IN_PLACE where the call does not allow it,
// and send and receive buffers that overlap. Handed on, the first two made
// the emulator crash on address 0x1 or store data at host address 0, and an
// overlap returned MPI_SUCCESS with undefined data (issue 38).
//
// Which class each fault gets (Open MPI 4.1 with its default parameter
// checks, measured per rank): where Open MPI itself reports the fault, the
// same class (MPI_IN_PLACE as MPI_Allreduce's recvbuf: MPI_ERR_BUFFER; as
// MPI_Bcast's buffer, any other receive side, or a non-root's send side:
// MPI_ERR_ARG; sendbuf == recvbuf: MPI_ERR_BUFFER in MPI_Allreduce,
// MPI_ERR_ARG at MPI_Reduce's root). Where Open MPI does not check (it
// crashes on NULL in every collective, and runs partly overlapping buffers
// with undefined results), MPI_ERR_BUFFER, the class it gives point-to-point
// calls for a NULL buffer. Only arguments significant at this rank are
// checked, as Open MPI does (a non-root's receive buffer of MPI_Reduce may be
// anything).
#include "buffer_checks.hpp"

#include "errors.hpp"
#include "state.hpp"
#include "stats.hpp"
#include "types.hpp"

#include <accl/log.hpp>

#include <cstdio>

namespace accl::pmpi {

namespace {

// Open MPI's own rule: NULL describes no memory unless the type carries
// absolute addresses (MPI_BOTTOM is NULL in Open MPI, and a type built from
// MPI_Get_address values has a non-zero true lower bound).
bool null_buffer(const void* buf, int64_t count, MPI_Datatype type) {
  if (buf != nullptr || count <= 0 || type == MPI_DATATYPE_NULL) return false;
  int size = 0;
  if (PMPI_Type_size(type, &size) != MPI_SUCCESS || size <= 0) return false;
  MPI_Count true_lb = 0, true_extent = 0;
  if (PMPI_Type_get_true_extent_x(type, &true_lb, &true_extent) != MPI_SUCCESS) return false;
  return true_lb == 0;
}

// Byte ranges of two contiguous sides share memory. Non-contiguous layouts
// may interleave legally (two vectors of alternate elements), so they are
// never called overlapping.
bool overlap(const BufferSide& a, const BufferSide& b) {
  if (a.count <= 0 || b.count <= 0) return false;
  const TypeInfo ta = type_info(a.type), tb = type_info(b.type);
  if (!ta.contiguous || !tb.contiguous) return false;
  const auto start_a = reinterpret_cast<uintptr_t>(a.buf), start_b = reinterpret_cast<uintptr_t>(b.buf);
  const uintptr_t end_a = start_a + static_cast<uintptr_t>(a.count) * static_cast<uintptr_t>(ta.size);
  const uintptr_t end_b = start_b + static_cast<uintptr_t>(b.count) * static_cast<uintptr_t>(tb.size);
  return start_a < end_b && start_b < end_a;
}

}  // namespace

// Whether the buffer checks apply: the layer is in the
// path and every other argument is valid MPI, so a native call would not
// report anything first. Also for calls that go native for a policy reason:
// Open MPI crashes on the same NULL buffers. `others_valid` covers counts,
// types, op and root.
bool buffers_checked(Reason why, MPI_Comm comm, bool others_valid) {
  if (!others_valid || comm == MPI_COMM_NULL) return false;
  switch (why) {
    case Reason::Disabled:
    case Reason::NoDevice:
    case Reason::BadArgs:
    case Reason::Intercomm:
    case Reason::CommSize1: return false;
    default: return true;
  }
}

// Counts and types of a data-movement call are valid MPI.
bool movement_args_valid(int scount, MPI_Datatype stype, int rcount, MPI_Datatype rtype) {
  return scount >= 0 && rcount >= 0 && stype != MPI_DATATYPE_NULL && rtype != MPI_DATATYPE_NULL;
}

BufferFault check_buffers(const BufferSide& send, const BufferSide& recv, const BufferRules& rules) {
  const bool send_in_place = send.significant && send.buf == MPI_IN_PLACE;
  const bool recv_in_place = recv.significant && recv.buf == MPI_IN_PLACE;
  if (send_in_place && !rules.send_may_be_in_place)
    return {rules.send_in_place_class, "sendbuf is MPI_IN_PLACE, which this call does not allow on this rank"};
  if (recv_in_place && !rules.recv_may_be_in_place)
    return {rules.recv_in_place_class, "recvbuf is MPI_IN_PLACE, which this call does not allow on this rank"};
  if (send.significant && !send_in_place && null_buffer(send.buf, send.count, send.type))
    return {MPI_ERR_BUFFER, "sendbuf is NULL with a non-zero count"};
  if (recv.significant && !recv_in_place && null_buffer(recv.buf, recv.count, recv.type))
    return {MPI_ERR_BUFFER, "recvbuf is NULL with a non-zero count"};
  if (send.significant && recv.significant && !send_in_place && !recv_in_place && overlap(send, recv))
    return {rules.overlap_class, "sendbuf and recvbuf overlap (MPI requires distinct buffers or MPI_IN_PLACE)"};
  return {};
}

BufferFault check_p2p_buffer(const void* buf, int count, MPI_Datatype type) {
  // Open MPI itself reports NULL (MPI_ERR_BUFFER) but crashes on
  // MPI_IN_PLACE, which is (void*)1.
  if (buf == MPI_IN_PLACE && count > 0)
    return {MPI_ERR_BUFFER, "buffer is MPI_IN_PLACE, which point-to-point calls do not allow"};
  if (null_buffer(buf, count, type)) return {MPI_ERR_BUFFER, "buffer is NULL with a non-zero count"};
  return {};
}

BufferFault allreduce_buffers(const void* sbuf, const void* rbuf, int count, MPI_Datatype type) {
  BufferRules r;
  r.send_may_be_in_place = true;
  r.recv_in_place_class = MPI_ERR_BUFFER;
  return check_buffers({sbuf, count, type}, {rbuf, count, type}, r);
}

BufferFault reduce_buffers(const void* sbuf, const void* rbuf, int count, MPI_Datatype type, bool root) {
  BufferRules r;
  r.send_may_be_in_place = root;
  r.overlap_class = MPI_ERR_ARG;
  return check_buffers({sbuf, count, type}, {rbuf, count, type, root}, r);
}

BufferFault reduce_scatter_buffers(const void* sbuf, const void* rbuf, int rcount, int size, MPI_Datatype type) {
  BufferRules r;
  r.send_may_be_in_place = true;
  return check_buffers({sbuf, int64_t{rcount} * size, type}, {rbuf, rcount, type}, r);
}

BufferFault bcast_buffer(const void* buf, int count, MPI_Datatype type) {
  return check_buffers({buf, count, type}, {nullptr, 0, type, false}, BufferRules{});
}

BufferFault gather_buffers(const void* sbuf, int scount, MPI_Datatype stype, const void* rbuf, int rcount,
                           MPI_Datatype rtype, int size, bool root) {
  BufferRules r;
  r.send_may_be_in_place = root;
  return check_buffers({sbuf, scount, stype}, {rbuf, int64_t{rcount} * size, rtype, root}, r);
}

BufferFault scatter_buffers(const void* sbuf, int scount, MPI_Datatype stype, const void* rbuf, int rcount,
                            MPI_Datatype rtype, int size, bool root) {
  BufferRules r;
  r.recv_may_be_in_place = root;
  return check_buffers({sbuf, int64_t{scount} * size, stype, root}, {rbuf, rcount, rtype}, r);
}

BufferFault all_to_all_buffers(const void* sbuf, int scount, MPI_Datatype stype, const void* rbuf, int rcount,
                               MPI_Datatype rtype, int size, int send_blocks) {
  BufferRules r;
  r.send_may_be_in_place = true;
  return check_buffers({sbuf, int64_t{scount} * send_blocks, stype}, {rbuf, int64_t{rcount} * size, rtype}, r);
}

int reject_arguments(CallScope& scope, MPI_Comm comm, Call call, const BufferFault& fault, uint64_t bytes) {
  scope.native(Reason::BadBuffer, bytes, comm);
  State& st = state();
  char msg[MPI_MAX_ERROR_STRING];
  std::snprintf(msg, sizeof msg, "%s on rank %d: invalid arguments: %s (rejected by ACCL before any transfer)",
                call_name(call), st.world_rank, fault.what);
  ACCL_LOG_INFO("{}", msg);
  return raise_class(comm, fault.mpi_class, msg);
}

}  // namespace accl::pmpi
