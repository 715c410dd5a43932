// SPDX-License-Identifier: Apache-2.0
//
// Fortran entry points of the v-collectives and scans (C side:
// collectives_v.cpp, collectives_scan.cpp). Fortran INTEGER arrays of
// counts and displacements are C int arrays (MPI_Fint is int here).
#include "fortran.hpp"

using namespace accl::pmpi;
using namespace accl::pmpi::fortran;

static_assert(sizeof(F) == sizeof(int), "count and displacement arrays pass through as int[]");

FORTRAN_PAIR(mpi_allgatherv, MPI_ALLGATHERV, MPI_Allgatherv, mpi_iallgatherv, MPI_IALLGATHERV, MPI_Iallgatherv,
             (void* sbuf, F* scount, F* stype, void* rbuf, F* rcounts, F* displs, F* rtype, F* c),
             (fbuf(sbuf), *scount, type(stype), fbuf(rbuf), rcounts, displs, type(rtype), comm(c)))
FORTRAN_PAIR(mpi_gatherv, MPI_GATHERV, MPI_Gatherv, mpi_igatherv, MPI_IGATHERV, MPI_Igatherv,
             (void* sbuf, F* scount, F* stype, void* rbuf, F* rcounts, F* displs, F* rtype, F* root, F* c),
             (fbuf(sbuf), *scount, type(stype), fbuf(rbuf), rcounts, displs, type(rtype), *root, comm(c)))
FORTRAN_PAIR(mpi_scatterv, MPI_SCATTERV, MPI_Scatterv, mpi_iscatterv, MPI_ISCATTERV, MPI_Iscatterv,
             (void* sbuf, F* scounts, F* displs, F* stype, void* rbuf, F* rcount, F* rtype, F* root, F* c),
             (fbuf(sbuf), scounts, displs, type(stype), fbuf(rbuf), *rcount, type(rtype), *root, comm(c)))
FORTRAN_PAIR(mpi_alltoallv, MPI_ALLTOALLV, MPI_Alltoallv, mpi_ialltoallv, MPI_IALLTOALLV, MPI_Ialltoallv,
             (void* sbuf, F* scounts, F* sdispls, F* stype, void* rbuf, F* rcounts, F* rdispls, F* rtype, F* c),
             (fbuf(sbuf), scounts, sdispls, type(stype), fbuf(rbuf), rcounts, rdispls, type(rtype), comm(c)))

#define FORTRAN_SCAN(lname, UNAME, cfn, ilname, IUNAME, icfn)                                  \
  FORTRAN_PAIR(lname, UNAME, cfn, ilname, IUNAME, icfn,                                        \
               (void* sbuf, void* rbuf, F* count, F* dt, F* o, F* c),                          \
               (fbuf(sbuf), fbuf(rbuf), *count, type(dt), op(o), comm(c)))
FORTRAN_SCAN(mpi_scan, MPI_SCAN, MPI_Scan, mpi_iscan, MPI_ISCAN, MPI_Iscan)
FORTRAN_SCAN(mpi_exscan, MPI_EXSCAN, MPI_Exscan, mpi_iexscan, MPI_IEXSCAN, MPI_Iexscan)
