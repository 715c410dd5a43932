// SPDX-License-Identifier: Apache-2.0
//
// Receive side of the peer ops (see peer_ops.cpp).
//
// Receive: matches the oldest eligible first segment or RTS; eager segments
//   are copied (or reduced) out of the RX payloads; an RTS is answered with
//   grants. The receiver chooses each grant's size: the whole remaining
//   message when it can land in place, or spare-buffer-sized pieces when it
//   must be staged (kernel-stream results, results in another representation
//   than the wire's, or a reduce whose local operand overlaps the result). A grant of 0 bytes tells the
//   sender to stop (the receive was shorter: truncation). A fused receive
//   whose pieces land in place has the data plane reduce them as they land
//   (Window::reduce) instead of landing them and reducing afterwards.
#include "peer_wire.hpp"

namespace accl::fw::impl {
namespace {

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

}  // namespace

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
      if (op.error != 0) return true;
      // A full table may hold only messages nobody takes yet (a root's
      // broadcasts for later calls): take the communicator's next arrival
      // past them, as a receive from one peer does (issue 37: the BLACS
      // tester's MPI_ANY_SOURCE receives waited until their deadline).
      if (arrivals_full(fw)) fetch_arrival_for(fw, call.d.context_id, abi::kRankAny);
      return op.error != 0;  // a fetched link error fails the op
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

}  // namespace accl::fw::impl
