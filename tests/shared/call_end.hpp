// SPDX-License-Identifier: Apache-2.0
//
// Waiting for an asynchronous call as a host loop does (the PMPI layer waits
// in slices, or polls with test()): until the call ends, a DeviceError
// ending it too, or a limit passes.
#pragma once

#include <accl/error.hpp>

#include <chrono>
#include <cstdint>

namespace accl::test {

struct CallEnd {
  bool completed = false;  // false: the limit passed first
  uint32_t retcode = 0;    // the DeviceError's, when the call failed
};

// Calls `poll` (true once the call completed) until the call ends or
// `limit` passes.
template <typename Poll>
CallEnd poll_until_end(Poll&& poll, std::chrono::steady_clock::duration limit) {
  CallEnd end;
  const auto begin = std::chrono::steady_clock::now();
  while (!end.completed && std::chrono::steady_clock::now() - begin < limit) {
    try {
      end.completed = poll();
    } catch (const DeviceError& e) {
      end.retcode = e.retcode();
      end.completed = true;
    }
  }
  return end;
}

}  // namespace accl::test
