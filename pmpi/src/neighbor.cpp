// SPDX-License-Identifier: Apache-2.0
//
// Neighbourhood collectives (MPI_Neighbor_* and MPI_Ineighbor_*) over the
// communicator's topology, and MPI_(I)alltoallw over all ranks, as exchanges
// of device sends and receives (exchange.cpp).
//
// Decision, each step rank-uniform so all members take the same path:
//   device up -> communicator (intra, size >= 2) -> a topology (neighbour
//   calls) -> ACCL_OFFLOAD_CALLS -> ACCL communicator (created collectively
//   on first use, like every collective's) -> neighbourhood (taken once per
//   communicator, with the largest number of device calls of any member
//   agreed by one PMPI_Allreduce) -> at most kMaxExchangeCalls device calls.
// Only the equal-block calls (Neighbor_allgather, Neighbor_alltoall) then
// apply zero counts and the byte thresholds, on their block size: MPI makes
// it equal on the two ends of every edge, so every connected group of
// members decides alike. The v and w forms have no size all members share,
// so byte thresholds do not apply to them and empty blocks simply move
// nothing.
//
// Topologies: Cart (neighbours -dim0 +dim0 -dim1 ... from PMPI_Cart_shift,
// MPI_PROC_NULL ones move nothing), graph (the rank's neighbour list both
// ways) and distributed graph (PMPI_Dist_graph_neighbors). In a periodic
// dimension of size 1 or 2 both Cart neighbours are the same rank: the
// block sent to the +d neighbour arrives in its -d block and vice versa
// (the direction is in the device tag), as MPI 4 spells out.
#include "neighbor.hpp"

#include "coll_compose.hpp"
#include "comms.hpp"
#include "state.hpp"
#include "stats.hpp"
#include "types.hpp"

