// SPDX-License-Identifier: Apache-2.0
//
// Spin-then-block helpers shared by every layer that waits by polling: the
// emulator's doorbell and transports and the PMPI layer's wait loops. One
// policy for all of them, so 2 ranks on 2 cores hand off without giving the
// core away while 4+ ranks on 2 cores stop spinning in vain.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include <sys/resource.h>

namespace accl {

// One short pause inside spin loops (PAUSE on x86; lets the sibling
// hyper-thread run and saves power).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long a waiter spins before it blocks, adapted to how well spinning
// works right now. Spinning pays only when the thread that will wake us runs
// on another core; with more busy threads than cores (4+ ranks on 2 cores:
// each rank has a host and a firmware thread) a spin runs out in vain and
// steals the core from the very thread we wait for. So: a spin that ends
// with the event doubles the budget it had (up to the configured maximum),
// one that runs out halves it, down to zero (block at once); every 64th wait
// probes with the full budget so spinning comes back when cores free up (a
// probe that succeeds keeps the full budget: doubling the collapsed budget
// instead gave 1 us, which a round trip of a few microseconds outlasts, so
// spinning never came back). An event that arrives only late in the spin
// counts as a miss too: under oversubscription the event is late *because*
// we hold the core.
class SpinBudget {
 public:
  // `floor`: the budget never drops below it (0: down to blocking at once).
  explicit SpinBudget(std::chrono::nanoseconds max, std::chrono::nanoseconds floor = std::chrono::nanoseconds(0))
      : max_(max.count()), floor_(std::min(floor.count(), max.count())), budget_(max.count()) {}
  // Changes the floor (e.g. once it is known whether this process has a core
  // of its own); the current budget is raised to it.
  void set_floor(std::chrono::nanoseconds floor) {
    const int64_t f = std::min(floor.count(), max_);
    floor_.store(f, std::memory_order_relaxed);
    if (budget_.load(std::memory_order_relaxed) < f) budget_.store(f, std::memory_order_relaxed);
  }
  // Budget for the next wait.
  std::chrono::nanoseconds next() {
    int64_t b = budget_.load(std::memory_order_relaxed);
    if (b < max_ && (waits_.fetch_add(1, std::memory_order_relaxed) & 63) == 0) b = max_;
    return std::chrono::nanoseconds(b);
  }
  // `used`: the budget this wait had (what next() returned).
  void spin_succeeded(std::chrono::nanoseconds used) {
    budget_.store(std::min(max_, std::max<int64_t>(2 * used.count(), 1000)), std::memory_order_relaxed);
  }
  void spin_failed() {
    int64_t b = budget_.load(std::memory_order_relaxed) / 2;
    budget_.store(std::max(floor_.load(std::memory_order_relaxed), b < 500 ? int64_t{0} : b),
                  std::memory_order_relaxed);
  }

 private:
  const int64_t max_;
  std::atomic<int64_t> floor_;  // relaxed, like budget_
  std::atomic<int64_t> budget_;  // relaxed: a heuristic, races only blur it
  std::atomic<uint32_t> waits_{0};
};

// Each of the host's `host_processes` ACCL processes has a core of its own
// (0: unknown, as for a driver used without the PMPI layer). Spinning waits
// of both the emulator and the PMPI layer keep a floor then.
inline bool core_per_process(unsigned host_processes, unsigned cores) {
  return host_processes > 0 && host_processes <= cores;
}

// Whether another thread took this thread's core within `window` before now:
// the thread's count of involuntary context switches grew since its previous
// ask, and that ask is at most `window` old (an older one only sets the
// baseline, so a preemption during the application's own compute long ago
// does not count). One getrusage(RUSAGE_THREAD), ~0.3 us: asked only when a
// spin runs out. A sched_yield() counts as an involuntary switch too, so a
// waiter rebases (rebase_preemption_count()) after each of its yields.
// With a core per ACCL process the thread that took the core usually
// belongs to another program (a busy loop, a build; ours mostly sleep while a
// host thread waits): the scheduler then shares the core in slices of about
// a millisecond, and a waiter that blocks or yields gives away its share
// (with the kernel's EEVDF scheduler a sched_yield() against a CPU-bound
// thread costs that thread's whole slice, ~1.5 ms here; a sleeper comes back
// only when its wake-up wins over it). Spinning on, as native MPI does,
// keeps the share, and the peer's reply is there as soon as both run.
struct PreemptionCount {
  long switches = -1;  // involuntary switches at the last ask (-1: never asked)
  std::chrono::steady_clock::time_point at{};
};
inline PreemptionCount& thread_preemption_count() {
  thread_local PreemptionCount count;
  return count;
}
inline bool preempted_within(std::chrono::nanoseconds window) {
  struct rusage usage {};
  if (::getrusage(RUSAGE_THREAD, &usage) != 0) return false;
  PreemptionCount& last = thread_preemption_count();
  const auto now = std::chrono::steady_clock::now();
  const bool preempted = last.switches >= 0 && usage.ru_nivcsw > last.switches && now - last.at <= window;
  last.switches = usage.ru_nivcsw;
  last.at = now;
  return preempted;
}
inline void rebase_preemption_count() { (void)preempted_within(std::chrono::nanoseconds(0)); }

// How long a waiter with a core per ACCL process keeps spinning once it found
// its core contended (preempted_within()) before it looks again:
// preempted meanwhile, it spins another period; not, and it gives the core
// away (yields, sleeps or blocks) as without contention. So it spins while
// the scheduler shares the core in slices anyway (its spinning only uses its
// own share) and stops a period after the other program does.
// ACCL_CONTENDED_SPIN_US, set once at start-up by the PMPI layer for its
// PollPacers (0: never; the emulator keeps its own copy of the setting, and
// each shared library has its own of this one). Relaxed: read by every wait,
// written before the first.
inline std::atomic<int64_t>& contended_spin_ns() {
  static std::atomic<int64_t> ns{0};
  return ns;
}

// Paces one poll loop (one wait) with a SpinBudget: spin (PAUSE) while the
// budget lasts, then yield the core (more threads than cores: the emulator's
// threads and other ranks may need it) for up to 4096 rounds, then sleep
// 20 us per round. Destroying the pacer reports the wait to the budget: a
// wait that ended in the first half of its spin succeeded, any other missed.
// pause() says which of the three it did; `Clock` is a template parameter so
// tests can drive the policy with a clock of their own.
template <typename Clock = std::chrono::steady_clock>
class BasicPollPacer {
 public:
  enum class Step { spun, yielded, slept };
  // How long after the last drive of a second progress engine (Open MPI's,
  // for the PMPI layer) a poll loop drives it again, unless its wait spun
  // out: with yield_when_idle, which mpirun --oversubscribe turns on, an idle
  // opal_progress() calls sched_yield(), ~650 ns on some kernels, and a
  // ping-pong receive that drove it every 16th round met one in about every
  // round trip. Counted across waits (the caller keeps the time), so a
  // stream of short waits still drives it every kNativeGrace or so.
  static constexpr std::chrono::microseconds kNativeGrace{100};

