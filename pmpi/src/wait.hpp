// SPDX-License-Identifier: Apache-2.0
//
// The one wait loop of the layer. Included at the end of pmpi.hpp.
//
// Why a poll loop and not Request::wait(): while this rank waits for an
// offloaded call it must keep (a) the point-to-point engine moving (a peer's
// MPI_Ssend or large MPI_Isend may need this rank to post a payload receive)
// and (b) Open MPI's own progress engine moving (a peer may be inside a
// native rendezvous send to this rank that must finish before it can join the
// call we wait for). Request::wait() would do neither.
#pragma once

namespace accl::pmpi {

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

}  // namespace accl::pmpi
