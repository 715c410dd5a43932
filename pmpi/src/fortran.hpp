// SPDX-License-Identifier: Apache-2.0
//
// What the Fortran entry points share (fortran.cpp, fortran_neighbor.cpp):
// libmpi's sentinels, handle translation and the FORTRAN() macro that
// exports one entry point in its four manglings.
#pragma once

#include "requests.hpp"

#include <utility>
#include <vector>

extern "C" {
// Fortran sentinels: common blocks defined by libmpi.
extern int mpi_fortran_in_place_;
extern int mpi_fortran_bottom_;
extern int mpi_fortran_status_ignore_;
extern int mpi_fortran_statuses_ignore_;
}

namespace accl::pmpi::fortran_abi {

using F = MPI_Fint;
// INTEGER status(MPI_STATUS_SIZE): Open MPI's Fortran status is the C struct.
constexpr int kStatusInts = static_cast<int>(sizeof(MPI_Status) / sizeof(MPI_Fint));

inline void* fbuf(void* p) {
  if (p == &mpi_fortran_in_place_) return MPI_IN_PLACE;
  if (p == &mpi_fortran_bottom_) return MPI_BOTTOM;
  return p;
}
inline bool status_ignored(const F* s) { return s == reinterpret_cast<const F*>(&mpi_fortran_status_ignore_); }
inline bool statuses_ignored(const F* s) { return s == reinterpret_cast<const F*>(&mpi_fortran_statuses_ignore_); }

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
inline MPI_Message msg_f2c(F f) {
  if (ShadowReq* r = shadow_f2c(f)) return reinterpret_cast<MPI_Message>(r);
  return PMPI_Message_f2c(f);
}
inline F msg_c2f(MPI_Message m) {
  if (is_shadow(m)) return shadow_c2f(reinterpret_cast<ShadowReq*>(m));
  return PMPI_Message_c2f(m);
}

// Runs `fn` with a C status and copies it out unless ignored. The C status
// starts as the caller's, whose MPI_ERROR most calls must leave as it was.
template <typename Fn>
int with_status(F* fstatus, Fn&& fn) {
  if (status_ignored(fstatus)) return fn(MPI_STATUS_IGNORE);
  MPI_Status s;
  PMPI_Status_f2c(fstatus, &s);
  const int rc = fn(&s);
  PMPI_Status_c2f(&s, fstatus);
  return rc;
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
template <typename Fn>
int with_new_comm(F* fcomm, Fn&& fn) {
  return with_new_handle(fcomm, MPI_COMM_NULL, PMPI_Comm_c2f, std::forward<Fn>(fn));
}

// Runs `fn` on the C request of a Fortran one and hands back what the call
// left in it (MPI_REQUEST_NULL once completed or freed).
template <typename Fn>
int with_request(F* freq, Fn&& fn) {
  MPI_Request r = req_f2c(*freq);
  const int rc = fn(&r);
  *freq = req_c2f(r);
  return rc;
}

// Request arrays: Fortran integers in, C handles for the call, back out.
struct ReqArray {
  std::vector<MPI_Request> c;
  ReqArray(int n, const F* f) : c(static_cast<size_t>(n > 0 ? n : 0)) {
    for (int i = 0; i < n; ++i) c[static_cast<size_t>(i)] = req_f2c(f[i]);
  }
  void back(int n, F* f) const {
    for (int i = 0; i < n; ++i) f[i] = req_c2f(c[static_cast<size_t>(i)]);
  }
};

struct StatusArray {
  std::vector<MPI_Status> c;
  F* f;
  // Starts as the caller's statuses (see with_status).
  explicit StatusArray(int n, F* fs) : c(statuses_ignored(fs) ? 0 : static_cast<size_t>(n > 0 ? n : 0)), f(fs) {
    for (size_t i = 0; i < c.size(); ++i) PMPI_Status_f2c(f + i * kStatusInts, &c[i]);
  }
  MPI_Status* data() { return c.empty() ? MPI_STATUSES_IGNORE : c.data(); }
  void back(int n) {
    if (c.empty()) return;
    for (int i = 0; i < n; ++i) PMPI_Status_c2f(&c[static_cast<size_t>(i)], f + i * kStatusInts);
  }
};

}  // namespace accl::pmpi::fortran_abi

// One Fortran entry point in its four manglings.
#define FORTRAN(lname, UNAME, params, ...)                                                   \
  ACCL_PMPI_EXPORT void lname##_ params __VA_ARGS__                                          \
  ACCL_PMPI_EXPORT void lname params __attribute__((alias(#lname "_")));                     \
  ACCL_PMPI_EXPORT void lname##__ params __attribute__((alias(#lname "_")));                 \
  ACCL_PMPI_EXPORT void UNAME params __attribute__((alias(#lname "_")));

#define FORTRAN_ALL(lname, UNAME, cfn)                                                               \
  FORTRAN(lname, UNAME, (void* sbuf, F* scount, F* stype, void* rbuf, F* rcount, F* rtype, F* c, F* ierr), { \
    *ierr = cfn(fbuf(sbuf), *scount, type(stype), fbuf(rbuf), *rcount, type(rtype), comm(c));                \
  })
#define FORTRAN_IALL(lname, UNAME, cfn)                                                                   \
  FORTRAN(lname, UNAME,                                                                                   \
          (void* sbuf, F* scount, F* stype, void* rbuf, F* rcount, F* rtype, F* c, F* req, F* ierr), {    \
            *ierr = with_new_request(req, [&](MPI_Request* r) {                                           \
              return cfn(fbuf(sbuf), *scount, type(stype), fbuf(rbuf), *rcount, type(rtype), comm(c), r); \
            });                                                                                           \
          })