  // `own_core`: each ACCL process of the host has a core of its own, so a
  // waiter that finds its core contended spins on (contended_spin_ns())
  // instead of yielding.
  explicit BasicPollPacer(SpinBudget& budget, bool own_core = false)
      : spin_(budget), start_(Clock::now()), budget_(budget.next()), own_core_(own_core) {}
  ~BasicPollPacer() {
    if (rounds_ == 0) return;  // done at once: says nothing about spinning
    const bool early = !spun_out_ && (Clock::now() - start_) * 2 <= budget_;
    if (early) spin_.spin_succeeded(budget_);
    else spin_.spin_failed();
  }
  BasicPollPacer(const BasicPollPacer&) = delete;
  BasicPollPacer& operator=(const BasicPollPacer&) = delete;

  Step pause() {
    ++rounds_;
    if (!spun_out_) {
      // Reading the clock every 16th round keeps its cost out of the spin.
      if ((rounds_ & 15) != 0 || Clock::now() - start_ < budget_) {
        cpu_relax();
        return Step::spun;
      }
      spun_out_ = true;
      if (own_core_ && contended_span().count() > 0 && preempted_within(contended_span())) start_contended_spin();
    }
    if (contended_) {
      if ((rounds_ & 15) != 0 || Clock::now() < contended_end_ || contention_persists()) {
        cpu_relax();
        return Step::spun;
      }
      contended_ = false;
    }
    if (yields_ < kYieldRounds && !no_yield_) {
      ++yields_;
      const auto before = Clock::now();
      std::this_thread::yield();
      // A yield that kept us off the core for long went to a thread that
      // does not yield back: contended. Yielding again would give away a
      // slice each time; spin on our share instead, then sleep.
      if (own_core_ && Clock::now() - before >= kLongYield) start_contended_spin();
      else if (own_core_) rebase_preemption_count();  // our own yield is no preemption
      return Step::yielded;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
    return Step::slept;
  }
  // Whether this round should also drive the second progress engine, last
  // driven at `last_native`: after the first pause of the wait and every 16
  // rounds after it (one clock read each), once the wait spun out or
  // kNativeGrace passed since `last_native`.
  bool native_progress_due(typename Clock::time_point last_native) const {
    return (rounds_ & 15) == 1 && (spun_out_ || Clock::now() - last_native >= kNativeGrace);
  }

 private:
  static constexpr unsigned kYieldRounds = 4096;
  static constexpr std::chrono::microseconds kLongYield{200};

  static std::chrono::nanoseconds contended_span() {
    return std::chrono::nanoseconds(contended_spin_ns().load(std::memory_order_relaxed));
  }
  void start_contended_spin() {
    const std::chrono::nanoseconds span = contended_span();
    if (span.count() == 0) return;  // off: yield as without contention
    no_yield_ = contended_ = true;
    contended_end_ = Clock::now() + span;
    rebase_preemption_count();  // the period counts the preemptions after this
  }
  // At the end of a contended period: preempted again during it, so spin
  // another period; a whole period without, and the core is ours again.
  bool contention_persists() {
    if (!preempted_within(2 * contended_span())) return false;
    contended_end_ = Clock::now() + contended_span();
    return true;
  }

  SpinBudget& spin_;
  typename Clock::time_point start_;
  std::chrono::nanoseconds budget_;
  typename Clock::time_point contended_end_{};
  unsigned rounds_ = 0;
  unsigned yields_ = 0;
  bool own_core_;
  bool spun_out_ = false;
  bool contended_ = false;  // spinning on a contended core
  bool no_yield_ = false;   // contended: sleep rather than yield
};

using PollPacer = BasicPollPacer<>;

}  // namespace accl
