// SPDX-License-Identifier: Apache-2.0
//
// The pool of shadow requests: the MPI_Request handles of offloaded
// operations, their Fortran handles, and the statuses they report. The
// bottom of the layer: it calls no engine code (p2p_request_free() drops a
// request's device work before returning it here).
//
// Handles are addresses inside one reserved pool, so "is this ours?" is a
// range check, and a request costs no allocation once its pool slot exists.
// Open MPI never sees a shadow handle: every call that takes requests is
// intercepted (request_wait.cpp).
#include "requests.hpp"

#include "coll_compose.hpp"
#include "comms.hpp"
#include "types.hpp"

#include <sys/mman.h>

#include <climits>
#include <new>

namespace accl::pmpi {

ShadowReq* g_flight = nullptr;

namespace detail {
ShadowReq* g_pool = nullptr;
}  // namespace detail

namespace {
using detail::g_pool;
using detail::kCapacity;
constexpr uint32_t kNone = UINT32_MAX;
uint32_t g_constructed = 0;
uint32_t g_free_head = kNone;
}  // namespace

void requests_init() {
  if (g_pool != nullptr) return;
  // Address space only: pages are committed as slots get used.
  void* p = mmap(nullptr, size_t{kCapacity} * sizeof(ShadowReq), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  g_pool = static_cast<ShadowReq*>(p);
}

void requests_teardown() {
  // Wrappers and outstanding device requests go before the driver does.
  for (uint32_t i = 0; i < g_constructed; ++i) {
    ShadowReq& r = g_pool[i];
    for (auto& d : r.r) d.reset();
    for (auto& b : r.held.b) b.reset();
    r.held.s[0] = r.held.s[1] = nullptr;  // the staging pool is freed wholesale
    r.env_buf.reset();
    r.ctl_buf.reset();
  }
}

ShadowReq* shadow_alloc(ReqKind kind, Call call) {
  uint32_t i;
  if (g_free_head != kNone) {
    i = g_free_head;
    g_free_head = g_pool[i].next_free;
  } else {
    if (g_constructed == kCapacity)
      throw std::runtime_error("more than 65536 offloaded requests outstanding");
    i = g_constructed++;
    new (&g_pool[i]) ShadowReq();
    g_pool[i].index = i;
  }
  ShadowReq* r = &g_pool[i];
  r->kind = kind;
  r->call = call;
  r->persistent = r->active = r->complete = r->user_freed = r->detached = r->cancelled = r->in_flight = false;
  r->mode = SendMode::standard;
  r->rstate = RecvState::inactive;
  r->cs = nullptr;
  r->comm = MPI_COMM_NULL;
  r->buf = nullptr;
  r->count = 0;
  r->type = MPI_DATATYPE_NULL;
  r->tinfo = TypeInfo{};
  r->type_ref = MPI_DATATYPE_NULL;
  r->peer = r->tag = 0;
  r->send_src = nullptr;
  r->post = PostCopy{};
  r->self_sync = nullptr;
  r->is_drain = false;
  r->drain = r->adopter = nullptr;
  r->error = MPI_SUCCESS;
  r->error_text.clear();
  r->next_posted = r->prev_flight = r->next_flight = nullptr;
  r->r_class[0] = r->r_class[1] = r->r_class[2] = 0;
  r->queued_ops = 0;
  r->awaiting_reply = false;
  r->payload_buf = nullptr;
  r->layout.reset();
  set_empty_status(&r->status);
  return r;
}

void shadow_free(ShadowReq* r) {
  for (auto& d : r->r) d.reset();
  r->held.release();
  r->post = PostCopy{};  // completion work owns memory and type references
  if (r->composed) {
    r->composed->release();
    r->composed.reset();
  }
  r->self_data.clear();
  r->layout.reset();
  if (r->type_ref != MPI_DATATYPE_NULL) {
    type_release(r->type_ref);
    r->type_ref = MPI_DATATYPE_NULL;
  }
  CommState* cs = r->cs;
  r->cs = nullptr;
  r->kind = ReqKind::free;
  r->next_free = g_free_head;
  g_free_head = r->index;
  if (cs != nullptr) comm_release(cs);
}

MPI_Fint shadow_c2f(ShadowReq* r) { return -static_cast<MPI_Fint>(r->index) - 2; }

ShadowReq* shadow_f2c(MPI_Fint f) {
  if (f > -2 || g_pool == nullptr) return nullptr;
  const auto i = static_cast<uint32_t>(-(static_cast<int64_t>(f) + 2));
  if (i >= g_constructed || g_pool[i].kind == ReqKind::free) return nullptr;
  return &g_pool[i];
}

// MPI 3.1 3.2.5: "message-passing calls do not modify the value of the error
// code field of status variables", except the calls that return several
// statuses, and those if and only if they return MPI_ERR_IN_STATUS. Every
// status we fill keeps the caller's MPI_ERROR; array_errors writes it.
void copy_status(MPI_Status* to, const MPI_Status& from) {
  if (to == MPI_STATUS_IGNORE) return;
  const int kept = to->MPI_ERROR;
  *to = from;
  to->MPI_ERROR = kept;
}

void set_empty_status(MPI_Status* status) {
  if (status == MPI_STATUS_IGNORE) return;
  // Built once through MPI's own setters (the status has hidden fields), then
  // copied: every request starts with an empty status, and the two PMPI calls
  // cost as much as the rest of setting up a send.
  static const MPI_Status empty = [] {
    MPI_Status s{};
    s.MPI_SOURCE = MPI_ANY_SOURCE;
    s.MPI_TAG = MPI_ANY_TAG;
    s.MPI_ERROR = MPI_SUCCESS;
    PMPI_Status_set_elements_x(&s, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(&s, 0);
    return s;
  }();
  copy_status(status, empty);
}

}  // namespace accl::pmpi
