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

Reason policy_call(Call call, uint64_t bytes) {
  const Settings& s = state().s;
  const size_t i = static_cast<size_t>(call);
  if (!s.enabled[i]) return Reason::Excluded;
  if (bytes < s.min_bytes[i]) return Reason::BelowMin;
  if (s.max_bytes[i] != 0 && bytes > s.max_bytes[i]) return Reason::AboveMax;
  return Reason::Offloaded;
}

}  // namespace accl::pmpi
