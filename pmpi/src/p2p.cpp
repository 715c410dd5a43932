// SPDX-License-Identifier: Apache-2.0
//
// Offloaded point-to-point.
//
// Routing is per communicator, never per message: a rule like "offload
// messages above N bytes" cannot be evaluated by a receiver that does not
// know the size (MPI_ANY_SOURCE, larger receive counts), so on a
// communicator either every message travels through ACCL or none does. Comms
// created through our wrappers (and MPI_COMM_WORLD) are offloaded, decided at
// creation time on all members; other comms stay native for p2p.
//
// Protocol on the comm's ACCL communicator (its p2p context, so collectives
// never mix with it):
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
// The receiver pulls envelopes with RANK_ANY receives of the envelope tag and
// matches them here against posted receives in MPI order (posted order,
// arrival order, non-overtaking per source via the sequence numbers). That
// gives MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_Probe/Iprobe/Mprobe and exact
// status (source, tag, count) -- things the device cannot report itself.
//
// Progress: envelopes are matched when this rank runs any of our entry points
// (all wait loops call progress_locked()). So that a blocking MPI_Send never
// depends on the receiver reaching one of them (it may be inside a native
// call), blocking sends above the eager size are staged and detached
// (budget ACCL_P2P_STAGING_BYTES); smaller ones complete eagerly on the
// device anyway.
#include "pmpi.hpp"

#include <accl/log.hpp>
#include <accl/ring_queue.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace accl::pmpi {

namespace {

constexpr uint32_t kMagic = 0x41504531u;  // "APE1"
constexpr uint32_t kFlagSync = 1;
constexpr uint32_t kFlagRndv = 2;   // payload waits for the receiver's reply
constexpr uint32_t kFlagReply = 4;  // receiver -> sender: matched (seq = the message's)
constexpr uint32_t kEnvTag = 0x7FFFFFF0u;
constexpr uint32_t kSeqLimit = 0x7FFFFFF0u;  // sequence numbers stay below kEnvTag
constexpr size_t kHeaderBytes = offsetof(Envelope, data);
constexpr unsigned kEnvWords = sizeof(Envelope) / 4;  // receive size of envelope pulls
static_assert(kHeaderBytes % 4 == 0, "the envelope header is whole device words");

// Largest message sent inside its envelope: the envelope must stay an eager
// message (a rendezvous envelope would wait for the receiver's host).
uint64_t inline_limit() {
  const size_t eager = state().s.max_eager_size;
  return eager <= kHeaderBytes ? 0 : std::min<uint64_t>(sizeof(Envelope::data), eager - kHeaderBytes);
}

// Copies what an envelope carries: its header and inline bytes. The rest of
// the 4 KiB struct holds nothing, and copying it whole (twice per receive)
// cost more than the rest of matching a small message.
void copy_envelope(Envelope& to, const Envelope& from) {
  std::memmove(&to, &from, kHeaderBytes + std::min<size_t>(from.inline_bytes, sizeof from.data));
}

unsigned envelope_words(const Envelope& e) {
  return static_cast<unsigned>((kHeaderBytes + e.inline_bytes + 3) / 4);
}
constexpr int kMaxDetached = 1024;

int g_detached = 0;                  // detached blocking sends in flight

// Slot budget (see the top of the file). 16 + 24 + 8 leaves 16 of the
// device's 64 call slots for envelope pulls and collectives.
enum OpClass : uint8_t { kUnbudgeted = 0, kLocal = 1, kRemote = 2, kEarly = 3 };
constexpr int kNumClasses = 4;
constexpr int kSlotBudget[kNumClasses] = {0, 16, 24, 8};
int g_on_device[kNumClasses] = {0, 0, 0, 0};
int g_early_reserved = 0;  // early sends decided (envelope built) and not finished
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
std::vector<CommState*> g_active;    // comms with an envelope pull outstanding
ShadowReq* g_flight = nullptr;       // requests with device work outstanding

bool matches(const Envelope& e, int source, int tag) {
  return (source == MPI_ANY_SOURCE || source == e.src) && (tag == MPI_ANY_TAG || tag == e.tag);
}

void set_status(MPI_Status* st, int source, int tag, uint64_t bytes) {
  set_empty_status(st);  // not cancelled
  st->MPI_SOURCE = source;
  st->MPI_TAG = tag;
  PMPI_Status_set_elements_x(st, MPI_BYTE, static_cast<MPI_Count>(bytes));
}

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

void issue_op(const DevOp& op, OpClass cls);

// Queues a device call for pump_ops(). With its class's queue empty and
// budget left, the call goes to the device at once, without the round trip
// through the queue (every small send): within a class the order is the
// queue's; across classes it is the order of the queue_op() calls (the
// classes never wait for each other, see the top of the file).
void queue_op(ShadowReq* r, uint8_t index, OpClass cls, bool reply_after, bool send, BaseBuffer* buf, unsigned words,
              unsigned peer, uint32_t tag, communicatorId comm) {
  const DevOp op{r, index, reply_after, send, buf, words, peer, tag, comm};
  const bool now = g_ops[cls].empty() && g_on_device[cls] < kSlotBudget[cls];
  if (!now) g_ops[cls].push_back(op);  // may throw: nothing counted yet
  ++r->queued_ops;
  flight_add(r);
  if (now) issue_op(op, cls);
  else progress_thread_kick();  // it waits for a slot: someone must issue it
}

void release_slot(ShadowReq* r, int index) {
  if (r->r_class[index] == kEarly) --g_early_reserved;
  if (r->r_class[index] != kUnbudgeted) --g_on_device[r->r_class[index]];
  r->r_class[index] = kUnbudgeted;
}

// Keeps one envelope receive posted while someone waits for a message on
// `cs` (or `force`: an Iprobe wants to see new arrivals).
void ensure_pull(CommState* cs, bool force) {
  if (cs->pull || (!force && cs->demand <= 0)) return;
  State& st = state();
  if (!cs->pull_env) {
    cs->pull_env = std::make_unique<Envelope>();
    cs->pull_buf = std::shared_ptr<BaseBuffer>(st.accl->create_buffer_host<uint8_t>(
        reinterpret_cast<uint8_t*>(cs->pull_env.get()), kEnvWords, dataType::int32));
  }
  cs->pull = st.accl->recv(*cs->pull_buf, kEnvWords, RANK_ANY, kEnvTag, cs->id, false, dataType::none, true);
  ++cs->refs;  // the pull writes into cs->pull_env: keep cs alive until it resolves
  if (!cs->in_active_list) {
    g_active.push_back(cs);
    cs->in_active_list = true;
  }
  if (cs->demand > 0) progress_thread_kick();  // a posted receive or an awaited reply
}

// `take` bytes of a message (at most the receive buffer) into the user's
// buffer of type `ti`, by basic elements: a message may end inside an item
// (`items`: see deliver()).
void copy_into_user(ShadowReq* r, const void* src, uint64_t take, const TypeInfo& ti, int items) {
  if (take == 0) return;
  if (ti.contiguous) std::memcpy(const_cast<void*>(r->buf), src, take);
  else unpack_elements(src, take, const_cast<void*>(r->buf), items, r->type, r->layout.get());
}

void finish_request(ShadowReq* r);

// The request's error goes to the caller as the return code; a status's
// MPI_ERROR field is written only by the multiple-completion calls that
// return MPI_ERR_IN_STATUS (requests.cpp), never from here.
void fail_request(ShadowReq* r, int code, const std::string& text) {
  if (r->error == MPI_SUCCESS) {
    r->error = code;
    r->error_text = text;
  }
}

// A receive finished without device work left. A request the user already
// freed (MPI_Request_free on an active receive) goes back to the pool.
// Callers must not touch `r` afterwards unless they own it.
void complete_now(ShadowReq* r) {
  r->complete = true;
  if (r->user_freed) shadow_free(r);
}

// The receive of `r` matched (and its payload receive, if any, is on the
// device): tell the sender.
void queue_reply(ShadowReq* r) {
  Envelope& c = r->ctl;
  c.magic = kMagic;  // header only: a reply carries no data
  c.flags = kFlagReply;
  c.src = r->cs->rank;
  c.tag = 0;
  c.seq = r->env.seq;
  c.inline_bytes = 0;
  c.bytes = 0;
  const unsigned to = static_cast<unsigned>(r->env.src);
  const communicatorId id = r->cs->id;
  BaseBuffer* b = &ctl_buffer(r);
  queue_op(r, 1, kLocal, false, true, b, kHeaderBytes / 4, to, kEnvTag, id);
}

void queue_payload_recv(ShadowReq* r, bool reply_after) {
  BaseBuffer* b = r->payload_buf;
  const unsigned words = static_cast<unsigned>((r->env.bytes - r->env.inline_bytes) / 4);
  const unsigned from = static_cast<unsigned>(r->env.src);
  const uint32_t seq = r->env.seq;
  const communicatorId id = r->cs->id;
  queue_op(r, 0, kRemote, reply_after, false, b, words, from, seq, id);
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
    if (op.reply_after) queue_reply(r);
  } catch (...) {
    if (cls == kEarly) --g_early_reserved;
    std::string text;
    const int code = error_code_from_current_exception(r->call, &text);
    fail_request(r, code, text);
    // The sender waits for the reply: send it anyway, so it ends with an
    // error (its payload finds no receive) instead of waiting forever.
    if (op.reply_after) queue_reply(r);
  }
}

