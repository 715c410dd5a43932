// SPDX-License-Identifier: Apache-2.0
//
// ACCL_STATS (per-call counters, one table summed over ranks at
// MPI_Finalize), ACCL_TRACE (one line per call) and ACCL_FALLBACK (warn line
// or abort when a call would run natively for a non-benign reason).
#include "stats.hpp"

#include "decision_memo.hpp"
#include "progress.hpp"
#include "state.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace accl::pmpi {

namespace {

struct Counter {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> ns{0};
};
Counter g_counters[kNumCalls][kNumReasons];

}  // namespace

void stats_record(Call call, Reason reason, uint64_t bytes, uint64_t ns) {
  Counter& c = g_counters[static_cast<size_t>(call)][static_cast<size_t>(reason)];
  c.calls.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(bytes, std::memory_order_relaxed);
  c.ns.fetch_add(ns, std::memory_order_relaxed);
}

void trace_line(Call call, Reason reason, uint64_t bytes, MPI_Comm comm, uint64_t ns) {
  int size = 0;
  if (comm != MPI_COMM_NULL) PMPI_Comm_size(comm, &size);
  const char* which = comm == MPI_COMM_WORLD ? "world" : (comm == MPI_COMM_SELF ? "self" : "comm");
  if (reason == Reason::Offloaded)
    std::fprintf(stderr, "[accl-pmpi rank %d] %s %" PRIu64 " B on %s(%d): offloaded (%.1f us)\n", state().world_rank,
                 call_name(call), bytes, which, size, static_cast<double>(ns) / 1e3);
  else
    std::fprintf(stderr, "[accl-pmpi rank %d] %s %" PRIu64 " B on %s(%d): native, %s (%.1f us)\n",
                 state().world_rank, call_name(call), bytes, which, size, reason_text(reason),
                 static_cast<double>(ns) / 1e3);
}

void fallback_policy(Call call, Reason reason, uint64_t bytes) {
  State& st = state();
  if (reason_benign(reason) || st.s.fallback == FallbackMode::silent) return;
  if (st.s.fallback == FallbackMode::warn) {
    std::fprintf(stderr, "[accl-pmpi rank %d] warning: %s (%" PRIu64 " B) falls back to native MPI: %s\n",
                 st.world_rank, call_name(call), bytes, reason_text(reason));
    return;
  }
  std::fprintf(stderr,
               "[accl-pmpi rank %d] error: %s (%" PRIu64 " B) would fall back to native MPI (%s) and "
               "ACCL_FALLBACK=error: aborting\n",
               st.world_rank, call_name(call), bytes, reason_text(reason));
  std::fflush(stderr);
  PMPI_Abort(MPI_COMM_WORLD, 3);
}

CallScope::CallScope(Call call, bool account) : call_(call), on_(account && state().observe) {
  // Only stats and trace report the duration: a fallback policy alone
  // (ACCL_FALLBACK=warn/error) need not pay two clock reads per call.
  if (on_ && (state().s.stats || state().s.trace)) start_ = std::chrono::steady_clock::now();
}

CallScope::~CallScope() {
  State& st = state();
  if (!on_ || !(st.s.stats || st.s.trace)) return;
  const uint64_t ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count());
  if (st.s.stats) stats_record(call_, reason_, bytes_, ns);
  if (st.s.trace) trace_line(call_, reason_, bytes_, comm_, ns);
}

void CallScope::native(Reason reason, uint64_t bytes, MPI_Comm comm) {
  reason_ = reason;
  bytes_ = bytes;
  comm_ = comm;
  if (key_ != nullptr) remember_native(call_, *key_, reason, bytes);
  if (on_) fallback_policy(call_, reason, bytes);
}

void CallScope::offloaded(uint64_t bytes, MPI_Comm comm) {
  reason_ = Reason::Offloaded;
  bytes_ = bytes;
  comm_ = comm;
}

