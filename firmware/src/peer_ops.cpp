// SPDX-License-Identifier: Apache-2.0
//
// Resumable point-to-point primitives. Every call (user send/recv and every
// collective round) is built from PeerOps; progress_op() advances one as far
// as it can without blocking and remembers where it stopped in op.state, so a
// call can yield (NOT_READY) and resume on the next pass of the main loop.
//
// This file: the shared message helpers (peer_wire.hpp), local moves,
// progress_op and failing ops on link errors; the send side is in
// peer_send.cpp, the receive side in peer_recv.cpp, signature mismatches
// between ranks in collective_mismatch.cpp.
//
// Address message fields (firmware to firmware): vaddr/host = where to write,
// rid = the sender's transfer id, msg_bytes = bytes granted, reserved[0] =
// byte offset of the granted piece within the message, reserved[1] = what it
// is (grant, pre-grant, await-ready pre-grant, ready or abort notice; see
// state.hpp). Every message between firmwares except stream_put takes a
// sequence number; collective ones also carry the collective's number
// (reserved[2]) and argument signature (reserved[3]).
#include "peer_wire.hpp"

namespace accl::fw::impl {
namespace {

bool op_waits_on(const PeerOp& op, uint32_t peer) {
  if (op.kind == OpKind::send) return op.state == OpState::wait_grant && op.peer == peer;
  if (op.kind != OpKind::recv) return false;
  if (op.state == OpState::start) return op.peer == peer || op.peer == abi::kRankAny;
  return op.state != OpState::done && op.src == peer;
}

}  // namespace

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

uint32_t take_outbound_seqn(Fw& fw, uint32_t comm, uint32_t peer) {
  const uint32_t word = rank_field_offset(comm, peer, abi::kRankOutboundSeq);
  const uint32_t seqn = fw.dp.xmem_read(word);
  fw.dp.xmem_write(word, seqn + 1);
  return seqn;
}

uint32_t take_rid(Fw& fw) {
  const uint32_t rid = fw.st.next_rid & ~kReceiverRidBit;
  fw.st.next_rid = (rid + 1) & ~kReceiverRidBit;
  if (fw.st.next_rid == 0) fw.st.next_rid = 1;  // 0 is never a valid transfer id
  return rid;
}

bool use_pregrant(const Fw& fw, const PeerOp& op, uint64_t wire_bytes) {
  return !op.p2p && op.strm == 0 && op.peer != abi::kRankAny && fw.st.max_rendezvous_bytes != 0 &&
         wire_bytes > fw.st.max_eager_bytes;
}

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

bool wait_on_peer(Fw& fw, const CallSlot& call, PeerOp& op, uint32_t peer) {
  const uint32_t bits = peer_link_status(fw, call.d.comm, call.d.comm_size, peer);
  if (bits == 0) {
    if (arrivals_full(fw)) fetch_arrival_for(fw, call.d.context_id, peer);
    return op.error != 0;  // a fetched link error fails the op
  }
  op.error |= bits;
  return true;
}

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