// Issues queued point-to-point device calls while their class has budget.
void pump_ops() {
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

// --- unexpected eager payloads --------------------------------------------
// An eager payload follows its envelope at once and waits on the receiver's
// device until a receive takes it. Left there while the application has not
// posted its receive, thousands of them (BLACS sends far ahead, then
// receives out of order) would fill the device's arrival table, and the
// envelopes queued behind them -- among them the one the application waits
// for, or the reply a sender waits for -- would never be seen: a deadlock
// that native MPI, which buffers unexpected eager messages, does not have.
// So an unexpected message's payload is taken off the device at once into
// host staging by an internal receive (a "drain", class remote: it finishes
// without host action of the sender), and the receive that matches the
// message later copies from there. Rendezvous-size payloads stay (their
// request to send holds one slot, and the sender's early budget bounds them).

bool payload_follows_eagerly(const Envelope& e) {
  const uint64_t payload = e.bytes - e.inline_bytes;
  return payload != 0 && (e.flags & kFlagRndv) == 0 && payload <= state().s.max_eager_size;
}

ShadowReq* start_drain(CommState* cs, const Envelope& e) {
  ShadowReq* d = shadow_alloc(ReqKind::recv, Call::Recv);
  d->is_drain = true;
  d->cs = cs;
  ++cs->refs;
  d->comm = cs->comm;
  d->active = true;
  copy_envelope(d->env, e);
  const uint64_t payload = e.bytes - e.inline_bytes;
  auto* dst = static_cast<unsigned char*>(d->held.stage(e.bytes));
  if (e.inline_bytes != 0) std::memcpy(dst + payload, e.data, e.inline_bytes);
  d->payload_buf = &d->held.wrap(dst, payload / 4, dataType::int32);
  d->rstate = RecvState::payload;
  queue_payload_recv(d, false);
  return d;
}

// Receive `r` takes the bytes of drain `d`, which are all in: a copy (or an
// unpack) after completion, as for a staged receive, and the synchronous
// sender's ack first if it waits for one.
void adopt_drained(ShadowReq* r, ShadowReq* d) {
  if (d->error != MPI_SUCCESS) {
    fail_request(r, d->error, d->error_text);
    r->rstate = RecvState::done;
    complete_now(r);
  } else {
    r->post.src = r->held.take_stage(d->held);
    r->rstate = RecvState::payload;
    if (r->env.flags & kFlagSync) queue_reply(r);  // completes once the ack is out
    else flight_add(r);                            // the next progress round copies and completes it
  }
  shadow_free(d);
}

void receive_drained(ShadowReq* r, ShadowReq* d, uint64_t take, int items) {
  // The source of the copy is filled in when the bytes are in.
  r->post = r->tinfo.contiguous
                ? PostCopy{PostCopy::memcpy_, const_cast<void*>(r->buf), nullptr, take, 0, r->type, {}}
                : PostCopy{PostCopy::unpack, const_cast<void*>(r->buf), nullptr, take, items, r->type, r->layout};
  if (d->complete) {
    adopt_drained(r, d);
  } else {
    d->adopter = r;
    r->rstate = RecvState::payload;
  }
}

// Hands a matched message to receive request `r`; `drain`: its payload is
// (being) taken into host staging.
void deliver(ShadowReq* r, const Envelope& e, std::vector<unsigned char>* self_data, ShadowReq* self_sync,
             ShadowReq* drain = nullptr) {
  copy_envelope(r->env, e);
  const uint64_t cap = r->bytes;
  const bool truncated = e.bytes > cap;
  const uint64_t take = truncated ? cap : e.bytes;
  set_status(&r->status, e.src, e.tag, take);
  if (truncated) r->error = MPI_ERR_TRUNCATE;
  const TypeInfo& ti = r->tinfo;
  // Items to unpack into: with the type's layout, up to all of them (a
  // trailing partial one included); without it, only whole ones.
  int items = r->count;
  if (!ti.contiguous && !r->layout) {
    const uint64_t whole = ti.size > 0 ? take / static_cast<uint64_t>(ti.size) : 0;
    if (whole * static_cast<uint64_t>(ti.size) != take)  // never drop the tail silently
      fail_request(r, state().err_argument,
                   "a message of " + std::to_string(take) + " bytes ends inside an item of a receive datatype of " +
                       std::to_string(ti.size) + " bytes whose layout could not be decoded (see pmpi/src/layout.cpp)");
    items = static_cast<int>(whole);
  }
  if (self_data != nullptr) {
    copy_into_user(r, self_data->data(), take, ti, items);
    if (self_sync != nullptr) {
      self_sync->complete = true;
      if (self_sync->user_freed) shadow_free(self_sync);
    }
    r->rstate = RecvState::done;
    complete_now(r);
    return;
  }
  const uint64_t payload = e.bytes - e.inline_bytes;
  if (drain != nullptr) {
    receive_drained(r, drain, take, items);
    return;
  }
  if (payload == 0 && !ti.contiguous && take != 0 && on_progress_thread()) {
    // Unpacking calls MPI: stage the data and let an application thread's
    // progress round unpack it and complete the receive.
    void* staged = r->held.stage(take);
    std::memcpy(staged, e.data, take);
    r->post = PostCopy{PostCopy::unpack, const_cast<void*>(r->buf), staged, take, items, r->type, r->layout};
    r->rstate = RecvState::payload;
    if (e.flags & kFlagSync) queue_reply(r);
    else flight_add(r);
    return;
  }
  if (payload == 0) {
    copy_into_user(r, e.data, take, ti, items);
    r->rstate = RecvState::done;
    if (e.flags & kFlagSync) queue_reply(r);  // completes once the ack is out
    else complete_now(r);
    return;
  }
  void* dst;
  if (ti.contiguous && !truncated) {
    dst = const_cast<void*>(r->buf);
  } else {
    dst = r->held.stage(e.bytes);
    r->post = ti.contiguous ? PostCopy{PostCopy::memcpy_, const_cast<void*>(r->buf), dst, take, 0, r->type, {}}
                            : PostCopy{PostCopy::unpack, const_cast<void*>(r->buf), dst, take, items, r->type,
                                       r->layout};
  }
  if (e.inline_bytes != 0) std::memcpy(static_cast<char*>(dst) + payload, e.data, e.inline_bytes);
  r->payload_buf = &r->held.wrap(dst, payload / 4, dataType::int32);
  r->rstate = RecvState::payload;
  queue_payload_recv(r, (e.flags & (kFlagSync | kFlagRndv)) != 0);
}

// A message that is next in line from its source: match or queue it.
void arrive(CommState* cs, const Envelope& e, std::vector<unsigned char>* self_data, ShadowReq* self_sync) {
  ShadowReq* prev = nullptr;
  for (ShadowReq* r = cs->posted_head; r != nullptr; prev = r, r = r->next_posted) {
    if (!matches(e, r->peer, r->tag)) continue;
    if (prev) prev->next_posted = r->next_posted;
    else cs->posted_head = r->next_posted;
    if (cs->posted_tail == r) cs->posted_tail = prev;
    r->next_posted = nullptr;
    --cs->demand;
    try {
      deliver(r, e, self_data, self_sync);
    } catch (...) {
      std::string text;
      const int code = error_code_from_current_exception(r->call, &text);
      fail_request(r, code, text);
      r->complete = true;
    }
    return;
  }
  UnexpectedMsg m;
  m.env = e;
  if (self_data) m.self_data = std::move(*self_data);
  m.self_sync = self_sync;
  if (self_data == nullptr && payload_follows_eagerly(e)) {
    try {
      m.drain = start_drain(cs, e);
    } catch (const std::exception& ex) {  // its payload stays on the device, where a receive can still take it
      ACCL_LOG_WARN("accl-pmpi rank {}: cannot take an unexpected payload off the device: {}", state().world_rank,
                    ex.what());
    }
  }
  cs->unexpected.push_back(std::move(m));
}

uint32_t next_seq(uint32_t s) { return s + 1 == kSeqLimit ? 0 : s + 1; }

void stop_awaiting(CommState* cs, std::vector<ShadowReq*>::iterator it) {
  (*it)->awaiting_reply = false;
  cs->awaiting.erase(it);
  --cs->demand;
}

// The receiver of one of our sends matched it: a rendezvous payload may go
// now (its receive is on the receiver's device), a synchronous send is done.
void reply_in(CommState* cs, const Envelope& e) {
  for (auto it = cs->awaiting.begin(); it != cs->awaiting.end(); ++it) {
    ShadowReq* r = *it;
    if (r->peer != e.src || r->env.seq != e.seq) continue;
    stop_awaiting(cs, it);
    if (r->env.flags & kFlagRndv) {
      BaseBuffer* b = r->payload_buf;
      const unsigned words = static_cast<unsigned>((r->env.bytes - r->env.inline_bytes) / 4);
      const unsigned to = static_cast<unsigned>(r->peer);
      const uint32_t seq = r->env.seq;
      const communicatorId id = cs->id;
      queue_op(r, 1, kLocal, false, true, b, words, to, seq, id);
    }
    return;
  }
  ACCL_LOG_ERROR("accl-pmpi: reply from rank {} for message {} matches no send", e.src, e.seq);
}

// An envelope pulled from the device: restore per-source order (the device
// may start concurrent sends in any order), then match.
void envelope_in(CommState* cs, const Envelope& e) {
  if (e.magic != kMagic || e.src < 0 || e.src >= cs->size) {
    ACCL_LOG_ERROR("accl-pmpi: dropped a malformed envelope on a communicator of {} ranks", cs->size);
    return;
  }
  if (e.flags & kFlagReply) {
    reply_in(cs, e);
    return;
  }
  uint32_t& expect = cs->recv_expect[static_cast<size_t>(e.src)];
  if (e.seq != expect) {
    cs->reorder.push_back(e);
    return;
  }
  arrive(cs, e, nullptr, nullptr);
  expect = next_seq(expect);
  for (bool found = true; found && !cs->reorder.empty();) {
    found = false;
    for (size_t i = 0; i < cs->reorder.size(); ++i) {
      const Envelope& h = cs->reorder[i];
      uint32_t& exp = cs->recv_expect[static_cast<size_t>(h.src)];
      if (h.seq != exp) continue;
      const Envelope next = h;
      cs->reorder.erase(cs->reorder.begin() + static_cast<std::ptrdiff_t>(i));
      arrive(cs, next, nullptr, nullptr);
      exp = next_seq(exp);
      found = true;
      break;
    }
  }
}

// --- members whose link failed ------------------------------------------
// A RANK_ANY pull that ends with LINK_ERROR names nobody; the device then
// says which members' links failed (ACCL::link_status), and only what waits
// on them fails: receives from them, sends waiting for their reply, and the
// MPI_ANY_SOURCE receives pending at that moment (they may have waited for
// the failed member's message; like ULFM's MPI_ERR_PROC_FAILED_PENDING, the
// error is the acknowledgement: MPI_ANY_SOURCE receives posted afterwards
// match messages from the members left and fail only when no other member
// is left). Receives from the others go on. A failed member stays failed on
// this communicator (a process killed does not come back).

std::string failed_link_text(const CommState* cs, int peer) {
  return "device error: the link to rank " + std::to_string(peer) +
         " of the communicator failed (its process died or is unreachable): " +
         error_code_to_string(cs->failed_link[static_cast<size_t>(peer)]);
}

// Error bits that end a receive from `peer` (MPI_ANY_SOURCE: only when every
// other member failed) or a send to it; 0 while it may wait.
uint32_t unreachable(const CommState* cs, int peer) {
  if (cs->failed_link.empty()) return 0;
  if (peer != MPI_ANY_SOURCE) return peer == cs->rank ? 0 : cs->failed_link[static_cast<size_t>(peer)];
  uint32_t bits = 0;
  for (int r = 0; r < cs->size; ++r) {
    if (r == cs->rank) continue;
    const uint32_t b = cs->failed_link[static_cast<size_t>(r)];
    if (b == 0) return 0;
    bits |= b;
  }
  return bits;
}

std::string unreachable_text(const CommState* cs, int peer) {
  if (peer != MPI_ANY_SOURCE) return failed_link_text(cs, peer);
  return "device error: MPI_ANY_SOURCE receive with no member left to send: the links to all " +
         std::to_string(cs->size - 1) + " other ranks of the communicator failed (LINK_ERROR)";
}

// Asks the device which members' links failed. False when it cannot tell
// (public firmware): then the caller fails everything that waits, as before.
bool learn_failed_links(CommState* cs) {
  ACCL& accl = *state().accl;
  try {
    if ((accl.get_capabilities() & abi::kCapLinkStatus) == 0) return false;
    if (cs->failed_link.empty()) cs->failed_link.assign(static_cast<size_t>(cs->size), 0);
    for (int r = 0; r < cs->size; ++r) {
      uint32_t& known = cs->failed_link[static_cast<size_t>(r)];
      if (r == cs->rank || known != 0) continue;
      const uint32_t bits = accl.link_status(static_cast<unsigned>(r), cs->id);
      if ((bits & abi::kLinkError) == 0) continue;
      known = bits;
      ACCL_LOG_WARN("accl-pmpi rank {}: {}; point-to-point with it on this communicator fails from now on",
                    state().world_rank, failed_link_text(cs, r).substr(std::strlen("device error: ")));
    }
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("accl-pmpi rank {}: cannot read the link status of the device: {}", state().world_rank, e.what());
    return false;
  }
  return true;
}

// Fails what waits on a failed member (and, with `any_source_too`, every
// pending MPI_ANY_SOURCE receive: `newly_failed` names the members).
void fail_waits_on_failed_links(CommState* cs, bool any_source_too, const std::string& newly_failed) {
  const int code = state().err_device;
  ShadowReq* prev = nullptr;
  for (ShadowReq* r = cs->posted_head; r != nullptr;) {
    ShadowReq* next = r->next_posted;
    const bool any = r->peer == MPI_ANY_SOURCE;
    if (unreachable(cs, r->peer) == 0 && !(any && any_source_too)) {
      prev = r;
      r = next;
      continue;
    }
    if (prev) prev->next_posted = next;
    else cs->posted_head = next;
    if (cs->posted_tail == r) cs->posted_tail = prev;
    r->next_posted = nullptr;
    --cs->demand;
    const std::string text =
        unreachable(cs, r->peer) != 0
            ? unreachable_text(cs, r->peer)
            : "device error: the link to rank " + newly_failed +
                  " of the communicator failed while this MPI_ANY_SOURCE receive waited (LINK_ERROR); "
                  "receives posted from now on match messages from the other ranks";
    fail_request(r, code, text);
    r->rstate = RecvState::done;
    complete_now(r);
    r = next;
  }
  for (size_t i = 0; i < cs->awaiting.size();) {
    ShadowReq* r = cs->awaiting[i];
    if (unreachable(cs, r->peer) == 0) {
      ++i;
      continue;
    }
    stop_awaiting(cs, cs->awaiting.begin() + static_cast<std::ptrdiff_t>(i));
    fail_request(r, code, failed_link_text(cs, r->peer));
  }
}

// After a pull ended with LINK_ERROR: true when the failed members are known
// and what waited on them failed, so that the pull goes on for the others.
bool handle_link_failure(CommState* cs) {
  std::vector<uint32_t> before = cs->failed_link;
  if (!learn_failed_links(cs)) return false;
  std::string newly;
  for (int r = 0; r < cs->size; ++r) {
    const bool was = !before.empty() && before[static_cast<size_t>(r)] != 0;
    if (cs->failed_link[static_cast<size_t>(r)] == 0 || was) continue;
    newly += (newly.empty() ? "" : ", ") + std::to_string(r);
  }
  // Nobody new: the failed link carried traffic again before we asked, or a
  // member already known; receives pending from anyone may go on.
  fail_waits_on_failed_links(cs, !newly.empty(), newly);
  return true;
}

// Returns how many references the resolved pulls held.
int progress_comm(CommState* cs) {
  int released = 0;
  while (cs->pull) {
    bool done = false;
    bool failed = false;
    bool link_failed = false;
    std::string text;
    int code = MPI_SUCCESS;
    try {
      done = cs->pull->test();
    } catch (const DeviceError& e) {
      // A pull that saw no envelope within the device timeout is normal: an
      // MPI receive may wait forever. Re-post it while someone waits.
      failed = true;
      link_failed = (e.retcode() & abi::kLinkError) != 0;
      if (!(e.retcode() & abi::kReceiveTimeoutError)) code = error_code_from_current_exception(Call::Recv, &text);
    } catch (const TimeoutError&) {
      failed = true;
    } catch (...) {
      failed = true;
      code = error_code_from_current_exception(Call::Recv, &text);
    }
    if (!done && !failed) break;
    Envelope e;
    copy_envelope(e, *cs->pull_env);
    cs->pull.reset();
    ++released;
    if (link_failed && handle_link_failure(cs)) code = MPI_SUCCESS;  // the others' envelopes still come
    if (code != MPI_SUCCESS) {
      // The device lost this comm's p2p traffic: fail every waiting receive.
      while (ShadowReq* r = cs->posted_head) {
        cs->posted_head = r->next_posted;
        r->next_posted = nullptr;
        --cs->demand;
        fail_request(r, code, text);
        r->complete = true;
      }
      cs->posted_tail = nullptr;
      while (!cs->awaiting.empty()) {
        ShadowReq* r = cs->awaiting.back();
        stop_awaiting(cs, cs->awaiting.end() - 1);
        fail_request(r, code, text);
      }
      break;
    }
    if (done) envelope_in(cs, e);
    try {
      ensure_pull(cs, false);
    } catch (const std::exception& ex) {
      ACCL_LOG_ERROR("accl-pmpi: cannot post an envelope receive: {}", ex.what());
      break;
    }
  }
  return released;
}

// Device work of `r` finished (or failed): complete it.
void finish_request(ShadowReq* r) {
  flight_remove(r);
  if (r->is_drain) {  // the staging stays until a receive takes it
    r->complete = true;
    if (ShadowReq* adopter = r->adopter) adopt_drained(adopter, r);
    return;
  }
  if (r->error == MPI_SUCCESS) run_post_copy(r->post);
  r->post = PostCopy{};
  r->held.release();
  if (r->kind == ReqKind::recv) r->rstate = RecvState::done;
  r->complete = true;
  if (r->user_freed) {
    if (r->detached) --g_detached;
    if (r->error != MPI_SUCCESS)
      ACCL_LOG_ERROR("accl-pmpi rank {}: a detached/freed {} failed: {}", state().world_rank, call_name(r->call),
                     r->error_text);
    shadow_free(r);
  }
}

// Inside a catch: the device call ended at its deadline with nothing else
// wrong (no link, sequence or size error).
bool current_is_plain_timeout() {
  try {
    throw;
  } catch (const DeviceError& e) {
    return e.retcode() == abi::kReceiveTimeoutError;
  } catch (...) {
    return false;
  }
}

void progress_request(ShadowReq* r) {
  bool pending = r->queued_ops != 0 || r->awaiting_reply;
  for (int i = 0; i < 3; ++i) {
    RequestPtr& dev = r->r[i];
    if (!dev) continue;
    try {
      if (dev->test()) {
        release_slot(r, i);
        dev.reset();
      } else {
        pending = true;
      }
    } catch (...) {
      release_slot(r, i);
      dev.reset();
      // An eager payload receive, like an envelope pull, may wait for a
      // sender that is busy outside MPI for longer than the device timeout
      // (its payload send may still be queued in the layer): post it again.
      // Not a rendezvous one: it may have timed out after granting, and the
      // data it granted would be lost to a new receive, which would then
      // wait forever.
      if (r->kind == ReqKind::recv && i == 0 && r->error == MPI_SUCCESS &&
          r->env.bytes - r->env.inline_bytes <= state().s.max_eager_size && current_is_plain_timeout()) {
        queue_payload_recv(r, false);
        pending = true;
        continue;
      }
      std::string text;
      const int code = error_code_from_current_exception(r->call, &text);
      fail_request(r, code, text);
    }
  }
  if (pending) return;
  // Unpacking into a derived datatype calls MPI: an application thread's round does it.
  if (r->post.kind == PostCopy::unpack && on_progress_thread()) return;
  finish_request(r);
}

void self_send(ShadowReq* r, const unsigned char* src, uint64_t bytes) {
  CommState* cs = r->cs;
  std::vector<unsigned char> data(src, src + bytes);
  ShadowReq* sync = r->mode == SendMode::sync ? r : nullptr;
  if (sync == nullptr) r->complete = true;  // the data is copied: the send buffer is free
  uint32_t& expect = cs->recv_expect[static_cast<size_t>(cs->rank)];
  expect = next_seq(expect);
  arrive(cs, r->env, &data, sync);
}

}  // namespace

