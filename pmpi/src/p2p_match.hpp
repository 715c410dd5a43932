// SPDX-License-Identifier: Apache-2.0
//
// Matching of offloaded point-to-point messages (p2p_match.cpp): envelope
// pulls, MPI order, posted and unexpected messages, delivery into the
// receive.
#pragma once

#include "comms.hpp"
#include "requests.hpp"

#include <vector>

namespace accl::pmpi {

inline bool matches(const Envelope& e, int source, int tag) {
  return (source == MPI_ANY_SOURCE || source == e.src) && (tag == MPI_ANY_TAG || tag == e.tag);
}

inline void set_status(MPI_Status* st, int source, int tag, uint64_t bytes) {
  set_empty_status(st);  // not cancelled
  st->MPI_SOURCE = source;
  st->MPI_TAG = tag;
  PMPI_Status_set_elements_x(st, MPI_BYTE, static_cast<MPI_Count>(bytes));
}

// Takes posted receive `r` (after `prev`; null: the head) off cs's list.
inline void posted_unlink(CommState* cs, ShadowReq* prev, ShadowReq* r) {
  if (prev) prev->next_posted = r->next_posted;
  else cs->posted_head = r->next_posted;
  if (cs->posted_tail == r) cs->posted_tail = prev;
  r->next_posted = nullptr;
  --cs->demand;
}

// Takes in what cs's envelope pulls brought; returns how many references
// the resolved pulls held (mu held).
int p2p_pull_progress(CommState* cs);

// Starts receive request `r`: matches an unexpected message or posts it (mu held).
void p2p_recv_start(ShadowReq* r);
// True when the receive was cancelled (it had not matched yet; mu held).
bool p2p_recv_cancel(ShadowReq* r);
// A send to this rank itself: the message arrives at once, its data copied.
void p2p_self_send(ShadowReq* r, const unsigned char* src, uint64_t bytes);
// Delivers the message that MPI_Mprobe took (`m`) to receive `r`.
void p2p_message_deliver(ShadowReq* r, ShadowReq* m);
// The device receive of drain `d` (an unexpected eager payload taken into
// host staging) finished; its staging stays until a receive takes it.
void p2p_drain_finished(ShadowReq* d);

}  // namespace accl::pmpi
