// SPDX-License-Identifier: Apache-2.0
//
// Shadow requests: MPI_Request handles for offloaded non-blocking
// operations, distinguished from Open MPI's by address. The pool and the
// handles live in request_pool.cpp, the Wait/Test family in request_wait.cpp.
#pragma once

#include "buffers.hpp"
#include "p2p_wire.hpp"
#include "types.hpp"

#include <memory>
#include <string>
#include <vector>

namespace accl::pmpi {

struct CommState;
struct Composed;

enum class ReqKind : uint8_t { free, send, recv, coll, message };
enum class SendMode : uint8_t { standard, buffered, sync, ready };
enum class RecvState : uint8_t { inactive, posted, payload, done };

struct ShadowReq {
  ReqKind kind = ReqKind::free;
  Call call = Call::Send;
  bool persistent = false;
  bool active = false;     // started and not yet completed by Wait/Test
  bool complete = false;   // operation finished (status valid)
  bool user_freed = false; // MPI_Request_free on an active request, or a detached blocking send
  bool detached = false;   // a blocking send that returned before completing
  bool cancelled = false;
  bool in_flight = false;  // linked in the in-flight list
  SendMode mode = SendMode::standard;
  RecvState rstate = RecvState::inactive;
  CommState* cs = nullptr;
  MPI_Comm comm = MPI_COMM_NULL;
  // arguments
  const void* buf = nullptr;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  TypeInfo tinfo;      // type_info(type), taken at the entry point (no MPI call later)
  // Our reference to a derived `type` (type_hold) while the request may
  // still use it: MPI lets the application free the type meanwhile.
  MPI_Datatype type_ref = MPI_DATATYPE_NULL;
  uint64_t bytes = 0;  // count items of type (computed once at the entry point)
  // recv into a non-contiguous type: its layout, for a message that ends
  // inside an item (taken at the entry point; null: contiguous or unknown)
  std::shared_ptr<const TypeLayout> layout;
  int peer = 0;
  int tag = 0;
  const void* send_src = nullptr;  // send: contiguous bytes to send (user buffer or staging)
  // device work
  RequestPtr r[3];
  Held held;
  PostCopy post;
  // A composed collective (coll_compose.hpp): what its device calls hold and
  // the copies that finish it; r[0] is the nop that ends it.
  std::shared_ptr<Composed> composed;
  // send: the outgoing envelope; recv/message: the matched one
  Envelope env{};
  // recv: the reply (clear-to-send / synchronous ack) sent back to the sender
  Envelope ctl{};
  // Wrappers of env/ctl: tied to the pool slot, created once, reused.
  std::shared_ptr<BaseBuffer> env_buf;
  std::shared_ptr<BaseBuffer> ctl_buf;
  // Point-to-point device calls go through the layer's slot budget (p2p_proto.cpp):
  // budget class of each r[i] while it is on the device, operations still
  // queued on the host, and whether a send waits for the receiver's reply.
  uint8_t r_class[3] = {0, 0, 0};
  uint8_t queued_ops = 0;
  bool awaiting_reply = false;
  BaseBuffer* payload_buf = nullptr;  // held wrapper of the payload (re-posted receives)
  // self messages (message kind / matched recv)
  std::vector<unsigned char> self_data;
  ShadowReq* self_sync = nullptr;
  // Unexpected eager payloads leave the device at once (p2p_match.cpp:
  // drain): on a message handle, the drain that holds its bytes; on a drain,
  // the receive that matched it before its bytes were in.
  bool is_drain = false;
  ShadowReq* drain = nullptr;
  ShadowReq* adopter = nullptr;
  // result
  MPI_Status status{};
  int error = MPI_SUCCESS;
  std::string error_text;
  // links
  ShadowReq* next_posted = nullptr;
  ShadowReq* prev_flight = nullptr;
  ShadowReq* next_flight = nullptr;
  uint32_t index = 0;
  uint32_t next_free = 0;
};

void requests_init();
void requests_teardown();
ShadowReq* shadow_alloc(ReqKind kind, Call call);  // mu held
// Returns the slot to the pool (mu held). Requests that may hold device work
// go through p2p_request_free(), which drops that work first.
void shadow_free(ShadowReq* r);
namespace detail {
constexpr uint32_t kCapacity = 1u << 16;
extern ACCL_PMPI_LOCAL ShadowReq* g_pool;  // reserved in requests_init(), before any call can see it
}  // namespace detail
// Inline: the request wrappers ask it of every handle they pass to PMPI.
inline bool is_shadow(const void* handle) {
  const auto a = reinterpret_cast<uintptr_t>(handle);
  const auto b = reinterpret_cast<uintptr_t>(detail::g_pool);
  return detail::g_pool != nullptr && a - b < size_t{detail::kCapacity} * sizeof(ShadowReq);
}
inline ShadowReq* as_shadow(MPI_Request r) { return reinterpret_cast<ShadowReq*>(r); }
inline MPI_Request as_request(ShadowReq* r) { return reinterpret_cast<MPI_Request>(r); }
// Fortran integer handles of shadow requests/messages (negative).
MPI_Fint shadow_c2f(ShadowReq* r);
ShadowReq* shadow_f2c(MPI_Fint f);

// Requests with device work outstanding, which progress rounds visit
// (progress.cpp). Linked through the requests themselves: adding one costs
// no allocation, and every queued device call adds its request (mu held).
extern ACCL_PMPI_LOCAL ShadowReq* g_flight;
inline void flight_add(ShadowReq* r) {
  if (r->in_flight) return;
  r->prev_flight = nullptr;
  r->next_flight = g_flight;
  if (g_flight) g_flight->prev_flight = r;
  g_flight = r;
  r->in_flight = true;
}
inline void flight_remove(ShadowReq* r) {
  if (!r->in_flight) return;
  if (r->prev_flight) r->prev_flight->next_flight = r->next_flight;
  else g_flight = r->next_flight;
  if (r->next_flight) r->next_flight->prev_flight = r->prev_flight;
  r->prev_flight = r->next_flight = nullptr;
  r->in_flight = false;
}

// The request's error goes to the caller as the return code; a status's
// MPI_ERROR field is written only by the multiple-completion calls that
// return MPI_ERR_IN_STATUS (request_wait.cpp), never on the way.
inline void fail_request(ShadowReq* r, int code, const std::string& text) {
  if (r->error == MPI_SUCCESS) {
    r->error = code;
    r->error_text = text;
  }
}

// Both keep status->MPI_ERROR (see request_pool.cpp).
void set_empty_status(MPI_Status* status);
void copy_status(MPI_Status* to, const MPI_Status& from);
// Fills *status from a finished request, frees it unless persistent, and
// reports its error through the comm's error handler (no lock held;
// request_wait.cpp).
int request_finish(ShadowReq* r, MPI_Status* status);

}  // namespace accl::pmpi