void flight_add(ShadowReq* r) {
  if (r->in_flight) return;
  r->prev_flight = nullptr;
  r->next_flight = g_flight;
  if (g_flight) g_flight->prev_flight = r;
  g_flight = r;
  r->in_flight = true;
}

void flight_remove(ShadowReq* r) {
  if (!r->in_flight) return;
  if (r->prev_flight) r->prev_flight->next_flight = r->next_flight;
  else g_flight = r->next_flight;
  if (r->next_flight) r->next_flight->prev_flight = r->prev_flight;
  r->prev_flight = r->next_flight = nullptr;
  r->in_flight = false;
}

void progress_locked() {
  if (!on_progress_thread()) {
    note_app_progress();
    type_release_deferred();
  }
  for (size_t i = 0; i < g_active.size();) {
    CommState* cs = g_active[i];
    int released = progress_comm(cs);
    if (!cs->pull) {
      cs->in_active_list = false;
      g_active[i] = g_active.back();
      g_active.pop_back();
    } else {
      ++i;
    }
    while (released-- > 0) comm_release(cs);  // may destroy a freed comm (no pull left then)
  }
  pump_ops();
  for (ShadowReq* r = g_flight; r != nullptr;) {
    ShadowReq* next = r->next_flight;
    progress_request(r);
    r = next;
  }
  pump_ops();
}

