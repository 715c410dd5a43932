// SPDX-License-Identifier: Apache-2.0
//
// Communicators of the PMPI layer (comm_registry.cpp): per MPI communicator
// one ACCL communicator for its collectives and, when its point-to-point is
// offloaded, a second one for that, and the point-to-point state kept on it.
#pragma once

#include "calls.hpp"
#include "p2p_wire.hpp"

#include <deque>
#include <memory>
#include <vector>

namespace accl::pmpi {

struct ShadowReq;
struct Neighborhood;

struct UnexpectedMsg {
  Envelope env;
  // Self messages carry their payload here (staged at send time).
  std::vector<unsigned char> self_data;
  ShadowReq* self_sync = nullptr;  // synchronous self send waiting for the match
  // An eager payload taken off the device into host staging (p2p_match.cpp: drain).
  ShadowReq* drain = nullptr;
};

// Context id of MPI_COMM_WORLD's point-to-point communicator: below the ids
// the members agree on for other comms (State::next_ctx starts at 64), and
// not 0, the world's own.
constexpr uint32_t kWorldP2pContext = 1;

struct CommState {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 0;
  bool accl = false;           // an ACCL communicator exists
  Reason native_reason = Reason::CommNative;
  bool p2p = false;            // point-to-point runs on ACCL (decided at birth, rank-uniform)
  communicatorId id = 0;        // the ACCL communicator of the collectives
  uint32_t ctx = 0;
  // The ACCL communicator of the point-to-point traffic (when p2p): a
  // context id of its own, so on the device neither kind's messages ever wait
  // behind the other's. On one context they shared the per-peer sequence
  // stream, and a device whose arrival table was full of broadcasts for later
  // calls could not take a point-to-point envelope past them, nor a
  // broadcast past thousands of unreceived envelopes (issue 37, xCbtest).
  communicatorId p2p_id = 0;
  bool is_world = false;
  bool freed = false;          // MPI_Comm_free ran; destroy when refs drop to 0
  int refs = 1;                // 1 for the communicator + 1 per live request
  uint32_t composed_seq = 0;   // composed collectives started (their device tag, coll_compose.hpp)

  // --- point-to-point engine state (guarded by State::mu) ---
  std::vector<uint32_t> send_seq;     // next message sequence number per destination
  std::vector<uint32_t> recv_expect;  // next sequence number expected per source
  std::vector<Envelope> reorder;      // envelopes that arrived ahead of their turn
  ShadowReq* posted_head = nullptr;
  ShadowReq* posted_tail = nullptr;
  std::deque<UnexpectedMsg> unexpected;
  RequestPtr pull;                       // outstanding envelope receive
  std::unique_ptr<Envelope> pull_env;    // where it lands
  std::shared_ptr<BaseBuffer> pull_buf;
  int demand = 0;                        // posted receives + probes + sends awaiting a reply
  std::vector<ShadowReq*> awaiting;      // sends waiting for the receiver's reply envelope
  bool in_active_list = false;
  // Per rank: the device's error bits of a link found failed (0 = none);
  // empty until the first failure. A failed member stays failed (p2p_fault.cpp).
  std::vector<uint32_t> failed_link;
  // The topology's neighbours, taken at the first offloaded neighbourhood
  // collective (neighbor.cpp).
  std::shared_ptr<const Neighborhood> neighborhood;
  // all-states list for teardown
  CommState* prev_all = nullptr;
  CommState* next_all = nullptr;
};

// Cheap, local verdict for a collective on `comm` (no communication):
// Offloaded with *cs set = ACCL communicator ready; Offloaded with *cs null =
// eligible but not created yet (comm_materialize creates it); otherwise the
// reason it stays native. Run without State::mu.
Reason comm_check(MPI_Comm comm, CommState** cs);
// Creates the ACCL communicator of an eligible comm, collectively over it.
// All members get here at the same call because the offload decision is
// rank-uniform. Check ->accl on the result. Run without State::mu.
CommState* comm_materialize(MPI_Comm comm);
// The state for point-to-point: only comms born through a wrapper (or world)
// may carry offloaded p2p. Null = native. Does not create anything.
CommState* comm_for_p2p(MPI_Comm comm);
CommState* comm_lookup(MPI_Comm comm);  // cached state or null
// Called by the creation wrappers after PMPI created `newcomm` (may be NULL).
void comm_created(MPI_Comm newcomm);
void comm_registry_init();  // keyvals, world state (after the device is up)
void comm_registry_teardown();
void comm_release(CommState* cs);  // drop a request's reference (mu held)

}  // namespace accl::pmpi
