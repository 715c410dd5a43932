// SPDX-License-Identifier: Apache-2.0
//
// Asynchronous progress of offloaded point-to-point traffic.
//
// MPI's progress rule: once a send and its matching receive are both posted,
// both complete, whatever else either process does inside MPI. Most of an
// offloaded message's life is on the device, which moves on its own, but a
// few steps need this process's host: device calls waiting for a free slot of
// the layer's budget (p2p_proto.cpp), an envelope to match against a posted
// receive, a reply that releases a rendezvous payload or completes a
// synchronous send. The application thread runs them whenever it is inside
// one of our entry points; this thread runs them while it is not (inside a
// call that runs natively: a reduction with a user-defined op, MPI_Comm_dup,
// a call we do not intercept, computing between calls).
//
// It naps between rounds, from kFirstNap doubling to kLongestNap: it never
// spins. After kIdleGrace in which nothing a peer could wait for was pending
// (p2p_peer_may_wait()) it sleeps on a condition variable until the layer
// adds such work (progress_thread_kick()). While the application thread runs
// progress rounds itself it stays out of the way.
//
// It calls no MPI function: steps that need one (unpacking into a derived
// datatype, freeing a datatype reference) are left to the application
// thread (on_progress_thread()), so the thread is correct under every MPI
// thread level, MPI_THREAD_SINGLE included.
#include "progress.hpp"

#include <accl/log.hpp>

#include <pthread.h>

#include <condition_variable>
#include <thread>

namespace accl::pmpi {

namespace {

constexpr std::chrono::microseconds kFirstNap{50};
constexpr std::chrono::microseconds kLongestNap{1000};
constexpr std::chrono::microseconds kIdleGrace{20000};

thread_local bool t_progress_thread = false;

// Progress rounds run by application threads (progress_locked); only read
// to tell whether one ran since the last look, so relaxed and racy increments
// are fine.
std::atomic<uint64_t> g_app_rounds{0};

class ProgressThread {
 public:
  void start() {
    std::lock_guard lock(m_);
    if (thread_.joinable()) return;
    stop_ = false;
    kicked_ = false;
    thread_ = std::thread([this] { run(); });
    started_.store(true, std::memory_order_relaxed);
  }

  void stop() {
    {
      std::lock_guard lock(m_);
      if (!thread_.joinable()) return;
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  // Whether this process ever started it (ACCL_STATS reports it after teardown).
  bool started() const { return started_.load(std::memory_order_relaxed); }

  // mu held, after the work was added: see run() for why no wake-up is lost.
  void kick() {
    if (!idle_.load(std::memory_order_seq_cst)) return;
    {
      std::lock_guard lock(m_);
      kicked_ = true;
    }
    cv_.notify_one();
  }

 private:
  void run() {
    t_progress_thread = true;
    State& st = state();
    log::set_thread_rank(st.world_rank);
    ::pthread_setname_np(::pthread_self(), "accl-progress");
    std::chrono::microseconds nap = kFirstNap;
    std::chrono::microseconds quiet{0};  // how long no work was seen, in naps
    uint64_t seen_app = g_app_rounds.load(std::memory_order_relaxed);
    std::unique_lock lock(m_);
    while (!stop_) {
      // Block only after kIdleGrace without work: a program exchanging
      // messages then never needs a wake-up call (a futex wake and a
      // reschedule on the critical path of each receive it posts).
      const bool may_block = quiet >= kIdleGrace;
      // "idle" is announced before looking for work under the layer lock:
      // work added after our look is added by a thread that takes the layer
      // lock after us and then finds idle_ set, so it kicks; work added
      // before it is what we find.
      if (may_block) idle_.store(true, std::memory_order_seq_cst);
      lock.unlock();
      bool work;
      {
        std::lock_guard layer(st.mu);
        work = p2p_peer_may_wait();
      }
      lock.lock();
      if (!work && may_block) {
        cv_.wait(lock, [this] { return stop_ || kicked_; });
        kicked_ = false;
        idle_.store(false, std::memory_order_relaxed);
        quiet = std::chrono::microseconds{0};
        nap = kFirstNap;
        continue;
      }
      if (may_block) idle_.store(false, std::memory_order_relaxed);
      cv_.wait_for(lock, nap, [this] { return stop_; });
      if (stop_) break;
      if (!work) {
        quiet += nap;
        nap = std::min(nap * 2, kLongestNap);
        continue;
      }
      quiet = std::chrono::microseconds{0};
      nap = std::min(nap * 2, kLongestNap);
      const uint64_t app = g_app_rounds.load(std::memory_order_relaxed);
      if (app != seen_app) {
        seen_app = app;  // the application thread is progressing: stay out of its way
        continue;
      }
      lock.unlock();
      try {
        std::lock_guard layer(st.mu);
        progress_locked();
      } catch (const std::exception& e) {
        ACCL_LOG_ERROR("accl-pmpi rank {}: progress thread: {}", st.world_rank, e.what());
      }
      lock.lock();
    }
  }

  std::mutex m_;
  std::condition_variable cv_;
  std::thread thread_;
  bool stop_ = false;
  bool kicked_ = false;
  std::atomic<bool> idle_{false};
  std::atomic<bool> started_{false};
};

ProgressThread g_progress;

}  // namespace

bool on_progress_thread() { return t_progress_thread; }

void note_app_progress() {
  g_app_rounds.store(g_app_rounds.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void progress_thread_start() { g_progress.start(); }
void progress_thread_stop() { g_progress.stop(); }
bool progress_thread_started() { return g_progress.started(); }
void progress_thread_kick() { g_progress.kick(); }

}  // namespace accl::pmpi