bool p2p_peer_may_wait() {
  for (const auto& q : g_ops)
    if (!q.empty()) return true;
  for (const CommState* cs : g_active)
    if (cs->demand > 0) return true;
  return false;
}

void p2p_forget(ShadowReq* r) {
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

void p2p_start_send(ShadowReq* r) {
  CommState* cs = r->cs;
  // A known-failed member: a device send would wait for a connection until
  // the device timeout.
  if (const uint32_t gone = unreachable(cs, r->peer))
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
  if (bytes <= inline_limit()) {
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
    self_send(r, src, bytes);
    r->held.release();
    return;
  }
  const unsigned peer = static_cast<unsigned>(r->peer);
  const communicatorId id = cs->id;
  BaseBuffer* env = &env_buffer(r);
  const unsigned env_words = envelope_words(e);
  // Whatever can throw comes before the first queue_op(), which may put the
  // envelope on the device at once: a send that failed after that point
  // could not be taken back (its caller frees the request).
  if (payload != 0) r->payload_buf = &r->held.wrap(src, payload / 4, dataType::int32);
  if (rndv || r->mode == SendMode::sync) {
    // The receiver's reply releases the payload / completes the synchronous send.
    r->awaiting_reply = true;
    cs->awaiting.push_back(r);
    ++cs->demand;
    ensure_pull(cs, false);
  }
  queue_op(r, 0, kLocal, false, true, env, env_words, peer, kEnvTag, id);
  if (payload != 0 && !rndv) {
    const uint32_t tag = e.seq;
    const unsigned words = static_cast<unsigned>(payload / 4);
    if (early) ++g_early_reserved;
    queue_op(r, 1, early ? kEarly : kLocal, false, true, r->payload_buf, words, peer, tag, id);
  }
  pump_ops();
}

void p2p_start_recv(ShadowReq* r) {
  CommState* cs = r->cs;
  r->active = true;
  r->complete = false;
  r->error = MPI_SUCCESS;
  r->error_text.clear();
  r->rstate = RecvState::posted;
  for (auto it = cs->unexpected.begin(); it != cs->unexpected.end(); ++it) {
    if (!matches(it->env, r->peer, r->tag)) continue;
    UnexpectedMsg m = std::move(*it);
    cs->unexpected.erase(it);
    const bool self = m.env.src == cs->rank;
    deliver(r, m.env, self ? &m.self_data : nullptr, m.self_sync, m.drain);
    pump_ops();
    return;
  }
  if (unreachable(cs, r->peer) != 0) {  // nothing came before it failed, nothing will
    fail_request(r, state().err_device, unreachable_text(cs, r->peer));
    r->rstate = RecvState::done;
    r->complete = true;
    return;
  }
  r->next_posted = nullptr;
  if (cs->posted_tail) cs->posted_tail->next_posted = r;
  else cs->posted_head = r;
  cs->posted_tail = r;
  ++cs->demand;
  ensure_pull(cs, false);
}

bool p2p_cancel(ShadowReq* r) {
  if (r->kind != ReqKind::recv || r->rstate != RecvState::posted) return false;
  CommState* cs = r->cs;
  ShadowReq* prev = nullptr;
  for (ShadowReq* p = cs->posted_head; p != nullptr; prev = p, p = p->next_posted) {
    if (p != r) continue;
    if (prev) prev->next_posted = p->next_posted;
    else cs->posted_head = p->next_posted;
    if (cs->posted_tail == p) cs->posted_tail = prev;
    p->next_posted = nullptr;
    --cs->demand;
    r->cancelled = true;
    r->complete = true;
    r->rstate = RecvState::done;
    set_empty_status(&r->status);
    PMPI_Status_set_cancelled(&r->status, 1);
    return true;
  }
  return false;
}

void p2p_drain() {
  // Detached sends and freed requests must reach the peer before teardown.
  State& st = state();
  // Bounded like every offloaded call: a detached send still running after
  // the device timeout (ACCL_PMPI_TIMEOUT_MS) has failed on the device anyway.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(st.s.timeout_ms);
  PollPacer pacer;
  for (;;) {
    {
      std::lock_guard lock(st.mu);
      progress_locked();
      bool busy = false;
      for (ShadowReq* r = g_flight; r != nullptr; r = r->next_flight) busy = busy || r->user_freed;
      if (!busy) return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ACCL_LOG_WARN("accl-pmpi rank {}: MPI_Finalize gave up waiting for detached sends after {} ms "
                    "(ACCL_PMPI_TIMEOUT_MS)", st.world_rank, st.s.timeout_ms);
      return;
    }
    native_progress();
    pacer.pause();
  }
}

void p2p_teardown() {
  for (auto& q : g_ops) q.clear();
  for (int& n : g_on_device) n = 0;
  g_early_reserved = 0;
  g_active.clear();
  g_flight = nullptr;
  g_detached = 0;
}

// ---------------------------------------------------------------------------
// Entry helpers
// ---------------------------------------------------------------------------

namespace {

// Why p2p on `comm` is native (never Offloaded when *cs is null).
Reason p2p_route(MPI_Comm comm, CommState** cs) {
  State& st = state();
  *cs = nullptr;
  if (!st.active) return st.s.offload ? Reason::NoDevice : Reason::Disabled;
  if (!st.s.p2p) return Reason::Excluded;
  if (!st.can_p2p) return Reason::DeviceCap;
  *cs = comm_for_p2p(comm);
  if (*cs != nullptr) return Reason::Offloaded;
  CommState* known = comm_lookup(comm);
  if (known != nullptr) return known->accl ? Reason::P2pNative : known->native_reason;
  if (comm == MPI_COMM_NULL) return Reason::BadArgs;
  int inter = 0, size = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter) return Reason::Intercomm;
  PMPI_Comm_size(comm, &size);
  return size < 2 ? Reason::CommSize1 : Reason::P2pNative;
}

bool valid_peer(const CommState* cs, int peer, bool any_ok) {
  return (peer >= 0 && peer < cs->size) || (any_ok && peer == MPI_ANY_SOURCE);
}
bool valid_tag(int tag, bool any_ok) {
  static int tag_ub = [] {
    int* v = nullptr;
    int flag = 0;
    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag);
    return flag && v ? *v : 32767;
  }();
  return (tag >= 0 && tag <= tag_ub) || (any_ok && tag == MPI_ANY_TAG);
}
ShadowReq* new_req(ReqKind kind, Call call, CommState* cs, MPI_Comm comm, const void* buf, int count,
                   MPI_Datatype type, uint64_t bytes, int peer, int tag, SendMode mode) {
  ShadowReq* r = shadow_alloc(kind, call);
  r->cs = cs;
  ++cs->refs;
  r->comm = comm;
  r->buf = buf;
  r->count = count;
  r->type = type;
  r->tinfo = type_info(type);
  r->bytes = bytes;
  r->peer = peer;
  r->tag = tag;
  r->mode = mode;
  // Taken here, on the application's thread: deliver() may run elsewhere.
  if (kind == ReqKind::recv && bytes != 0 && !r->tinfo.contiguous) r->layout = type_layout(type);
  return r;
}

