// SPDX-License-Identifier: Apache-2.0
//
// The one progress engine of the layer (progress.cpp): every wait loop,
// Test call and the progress thread run the same round, progress_locked(),
// which moves point-to-point envelopes, queued device calls and in-flight
// requests of every kind.
//
// Why a poll loop and not Request::wait(): while this rank waits for an
// offloaded call it must keep (a) the point-to-point engine moving (a peer's
// MPI_Ssend or large MPI_Isend may need this rank to post a payload receive)
// and (b) Open MPI's own progress engine moving (a peer may be inside a
// native rendezvous send to this rank that must finish before it can join the
// call we wait for). Request::wait() would do neither.
#pragma once

#include "state.hpp"

#include <accl/spin.hpp>

namespace accl::pmpi {

// One round of progress over every comm and in-flight request (mu held).
// Runs on application threads and on the progress thread.
void progress_locked();
// Whether something a peer may be waiting for needs this host (mu held):
// device calls queued in the layer, posted receives or probes to match,
// sends waiting for the receiver's reply. The progress thread sleeps while
// there is none.
bool p2p_peer_may_wait();
// Blocking sends that returned before completing (MPI_Send staged or small):
// the progress rounds complete and free them (mu held).
extern ACCL_PMPI_LOCAL int g_detached;
// Drains detached sends at finalize (no lock held).
void p2p_drain();
// Forgets the engine's state at teardown (the device is gone).
void p2p_teardown();

void native_progress();  // lets Open MPI progress its own pending traffic

// Paces one poll loop (one wait): accl/spin.hpp's PollPacer over the one
// spin budget of this process (at most 50 us). A wait that ends early in its
// spin doubles the budget it had (up to the 50 us), one that outlasts it
// halves it, down to zero when ranks share cores (4 ranks on 2 cores yield
// at once) and down to a floor when each rank has a core (configure()), so 2
// ranks on 2 cores hand messages back and forth without giving the core
// away. Every 64th wait probes with the full budget.
class PollPacer : public accl::PollPacer {
 public:
  PollPacer();
  // Once the rank count of this host is known (init).
  static void configure(unsigned host_ranks, unsigned cores);
  // Whether this round of the loop should also call native_progress():
  // once kNativeGrace after the process last did, or when the wait spun out
  // (every 16 rounds).
  bool native_progress_due() const;
};

// The one wait loop of the layer: polls until done() is true, running ACCL
// and native progress. done() is evaluated with mu held.
template <typename F>
void wait_until(F&& done) {
  State& st = state();
  PollPacer pacer;
  for (;;) {
    {
      std::lock_guard lock(st.mu);
      progress_locked();
      if (done()) return;
    }
    if (pacer.native_progress_due()) native_progress();
    pacer.pause();
  }
}

// ---------------------------------------------------------------------------
// Asynchronous progress (progress_thread.cpp): runs progress_locked() while
// the application is away from the layer, so that offloaded point-to-point
// traffic completes while the application sits in a native MPI call.
// ---------------------------------------------------------------------------
void progress_thread_start();  // once the device is up and p2p is offloaded
void progress_thread_stop();   // teardown, no lock held
bool progress_thread_started();  // ever, in this process
// mu held: work that a peer may wait for was just added (wakes a sleeping thread).
void progress_thread_kick();
// True on the progress thread, which must call no MPI function: work that
// needs one waits for an application thread.
bool on_progress_thread();
// An application thread ran a progress round (the progress thread keeps out
// of the way meanwhile).
void note_app_progress();

}  // namespace accl::pmpi
