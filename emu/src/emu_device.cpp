// SPDX-License-Identifier: Apache-2.0
#include "emu_device.hpp"

#include "net_address.hpp"
#include "thread_name.hpp"
#include "transport_tuning.hpp"

#include <accl/config.hpp>
#include <accl/log.hpp>

#if ACCL_EMU_HAVE_FIRMWARE
#include <accl_fw/control_program.hpp>
#endif

#include <sched.h>

#include <algorithm>
#include <new>
#include <stdexcept>
#include <utility>

namespace accl::emu {

DeviceSettings DeviceSettings::from_environment() {
  validate_settings();  // every emu setting, not only the ones read here: a bad one stops device creation
  DeviceSettings s;
  s.spin = std::chrono::microseconds(config::get_int("ACCL_EMU_SPIN_US"));
  s.drive_spin = std::chrono::microseconds(config::get_int("ACCL_EMU_DRIVE_SPIN_US"));
  s.drive_yield = std::chrono::microseconds(config::get_int("ACCL_EMU_YIELD_US"));
  s.contended_spin = std::chrono::microseconds(config::get_int("ACCL_CONTENDED_SPIN_US"));
  s.io_timeout = std::chrono::milliseconds(config::get_int("ACCL_TIMEOUT_MS"));
  s.overflow_bytes = static_cast<size_t>(config::get_int("ACCL_EMU_OVERFLOW_BYTES"));
  return s;
}

std::chrono::nanoseconds driving_spin_budget(const DeviceSettings& settings, bool core_per_process) {
  return core_per_process ? settings.drive_spin : settings.spin;
}

std::chrono::nanoseconds driving_spin_floor(const DeviceSettings& settings, bool core_per_process) {
  return core_per_process ? settings.drive_spin / 4 : std::chrono::nanoseconds(0);
}

std::chrono::nanoseconds driving_yield_budget(const DeviceSettings& settings, unsigned host_processes,
                                              unsigned cores) {
  return host_processes > cores ? settings.drive_yield : std::chrono::nanoseconds(0);
}

EmuDevice::EmuDevice(const EmuOptions& options, const DeviceSettings& settings)
    : kind_(options.transport),
      self_{parse_ipv4(options.bind_address), options.port},
      doorbell_(settings.spin),
      memory_(options.banks, options.bank_bytes, settings.overflow_bytes),
      calls_(xmem_, doorbell_, settings.spin),
      sink_(xmem_, memory_, streams_, doorbell_, settings.io_timeout),
      transports_(start_transports(options)),
      links_(kind_, self_, sink_, transports_),
      mover_(xmem_, memory_, streams_, links_, settings.io_timeout),
      dataplane_(xmem_, calls_, sink_, streams_, links_, mover_, doorbell_),
      core_per_process_(core_per_process(options.host_processes, host_cpu_count(options.host_cores))),
      drive_spin_(driving_spin_budget(settings, core_per_process_), driving_spin_floor(settings, core_per_process_)),
      drive_yield_(driving_yield_budget(settings, options.host_processes, host_cpu_count(options.host_cores))),
      contended_spin_(core_per_process_ ? settings.contended_spin : std::chrono::nanoseconds(0)) {
  transports_.for_each([this](Transport& t) {
    if (t.polls()) polled_[polled_count_++] = &t;
  });
  // A peer that broke its link to us is likely unreachable the other way too.
  sink_.set_link_failure_hook([this](const NetAddress& peer) { links_.forget(peer); });
  // Windows are offered for direct writes only where a transport makes them.
  if (transports_.shm) sink_.set_direct_write_fence([this] { return transports_.shm->fence_direct_writes(); });
  if (!settings.start_firmware) return;
  // The firmware thread, before it sleeps, takes arrivals off the transports
  // itself like a driving host thread: a large message that streams in
  // while the host thread sleeps is then copied and handled on one thread,
  // without a reader thread woken for it and waking the firmware in turn.
  doorbell_.set_spin_work([this] { return poll_transports(); }, [this] { end_polling(); });
#if ACCL_EMU_HAVE_FIRMWARE
  const size_t align = std::max<size_t>(fw::ControlProgram::state_alignment(), alignof(std::max_align_t));
  firmware_state_ = ::operator new(fw::ControlProgram::state_bytes(), std::align_val_t(align));
  try {
    program_ = new fw::ControlProgram(dataplane_, firmware_state_);
    program_->power_on();  // before any thread may run a pass
    firmware_ = std::thread([this] { firmware_main(); });
    // Last: nothing below can fail, so a reader never reaches a device whose
    // construction is being unwound.
    sink_.set_delivery_driver(this);
  } catch (...) {
    delete program_;
    program_ = nullptr;
    ::operator delete(firmware_state_, std::align_val_t(align));
    firmware_state_ = nullptr;
    throw;
  }
#else
  ACCL_LOG_WARN("emulated CCLO {}: built without the firmware; calls will not run", to_string(self_));
#endif
}

EmuDevice::~EmuDevice() {
  // 1. Stop the firmware thread: the doorbell wakes idle(), interrupting the
  //    kernel stream ends a blocked pull.
  //    Driver threads see stop() before their next pass; taking the mutex
  //    waits for a pass in progress.
  doorbell_.stop();
  streams_.interrupt();
  if (firmware_.joinable()) firmware_.join();
  { std::lock_guard<std::mutex> drain(firmware_mutex_); }
#if ACCL_EMU_HAVE_FIRMWARE
  delete program_;
  program_ = nullptr;
  if (firmware_state_ != nullptr) {
    const size_t align = std::max<size_t>(fw::ControlProgram::state_alignment(), alignof(std::max_align_t));
    ::operator delete(firmware_state_, std::align_val_t(align));
  }
#endif
  // 2. No host thread may wait for calls nobody will run.
  calls_.abort_all(abi::kNotReady);
  // 3. Drop outbound links, then stop the transports so no thread calls the
  //    sink any more before it goes away.
  links_.clear();
  for (auto* t : {&transports_.udp, &transports_.tcp, &transports_.shm, &transports_.inproc})
    if (*t) (*t)->stop();
}

TransportSet EmuDevice::start_transports(const EmuOptions& options) {
  TransportSet set;
  TransportOptions to;
  to.bind = self_;
  to.job_secret = options.job_secret;
  to.host_processes = options.host_processes;
  to.host_cores = options.host_cores;
  // Each transport is started right away so its port is bound before the
  // next one takes the same number (automatic: all share one port number).
  // They listen on the configured address, but the CCLO is known by its
  // identity (identity_address: a concrete address also for 0.0.0.0), which
  // its own sends (loopback) and every peer's records must use.
  NetAddress identity{};
  auto open = [&](std::unique_ptr<Transport> t) {
    t->start(sink_);
    to.bind.port = t->local_address().port;
    if (identity.port == 0) identity = t->local_address();
    return t;
  };
  [[maybe_unused]] auto missing = [](const char* kind) {
    return std::runtime_error(std::string("emulated CCLO: the ") + kind + " transport is not built into this library");
  };
  switch (options.transport) {
    case TransportKind::automatic:
#if ACCL_EMU_HAVE_TCP
      set.tcp = open(make_tcp_transport(to));
#endif
      set.inproc = open(make_inproc_transport(to));
#if ACCL_EMU_HAVE_SHM
      set.shm = open(make_shm_transport(to));
#endif
      break;
    case TransportKind::inproc:
      set.inproc = open(make_inproc_transport(to));
      break;
    case TransportKind::shm:
#if ACCL_EMU_HAVE_SHM
      set.shm = open(make_shm_transport(to));
      break;
#else
      throw missing("shm");
#endif
    case TransportKind::tcp:
#if ACCL_EMU_HAVE_TCP
      set.tcp = open(make_tcp_transport(to));
      break;
#else
      throw missing("tcp");
#endif
    case TransportKind::udp:
#if ACCL_EMU_HAVE_UDP
      set.udp = open(make_udp_transport(to));
      break;
#else
      throw missing("udp");
#endif
  }
  self_ = identity;
  ACCL_LOG_DEBUG("emulated CCLO listening on {} ({})", to_string(self_), to_string(options.transport));
  return set;
}

void EmuDevice::firmware_main() {
  name_this_thread("accl-firmware");
  log::set_thread_rank(-1);  // set from the data plane once the driver configured a communicator
#if ACCL_EMU_HAVE_FIRMWARE
  try {
    int rank = -1;
    uint64_t next_deadline_ns = 0;
    while (!doorbell_.stopped()) {
      fw::ControlProgram::PollResult pass{};
      bool ran = false;
      // Awake, we take arrivals off the transports ourselves (see
      // set_spin_work above); polling also keeps the reader threads out of
      // the way until we go to sleep.
      poll_transports();
      {
        // A host thread running passes (always inside enter/leave_driving)
        // hands over when it stops; blocking on the mutex here instead would
        // cost it a futex wake per pass.
        std::unique_lock<std::mutex> lock(firmware_mutex_, std::try_to_lock);
        if (lock.owns_lock()) {
          pass = program_->poll();
          ran = true;
          // Its idle passes need not be recorded (a driver's next pass
          // records again); one that progressed ends the driver's record.
          if (pass.progressed) idle_pass_epoch_.store(kNoIdlePass, std::memory_order_release);
        }
      }
      if (ran) {
        if (int r = dataplane_.log_rank(); r != rank) log::set_thread_rank(rank = r);
        next_deadline_ns = pass.next_deadline_ns;
        if (!pass.progressed) dataplane_.idle(next_deadline_ns);
      } else {
        // The driver also serves the timers while it runs passes; a timer
        // due once it stopped is late by at most kDriverTimerSlackNs.
        dataplane_.idle(std::max(next_deadline_ns, dataplane_.now_ns() + kDriverTimerSlackNs));
      }
    }
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("emulated CCLO: firmware thread failed: {}", e.what());
  }
#endif
}

bool EmuDevice::run_passes(unsigned max_passes, bool& progressed, uint64_t& seen) {
#if ACCL_EMU_HAVE_FIRMWARE
  std::unique_lock<std::mutex> lock(firmware_mutex_, std::try_to_lock);
  if (!lock.owns_lock() || doorbell_.stopped()) return false;
  for (unsigned i = 0; i < max_passes; ++i) {
    seen = doorbell_.epoch();
    const fw::ControlProgram::PollResult pass = program_->poll();
    // A drained pass during which nothing rang counts as the idle pass that
    // would follow it: nothing is left for a pass begun at `seen`, and
    // whatever is queued later rings the doorbell. An eager send then takes
    // one pass, not two. A ring during the pass (a freed RX buffer, say)
    // needs the second pass, or leave_driving() would wake the firmware
    // thread for it.
    progressed = pass.progressed && !(pass.drained && doorbell_.epoch() == seen);
    if (!progressed) break;
  }
  idle_pass_epoch_.store(progressed ? kNoIdlePass : seen, std::memory_order_release);
  return true;
#else
  (void)max_passes;
  (void)progressed;
  (void)seen;
  return false;
#endif
}

void EmuDevice::delivery_begins() { doorbell_.enter_driving(); }

void EmuDevice::delivery_ended() {
  // Whatever the passes log carries this CCLO's rank, as on the firmware thread.
  if (const int rank = dataplane_.log_rank(); rank != log::thread_rank()) log::set_thread_rank(rank);
  bool progressed = false;
  uint64_t seen = doorbell_.epoch();
  bool ran = false;
  try {
    ran = run_passes(kPassesPerDelivery, progressed, seen);
  } catch (const std::exception& e) {
    // No driver's call to report it to: the firmware thread, woken below,
    // runs the pass again and reports a failure that persists.
    ACCL_LOG_ERROR("emulated CCLO: a firmware pass on a reader thread failed: {}", e.what());
  }
  // Not run (another thread holds the firmware, or it failed) or still
  // progressing: the firmware thread takes over, as after a host thread's drive.
  doorbell_.leave_driving(seen, !ran || progressed, ran && !progressed);
}

CallId EmuDevice::start(const CallWords& call, std::span<const CallId> waitfor) {
  if (program_ == nullptr) return calls_.start(call, waitfor);
  const CallId id = calls_.start(call, waitfor, /*ring_doorbell=*/false);
  // Run the call right here as far as it goes without a peer (a nop, an
  // eager send or a local copy completes; a receive gets posted). Up to two
  // passes: the second tells whether the first left anything to do, unless
  // the first ended with nothing in flight (drained). Only then does
  // the firmware thread need a wake-up (or when another thread holds the
  // firmware and might not see the new call before it stops).
  // Driving meanwhile: rings from these passes need no firmware wake-up
  // when the second pass finds everything done.
  doorbell_.enter_driving();
  bool progressed = false;
  uint64_t seen = doorbell_.epoch();
  const bool ran = run_passes(2, progressed, seen);
  doorbell_.leave_driving(seen, !ran || progressed, ran && !progressed);
  return id;
}

template <typename IsDone>
bool EmuDevice::poll_call(IsDone&& is_done) {
  if (is_done()) return true;
  if (program_ == nullptr) return false;
  // Pollers (e.g. the PMPI layer's wait loop) make progress with each test:
  // they take complete inbound messages off the transports themselves (no
  // reader thread wakes for them) and run the firmware passes (unless the
  // firmware thread is inside one), keeping the firmware thread asleep. Not
  // only when it sleeps: one that was woken may wait for a core that the
  // spinning pollers hold, and the call would wait with it.
  doorbell_.enter_driving();
  uint64_t seen = doorbell_.epoch();
  const bool delivered = poll_transports();
  if (!delivered && idle_pass_would_repeat(seen)) {
    // Nothing arrived and nothing rang since the last pass found nothing to
    // do: a pass now would find nothing either. Skipping it keeps an empty
    // poll cheap, so a poller notices an arrival sooner.
    doorbell_.leave_driving(seen, /*pending=*/false, /*idle_pass=*/false);
    return is_done();
  }
  bool pending = delivered;  // handed to the firmware thread unless our passes took care of it
  bool idle_pass = false;
  bool progressed = false;
  if (run_passes(4, progressed, seen)) {
    pending = progressed;
    idle_pass = !progressed;
  }
  doorbell_.leave_driving(seen, pending, idle_pass);
  return is_done();
}

bool EmuDevice::test(CallId id) {
  return poll_call([&] { return calls_.test(id); });
}

bool EmuDevice::test_result(CallId id, CallResult& out) {
  return poll_call([&] { return calls_.test_result(id, out); });
}

bool EmuDevice::idle_pass_would_repeat(uint64_t seen) {
  if (idle_pass_epoch_.load(std::memory_order_acquire) != seen) return false;
  const unsigned skipped = passes_skipped_.load(std::memory_order_relaxed) + 1;
  passes_skipped_.store(skipped, std::memory_order_relaxed);
  return skipped % kPassesPerSkippedRun != 0;
}

bool EmuDevice::poll_transports() {
  bool delivered = false;
  for (size_t i = 0; i < polled_count_; ++i) delivered = polled_[i]->poll() || delivered;
  return delivered;
}

void EmuDevice::driver_enters() { transports_.for_each([](Transport& t) { t.driver_enters(); }); }

void EmuDevice::driver_leaves() { transports_.for_each([](Transport& t) { t.driver_leaves(); }); }

void EmuDevice::end_polling() { transports_.for_each([](Transport& t) { t.end_polling(); }); }

bool EmuDevice::peer_writing() const {
  bool writing = false;
  transports_.for_each([&](const Transport& t) { writing = writing || t.peer_writing(); });
  return writing;
}

bool EmuDevice::wait(CallId id, std::chrono::nanoseconds timeout) {
  if (program_ == nullptr) return calls_.wait(id, timeout);
  const CallController::Watch call = calls_.watch(id);
  if (call.done()) return true;
  // Clamp absurd timeouts (nanoseconds::max()) so the deadline cannot overflow.
  const auto deadline = Wakeup::Clock::now() + std::clamp(timeout, std::chrono::nanoseconds(0),
                                                          std::chrono::nanoseconds(std::chrono::hours(24 * 365)));
  if (drive_until(id, call, deadline)) return true;
  const auto rest = std::max(std::chrono::nanoseconds(0),
                             std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Wakeup::Clock::now()));
  // Blocking from here on: the firmware thread runs the call and the
  // transport threads deliver. A wait whose time simply ran out keeps the
  // poll lease: callers wait in slices (the PMPI layer 1 ms at a time) and
  // poll again at once, and ending the lease would wake the parked readers
  // for nothing (4 ranks on 2 cores, 1 MiB allreduce: about a third of
  // their wake-ups).
  if (rest.count() > 0) end_polling();
  return calls_.wait(id, rest, /*spin=*/false);
}

