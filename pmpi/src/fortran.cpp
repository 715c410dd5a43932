// SPDX-License-Identifier: Apache-2.0
//
// Fortran (mpif.h and `use mpi`) entry points.
//
// Open MPI's Fortran bindings call PMPI_* directly, so C wrappers never see
// Fortran traffic. We export our own mpi_<name>_ (the gfortran mangling) plus
// the three other usual manglings as aliases, translate handles with
// PMPI_*_f2c/c2f (never MPI_*: those may be interposed by other tools),
// translate the MPI_IN_PLACE/MPI_BOTTOM/MPI_STATUS(ES)_IGNORE sentinels (the
// addresses of common blocks in libmpi) and call our C entry points.
// `use mpi_f08` bypasses all of this (Open MPI binds it to internal
// functions); it runs natively.
#include "fortran.hpp"

#include <utility>
#include <vector>

extern "C" {
extern int mpi_fortran_status_ignore_;
extern int mpi_fortran_statuses_ignore_;
}

using namespace accl::pmpi;
using namespace accl::pmpi::fortran;

namespace {

// INTEGER status(MPI_STATUS_SIZE): Open MPI's Fortran status is the C struct.
constexpr int kStatusInts = static_cast<int>(sizeof(MPI_Status) / sizeof(MPI_Fint));

bool status_ignored(const F* s) { return s == reinterpret_cast<const F*>(&mpi_fortran_status_ignore_); }
bool statuses_ignored(const F* s) { return s == reinterpret_cast<const F*>(&mpi_fortran_statuses_ignore_); }

MPI_Message msg_f2c(F f) {
  if (ShadowReq* r = shadow_f2c(f)) return reinterpret_cast<MPI_Message>(r);
  return PMPI_Message_f2c(f);
}
F msg_c2f(MPI_Message m) {
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

// MPI_Waitsome and MPI_Testsome: the completed indices go out 1-based.
int complete_some(int (*fn)(int, MPI_Request[], int*, int[], MPI_Status[]), F* n, F* reqs, F* outcount, F* indices,
                  F* statuses) {
  ReqArray r(*n, reqs);
  StatusArray s(*n, statuses);
  std::vector<int> idx(static_cast<size_t>(*n > 0 ? *n : 0));
  int out = 0;
  const int rc = fn(*n, r.c.data(), &out, idx.data(), s.data());
  r.back(*n, reqs);
  *outcount = out;
  if (out != MPI_UNDEFINED) {
    for (int i = 0; i < out; ++i) indices[i] = idx[static_cast<size_t>(i)] + 1;
    s.back(out);
  }
  return rc;
}

}  // namespace

// --- init / finalize -----------------------------------------------------------
FORTRAN(mpi_init, MPI_INIT, (F * ierr), { *ierr = MPI_Init(nullptr, nullptr); })
FORTRAN(mpi_init_thread, MPI_INIT_THREAD, (F * required, F* provided, F* ierr), {
  int p = 0;
  *ierr = MPI_Init_thread(nullptr, nullptr, *required, &p);
  *provided = p;
})
FORTRAN(mpi_finalize, MPI_FINALIZE, (F * ierr), { *ierr = MPI_Finalize(); })

// --- communicators -------------------------------------------------------------
FORTRAN(mpi_comm_dup, MPI_COMM_DUP, (F * c, F* newcomm, F* ierr), {
  *ierr = with_new_comm(newcomm, [&](MPI_Comm* n) { return MPI_Comm_dup(comm(c), n); });
})
FORTRAN(mpi_comm_dup_with_info, MPI_COMM_DUP_WITH_INFO, (F * c, F* info, F* newcomm, F* ierr), {
  *ierr = with_new_comm(newcomm, [&](MPI_Comm* n) { return MPI_Comm_dup_with_info(comm(c), PMPI_Info_f2c(*info), n); });
})
FORTRAN(mpi_comm_split, MPI_COMM_SPLIT, (F * c, F* color, F* key, F* newcomm, F* ierr), {
  *ierr = with_new_comm(newcomm, [&](MPI_Comm* n) { return MPI_Comm_split(comm(c), *color, *key, n); });
})
FORTRAN(mpi_comm_split_type, MPI_COMM_SPLIT_TYPE, (F * c, F* split_type, F* key, F* info, F* newcomm, F* ierr), {
  *ierr = with_new_comm(newcomm, [&](MPI_Comm* n) {
    return MPI_Comm_split_type(comm(c), *split_type, *key, PMPI_Info_f2c(*info), n);
  });
})
FORTRAN(mpi_comm_create, MPI_COMM_CREATE, (F * c, F* group, F* newcomm, F* ierr), {
  *ierr = with_new_comm(newcomm, [&](MPI_Comm* n) { return MPI_Comm_create(comm(c), PMPI_Group_f2c(*group), n); });
})
FORTRAN(mpi_comm_create_group, MPI_COMM_CREATE_GROUP, (F * c, F* group, F* tag, F* newcomm, F* ierr), {
  *ierr = with_new_comm(newcomm, [&](MPI_Comm* n) {
    return MPI_Comm_create_group(comm(c), PMPI_Group_f2c(*group), *tag, n);
  });
})

// --- point-to-point ----------------------------------------------------------------
#define FORTRAN_SEND(lname, UNAME, cfn)                                                       \
  FORTRAN(lname, UNAME, (void* buf, F* count, F* dt, F* dest, F* tag, F* c, F* ierr), {       \
    *ierr = cfn(fbuf(buf), *count, type(dt), *dest, *tag, comm(c));                           \
  })
FORTRAN_SEND(mpi_send, MPI_SEND, MPI_Send)
FORTRAN_SEND(mpi_bsend, MPI_BSEND, MPI_Bsend)
FORTRAN_SEND(mpi_ssend, MPI_SSEND, MPI_Ssend)
FORTRAN_SEND(mpi_rsend, MPI_RSEND, MPI_Rsend)

#define FORTRAN_ISEND(lname, UNAME, cfn)                                                        \
  FORTRAN(lname, UNAME, (void* buf, F* count, F* dt, F* dest, F* tag, F* c, F* req, F* ierr), { \
    *ierr = with_new_request(req, [&](MPI_Request* r) {                                         \
      return cfn(fbuf(buf), *count, type(dt), *dest, *tag, comm(c), r);                         \
    });                                                                                         \
  })
FORTRAN_ISEND(mpi_isend, MPI_ISEND, MPI_Isend)
FORTRAN_ISEND(mpi_ibsend, MPI_IBSEND, MPI_Ibsend)
FORTRAN_ISEND(mpi_issend, MPI_ISSEND, MPI_Issend)
FORTRAN_ISEND(mpi_irsend, MPI_IRSEND, MPI_Irsend)
FORTRAN_ISEND(mpi_send_init, MPI_SEND_INIT, MPI_Send_init)
FORTRAN_ISEND(mpi_bsend_init, MPI_BSEND_INIT, MPI_Bsend_init)
FORTRAN_ISEND(mpi_ssend_init, MPI_SSEND_INIT, MPI_Ssend_init)
FORTRAN_ISEND(mpi_rsend_init, MPI_RSEND_INIT, MPI_Rsend_init)
FORTRAN_ISEND(mpi_irecv, MPI_IRECV, MPI_Irecv)
FORTRAN_ISEND(mpi_recv_init, MPI_RECV_INIT, MPI_Recv_init)

FORTRAN(mpi_recv, MPI_RECV, (void* buf, F* count, F* dt, F* src, F* tag, F* c, F* status, F* ierr), {
  *ierr = with_status(status, [&](MPI_Status* s) { return MPI_Recv(fbuf(buf), *count, type(dt), *src, *tag, comm(c), s); });
})
FORTRAN(mpi_sendrecv, MPI_SENDRECV,
        (void* sbuf, F* scount, F* stype, F* dest, F* stag, void* rbuf, F* rcount, F* rtype, F* src, F* rtag, F* c,
         F* status, F* ierr),
        {
          *ierr = with_status(status, [&](MPI_Status* s) {
            return MPI_Sendrecv(fbuf(sbuf), *scount, type(stype), *dest, *stag, fbuf(rbuf), *rcount, type(rtype), *src,
                                *rtag, comm(c), s);
          });
        })
FORTRAN(mpi_sendrecv_replace, MPI_SENDRECV_REPLACE,
        (void* buf, F* count, F* dt, F* dest, F* stag, F* src, F* rtag, F* c, F* status, F* ierr), {
          *ierr = with_status(status, [&](MPI_Status* s) {
            return MPI_Sendrecv_replace(fbuf(buf), *count, type(dt), *dest, *stag, *src, *rtag, comm(c), s);
          });
        })
FORTRAN(mpi_probe, MPI_PROBE, (F * src, F* tag, F* c, F* status, F* ierr), {
  *ierr = with_status(status, [&](MPI_Status* s) { return MPI_Probe(*src, *tag, comm(c), s); });
})
FORTRAN(mpi_iprobe, MPI_IPROBE, (F * src, F* tag, F* c, F* flag, F* status, F* ierr), {
  int fl = 0;
  *ierr = with_status(status, [&](MPI_Status* s) { return MPI_Iprobe(*src, *tag, comm(c), &fl, s); });
  *flag = fl;
})
FORTRAN(mpi_mprobe, MPI_MPROBE, (F * src, F* tag, F* c, F* message, F* status, F* ierr), {
  MPI_Message m = MPI_MESSAGE_NULL;
  *ierr = with_status(status, [&](MPI_Status* s) { return MPI_Mprobe(*src, *tag, comm(c), &m, s); });
  if (*ierr == MPI_SUCCESS) *message = msg_c2f(m);
})
FORTRAN(mpi_improbe, MPI_IMPROBE, (F * src, F* tag, F* c, F* flag, F* message, F* status, F* ierr), {
  MPI_Message m = MPI_MESSAGE_NULL;
  int fl = 0;
  *ierr = with_status(status, [&](MPI_Status* s) { return MPI_Improbe(*src, *tag, comm(c), &fl, &m, s); });
  *flag = fl;
  if (*ierr == MPI_SUCCESS && fl) *message = msg_c2f(m);
})
FORTRAN(mpi_mrecv, MPI_MRECV, (void* buf, F* count, F* dt, F* message, F* status, F* ierr), {
  MPI_Message m = msg_f2c(*message);
  *ierr = with_status(status, [&](MPI_Status* s) { return MPI_Mrecv(fbuf(buf), *count, type(dt), &m, s); });
  *message = msg_c2f(m);
})
FORTRAN(mpi_imrecv, MPI_IMRECV, (void* buf, F* count, F* dt, F* message, F* req, F* ierr), {
  MPI_Message m = msg_f2c(*message);
  *ierr = with_new_request(req, [&](MPI_Request* r) { return MPI_Imrecv(fbuf(buf), *count, type(dt), &m, r); });
  *message = msg_c2f(m);
})

// --- requests --------------------------------------------------------------------------
FORTRAN(mpi_wait, MPI_WAIT, (F * req, F* status, F* ierr), {
  MPI_Request r = req_f2c(*req);
  *ierr = with_status(status, [&](MPI_Status* s) { return MPI_Wait(&r, s); });
  *req = req_c2f(r);
})
FORTRAN(mpi_test, MPI_TEST, (F * req, F* flag, F* status, F* ierr), {
  MPI_Request r = req_f2c(*req);
  int fl = 0;
  *ierr = with_status(status, [&](MPI_Status* s) { return MPI_Test(&r, &fl, s); });
  *flag = fl;
  *req = req_c2f(r);
})
FORTRAN(mpi_waitall, MPI_WAITALL, (F * n, F* reqs, F* statuses, F* ierr), {
  ReqArray r(*n, reqs);
  StatusArray s(*n, statuses);
  *ierr = MPI_Waitall(*n, r.c.data(), s.data());
  r.back(*n, reqs);
  s.back(*n);
})
FORTRAN(mpi_testall, MPI_TESTALL, (F * n, F* reqs, F* flag, F* statuses, F* ierr), {
  ReqArray r(*n, reqs);
  StatusArray s(*n, statuses);
  int fl = 0;
  *ierr = MPI_Testall(*n, r.c.data(), &fl, s.data());
  *flag = fl;
  r.back(*n, reqs);
  if (fl) s.back(*n);
})
FORTRAN(mpi_waitany, MPI_WAITANY, (F * n, F* reqs, F* index, F* status, F* ierr), {
  ReqArray r(*n, reqs);
  int idx = MPI_UNDEFINED;
  *ierr = with_status(status, [&](MPI_Status* s) { return MPI_Waitany(*n, r.c.data(), &idx, s); });
  r.back(*n, reqs);
  *index = idx == MPI_UNDEFINED ? MPI_UNDEFINED : idx + 1;  // Fortran indices start at 1
})
FORTRAN(mpi_testany, MPI_TESTANY, (F * n, F* reqs, F* index, F* flag, F* status, F* ierr), {
  ReqArray r(*n, reqs);
  int idx = MPI_UNDEFINED, fl = 0;
  *ierr = with_status(status, [&](MPI_Status* s) { return MPI_Testany(*n, r.c.data(), &idx, &fl, s); });
  r.back(*n, reqs);
  *flag = fl;
  *index = idx == MPI_UNDEFINED ? MPI_UNDEFINED : idx + 1;
})
FORTRAN(mpi_waitsome, MPI_WAITSOME, (F * n, F* reqs, F* outcount, F* indices, F* statuses, F* ierr), {
  *ierr = complete_some(MPI_Waitsome, n, reqs, outcount, indices, statuses);
})
FORTRAN(mpi_testsome, MPI_TESTSOME, (F * n, F* reqs, F* outcount, F* indices, F* statuses, F* ierr), {
  *ierr = complete_some(MPI_Testsome, n, reqs, outcount, indices, statuses);
})
FORTRAN(mpi_request_free, MPI_REQUEST_FREE, (F * req, F* ierr), { *ierr = with_request(req, MPI_Request_free); })
FORTRAN(mpi_request_get_status, MPI_REQUEST_GET_STATUS, (F * req, F* flag, F* status, F* ierr), {
  int fl = 0;
  *ierr = with_status(status, [&](MPI_Status* s) { return MPI_Request_get_status(req_f2c(*req), &fl, s); });
  *flag = fl;
})
FORTRAN(mpi_cancel, MPI_CANCEL, (F * req, F* ierr), {
  MPI_Request r = req_f2c(*req);
  *ierr = MPI_Cancel(&r);
})
FORTRAN(mpi_start, MPI_START, (F * req, F* ierr), { *ierr = with_request(req, MPI_Start); })
FORTRAN(mpi_startall, MPI_STARTALL, (F * n, F* reqs, F* ierr), {
  ReqArray r(*n, reqs);
  *ierr = MPI_Startall(*n, r.c.data());
  r.back(*n, reqs);
})

// --- collectives ---------------------------------------------------------------------------
FORTRAN(mpi_barrier, MPI_BARRIER, (F * c, F* ierr), { *ierr = MPI_Barrier(comm(c)); })
FORTRAN(mpi_ibarrier, MPI_IBARRIER, (F * c, F* req, F* ierr), {
  *ierr = with_new_request(req, [&](MPI_Request* r) { return MPI_Ibarrier(comm(c), r); });
})
FORTRAN(mpi_bcast, MPI_BCAST, (void* buf, F* count, F* dt, F* root, F* c, F* ierr), {
  *ierr = MPI_Bcast(fbuf(buf), *count, type(dt), *root, comm(c));
})
FORTRAN(mpi_ibcast, MPI_IBCAST, (void* buf, F* count, F* dt, F* root, F* c, F* req, F* ierr), {
  *ierr = with_new_request(req, [&](MPI_Request* r) {
    return MPI_Ibcast(fbuf(buf), *count, type(dt), *root, comm(c), r);
  });
})
FORTRAN(mpi_reduce, MPI_REDUCE, (void* sbuf, void* rbuf, F* count, F* dt, F* o, F* root, F* c, F* ierr), {
  *ierr = MPI_Reduce(fbuf(sbuf), fbuf(rbuf), *count, type(dt), op(o), *root, comm(c));
})
FORTRAN(mpi_ireduce, MPI_IREDUCE, (void* sbuf, void* rbuf, F* count, F* dt, F* o, F* root, F* c, F* req, F* ierr), {
  *ierr = with_new_request(req, [&](MPI_Request* r) {
    return MPI_Ireduce(fbuf(sbuf), fbuf(rbuf), *count, type(dt), op(o), *root, comm(c), r);
  });
})
FORTRAN(mpi_allreduce, MPI_ALLREDUCE, (void* sbuf, void* rbuf, F* count, F* dt, F* o, F* c, F* ierr), {
  *ierr = MPI_Allreduce(fbuf(sbuf), fbuf(rbuf), *count, type(dt), op(o), comm(c));
})
FORTRAN(mpi_iallreduce, MPI_IALLREDUCE, (void* sbuf, void* rbuf, F* count, F* dt, F* o, F* c, F* req, F* ierr), {
  *ierr = with_new_request(req, [&](MPI_Request* r) {
    return MPI_Iallreduce(fbuf(sbuf), fbuf(rbuf), *count, type(dt), op(o), comm(c), r);
  });
})
FORTRAN(mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK,
        (void* sbuf, void* rbuf, F* count, F* dt, F* o, F* c, F* ierr), {
          *ierr = MPI_Reduce_scatter_block(fbuf(sbuf), fbuf(rbuf), *count, type(dt), op(o), comm(c));
        })
FORTRAN(mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK,
        (void* sbuf, void* rbuf, F* count, F* dt, F* o, F* c, F* req, F* ierr), {
          *ierr = with_new_request(req, [&](MPI_Request* r) {
            return MPI_Ireduce_scatter_block(fbuf(sbuf), fbuf(rbuf), *count, type(dt), op(o), comm(c), r);
          });
        })
FORTRAN(mpi_reduce_scatter, MPI_REDUCE_SCATTER, (void* sbuf, void* rbuf, F* counts, F* dt, F* o, F* c, F* ierr), {
  *ierr = MPI_Reduce_scatter(fbuf(sbuf), fbuf(rbuf), counts, type(dt), op(o), comm(c));
})
FORTRAN(mpi_ireduce_scatter, MPI_IREDUCE_SCATTER,
        (void* sbuf, void* rbuf, F* counts, F* dt, F* o, F* c, F* req, F* ierr), {
          *ierr = with_new_request(req, [&](MPI_Request* r) {
            return MPI_Ireduce_scatter(fbuf(sbuf), fbuf(rbuf), counts, type(dt), op(o), comm(c), r);
          });
        })

#define FORTRAN_ROOTED(lname, UNAME, cfn)                                                                     \
  FORTRAN(lname, UNAME,                                                                                       \
          (void* sbuf, F* scount, F* stype, void* rbuf, F* rcount, F* rtype, F* root, F* c, F* ierr), {       \
            *ierr = cfn(fbuf(sbuf), *scount, type(stype), fbuf(rbuf), *rcount, type(rtype), *root, comm(c));  \
          })
#define FORTRAN_IROOTED(lname, UNAME, cfn)                                                                       \
  FORTRAN(lname, UNAME,                                                                                          \
          (void* sbuf, F* scount, F* stype, void* rbuf, F* rcount, F* rtype, F* root, F* c, F* req, F* ierr), {  \
            *ierr = with_new_request(req, [&](MPI_Request* r) {                                                  \
              return cfn(fbuf(sbuf), *scount, type(stype), fbuf(rbuf), *rcount, type(rtype), *root, comm(c), r); \
            });                                                                                                  \
          })
FORTRAN_ROOTED(mpi_gather, MPI_GATHER, MPI_Gather)
FORTRAN_ROOTED(mpi_scatter, MPI_SCATTER, MPI_Scatter)
FORTRAN_IROOTED(mpi_igather, MPI_IGATHER, MPI_Igather)
FORTRAN_IROOTED(mpi_iscatter, MPI_ISCATTER, MPI_Iscatter)

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
FORTRAN_ALL(mpi_allgather, MPI_ALLGATHER, MPI_Allgather)
FORTRAN_ALL(mpi_alltoall, MPI_ALLTOALL, MPI_Alltoall)
FORTRAN_IALL(mpi_iallgather, MPI_IALLGATHER, MPI_Iallgather)
FORTRAN_IALL(mpi_ialltoall, MPI_IALLTOALL, MPI_Ialltoall)
