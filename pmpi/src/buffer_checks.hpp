// SPDX-License-Identifier: Apache-2.0
//
// Buffer arguments of offloaded calls (buffer_checks.cpp): NULL, misplaced
// MPI_IN_PLACE and overlapping buffers, refused with MPI's error class.
#pragma once

#include "calls.hpp"
#include "stats.hpp"

namespace accl::pmpi {

// One side of a call as this rank passes it; `significant`: MPI reads it on
// this rank (a non-root's receive side of MPI_Reduce is not).
struct BufferSide {
  const void* buf = nullptr;
  int64_t count = 0;  // items of `type` (a rooted side may hold size x count)
  MPI_Datatype type = MPI_DATATYPE_NULL;
  bool significant = true;
};
// What the call allows on this rank, and the class of each fault where native
// Open MPI reports it (see buffer_checks.cpp).
struct BufferRules {
  bool send_may_be_in_place = false;
  bool recv_may_be_in_place = false;
  int send_in_place_class = MPI_ERR_ARG;
  int recv_in_place_class = MPI_ERR_ARG;
  int overlap_class = MPI_ERR_BUFFER;
};
struct BufferFault {
  int mpi_class = MPI_SUCCESS;  // MPI_SUCCESS: nothing wrong
  const char* what = "";
  explicit operator bool() const { return mpi_class != MPI_SUCCESS; }
};
// Whether the buffer checks apply to a collective decided `why`: the layer is
// in the path and every other argument is valid MPI (`others_valid`: counts,
// types, op), so native MPI would not report anything first.
bool buffers_checked(Reason why, MPI_Comm comm, bool others_valid);
bool movement_args_valid(int scount, MPI_Datatype stype, int rcount, MPI_Datatype rtype);
BufferFault check_buffers(const BufferSide& send, const BufferSide& recv, const BufferRules& rules);
BufferFault check_p2p_buffer(const void* buf, int count, MPI_Datatype type);
// The one test on a point-to-point call's fast path: NULL or MPI_IN_PLACE.
inline bool suspect_buffer(const void* buf) { return buf == nullptr || buf == MPI_IN_PLACE; }
// The rules of each collective at this rank (`root`: this rank is the root).
BufferFault allreduce_buffers(const void* sbuf, const void* rbuf, int count, MPI_Datatype type);
BufferFault reduce_buffers(const void* sbuf, const void* rbuf, int count, MPI_Datatype type, bool root);
BufferFault reduce_scatter_buffers(const void* sbuf, const void* rbuf, int rcount, int size, MPI_Datatype type);
BufferFault bcast_buffer(const void* buf, int count, MPI_Datatype type);
BufferFault gather_buffers(const void* sbuf, int scount, MPI_Datatype stype, const void* rbuf, int rcount,
                           MPI_Datatype rtype, int size, bool root);
BufferFault scatter_buffers(const void* sbuf, int scount, MPI_Datatype stype, const void* rbuf, int rcount,
                            MPI_Datatype rtype, int size, bool root);
// Allgather (send_blocks 1) and alltoall (send_blocks = size).
BufferFault all_to_all_buffers(const void* sbuf, int scount, MPI_Datatype stype, const void* rbuf, int rcount,
                               MPI_Datatype rtype, int size, int send_blocks);
// Accounts the call as refused (Reason::BadBuffer) and raises the fault's
// class through the communicator's error handler; nothing is transferred.
int reject_arguments(CallScope& scope, MPI_Comm comm, Call call, const BufferFault& fault, uint64_t bytes);

}  // namespace accl::pmpi
