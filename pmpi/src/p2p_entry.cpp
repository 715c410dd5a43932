// SPDX-License-Identifier: Apache-2.0
//
// Point-to-point entry points: MPI_Send and its modes, MPI_Recv, the
// non-blocking and persistent forms, MPI_Sendrecv(_replace) and the probes.
// Each decides native or offloaded, checks its arguments, and hands an
// offloaded call to the engine as a shadow request: sends to the protocol
// (p2p_proto.cpp), receives to matching (p2p_match.cpp); blocking calls
// then wait in the progress engine (progress.hpp).
//
// Routing is per communicator, never per message: a rule like "offload
// messages above N bytes" cannot be evaluated by a receiver that does not
// know the size (MPI_ANY_SOURCE, larger receive counts), so on a
// communicator either every message travels through ACCL or none does. Comms
// created through our wrappers (and MPI_COMM_WORLD) are offloaded, decided at
// creation time on all members; other comms stay native for p2p.
//
// So that a blocking MPI_Send never depends on the receiver reaching one of
// our entry points (it may be inside a native call), blocking sends above
// the eager size are staged and detached (budget ACCL_P2P_STAGING_BYTES);
// smaller ones complete eagerly on the device anyway.
#include "buffer_checks.hpp"
#include "buffers.hpp"
#include "comms.hpp"
#include "decision_memo.hpp"
#include "errors.hpp"
#include "p2p_match.hpp"
#include "p2p_proto.hpp"
#include "progress.hpp"
#include "requests.hpp"
#include "stats.hpp"
#include "types.hpp"

#include <cstring>
#include <string>
#include <vector>