// A request that outlives its entry point (non-blocking, persistent) keeps
// its own reference to a non-contiguous derived type, which it packs or
// unpacks with later: the application may free the type meanwhile. Others
// never use the type after their entry point (tinfo is cached). mu held.
void hold_type(ShadowReq* r) {
  if (r->tinfo.contiguous) return;
  r->type_ref = type_hold(r->type);
  if (r->type_ref != MPI_DATATYPE_NULL) r->type = r->type_ref;
}

int fail_now(Call call, MPI_Comm comm) {
  std::string text;
  const int code = error_code_from_current_exception(call, &text);
  return raise_error(comm, call, code, text);
}

// Blocking send on an offloaded comm.
int send_blocking(Call call, const void* buf, int count, MPI_Datatype type, uint64_t bytes, int dest, int tag,
                  MPI_Comm comm, CommState* cs, SendMode mode) {
  State& st = state();
  ShadowReq* r = nullptr;
  try {
    std::lock_guard lock(st.mu);
    r = new_req(ReqKind::send, call, cs, comm, buf, count, type, bytes, dest, tag, mode);
    bool detach = false;
    if (mode != SendMode::sync && g_detached < kMaxDetached) {
      if (bytes <= inline_limit() || dest == cs->rank) {
        detach = true;  // everything travels inside the envelope (or is copied)
      } else if (bytes - bytes % 4 > st.s.max_eager_size || !type_info(type).contiguous) {
        // Rendezvous needs the receiver's host to match the envelope first:
        // stage so this send returns regardless of what the receiver does.
        if (Staging* s = staging_get(bytes, true)) {
          r->held.s[0] = s;
          if (type_info(type).contiguous) std::memcpy(s->ptr, buf, bytes);
          else pack_to(s->ptr, bytes, buf, count, type);
          r->send_src = s->ptr;
          detach = true;
        }
      }
    }
    p2p_start_send(r);
    if (detach) {
      if (r->complete) {
        shadow_free(r);
      } else {
        r->user_freed = true;
        r->detached = true;
        ++g_detached;
      }
      return MPI_SUCCESS;
    }
  } catch (...) {
    if (r != nullptr) {
      std::lock_guard lock(st.mu);
      flight_remove(r);
      shadow_free(r);
    }
    return fail_now(call, comm);
  }
  wait_until([&] { return r->complete; });
  return request_finish(r, MPI_STATUS_IGNORE);
}