namespace accl::pmpi {

namespace {

std::shared_ptr<Neighborhood> local_neighborhood(MPI_Comm comm, int rank, int kind) {
  auto nb = std::make_shared<Neighborhood>();
  if (kind == MPI_CART) {
    int ndims = 0;
    PMPI_Cartdim_get(comm, &ndims);
    for (int d = 0; d < ndims; ++d) {
      int lower = MPI_PROC_NULL, upper = MPI_PROC_NULL;
      PMPI_Cart_shift(comm, d, 1, &lower, &upper);
      const uint32_t to_lower = kNeighborTag + 2 * static_cast<uint32_t>(d);
      const uint32_t to_upper = to_lower + 1;
      nb->sources.insert(nb->sources.end(), {lower, upper});
      nb->destinations.insert(nb->destinations.end(), {lower, upper});
      // What the lower neighbour sent to its upper one lands in block -d.
      nb->source_tags.insert(nb->source_tags.end(), {to_upper, to_lower});
      nb->destination_tags.insert(nb->destination_tags.end(), {to_lower, to_upper});
    }
  } else if (kind == MPI_GRAPH) {
    int n = 0;
    PMPI_Graph_neighbors_count(comm, rank, &n);
    nb->sources.resize(static_cast<size_t>(n));
    if (n > 0) PMPI_Graph_neighbors(comm, rank, n, nb->sources.data());
    nb->destinations = nb->sources;
  } else {  // MPI_DIST_GRAPH
    int in = 0, out = 0, weighted = 0;
    PMPI_Dist_graph_neighbors_count(comm, &in, &out, &weighted);
    nb->sources.resize(static_cast<size_t>(in));
    nb->destinations.resize(static_cast<size_t>(out));
    std::vector<int> in_weights(static_cast<size_t>(in) + 1), out_weights(static_cast<size_t>(out) + 1);
    PMPI_Dist_graph_neighbors(comm, in, nb->sources.data(), in_weights.data(), out, nb->destinations.data(),
                              out_weights.data());
  }
  if (nb->source_tags.empty()) nb->source_tags.assign(nb->sources.size(), kNeighborTag);
  if (nb->destination_tags.empty()) nb->destination_tags.assign(nb->destinations.size(), kNeighborTag);
  return nb;
}

int device_calls(const Neighborhood& nb, int rank) {
  int n = 0;
  for (int p : nb.sources) n += p != MPI_PROC_NULL && p != rank;
  for (int p : nb.destinations) n += p != MPI_PROC_NULL && p != rank;
  return n;
}

// Collective over `comm` the first time (all members get here at the same
// call: every step before is rank-uniform).
const Neighborhood& neighborhood(MPI_Comm comm, CommState* cs, int kind) {
  if (!cs->neighborhood) {
    std::shared_ptr<Neighborhood> nb = local_neighborhood(comm, cs->rank, kind);
    const int mine = device_calls(*nb, cs->rank);
    PMPI_Allreduce(&mine, &nb->max_device_calls, 1, MPI_INT, MPI_MAX, comm);
    cs->neighborhood = std::move(nb);
  }
  return *cs->neighborhood;
}

struct Verdict {
  Reason why = Reason::Offloaded;
  CommState* cs = nullptr;
  const Neighborhood* nb = nullptr;
};

// The rank-uniform part of the decision; `topology`: a neighbourhood call;
// `sized`: every rank knows the call's bytes (equal blocks), and the offload
// policy decides on them later (check_equal_blocks), else here for every size.
Verdict decide(Call call, MPI_Comm comm, bool topology, bool sized) {
  State& st = state();
  Verdict v;
  if (!st.active) v.why = inactive_reason();
  else v.why = comm_check(comm, &v.cs);
  int kind = MPI_UNDEFINED;
  if (v.why == Reason::Offloaded && topology) {
    PMPI_Topo_test(comm, &kind);
    if (kind != MPI_CART && kind != MPI_GRAPH && kind != MPI_DIST_GRAPH) v.why = Reason::NoTopology;
  }
  if (v.why == Reason::Offloaded && !st.s.enabled[static_cast<size_t>(call)]) v.why = Reason::Excluded;
  if (v.why == Reason::Offloaded) v.why = composed_device_reason();
  if (v.why == Reason::Offloaded && !sized) {
    int ranks = 0;
    if (v.cs != nullptr) ranks = v.cs->size;
    else PMPI_Comm_size(comm, &ranks);
    v.why = policy_unsized(call, static_cast<uint64_t>(ranks));
  }
  if (v.why == Reason::Offloaded) {
    if (v.cs == nullptr) v.cs = comm_materialize(comm);
    if (!v.cs->accl) v.why = v.cs->native_reason;
  }
  if (v.why == Reason::Offloaded) {
    int max_calls = 2 * (v.cs->size - 1);
    if (topology) {
      v.nb = &neighborhood(comm, v.cs, kind);
      max_calls = v.nb->max_device_calls;
    }
    if (max_calls > kMaxExchangeCalls) v.why = Reason::Fanout;
  }
  return v;
}

// Whether the call's blocks are known (described for the offload, or for
// the byte count of a fallback taken after the neighbourhood was).
bool described(const Verdict& v) { return v.why == Reason::Offloaded || v.why == Reason::Fanout; }

// Arguments native MPI must report: the call runs natively (unless it
// already does for another reason).
Reason bad_args(Reason why) { return why == Reason::Offloaded ? Reason::BadArgs : why; }

// Block `count` x `type` at `base` + `offset` bytes; false for arguments
// native MPI must report.
bool block(std::vector<Transfer>& out, int peer, uint32_t tag, const void* base, MPI_Aint offset, int count,
           MPI_Datatype type) {
  if (count < 0 || (count > 0 && type == MPI_DATATYPE_NULL)) return false;
  Transfer t;
  t.peer = peer;
  t.tag = tag;
  t.buf = static_cast<char*>(const_cast<void*>(base)) + offset;
  t.count = count;
  t.type = type;
  t.bytes = bytes_of(count, type);
  out.push_back(t);
  return true;
}

MPI_Aint extent_of(MPI_Datatype type) { return type == MPI_DATATYPE_NULL ? 0 : type_info(type).extent; }

// Listed blocks, v form: counts[i] items at displs[i] extents of `type`.
bool listed_blocks(std::vector<Transfer>& out, const std::vector<int>& peers, const std::vector<uint32_t>& tags,
              const void* buf, const int counts[], const int displs[], MPI_Datatype type) {
  const MPI_Aint ext = extent_of(type);
  for (size_t i = 0; i < peers.size(); ++i)
    if (!block(out, peers[i], tags[i], buf, displs[i] * ext, counts[i], type)) return false;
  return true;
}

// Listed blocks, w form: counts[i] items of types[i] at displs[i] bytes.
template <typename Displ>
bool listed_blocks(std::vector<Transfer>& out, const std::vector<int>& peers, const std::vector<uint32_t>& tags,
              const void* buf, const int counts[], const Displ displs[], const MPI_Datatype types[]) {
  for (size_t i = 0; i < peers.size(); ++i)
    if (!block(out, peers[i], tags[i], buf, static_cast<MPI_Aint>(displs[i]), counts[i], types[i])) return false;
  return true;
}

// Blocks of equal size: count items of `type`, block i at i * `stride` bytes.
bool equal_blocks(std::vector<Transfer>& out, const std::vector<int>& peers, const std::vector<uint32_t>& tags,
                  const void* buf, int count, MPI_Datatype type, MPI_Aint stride) {
  for (size_t i = 0; i < peers.size(); ++i)
    if (!block(out, peers[i], tags[i], buf, static_cast<MPI_Aint>(i) * stride, count, type)) return false;
  return true;
}

// The equal-block calls' size checks (see the top of the file).
Reason check_equal_blocks(Call call, Reason why, int count, MPI_Datatype type, const CommState* cs) {
  if (why != Reason::Offloaded) return why;
  const uint64_t bytes = bytes_of(count, type);
  return bytes == 0 ? Reason::Count0 : policy_call(call, static_cast<uint64_t>(cs->size), bytes);
}

// The body all these calls share: the rank-uniform decision, the blocks
// `describe(v, x)` lists into `x` (false: arguments native MPI must report),
// for the equal-block calls (`equal` set) the size checks on block `scount`
// x `stype`, the accounting, then the exchange or `native()`.
template <typename Describe, typename Native>
int exchange_call(Call call, MPI_Comm comm, MPI_Request* req, bool topology, bool equal, int scount,
                  MPI_Datatype stype, Describe&& describe, Native&& native) {
  CallScope scope(call);
  Verdict v = decide(call, comm, topology, equal);
  Exchange x;
  if (described(v) && !describe(v, x)) v.why = bad_args(v.why);
  if (equal) v.why = check_equal_blocks(call, v.why, scount, stype, v.cs);
  if (!offload(scope, v.why, x.send_bytes(), comm)) return native();
  return exchange_run(call, comm, v.cs, x, req);
}

// Neighbor_alltoallv and Neighbor_alltoallw: blocks listed (v or w form)
// to the destinations and from the sources; MPI_IN_PLACE is not allowed,
// byte thresholds do not apply. `native` and `inative`: the PMPI calls.
template <typename Displ, typename Types, typename Native, typename INative>
int neighbor_lists_call(Call call, const void* sbuf, const int scounts[], const Displ sdispls[], Types stypes,
                        void* rbuf, const int rcounts[], const Displ rdispls[], Types rtypes, MPI_Comm comm,
                        MPI_Request* req, Native native, INative inative) {
  auto describe = [&](const Verdict& v, Exchange& x) {
    const Neighborhood& nb = *v.nb;
    return sbuf != MPI_IN_PLACE &&
           listed_blocks(x.sends, nb.destinations, nb.destination_tags, sbuf, scounts, sdispls, stypes) &&
           listed_blocks(x.recvs, nb.sources, nb.source_tags, rbuf, rcounts, rdispls, rtypes);
  };
  return exchange_call(call, comm, req, true, false, 0, MPI_DATATYPE_NULL, describe, [&] {
    return req ? inative(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, req)
               : native(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm);
  });
}

}  // namespace

int coll_neighbor_allgather(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                            MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
  auto describe = [&](const Verdict& v, Exchange& x) {
    const Neighborhood& nb = *v.nb;
    // Every destination gets the one send block (a stride of 0).
    return sbuf != MPI_IN_PLACE &&
           equal_blocks(x.sends, nb.destinations, nb.destination_tags, sbuf, scount, stype, 0) &&
           equal_blocks(x.recvs, nb.sources, nb.source_tags, rbuf, rcount, rtype, rcount * extent_of(rtype));
  };
  return exchange_call(call, comm, req, true, true, scount, stype, describe, [&] {
    return req ? PMPI_Ineighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm, req)
               : PMPI_Neighbor_allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  });
}