namespace accl::pmpi {

namespace {

// Detached blocking sends at most (further ones wait for their completion).
constexpr int kMaxDetached = 1024;

// Why p2p on `comm` is native (never Offloaded when *cs is null).
Reason p2p_route(MPI_Comm comm, CommState** cs) {
  State& st = state();
  *cs = nullptr;
  if (!st.active) return inactive_reason();
  if (!st.s.p2p) return Reason::Excluded;
  if (!st.can_p2p) return st.public_firmware ? Reason::PublicP2p : Reason::DeviceCap;
  *cs = comm_for_p2p(comm);
  if (*cs != nullptr) return Reason::Offloaded;
  CommState* known = comm_lookup(comm);
  if (known != nullptr) {
    if (!known->accl) return known->native_reason;
    return policy_p2p(static_cast<uint64_t>(known->size)) ? Reason::P2pNative : Reason::Policy;
  }
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
      if (bytes <= p2p_inline_limit() || dest == cs->rank) {
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
    p2p_send_start(r);
    if (detach) {
      if (r->complete) {
        p2p_request_free(r);
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
      p2p_request_free(r);
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
    if (r->kind == ReqKind::send) p2p_send_start(r);
    else p2p_recv_start(r);
  } catch (...) {
    const MPI_Comm comm = r->comm;
    const Call call = r->call;
    {
      std::lock_guard lock(st.mu);
      flight_remove(r);
      p2p_request_free(r);
    }
    *request = MPI_REQUEST_NULL;
    return fail_now(call, comm);
  }
  *request = as_request(r);
  return MPI_SUCCESS;
}

// A point-to-point call's route depends on its communicator alone; count and
// datatype make the bytes it is accounted with. Buffers are not in the key:
// a suspect one (suspect_buffer) always takes the full decision.
DecisionKey p2p_key(MPI_Comm comm, int count, MPI_Datatype type) {
  return decision_key(comm, type, MPI_DATATYPE_NULL, nullptr, nullptr, two_ints(count, 0), 0);
}

// Where a p2p entry point's call goes after the checks every one of them
// makes first. cs set: offloaded on that comm; null: the call is done (it ran
// natively or its arguments were rejected) and rc is its result.
struct P2pAdmission {
  CommState* cs = nullptr;
  uint64_t bytes = 0;
  int rc = MPI_SUCCESS;
};

// Routes the call, sizes the buffer and screens peer, tag and buffer, then
// accounts the call as offloaded or runs `native`. `receive`: MPI_ANY_SOURCE
// and MPI_ANY_TAG are valid.
template <typename Native>
inline P2pAdmission p2p_admit(CallScope& scope, Call call, const void* buf, int count, MPI_Datatype type, int peer,
                              int tag, MPI_Comm comm, bool receive, Native& native) {
  P2pAdmission admitted;
  Reason why = p2p_route(comm, &admitted.cs);
  const BufferBytes size = buffer_bytes(count, type);
  admitted.bytes = size.bytes;
  if (why == Reason::Offloaded && peer == MPI_PROC_NULL) why = Reason::ProcNull;
  if (why == Reason::Offloaded && (!valid_peer(admitted.cs, peer, receive) || !valid_tag(tag, receive) || !size.valid))
    why = Reason::BadArgs;
  if (why != Reason::Offloaded) admitted.cs = nullptr;
  if (ACCL_UNLIKELY(suspect_buffer(buf)) && why != Reason::BadArgs && size.valid && comm != MPI_COMM_NULL) {
    if (const BufferFault f = check_p2p_buffer(buf, count, type)) {
      admitted.cs = nullptr;
      admitted.rc = reject_arguments(scope, comm, call, f, admitted.bytes);
      return admitted;
    }
  }
  if (admitted.cs == nullptr) {
    scope.native(why, admitted.bytes, comm);
    admitted.rc = native();
    return admitted;
  }
  scope.offloaded(admitted.bytes, comm);
  return admitted;
}

}  // namespace

// --- entry points used by the C and Fortran wrappers -------------------------

template <typename Native>
int p2p_send_entry(Call call, const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                   SendMode mode, MPI_Request* request, bool persistent, Native&& native, bool account = true) {
  const DecisionKey key = p2p_key(comm, count, type);
  if (account && !suspect_buffer(buf))
    if (const Remembered r = remembered(call, key)) return run_remembered(call, r, comm, native);
  CallScope scope(call, account);
  if (account) scope.remember_under(key);
  const P2pAdmission admitted = p2p_admit(scope, call, buf, count, type, dest, tag, comm, false, native);
  if (admitted.cs == nullptr) return admitted.rc;
  CommState* const cs = admitted.cs;
  const uint64_t bytes = admitted.bytes;
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
  const DecisionKey key = p2p_key(comm, count, type);
  if (account && !suspect_buffer(buf))
    if (const Remembered r = remembered(call, key)) return run_remembered(call, r, comm, native);
  CallScope scope(call, account);
  if (account) scope.remember_under(key);
  const P2pAdmission admitted = p2p_admit(scope, call, buf, count, type, source, tag, comm, true, native);
  if (admitted.cs == nullptr) return admitted.rc;
  CommState* const cs = admitted.cs;
  const uint64_t bytes = admitted.bytes;
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
        m->drain = it->drain;
        m->self_sync = it->self_sync;
        cs->unexpected.erase(it);
        *message = reinterpret_cast<MPI_Message>(m);
      }
      found = true;
      return true;
    }
    try {
      p2p_pull_ensure(cs, true);
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
    try {
      p2p_message_deliver(r, m);
    } catch (...) {
      code = error_code_from_current_exception(call, &text);
      fail_request(r, code, text);
      r->complete = true;
    }
    p2p_request_free(m);
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

// A call the layer would run natively anyway goes straight to PMPI: the
// layer is off, or no communicator offloads point-to-point and nothing
// observes (g_p2p_straight). A suspicious buffer takes the layered path,
// which reports it (or passes it on when the layer is off). The layered path
// is a function of its own so that the straight one is a few instructions
// with no stack frame: with the frame of the layered path set up first, and
// even with two flags to test, osu_bw at 16 B ran at 0.6-0.7x native speed on
// 2 ranks (a knife edge: the sender's few extra nanoseconds per MPI_Isend
// made Open MPI's shared-memory path fall out of its fastest pace).
inline bool p2p_straight(const void* buf) {
  return ACCL_LIKELY(g_p2p_straight.load(std::memory_order_relaxed)) && !suspect_buffer(buf);
}
// Calls without a buffer to check (probes, matched receives, Sendrecv on a
// native route, which checks no buffer either).
inline bool p2p_native_route() { return ACCL_LIKELY(g_p2p_straight.load(std::memory_order_relaxed)); }

// The send modes differ only in their names, Call and SendMode; as in
// fortran.cpp, one macro per signature defines them.
#define SEND_PARAMS const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm
#define SEND_ARGS buf, count, type, dest, tag, comm
#define SEND_BINDING(name, call, mode)                                                                         \
  [[gnu::noinline]] static int layered_##name(SEND_PARAMS) {                                                  \
    if (g_native_only) return PMPI_##name(SEND_ARGS);                                                          \
    return p2p_send_entry(Call::call, SEND_ARGS, SendMode::mode, nullptr, false,                               \
                          [&] { return PMPI_##name(SEND_ARGS); });                                             \
  }                                                                                                            \
  ACCL_PMPI_EXPORT int MPI_##name(SEND_PARAMS) {                                                               \
    if (p2p_straight(buf)) return PMPI_##name(SEND_ARGS);                                                      \
    return layered_##name(SEND_ARGS);                                                                          \
  }
SEND_BINDING(Send, Send, standard)
SEND_BINDING(Bsend, Bsend, buffered)
SEND_BINDING(Ssend, Ssend, sync)
SEND_BINDING(Rsend, Rsend, ready)

// With a request: the I-forms start the send, the _init forms (persistent)
// only create it.
#define ISEND_BINDING(name, call, mode, persistent)                                                            \
  [[gnu::noinline]] static int layered_##name(SEND_PARAMS, MPI_Request* req) {                                \
    if (g_native_only) return PMPI_##name(SEND_ARGS, req);                                                     \
    return p2p_send_entry(Call::call, SEND_ARGS, SendMode::mode, req, persistent,                              \
                          [&] { return PMPI_##name(SEND_ARGS, req); });                                        \
  }                                                                                                            \
  ACCL_PMPI_EXPORT int MPI_##name(SEND_PARAMS, MPI_Request* req) {                                             \
    if (p2p_straight(buf)) return PMPI_##name(SEND_ARGS, req);                                                 \
    return layered_##name(SEND_ARGS, req);                                                                     \
  }
ISEND_BINDING(Isend, Isend, standard, false)
ISEND_BINDING(Ibsend, Ibsend, buffered, false)
ISEND_BINDING(Issend, Issend, sync, false)
ISEND_BINDING(Irsend, Irsend, ready, false)
ISEND_BINDING(Send_init, SendInit, standard, true)
ISEND_BINDING(Bsend_init, BsendInit, buffered, true)
ISEND_BINDING(Ssend_init, SsendInit, sync, true)
ISEND_BINDING(Rsend_init, RsendInit, ready, true)

#define RECV_PARAMS void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm
#define RECV_ARGS buf, count, type, source, tag, comm
[[gnu::noinline]] static int layered_Recv(RECV_PARAMS, MPI_Status* status) {
  if (g_native_only) return PMPI_Recv(RECV_ARGS, status);
  return p2p_recv_entry(Call::Recv, RECV_ARGS, status, nullptr, false,
                        [&] { return PMPI_Recv(RECV_ARGS, status); });
}
ACCL_PMPI_EXPORT int MPI_Recv(RECV_PARAMS, MPI_Status* status) {
  if (p2p_straight(buf)) return PMPI_Recv(RECV_ARGS, status);
  return layered_Recv(RECV_ARGS, status);
}
// With a request, as ISEND_BINDING: the I-form starts the receive, the _init
// form only creates it.
#define IRECV_BINDING(name, call, persistent)                                                                  \
  [[gnu::noinline]] static int layered_##name(RECV_PARAMS, MPI_Request* req) {                                \
    if (g_native_only) return PMPI_##name(RECV_ARGS, req);                                                     \
    return p2p_recv_entry(Call::call, RECV_ARGS, MPI_STATUS_IGNORE, req, persistent,                           \
                          [&] { return PMPI_##name(RECV_ARGS, req); });                                        \
  }                                                                                                            \
  ACCL_PMPI_EXPORT int MPI_##name(RECV_PARAMS, MPI_Request* req) {                                             \
    if (p2p_straight(buf)) return PMPI_##name(RECV_ARGS, req);                                                 \
    return layered_##name(RECV_ARGS, req);                                                                     \
  }
IRECV_BINDING(Irecv, Irecv, false)
IRECV_BINDING(Recv_init, RecvInit, true)

#define SENDRECV_PARAMS                                                                                       \
  const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount, MPI_Datatype rtype, \
      int source, int rtag, MPI_Comm comm, MPI_Status *status
#define SENDRECV_ARGS sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, status
[[gnu::noinline]] static int layered_Sendrecv(SENDRECV_PARAMS);
ACCL_PMPI_EXPORT int MPI_Sendrecv(SENDRECV_PARAMS) {
  if (p2p_native_route()) return PMPI_Sendrecv(SENDRECV_ARGS);
  return layered_Sendrecv(SENDRECV_ARGS);
}
static int layered_Sendrecv(SENDRECV_PARAMS) {
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

#define REPLACE_PARAMS \
  void *buf, int count, MPI_Datatype type, int dest, int stag, int source, int rtag, MPI_Comm comm, MPI_Status *status
#define REPLACE_ARGS buf, count, type, dest, stag, source, rtag, comm, status
[[gnu::noinline]] static int layered_Sendrecv_replace(REPLACE_PARAMS);
ACCL_PMPI_EXPORT int MPI_Sendrecv_replace(REPLACE_PARAMS) {
  if (p2p_native_route()) return PMPI_Sendrecv_replace(REPLACE_ARGS);
  return layered_Sendrecv_replace(REPLACE_ARGS);
}
static int layered_Sendrecv_replace(REPLACE_PARAMS) {
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
  if (p2p_native_route()) return PMPI_Probe(source, tag, comm, status);
  return p2p_probe_entry(Call::Probe, source, tag, comm, true, nullptr, nullptr, status,
                         [&] { return PMPI_Probe(source, tag, comm, status); });
}
ACCL_PMPI_EXPORT int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  if (p2p_native_route()) return PMPI_Iprobe(source, tag, comm, flag, status);
  return p2p_probe_entry(Call::Iprobe, source, tag, comm, false, flag, nullptr, status,
                         [&] { return PMPI_Iprobe(source, tag, comm, flag, status); });
}
ACCL_PMPI_EXPORT int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  if (p2p_native_route()) return PMPI_Mprobe(source, tag, comm, message, status);
  return p2p_probe_entry(Call::Mprobe, source, tag, comm, true, nullptr, message, status,
                         [&] { return PMPI_Mprobe(source, tag, comm, message, status); });
}
ACCL_PMPI_EXPORT int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                                 MPI_Status* status) {
  if (p2p_native_route()) return PMPI_Improbe(source, tag, comm, flag, message, status);
  return p2p_probe_entry(Call::Improbe, source, tag, comm, false, flag, message, status,
                         [&] { return PMPI_Improbe(source, tag, comm, flag, message, status); });
}
ACCL_PMPI_EXPORT int MPI_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
  if (p2p_native_route()) return PMPI_Mrecv(buf, count, type, message, status);
  return p2p_mrecv_entry(Call::Mrecv, buf, count, type, message, status, nullptr);
}
ACCL_PMPI_EXPORT int MPI_Imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Request* req) {
  if (p2p_native_route()) return PMPI_Imrecv(buf, count, type, message, req);
  return p2p_mrecv_entry(Call::Imrecv, buf, count, type, message, MPI_STATUS_IGNORE, req);
}