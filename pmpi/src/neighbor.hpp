// SPDX-License-Identifier: Apache-2.0
//
// Neighbourhood collectives and MPI_Alltoallw: exchanges of per-peer blocks
// run as device sends and receives on the communicator's ACCL communicator
// (exchange.cpp), over the topology's neighbours or over all ranks
// (neighbor.cpp, C entry points in neighbor_entry.cpp).
#pragma once

#include "calls.hpp"

#include <memory>
#include <vector>

namespace accl::pmpi {

struct CommState;

// Device tags of these exchanges: above every tag of the point-to-point
// engine (its sequence numbers and kEnvTag stay below 0x7FFFFFF1) and below
// the composed collectives' (kComposedTagBase, 0x9xxxxxxx), so neither user
// messages nor other collectives can match them. A block's tag tells apart the
// blocks two ranks exchange in one call (Cart: the direction), and the
// device matches equal tags from one peer in order.
constexpr uint32_t kNeighborTag = 0x80000000u;   // + index of the Cart direction (0 for graphs)
constexpr uint32_t kAlltoallwTag = 0x80010000u;

// At most this many device sends and receives per rank and call: they hold
// device call slots (64, of which the point-to-point budget takes 48) until
// the peers' halves arrive. A call above it on any member runs natively.
constexpr int kMaxExchangeCalls = 32;

// This rank's neighbours in a topology communicator, in the order of the
// blocks of the neighbourhood collectives. MPI_PROC_NULL (a missing Cart
// neighbour) moves nothing and leaves its block untouched.
struct Neighborhood {
  std::vector<int> sources;
  std::vector<int> destinations;
  std::vector<uint32_t> source_tags;       // device tag of the block from sources[k]
  std::vector<uint32_t> destination_tags;  // device tag of the block to destinations[j]
  int max_device_calls = 0;                // the largest over all members (agreed)
};

// One block of an exchange: `count` items of `type` at `buf`, to or from
// `peer` (MPI_PROC_NULL: none; this rank: copied on the host).
struct Transfer {
  int peer = MPI_PROC_NULL;
  uint32_t tag = 0;
  void* buf = nullptr;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  uint64_t bytes = 0;  // count x type size; both sides of an edge agree (MPI rule)
};

struct Exchange {
  std::vector<Transfer> sends;
  std::vector<Transfer> recvs;
  // The send blocks live in the receive buffer (MPI_IN_PLACE): staged
  // before any receive can land.
  bool in_place = false;
  uint64_t send_bytes() const;
};

// Runs `x` on `cs` (offload already decided and accounted): blocking when
// `req` is null, else a shadow request completed by the Wait/Test family.
// Errors go through the communicator's error handler.
int exchange_run(Call call, MPI_Comm comm, CommState* cs, const Exchange& x, MPI_Request* req);

// The C bodies behind MPI_(I)neighbor_* and MPI_(I)alltoallw (neighbor.cpp);
// req == nullptr means blocking. Displacements: `idispls` in items of the
// block's type (v forms), `bdispls` in bytes (w forms; Alltoallw's are int).
int coll_neighbor_allgather(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                            MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
int coll_neighbor_allgatherv(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                             const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
                             MPI_Request* req);
int coll_neighbor_alltoall(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                           MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
int coll_neighbor_alltoallv(Call call, const void* sbuf, const int scounts[], const int sdispls[],
                            MPI_Datatype stype, void* rbuf, const int rcounts[], const int rdispls[],
                            MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req);
int coll_neighbor_alltoallw(Call call, const void* sbuf, const int scounts[], const MPI_Aint sdispls[],
                            const MPI_Datatype stypes[], void* rbuf, const int rcounts[], const MPI_Aint rdispls[],
                            const MPI_Datatype rtypes[], MPI_Comm comm, MPI_Request* req);
int coll_alltoallw(Call call, const void* sbuf, const int scounts[], const int sdispls[],
                   const MPI_Datatype stypes[], void* rbuf, const int rcounts[], const int rdispls[],
                   const MPI_Datatype rtypes[], MPI_Comm comm, MPI_Request* req);

}  // namespace accl::pmpi
