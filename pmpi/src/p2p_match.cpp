// SPDX-License-Identifier: Apache-2.0
//
// Matching of offloaded point-to-point messages.
//
// The receiver pulls envelopes with RANK_ANY receives of the envelope tag
// (one pull per communicator while someone waits on it, posted by
// p2p_proto.cpp) and matches them here against posted receives in MPI order
// (posted order, arrival order, non-overtaking per source via the sequence
// numbers). That gives MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_Probe/Iprobe/Mprobe
// and exact status (source, tag, count) -- things the device cannot report
// itself. A matched message is delivered: copied from its envelope, or its
// payload receive queued on the protocol (p2p_proto.cpp); replies that come
// back through the same pulls release the sends that wait for them.
#include "p2p_match.hpp"

#include "errors.hpp"
#include "p2p_fault.hpp"
#include "p2p_proto.hpp"
#include "progress.hpp"

#include <accl/log.hpp>

#include <cstring>

namespace accl::pmpi {

namespace {

// `take` bytes of a message (at most the receive buffer) into the user's
// buffer of type `ti`, by basic elements: a message may end inside an item
// (`items`: see deliver()).
void copy_into_user(ShadowReq* r, const void* src, uint64_t take, const TypeInfo& ti, int items) {
  if (take == 0) return;
  if (ti.contiguous) std::memcpy(const_cast<void*>(r->buf), src, take);
  else unpack_elements(src, take, const_cast<void*>(r->buf), items, r->type, r->layout.get());
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

// The copy (or unpack) from staging `src` into r's buffer that completes a
// staged receive of `take` bytes (`items` items).
PostCopy copy_from_staging(const ShadowReq* r, const void* src, uint64_t take, int items) {
  void* dst = const_cast<void*>(r->buf);
  return r->tinfo.contiguous ? PostCopy{PostCopy::memcpy_, dst, src, take, 0, r->type, {}}
                             : PostCopy{PostCopy::unpack, dst, src, take, items, r->type, r->layout};
}

// Receive `r`, whose data is in host staging, completes in a progress round
// (which runs its post copy), after the synchronous sender's ack if it waits
// for one.
void complete_in_progress(ShadowReq* r) {
  r->rstate = RecvState::payload;
  if (r->env.flags & kFlagSync) p2p_reply_queue(r);  // completes once the ack is out
  else flight_add(r);
}

// Queues the payload receive of message `e` into `dst`, its inline tail
// (0..3 bytes) copied behind the payload at once.
void payload_recv_into(ShadowReq* r, const Envelope& e, void* dst, bool reply_after) {
  const uint64_t payload = e.bytes - e.inline_bytes;
  if (e.inline_bytes != 0) std::memcpy(static_cast<char*>(dst) + payload, e.data, e.inline_bytes);
  r->payload_buf = &r->held.wrap(dst, payload / 4, dataType::int32);
  r->rstate = RecvState::payload;
  p2p_payload_recv_queue(r, reply_after);
}

bool payload_follows_eagerly(const Envelope& e) {
  const uint64_t payload = e.bytes - e.inline_bytes;
  return payload != 0 && (e.flags & kFlagRndv) == 0 && payload <= state().s.max_eager_size;
}

ShadowReq* drain_start(CommState* cs, const Envelope& e) {
  ShadowReq* d = shadow_alloc(ReqKind::recv, Call::Recv);
  d->is_drain = true;
  d->cs = cs;
  ++cs->refs;
  d->comm = cs->comm;
  d->active = true;
  copy_envelope(d->env, e);
  payload_recv_into(d, e, d->held.stage(e.bytes), false);
  return d;
}

// Receive `r` takes the bytes of drain `d`, which are all in: a copy (or an
// unpack) after completion, as for a staged receive, and the synchronous
// sender's ack first if it waits for one.
void drain_adopt(ShadowReq* r, ShadowReq* d) {
  if (d->error != MPI_SUCCESS) {
    fail_request(r, d->error, d->error_text);
    r->rstate = RecvState::done;
    complete_now(r);
  } else {
    r->post.src = r->held.take_stage(d->held);
    complete_in_progress(r);
  }
  p2p_request_free(d);
}

// Matched receive `r` of `take` bytes (`items` items) gets its data from drain `d`.
void drain_receive(ShadowReq* r, ShadowReq* d, uint64_t take, int items) {
  r->post = copy_from_staging(r, nullptr, take, items);  // its source is known when the bytes are in
  if (d->complete) {
    drain_adopt(r, d);
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
      if (self_sync->user_freed) p2p_request_free(self_sync);
    }
    r->rstate = RecvState::done;
    complete_now(r);
    return;
  }
  if (drain != nullptr) {
    drain_receive(r, drain, take, items);
    return;
  }
  const uint64_t payload = e.bytes - e.inline_bytes;
  if (payload == 0 && !ti.contiguous && take != 0 && on_progress_thread()) {
    // Unpacking calls MPI: stage the data and let an application thread's
    // progress round unpack it and complete the receive.
    void* staged = r->held.stage(take);
    std::memcpy(staged, e.data, take);
    r->post = copy_from_staging(r, staged, take, items);
    complete_in_progress(r);
    return;
  }
  if (payload == 0) {
    copy_into_user(r, e.data, take, ti, items);
    r->rstate = RecvState::done;
    if (e.flags & kFlagSync) p2p_reply_queue(r);  // completes once the ack is out
    else complete_now(r);
    return;
  }
  void* dst;
  if (ti.contiguous && !truncated) {
    dst = const_cast<void*>(r->buf);
  } else {
    dst = r->held.stage(e.bytes);
    r->post = copy_from_staging(r, dst, take, items);
  }
  payload_recv_into(r, e, dst, (e.flags & (kFlagSync | kFlagRndv)) != 0);
}

// A message that is next in line from its source: match or queue it.
void arrive(CommState* cs, const Envelope& e, std::vector<unsigned char>* self_data, ShadowReq* self_sync) {
  ShadowReq* prev = nullptr;
  for (ShadowReq* r = cs->posted_head; r != nullptr; prev = r, r = r->next_posted) {
    if (!matches(e, r->peer, r->tag)) continue;
    posted_unlink(cs, prev, r);
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
      m.drain = drain_start(cs, e);
    } catch (const std::exception& ex) {  // its payload stays on the device, where a receive can still take it
      ACCL_LOG_WARN("accl-pmpi rank {}: cannot take an unexpected payload off the device: {}", state().world_rank,
                    ex.what());
    }
  }
  cs->unexpected.push_back(std::move(m));
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
      const communicatorId id = cs->p2p_id;
      p2p_op_queue(r, 1, kLocal, false, true, b, words, to, seq, id);
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

}  // namespace

int p2p_pull_progress(CommState* cs) {
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
    if (link_failed && p2p_link_failure_handle(cs)) code = MPI_SUCCESS;  // the others' envelopes still come
    if (code != MPI_SUCCESS) {
      // The device lost this comm's p2p traffic: fail every waiting receive.
      while (ShadowReq* r = cs->posted_head) {
        posted_unlink(cs, nullptr, r);
        fail_request(r, code, text);
        r->complete = true;
      }
      while (!cs->awaiting.empty()) {
        ShadowReq* r = cs->awaiting.back();
        stop_awaiting(cs, cs->awaiting.end() - 1);
        fail_request(r, code, text);
      }
      break;
    }
    if (done) envelope_in(cs, e);
    try {
      p2p_pull_ensure(cs, false);
    } catch (const std::exception& ex) {
      ACCL_LOG_ERROR("accl-pmpi: cannot post an envelope receive: {}", ex.what());
      break;
    }
  }
  return released;
}

