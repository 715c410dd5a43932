// SPDX-License-Identifier: Apache-2.0
//
// The offloaded point-to-point protocol: how a send becomes device calls
// (the wire format is in p2p_wire.hpp).
//
// Protocol on the comm's point-to-point ACCL communicator (CommState::p2p_id:
// a context id of its own, so the device never holds these messages behind
// the comm's collective ones, nor the other way round):
//   * envelope: one message with device tag kEnvTag: a 32-byte header
//     (source, MPI tag, size, a per-(sender, receiver) sequence number) plus
//     inline data: the whole message when it fits (up to 4064 bytes, less
//     with an eager size below 4 KiB), else the 0..3 trailing bytes that are
//     not a whole device word. A small message is thus a single device
//     message and a single receive on each side (a separate payload would
//     add a second device call on the receiver's critical path, after the
//     host matched the envelope: that doubled the latency);
//   * payload: the rest, as int32 words with device tag = sequence number,
//     so the receiver asks for exactly the right message and size. Payloads
//     up to the eager size follow the envelope at once, and so do the first
//     few rendezvous-size ones (a device rendezvous: the sender's device
//     waits for the receiver's grant, no host action needed on the sender's
//     side, so a staged MPI_Send completes while the sender is inside a
//     native call); further rendezvous-size ones (kFlagRndv) wait for the
//     receiver's reply;
//   * reply: an envelope back (kFlagReply, seq of the message) once the
//     receive has matched and its payload receive is on the device: the
//     clear-to-send of a rendezvous payload and the ack of a synchronous send.
//     Replies travel through the envelope pull, so a waiting sender holds no
//     device call.
//
// Device call slots: the CCLO runs at most 64 calls at once and queues the
// rest in strict FIFO order. A rendezvous send holds its slot until the
// receiver's device grants, and a receive holds its slot until the data
// comes, so with hundreds of outstanding requests on each side, slots full
// of sends and receives would wait for peer calls queued behind the peers'
// own full slots until every call times out. The layer therefore keeps its
// point-to-point device calls within a budget (kSlotBudget, host-side queue
// beyond it) in classes that cannot wait for each other in a cycle:
//   * local: envelope, reply and payload sends. They finish without any host
//     action of the peer: eager ones at once, kFlagRndv ones only start
//     after the reply, i.e. when the receive is already in a device slot;
//   * remote: payload receives. They finish when the sender's payload send
//     runs: a local-class one always makes progress;
//   * early: rendezvous payload sends issued with the envelope. They wait for
//     the receiver's host to match (bounded by the device timeout, as before),
//     but they are few and their own budget keeps the other classes moving.
// Envelope pulls (one per active comm) stay outside the budget.
#include "p2p_proto.hpp"

#include "errors.hpp"
#include "p2p_fault.hpp"
#include "p2p_match.hpp"
#include "progress.hpp"

#include <accl/ring_queue.hpp>

#include <algorithm>
#include <cstring>

