// SPDX-License-Identifier: Apache-2.0
//
// Remembered native decisions (decision_memo.cpp). Deciding whether a call
// is offloaded costs a few hundred instructions (communicator and datatype
// lookups, the tuning table, the buffer checks), which is as much as a small
// native call itself: kept native by the tuning table, such a call would be
// 10-40 % slower than without the layer. The decision is a function of the
// call's arguments and of state that changes only when a communicator or
// datatype is freed, so each call remembers its last native decisions by
// their arguments and runs a repeat straight natively.
//
// Only decisions that every rank reaches alike are remembered (reasons of
// settings, policy, communicator, datatype, op; never a refused buffer or an
// invalid argument), only on communicators and datatypes whose free the
// layer sees (predefined, or carrying the layer's attribute, whose delete
// callback runs whatever language frees them), and offloaded calls never:
// a remembered call is exactly the call the full decision would have sent
// native, with the same accounting (ACCL_STATS, ACCL_TRACE, ACCL_FALLBACK).
#pragma once

#include "calls.hpp"
#include "state.hpp"
#include "stats.hpp"

#include <accl/seqlock_memo.hpp>

#include <atomic>
#include <cstdint>

namespace accl::pmpi {

// The arguments a call's decision depends on: communicator, up to two
// datatypes, the two buffers (their checks depend on the addresses), and two
// words of counts, root and op (two_ints). Unused words are 0.
struct DecisionKey {
  static constexpr size_t kWords = 7;
  std::array<uint64_t, kWords> w{};
};

inline uint64_t handle_word(const void* p) { return reinterpret_cast<uintptr_t>(p); }
inline uint64_t two_ints(int low, int high) {
  return static_cast<uint32_t>(low) | static_cast<uint64_t>(static_cast<uint32_t>(high)) << 32;
}
inline DecisionKey decision_key(MPI_Comm comm, MPI_Datatype send_type, MPI_Datatype recv_type, const void* send_buf,
                                const void* recv_buf, uint64_t a, uint64_t b) {
  return {{handle_word(comm), handle_word(send_type), handle_word(recv_type), handle_word(send_buf),
           handle_word(recv_buf), a, b}};
}

// A remembered native decision; reason Offloaded: none.
struct Remembered {
  Reason reason = Reason::Offloaded;
  uint64_t bytes = 0;
  explicit operator bool() const { return reason != Reason::Offloaded; }
};

namespace detail {
using DecisionMemo = accl::SeqlockMemo<DecisionKey::kWords>;
extern ACCL_PMPI_LOCAL std::array<DecisionMemo, kNumCalls> g_decision_memos;
extern ACCL_PMPI_LOCAL std::atomic<uint64_t> g_decision_epoch;
}  // namespace detail

// The native decision remembered for exactly these arguments of `call`.
inline Remembered remembered(Call call, const DecisionKey& key) {
  const uint64_t v = detail::g_decision_memos[static_cast<size_t>(call)].find(
      key.w, detail::g_decision_epoch.load(std::memory_order_acquire));
  return {static_cast<Reason>(v & 0xffu), v >> 8};
}

// Called with every native decision (CallScope::native): remembers it when
// every rank would decide it alike and the handles in `key` are tracked.
void remember_native(Call call, const DecisionKey& key, Reason why, uint64_t bytes);

// Forgets every remembered decision: a communicator or datatype was freed
// (its handle may come back for another), or the layer went down.
void forget_decisions();

// Runs a remembered call natively, accounted as the full decision would.
template <typename Native>
int run_remembered(Call call, const Remembered& r, MPI_Comm comm, Native&& native) {
  if (ACCL_LIKELY(!state().observe)) return native();
  CallScope scope(call);
  scope.native(r.reason, r.bytes, comm);
  return native();
}

}  // namespace accl::pmpi
