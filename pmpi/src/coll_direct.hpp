// SPDX-License-Identifier: Apache-2.0
//
// Direct collectives (collectives_reduce.cpp, collectives_movement.cpp): the
// MPI collectives the device runs as one collective call of its own, unlike
// the composed ones (coll_compose.hpp). What they share (coll_direct.cpp):
// the steps of the offload decision, staging, and how a call runs.
//
// Decision order per call (cheap first), each step a pure function of
// arguments every member passes identically, so all ranks take the same path:
//   device up -> communicator (intra, size >= 2, not latched native)
//   -> count 0 -> op/datatype (reductions) or signature bytes (movement)
//   -> ACCL_OFFLOAD_CALLS and byte thresholds -> ACCL communicator (created
//   collectively on first use).
// Anything else falls back to PMPI_<call> with the identical arguments.
//
// MPI_IN_PLACE is emulated with a staging copy of the in-place input: the
// device then reads and writes distinct buffers.
#pragma once

#include "buffers.hpp"
#include "collectives.hpp"
#include "comms.hpp"
#include "errors.hpp"
#include "requests.hpp"
#include "state.hpp"
#include "types.hpp"

#include <mutex>
#include <string>
#include <utility>

namespace accl::pmpi {

// The first steps: device up, then the communicator (comm_check).
Reason direct_pre(MPI_Comm comm, CommState** cs);
// The last steps: call enabled and within the byte thresholds for `bytes`
// over the communicator, `message` within the public firmware's eager size,
// then the ACCL communicator (*cs usable when it returns Offloaded).
Reason direct_finish(Call call, uint64_t bytes, uint64_t message, MPI_Comm comm, CommState** cs);

// This rank and the communicator's size, from *cs when there is one.
void rank_size(MPI_Comm comm, CommState* cs, int* rank, int* size);
// A rooted call's root must name a member; rank and size come back for the
// issue. Checked only while the call can still be offloaded.
Reason check_root(Reason why, MPI_Comm comm, CommState* cs, int root, int* rank, int* size);
// This rank and the communicator's size, and whether `root` names a member.
bool valid_root(MPI_Comm comm, CommState* cs, int root, int* rank, int* size);

// `count` items of `type` packed into staging of `bytes`.
void* pack_to_stage(Held& h, const void* buf, int count, MPI_Datatype type, uint64_t bytes);
// An in-place input: copied to staging so that the device reads and writes
// distinct buffers.
const void* stage_copy(Held& h, const void* buf, uint64_t bytes);
// Where `bytes` of staged data go into `count` items of a non-contiguous
// `type`: unpacked by basic elements when the call completes, with the
// type's layout taken now (the application's thread) in case they end
// inside an item.
PostCopy unpack_step(void* buf, const void* staged, uint64_t bytes, int count, MPI_Datatype type);

// Issues the call built by `issue` (under mu) and either returns a shadow
// request (non-blocking) or waits for it. Errors go through the comm's
// error handler.
template <typename Issue>
int direct_run(Call call, MPI_Comm comm, CommState* cs, MPI_Request* req, Issue&& issue) {
  State& st = state();
  Held held;
  PostCopy post;
  RequestPtr dev;
  std::string text;
  int code = MPI_SUCCESS;
  {
    std::lock_guard lock(st.mu);
    try {
      dev = issue(held, post);
      if (req != nullptr) {
        ShadowReq* r = collective_request(call, comm, cs, std::move(dev));
        std::swap(r->held.b, held.b);
        std::swap(r->held.s, held.s);
        r->post = post;
        if (post.kind == PostCopy::unpack) {
          // Unpacked at completion: the application may free the type before that.
          r->type_ref = type_hold(post.type);
          if (r->type_ref != MPI_DATATYPE_NULL) r->post.type = r->type_ref;
        }
        start_collective_request(r, req);
        return MPI_SUCCESS;
      }
    } catch (...) {
      code = error_code_from_current_exception(call, &text);
      held.release();
    }
  }
  if (code != MPI_SUCCESS) return raise_error(comm, call, code, text);
  try {
    wait_collective(*dev);
  } catch (...) {
    code = error_code_from_current_exception(call, &text);
  }
  {
    std::lock_guard lock(st.mu);
    if (code == MPI_SUCCESS) run_post_copy(post);
    held.release();
  }
  if (code != MPI_SUCCESS) return raise_error(comm, call, code, text);
  return MPI_SUCCESS;
}


}  // namespace accl::pmpi
