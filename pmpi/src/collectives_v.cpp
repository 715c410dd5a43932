// SPDX-License-Identifier: Apache-2.0
//
// The v-collectives (Allgatherv, Gatherv, Scatterv, Alltoallv and their
// MPI_I* forms), composed from device sends and receives (coll_compose.hpp):
// every block goes straight from its sender to its receiver, a rank's own
// block is copied on the host.
//
// Offload decisions must be the same on every member, and a rank of Gatherv,
// Scatterv or Alltoallv does not know the other ranks' counts or datatypes.
// So those decide on what every member passes alike (device, communicator,
// root, ACCL_OFFLOAD_CALLS) and never on sizes: the byte thresholds do not
// apply to them, and every layout is handled on the rank that has it (odd
// sizes padded to whole words, derived datatypes packed and unpacked through
// staging). Allgatherv's receive counts are the same everywhere, so its
// total is rank-uniform and the thresholds apply.
#include "coll_compose.hpp"
#include "collectives.hpp"
#include "state.hpp"
#include "types.hpp"

namespace accl::pmpi {

namespace {

// Item `displ` of a buffer of `type` (displacements count in extents).
void* at(void* buf, const int* displs, int i, MPI_Datatype type) {
  return static_cast<char*>(buf) + static_cast<MPI_Aint>(displs[i]) * type_info(type).extent;
}
const void* at(const void* buf, const int* displs, int i, MPI_Datatype type) {
  return static_cast<const char*>(buf) + static_cast<MPI_Aint>(displs[i]) * type_info(type).extent;
}

// Sum of bytes over `size` blocks; false when an argument is invalid (native
// MPI then reports it).
bool sum_bytes(const int* counts, MPI_Datatype type, int size, uint64_t* total) {
  *total = 0;
  if (counts == nullptr || type == MPI_DATATYPE_NULL) return false;
  for (int i = 0; i < size; ++i) {
    if (counts[i] < 0) return false;
    *total += bytes_of(counts[i], type);
  }
  return true;
}

// The decision of Gatherv and Scatterv, up to the root's arguments: `own`
// x `own_type` at `own_buf` is this rank's block (Gatherv's send,
// Scatterv's receive; MPI_IN_PLACE at the root), `counts` of `vtype` at
// `displs` the root's blocks.
struct RootedV {
  Reason why = Reason::Offloaded;
  CommState* cs = nullptr;
  int rank = 0, size = 0;
  uint64_t bytes = 0;  // this rank's part: its block, the root's total
  bool is_root = false, in_place = false;
};
RootedV decide_rooted_v(Call call, MPI_Comm comm, int root, const void* own_buf, int own, MPI_Datatype own_type,
                        const int* counts, const int* displs, MPI_Datatype vtype) {
  RootedV d;
  d.why = composed_pre(comm, &d.cs, &d.rank, &d.size);
  if (d.why == Reason::Offloaded && (root < 0 || root >= d.size)) d.why = Reason::BadArgs;
  d.is_root = d.why == Reason::Offloaded && d.rank == root;
  d.in_place = d.is_root && own_buf == MPI_IN_PLACE;
  if (d.why == Reason::Offloaded && !d.in_place) {
    if (own < 0 || own_type == MPI_DATATYPE_NULL) d.why = Reason::BadArgs;
    else d.bytes = bytes_of(own, own_type);
  }
  if (d.is_root && d.why == Reason::Offloaded && (!sum_bytes(counts, vtype, d.size, &d.bytes) || displs == nullptr))
    d.why = Reason::BadArgs;
  d.why = composed_finish(d.why, call, comm, false, d.bytes, &d.cs);
  return d;
}

// Allgatherv whose blocks are those of an allgather (equal counts of whole
// words, block i at i x count): the device's allgather serves it, with its
// algorithms (one payload for all peers, ring, recursive doubling). The
// receive arguments are the same on every rank, so is this choice.
bool allgather_layout(int size, const int* rcounts, const int* displs, MPI_Datatype rtype) {
  if (rcounts == nullptr || displs == nullptr || rtype == MPI_DATATYPE_NULL || rcounts[0] <= 0) return false;
  for (int i = 0; i < size; ++i)
    if (rcounts[i] != rcounts[0] || displs[i] != static_cast<int64_t>(i) * rcounts[0]) return false;
  return bytes_of(rcounts[0], rtype) % 4 == 0;
}

}  // namespace

int coll_allgatherv(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int* rcounts,
                    const int* displs, MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
  CommState* cs = nullptr;
  int rank = 0, size = 0;
  uint64_t total = 0;
  Reason why = composed_pre(comm, &cs, &rank, &size);
  if (why == Reason::Offloaded && allgather_layout(size, rcounts, displs, rtype))
    return coll_allgather(call, sbuf, scount, stype, rbuf, rcounts[0], rtype, comm, req);
  CallScope scope(call);
  const bool in_place = sbuf == MPI_IN_PLACE;
  if (why == Reason::Offloaded && (!sum_bytes(rcounts, rtype, size, &total) || displs == nullptr ||
                                   (!in_place && (scount < 0 || stype == MPI_DATATYPE_NULL))))
    why = Reason::BadArgs;
  if (why == Reason::Offloaded && total == 0) why = Reason::Count0;
  const uint64_t own = why == Reason::Offloaded ? bytes_of(rcounts[rank], rtype) : 0;
  if (why == Reason::Offloaded && !in_place && bytes_of(scount, stype) != own) why = Reason::Signature;
  why = composed_finish(why, call, comm, true, total, &cs);
  if (!offload(scope, why, total, comm))
    return req ? PMPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req)
               : PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
  return composed_run(call, comm, cs, req, [&](Composed& c) {
    void* mine = at(rbuf, displs, rank, rtype);
    const void* out = in_place ? c.outgoing(mine, rcounts[rank], rtype, own) : c.outgoing(sbuf, scount, stype, own);
    // Receives first: a peer's request to send finds its receive posted.
    for (int p = 0; p < size; ++p)
      if (p != rank) c.recv_typed(at(rbuf, displs, p, rtype), rcounts[p], rtype, bytes_of(rcounts[p], rtype), p);
    for (int p = 0; p < size; ++p)
      if (p != rank) c.send_block(out, own, p);
    if (!in_place) c.copy_own(sbuf, scount, stype, mine, rcounts[rank], rtype, own);
  });
}

