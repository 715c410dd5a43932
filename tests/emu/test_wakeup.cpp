// SPDX-License-Identifier: Apache-2.0
//
// The firmware doorbell (emu/src/wakeup.hpp): what wakes the firmware thread
// when host threads run the firmware passes themselves ("drivers").
#include "emu_device.hpp"
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

// A driver enters (its pass would start from the epoch then), the doorbell
// rings, the driver leaves with `idle_pass` (false: no pass ran at all): how
// long the firmware thread, which looked before all that, then waits.
Clock::duration firmware_wait_after_ring_while_driving(bool idle_pass) {
  Wakeup w(0ns);
  const uint64_t firmware_seen = w.epoch();
  w.enter_driving();
  const uint64_t pass_seen = w.epoch();
  w.ring();
  w.leave_driving(pass_seen, /*pending=*/false, idle_pass);
  return wait_time(w, firmware_seen, 5s);
}

// No pass ran (another thread held the firmware): nothing was handled.
TEST(EmuWakeup, DriverWithoutAPassHandsOver) {
  EXPECT_LT(firmware_wait_after_ring_while_driving(/*idle_pass=*/false), 1s);
}

// The ring arrives while the pass runs: the pass may have missed it.
TEST(EmuWakeup, RingDuringTheIdlePassStillWakes) {
  EXPECT_LT(firmware_wait_after_ring_while_driving(/*idle_pass=*/true), 1s);
}

// The spin policy all waits share (accl/spin.hpp). A budget that collapsed
// (waits outlasted it) must come back in full once a probe with the full
// budget succeeds: doubling the collapsed budget gave 1 us, which a round
// trip of a few microseconds never beats, so the budget stayed at zero and
// every wait yielded for the rest of the run.
TEST(EmuWakeup, SpinBudgetComesBackAfterASuccessfulProbe) {
  SpinBudget budget(50us);
  EXPECT_EQ(budget.next(), 50us);
  for (int i = 0; i < 20; ++i) budget.spin_failed();
  // Collapsed: waits block at once, except the probe every 64th wait.
  std::chrono::nanoseconds probe{0};
  int waits = 0;
  for (; waits < 64 && probe == 0ns; ++waits) {
    const auto b = budget.next();
    if (b > 0ns) probe = b;
  }
  ASSERT_EQ(probe, 50us) << "no probe within 64 waits";
  // The probe's wait ended early in its spin: spinning pays again.
  budget.spin_succeeded(probe);
  EXPECT_EQ(budget.next(), 50us);
  // A 2 us round trip keeps it there; misses still halve it to zero.
  budget.spin_succeeded(50us);
  EXPECT_EQ(budget.next(), 50us);
  budget.spin_failed();
  EXPECT_EQ(budget.next(), 25us);
  for (int i = 0; i < 10; ++i) budget.spin_failed();
  int spins = 0;
  for (int i = 0; i < 63; ++i) spins += budget.next() > 0ns ? 1 : 0;
  EXPECT_LE(spins, 1) << "a collapsed budget probes once per 64 waits";
}

// While it spins, the firmware thread takes arrivals off the transports
// itself: a delivery (which rings, as the receive sink does) ends the wait
// without a sleep, and the readers are not told to take over.
TEST(EmuWakeup, SpinWorkThatDeliversEndsTheWait) {
  Wakeup w(std::chrono::milliseconds(500));
  int polls = 0;
  int stops = 0;
  w.set_spin_work(
      [&] {
        if (++polls < 100) return false;
        w.ring();
        return true;
      },
      [&] { ++stops; });
  const uint64_t seen = w.epoch();
  EXPECT_LT(wait_time(w, seen, 5s), 400ms);
  EXPECT_EQ(polls, 100);
  EXPECT_EQ(stops, 0);
}

// A spin that finds nothing hands delivery back (stop_polling) before the
// firmware thread blocks; while a driver runs the passes the firmware
// thread leaves the polling to it.
TEST(EmuWakeup, SpinWorkStopsBeforeSleepingAndWaitsForDrivers) {
  Wakeup w(std::chrono::microseconds(200));
  int polls = 0;
  int stops = 0;
  w.set_spin_work([&] { return ++polls < 0; }, [&] { ++stops; });
  const uint64_t seen = w.epoch();
  EXPECT_GE(wait_time(w, seen, 50ms), 50ms);
  EXPECT_GT(polls, 0);
  EXPECT_EQ(stops, 1);
  polls = 0;
  w.enter_driving();
  EXPECT_GE(wait_time(w, w.epoch(), 20ms), 20ms);
  EXPECT_EQ(polls, 0);
  EXPECT_EQ(stops, 1);
  w.leave_driving(w.epoch(), /*pending=*/false, /*idle_pass=*/true);
}

