// SPDX-License-Identifier: Apache-2.0
//
// Entry point of the CCLO control program (the firmware). The emulator
// creates one ControlProgram per emulated CCLO and runs run() on a thread of
// its own; run() returns when DataPlane::stop_requested() becomes true.
//
// Instead of run(), a host may call power_on() once and then poll() from any
// thread, one thread at a time (the state is single-threaded by design; the
// host serializes the callers, e.g. with a mutex), sleeping between passes
// that made no progress until its data plane reports new work. That lets a
// thread that waits for a call run the firmware itself instead of handing
// the work to another thread and back.
//
// The implementation lives in firmware/src and is freestanding. Its state is
// a fixed-size object (no heap): the host side allocates it.
#pragma once

#include <accl_fw/dataplane.hpp>

namespace accl::fw {

class ControlProgramState;  // defined in firmware/src; fixed size

class ControlProgram {
 public:
  // `storage` must point to at least state_bytes() bytes aligned to
  // state_alignment(); the program keeps all of its state there.
  ControlProgram(DataPlane& dataplane, void* storage);

  static unsigned long state_bytes();
  static unsigned long state_alignment();

  // Power-on initialisation (CFGRDY = 0, HWID and capabilities written),
  // then the call loop until stop is requested.
  void run();

  struct PollResult {
    bool progressed;            // something changed: poll again before sleeping
    // When a pending call times out (DataPlane::now_ns clock). Idle passes
    // check deadlines only now and then: a deadline already past means
    // "poll again", the pass that checks ends the call.
    uint64_t next_deadline_ns;
    // No call is left in flight and the pass emptied the call and arrival
    // queues: another pass would find nothing to do until something new is
    // queued (the data plane's producers signal that themselves).
    bool drained;
  };
  // Power-on initialisation only (what run() does first).
  void power_on();
  // One pass of run()'s loop without its idle(): takes new calls and
  // arrivals, advances every pending call once, ends expired calls. Does not
  // wait for peers (a data move itself may block, as in run()).
  PollResult poll();

 private:
  DataPlane& dp_;
  ControlProgramState* state_;
};

}  // namespace accl::fw
