// SPDX-License-Identifier: Apache-2.0
//
// Resumable point-to-point primitives. Every call (user send/recv and every
// collective round) is built from PeerOps; progress_op() advances one as far
// as it can without blocking and remembers where it stopped in op.state, so a
// call can yield (NOT_READY) and resume on the next pass of the main loop.
//
// Send: eager when the wire bytes fit max_eager_size or rendezvous is
//   disabled; all eager segments go out in one step so no other message to
//   that peer can take sequence numbers in between. Rendezvous: a request to
//   send (RTS), then one data message per address message ("grant") the
//   receiver sends. Wire compression applies to both (the data plane
//   compresses the payload of the data message).
// Receive: matches the oldest eligible first segment or RTS; eager segments
//   are copied (or reduced) out of the RX payloads; an RTS is answered with
//   grants. The receiver chooses each grant's size: the whole remaining
//   message when it can land in place, or spare-buffer-sized pieces when it
//   must be staged (kernel-stream results, results in another representation
//   than the wire's, or a reduce whose local operand overlaps the result). A grant of 0 bytes tells the
//   sender to stop (the receive was shorter: truncation). A fused receive
//   whose pieces land in place has the data plane reduce them as they land
//   (Window::reduce) instead of landing them and reducing afterwards.
//
// Address message fields (firmware to firmware): vaddr/host = where to write,
// rid = the sender's transfer id, msg_bytes = bytes granted, reserved[0] =
// byte offset of the granted piece within the message, reserved[1] = what it
// is (grant, pre-grant, await-ready pre-grant, ready or abort notice; see
// state.hpp). Every message between firmwares except stream_put takes a
// sequence number; collective ones also carry the collective's number
// (reserved[2]) and argument signature (reserved[3]).
#include "firmware.hpp"