// The settings of the driving-spin tests: ACCL_EMU_SPIN_US 50, ACCL_EMU_DRIVE_SPIN_US 300.
DeviceSettings driving_settings() {
  DeviceSettings s;
  s.spin = 50us;
  s.drive_spin = 300us;
  return s;
}

}  // namespace

// A host thread waiting for a call drives its CCLO longer only when every
// process with a CCLO on this host has a core of its own; oversubscribed (or
// not known), it blocks as soon as other emulator threads would.
TEST(EmuWakeup, DrivingSpinIsLongOnlyWithACorePerProcess) {
  EXPECT_TRUE(core_per_process(2, 2));
  EXPECT_TRUE(core_per_process(1, 8));
  EXPECT_FALSE(core_per_process(4, 2));
  EXPECT_FALSE(core_per_process(3, 2));
  EXPECT_FALSE(core_per_process(0, 2));
  EXPECT_EQ(driving_spin_budget(driving_settings(), true), 300us);
  EXPECT_EQ(driving_spin_budget(driving_settings(), false), 50us);
}

// Waiting host threads yield-drive only when the host runs more ACCL
// processes than it has cores; with a core each, or when nobody said how many
// processes there are, they keep the spin-then-block policy.
TEST(EmuWakeup, HostThreadsYieldWhileDrivingOnlyWhenOversubscribed) {
  DeviceSettings s = driving_settings();
  s.drive_yield = 1000us;
  EXPECT_EQ(driving_yield_budget(s, 4, 2), 1000us);
  EXPECT_EQ(driving_yield_budget(s, 3, 2), 1000us);
  EXPECT_EQ(driving_yield_budget(s, 2, 2), 0us);
  EXPECT_EQ(driving_yield_budget(s, 1, 8), 0us);
  EXPECT_EQ(driving_yield_budget(s, 0, 2), 0us);
  s.drive_yield = 0us;  // ACCL_EMU_YIELD_US=0 turns the yielding phase off
  EXPECT_EQ(driving_yield_budget(s, 4, 2), 0us);
}

// A clock the test moves by hand, for the poll pacer's policy.
struct ManualClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<ManualClock>;
  static constexpr bool is_steady = true;
  static inline time_point current{};
  static time_point now() { return current; }
};
using ManualPacer = BasicPollPacer<ManualClock>;

