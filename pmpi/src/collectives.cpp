// SPDX-License-Identifier: Apache-2.0
//
// What every offloaded collective shares, direct (coll_direct.hpp) or
// composed (coll_compose.hpp): the wait of a blocking call, the shadow
// request of a non-blocking one, and which callers stay native.
#include "collectives.hpp"

#include "comms.hpp"
#include "progress.hpp"
#include "requests.hpp"
#include "state.hpp"

#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <string>

namespace accl::pmpi {

namespace {

// Waits for a blocking offloaded collective. Unlike wait_until() it does not
// poll: it waits in the device (which spins briefly, then sleeps until the
// call completes) in slices of kCollectiveWaitSlice, with a progress pass of
// the point-to-point engine and of Open MPI between slices (only a peer's
// point-to-point traffic to this rank can need them while it sits in a
// collective). A collective of a megabyte or more runs for hundreds of
// microseconds in the emulator's threads, and on few cores a rank that keeps
// yielding in a poll loop takes their time slices: in a 2-rank 16 MiB
// allreduce 15-30% of a rank's CPU samples were sched_yield, and waiting in
// the device made 2-8 MiB allreduces 1.3-1.8x faster on 2 cores.
constexpr std::chrono::milliseconds kCollectiveWaitSlice{1};

}  // namespace

// The wait is bounded as the driver bounds its own (device timeout x 1.25 +
// 100 ms): our firmware ends a stuck call at the device timeout, which comes
// first, but public ACCL's firmware keeps set_timeout's value unused, and a
// call it cannot finish would otherwise hold the rank forever.
void wait_collective(Request& dev) {
  State& st = state();
  const auto bound = std::chrono::milliseconds(st.s.timeout_ms + st.s.timeout_ms / 4 + 100);
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    {
      std::lock_guard lock(st.mu);
      progress_locked();
      if (dev.test()) return;
    }
    native_progress();
    if (dev.wait(kCollectiveWaitSlice)) return;
    if (std::chrono::steady_clock::now() > deadline)
      throw TimeoutError(dev.call_name(), st.world_rank,
                         "call '" + dev.call_name() + "' on rank " + std::to_string(st.world_rank) +
                             " did not complete within " + std::to_string(st.s.timeout_ms) +
                             " ms (the device did not end it)");
  }
}

ShadowReq* collective_request(Call call, MPI_Comm comm, CommState* cs, RequestPtr dev) {
  ShadowReq* r = shadow_alloc(ReqKind::coll, call);
  r->cs = cs;
  ++cs->refs;
  r->comm = comm;
  r->r[0] = std::move(dev);
  return r;
}

void start_collective_request(ShadowReq* r, MPI_Request* req) {
  r->active = true;
  flight_add(r);  // completes in a progress round, at once when it has no device work
  *req = as_request(r);
}

// Open MPI's own components call a few MPI_* (not PMPI_*) functions: ROMIO
// calls MPI_Ialltoall and completes the request with PMPI_Wait, which knows
// nothing of shadow requests. Non-blocking collectives started from inside
// Open MPI therefore stay native.
bool from_open_mpi(void* return_address) {
  Dl_info info;
  if (dladdr(return_address, &info) == 0 || info.dli_fname == nullptr) return false;
  const char* base = std::strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  return std::strncmp(base, "mca_", 4) == 0 || std::strncmp(base, "libmpi", 6) == 0 ||
         std::strncmp(base, "libompi", 7) == 0 || std::strncmp(base, "libopen-", 8) == 0;
}

}  // namespace accl::pmpi
