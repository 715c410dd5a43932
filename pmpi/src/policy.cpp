// SPDX-License-Identifier: Apache-2.0
//
// Names of calls and reasons, and the part of the offload decision that only
// depends on settings: call list and byte thresholds. Everything here is a
// pure function of (call, bytes) and settings, so it is rank-uniform as long
// as bytes is (every caller passes a byte count all ranks agree on).
#include "state.hpp"

namespace accl::pmpi {

namespace {
struct CallRow {
  const char* mpi;
  const char* setting;
  Group group;
};
constexpr CallRow kCalls[] = {
#define CALL(e, mpi, setting, group) {mpi, setting, Group::group},
#include "calls.def"
#undef CALL
};
struct ReasonRow {
  const char* text;
  bool benign;
};
constexpr ReasonRow kReasons[] = {
#define REASON(e, text, benign) {text, benign},
#include "reasons.def"
#undef REASON
};
}  // namespace

const char* call_name(Call c) { return kCalls[static_cast<size_t>(c)].mpi; }
const char* call_setting(Call c) { return kCalls[static_cast<size_t>(c)].setting; }
Group call_group(Call c) { return kCalls[static_cast<size_t>(c)].group; }
const char* reason_text(Reason r) { return kReasons[static_cast<size_t>(r)].text; }
bool reason_benign(Reason r) { return kReasons[static_cast<size_t>(r)].benign; }

Reason policy_call(Call call, uint64_t ranks, uint64_t bytes) {
  const Settings& s = state().s;
  const size_t i = static_cast<size_t>(call);
  if (!s.enabled[i]) return Reason::Excluded;
  if (s.policy == tuning::Policy::native) return Reason::Policy;
  // The user's explicit thresholds for this call outrank the measured table.
  if (s.policy == tuning::Policy::automatic && !s.thresholds_set[i])
    return s.table.offloads(i, ranks, bytes) ? Reason::Offloaded : Reason::Policy;
  if (bytes < s.min_bytes[i]) return Reason::BelowMin;
  if (s.max_bytes[i] != 0 && bytes > s.max_bytes[i]) return Reason::AboveMax;
  return Reason::Offloaded;
}

Reason policy_unsized(Call call, uint64_t ranks) {
  const Settings& s = state().s;
  const size_t i = static_cast<size_t>(call);
  if (!s.enabled[i]) return Reason::Excluded;
  if (s.policy == tuning::Policy::native) return Reason::Policy;
  if (s.policy == tuning::Policy::automatic && !s.thresholds_set[i])
    return s.table.offloads_every_size(i, ranks) ? Reason::Offloaded : Reason::Policy;
  return Reason::Offloaded;
}

bool policy_p2p(uint64_t ranks) {
  const Settings& s = state().s;
  switch (s.policy) {
    case tuning::Policy::offload: return true;
    case tuning::Policy::native: return false;
    case tuning::Policy::automatic: break;
  }
  return s.table.offloads(static_cast<size_t>(Call::Send), ranks, 0) &&
         s.table.offloads(static_cast<size_t>(Call::Recv), ranks, 0);
}

bool policy_never_offloads(Call call) {
  const Settings& s = state().s;
  const size_t i = static_cast<size_t>(call);
  if (!s.enabled[i] || s.policy == tuning::Policy::native) return true;
  if (s.policy == tuning::Policy::automatic && !s.thresholds_set[i]) return !s.table.may_offload(i);
  return false;
}

Reason inactive_reason() {
  const Settings& s = state().s;
  if (!s.offload) return Reason::Disabled;
  return s.policy == tuning::Policy::native ? Reason::Policy : Reason::NoDevice;
}

uint64_t policy_digest() {
  const Settings& s = state().s;
  uint64_t h = s.policy == tuning::Policy::automatic ? s.table.digest() : 0;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(static_cast<uint64_t>(s.policy));
  for (size_t c = 0; c < kNumCalls; ++c) {
    mix(s.enabled[c]);
    mix(s.thresholds_set[c]);
    mix(s.min_bytes[c]);
    mix(s.max_bytes[c]);
  }
  return h;
}

}  // namespace accl::pmpi
