// SPDX-License-Identifier: Apache-2.0
//
// Fortran entry points of the neighbourhood collectives and MPI_Alltoallw
// (see fortran.cpp for how the bindings work).
#include "fortran.hpp"

#include <mutex>
#include <set>

using namespace accl::pmpi;
using namespace accl::pmpi::fortran;

// --- neighbourhood collectives and alltoallw (neighbor.cpp) -------------------------------
namespace {
// Blocks of a neighbourhood call this rank receives and sends (erroneous
// comms: 0, and the C call reports the error).
void neighbor_degrees(MPI_Comm c, int* in, int* out) {
  int kind = MPI_UNDEFINED, weighted = 0;
  *in = *out = 0;
  if (c == MPI_COMM_NULL || PMPI_Topo_test(c, &kind) != MPI_SUCCESS) return;
  if (kind == MPI_CART) {
    PMPI_Cartdim_get(c, in);
    *in = *out = 2 * *in;
  } else if (kind == MPI_GRAPH) {
    int rank = 0;
    PMPI_Comm_rank(c, &rank);
    PMPI_Graph_neighbors_count(c, rank, in);
    *out = *in;
  } else if (kind == MPI_DIST_GRAPH) {
    PMPI_Dist_graph_neighbors_count(c, in, out, &weighted);
  }
}
// Blocks of MPI_Alltoallw: one per rank of the (remote) group.
int alltoallw_blocks(MPI_Comm c) {
  int inter = 0, n = 0;
  if (c == MPI_COMM_NULL) return 0;
  PMPI_Comm_test_inter(c, &inter);
  if (inter) PMPI_Comm_remote_size(c, &n);
  else PMPI_Comm_size(c, &n);
  return n;
}
std::vector<MPI_Datatype> types_f2c(int n, const F* f) {
  std::vector<MPI_Datatype> c(static_cast<size_t>(n > 0 ? n : 0));
  for (size_t i = 0; i < c.size(); ++i) c[i] = PMPI_Type_f2c(f[i]);
  return c;
}
// The C type arrays of a non-blocking w form must outlive the call: Open
// MPI keeps their addresses in a native request that involves a derived
// type and releases the types through them on completion (a freed array
// crashed MPI_Waitall; Open MPI 4.1's own Fortran bindings free theirs at
// once). Arrays are kept once per distinct content, so a program that
// repeats its calls holds a fixed amount.
const MPI_Datatype* lasting_types(std::vector<MPI_Datatype>&& types) {
  static std::mutex mu;
  static std::set<std::vector<MPI_Datatype>> kept;
  std::lock_guard lock(mu);
  return kept.insert(std::move(types)).first->data();
}
}  // namespace

#define FORTRAN_NEIGHBOR(lname, UNAME, cfn, ilname, IUNAME, icfn)                               \
  FORTRAN_PAIR(lname, UNAME, cfn, ilname, IUNAME, icfn,                                        \
               (void* sbuf, F* scount, F* stype, void* rbuf, F* rcount, F* rtype, F* c),       \
               (fbuf(sbuf), *scount, type(stype), fbuf(rbuf), *rcount, type(rtype), comm(c)))
FORTRAN_NEIGHBOR(mpi_neighbor_allgather, MPI_NEIGHBOR_ALLGATHER, MPI_Neighbor_allgather, mpi_ineighbor_allgather,
                 MPI_INEIGHBOR_ALLGATHER, MPI_Ineighbor_allgather)
FORTRAN_NEIGHBOR(mpi_neighbor_alltoall, MPI_NEIGHBOR_ALLTOALL, MPI_Neighbor_alltoall, mpi_ineighbor_alltoall,
                 MPI_INEIGHBOR_ALLTOALL, MPI_Ineighbor_alltoall)
FORTRAN_PAIR(mpi_neighbor_allgatherv, MPI_NEIGHBOR_ALLGATHERV, MPI_Neighbor_allgatherv, mpi_ineighbor_allgatherv,
             MPI_INEIGHBOR_ALLGATHERV, MPI_Ineighbor_allgatherv,
             (void* sbuf, F* scount, F* stype, void* rbuf, F* rcounts, F* rdispls, F* rtype, F* c),
             (fbuf(sbuf), *scount, type(stype), fbuf(rbuf), rcounts, rdispls, type(rtype), comm(c)))
