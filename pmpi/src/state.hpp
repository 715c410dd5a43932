// SPDX-License-Identifier: Apache-2.0
//
// The state of the PMPI interposition layer (libaccl_pmpi). One process =
// one ACCL driver on one device, brought up in MPI_Init on MPI_COMM_WORLD.
//
// Thread model: the interposed entry points are callable from any thread
// (MPI_THREAD_MULTIPLE stays honest). Everything that mutates shared state
// (communicator registry, point-to-point engine, shadow requests, buffer
// cache, staging pool) is guarded by State::mu (taken only when MPI granted
// MPI_THREAD_MULTIPLE: below it one thread at a time is inside MPI, see
// LayerMutex). The lock is never held across a PMPI call that can block on a
// remote rank (collectives, blocking p2p): two ranks each blocking inside a
// collective while holding their lock would deadlock a third thread. Waiting
// for ACCL happens in poll loops that drop the lock between polls.
#pragma once

#include "calls.hpp"

#include <accl_pmpi/tuning.hpp>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace accl::pmpi {

struct CommState;

// Settings (read once in MPI_Init; never on the per-call path).
enum class FallbackMode : uint8_t { silent, warn, error };
// Device timeout of offloaded calls unless ACCL_PMPI_TIMEOUT_MS / ACCL_TIMEOUT_MS say otherwise.
constexpr int64_t kDefaultPmpiTimeoutMs = 300000;

struct Settings {
  bool offload = true;
  FallbackMode fallback = FallbackMode::silent;
  bool trace = false;
  bool stats = false;
  std::string device = "emu";
  std::array<bool, kNumCalls> enabled{};
  std::array<uint64_t, kNumCalls> min_bytes{};
  std::array<uint64_t, kNumCalls> max_bytes{};  // 0 = no limit
  // ACCL_POLICY; under auto the table decides, except for calls a byte
  // threshold setting covers (thresholds_set), where the thresholds do.
  tuning::Policy policy = tuning::Policy::offload;
  tuning::Table table;
  std::array<bool, kNumCalls> thresholds_set{};
  bool p2p = true;                              // send and recv enabled
  unsigned rx_buffer_count = 16;
  size_t rx_buffer_size = 65536;
  size_t max_eager_size = 65536;
  size_t max_rendezvous_size = 4 << 20;
  size_t staging_limit = 64 << 20;
  size_t buffer_cache = 64;
  int64_t timeout_ms = kDefaultPmpiTimeoutMs;  // device timeout of offloaded calls
};

// The lock around the layer's state. Below MPI_THREAD_MULTIPLE, MPI lets only
// one thread at a time into the library (SERIALIZED: the application orders
// its threads' calls itself), and nothing but an MPI call touches this state,
// so the lock is taken only when MPI granted MULTIPLE. It was one uncontended
// lock and unlock per wait-loop round and per call, ~60 instructions each.
class LayerMutex {
 public:
  void lock() {
    if (needed_.load(std::memory_order_relaxed)) mu_.lock();
  }
  void unlock() {
    if (needed_.load(std::memory_order_relaxed)) mu_.unlock();
  }
  // Called by bring_up() alone, before the layer takes the lock the first
  // time: a lock taken before the switch would be released after it. (Atomic
  // only so that the model has no formal race: no other thread is in the
  // layer yet.)
  void set_needed(bool needed) { needed_.store(needed, std::memory_order_relaxed); }
  bool needed() const { return needed_.load(std::memory_order_relaxed); }

 private:
  std::mutex mu_;
  std::atomic<bool> needed_{true};
};

struct State {
  Settings s;
  bool initialized = false;  // our MPI_Init ran
  bool torn_down = false;
  bool active = false;       // ACCL is up: offload possible
  bool observe = false;      // stats, trace or a fallback policy other than silent
  int world_rank = 0;
  int world_size = 1;
  int thread_level = MPI_THREAD_SINGLE;  // what MPI granted (PMPI_Query_thread)
  MPI_Comm private_comm = MPI_COMM_NULL;  // bring-up, agreement and teardown traffic
  std::unique_ptr<ACCL> accl;
  std::vector<rank_t> world_ranks;
  bool can_min = false;
  bool can_prod = false;
  bool can_p2p = false;      // device has receive-side wildcards (kCapTagAnyRecv)
  bool can_alltoall = false;
  bool can_barrier = false;
  // Reductions the device runs on every rank: bit f = reduceFunction f
  // reported (device_ops), and defined for data type t (device_type_ops[t]).
  uint32_t device_ops = 0;
  std::array<uint32_t, abi::kNumDataTypes> device_type_ops{};
  // The device has no capability word: public ACCL's firmware and its rules
  // (core/src/public_firmware.hpp), agreed by all ranks.
  bool public_firmware = false;
  // Largest message bytes of one device message there when its rendezvous
  // cannot run (no RDMA stack): the eager size; 0 = no such limit.
  uint64_t eager_only_limit = 0;
  int comm_keyval = MPI_KEYVAL_INVALID;
  int type_keyval = MPI_KEYVAL_INVALID;
  int self_keyval = MPI_KEYVAL_INVALID;
  CommState* world = nullptr;
  std::atomic<uint32_t> next_ctx{64};
  LayerMutex mu;
  // error classes/codes (errors.cpp)
  int err_device = MPI_ERR_OTHER;
  int err_timeout = MPI_ERR_OTHER;
  int err_argument = MPI_ERR_OTHER;
};
// The layer's state, created on first use and never destroyed.
namespace detail {
extern std::atomic<State*> g_state;
State& create_state();
}  // namespace detail
// Read a dozen times per offloaded call: inline, one load after the first use.
inline State& state() {
  State* s = detail::g_state.load(std::memory_order_acquire);
  return s != nullptr ? *s : detail::create_state();
}
// Read on every intercepted call: true = go straight to PMPI (offload off or
// not initialized, no stats/trace). Written only in init/finalize.
extern bool g_native_only;
// Read on every point-to-point call: true while the layer is off, or while
// no communicator runs its point-to-point traffic on ACCL and nothing observes
// the calls; the wrappers then pass a call with a plausible buffer straight to
// PMPI. Becomes false for good once a communicator offloads point-to-point
// (before that communicator reaches the application). Relaxed loads: a plain
// move on x86-64.
extern ACCL_PMPI_LOCAL std::atomic<bool> g_p2p_straight;
// MPI_Barrier's: true while the layer is off, or while the settings never
// offload it and nothing observes. A barrier has no buffer to check, so its
// decision is then pure cost (about 10 % of a 0.3 us native barrier on
// 2 ranks). Written only in init/finalize, like g_native_only.
extern ACCL_PMPI_LOCAL bool g_barrier_straight;

void teardown();  // idempotent; runs from the MPI_COMM_SELF delete callback

}  // namespace accl::pmpi
