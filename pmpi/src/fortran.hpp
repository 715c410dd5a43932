// SPDX-License-Identifier: Apache-2.0
//
// What the Fortran entry points (fortran.cpp, fortran_v.cpp) share: handle
// and sentinel translation and the macro that defines one entry point in the
// four usual manglings. See fortran.cpp for why the layer has its own.
#pragma once

#include "requests.hpp"

#include <utility>

extern "C" {
// Fortran sentinels: common blocks defined by libmpi.
extern int mpi_fortran_in_place_;
extern int mpi_fortran_bottom_;
}

namespace accl::pmpi::fortran {

using F = MPI_Fint;

inline void* fbuf(void* p) {
  if (p == &mpi_fortran_in_place_) return MPI_IN_PLACE;
  if (p == &mpi_fortran_bottom_) return MPI_BOTTOM;
  return p;
}

inline MPI_Comm comm(const F* f) { return PMPI_Comm_f2c(*f); }
inline MPI_Datatype type(const F* f) { return PMPI_Type_f2c(*f); }
inline MPI_Op op(const F* f) { return PMPI_Op_f2c(*f); }

inline MPI_Request req_f2c(F f) {
  if (ShadowReq* r = shadow_f2c(f)) return as_request(r);
  return PMPI_Request_f2c(f);
}
inline F req_c2f(MPI_Request r) {
  if (is_shadow(r)) return shadow_c2f(as_shadow(r));
  return PMPI_Request_c2f(r);
}

// Runs `fn` with a place for a new C handle and hands the handle out as a
// Fortran integer if the call succeeded.
template <typename Handle, typename ToFortran, typename Fn>
int with_new_handle(F* fhandle, Handle null_handle, ToFortran to_fortran, Fn&& fn) {
  Handle h = null_handle;
  const int rc = fn(&h);
  if (rc == MPI_SUCCESS) *fhandle = to_fortran(h);
  return rc;
}
template <typename Fn>
int with_new_request(F* freq, Fn&& fn) {
  return with_new_handle(freq, MPI_REQUEST_NULL, req_c2f, std::forward<Fn>(fn));
}

}  // namespace accl::pmpi::fortran

// One Fortran entry point in its four manglings.
#define FORTRAN(lname, UNAME, params, ...)                                                   \
  ACCL_PMPI_EXPORT void lname##_ params __VA_ARGS__                                          \
  ACCL_PMPI_EXPORT void lname params __attribute__((alias(#lname "_")));                     \
  ACCL_PMPI_EXPORT void lname##__ params __attribute__((alias(#lname "_")));                 \
  ACCL_PMPI_EXPORT void UNAME params __attribute__((alias(#lname "_")));

// A blocking entry point and its MPI_I* form from one list of parameters
// and one of C arguments (each in parentheses): the I form adds the request
// and passes the C call a new one (with_new_request).
#define FORTRAN_UNPAREN(...) __VA_ARGS__
#define FORTRAN_PAIR(lname, UNAME, cfn, ilname, IUNAME, icfn, params, args)                         \
  FORTRAN(lname, UNAME, (FORTRAN_UNPAREN params, F* ierr), { *ierr = cfn(FORTRAN_UNPAREN args); })   \
  FORTRAN(ilname, IUNAME, (FORTRAN_UNPAREN params, F* req, F* ierr), {                                \
    *ierr = with_new_request(req, [&](MPI_Request* r) { return icfn(FORTRAN_UNPAREN args, r); });     \
  })