FORTRAN_PAIR(mpi_neighbor_alltoallv, MPI_NEIGHBOR_ALLTOALLV, MPI_Neighbor_alltoallv, mpi_ineighbor_alltoallv,
             MPI_INEIGHBOR_ALLTOALLV, MPI_Ineighbor_alltoallv,
             (void* sbuf, F* scounts, F* sdispls, F* stype, void* rbuf, F* rcounts, F* rdispls, F* rtype, F* c),
             (fbuf(sbuf), scounts, sdispls, type(stype), fbuf(rbuf), rcounts, rdispls, type(rtype), comm(c)))

// The w forms: type arrays translated, one per block of the topology
// (Open MPI 4.1's own bindings take the communicator size instead, which
// misreads the arrays of a neighbourhood larger than the communicator).
FORTRAN(mpi_neighbor_alltoallw, MPI_NEIGHBOR_ALLTOALLW,
        (void* sbuf, F* scounts, MPI_Aint* sdispls, F* stypes, void* rbuf, F* rcounts, MPI_Aint* rdispls,
         F* rtypes, F* c, F* ierr),
        {
          int in = 0, out = 0;
          neighbor_degrees(comm(c), &in, &out);
          const std::vector<MPI_Datatype> st = types_f2c(out, stypes), rt = types_f2c(in, rtypes);
          *ierr = MPI_Neighbor_alltoallw(fbuf(sbuf), scounts, sdispls, st.data(), fbuf(rbuf), rcounts, rdispls,
                                         rt.data(), comm(c));
        })
FORTRAN(mpi_ineighbor_alltoallw, MPI_INEIGHBOR_ALLTOALLW,
        (void* sbuf, F* scounts, MPI_Aint* sdispls, F* stypes, void* rbuf, F* rcounts, MPI_Aint* rdispls,
         F* rtypes, F* c, F* req, F* ierr),
        {
          int in = 0, out = 0;
          neighbor_degrees(comm(c), &in, &out);
          const MPI_Datatype* st = lasting_types(types_f2c(out, stypes));
          const MPI_Datatype* rt = lasting_types(types_f2c(in, rtypes));
          *ierr = with_new_request(req, [&](MPI_Request* r) {
            return MPI_Ineighbor_alltoallw(fbuf(sbuf), scounts, sdispls, st, fbuf(rbuf), rcounts, rdispls, rt,
                                           comm(c), r);
          });
        })
FORTRAN(mpi_alltoallw, MPI_ALLTOALLW,
        (void* sbuf, F* scounts, F* sdispls, F* stypes, void* rbuf, F* rcounts, F* rdispls, F* rtypes, F* c,
         F* ierr),
        {
          const int n = alltoallw_blocks(comm(c));
          void* s = fbuf(sbuf);
          // In place the send types are not significant (and may be anything).
          const std::vector<MPI_Datatype> st = types_f2c(s == MPI_IN_PLACE ? 0 : n, stypes), rt = types_f2c(n, rtypes);
          *ierr = MPI_Alltoallw(s, scounts, sdispls, st.data(), fbuf(rbuf), rcounts, rdispls, rt.data(), comm(c));
        })
FORTRAN(mpi_ialltoallw, MPI_IALLTOALLW,
        (void* sbuf, F* scounts, F* sdispls, F* stypes, void* rbuf, F* rcounts, F* rdispls, F* rtypes, F* c,
         F* req, F* ierr),
        {
          const int n = alltoallw_blocks(comm(c));
          void* s = fbuf(sbuf);
          const MPI_Datatype* st = lasting_types(types_f2c(s == MPI_IN_PLACE ? 0 : n, stypes));
          const MPI_Datatype* rt = lasting_types(types_f2c(n, rtypes));
          *ierr = with_new_request(req, [&](MPI_Request* r) {
            return MPI_Ialltoallw(s, scounts, sdispls, st, fbuf(rbuf), rcounts, rdispls, rt, comm(c), r);
          });
        })
