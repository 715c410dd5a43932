// SPDX-License-Identifier: Apache-2.0
//
// What the arrival table holds, for the log: when it fills up, and when a
// call expires waiting. A full table hides the message a call needs behind
// messages nobody takes yet; the summary says whose they are (context,
// source, kind, collective numbers or tags), so the log of a hang names it.
#include "firmware.hpp"

namespace accl::fw::impl {
namespace {

const char* kind_name(const ArrivalSlot& s) {
  if (s.seq == SeqState::error) return "sequence-error";
  const Arrival& a = s.a;
  if (a.kind == ArrivalKind::rendezvous_done) return "rendezvous-done";
  if (a.kind == ArrivalKind::link_error) return "link-error";
  const abi::WireHeader& h = a.header;
  switch (h.msg_type) {
    case abi::kMsgEager:
      return (h.flags & abi::kHdrContinuation) != 0 ? "eager-continuation" : "eager";
    case abi::kMsgRendezvousRequest:
      return "request-to-send";
    case abi::kMsgRendezvousAddr:
      switch (h.reserved[kHdrWordKind]) {
        case kPreGrantMarker:
        case kPreGrantAwaitReady:
          return "pre-grant";
        case kReadyNotice:
          return "ready-notice";
        case kAbortNotice:
          return "abort-notice";
        default:
          return "grant";
      }
    default:
      return "other";
  }
}

struct Group {
  uint32_t ctx, src, count, lo, hi;
  const char* kind;
  bool unchecked;
};

}  // namespace

void log_arrival_table(Fw& fw, int level) {
  if (!fw.dp.log_enabled(level)) return;
  // Per (ctx, source, kind): how many, and which collective numbers
  // (collective ctx) or device tags (point-to-point ctx) they carry.
  constexpr uint32_t kGroups = 16;
  Group groups[kGroups] = {};
  uint32_t ngroups = 0, ungrouped = 0;
  for (uint32_t i = 0; i < fw.st.arrival_hwm; ++i) {
    const ArrivalSlot& s = fw.st.arrivals[i];
    if (!s.used) continue;
    const abi::WireHeader& h = s.a.header;
    const char* kind = kind_name(s);
    const bool unchecked = s.seq == SeqState::unchecked;
    const uint32_t key = (h.ctx & 1u) != 0 ? h.reserved[kHdrWordCollective] : h.tag;
    uint32_t g = 0;
    while (g < ngroups && (groups[g].ctx != h.ctx || groups[g].src != h.src || groups[g].kind != kind ||
                           groups[g].unchecked != unchecked)) {
      ++g;
    }
    if (g == ngroups) {
      if (ngroups == kGroups) {
        ++ungrouped;
        continue;
      }
      groups[g] = Group{h.ctx, h.src, 0, key, key, kind, unchecked};
      ++ngroups;
    }
    ++groups[g].count;
    groups[g].lo = min_of(groups[g].lo, key);
    groups[g].hi = max_of(groups[g].hi, key);
  }
  log_line(fw, level, LogLine().str("arrival table holds ").dec(fw.st.narrivals).str(" arrivals:"));
  for (uint32_t g = 0; g < ngroups; ++g) {
    const Group& x = groups[g];
    LogLine line;
    line.str("  ").dec(x.count).str(" ").str(x.kind).str(x.unchecked ? " (unchecked)" : "").str(" from ")
        .dec(x.src).str(" ctx ").hex(x.ctx).str((x.ctx & 1u) != 0 ? " collectives " : " tags ").dec(x.lo)
        .str("..").dec(x.hi);
    log_line(fw, level, line);
  }
  if (ungrouped != 0) log_line(fw, level, LogLine().str("  ").dec(ungrouped).str(" more in other groups"));
}

void log_waits_of_expired_call(Fw& fw, const CallSlot& call) {
  if (!fw.dp.log_enabled(kLogWarn)) return;
  for (uint32_t i = 0; i < call.nops; ++i) {
    const PeerOp& op = call.ops[i];
    if (op.kind != OpKind::send && op.kind != OpKind::recv) continue;
    if (op.state == OpState::done) continue;
    LogLine line;
    line.str("call ").dec(call.id).str(op.kind == OpKind::send ? " send to " : " receive from ").dec(op.peer)
        .str(" ctx ").hex(op.ctx).str(" collective ").dec(call.collective_number).str(" state ")
        .dec(static_cast<uint32_t>(op.state)).str(" waits; arrival table holds ").dec(fw.st.narrivals);
    log_line(fw, kLogWarn, line);
  }
  log_arrival_table(fw, kLogWarn);
}

}  // namespace accl::fw::impl
