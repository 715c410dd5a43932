// SPDX-License-Identifier: Apache-2.0
//
// The point-to-point protocol and its slot scheduler (p2p_proto.cpp): how a
// send becomes device calls, the replies that release rendezvous payloads,
// and the budget that keeps the layer's device calls from starving each
// other.
#pragma once

#include "comms.hpp"
#include "p2p_wire.hpp"
#include "requests.hpp"
#include "state.hpp"

namespace accl::pmpi {

// Largest message sent inside its envelope: the envelope must stay an eager
// message (a rendezvous envelope would wait for the receiver's host).
inline uint64_t p2p_inline_limit() {
  const size_t eager = state().s.max_eager_size;
  return eager <= kHeaderBytes ? 0 : std::min<uint64_t>(sizeof(Envelope::data), eager - kHeaderBytes);
}

// Slot budget classes (see p2p_proto.cpp). 16 + 24 + 8 leaves 16 of the
// device's 64 call slots for envelope pulls and collectives.
enum OpClass : uint8_t { kUnbudgeted = 0, kLocal = 1, kRemote = 2, kEarly = 3 };
constexpr int kNumClasses = 4;
constexpr int kSlotBudget[kNumClasses] = {0, 16, 24, 8};
extern ACCL_PMPI_LOCAL int g_on_device[kNumClasses];  // calls of each class on the device
extern ACCL_PMPI_LOCAL int g_early_reserved;          // early sends decided (envelope built) and not finished

// Device request r->r[index] finished: its slot is free again.
inline void release_slot(ShadowReq* r, int index) {
  if (r->r_class[index] == kEarly) --g_early_reserved;
  if (r->r_class[index] != kUnbudgeted) --g_on_device[r->r_class[index]];
  r->r_class[index] = kUnbudgeted;
}

// Send `it` no longer waits for its receiver's reply.
inline void stop_awaiting(CommState* cs, std::vector<ShadowReq*>::iterator it) {
  (*it)->awaiting_reply = false;
  cs->awaiting.erase(it);
  --cs->demand;
}

// Queues a device call of `words` int32 words for r->r[index] (mu held).
void p2p_op_queue(ShadowReq* r, uint8_t index, OpClass cls, bool reply_after, bool send, BaseBuffer* buf,
                  unsigned words, unsigned peer, uint32_t tag, communicatorId comm);
// Issues queued device calls while their class has budget (mu held).
void p2p_ops_pump();
// Whether device calls wait in the layer's queues for a slot (mu held).
bool p2p_ops_queued();

// Comms with an envelope pull outstanding: progress rounds visit them.
extern ACCL_PMPI_LOCAL std::vector<CommState*> g_active;
// Keeps one envelope receive posted while someone waits for a message on
// `cs` (or `force`: an Iprobe wants to see new arrivals). mu held.
void p2p_pull_ensure(CommState* cs, bool force);

// The receive of `r` matched (and its payload receive, if any, is on the
// device): tell the sender.
void p2p_reply_queue(ShadowReq* r);

// The payload receive of matched receive `r`; `reply_after`: the sender
// waits for the reply, queued once the receive is on the device.
inline void p2p_payload_recv_queue(ShadowReq* r, bool reply_after) {
  BaseBuffer* b = r->payload_buf;
  const unsigned words = static_cast<unsigned>((r->env.bytes - r->env.inline_bytes) / 4);
  const unsigned from = static_cast<unsigned>(r->env.src);
  const uint32_t seq = r->env.seq;
  const communicatorId id = r->cs->p2p_id;
  p2p_op_queue(r, 0, kRemote, reply_after, false, b, words, from, seq, id);
}

// Starts send request `r`: envelope, payload, or the wait for the reply (mu held).
void p2p_send_start(ShadowReq* r);

// Frees a request: drops its queued device work and slot budget, then
// returns it to the pool (mu held).
void p2p_request_free(ShadowReq* r);

// A receive finished without device work left. A request the user already
// freed (MPI_Request_free on an active receive) goes back to the pool.
// Callers must not touch `r` afterwards unless they own it.
inline void complete_now(ShadowReq* r) {
  r->complete = true;
  if (r->user_freed) p2p_request_free(r);
}

void p2p_proto_teardown();

}  // namespace accl::pmpi
