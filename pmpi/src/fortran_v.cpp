// SPDX-License-Identifier: Apache-2.0
//
// Fortran entry points of the v-collectives and scans (C side:
// collectives_v.cpp, collectives_scan.cpp). Fortran INTEGER arrays of
// counts and displacements are C int arrays (MPI_Fint is int here).
#include "fortran.hpp"

using namespace accl::pmpi;
using namespace accl::pmpi::fortran;

static_assert(sizeof(F) == sizeof(int), "count and displacement arrays pass through as int[]");

FORTRAN(mpi_allgatherv, MPI_ALLGATHERV,
        (void* sbuf, F* scount, F* stype, void* rbuf, F* rcounts, F* displs, F* rtype, F* c, F* ierr), {
          *ierr = MPI_Allgatherv(fbuf(sbuf), *scount, type(stype), fbuf(rbuf), rcounts, displs, type(rtype), comm(c));
        })
FORTRAN(mpi_iallgatherv, MPI_IALLGATHERV,
        (void* sbuf, F* scount, F* stype, void* rbuf, F* rcounts, F* displs, F* rtype, F* c, F* req, F* ierr), {
          *ierr = with_new_request(req, [&](MPI_Request* r) {
            return MPI_Iallgatherv(fbuf(sbuf), *scount, type(stype), fbuf(rbuf), rcounts, displs, type(rtype),
                                   comm(c), r);
          });
        })
FORTRAN(mpi_gatherv, MPI_GATHERV,
        (void* sbuf, F* scount, F* stype, void* rbuf, F* rcounts, F* displs, F* rtype, F* root, F* c, F* ierr), {
          *ierr = MPI_Gatherv(fbuf(sbuf), *scount, type(stype), fbuf(rbuf), rcounts, displs, type(rtype), *root,
                              comm(c));
        })
FORTRAN(mpi_igatherv, MPI_IGATHERV,
        (void* sbuf, F* scount, F* stype, void* rbuf, F* rcounts, F* displs, F* rtype, F* root, F* c, F* req,
         F* ierr),
        {
          *ierr = with_new_request(req, [&](MPI_Request* r) {
            return MPI_Igatherv(fbuf(sbuf), *scount, type(stype), fbuf(rbuf), rcounts, displs, type(rtype), *root,
                                comm(c), r);
          });
        })
FORTRAN(mpi_scatterv, MPI_SCATTERV,
        (void* sbuf, F* scounts, F* displs, F* stype, void* rbuf, F* rcount, F* rtype, F* root, F* c, F* ierr), {
          *ierr = MPI_Scatterv(fbuf(sbuf), scounts, displs, type(stype), fbuf(rbuf), *rcount, type(rtype), *root,
                               comm(c));
        })
FORTRAN(mpi_iscatterv, MPI_ISCATTERV,
        (void* sbuf, F* scounts, F* displs, F* stype, void* rbuf, F* rcount, F* rtype, F* root, F* c, F* req,
         F* ierr),
        {
          *ierr = with_new_request(req, [&](MPI_Request* r) {
            return MPI_Iscatterv(fbuf(sbuf), scounts, displs, type(stype), fbuf(rbuf), *rcount, type(rtype), *root,
                                 comm(c), r);
          });
        })
FORTRAN(mpi_alltoallv, MPI_ALLTOALLV,
        (void* sbuf, F* scounts, F* sdispls, F* stype, void* rbuf, F* rcounts, F* rdispls, F* rtype, F* c,
         F* ierr),
        {
          *ierr = MPI_Alltoallv(fbuf(sbuf), scounts, sdispls, type(stype), fbuf(rbuf), rcounts, rdispls,
                                type(rtype), comm(c));
        })
FORTRAN(mpi_ialltoallv, MPI_IALLTOALLV,
        (void* sbuf, F* scounts, F* sdispls, F* stype, void* rbuf, F* rcounts, F* rdispls, F* rtype, F* c,
         F* req, F* ierr),
        {
          *ierr = with_new_request(req, [&](MPI_Request* r) {
            return MPI_Ialltoallv(fbuf(sbuf), scounts, sdispls, type(stype), fbuf(rbuf), rcounts, rdispls,
                                  type(rtype), comm(c), r);
          });
        })

#define FORTRAN_SCAN(lname, UNAME, cfn)                                                                 \
  FORTRAN(lname, UNAME, (void* sbuf, void* rbuf, F* count, F* dt, F* o, F* c, F* ierr), {              \
    *ierr = cfn(fbuf(sbuf), fbuf(rbuf), *count, type(dt), op(o), comm(c));                              \
  })
#define FORTRAN_ISCAN(lname, UNAME, cfn)                                                                \
  FORTRAN(lname, UNAME, (void* sbuf, void* rbuf, F* count, F* dt, F* o, F* c, F* req, F* ierr), {      \
    *ierr = with_new_request(                                                                           \
        req, [&](MPI_Request* r) { return cfn(fbuf(sbuf), fbuf(rbuf), *count, type(dt), op(o), comm(c), r); }); \
  })
FORTRAN_SCAN(mpi_scan, MPI_SCAN, MPI_Scan)
FORTRAN_SCAN(mpi_exscan, MPI_EXSCAN, MPI_Exscan)
FORTRAN_ISCAN(mpi_iscan, MPI_ISCAN, MPI_Iscan)
FORTRAN_ISCAN(mpi_iexscan, MPI_IEXSCAN, MPI_Iexscan)