int start_nonblocking(ShadowReq* r, MPI_Request* request) {
  State& st = state();
  try {
    std::lock_guard lock(st.mu);
    if (r->kind == ReqKind::send) p2p_start_send(r);
    else p2p_start_recv(r);
  } catch (...) {
    const MPI_Comm comm = r->comm;
    const Call call = r->call;
    {
      std::lock_guard lock(st.mu);
      flight_remove(r);
      shadow_free(r);
    }
    *request = MPI_REQUEST_NULL;
    return fail_now(call, comm);
  }
  *request = as_request(r);
  return MPI_SUCCESS;
}

}  // namespace

// --- entry points used by the C and Fortran wrappers -------------------------

template <typename Native>
int p2p_send_entry(Call call, const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                   SendMode mode, MPI_Request* request, bool persistent, Native&& native, bool account = true) {
  CallScope scope(call, account);
  CommState* cs = nullptr;
  Reason why = p2p_route(comm, &cs);
  const BufferBytes size = buffer_bytes(count, type);
  const uint64_t bytes = size.bytes;
  if (why == Reason::Offloaded && dest == MPI_PROC_NULL) why = Reason::ProcNull;
  if (why == Reason::Offloaded && (!valid_peer(cs, dest, false) || !valid_tag(tag, false) || !size.valid))
    why = Reason::BadArgs;
  if (ACCL_UNLIKELY(suspect_buffer(buf)) && why != Reason::BadArgs && size.valid && comm != MPI_COMM_NULL)
    if (const BufferFault f = check_p2p_buffer(buf, count, type)) return reject_arguments(scope, comm, call, f, bytes);
  if (why != Reason::Offloaded) {
    scope.native(why, bytes, comm);
    return native();
  }
  scope.offloaded(bytes, comm);
  if (persistent) {
    std::lock_guard lock(state().mu);
    ShadowReq* r = new_req(ReqKind::send, call, cs, comm, buf, count, type, bytes, dest, tag, mode);
    r->persistent = true;
    hold_type(r);
    *request = as_request(r);
    return MPI_SUCCESS;
  }
  if (request == nullptr) return send_blocking(call, buf, count, type, bytes, dest, tag, comm, cs, mode);
  ShadowReq* r;
  {
    std::lock_guard lock(state().mu);
    r = new_req(ReqKind::send, call, cs, comm, buf, count, type, bytes, dest, tag, mode);
  }
  return start_nonblocking(r, request);
}

template <typename Native>
int p2p_recv_entry(Call call, void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                   MPI_Status* status, MPI_Request* request, bool persistent, Native&& native, bool account = true) {
  CallScope scope(call, account);
  CommState* cs = nullptr;
  Reason why = p2p_route(comm, &cs);
  const BufferBytes size = buffer_bytes(count, type);
  const uint64_t bytes = size.bytes;
  if (why == Reason::Offloaded && source == MPI_PROC_NULL) why = Reason::ProcNull;
  if (why == Reason::Offloaded && (!valid_peer(cs, source, true) || !valid_tag(tag, true) || !size.valid))
    why = Reason::BadArgs;
  if (ACCL_UNLIKELY(suspect_buffer(buf)) && why != Reason::BadArgs && size.valid && comm != MPI_COMM_NULL)
    if (const BufferFault f = check_p2p_buffer(buf, count, type)) return reject_arguments(scope, comm, call, f, bytes);
  if (why != Reason::Offloaded) {
    scope.native(why, bytes, comm);
    return native();
  }
  scope.offloaded(bytes, comm);
  ShadowReq* r;
  {
    std::lock_guard lock(state().mu);
    r = new_req(ReqKind::recv, call, cs, comm, buf, count, type, bytes, source, tag, SendMode::standard);
    if (persistent || request != nullptr) hold_type(r);
    if (persistent) {
      r->persistent = true;
      *request = as_request(r);
      return MPI_SUCCESS;
    }
  }
  if (request != nullptr) return start_nonblocking(r, request);
  MPI_Request tmp;
  int rc = start_nonblocking(r, &tmp);
  if (rc != MPI_SUCCESS) return rc;
  wait_until([&] { return r->complete; });
  return request_finish(r, status);
}

