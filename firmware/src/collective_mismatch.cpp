// SPDX-License-Identifier: Apache-2.0
//
// Collectives whose ranks were called with different arguments (count,
// reduce function or data type, root, ...): a message's signature differs
// from the running collective's, an abort notice names it, or a late message
// shows that the collective that ended here already disagreed. The call
// fails with INVALID_ARGUMENT and tells the other members.
#include "peer_wire.hpp"

namespace accl::fw::impl {

bool apply_abort_notice(Fw& fw, const Arrival& a) {
  const abi::WireHeader& h = a.header;
  const uint32_t number = h.reserved[kHdrWordCollective];
  for (auto& call : fw.st.calls) {
    if (!call.used || !call.collective || make_ctx(call.d.context_id, true) != h.ctx) continue;
    if (call.collective_number != number) continue;
    if (call.phase == CallPhase::start) return false;  // it takes the notice when it starts
    call.status |= abi::kInvalidArgument;
    fw.st.work_counter++;
    if (fw.dp.log_enabled(kLogError)) {
      LogLine line;
      line.str("call ").dec(call.id).str(" scenario ").dec(call.d.scenario).str(" rank ").dec(call.d.local_rank)
          .str(": rank ").dec(h.src).str(" reports that the ranks called this collective with different arguments");
      log_line(fw, kLogError, line);
    }
    return true;
  }
  // No pending collective has that number: it has ended here already (drop
  // the notice, after noting it if it succeeded here), or it is not issued
  // yet (keep it).
  for (const auto& c : fw.st.comms) {
    if (c.used && make_ctx(c.context_id, true) == h.ctx) {
      const bool ended = static_cast<int32_t>(c.collectives_started - number) > 0;
      if (ended) note_late_mismatch(fw, h);
      return ended;
    }
  }
  return false;
}

void check_collective_arrival(Fw& fw, const Arrival& a) {
  const abi::WireHeader& h = a.header;
  const uint32_t number = h.reserved[kHdrWordCollective];
  for (auto& call : fw.st.calls) {
    if (!call.used || !call.collective || call.phase == CallPhase::start) continue;
    if (make_ctx(call.d.context_id, true) != h.ctx || call.collective_number != number) continue;
    if (call.signature == h.reserved[kHdrWordSignature]) return;
    PeerOp probe{};
    probe.ctx = h.ctx;
    check_signature(fw, call, probe, h);  // logs, marks the call
    call.status |= probe.error;
    fw.st.work_counter++;
    return;
  }
  note_late_mismatch(fw, h);
}

void note_late_mismatch(Fw& fw, const abi::WireHeader& h) {
  // A late message (or abort notice) of the collective that ended here last,
  // with another signature: it succeeded here, but the ranks disagreed (e.g.
  // on the root: ranks that each think they are the root of a broadcast only
  // send). Notices sent for a collective failed by an *earlier* mismatch
  // carry the same signature as ours, so they do not cascade.
  const uint32_t number = h.reserved[kHdrWordCollective];
  CommEntry* comm = comm_by_context(fw, h.ctx >> 1);
  if (comm == nullptr || !comm->last_succeeded || comm->last_number != number ||
      comm->last_signature == h.reserved[kHdrWordSignature] || comm->earlier_mismatch) {
    return;
  }
  comm->earlier_mismatch = true;
  comm->earlier_mismatch_number = number;
  comm->earlier_mismatch_rank = h.src;
  fw.st.work_counter++;
  // The communicator's next collective may be running already (it fails
  // now) or still to start (take_earlier_mismatch).
  for (auto& call : fw.st.calls) {
    if (!call.used || !call.collective || call.phase == CallPhase::start) continue;
    if (make_ctx(call.d.context_id, true) != h.ctx) continue;
    if (take_earlier_mismatch(fw, call)) {
      call.status |= abi::kInvalidArgument;
      call.signature_mismatch = true;  // its members learn at once (abort notices)
    }
    return;
  }
}

void remember_finished_collective(Fw& fw, const CallSlot& call, uint32_t status) {
  CommEntry* comm = comm_by_context(fw, call.d.context_id);
  if (comm == nullptr) return;
  comm->last_number = call.collective_number;
  comm->last_signature = call.signature;
  comm->last_succeeded = status == 0;
}

bool take_earlier_mismatch(Fw& fw, const CallSlot& call) {
  CommEntry* comm = comm_by_context(fw, call.d.context_id);
  if (comm == nullptr || !comm->earlier_mismatch) return false;
  comm->earlier_mismatch = false;
  if (fw.dp.log_enabled(kLogError)) {
    LogLine line;
    line.str("call ").dec(call.id).str(" scenario ").dec(call.d.scenario).str(" rank ").dec(call.d.local_rank)
        .str(": the previous collective on this communicator (number ").dec(comm->earlier_mismatch_number)
        .str(") was called with different arguments on rank ").dec(comm->earlier_mismatch_rank)
        .str(" (its message came after the collective ended here)");
    log_line(fw, kLogError, line);
  }
  return true;
}

void send_abort_notices(Fw& fw, CallSlot& call) {
  PeerOp op{};
  op.ctx = make_ctx(call.d.context_id, true);
  op.tag = abi::kTagAny;
  for (uint32_t peer = 0; peer < call.d.comm_size; ++peer) {
    if (peer == call.d.local_rank || peer_link_status(fw, call.d.comm, call.d.comm_size, peer) != 0) continue;
    Move m = network_move(call, peer);
    m.header = make_header(fw, call, op, peer, abi::kMsgRendezvousAddr);
    m.header.flags = 0;
    m.header.reserved[kHdrWordKind] = kAbortNotice;
    m.header.seqn = take_outbound_seqn(fw, call.d.comm, peer);
    fw.dp.move(m);  // best effort: the peer times out if this one is lost
  }
  fw.st.work_counter++;
}

}  // namespace accl::fw::impl
