// SPDX-License-Identifier: Apache-2.0
//
// The arrival table: everything the data plane delivered that a call has not
// consumed yet, kept with its arrival order so receives match the *oldest*
// eligible message (MPI non-overtaking order per source).
//
// Sequence numbers are checked once per message that carries one (see
// carries_seqn()), in arrival order, as soon as the message's communicator is
// known: at ingest, or when the first call naming that communicator registers
// its context id.
#include "firmware.hpp"

namespace accl::fw::impl {
namespace {

bool is_matched_message(const Arrival& a) {
  return a.kind == ArrivalKind::message && a.header.strm == 0 &&
         (a.header.msg_type == abi::kMsgEager || a.header.msg_type == abi::kMsgRendezvousRequest);
}

bool is_address_message(const Arrival& a) {
  return a.kind == ArrivalKind::message && a.header.msg_type == abi::kMsgRendezvousAddr;
}

bool is_pregrant(const Arrival& a) {
  const uint32_t kind = a.header.reserved[kHdrWordKind];
  return is_address_message(a) && (kind == kPreGrantMarker || kind == kPreGrantAwaitReady);
}

bool is_abort_notice(const Arrival& a) {
  return is_address_message(a) && a.header.reserved[kHdrWordKind] == kAbortNotice;
}

// Every message a peer's firmware sends to us for matching or for a
// rendezvous transfer takes a sequence number: eager segments, RTS, address
// messages (grants, pre-grants, ready and abort notices) and rendezvous data
// (whose header comes back in the rendezvous_done arrival, also when the data
// plane discarded the payload). So a duplicated or lost one is a sequence
// error, never a grant or a piece used twice.
bool carries_seqn(const Arrival& a) {
  return is_matched_message(a) || is_address_message(a) || a.kind == ArrivalKind::rendezvous_done;
}

}  // namespace

CommEntry* comm_by_context(Fw& fw, uint32_t context_id) {
  for (auto& c : fw.st.comms) {
    if (c.used && c.context_id == context_id) return &c;
  }
  return nullptr;
}

namespace {

void remove_slot(Fw& fw, uint32_t index) {
  ControlProgramState& st = fw.st;
  st.arrivals[index].used = false;
  if (st.arrivals[index].seq == SeqState::unchecked && st.unchecked_arrivals > 0) st.unchecked_arrivals--;
  st.narrivals--;
  while (st.arrival_hwm > 0 && !st.arrivals[st.arrival_hwm - 1].used) st.arrival_hwm--;
  st.work_counter++;
}

// Checks one matched message against the expected inbound sequence number of
// (communicator, source) and advances it. On a gap or repeat the calls
// waiting on that peer fail; if none waits, the arrival stays as an error
// marker that fails the next receive from that source.
void check_sequence(Fw& fw, uint32_t index, const CommEntry& comm) {
  ArrivalSlot& slot = fw.st.arrivals[index];
  if (slot.seq == SeqState::unchecked && fw.st.unchecked_arrivals > 0) fw.st.unchecked_arrivals--;
  slot.comm = comm.offset;
  const abi::WireHeader& h = slot.a.header;
  if (h.src >= comm.size) {
    slot.seq = SeqState::error;
    slot.error = abi::kPackSeqNumberError;
    return;
  }
  const uint32_t word = rank_field_offset(comm.offset, h.src, abi::kRankInboundSeq);
  const uint32_t expected = fw.dp.xmem_read(word);
  if (h.seqn == expected) {
    fw.dp.xmem_write(word, expected + 1);
    slot.seq = SeqState::ok;
    // A message of the running collective with another argument signature
    // fails it, whether or not an op of it receives from that peer.
    if ((h.ctx & 1u) != 0 && (is_matched_message(slot.a) || is_pregrant(slot.a))) {
      check_collective_arrival(fw, slot.a);
    }
    if (is_abort_notice(slot.a)) {
      // Kept until the collective it names starts here (or dropped at once
      // when it ran already); see take_abort_notice().
      if (apply_abort_notice(fw, slot.a)) consume_arrival(fw, index);
    } else if (!is_matched_message(slot.a) && !is_pregrant(slot.a) && !arrival_awaited(fw, slot.a)) {
      // A grant, ready notice or completion nobody waits for any more
      // belongs to a call that ended early: its sequence number counted, now
      // drop it.
      consume_arrival(fw, index);
    }
    return;
  }
  // A gap (lost message) resynchronises on the message that arrived, so one
  // loss fails the waiting calls once instead of every later message.
  if (h.seqn > expected) fw.dp.xmem_write(word, h.seqn + 1);
  slot.seq = SeqState::error;
  slot.error = abi::kPackSeqNumberError;
  if (fw.dp.log_enabled(kLogWarn)) {
    LogLine line;
    line.str("sequence error from rank ").dec(h.src).str(" comm ").hex(comm.offset).str(": got ").dec(h.seqn)
        .str(" expected ").dec(expected);
    log_line(fw, kLogWarn, line);
  }
  if (fail_ops_waiting_on(fw, comm.offset, h.src, slot.error) > 0) consume_arrival(fw, index);
}

uint32_t allocate_slot(Fw& fw) {
  ControlProgramState& st = fw.st;
  for (uint32_t i = 0; i < kMaxArrivals; ++i) {
    if (!st.arrivals[i].used) {
      if (i + 1 > st.arrival_hwm) st.arrival_hwm = i + 1;
      st.narrivals++;
      return i;
    }
  }
  return kNoIndex;
}

void release_if_payload(Fw& fw, const Arrival& a) {
  if (a.kind == ArrivalKind::message && a.header.msg_type == abi::kMsgEager) fw.dp.release_payload(a);
}

void record_link_failure(Fw& fw, const Arrival& a) {
  const uint32_t bits = a.status | abi::kLinkError;
  FailedLink* slot = nullptr;
  for (auto& l : fw.st.failed_links) {
    if (l.used && l.ip == a.peer_ip && l.port == a.peer_port) slot = &l;
  }
  for (uint32_t i = 0; slot == nullptr && i < kMaxFailedLinks; ++i) {
    if (!fw.st.failed_links[i].used) slot = &fw.st.failed_links[i];
  }
  if (slot == nullptr) slot = &fw.st.failed_links[a.peer_port % kMaxFailedLinks];  // table full: reuse one
  if (!slot->used) ++fw.st.failed_link_count;
  slot->used = true;
  slot->ip = a.peer_ip;
  slot->port = a.peer_port;
  slot->status = bits;
  for (auto& c : fw.st.comms) {
    if (!c.used || c.link_failure_unreported) continue;
    for (uint32_t r = 0; r < c.size; ++r) {
      if (rank_field(fw, c.offset, r, abi::kRankIp) == a.peer_ip &&
          rank_field(fw, c.offset, r, abi::kRankPort) == a.peer_port) {
        c.link_failure_unreported = true;
        break;
      }
    }
  }
  if (fw.dp.log_enabled(kLogWarn)) {
    LogLine line;
    line.str("link error to ").hex(a.peer_ip).str(":").dec(a.peer_port).str(" status ").hex(bits);
    log_line(fw, kLogWarn, line);
  }
  fail_ops_waiting_on_link(fw, a.peer_ip, a.peer_port, bits);
}

}  // namespace

void ingest_arrival(Fw& fw, const Arrival& arrival) {
  fw.st.work_counter++;
  if (arrival.kind == ArrivalKind::link_error) {
    record_link_failure(fw, arrival);
    return;
  }
  // Traffic over a link proves it works again (e.g. after a reconnect).
  forget_link_failure(fw, arrival.peer_ip, arrival.peer_port);

  const abi::WireHeader& h = arrival.header;
  if (!carries_seqn(arrival)) {
    // Stream traffic is consumed by the data plane; an arrival of that kind
    // has no receiver here.
    release_if_payload(fw, arrival);
    return;
  }

  const uint32_t index = allocate_slot(fw);
  if (index == kNoIndex) {  // the caller checks arrivals_full(); never drop silently
    release_if_payload(fw, arrival);
    log_line(fw, kLogError, LogLine().str("arrival table overflow; message dropped"));
    return;
  }
  ArrivalSlot& slot = fw.st.arrivals[index];
  slot.used = true;
  slot.error = 0;
  slot.comm = 0;
  slot.order = fw.st.next_arrival_order++;
  slot.a = arrival;
  slot.seq = SeqState::unchecked;
  fw.st.unchecked_arrivals++;
  if (const CommEntry* comm = comm_by_context(fw, h.ctx >> 1)) check_sequence(fw, index, *comm);
}

bool fetch_arrival_for(Fw& fw, uint32_t context_id, uint32_t src) {
  ControlProgramState& st = fw.st;
  if (st.narrivals >= kMaxArrivals) {
    if (!st.reserve_full_reported) {
      st.reserve_full_reported = true;
      log_line(fw, kLogWarn,
               LogLine().str("arrival table full, also its reserve for waiting calls (").dec(kMaxArrivals)
                   .str(" unmatched arrivals): waiting calls end at their deadline unless receives free slots"));
      log_arrival_table(fw, kLogWarn);
    }
    return false;
  }
  st.reserve_full_reported = false;
  if (!fw.dp.pop_arrival_for(context_id, src, st.incoming)) return false;
  ingest_arrival(fw, st.incoming);
  return true;
}

void register_comm(Fw& fw, uint32_t offset, uint32_t context_id, uint32_t size) {
  CommEntry* entry = comm_by_context(fw, context_id);
  if (entry == nullptr) {
    // A communicator record reused at the same offset gets a new context id.
    for (auto& c : fw.st.comms) {
      if (c.used && c.offset == offset) entry = &c;
    }
  }
  for (uint32_t i = 0; entry == nullptr && i < kMaxComms; ++i) {
    if (!fw.st.comms[i].used) entry = &fw.st.comms[i];
  }
  if (entry == nullptr) entry = &fw.st.comms[context_id % kMaxComms];  // full: evict one
  if (!entry->used || entry->context_id != context_id) {
    entry->collectives_started = 0;
    // A failure recorded before the communicator's first call is news to it too.
    entry->link_failure_unreported = peer_link_status(fw, offset, size, abi::kRankAny) != 0;
    entry->last_succeeded = false;
    entry->earlier_mismatch = false;
  }
  entry->used = true;
  entry->offset = offset;
  entry->context_id = context_id;
  entry->size = size;

  // Check the waiting arrivals of this context in arrival order.
  while (fw.st.unchecked_arrivals > 0) {
    uint32_t oldest = kNoIndex;
    for (uint32_t i = 0; i < fw.st.arrival_hwm; ++i) {
      const ArrivalSlot& s = fw.st.arrivals[i];
      if (!s.used || s.seq != SeqState::unchecked || (s.a.header.ctx >> 1) != context_id) continue;
      if (oldest == kNoIndex || s.order < fw.st.arrivals[oldest].order) oldest = i;
    }
    if (oldest == kNoIndex) break;
    check_sequence(fw, oldest, *entry);
  }
}

uint32_t start_collective_number(Fw& fw, uint32_t context_id) {
  CommEntry* comm = comm_by_context(fw, context_id);
  return comm == nullptr ? 0 : comm->collectives_started++;
}

uint32_t find_message(Fw& fw, uint32_t ctx, uint32_t comm, uint32_t src, uint32_t tag, uint32_t collective_number) {
  const bool collective = (ctx & 1u) != 0;
  uint32_t best = kNoIndex;
  for (uint32_t i = 0; i < fw.st.arrival_hwm; ++i) {
    const ArrivalSlot& s = fw.st.arrivals[i];
    if (!s.used || s.seq == SeqState::unchecked) continue;
    const abi::WireHeader& h = s.a.header;
    const bool src_ok = src == abi::kRankAny || h.src == src;
    if (!src_ok) continue;
    if (collective && s.seq == SeqState::ok && is_matched_message(s.a) && h.ctx == ctx &&
        h.reserved[kHdrWordCollective] != collective_number) {
      // Sent for a collective that ended here without receiving it (e.g. the
      // ranks disagreed on its root): never let a later collective take it.
      if (static_cast<int32_t>(collective_number - h.reserved[kHdrWordCollective]) > 0) consume_arrival(fw, i);
      continue;
    }
    bool candidate = false;
    if (s.seq == SeqState::error) {
      candidate = s.comm == comm;
    } else if (s.a.kind == ArrivalKind::message && h.ctx == ctx) {
      const bool first = (h.msg_type == abi::kMsgEager && (h.flags & abi::kHdrContinuation) == 0) ||
                         h.msg_type == abi::kMsgRendezvousRequest;
      const bool tag_ok = tag == abi::kTagAny || h.tag == tag || h.tag == abi::kTagAny;
      candidate = first && tag_ok;
    }
    if (candidate && (best == kNoIndex || s.order < fw.st.arrivals[best].order)) best = i;
  }
  return best;
}

uint32_t find_continuation(Fw& fw, uint32_t ctx, uint32_t src, uint32_t seqn) {
  for (uint32_t i = 0; i < fw.st.arrival_hwm; ++i) {
    const ArrivalSlot& s = fw.st.arrivals[i];
    if (!s.used || s.seq != SeqState::ok || s.a.kind != ArrivalKind::message) continue;
    const abi::WireHeader& h = s.a.header;
    if (h.msg_type == abi::kMsgEager && (h.flags & abi::kHdrContinuation) != 0 && h.ctx == ctx && h.src == src &&
        h.seqn == seqn) {
      return i;
    }
  }
  return kNoIndex;
}

uint32_t find_grant(Fw& fw, uint32_t ctx, uint32_t src, uint32_t rid) {
  uint32_t best = kNoIndex;
  for (uint32_t i = 0; i < fw.st.arrival_hwm; ++i) {
    const ArrivalSlot& s = fw.st.arrivals[i];
    if (!s.used || s.seq != SeqState::ok || !is_address_message(s.a)) continue;
    const abi::WireHeader& h = s.a.header;
    if (h.reserved[kHdrWordKind] != 0 || h.ctx != ctx || h.src != src || h.rid != rid) continue;
    if (best == kNoIndex || s.order < fw.st.arrivals[best].order) best = i;
  }
  return best;
}

uint32_t find_pregrant(Fw& fw, uint32_t ctx, uint32_t src, uint32_t collective_number) {
  uint32_t best = kNoIndex;
  for (uint32_t i = 0; i < fw.st.arrival_hwm; ++i) {
    const ArrivalSlot& s = fw.st.arrivals[i];
    if (!s.used || s.seq != SeqState::ok || !is_pregrant(s.a)) continue;
    const abi::WireHeader& h = s.a.header;
    if (h.ctx != ctx || h.src != src) continue;
    if (h.reserved[kHdrWordCollective] != collective_number) {
      // Collectives on a communicator run one at a time in the same order on
      // every rank: a pre-grant of an earlier collective belongs to a call
      // that has ended here (it failed or timed out before using it) and
      // would otherwise hand this call's data to a window of that old call.
      // One of a later collective waits for its call.
      if (static_cast<int32_t>(collective_number - h.reserved[kHdrWordCollective]) > 0) consume_arrival(fw, i);
      continue;
    }
    if (best == kNoIndex || s.order < fw.st.arrivals[best].order) best = i;
  }
  return best;
}

bool arrived_with_other_signature(Fw& fw, uint32_t ctx, uint32_t collective_number, uint32_t signature) {
  for (uint32_t i = 0; i < fw.st.arrival_hwm; ++i) {
    const ArrivalSlot& s = fw.st.arrivals[i];
    if (!s.used || s.seq != SeqState::ok || !(is_matched_message(s.a) || is_pregrant(s.a))) continue;
    const abi::WireHeader& h = s.a.header;
    if (h.ctx == ctx && h.reserved[kHdrWordCollective] == collective_number &&
        h.reserved[kHdrWordSignature] != signature) {
      return true;
    }
  }
  return false;
}

bool take_abort_notice(Fw& fw, uint32_t ctx, uint32_t collective_number) {
  bool found = false;
  for (uint32_t i = 0; i < fw.st.arrival_hwm; ++i) {
    const ArrivalSlot& s = fw.st.arrivals[i];
    if (!s.used || s.seq != SeqState::ok || !is_abort_notice(s.a) || s.a.header.ctx != ctx) continue;
    const uint32_t number = s.a.header.reserved[kHdrWordCollective];
    if (number == collective_number) found = true;
    // Notices of this or earlier collectives are used up now.
    if (static_cast<int32_t>(collective_number - number) >= 0) consume_arrival(fw, i);
  }
  return found;
}

uint32_t find_ready(Fw& fw, uint32_t ctx, uint32_t src, uint32_t rid) {
  for (uint32_t i = 0; i < fw.st.arrival_hwm; ++i) {
    const ArrivalSlot& s = fw.st.arrivals[i];
    if (!s.used || s.seq != SeqState::ok || !is_address_message(s.a)) continue;
    const abi::WireHeader& h = s.a.header;
    if (h.reserved[kHdrWordKind] == kReadyNotice && h.ctx == ctx && h.src == src && h.rid == rid) return i;
  }
  return kNoIndex;
}

uint32_t find_done(Fw& fw, const PeerOp& op) {
  for (uint32_t i = 0; i < fw.st.arrival_hwm; ++i) {
    const ArrivalSlot& s = fw.st.arrivals[i];
    if (!s.used || s.seq != SeqState::ok || s.a.kind != ArrivalKind::rendezvous_done) continue;
    const abi::WireHeader& h = s.a.header;
    if (h.rid != op.rid || h.ctx != op.ctx) continue;
    // The data plane reports the data message's header; the link identifies
    // the writer as well, in case its header carries no source rank.
    const bool same_link = s.a.peer_ip == op.window.peer_ip && s.a.peer_port == op.window.peer_port;
    if (h.src == op.src || same_link) return i;
  }
  return kNoIndex;
}

void consume_arrival(Fw& fw, uint32_t index) {
  const ArrivalSlot& slot = fw.st.arrivals[index];
  if (!slot.used) return;
  release_if_payload(fw, slot.a);
  remove_slot(fw, index);
}

uint32_t failed_link_status(Fw& fw, uint32_t comm, uint32_t comm_size, uint32_t peer) {
  const uint32_t first = peer == abi::kRankAny ? 0 : peer;
  const uint32_t last = peer == abi::kRankAny ? comm_size : peer + 1;
  for (uint32_t r = first; r < last; ++r) {
    const uint32_t ip = rank_field(fw, comm, r, abi::kRankIp);
    const uint32_t port = rank_field(fw, comm, r, abi::kRankPort);
    for (const auto& l : fw.st.failed_links) {
      if (l.used && l.ip == ip && l.port == port) return l.status;
    }
  }
  return 0;
}

uint32_t any_source_link_status(Fw& fw, uint32_t comm, uint32_t comm_size, uint32_t local_rank, uint32_t context_id) {
  if (fw.st.failed_link_count == 0) return 0;
  CommEntry* entry = comm_by_context(fw, context_id);
  if (entry != nullptr && entry->link_failure_unreported) {
    const uint32_t bits = failed_link_status(fw, comm, comm_size, abi::kRankAny);
    entry->link_failure_unreported = false;
    if (bits != 0) return bits;  // else the link came back meanwhile
  }
  uint32_t bits = 0;
  for (uint32_t r = 0; r < comm_size; ++r) {
    if (r == local_rank) continue;
    const uint32_t b = failed_link_status(fw, comm, comm_size, r);
    if (b == 0) return 0;  // someone can still send
    bits |= b;
  }
  return bits;
}

void link_failure_reported(Fw& fw, uint32_t context_id) {
  if (CommEntry* entry = comm_by_context(fw, context_id)) entry->link_failure_unreported = false;
}

void forget_failed_link(Fw& fw, uint32_t ip, uint32_t port) {
  for (auto& l : fw.st.failed_links) {
    if (l.used && l.ip == ip && l.port == port) {
      l.used = false;
      --fw.st.failed_link_count;
    }
  }
}

}  // namespace accl::fw::impl