int coll_neighbor_allgatherv(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                             const int rcounts[], const int rdispls[], MPI_Datatype rtype, MPI_Comm comm,
                             MPI_Request* req) {
  auto describe = [&](const Verdict& v, Exchange& x) {
    const Neighborhood& nb = *v.nb;
    // Every destination gets the one send block (a stride of 0).
    return sbuf != MPI_IN_PLACE &&
           equal_blocks(x.sends, nb.destinations, nb.destination_tags, sbuf, scount, stype, 0) &&
           listed_blocks(x.recvs, nb.sources, nb.source_tags, rbuf, rcounts, rdispls, rtype);
  };
  return exchange_call(call, comm, req, true, false, scount, stype, describe, [&] {
    return req ? PMPI_Ineighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, rdispls, rtype, comm, req)
               : PMPI_Neighbor_allgatherv(sbuf, scount, stype, rbuf, rcounts, rdispls, rtype, comm);
  });
}

int coll_neighbor_alltoall(Call call, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                           MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
  auto describe = [&](const Verdict& v, Exchange& x) {
    const Neighborhood& nb = *v.nb;
    return sbuf != MPI_IN_PLACE &&
           equal_blocks(x.sends, nb.destinations, nb.destination_tags, sbuf, scount, stype,
                        scount * extent_of(stype)) &&
           equal_blocks(x.recvs, nb.sources, nb.source_tags, rbuf, rcount, rtype, rcount * extent_of(rtype));
  };
  return exchange_call(call, comm, req, true, true, scount, stype, describe, [&] {
    return req ? PMPI_Ineighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm, req)
               : PMPI_Neighbor_alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm);
  });
}

