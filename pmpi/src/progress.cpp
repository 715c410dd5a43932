// SPDX-License-Identifier: Apache-2.0
//
// The one progress engine of the layer. A round (progress_locked()) takes in
// what the envelope pulls of every active communicator brought (matching,
// p2p_match.cpp), issues device calls waiting for a slot (p2p_proto.cpp),
// and completes in-flight requests of every kind whose device work ended.
// Every wait loop and Test call runs it, and so does the progress thread
// (progress_thread.cpp) while the application is away from the layer.
//
// Blocking sends that returned early (detached, see p2p_entry.cpp) complete
// here and are drained at finalize.
#include "progress.hpp"

#include "buffers.hpp"
#include "coll_compose.hpp"
#include "comms.hpp"
#include "errors.hpp"
#include "p2p_match.hpp"
#include "p2p_proto.hpp"
#include "requests.hpp"
#include "types.hpp"

#include <accl/config.hpp>
#include <accl/log.hpp>

#include <chrono>

namespace accl::pmpi {

int g_detached = 0;

namespace {

// Device work of `r` finished (or failed): complete it.
void finish_request(ShadowReq* r) {
  flight_remove(r);
  if (r->is_drain) {
    p2p_drain_finished(r);
    return;
  }
  if (r->error == MPI_SUCCESS) run_post_copy(r->post);
  r->post = PostCopy{};
  if (r->composed) {
    if (r->error == MPI_SUCCESS) r->composed->finish();
    r->composed->release();
    r->composed.reset();
  }
  r->held.release();
  if (r->kind == ReqKind::recv) r->rstate = RecvState::done;
  r->complete = true;
  if (r->user_freed) {
    if (r->detached) --g_detached;
    if (r->error != MPI_SUCCESS)
      ACCL_LOG_ERROR("accl-pmpi rank {}: a detached/freed {} failed: {}", state().world_rank, call_name(r->call),
                     r->error_text);
    p2p_request_free(r);
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
        p2p_payload_recv_queue(r, false);
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
  if ((r->post.kind == PostCopy::unpack || (r->composed && r->composed->unpacks)) &&
      on_progress_thread())
    return;
  finish_request(r);
}

}  // namespace

void progress_locked() {
  if (!on_progress_thread()) {
    note_app_progress();
    type_release_deferred();
  }
  for (size_t i = 0; i < g_active.size();) {
    CommState* cs = g_active[i];
    int released = p2p_pull_progress(cs);
    if (!cs->pull) {
      cs->in_active_list = false;
      g_active[i] = g_active.back();
      g_active.pop_back();
    } else {
      ++i;
    }
    while (released-- > 0) comm_release(cs);  // may destroy a freed comm (no pull left then)
  }
  p2p_ops_pump();
  for (ShadowReq* r = g_flight; r != nullptr;) {
    ShadowReq* next = r->next_flight;
    progress_request(r);
    r = next;
  }
  p2p_ops_pump();
}

bool p2p_peer_may_wait() {
  if (p2p_ops_queued()) return true;
  for (const CommState* cs : g_active)
    if (cs->demand > 0) return true;
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
  p2p_proto_teardown();
  g_active.clear();
  g_flight = nullptr;
  g_detached = 0;
}

// --- pacing of the wait loops ----------------------------------------------

namespace {
// When native_progress() last ran (steady_clock, ns), for PollPacer;
// relaxed: racing threads only blur when the next one is due.
std::atomic<int64_t> g_last_native_ns{0};
// One budget for all waits of the process (the emulator keeps one per kind
// of wait): relaxed atomics, races only blur the heuristic.
constexpr std::chrono::nanoseconds kPollSpinMax = std::chrono::microseconds(50);
SpinBudget g_poll_spin{kPollSpinMax};
// Each ACCL process of this host has a core (configure()): contended waits
// spin on rather than yield (accl::BasicPollPacer).
std::atomic<bool> g_own_core{false};
}  // namespace

void native_progress() {
  State& st = state();
  if (st.private_comm == MPI_COMM_NULL) return;
  g_last_native_ns.store(std::chrono::steady_clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  int flag = 0;
  // Any MPI call drives Open MPI's progress engine; an Iprobe on our private
  // communicator (which never carries user traffic) is the cheapest one.
  PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, st.private_comm, &flag, MPI_STATUS_IGNORE);
}

void PollPacer::configure(unsigned host_ranks, unsigned cores) {
  // With a core per rank a spin takes no core from anyone, but a few slow
  // waits in a row (a timer interrupt, a page fault, the other rank
  // preempted) halved the budget below the length of an ordinary wait, and
  // from then on every wait spun out and yielded, until the next probe: 2
  // ranks on 2 cores made 0.3 sched_yield calls per ping-pong round trip,
  // each ~650 ns on a VM whose kernel makes a yield a full reschedule. The
  // floor (a quarter of the maximum, as the emulator's driving spin) keeps
  // short waits spinning; oversubscribed, the budget still falls to zero.
  const bool own_core = core_per_process(host_ranks, cores);
  g_poll_spin.set_floor(own_core ? kPollSpinMax / 4 : std::chrono::nanoseconds(0));
  g_own_core.store(own_core, std::memory_order_relaxed);
  accl::contended_spin_ns().store(
      std::chrono::nanoseconds(std::chrono::microseconds(config::get_int("ACCL_CONTENDED_SPIN_US"))).count(),
      std::memory_order_relaxed);
}

PollPacer::PollPacer() : accl::PollPacer(g_poll_spin, g_own_core.load(std::memory_order_relaxed)) {}

bool PollPacer::native_progress_due() const {
  const std::chrono::steady_clock::time_point last{
      std::chrono::steady_clock::duration(g_last_native_ns.load(std::memory_order_relaxed))};
  return accl::PollPacer::native_progress_due(last);
}

}  // namespace accl::pmpi
