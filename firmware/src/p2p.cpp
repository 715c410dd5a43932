// SPDX-License-Identifier: Apache-2.0
//
// Local primitives (copy, combine) and point-to-point send / recv.
// Local moves never use wire compression: the ETH flag only matters on the
// network, so copy and combine ignore it.
#include "firmware.hpp"

namespace accl::fw::impl {

// Operand 0 of the call: the kernel stream or the buffer at address 0.
Buf call_op0(const CallSlot& call) {
  const bool compressed = (call.d.compression & abi::kOp0Compressed) != 0;
  if ((call.d.stream_flags & abi::kOp0Stream) != 0) return stream_buf(compressed, elem_bytes(call, compressed), 0);
  return mem_buf(call.d.addr[0], (call.d.host_flags & abi::kOp0Host) != 0, compressed, elem_bytes(call, compressed));
}

Buf call_op1(const CallSlot& call) {
  const bool compressed = (call.d.compression & abi::kOp1Compressed) != 0;
  return mem_buf(call.d.addr[1], (call.d.host_flags & abi::kOp1Host) != 0, compressed, elem_bytes(call, compressed));
}

// The result: the kernel stream (id = the call's tag) or the buffer at address 2.
Buf call_res(const CallSlot& call) {
  const bool compressed = (call.d.compression & abi::kResCompressed) != 0;
  if ((call.d.stream_flags & abi::kResStream) != 0) {
    const uint32_t id = call.d.tag == abi::kTagAny ? 0 : call.d.tag;
    return stream_buf(compressed, elem_bytes(call, compressed), id);
  }
  return mem_buf(call.d.addr[2], (call.d.host_flags & abi::kResHost) != 0, compressed, elem_bytes(call, compressed));
}

namespace {

StepResult run_single_op(Fw& fw, CallSlot& call) {
  PeerOp& op = call.ops[0];
  if (!progress_op(fw, call, op)) return StepResult::not_ready;
  call.status |= op.error;
  return StepResult::finished;
}

}  // namespace

StepResult step_copy(Fw& fw, CallSlot& call) {
  call.status |= local_move(fw, call, call.d.count, call_op0(call), nullptr, call_res(call));
  return StepResult::finished;
}

StepResult step_combine(Fw& fw, CallSlot& call) {
  const Buf op1 = call_op1(call);
  call.status |= local_move(fw, call, call.d.count, call_op0(call), &op1, call_res(call));
  return StepResult::finished;
}

StepResult step_send(Fw& fw, CallSlot& call) {
  if (call.nops == 0) {
    PeerOp& op = call.ops[0];
    zero_bytes(&op, sizeof(op));
    op.kind = OpKind::send;
    op.p2p = true;
    op.peer = call.d.root_src_dst;
    op.tag = call.d.tag;
    op.count = call.d.count;
    op.ctx = make_ctx(call.d.context_id, false);
    op.a = call_op0(call);
    op.wire_compressed = (call.d.compression & abi::kEthCompressed) != 0;
    // stream_put: the peer's data plane delivers straight to its kernel
    // stream `tag`; no receive call, no sequence number.
    if ((call.d.stream_flags & abi::kResStream) != 0) op.strm = call.d.tag + abi::kStreamIdOffset;
    call.nops = 1;
  }
  return run_single_op(fw, call);
}

StepResult step_recv(Fw& fw, CallSlot& call) {
  if (call.nops == 0) {
    PeerOp& op = call.ops[0];
    zero_bytes(&op, sizeof(op));
    op.kind = OpKind::recv;
    op.p2p = true;
    op.peer = call.d.root_src_dst;
    op.tag = call.d.tag;
    op.count = call.d.count;
    op.ctx = make_ctx(call.d.context_id, false);
    op.dst = call_res(call);
    op.wire_compressed = (call.d.compression & abi::kEthCompressed) != 0;
    call.nops = 1;
  }
  return run_single_op(fw, call);
}

}  // namespace accl::fw::impl
