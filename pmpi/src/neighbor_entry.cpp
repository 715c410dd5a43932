// SPDX-License-Identifier: Apache-2.0
//
// C entry points of the neighbourhood collectives and MPI_Alltoallw
// (neighbor.cpp). As for every collective, the first line is the whole cost
// of interposition when offload is off.
#include "collectives.hpp"
#include "neighbor.hpp"
#include "state.hpp"

using namespace accl::pmpi;

ACCL_PMPI_EXPORT int MPI_Neighbor_allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                                            int rcount, MPI_Datatype rtype, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Neighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  return coll_neighbor_allgather(Call::NeighborAllgather, sbuf, scount, stype, rbuf, rcount, rtype, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ineighbor_allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                                             int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Ineighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
  return coll_neighbor_allgather(Call::IneighborAllgather, sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
}

ACCL_PMPI_EXPORT int MPI_Neighbor_allgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                                             const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                                             MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only))
    return PMPI_Neighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, rdispls, rtype, comm);
  return coll_neighbor_allgatherv(Call::NeighborAllgatherv, sbuf, scount, stype, rbuf, rcounts, rdispls, rtype, comm,
                                  nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ineighbor_allgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                                              const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                                              MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Ineighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, rdispls, rtype, comm, req));
  return coll_neighbor_allgatherv(Call::IneighborAllgatherv, sbuf, scount, stype, rbuf, rcounts, rdispls, rtype,
                                  comm, req);
}

ACCL_PMPI_EXPORT int MPI_Neighbor_alltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                                           int rcount, MPI_Datatype rtype, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Neighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  return coll_neighbor_alltoall(Call::NeighborAlltoall, sbuf, scount, stype, rbuf, rcount, rtype, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ineighbor_alltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                                            int rcount, MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Ineighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req));
  return coll_neighbor_alltoall(Call::IneighborAlltoall, sbuf, scount, stype, rbuf, rcount, rtype, comm, req);
}

ACCL_PMPI_EXPORT int MPI_Neighbor_alltoallv(const void* sbuf, const int scounts[], const int sdispls[],
                                            MPI_Datatype stype, void* rbuf, const int rcounts[],
                                            const int rdispls[], MPI_Datatype rtype, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only))
    return PMPI_Neighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
  return coll_neighbor_alltoallv(Call::NeighborAlltoallv, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls,
                                 rtype, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ineighbor_alltoallv(const void* sbuf, const int scounts[], const int sdispls[],
                                             MPI_Datatype stype, void* rbuf, const int rcounts[],
                                             const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
                                             MPI_Request* req) {
  NONBLOCKING_GUARD(
      PMPI_Ineighbor_alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req));
  return coll_neighbor_alltoallv(Call::IneighborAlltoallv, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls,
                                 rtype, comm, req);
}

ACCL_PMPI_EXPORT int MPI_Neighbor_alltoallw(const void* sbuf, const int scounts[], const MPI_Aint sdispls[],
                                            const MPI_Datatype stypes[], void* rbuf, const int rcounts[],
                                            const MPI_Aint rdispls[], const MPI_Datatype rtypes[],
                                            MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only))
    return PMPI_Neighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm);
  return coll_neighbor_alltoallw(Call::NeighborAlltoallw, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls,
                                 rtypes, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ineighbor_alltoallw(const void* sbuf, const int scounts[], const MPI_Aint sdispls[],
                                             const MPI_Datatype stypes[], void* rbuf, const int rcounts[],
                                             const MPI_Aint rdispls[], const MPI_Datatype rtypes[],
                                             MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(
      PMPI_Ineighbor_alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, req));
  return coll_neighbor_alltoallw(Call::IneighborAlltoallw, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls,
                                 rtypes, comm, req);
}

ACCL_PMPI_EXPORT int MPI_Alltoallw(const void* sbuf, const int scounts[], const int sdispls[],
                                   const MPI_Datatype stypes[], void* rbuf, const int rcounts[],
                                   const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only))
    return PMPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm);
  return coll_alltoallw(Call::Alltoallw, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm,
                        nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ialltoallw(const void* sbuf, const int scounts[], const int sdispls[],
                                    const MPI_Datatype stypes[], void* rbuf, const int rcounts[],
                                    const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm,
                                    MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Ialltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, req));
  return coll_alltoallw(Call::Ialltoallw, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm,
                        req);
}