namespace {
// Where the yielding budget of this thread's current wait stands: callers
// wait in slices (the PMPI layer waits for a collective 1 ms at a time, with
// its own progress in between), and the budget must bound the time without
// progress across them, or a rank waiting for a late peer would yield-poll
// until the peer came instead of blocking.
struct QuietSince {
  const void* device = nullptr;
  CallId call = 0;
  Wakeup::Clock::time_point since{};
};
thread_local QuietSince t_quiet;
}  // namespace

bool EmuDevice::drive_until(CallId id, const CallController::Watch& call, Wakeup::Clock::time_point deadline) {
  // Spinning here pays while the call progresses or the peer answers within
  // microseconds; with more runnable threads than cores it steals the core
  // from the peer, so the budget adapts like every other spin (SpinBudget).
  // Oversubscribed, the thread yields between polls instead (drive_yield_,
  // driving_yield_budget says why): a yield gives the core to whichever
  // thread has work and costs no wake-up to come back from.
  // The budget bounds the time without progress, not the whole wait: while
  // our passes move data (a large collective takes far longer than any
  // budget) this thread keeps driving, instead of handing every piece to the
  // firmware and reader threads with a wake-up each.
  const bool yielding = drive_yield_.count() > 0;
  const auto budget = yielding ? drive_yield_ : drive_spin_.next();
  // This thread only waits: a transport may spend it on an arriving payload.
  struct WaitsIdle {
    bool before = std::exchange(t_thread_waits_idle, true);
    ~WaitsIdle() { t_thread_waits_idle = before; }
  } waits_idle;
  const auto begin = Wakeup::Clock::now();
  auto quiet_since = begin;
  if (yielding && t_quiet.device == this && t_quiet.call == id) quiet_since = t_quiet.since;
  auto end = std::min(deadline, quiet_since + budget);
  doorbell_.enter_driving();
  driver_enters();
  uint64_t seen = doorbell_.epoch();
  bool pending = false;    // the last pass progressed: another one is due
  bool idle_pass = false;  // the last pass that ran (begun at `seen`) found nothing
  bool done = false;
  auto now = begin;
  unsigned iterations = 0;
  for (;;) {
    // Inbound messages are taken here rather than by the transports' reader
    // threads (no wake-up on either side), then matched by our pass.
    const bool delivered = poll_transports();
    bool progressed = false;
    const bool ran = run_passes(1, progressed, seen);
    if (ran) {
      pending = progressed;
      idle_pass = !progressed;
    } else if (delivered) {
      pending = true;
    }
    if (call.done()) {
      done = true;
      break;
    }
    if (progressed || delivered) {
      now = Wakeup::Clock::now();
      quiet_since = now;
      end = std::min(deadline, now + budget);
    }
    if (ran && !progressed) {
      // Idle: nothing changes until something arrives, something rings or
      // another thread completes the call.
      while (doorbell_.epoch() == seen && !call.done() && now < end) {
        if (poll_transports()) break;
        if (yielding) {
          sched_yield();
          now = Wakeup::Clock::now();
          continue;
        }
        // No PAUSE between polls: a poll is work enough to pace the loop,
        // and the PAUSE delayed noticing an arrival (2-process driver
        // ping-pong, 8 B: 1.39 -> 1.34 us one way).
        if ((++iterations & 15) == 0) now = Wakeup::Clock::now();
      }
    } else if (!ran) {
      // Another thread runs the firmware: let it finish its pass.
      if (yielding) sched_yield();
      else for (int i = 0; i < 32 && !call.done(); ++i) cpu_relax();
      now = Wakeup::Clock::now();
    } else if ((++iterations & 15) == 0) {
      now = Wakeup::Clock::now();
    }
    if (now >= end) {
      // A peer writing a payload straight into our memory is progress that
      // no delivery shows until the whole payload is in (a megabyte takes
      // ~100 us, beyond the adaptive budget's floor): blocking now would hand
      // its completion to the reader and firmware threads with a wake-up
      // each (2-rank bcast 1 MiB: cores idle 44 % of the time).
      if (now >= deadline) break;
      if (peer_writing()) {
        quiet_since = now;
        end = std::min(deadline, now + budget);
        continue;
      }
      // Another program's thread shares our core: blocking would give our
      // share of it away and leave the call to the firmware and reader
      // threads, each waking late behind that thread (2 ranks beside two
      // busy loops, 8 B ping-pong: p90 2 ms). Drive on for another period
      // while the core stays contended (ACCL_CONTENDED_SPIN_US). The window
      // spans the PMPI layer's 1 ms wait slices: a preemption in the
      // previous slice of this wait still counts.
      if (contended_spin_.count() == 0 || !preempted_within(2 * contended_spin_)) break;
      end = std::min(deadline, now + contended_spin_);
    }
  }
  // Leave the firmware quiescent if we can (usually one pass that finds
  // nothing); otherwise the firmware thread takes over.
  if (done && pending) {
    bool progressed = false;
    if (run_passes(1, progressed, seen)) {
      pending = progressed;
      idle_pass = !progressed;
    }
  }
  doorbell_.leave_driving(seen, pending, idle_pass);
  driver_leaves();
  if (yielding) {
    t_quiet = QuietSince{this, id, quiet_since};
  } else if (budget.count() > 0) {
    // A hit: the call completed within the first half of the budget after
    // the last progress (the wait idled briefly, if at all). With a core per
    // process any completion while driving is one: a late event is not late
    // because we held a core someone else needed.
    if (done && (core_per_process_ || (Wakeup::Clock::now() - (end - budget)) * 2 <= budget))
      drive_spin_.spin_succeeded(budget);
    else if (done || end < deadline) drive_spin_.spin_failed();
  }
  return done;
}

Endpoint EmuDevice::endpoint() const { return Endpoint{ipv4_to_string(self_.ip), self_.port}; }

}  // namespace accl::emu
