// SPDX-License-Identifier: Apache-2.0
//
// Entry point of the CCLO control program (the firmware). The emulator
// creates one ControlProgram per emulated CCLO and runs run() on a thread of
// its own; run() returns when DataPlane::stop_requested() becomes true.
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

 private:
  DataPlane& dp_;
  ControlProgramState* state_;
};

}  // namespace accl::fw
