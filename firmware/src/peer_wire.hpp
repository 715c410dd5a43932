// SPDX-License-Identifier: Apache-2.0
//
// What the peer-op files share: building a message (operands, network
// move, header, sequence number), checking a collective's signature and
// waiting on a peer. peer_ops.cpp defines the out-of-line ones.
#pragma once

#include "firmware.hpp"

namespace accl::fw::impl {

// Inline: every move converts its operands.
inline Operand to_operand(const Buf& b) {
  Operand o;
  if (b.none) return o;
  o.kind = b.stream ? OperandKind::stream : OperandKind::memory;
  o.host = b.host;
  o.compressed = b.compressed;
  o.addr = b.stream ? 0 : b.addr;
  return o;
}

inline Move network_move(const CallSlot& call, uint32_t peer) {
  Move m;
  m.arcfg = call.d.arcfg;
  m.func = call.d.function;
  m.res.kind = OperandKind::network;
  m.comm = call.d.comm;
  m.dst_rank = peer;
  m.deadline_ns = call.deadline_ns;
  return m;
}

abi::WireHeader make_header(Fw& fw, const CallSlot& call, const PeerOp& op, uint32_t peer, uint8_t msg_type);
uint32_t take_outbound_seqn(Fw& fw, uint32_t comm, uint32_t peer);
uint32_t take_rid(Fw& fw);
// Collective transfers have the same size on both sides, so when both sides
// know it is a rendezvous transfer the receiver grants without waiting for an
// RTS: one message less per transfer, and the grant usually waits at the
// sender before the sender gets there. Point-to-point sizes are only known
// to the sender (and wildcards need the RTS to match): always RTS.
bool use_pregrant(const Fw& fw, const PeerOp& op, uint64_t wire_bytes);
// A collective message from a rank whose collective has other arguments
// (count, reduce function or data type, root, ...) than ours: fail the op
// with INVALID_ARGUMENT instead of moving data that means something else.
// Returns true on a mismatch.
bool check_signature(Fw& fw, CallSlot& call, PeerOp& op, const abi::WireHeader& h);
// Fails the op if the link to the peer it waits on is broken. Returns true
// when the op is finished (failed).
// While the arrival table is full, fetches the next arrival from that peer
// past the ones queued before it (the next pass looks at it).
bool wait_on_peer(Fw& fw, const CallSlot& call, PeerOp& op, uint32_t peer);

// peer_send.cpp, peer_recv.cpp: one op of each kind, as progress_op.
bool progress_send(Fw& fw, CallSlot& call, PeerOp& op);
bool progress_recv(Fw& fw, CallSlot& call, PeerOp& op);

}  // namespace accl::fw::impl
