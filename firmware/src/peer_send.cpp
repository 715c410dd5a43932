// SPDX-License-Identifier: Apache-2.0
//
// Send side of the peer ops (see peer_ops.cpp).
//
// Send: eager when the wire bytes fit max_eager_size or rendezvous is
//   disabled; all eager segments go out in one step so no other message to
//   that peer can take sequence numbers in between. Rendezvous: a request to
//   send (RTS), then one data message per address message ("grant") the
//   receiver sends. Wire compression applies to both (the data plane
//   compresses the payload of the data message).
#include "peer_wire.hpp"

namespace accl::fw::impl {
namespace {

// Max payload bytes of one eager segment to `peer`: the peer's max segment
// size, but never more than an RX buffer holds.
uint32_t segment_bytes(Fw& fw, uint32_t comm, uint32_t peer) {
  const uint32_t rx_size = xread(fw, abi::kRxBufferSizeOffset);
  uint32_t seg = rank_field(fw, comm, peer, abi::kRankMaxSegment);
  if (seg == 0 || (rx_size != 0 && rx_size < seg)) seg = rx_size;
  return seg == 0 ? 4096 : seg;
}

// All segments of one eager message, in one step.
void send_eager(Fw& fw, CallSlot& call, PeerOp& op) {
  const uint32_t web = op.wire_elem_bytes;
  const uint32_t seg_elems = max_of<uint32_t>(1, segment_bytes(fw, call.d.comm, op.peer) / web);
  const bool matched = op.strm == 0;  // stream_put messages bypass matching: no sequence number
  const uint32_t seq_word = rank_field_offset(call.d.comm, op.peer, abi::kRankOutboundSeq);
  uint32_t seqn = matched ? fw.dp.xmem_read(seq_word) : 0;
  // One move for all segments: each changes only its count, operands and
  // the header's count, seqn and continuation flag.
  Move m = network_move(call, op.peer);
  m.res.compressed = op.wire_compressed;
  m.header = make_header(fw, call, op, op.peer, abi::kMsgEager);
  uint32_t sent = 0;
  do {
    const uint32_t n = min_of(seg_elems, op.count - sent);
    m.count = n;
    m.op0 = to_operand(buf_at(op.a, sent));
    if (op.fused) m.op1 = to_operand(buf_at(op.b, sent));
    m.header.count = n * web;
    m.header.seqn = seqn;
    if (sent != 0) m.header.flags |= abi::kHdrContinuation;
    if (matched) seqn++;
    op.error |= fw.dp.move(m);
    sent += n;
  } while (sent < op.count && op.error == 0);
  if (matched) fw.dp.xmem_write(seq_word, seqn);
  op.done_bytes = uint64_t{sent} * web;
  fw.st.work_counter++;
}

void send_rts(Fw& fw, CallSlot& call, PeerOp& op) {
  op.rid = take_rid(fw);
  Move m = network_move(call, op.peer);
  m.header = make_header(fw, call, op, op.peer, abi::kMsgRendezvousRequest);
  m.header.seqn = take_outbound_seqn(fw, call.d.comm, op.peer);
  op.error |= fw.dp.move(m);
  fw.st.work_counter++;
}

// Sender -> receiver of a staged pre-granted transfer: this send waits for
// grants of rid `op.rid` (the receiver's) from now on.
void send_ready(Fw& fw, CallSlot& call, PeerOp& op) {
  Move m = network_move(call, op.peer);
  m.header = make_header(fw, call, op, op.peer, abi::kMsgRendezvousAddr);
  m.header.flags = 0;
  m.header.reserved[kHdrWordKind] = kReadyNotice;
  m.header.seqn = take_outbound_seqn(fw, call.d.comm, op.peer);
  op.error |= fw.dp.move(m);
  fw.st.work_counter++;
}

}  // namespace

bool progress_send(Fw& fw, CallSlot& call, PeerOp& op) {
  if (op.state == OpState::start) {
    op.wire_elem_bytes = elem_bytes(call, op.wire_compressed);
    const uint64_t bytes = uint64_t{op.count} * op.wire_elem_bytes;
    if (bytes > 0xFFFFFFFFull) {
      op.error |= abi::kInvalidArgument;
      return true;
    }
    op.msg_bytes = static_cast<uint32_t>(bytes);
    const bool rendezvous = op.strm == 0 && fw.st.max_rendezvous_bytes != 0 && bytes > fw.st.max_eager_bytes;
    if (!rendezvous) {
      if (op.p2p && op.strm == 0 && fw.st.max_rendezvous_bytes == 0 && bytes > rx_capacity_bytes(fw)) {
        op.error |= abi::kDmaSizeError;  // could never be received eagerly
        return true;
      }
      send_eager(fw, call, op);
      op.state = OpState::done;
      return true;
    }
    op.pregranted = use_pregrant(fw, op, bytes);
    if (!op.pregranted) send_rts(fw, call, op);
    op.state = OpState::wait_grant;
    if (op.error != 0) return true;
  }
  while (op.state == OpState::wait_grant) {
    // The first grant of a pre-granted transfer names the rid; later ones
    // (staged pieces) are matched by it.
    const bool first_pregrant = op.pregranted && op.rid == 0;
    const uint32_t index = first_pregrant ? find_pregrant(fw, op.ctx, op.peer, call.collective_number)
                                          : find_grant(fw, op.ctx, op.peer, op.rid);
    if (index == kNoIndex) return wait_on_peer(fw, call, op, op.peer);
    const abi::WireHeader grant = fw.st.arrivals[index].a.header;
    consume_arrival(fw, index);
    if (check_signature(fw, call, op, grant)) {
      op.state = OpState::done;
      return true;
    }
    if (first_pregrant) {
      op.rid = grant.rid;
      if (grant.reserved[kHdrWordKind] == kPreGrantAwaitReady) {
        // The receiver stages this transfer and grants pieces only once we
        // are known to be waiting for them (see progress_recv).
        send_ready(fw, call, op);
        if (op.error != 0) op.state = OpState::done;
        continue;
      }
    }
    const uint32_t granted = grant.msg_bytes;
    const uint32_t offset = grant.reserved[0];
    if (granted == 0 || offset >= op.msg_bytes) {  // receiver takes no more (truncated receive)
      op.state = OpState::done;
      return true;
    }
    const uint32_t web = op.wire_elem_bytes;
    const uint32_t first_elem = offset / web;
    const uint32_t n = min_of(granted / web, op.count - first_elem);
    Move m = network_move(call, op.peer);
    m.count = n;
    m.op0 = to_operand(buf_at(op.a, first_elem));
    if (op.fused) m.op1 = to_operand(buf_at(op.b, first_elem));
    m.res.compressed = op.wire_compressed;
    m.header = make_header(fw, call, op, op.peer, abi::kMsgRendezvousData);
    m.header.count = n * web;
    m.header.vaddr = grant.vaddr;
    m.header.host = grant.host;
    m.header.reserved[0] = offset;
    m.header.seqn = take_outbound_seqn(fw, call.d.comm, op.peer);
    // Only a whole message is the same payload as its twins' (pieces of a
    // staged receive start at other offsets).
    if (offset == 0 && n == op.count) m.shared_payload = op.shared_payload;
    op.error |= fw.dp.move(m);
    fw.st.work_counter++;
    op.done_bytes = uint64_t{offset} + uint64_t{n} * web;
    if (op.error != 0 || op.done_bytes >= op.msg_bytes) op.state = OpState::done;
  }
  return true;
}

}  // namespace accl::fw::impl
