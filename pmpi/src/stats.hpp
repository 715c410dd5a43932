// SPDX-License-Identifier: Apache-2.0
//
// Accounting of intercepted calls (stats.cpp): stats, trace and the
// ACCL_FALLBACK policy.
#pragma once

#include "calls.hpp"

#include <chrono>

namespace accl::pmpi {

struct DecisionKey;

void stats_record(Call call, Reason reason, uint64_t bytes, uint64_t ns);
void stats_print();
void trace_line(Call call, Reason reason, uint64_t bytes, MPI_Comm comm, uint64_t ns);
// Applies ACCL_FALLBACK for a non-benign reason (warn line, or abort).
void fallback_policy(Call call, Reason reason, uint64_t bytes);

// Accounting for one intercepted call on the slow path: stats, trace and the
// ACCL_FALLBACK policy. Costs nothing beyond a flag test unless
// State::observe is set.
class CallScope {
 public:
  // account = false: part of another call (the halves of MPI_Sendrecv).
  explicit CallScope(Call call, bool account = true);
  // A native decision of this call is remembered under `key`, the call's
  // arguments (decision_memo.hpp); `key` outlives the scope.
  void remember_under(const DecisionKey& key) { key_ = &key; }
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
  // The call runs natively for `reason` (warns or aborts per ACCL_FALLBACK).
  void native(Reason reason, uint64_t bytes, MPI_Comm comm);
  void offloaded(uint64_t bytes, MPI_Comm comm);

 private:
  Call call_;
  bool on_;
  Reason reason_ = Reason::Offloaded;
  uint64_t bytes_ = 0;
  MPI_Comm comm_ = MPI_COMM_NULL;
  const DecisionKey* key_ = nullptr;
  std::chrono::steady_clock::time_point start_;
};

// Accounts an offload decision; false: the caller runs the native call.
inline bool offload(CallScope& scope, Reason why, uint64_t bytes, MPI_Comm comm) {
  if (why != Reason::Offloaded) {
    scope.native(why, bytes, comm);
    return false;
  }
  scope.offloaded(bytes, comm);
  return true;
}

}  // namespace accl::pmpi