void p2p_self_send(ShadowReq* r, const unsigned char* src, uint64_t bytes) {
  CommState* cs = r->cs;
  std::vector<unsigned char> data(src, src + bytes);
  ShadowReq* sync = r->mode == SendMode::sync ? r : nullptr;
  if (sync == nullptr) r->complete = true;  // the data is copied: the send buffer is free
  uint32_t& expect = cs->recv_expect[static_cast<size_t>(cs->rank)];
  expect = next_seq(expect);
  arrive(cs, r->env, &data, sync);
}

void p2p_message_deliver(ShadowReq* r, ShadowReq* m) {
  const bool self = m->env.src == m->cs->rank;
  ShadowReq* drain = m->drain;
  m->drain = nullptr;  // the receive owns it now
  deliver(r, m->env, self ? &m->self_data : nullptr, m->self_sync, drain);
}

void p2p_drain_finished(ShadowReq* d) {
  d->complete = true;
  if (ShadowReq* adopter = d->adopter) drain_adopt(adopter, d);
}

void p2p_recv_start(ShadowReq* r) {
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
    p2p_ops_pump();
    return;
  }
  if (p2p_peer_unreachable(cs, r->peer) != 0) {
    p2p_recv_fail_unreachable(r);
    return;
  }
  r->next_posted = nullptr;
  if (cs->posted_tail) cs->posted_tail->next_posted = r;
  else cs->posted_head = r;
  cs->posted_tail = r;
  ++cs->demand;
  p2p_pull_ensure(cs, false);
}

bool p2p_recv_cancel(ShadowReq* r) {
  if (r->kind != ReqKind::recv || r->rstate != RecvState::posted) return false;
  CommState* cs = r->cs;
  ShadowReq* prev = nullptr;
  for (ShadowReq* p = cs->posted_head; p != nullptr; prev = p, p = p->next_posted) {
    if (p != r) continue;
    posted_unlink(cs, prev, r);
    r->cancelled = true;
    r->complete = true;
    r->rstate = RecvState::done;
    set_empty_status(&r->status);
    PMPI_Status_set_cancelled(&r->status, 1);
    return true;
  }
  return false;
}

}  // namespace accl::pmpi