// MPI_Probe / MPI_Iprobe / MPI_Mprobe / MPI_Improbe.
template <typename Native>
int p2p_probe_entry(Call call, int source, int tag, MPI_Comm comm, bool blocking, int* flag, MPI_Message* message,
                    MPI_Status* status, Native&& native) {
  CallScope scope(call);
  CommState* cs = nullptr;
  Reason why = p2p_route(comm, &cs);
  if (why == Reason::Offloaded && source == MPI_PROC_NULL) why = Reason::ProcNull;
  if (why == Reason::Offloaded && (!valid_peer(cs, source, true) || !valid_tag(tag, true))) why = Reason::BadArgs;
  if (why != Reason::Offloaded) {
    scope.native(why, 0, comm);
    return native();
  }
  scope.offloaded(0, comm);
  State& st = state();
  bool found = false;
  std::string text;
  int code = MPI_SUCCESS;
  auto look = [&]() -> bool {
    // mu held (wait_until / below)
    for (auto it = cs->unexpected.begin(); it != cs->unexpected.end(); ++it) {
      if (!matches(it->env, source, tag)) continue;
      const uint64_t bytes = it->env.bytes;
      if (status != MPI_STATUS_IGNORE) set_status(status, it->env.src, it->env.tag, bytes);
      if (message != nullptr) {
        ShadowReq* m = shadow_alloc(ReqKind::message, call);
        m->cs = cs;
        ++cs->refs;
        m->comm = comm;
        m->env = it->env;
        m->self_data = std::move(it->self_data);
        m->self_sync = it->self_sync;
        m->drain = it->drain;
        cs->unexpected.erase(it);
        *message = reinterpret_cast<MPI_Message>(m);
      }
      found = true;
      return true;
    }
    try {
      ensure_pull(cs, true);
    } catch (...) {
      code = error_code_from_current_exception(call, &text);
      return true;
    }
    return false;
  };
  if (blocking) {
    wait_until(look);
  } else {
    std::lock_guard lock(st.mu);
    progress_locked();
    look();
  }
  if (code != MPI_SUCCESS) return raise_error(comm, call, code, text);
  if (flag != nullptr) *flag = found ? 1 : 0;
  if (!found && message != nullptr) *message = MPI_MESSAGE_NULL;
  return MPI_SUCCESS;
}

int p2p_mrecv_entry(Call call, void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status,
                    MPI_Request* request) {
  CallScope scope(call);
  if (message == nullptr || !is_shadow(*message)) {
    scope.native(Reason::P2pNative, bytes_of(count, type), MPI_COMM_NULL);
    return request ? PMPI_Imrecv(buf, count, type, message, request) : PMPI_Mrecv(buf, count, type, message, status);
  }
  State& st = state();
  ShadowReq* m = reinterpret_cast<ShadowReq*>(*message);
  const uint64_t bytes = bytes_of(count, type);
  scope.offloaded(bytes, m->comm);
  ShadowReq* r;
  std::string text;
  int code = MPI_SUCCESS;
  {
    std::lock_guard lock(st.mu);
    r = new_req(ReqKind::recv, call, m->cs, m->comm, buf, count, type, bytes, m->env.src, m->env.tag,
                SendMode::standard);
    if (request != nullptr) hold_type(r);
    r->active = true;
    const bool self = m->env.src == m->cs->rank;
    try {
      deliver(r, m->env, self ? &m->self_data : nullptr, m->self_sync, m->drain);
      m->drain = nullptr;
    } catch (...) {
      code = error_code_from_current_exception(call, &text);
      fail_request(r, code, text);
      r->complete = true;
    }
    shadow_free(m);
    *message = MPI_MESSAGE_NULL;
  }
  if (request != nullptr) {
    *request = as_request(r);
    return MPI_SUCCESS;
  }
  wait_until([&] { return r->complete; });
  return request_finish(r, status);
}

}  // namespace accl::pmpi

// ---------------------------------------------------------------------------
// C entry points
// ---------------------------------------------------------------------------
using namespace accl::pmpi;

ACCL_PMPI_EXPORT int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Send(buf, count, type, dest, tag, comm);
  return p2p_send_entry(Call::Send, buf, count, type, dest, tag, comm, SendMode::standard, nullptr, false,
                        [&] { return PMPI_Send(buf, count, type, dest, tag, comm); });
}
ACCL_PMPI_EXPORT int MPI_Bsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Bsend(buf, count, type, dest, tag, comm);
  return p2p_send_entry(Call::Bsend, buf, count, type, dest, tag, comm, SendMode::buffered, nullptr, false,
                        [&] { return PMPI_Bsend(buf, count, type, dest, tag, comm); });
}
ACCL_PMPI_EXPORT int MPI_Ssend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Ssend(buf, count, type, dest, tag, comm);
  return p2p_send_entry(Call::Ssend, buf, count, type, dest, tag, comm, SendMode::sync, nullptr, false,
                        [&] { return PMPI_Ssend(buf, count, type, dest, tag, comm); });
}
ACCL_PMPI_EXPORT int MPI_Rsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Rsend(buf, count, type, dest, tag, comm);
  return p2p_send_entry(Call::Rsend, buf, count, type, dest, tag, comm, SendMode::ready, nullptr, false,
                        [&] { return PMPI_Rsend(buf, count, type, dest, tag, comm); });
}
ACCL_PMPI_EXPORT int MPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                               MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Isend(buf, count, type, dest, tag, comm, req);
  return p2p_send_entry(Call::Isend, buf, count, type, dest, tag, comm, SendMode::standard, req, false,
                        [&] { return PMPI_Isend(buf, count, type, dest, tag, comm, req); });
}
ACCL_PMPI_EXPORT int MPI_Ibsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Ibsend(buf, count, type, dest, tag, comm, req);
  return p2p_send_entry(Call::Ibsend, buf, count, type, dest, tag, comm, SendMode::buffered, req, false,
                        [&] { return PMPI_Ibsend(buf, count, type, dest, tag, comm, req); });
}
ACCL_PMPI_EXPORT int MPI_Issend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Issend(buf, count, type, dest, tag, comm, req);
  return p2p_send_entry(Call::Issend, buf, count, type, dest, tag, comm, SendMode::sync, req, false,
                        [&] { return PMPI_Issend(buf, count, type, dest, tag, comm, req); });
}
ACCL_PMPI_EXPORT int MPI_Irsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Irsend(buf, count, type, dest, tag, comm, req);
  return p2p_send_entry(Call::Irsend, buf, count, type, dest, tag, comm, SendMode::ready, req, false,
                        [&] { return PMPI_Irsend(buf, count, type, dest, tag, comm, req); });
}
ACCL_PMPI_EXPORT int MPI_Send_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                   MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Send_init(buf, count, type, dest, tag, comm, req);
  return p2p_send_entry(Call::SendInit, buf, count, type, dest, tag, comm, SendMode::standard, req, true,
                        [&] { return PMPI_Send_init(buf, count, type, dest, tag, comm, req); });
}
ACCL_PMPI_EXPORT int MPI_Bsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                    MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Bsend_init(buf, count, type, dest, tag, comm, req);
  return p2p_send_entry(Call::BsendInit, buf, count, type, dest, tag, comm, SendMode::buffered, req, true,
                        [&] { return PMPI_Bsend_init(buf, count, type, dest, tag, comm, req); });
}
ACCL_PMPI_EXPORT int MPI_Ssend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                    MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Ssend_init(buf, count, type, dest, tag, comm, req);
  return p2p_send_entry(Call::SsendInit, buf, count, type, dest, tag, comm, SendMode::sync, req, true,
                        [&] { return PMPI_Ssend_init(buf, count, type, dest, tag, comm, req); });
}
ACCL_PMPI_EXPORT int MPI_Rsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                                    MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Rsend_init(buf, count, type, dest, tag, comm, req);
  return p2p_send_entry(Call::RsendInit, buf, count, type, dest, tag, comm, SendMode::ready, req, true,
                        [&] { return PMPI_Rsend_init(buf, count, type, dest, tag, comm, req); });
}

