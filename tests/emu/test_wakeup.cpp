// SPDX-License-Identifier: Apache-2.0
//
// The firmware doorbell (emu/src/wakeup.hpp): what wakes the firmware thread
// when host threads run the firmware passes themselves ("drivers").
#include "wakeup.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace accl::emu {
namespace {

using namespace std::chrono_literals;
using Clock = Wakeup::Clock;

// How long a firmware wait(seen) lasted, bounded by `limit`.
Clock::duration wait_time(Wakeup& w, uint64_t seen, Clock::duration limit) {
  const auto begin = Clock::now();
  w.wait(seen, begin + limit);
  return Clock::now() - begin;
}

TEST(EmuWakeup, RingWakesTheFirmware) {
  Wakeup w(0ns);
  const uint64_t seen = w.epoch();
  w.ring();
  EXPECT_LT(wait_time(w, seen, 5s), 1s);
}

// A driver whose last pass came after the ring and found nothing to do took
// care of it: the firmware thread sleeps on (before, it woke for every ring a
// polling host thread had already handled, and spun, on cores the pollers
// needed).
TEST(EmuWakeup, RingHandledByADriversIdlePassLetsTheFirmwareSleep) {
  Wakeup w(0ns);
  const uint64_t firmware_seen = w.epoch();
  w.enter_driving();
  w.ring();  // e.g. an arrival, delivered while the driver polls
  const uint64_t pass_seen = w.epoch();  // the driver's pass starts after it...
  w.leave_driving(pass_seen, /*pending=*/false, /*idle_pass=*/true);  // ...and finds nothing
  EXPECT_GE(wait_time(w, firmware_seen, 100ms), 100ms);
  // A ring after that pass wakes it again.
  w.ring();
  EXPECT_LT(wait_time(w, firmware_seen, 5s), 1s);
}

TEST(EmuWakeup, DriverWithoutAPassHandsOver) {
  Wakeup w(0ns);
  const uint64_t firmware_seen = w.epoch();
  w.enter_driving();
  const uint64_t entry = w.epoch();
  w.ring();
  // No pass ran (another thread held the firmware): nothing was handled.
  w.leave_driving(entry, /*pending=*/false, /*idle_pass=*/false);
  EXPECT_LT(wait_time(w, firmware_seen, 5s), 1s);
}

TEST(EmuWakeup, RingDuringTheIdlePassStillWakes) {
  Wakeup w(0ns);
  const uint64_t firmware_seen = w.epoch();
  w.enter_driving();
  const uint64_t pass_seen = w.epoch();
  w.ring();  // arrives while the pass runs: the pass may have missed it
  w.leave_driving(pass_seen, /*pending=*/false, /*idle_pass=*/true);
  EXPECT_LT(wait_time(w, firmware_seen, 5s), 1s);
}

}  // namespace
}  // namespace accl::emu