namespace accl::pmpi {

int g_on_device[kNumClasses] = {0, 0, 0, 0};
int g_early_reserved = 0;
std::vector<CommState*> g_active;

namespace {

// One queued device call: a plain send or receive of `words` int32 words
// (a description rather than a closure: no allocation per call).
struct DevOp {
  ShadowReq* r;
  uint8_t index;        // which r->r[] receives the device request
  bool reply_after;     // a payload receive: queue the reply once it is on the device
  bool send;            // send to / receive from `peer`
  BaseBuffer* buf;
  unsigned words;
  unsigned peer;
  uint32_t tag;
  communicatorId comm;
  RequestPtr issue() const {
    ACCL& accl = *state().accl;
    return send ? accl.send(*buf, words, peer, tag, comm, false, dataType::none, true)
                : accl.recv(*buf, words, peer, tag, comm, false, dataType::none, true);
  }
};
RingQueue<DevOp> g_ops[kNumClasses];  // std::deque allocated a block every few calls

BaseBuffer& env_buffer(ShadowReq* r) {
  if (!r->env_buf)
    r->env_buf = std::shared_ptr<BaseBuffer>(
        state().accl->create_buffer_host<uint8_t>(reinterpret_cast<uint8_t*>(&r->env), kEnvWords, dataType::int32));
  return *r->env_buf;
}

BaseBuffer& ctl_buffer(ShadowReq* r) {
  if (!r->ctl_buf)
    r->ctl_buf = std::shared_ptr<BaseBuffer>(
        state().accl->create_buffer_host<uint8_t>(reinterpret_cast<uint8_t*>(&r->ctl), kEnvWords, dataType::int32));
  return *r->ctl_buf;
}

// Puts one point-to-point call of class `cls` on the device (its class has
// budget). `op` counted in r->queued_ops.
void issue_op(const DevOp& op, OpClass cls) {
  ShadowReq* r = op.r;
  --r->queued_ops;
  try {
    r->r[op.index] = op.issue();
    r->r_class[op.index] = cls;
    ++g_on_device[cls];
    if (op.reply_after) p2p_reply_queue(r);
  } catch (...) {
    if (cls == kEarly) --g_early_reserved;
    std::string text;
    const int code = error_code_from_current_exception(r->call, &text);
    fail_request(r, code, text);
    // The sender waits for the reply: send it anyway, so it ends with an
    // error (its payload finds no receive) instead of waiting forever.
    if (op.reply_after) p2p_reply_queue(r);
  }
}

}  // namespace

// Queues a device call for p2p_ops_pump(). With its class's queue empty and
// budget left, the call goes to the device at once, without the round trip
// through the queue (every small send): within a class the order is the
// queue's; across classes it is the order of the p2p_op_queue() calls (the
// classes never wait for each other, see the top of the file).
void p2p_op_queue(ShadowReq* r, uint8_t index, OpClass cls, bool reply_after, bool send, BaseBuffer* buf,
                  unsigned words, unsigned peer, uint32_t tag, communicatorId comm) {
  const DevOp op{r, index, reply_after, send, buf, words, peer, tag, comm};
  const bool now = g_ops[cls].empty() && g_on_device[cls] < kSlotBudget[cls];
  if (!now) g_ops[cls].push_back(op);  // may throw: nothing counted yet
  ++r->queued_ops;
  flight_add(r);
  if (now) issue_op(op, cls);
  else progress_thread_kick();  // it waits for a slot: someone must issue it
}

void p2p_reply_queue(ShadowReq* r) {
  Envelope& c = r->ctl;
  c.magic = kMagic;  // header only: a reply carries no data
  c.flags = kFlagReply;
  c.src = r->cs->rank;
  c.tag = 0;
  c.seq = r->env.seq;
  c.inline_bytes = 0;
  c.bytes = 0;
  const unsigned to = static_cast<unsigned>(r->env.src);
  const communicatorId id = r->cs->p2p_id;
  BaseBuffer* b = &ctl_buffer(r);
  p2p_op_queue(r, 1, kLocal, false, true, b, kHeaderBytes / 4, to, kEnvTag, id);
}

void p2p_ops_pump() {
  // Every poll of a wait loop comes here twice, nearly always with nothing
  // queued: the check costs a tenth of walking the classes.
  if (g_ops[kRemote].empty() && g_ops[kLocal].empty() && g_ops[kEarly].empty()) return;
  for (OpClass cls : {kRemote, kLocal, kEarly}) {  // replies queued by remote ops go out in the same pass
    while (g_on_device[cls] < kSlotBudget[cls] && !g_ops[cls].empty()) {
      const DevOp op = g_ops[cls].front();
      g_ops[cls].pop_front();
      issue_op(op, cls);
    }
  }
}

bool p2p_ops_queued() {
  for (const auto& q : g_ops)
    if (!q.empty()) return true;
  return false;
}

namespace {

// Drops r's queued device work and slot budget.
void request_forget(ShadowReq* r) {
  // Every request is forgotten when freed; most hold nothing by then.
  if ((r->r_class[0] | r->r_class[1] | r->r_class[2]) == 0 && r->queued_ops == 0 && !r->awaiting_reply) return;
  for (int i = 0; i < 3; ++i) release_slot(r, i);
  if (r->queued_ops != 0) {
    for (int cls = 0; cls < kNumClasses; ++cls) {
      const size_t gone = g_ops[cls].remove_if([r](const DevOp& op) { return op.r == r; });
      if (cls == kEarly) g_early_reserved -= static_cast<int>(gone);
    }
    r->queued_ops = 0;
  }
  if (r->awaiting_reply && r->cs != nullptr) {
    auto it = std::find(r->cs->awaiting.begin(), r->cs->awaiting.end(), r);
    if (it != r->cs->awaiting.end()) stop_awaiting(r->cs, it);
  }
  r->awaiting_reply = false;
}

}  // namespace

void p2p_request_free(ShadowReq* r) {
  request_forget(r);
  shadow_free(r);
}

// --- envelope pulls: the receive side's one device call per communicator ---

void p2p_pull_ensure(CommState* cs, bool force) {
  if (cs->pull || (!force && cs->demand <= 0)) return;
  State& st = state();
  if (!cs->pull_env) {
    cs->pull_env = std::make_unique<Envelope>();
    cs->pull_buf = std::shared_ptr<BaseBuffer>(st.accl->create_buffer_host<uint8_t>(
        reinterpret_cast<uint8_t*>(cs->pull_env.get()), kEnvWords, dataType::int32));
  }
  cs->pull = st.accl->recv(*cs->pull_buf, kEnvWords, RANK_ANY, kEnvTag, cs->p2p_id, false, dataType::none, true);
  ++cs->refs;  // the pull writes into cs->pull_env: keep cs alive until it resolves
  if (!cs->in_active_list) {
    g_active.push_back(cs);
    cs->in_active_list = true;
  }
  if (cs->demand > 0) progress_thread_kick();  // a posted receive or an awaited reply
}

// The send side: envelope (with the message when it fits), payload at once
// (eager, early) or after the reply (rendezvous), or a self delivery.
void p2p_send_start(ShadowReq* r) {
  CommState* cs = r->cs;
  // A known-failed member: a device send would wait for a connection until
  // the device timeout.
  if (const uint32_t gone = p2p_peer_unreachable(cs, r->peer))
    throw DeviceError("send to rank " + std::to_string(r->peer) + ", whose link failed before,", state().world_rank,
                      gone);
  const uint64_t bytes = r->bytes;
  const unsigned char* src = static_cast<const unsigned char*>(r->send_src);
  if (src == nullptr) {
    if (r->tinfo.contiguous || bytes == 0) {
      src = static_cast<const unsigned char*>(r->buf);
    } else {
      void* s = r->held.stage(bytes);
      pack_to(s, bytes, r->buf, r->count, r->type);
      src = static_cast<const unsigned char*>(s);
    }
  }
  Envelope& e = r->env;
  e.magic = kMagic;
  e.flags = r->mode == SendMode::sync ? kFlagSync : 0;
  e.src = cs->rank;
  e.tag = r->tag;
  e.bytes = bytes;
  uint32_t& seq = cs->send_seq[static_cast<size_t>(r->peer)];
  e.seq = seq;
  seq = next_seq(seq);
  uint64_t payload = 0;
  if (bytes <= p2p_inline_limit()) {
    e.inline_bytes = static_cast<uint32_t>(bytes);
    if (bytes) std::memcpy(e.data, src, bytes);
  } else {
    const uint64_t tail = bytes % 4;
    payload = bytes - tail;
    e.inline_bytes = static_cast<uint32_t>(tail);
    if (tail) std::memcpy(e.data, src + payload, tail);
  }
  const bool rendezvous_size = payload > state().s.max_eager_size;
  const bool early = rendezvous_size && r->peer != cs->rank && g_early_reserved < kSlotBudget[kEarly];
  const bool rndv = rendezvous_size && !early;
  if (rndv) e.flags |= kFlagRndv;
  r->active = true;
  r->complete = false;
  if (r->peer == cs->rank) {
    p2p_self_send(r, src, bytes);
    r->held.release();
    return;
  }
  const unsigned peer = static_cast<unsigned>(r->peer);
  const communicatorId id = cs->p2p_id;
  BaseBuffer* env = &env_buffer(r);
  const unsigned env_words = envelope_words(e);
  // Whatever can throw comes before the first p2p_op_queue(), which may put
  // the envelope on the device at once: a send that failed after that point
  // could not be taken back (its caller frees the request).
  if (payload != 0) r->payload_buf = &r->held.wrap(src, payload / 4, dataType::int32);
  if (rndv || r->mode == SendMode::sync) {
    // The receiver's reply releases the payload / completes the synchronous send.
    r->awaiting_reply = true;
    cs->awaiting.push_back(r);
    ++cs->demand;
    p2p_pull_ensure(cs, false);
  }
  p2p_op_queue(r, 0, kLocal, false, true, env, env_words, peer, kEnvTag, id);
  if (payload != 0 && !rndv) {
    const uint32_t tag = e.seq;
    const unsigned words = static_cast<unsigned>(payload / 4);
    if (early) ++g_early_reserved;
    p2p_op_queue(r, 1, early ? kEarly : kLocal, false, true, r->payload_buf, words, peer, tag, id);
  }
  p2p_ops_pump();
}

void p2p_proto_teardown() {
  for (auto& q : g_ops) q.clear();
  for (int& n : g_on_device) n = 0;
  g_early_reserved = 0;
}

}  // namespace accl::pmpi