// One wait of the PMPI layer's poll loops: spins while its budget lasts
// (the clock is read every 16th round), then yields. A second progress
// engine (Open MPI's) is due after the first pause and every 16 rounds after
// it, but only once the wait spun out or kNativeGrace passed since that
// engine last ran (the caller keeps that time across waits), so short waits
// leave its yielding idle loop alone and a stream of them still drives it
// now and then.
TEST(EmuWakeup, PollPacerSpinsThenYieldsAndPacesNativeProgress) {
  SpinBudget budget(50us);
  ManualClock::time_point last_native = ManualClock::now();
  {
    ManualPacer pacer(budget);
    for (int round = 1; round <= 64; ++round) {
      EXPECT_EQ(pacer.pause(), ManualPacer::Step::spun) << "round " << round;
      EXPECT_FALSE(pacer.native_progress_due(last_native)) << "round " << round << ", native progress just ran";
    }
    last_native -= ManualPacer::kNativeGrace;  // as if native progress last ran a grace period ago
    int due = 0;
    for (int round = 65; round <= 96; ++round) {
      EXPECT_EQ(pacer.pause(), ManualPacer::Step::spun);
      if (pacer.native_progress_due(last_native)) {
        ++due;
        EXPECT_EQ(round % 16, 1) << "due only after the first pause of a 16-round group";
      }
    }
    EXPECT_EQ(due, 2) << "past the grace period: every 16 rounds";
    last_native = ManualClock::now();
    ManualClock::current += 50us;  // the budget is spent
    ManualPacer::Step step = ManualPacer::Step::spun;
    for (int round = 0; round < 16 && step == ManualPacer::Step::spun; ++round) step = pacer.pause();
    EXPECT_EQ(step, ManualPacer::Step::yielded) << "the clock check of the 16th round ends the spin";
  }
  // That wait spun out and halved the budget; the next wait is the budget's
  // probe with the full 50 us, and spins out too.
  {
    ManualPacer pacer(budget);
    last_native = ManualClock::now();
    ManualClock::current += 50us;
    ManualPacer::Step step = ManualPacer::Step::spun;
    for (int round = 0; round < 16 && step == ManualPacer::Step::spun; ++round) step = pacer.pause();
    EXPECT_EQ(step, ManualPacer::Step::yielded);
    last_native = ManualClock::now();
    // Spun out: native progress is due every 16 rounds however recently it ran.
    int due = 0;
    for (int round = 0; round < 32; ++round) {
      pacer.pause();
      due += pacer.native_progress_due(last_native) ? 1 : 0;
    }
    EXPECT_EQ(due, 2);
  }
  // A short wait long after the last native progress: due after its first pause.
  ManualClock::current += ManualPacer::kNativeGrace;
  {
    ManualPacer pacer(budget);
    EXPECT_FALSE(pacer.native_progress_due(last_native)) << "before any pause";
    pacer.pause();
    EXPECT_TRUE(pacer.native_progress_due(last_native));
    last_native = ManualClock::now();
    pacer.pause();
    EXPECT_FALSE(pacer.native_progress_due(last_native));
  }
  // Two misses: 12.5 us; the short wait above ended early in its spin and
  // doubled it.
  EXPECT_EQ(budget.next(), 25us);
  {
    ManualPacer pacer(budget);
    pacer.pause();
    ManualClock::current += 1us;
  }
  EXPECT_EQ(budget.next(), 50us);
}

// A floor set after construction (the PMPI layer learns only in MPI_Init
// whether each rank has a core) holds from then on and lifts a collapsed
// budget at once; setting it back to zero lets the budget collapse again.
TEST(EmuWakeup, SpinBudgetFloorCanBeSetLater) {
  SpinBudget budget(50us);
  for (int i = 0; i < 20; ++i) budget.spin_failed();
  budget.set_floor(12500ns);
  for (int i = 0; i < 64; ++i) EXPECT_GE(budget.next(), 12500ns) << "wait " << i;
  for (int i = 0; i < 20; ++i) budget.spin_failed();
  for (int i = 0; i < 64; ++i) EXPECT_GE(budget.next(), 12500ns) << "wait " << i << " after misses";
  budget.set_floor(200us);  // above the maximum: clamped to it
  EXPECT_EQ(budget.next(), 50us);
  budget.set_floor(0ns);
  for (int i = 0; i < 20; ++i) budget.spin_failed();
  int spins = 0;
  for (int i = 0; i < 63; ++i) spins += budget.next() > 0ns ? 1 : 0;
  EXPECT_LE(spins, 1) << "without a floor a collapsed budget only probes";
}

// With a core per process the driving budget keeps a floor: the slow first
// calls (link set-up) must not collapse it to zero for the rest of the run.
// Oversubscribed, it still collapses (spinning steals the peer's core).
TEST(EmuWakeup, DrivingBudgetKeepsAFloorOnlyWithACorePerProcess) {
  const DeviceSettings s = driving_settings();
  EXPECT_EQ(driving_spin_floor(s, true), 75us);
  EXPECT_EQ(driving_spin_floor(s, false), 0us);

  SpinBudget own_core(driving_spin_budget(s, true), driving_spin_floor(s, true));
  SpinBudget shared(driving_spin_budget(s, false), driving_spin_floor(s, false));
  for (int i = 0; i < 20; ++i) {
    own_core.spin_failed();
    shared.spin_failed();
  }
  for (int i = 0; i < 64; ++i) EXPECT_GE(own_core.next(), 75us) << "wait " << i;
  int spins = 0;
  for (int i = 0; i < 64; ++i) spins += shared.next() > 0ns ? 1 : 0;
  EXPECT_LE(spins, 1) << "oversubscribed, a collapsed budget only probes";
  // A success doubles the budget it had.
  own_core.spin_succeeded(75us);
  EXPECT_GE(own_core.next(), 150us);
}

}  // namespace accl::emu