int coll_neighbor_alltoallv(Call call, const void* sbuf, const int scounts[], const int sdispls[],
                            MPI_Datatype stype, void* rbuf, const int rcounts[], const int rdispls[],
                            MPI_Datatype rtype, MPI_Comm comm, MPI_Request* req) {
  return neighbor_lists_call(call, sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, req,
                             PMPI_Neighbor_alltoallv, PMPI_Ineighbor_alltoallv);
}

int coll_neighbor_alltoallw(Call call, const void* sbuf, const int scounts[], const MPI_Aint sdispls[],
                            const MPI_Datatype stypes[], void* rbuf, const int rcounts[], const MPI_Aint rdispls[],
                            const MPI_Datatype rtypes[], MPI_Comm comm, MPI_Request* req) {
  return neighbor_lists_call(call, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, req,
                             PMPI_Neighbor_alltoallw, PMPI_Ineighbor_alltoallw);
}

int coll_alltoallw(Call call, const void* sbuf, const int scounts[], const int sdispls[],
                   const MPI_Datatype stypes[], void* rbuf, const int rcounts[], const int rdispls[],
                   const MPI_Datatype rtypes[], MPI_Comm comm, MPI_Request* req) {
  auto describe = [&](const Verdict& v, Exchange& x) {
    std::vector<int> peers(static_cast<size_t>(v.cs->size));
    for (int i = 0; i < v.cs->size; ++i) peers[static_cast<size_t>(i)] = i;
    const std::vector<uint32_t> tags(peers.size(), kAlltoallwTag);
    // In place, every rank sends the blocks its receive buffer describes.
    x.in_place = sbuf == MPI_IN_PLACE;
    const bool ok = x.in_place ? listed_blocks(x.sends, peers, tags, rbuf, rcounts, rdispls, rtypes)
                               : listed_blocks(x.sends, peers, tags, sbuf, scounts, sdispls, stypes);
    return ok && listed_blocks(x.recvs, peers, tags, rbuf, rcounts, rdispls, rtypes);
  };
  return exchange_call(call, comm, req, false, false, 0, MPI_DATATYPE_NULL, describe, [&] {
    return req ? PMPI_Ialltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, req)
               : PMPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm);
  });
}

}  // namespace accl::pmpi