int coll_gatherv(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int* rcounts,
                 const int* displs, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req) {
  CallScope scope(call);
  const RootedV d = decide_rooted_v(call, comm, root, sbuf, scount, stype, rcounts, displs, rtype);
  if (!offload(scope, d.why, d.bytes, comm))
    return req ? PMPI_Igatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, req)
               : PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm);
  return composed_run(call, comm, d.cs, req, [&](Composed& c) {
    if (!d.is_root) {
      const uint64_t mine = bytes_of(scount, stype);
      c.send_block(c.outgoing(sbuf, scount, stype, mine), mine, root);
      return;
    }
    for (int p = 0; p < d.size; ++p)
      if (p != root) c.recv_typed(at(rbuf, displs, p, rtype), rcounts[p], rtype, bytes_of(rcounts[p], rtype), p);
    if (!d.in_place)
      c.copy_own(sbuf, scount, stype, at(rbuf, displs, root, rtype), rcounts[root], rtype, bytes_of(scount, stype));
  });
}

int coll_scatterv(Call call, const void* sbuf, const int* scounts, const int* displs, MPI_Datatype stype, void* rbuf,
                  int rcount, MPI_Datatype rtype, int root, MPI_Comm comm, MPI_Request* req) {
  CallScope scope(call);
  const RootedV d = decide_rooted_v(call, comm, root, rbuf, rcount, rtype, scounts, displs, stype);
  if (!offload(scope, d.why, d.bytes, comm))
    return req ? PMPI_Iscatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, req)
               : PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm);
  return composed_run(call, comm, d.cs, req, [&](Composed& c) {
    if (!d.is_root) {
      c.recv_typed(rbuf, rcount, rtype, bytes_of(rcount, rtype), root);
      return;
    }
    for (int p = 0; p < d.size; ++p) {
      if (p == root) continue;
      const void* block = at(sbuf, displs, p, stype);
      const uint64_t b = bytes_of(scounts[p], stype);
      c.send_block(c.outgoing(block, scounts[p], stype, b), b, p);
    }
    if (!d.in_place)
      c.copy_own(at(sbuf, displs, root, stype), scounts[root], stype, rbuf, rcount, rtype, bytes_of(rcount, rtype));
  });
}

