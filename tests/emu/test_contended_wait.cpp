// SPDX-License-Identifier: Apache-2.0
//
// Waiting on a core that another program's thread shares (accl/spin.hpp):
// the waiter senses that it was preempted and spins on its share of the core
// instead of yielding it away. These tests pin the waiter and a busy thread
// to one CPU, so the scheduler must time-share it between them.
#include <accl/spin.hpp>

#include <gtest/gtest.h>

#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace accl {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Pins the calling thread to `cpu`; false if the CPU set cannot be had.
bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

// A CPU-bound thread on `cpu` (another program's busy loop, in the tests'
// terms) for the object's lifetime; the constructor returns once it runs.
class BusyThread {
 public:
  explicit BusyThread(int cpu) : thread_([this, cpu] {
    pinned_ = pin_to(cpu);
    running_.store(true);
    while (!stop_.load(std::memory_order_relaxed)) cpu_relax();
  }) {
    while (!running_.load()) std::this_thread::yield();
  }
  ~BusyThread() {
    stop_.store(true);
    thread_.join();
  }
  bool pinned() const { return pinned_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> running_{false};
  bool pinned_ = false;
  std::thread thread_;
};

// The CPU this test process may use first, and the affinity to restore.
struct ContendedWait : ::testing::Test {
  void SetUp() override {
    ASSERT_EQ(::sched_getaffinity(0, sizeof saved, &saved), 0);
    for (cpu = 0; cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved); ++cpu) {
    }
    ASSERT_LT(cpu, CPU_SETSIZE);
    ASSERT_TRUE(pin_to(cpu));
    previous_span = contended_spin_ns().load();
  }
  void TearDown() override {
    ::sched_setaffinity(0, sizeof saved, &saved);
    contended_spin_ns().store(previous_span);
  }
  // What one wait of `span` wall time did, pause by pause.
  struct Steps {
    int spun = 0, yielded = 0, slept = 0;
  };
  static Steps wait_for(PollPacer& pacer, Clock::duration span) {
    Steps steps;
    const auto end = Clock::now() + span;
    while (Clock::now() < end) {
      switch (pacer.pause()) {
        case PollPacer::Step::spun: ++steps.spun; break;
        case PollPacer::Step::yielded: ++steps.yielded; break;
        case PollPacer::Step::slept: ++steps.slept; break;
      }
    }
    return steps;
  }
  cpu_set_t saved{};
  int cpu = 0;
  int64_t previous_span = 0;
};

TEST_F(ContendedWait, PreemptionByABusyThreadOnTheCoreIsSensed) {
  BusyThread busy(cpu);
  ASSERT_TRUE(busy.pinned());
  rebase_preemption_count();  // after the constructor's own yields
  const auto end = Clock::now() + 50ms;  // many scheduler slices
  while (Clock::now() < end) cpu_relax();
  EXPECT_TRUE(preempted_within(1s));
}

// A baseline older than the window only rebases: a preemption long ago (the
// application's compute before a wait) says nothing about the core now.
TEST_F(ContendedWait, AnOldBaselineOnlyRebases) {
  {
    BusyThread busy(cpu);
    ASSERT_TRUE(busy.pinned());
    rebase_preemption_count();
    const auto end = Clock::now() + 20ms;
    while (Clock::now() < end) cpu_relax();
  }
  EXPECT_FALSE(preempted_within(1ns));
}

// CPU time this thread got while it waited `span` with `pacer`, as a
// fraction of the span.
double share_of_core(PollPacer& pacer, Clock::duration span) {
  timespec before{}, after{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &before);
  const auto end = Clock::now() + span;
  while (Clock::now() < end) pacer.pause();
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &after);
  const double cpu_ns = 1e9 * static_cast<double>(after.tv_sec - before.tv_sec) +
                        static_cast<double>(after.tv_nsec - before.tv_nsec);
  return cpu_ns / static_cast<double>(std::chrono::nanoseconds(span).count());
}

// With a core per ACCL process, a wait that finds its core shared spins on:
// the scheduler then splits the core between the waiter and the busy thread,
// and the waiter keeps about half of it (its peer's reply is seen as soon as
// both run). Yielding instead (ranks that share cores, or the setting at 0)
// hands the busy thread its whole slice at every yield: on this kernel
// (EEVDF) the waiter got 0.5 % of the core.
TEST_F(ContendedWait, ContendedWaitKeepsItsShareOfTheCore) {
  BusyThread busy(cpu);
  ASSERT_TRUE(busy.pinned());
  contended_spin_ns().store(std::chrono::nanoseconds(5ms).count());
  SpinBudget budget(50us);
  PollPacer spinning(budget, /*own_core=*/true);
  const double kept = share_of_core(spinning, 100ms);
  PollPacer yielding(budget, /*own_core=*/false);
  const double yielded = share_of_core(yielding, 100ms);
  // Half the core alone; other programs on a loaded machine may take more of it.
  EXPECT_GE(kept, 0.1) << "a contended wait kept " << kept << " of its core; yielding kept " << yielded;
  RecordProperty("share_kept_spinning", std::to_string(kept));
  RecordProperty("share_kept_yielding", std::to_string(yielded));
}

// Once the other program's thread is gone, a period passes without a
// preemption and the wait gives the core away as usual (yields, then sleeps).
TEST_F(ContendedWait, ContendedSpinEndsAPeriodAfterTheContention) {
  contended_spin_ns().store(std::chrono::nanoseconds(5ms).count());
  SpinBudget budget(50us);
  PollPacer pacer(budget, /*own_core=*/true);
  {
    BusyThread busy(cpu);
    ASSERT_TRUE(busy.pinned());
    const Steps steps = wait_for(pacer, 30ms);
    EXPECT_GT(steps.spun, 0);
  }
  // Other programs of a loaded machine may preempt us too: give a quiet
  // period up to a second to come.
  const auto end = Clock::now() + 1s;
  bool gave_away = false;
  while (!gave_away && Clock::now() < end) gave_away = pacer.pause() != PollPacer::Step::spun;
  EXPECT_TRUE(gave_away) << "never stopped spinning";
}

}  // namespace
}  // namespace accl