namespace accl::fw::impl {
namespace {

Operand to_operand(const Buf& b) {
  Operand o;
  if (b.none) return o;
  o.kind = b.stream ? OperandKind::stream : OperandKind::memory;
  o.host = b.host;
  o.compressed = b.compressed;
  o.addr = b.stream ? 0 : b.addr;
  return o;
}

// Max payload bytes of one eager segment to `peer`: the peer's max segment
// size, but never more than an RX buffer holds.
uint32_t segment_bytes(Fw& fw, uint32_t comm, uint32_t peer) {
  const uint32_t rx_size = xread(fw, abi::kRxBufferSizeOffset);
  uint32_t seg = rank_field(fw, comm, peer, abi::kRankMaxSegment);
  if (seg == 0 || (rx_size != 0 && rx_size < seg)) seg = rx_size;
  return seg == 0 ? 4096 : seg;
}

abi::WireHeader make_header(Fw& fw, const CallSlot& call, const PeerOp& op, uint32_t peer, uint8_t msg_type) {
  abi::WireHeader h{};
  h.tag = op.tag;
  h.src = call.d.local_rank;
  h.strm = op.strm;
  h.dst = static_cast<uint16_t>(rank_field(fw, call.d.comm, peer, abi::kRankSession));
  h.msg_type = msg_type;
  h.ctx = op.ctx;
  h.msg_bytes = op.msg_bytes;
  h.rid = op.rid;
  h.flags = op.wire_compressed ? uint32_t{abi::kHdrCompressed} : 0u;
  if ((op.ctx & 1u) != 0) {
    h.reserved[kHdrWordCollective] = call.collective_number;
    h.reserved[kHdrWordSignature] = call.signature;
  }
  return h;
}

Move network_move(const CallSlot& call, uint32_t peer) {
  Move m;
  m.arcfg = call.d.arcfg;
  m.func = call.d.function;
  m.res.kind = OperandKind::network;
  m.comm = call.d.comm;
  m.dst_rank = peer;
  m.deadline_ns = call.deadline_ns;
  return m;
}

uint32_t take_outbound_seqn(Fw& fw, uint32_t comm, uint32_t peer) {
  const uint32_t word = rank_field_offset(comm, peer, abi::kRankOutboundSeq);
  const uint32_t seqn = fw.dp.xmem_read(word);
  fw.dp.xmem_write(word, seqn + 1);
  return seqn;
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

uint32_t take_rid(Fw& fw) {
  const uint32_t rid = fw.st.next_rid & ~kReceiverRidBit;
  fw.st.next_rid = (rid + 1) & ~kReceiverRidBit;
  if (fw.st.next_rid == 0) fw.st.next_rid = 1;  // 0 is never a valid transfer id
  return rid;
}

// Collective transfers have the same size on both sides, so when both sides
// know it is a rendezvous transfer the receiver grants without waiting for an
// RTS: one message less per transfer, and the grant usually waits at the
// sender before the sender gets there. Point-to-point sizes are only known
// to the sender (and wildcards need the RTS to match): always RTS.
bool use_pregrant(const Fw& fw, const PeerOp& op, uint64_t wire_bytes) {
  return !op.p2p && op.strm == 0 && op.peer != abi::kRankAny && fw.st.max_rendezvous_bytes != 0 &&
         wire_bytes > fw.st.max_eager_bytes;
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

// A collective message from a rank whose collective has other arguments
// (count, reduce function or data type, root, ...) than ours: fail the op
// with INVALID_ARGUMENT instead of moving data that means something else.
// Returns true on a mismatch.
bool check_signature(Fw& fw, CallSlot& call, PeerOp& op, const abi::WireHeader& h) {
  if ((op.ctx & 1u) == 0 || h.reserved[kHdrWordSignature] == call.signature) return false;
  op.error |= abi::kInvalidArgument;
  call.signature_mismatch = true;
  if (fw.dp.log_enabled(kLogError)) {
    LogLine line;
    line.str("call ").dec(call.id).str(" scenario ").dec(call.d.scenario).str(" rank ").dec(call.d.local_rank)
        .str(": collective arguments differ from rank ").dec(h.src).str("'s (signature ").hex(call.signature)
        .str(" vs ").hex(h.reserved[kHdrWordSignature]).str(")");
    log_line(fw, kLogError, line);
  }
  return true;
}

// Fails the op if the link to the peer it waits on is broken. Returns true
// when the op is finished (failed).
// While the arrival table is full, fetches the next arrival from that peer
// past the ones queued before it (the next pass looks at it).
bool wait_on_peer(Fw& fw, const CallSlot& call, PeerOp& op, uint32_t peer) {
  const uint32_t bits = peer_link_status(fw, call.d.comm, call.d.comm_size, peer);
  if (bits == 0) {
    if (arrivals_full(fw)) fetch_arrival_for(fw, call.d.context_id, peer);
    return op.error != 0;  // a fetched link error fails the op
  }
  op.error |= bits;
  return true;
}

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

// Rendezvous data lands raw: stage it when the result is no plain memory in
// the wire representation, or when a reduce would read its local operand
// after the landing overwrote it.
bool needs_staging(const PeerOp& op) {
  return op.dst.stream || op.dst.none || op.dst.compressed != op.wire_compressed ||
         (op.fused && buf_overlap(op.a, op.dst, op.count));
}

// A fused rendezvous receive that lands in place reduces on landing (see
// fw::Window) when nothing needs converting: payload, operand and result in
// the uncompressed type, and arithmetic on that type.
bool reduces_on_landing(Fw& fw, const CallSlot& call, const PeerOp& op) {
  if (!op.fused || op.staged || op.wire_compressed || op.a.none || op.a.stream || op.a.compressed ||
      op.dst.compressed)
    return false;
  const bool arith_compressed = xread(fw, call.d.arcfg + 4 * abi::kArithIsCompressed) != 0;
  return !arith_compressed || call.d.uncompressed_bytes == call.d.compressed_bytes;
}

// Copies (or reduces) one eager segment out of its RX payload.
void receive_segment(Fw& fw, CallSlot& call, PeerOp& op, uint32_t index) {
  const ArrivalSlot& slot = fw.st.arrivals[index];
  const abi::WireHeader& h = slot.a.header;
  const uint32_t web = op.wire_elem_bytes;
  const uint64_t first_elem = op.done_bytes / web;
  const uint32_t seg_elems = h.count / web;
  const uint32_t usable =
      first_elem < op.count ? min_of<uint32_t>(seg_elems, op.count - static_cast<uint32_t>(first_elem)) : 0;
  // A segment the data plane could not store arrives with error bits and no
  // payload: report it, there is nothing to copy.
  if (usable > 0 && slot.a.status == 0) {
    const Buf payload = mem_buf(slot.a.payload_addr, slot.a.payload_host, op.wire_compressed, web);
    const Buf res = buf_at(op.dst, first_elem);
    if (op.fused) {
      const Buf x = buf_at(op.a, first_elem);
      op.error |= local_move(fw, call, usable, x, &payload, res);
    } else {
      op.error |= local_move(fw, call, usable, payload, nullptr, res);
    }
  }
  op.error |= slot.a.status;
  op.done_bytes += h.count;
  op.next_seqn = h.seqn + 1;
  consume_arrival(fw, index);
}

// `kind`: 0 for a grant, kPreGrantMarker / kPreGrantAwaitReady for the first
// message of a pre-granted transfer.
void send_address(Fw& fw, CallSlot& call, PeerOp& op, uint64_t vaddr, bool host, uint32_t bytes, uint32_t kind) {
  Move m = network_move(call, op.src);
  m.header = make_header(fw, call, op, op.src, abi::kMsgRendezvousAddr);
  m.header.vaddr = vaddr;
  m.header.host = host ? 1 : 0;
  m.header.msg_bytes = bytes;
  m.header.reserved[0] = static_cast<uint32_t>(op.done_bytes);
  m.header.reserved[kHdrWordKind] = kind;
  m.header.seqn = take_outbound_seqn(fw, call.d.comm, op.src);
  m.header.flags = 0;
  op.error |= fw.dp.move(m);
  fw.st.work_counter++;
}

bool progress_recv(Fw& fw, CallSlot& call, PeerOp& op) {
  if (op.state == OpState::start) {
    if (op.p2p && fw.st.max_rendezvous_bytes == 0) {
      // Eager-only: a receive larger than all RX buffers could only be served
      // by a message the sender refuses to send (same rule on both sides).
      const uint64_t bytes = uint64_t{op.count} * elem_bytes(call, op.wire_compressed);
      if (bytes > rx_capacity_bytes(fw)) {
        op.error |= abi::kDmaSizeError;
        return true;
      }
    }
    const uint32_t expected_web = elem_bytes(call, op.wire_compressed);
    const uint64_t expected_bytes = uint64_t{op.count} * expected_web;
    if (use_pregrant(fw, op, expected_bytes)) {
      // Collective receive of known rendezvous size: grant right away.
      op.pregranted = true;
      op.src = op.peer;
      op.msg_bytes = static_cast<uint32_t>(expected_bytes);
      op.wire_elem_bytes = expected_web;
      op.done_bytes = 0;
      op.rid = take_rid(fw) | kReceiverRidBit;
      op.staged = needs_staging(op);
      op.state = OpState::grant;
      if (op.staged) {
        // Spare buffer 3 is shared by every staged receive. Holding it while
        // the sender may still be busy elsewhere (an earlier round, or a
        // collective on another communicator that waits for *our* spare 3)
        // can deadlock; so announce the transfer now but take spare 3 and
        // grant only after the sender's ready notice.
        send_address(fw, call, op, 0, false, 0, kPreGrantAwaitReady);
        op.state = OpState::wait_ready;
        if (op.error != 0) return true;
      }
    }
  }
  if (op.state == OpState::start) {
    // A receive waits here pass after pass, mostly with an empty table:
    // then there is nothing to scan.
    const uint32_t index = fw.st.narrivals == 0
                               ? kNoIndex
                               : find_message(fw, op.ctx, call.d.comm, op.peer, op.tag, call.collective_number);
    if (index == kNoIndex && op.peer == abi::kRankAny) {
      // Not every failed link: then one dead member would fail every later
      // RANK_ANY receive, and its caller could receive from nobody else.
      op.error |= any_source_link_status(fw, call.d.comm, call.d.comm_size, call.d.local_rank, call.d.context_id);
      return op.error != 0;
    }
    if (index == kNoIndex) return wait_on_peer(fw, call, op, op.peer);
    const ArrivalSlot& slot = fw.st.arrivals[index];
    if (slot.seq == SeqState::error) {
      op.error |= slot.error;
      consume_arrival(fw, index);
      return true;
    }
    const abi::WireHeader& h = slot.a.header;
    if (check_signature(fw, call, op, h)) {
      consume_arrival(fw, index);
      return true;
    }
    op.src = h.src;
    op.msg_bytes = h.msg_bytes;
    op.wire_compressed = (h.flags & abi::kHdrCompressed) != 0;
    op.wire_elem_bytes = elem_bytes(call, op.wire_compressed);
    op.done_bytes = 0;
    op.truncated = uint64_t{op.msg_bytes} > uint64_t{op.count} * op.wire_elem_bytes;
    if (op.dst.stream && op.tag == abi::kTagAny) op.dst.stream_id = h.tag;
    if (h.msg_type == abi::kMsgEager) {
      receive_segment(fw, call, op, index);
      op.state = OpState::eager_rest;
    } else {
      op.rid = h.rid;
      consume_arrival(fw, index);
      op.staged = needs_staging(op);
      op.state = OpState::grant;
    }
  }
  while (op.error == 0 && op.state != OpState::done) {
    const uint32_t web = op.wire_elem_bytes;
    if (op.state == OpState::eager_rest) {
      if (op.done_bytes >= op.msg_bytes) {
        op.state = OpState::done;
        break;
      }
      const uint32_t index = find_continuation(fw, op.ctx, op.src, op.next_seqn);
      if (index == kNoIndex) return wait_on_peer(fw, call, op, op.src);
      receive_segment(fw, call, op, index);
    } else if (op.state == OpState::grant) {
      const uint64_t limit = min_of<uint64_t>(op.msg_bytes, uint64_t{op.count} * web);
      if (op.done_bytes >= limit) {
        if (op.truncated) send_address(fw, call, op, 0, false, 0, 0);  // stop the sender
        op.state = OpState::done;
        break;
      }
      uint64_t piece = limit - op.done_bytes;
      Buf landing = buf_at(op.dst, op.done_bytes / web);
      if (op.staged) {
        // Spare 3 is shared by all staged receives: wait until it is free.
        // This wait cannot deadlock: the holder's sender is known to wait
        // for grants (its RTS or ready notice arrived), so the holder's piece
        // completes without depending on anything else of ours.
        const uint64_t token = op_token(call, op);
        if (fw.st.spare3_owner != 0 && fw.st.spare3_owner != token) return false;
        fw.st.spare3_owner = token;
        const uint32_t spare = fw.st.max_rendezvous_bytes;
        const uint64_t spare_piece = uint64_t{spare / web} * web;
        if (spare_piece == 0) {
          op.error |= abi::kDmaSizeError;  // nowhere to stage a rendezvous transfer
          break;
        }
        piece = min_of(piece, spare_piece);
        landing = mem_buf(spare_address(fw, abi::kSpare3Offset), false, op.wire_compressed, web);
      }
      Window w;
      w.peer_ip = rank_field(fw, call.d.comm, op.src, abi::kRankIp);
      w.peer_port = rank_field(fw, call.d.comm, op.src, abi::kRankPort);
      w.ctx = op.ctx;
      w.rid = op.rid;
      w.addr = landing.addr;
      w.host = landing.host;
      w.bytes = piece;
      w.compressed = op.wire_compressed;
      if (reduces_on_landing(fw, call, op)) {
        const Buf operand = buf_at(op.a, op.done_bytes / web);
        w.reduce = true;
        w.arcfg = call.d.arcfg;
        w.func = call.d.function;
        w.operand_addr = operand.addr;
        w.operand_host = operand.host;
      }
      op.error |= fw.dp.open_window(w);
      if (op.error != 0) break;
      op.window = w;
      op.window_open = true;
      op.piece_bytes = piece;
      const bool first_pregrant = op.pregranted && !op.staged && op.done_bytes == 0;
      send_address(fw, call, op, landing.addr, landing.host, static_cast<uint32_t>(piece),
                   first_pregrant ? kPreGrantMarker : 0);
      op.state = OpState::wait_done;
    } else if (op.state == OpState::wait_ready) {
      const uint32_t index = find_ready(fw, op.ctx, op.src, op.rid);
      if (index == kNoIndex) return wait_on_peer(fw, call, op, op.src);
      const bool mismatch = check_signature(fw, call, op, fw.st.arrivals[index].a.header);
      consume_arrival(fw, index);
      if (mismatch) return true;
      op.state = OpState::grant;
    } else if (op.state == OpState::wait_done) {
      const uint32_t index = find_done(fw, op);
      if (index == kNoIndex) return wait_on_peer(fw, call, op, op.src);
      check_signature(fw, call, op, fw.st.arrivals[index].a.header);  // the data message's header
      op.error |= fw.st.arrivals[index].a.status;
      consume_arrival(fw, index);
      fw.dp.close_window(op.window);
      op.window_open = false;
      const uint64_t first_elem = op.done_bytes / web;
      const uint32_t n = static_cast<uint32_t>(op.piece_bytes / web);
      const Buf res = buf_at(op.dst, first_elem);
      if (op.staged) {
        const Buf staged = mem_buf(op.window.addr, op.window.host, op.wire_compressed, web);
        if (op.fused) {
          op.error |= local_move(fw, call, n, buf_at(op.a, first_elem), &staged, res);
        } else {
          op.error |= local_move(fw, call, n, staged, nullptr, res);
        }
        fw.st.spare3_owner = 0;  // the piece has left spare 3
      } else if (op.fused && !op.window.reduce) {
        op.error |= local_move(fw, call, n, buf_at(op.a, first_elem), &res, res);
      }
      op.done_bytes += op.piece_bytes;
      op.state = OpState::grant;
    } else {
      break;
    }
  }
  if (op.error == 0 && op.state == OpState::done && op.truncated) op.error |= abi::kTruncationError;
  return true;
}

bool op_waits_on(const PeerOp& op, uint32_t peer) {
  if (op.kind == OpKind::send) return op.state == OpState::wait_grant && op.peer == peer;
  if (op.kind != OpKind::recv) return false;
  if (op.state == OpState::start) return op.peer == peer || op.peer == abi::kRankAny;
  return op.state != OpState::done && op.src == peer;
}

}  // namespace

bool buf_overlap(const Buf& x, uint64_t x_count, const Buf& y, uint64_t y_count) {
  if (x.stream || y.stream || x.none || y.none || x.host != y.host || x_count == 0 || y_count == 0) return false;
  const uint64_t x_end = x.addr + x_count * x.elem_bytes;
  const uint64_t y_end = y.addr + y_count * y.elem_bytes;
  return x.addr < y_end && y.addr < x_end;
}

uint32_t local_move(Fw& fw, const CallSlot& call, uint32_t count, const Buf& op0, const Buf* op1, const Buf& res) {
  Move m;
  m.count = count;
  m.arcfg = call.d.arcfg;
  m.func = call.d.function;
  m.op0 = to_operand(op0);
  if (op1 != nullptr) m.op1 = to_operand(*op1);
  m.res = to_operand(res);
  m.stream_id = res.stream ? res.stream_id : 0;
  fw.st.work_counter++;
  return fw.dp.move(m);
}

bool progress_op(Fw& fw, CallSlot& call, PeerOp& op) {
  if (op.state == OpState::done || op.error != 0) return true;
  switch (op.kind) {
    case OpKind::send:
      return progress_send(fw, call, op);
    case OpKind::recv:
      return progress_recv(fw, call, op);
    case OpKind::local:
      op.error |= local_move(fw, call, op.count, op.a, op.fused ? &op.b : nullptr, op.dst);
      op.state = OpState::done;
      return true;
    case OpKind::none:
      break;
  }
  op.state = OpState::done;
  return true;
}

uint32_t fail_ops_waiting_on(Fw& fw, uint32_t comm, uint32_t peer, uint32_t bits) {
  uint32_t failed = 0;
  for (auto& call : fw.st.calls) {
    if (!call.used || call.d.comm != comm) continue;
    for (uint32_t i = 0; i < call.nops; ++i) {
      PeerOp& op = call.ops[i];
      if (op.error == 0 && op_waits_on(op, peer)) {
        op.error |= bits;
        failed++;
      }
    }
  }
  return failed;
}

uint32_t fail_ops_waiting_on_link(Fw& fw, uint32_t ip, uint32_t port, uint32_t bits) {
  uint32_t failed = 0;
  for (auto& call : fw.st.calls) {
    if (!call.used || call.nops == 0) continue;
    for (uint32_t r = 0; r < call.d.comm_size; ++r) {
      if (rank_field(fw, call.d.comm, r, abi::kRankIp) != ip || rank_field(fw, call.d.comm, r, abi::kRankPort) != port) {
        continue;
      }
      for (uint32_t i = 0; i < call.nops; ++i) {
        PeerOp& op = call.ops[i];
        if (op.error == 0 && op_waits_on(op, r)) {
          op.error |= bits;
          failed++;
          if (op.kind == OpKind::recv && op.peer == abi::kRankAny && op.state == OpState::start)
            link_failure_reported(fw, call.d.context_id);
        }
      }
    }
  }
  return failed;
}

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

bool arrival_awaited(Fw& fw, const Arrival& a) {
  const abi::WireHeader& h = a.header;
  const bool completion = a.kind == ArrivalKind::rendezvous_done;
  const bool ready = !completion && h.reserved[kHdrWordKind] == kReadyNotice;
  for (const auto& call : fw.st.calls) {
    if (!call.used) continue;
    for (uint32_t i = 0; i < call.nops; ++i) {
      const PeerOp& op = call.ops[i];
      if (op.rid != h.rid || op.ctx != h.ctx) continue;
      // Completions are matched by rid and ctx (and link) in find_done().
      if (completion) {
        if (op.kind == OpKind::recv && op.state == OpState::wait_done) return true;
      } else if (ready) {
        if (op.kind == OpKind::recv && op.state == OpState::wait_ready && op.src == h.src) return true;
      } else if (op.kind == OpKind::send && op.state == OpState::wait_grant && op.peer == h.src) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace accl::fw::impl
