// SPDX-License-Identifier: Apache-2.0
//
// What the direct collectives share: the first and last steps of their
// offload decision, roots, and staging. See coll_direct.hpp.
#include "coll_direct.hpp"

#include <cstring>

namespace accl::pmpi {

Reason direct_pre(MPI_Comm comm, CommState** cs) {
  State& st = state();
  if (!st.active) return inactive_reason();
  return comm_check(comm, cs);
}

// `message` is the bytes of one device message (the count word times the
// element size), which the public firmware compares with its eager size.
Reason direct_finish(Call call, uint64_t bytes, uint64_t message, MPI_Comm comm, CommState** cs) {
  int size = 0;
  if (*cs != nullptr) size = (*cs)->size;
  else PMPI_Comm_size(comm, &size);
  Reason r = policy_call(call, static_cast<uint64_t>(size), bytes);
  if (r != Reason::Offloaded) return r;
  const uint64_t limit = state().eager_only_limit;
  if (limit != 0 && message > limit) return Reason::PublicRendezvous;
  if (*cs == nullptr) *cs = comm_materialize(comm);
  return (*cs)->accl ? Reason::Offloaded : (*cs)->native_reason;
}

void rank_size(MPI_Comm comm, CommState* cs, int* rank, int* size) {
  if (cs != nullptr) {
    *rank = cs->rank;
    *size = cs->size;
  } else {
    PMPI_Comm_rank(comm, rank);
    PMPI_Comm_size(comm, size);
  }
}

Reason check_root(Reason why, MPI_Comm comm, CommState* cs, int root, int* rank, int* size) {
  if (why != Reason::Offloaded) return why;
  rank_size(comm, cs, rank, size);
  return (root < 0 || root >= *size) ? Reason::BadArgs : Reason::Offloaded;
}

bool valid_root(MPI_Comm comm, CommState* cs, int root, int* rank, int* size) {
  if (comm == MPI_COMM_NULL) return false;
  rank_size(comm, cs, rank, size);
  return root >= 0 && root < *size;
}

void* pack_to_stage(Held& h, const void* buf, int count, MPI_Datatype type, uint64_t bytes) {
  void* s = h.stage(bytes);
  pack_to(s, bytes, buf, count, type);
  return s;
}

const void* stage_copy(Held& h, const void* buf, uint64_t bytes) {
  void* s = h.stage(bytes);
  std::memcpy(s, buf, bytes);
  return s;
}

PostCopy unpack_step(void* buf, const void* staged, uint64_t bytes, int count, MPI_Datatype type) {
  return PostCopy{PostCopy::unpack, buf, staged, bytes, count, type, type_layout(type)};
}

}  // namespace accl::pmpi
