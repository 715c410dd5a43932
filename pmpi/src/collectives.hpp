// SPDX-License-Identifier: Apache-2.0
//
// Offloaded collectives, blocking and MPI_I*: req == nullptr means blocking.
// Run by the device as one call of its own (coll_direct.hpp;
// collectives_reduce.cpp, collectives_movement.cpp):
#pragma once

#include "calls.hpp"

namespace accl::pmpi {

struct CommState;
struct ShadowReq;

int coll_bcast(Call call, void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* req);
int coll_reduce(Call call, const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request* req);
int coll_allreduce(Call call, const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request* req);
int coll_gather(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req);
int coll_scatter(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req);
int coll_allgather(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                   MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
int coll_alltoall(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
int coll_reduce_scatter(Call call, const void* sbuf, void* rbuf, int rcount, const int* rcounts, MPI_Datatype type,
                        MPI_Op op, MPI_Comm comm, MPI_Request* req);
int coll_barrier(Call call, MPI_Comm comm, MPI_Request* req);

// Composed from device sends, receives and combines (collectives_v.cpp,
// collectives_scan.cpp; see coll_compose.hpp).
int coll_allgatherv(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int* rcounts,
                    const int* displs, MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
int coll_gatherv(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int* rcounts,
                 const int* displs, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req);
int coll_scatterv(Call call, const void* sbuf, const int* scounts, const int* displs, MPI_Datatype stype, void* rbuf,
                  int rcount, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req);
int coll_alltoallv(Call call, const void* sbuf, const int* scounts, const int* sdispls, MPI_Datatype stype,
                   void* rbuf, const int* rcounts, const int* rdispls, MPI_Datatype rtype, MPI_Comm comm,
                   MPI_Request* req);
// MPI_Scan (exclusive false) and MPI_Exscan.
int coll_scan(Call call, const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
              MPI_Request* req, bool exclusive);
// MPI_Reduce_scatter with unequal counts.
int coll_reduce_scatter_v(Call call, const void* sbuf, void* rbuf, const int* rcounts, MPI_Datatype type, MPI_Op op,
                          MPI_Comm comm, MPI_Request* req);

// Waits for the device request of a blocking offloaded collective, driving
// the layer's and Open MPI's progress between slices (no lock held).
void wait_collective(Request& dev);

// The shadow request of a non-blocking offloaded collective whose device
// work ends with `dev` (mu held; null: none): the caller moves what the
// call holds into it, then starts it with start_collective_request().
ShadowReq* collective_request(Call call, MPI_Comm comm, CommState* cs, RequestPtr dev);
// Puts `r` in flight and hands it to the application as *req (mu held).
void start_collective_request(ShadowReq* r, MPI_Request* req);

// Whether the caller at `return_address` is Open MPI itself (its components
// call some MPI_* functions): non-blocking collectives it starts stay native.
bool from_open_mpi(void* return_address);

}  // namespace accl::pmpi

// The first line of a non-blocking collective's entry point.
#define NONBLOCKING_GUARD(native_call) \
  if (ACCL_LIKELY(g_native_only) || from_open_mpi(__builtin_return_address(0))) return native_call