int coll_alltoallv(Call call, const void* sbuf, const int* scounts, const int* sdispls, MPI_Datatype stype,
                   void* rbuf, const int* rcounts, const int* rdispls, MPI_Datatype rtype, MPI_Comm comm,
                   MPI_Request* req) {
  CallScope scope(call);
  CommState* cs = nullptr;
  int rank = 0, size = 0;
  uint64_t bytes = 0, sent = 0;
  Reason why = composed_pre(comm, &cs, &rank, &size);
  // In place, the receive side describes the data sent as well.
  const bool in_place = sbuf == MPI_IN_PLACE;
  if (why == Reason::Offloaded &&
      (!sum_bytes(rcounts, rtype, size, &bytes) || rdispls == nullptr ||
       (!in_place && (!sum_bytes(scounts, stype, size, &sent) || sdispls == nullptr))))
    why = Reason::BadArgs;
  why = composed_finish(why, call, comm, false, bytes, &cs);
  if (!offload(scope, why, bytes, comm))
    return req ? PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req)
               : PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
  return composed_run(call, comm, cs, req, [&](Composed& c) {
    // The outgoing blocks first: in place, they are copied before any
    // receive can overwrite them.
    std::vector<const void*> out(static_cast<size_t>(size), nullptr);
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      out[p] = in_place ? c.outgoing_copy(at(rbuf, rdispls, p, rtype), rcounts[p], rtype, bytes_of(rcounts[p], rtype))
                        : c.outgoing(at(sbuf, sdispls, p, stype), scounts[p], stype, bytes_of(scounts[p], stype));
    }
    // Receives before sends: a peer's request to send finds its receive posted.
    for (int p = 0; p < size; ++p)
      if (p != rank) c.recv_typed(at(rbuf, rdispls, p, rtype), rcounts[p], rtype, bytes_of(rcounts[p], rtype), p);
    for (int p = 0; p < size; ++p)
      if (p != rank) c.send_block(out[p], in_place ? bytes_of(rcounts[p], rtype) : bytes_of(scounts[p], stype), p);
    if (!in_place)
      c.copy_own(at(sbuf, sdispls, rank, stype), scounts[rank], stype, at(rbuf, rdispls, rank, rtype), rcounts[rank],
                 rtype, bytes_of(rcounts[rank], rtype));
  });
}

}  // namespace accl::pmpi

// ---------------------------------------------------------------------------
// C entry points.
// ---------------------------------------------------------------------------
using namespace accl::pmpi;

ACCL_PMPI_EXPORT int MPI_Allgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                                    const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
  return coll_allgatherv(Call::Allgatherv, sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Iallgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                                     const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm,
                                     MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Iallgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req));
  return coll_allgatherv(Call::Iallgatherv, sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, req);
}

ACCL_PMPI_EXPORT int MPI_Gatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int rcounts[],
                                 const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only))
    return PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm);
  return coll_gatherv(Call::Gatherv, sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Igatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int rcounts[],
                                  const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm,
                                  MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Igatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, req));
  return coll_gatherv(Call::Igatherv, sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, req);
}

ACCL_PMPI_EXPORT int MPI_Scatterv(const void* sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                                  void* rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only))
    return PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm);
  return coll_scatterv(Call::Scatterv, sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Iscatterv(const void* sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                                   void* rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm,
                                   MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Iscatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, req));
  return coll_scatterv(Call::Iscatterv, sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, req);
}

ACCL_PMPI_EXPORT int MPI_Alltoallv(const void* sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                                   void* rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                                   MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only))
    return PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
  return coll_alltoallv(Call::Alltoallv, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm,
                        nullptr);
}
ACCL_PMPI_EXPORT int MPI_Ialltoallv(const void* sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                                    void* rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                                    MPI_Comm comm, MPI_Request* req) {
  NONBLOCKING_GUARD(PMPI_Ialltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req));
  return coll_alltoallv(Call::Ialltoallv, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req);
}