ACCL_PMPI_EXPORT int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                              MPI_Status* status) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Recv(buf, count, type, source, tag, comm, status);
  return p2p_recv_entry(Call::Recv, buf, count, type, source, tag, comm, status, nullptr, false,
                        [&] { return PMPI_Recv(buf, count, type, source, tag, comm, status); });
}
ACCL_PMPI_EXPORT int MPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                               MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Irecv(buf, count, type, source, tag, comm, req);
  return p2p_recv_entry(Call::Irecv, buf, count, type, source, tag, comm, MPI_STATUS_IGNORE, req, false,
                        [&] { return PMPI_Irecv(buf, count, type, source, tag, comm, req); });
}
ACCL_PMPI_EXPORT int MPI_Recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                                   MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Recv_init(buf, count, type, source, tag, comm, req);
  return p2p_recv_entry(Call::RecvInit, buf, count, type, source, tag, comm, MPI_STATUS_IGNORE, req, true,
                        [&] { return PMPI_Recv_init(buf, count, type, source, tag, comm, req); });
}

ACCL_PMPI_EXPORT int MPI_Sendrecv(const void* sbuf, int scount, MPI_Datatype stype, int dest, int stag, void* rbuf,
                                  int rcount, MPI_Datatype rtype, int source, int rtag, MPI_Comm comm,
                                  MPI_Status* status) {
  if (ACCL_LIKELY(g_native_only))
    return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, status);
  CallScope scope(Call::Sendrecv);
  const uint64_t bytes = bytes_of(scount, stype) + bytes_of(rcount, rtype);
  CommState* cs = nullptr;
  const Reason why = p2p_route(comm, &cs);
  if (why != Reason::Offloaded) {
    scope.native(why, bytes, comm);
    return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, status);
  }
  scope.offloaded(bytes, comm);
  // Both halves on the engine (PROC_NULL halves natively): post the receive
  // first, then the send, and wait for both.
  MPI_Request reqs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int rc = p2p_recv_entry(
      Call::Sendrecv, rbuf, rcount, rtype, source, rtag, comm, MPI_STATUS_IGNORE, &reqs[0], false,
      [&] { return PMPI_Irecv(rbuf, rcount, rtype, source, rtag, comm, &reqs[0]); }, false);
  if (rc != MPI_SUCCESS) return rc;
  rc = p2p_send_entry(
      Call::Sendrecv, sbuf, scount, stype, dest, stag, comm, SendMode::standard, &reqs[1], false,
      [&] { return PMPI_Isend(sbuf, scount, stype, dest, stag, comm, &reqs[1]); }, false);
  if (rc != MPI_SUCCESS) {
    MPI_Cancel(&reqs[0]);
    MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
    return rc;
  }
  MPI_Status st[2];
  st[0].MPI_ERROR = st[1].MPI_ERROR = MPI_SUCCESS;
  rc = MPI_Waitall(2, reqs, st);
  copy_status(status, st[0]);  // a single-completion call: the caller's MPI_ERROR stays
  if (rc == MPI_ERR_IN_STATUS) rc = st[0].MPI_ERROR != MPI_SUCCESS ? st[0].MPI_ERROR : st[1].MPI_ERROR;
  return rc;
}

ACCL_PMPI_EXPORT int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int stag, int source,
                                          int rtag, MPI_Comm comm, MPI_Status* status) {
  if (ACCL_LIKELY(g_native_only))
    return PMPI_Sendrecv_replace(buf, count, type, dest, stag, source, rtag, comm, status);
  CommState* cs = nullptr;
  const Reason why = p2p_route(comm, &cs);
  if (why != Reason::Offloaded) {
    CallScope scope(Call::SendrecvReplace);
    scope.native(why, 2 * bytes_of(count, type), comm);
    return PMPI_Sendrecv_replace(buf, count, type, dest, stag, source, rtag, comm, status);
  }
  // Send a packed copy, receive into the buffer.
  const uint64_t bytes = bytes_of(count, type);
  if (ACCL_UNLIKELY(suspect_buffer(buf)) && count > 0 && type != MPI_DATATYPE_NULL) {
    if (const BufferFault f = check_p2p_buffer(buf, count, type)) {
      CallScope scope(Call::SendrecvReplace);
      return reject_arguments(scope, comm, Call::SendrecvReplace, f, 2 * bytes);
    }
  }
  std::vector<unsigned char> copy(bytes);
  if (bytes) pack_to(copy.data(), bytes, buf, count, type);
  return MPI_Sendrecv(copy.data(), static_cast<int>(bytes), MPI_BYTE, dest, stag, buf, count, type, source, rtag,
                      comm, status);
}

ACCL_PMPI_EXPORT int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Probe(source, tag, comm, status);
  return p2p_probe_entry(Call::Probe, source, tag, comm, true, nullptr, nullptr, status,
                         [&] { return PMPI_Probe(source, tag, comm, status); });
}
ACCL_PMPI_EXPORT int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Iprobe(source, tag, comm, flag, status);
  return p2p_probe_entry(Call::Iprobe, source, tag, comm, false, flag, nullptr, status,
                         [&] { return PMPI_Iprobe(source, tag, comm, flag, status); });
}
ACCL_PMPI_EXPORT int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Mprobe(source, tag, comm, message, status);
  return p2p_probe_entry(Call::Mprobe, source, tag, comm, true, nullptr, message, status,
                         [&] { return PMPI_Mprobe(source, tag, comm, message, status); });
}
ACCL_PMPI_EXPORT int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                                 MPI_Status* status) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Improbe(source, tag, comm, flag, message, status);
  return p2p_probe_entry(Call::Improbe, source, tag, comm, false, flag, message, status,
                         [&] { return PMPI_Improbe(source, tag, comm, flag, message, status); });
}
ACCL_PMPI_EXPORT int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Mrecv(buf, count, type, message, status);
  return p2p_mrecv_entry(Call::Mrecv, buf, count, type, message, status, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only)) return PMPI_Imrecv(buf, count, type, message, req);
  return p2p_mrecv_entry(Call::Imrecv, buf, count, type, message, MPI_STATUS_IGNORE, req);
}