namespace {
const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "single";
    case MPI_THREAD_FUNNELED: return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_MULTIPLE: return "multiple";
    default: return "unknown";
  }
}
}  // namespace

void stats_print() {
  State& st = state();
  constexpr size_t kCells = kNumCalls * kNumReasons * 3;
  std::vector<uint64_t> local(kCells), total(kCells);
  for (size_t c = 0; c < kNumCalls; ++c)
    for (size_t r = 0; r < kNumReasons; ++r) {
      const size_t i = (c * kNumReasons + r) * 3;
      local[i] = g_counters[c][r].calls.load();
      local[i + 1] = g_counters[c][r].bytes.load();
      local[i + 2] = g_counters[c][r].ns.load();
    }
  // One table for the job: counters summed over ranks on rank 0.
  if (st.private_comm != MPI_COMM_NULL)
    PMPI_Reduce(local.data(), total.data(), static_cast<int>(kCells), MPI_UINT64_T, MPI_SUM, 0, st.private_comm);
  else
    total = local;
  if (st.world_rank != 0) return;
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "[accl-pmpi] ACCL_STATS (summed over %d ranks; device %s; MPI thread level %s, layer lock %s, "
                "progress thread %s)\n"
                "%-26s %10s %10s %10s %14s %14s %11s %11s  %s\n",
                st.world_size, st.active ? st.s.device.c_str() : "none", thread_level_name(st.thread_level),
                st.mu.needed() ? "on" : "off", progress_thread_started() ? "on" : "off", "call", "calls", "offloaded", "native",
                "bytes offload", "bytes native", "ms offload", "ms native", "native by reason");
  out += line;
  for (size_t c = 0; c < kNumCalls; ++c) {
    uint64_t calls = 0, off = 0, boff = 0, bnat = 0, toff = 0, tnat = 0;
    std::string reasons;
    for (size_t r = 0; r < kNumReasons; ++r) {
      const size_t i = (c * kNumReasons + r) * 3;
      if (total[i] == 0) continue;
      calls += total[i];
      if (r == static_cast<size_t>(Reason::Offloaded)) {
        off += total[i];
        boff += total[i + 1];
        toff += total[i + 2];
      } else {
        bnat += total[i + 1];
        tnat += total[i + 2];
        std::snprintf(line, sizeof line, "%s%s: %" PRIu64, reasons.empty() ? "" : "; ",
                      reason_text(static_cast<Reason>(r)), total[i]);
        reasons += line;
      }
    }
    if (calls == 0) continue;
    std::snprintf(line, sizeof line, "%-26s %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %14" PRIu64 " %14" PRIu64
                  " %11.3f %11.3f  %s\n",
                  call_name(static_cast<Call>(c)), calls, off, calls - off, boff, bnat,
                  static_cast<double>(toff) / 1e6, static_cast<double>(tnat) / 1e6, reasons.c_str());
    out += line;
  }
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace accl::pmpi

// --- public query API (pmpi/include/accl_pmpi.h) -----------------------------

ACCL_PMPI_EXPORT int accl_pmpi_active(void) { return accl::pmpi::state().active ? 1 : 0; }

ACCL_PMPI_EXPORT int accl_pmpi_call_counts(const char* mpi_name, unsigned long long* offloaded,
                                           unsigned long long* native) {
  using namespace accl::pmpi;
  for (size_t c = 0; c < kNumCalls; ++c) {
    if (std::strcmp(call_name(static_cast<Call>(c)), mpi_name) != 0) continue;
    unsigned long long off = 0, nat = 0;
    for (size_t r = 0; r < kNumReasons; ++r) {
      const uint64_t n = g_counters[c][r].calls.load();
      if (r == static_cast<size_t>(Reason::Offloaded)) off += n;
      else nat += n;
    }
    if (offloaded) *offloaded = off;
    if (native) *native = nat;
    return 0;
  }
  return -1;
}
