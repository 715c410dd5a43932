// SPDX-License-Identifier: Apache-2.0
//
// Internal interfaces between the parts of the control program:
//   control_program.cpp  main loop, config calls, call decode and validation
//   arrivals.cpp         arrival table, sequence checks, matching, link errors
//   peer_ops.cpp         resumable send / receive / local-move primitives (peer_send.cpp,
//                        peer_recv.cpp: the two sides; peer_wire.hpp: what they share)
//   collective_mismatch.cpp  ranks that called a collective with different arguments
//   p2p.cpp              copy, combine, send, recv
//   collectives/         round engine, algorithm selection, one file per algorithm
#pragma once

#include <accl/abi.hpp>
#include <accl_fw/dataplane.hpp>

#include "state.hpp"
#include "util.hpp"

namespace accl::fw::impl {

// Everything a part of the firmware needs: the data plane and the state.
struct Fw {
  DataPlane& dp;
  ControlProgramState& st;
  // Whether debug lines are logged: asked of the data plane at most once per
  // pass (a small call's start and finish lines fall in the same pass);
  // -1 = not asked yet. See debug_log_enabled().
  int8_t debug_log = -1;
};

// Result of advancing a call once.
enum class StepResult : uint8_t { not_ready, finished };

// ---------------------------------------------------------------------------
// exchange memory helpers
// ---------------------------------------------------------------------------
inline uint32_t xread(Fw& fw, uint32_t offset) { return fw.dp.xmem_read(offset); }
inline uint32_t rank_field_offset(uint32_t comm, uint32_t rank, uint32_t field) {
  return comm + 4 * (abi::kCommRanksWord + abi::kCommRankRecordWords * rank + field);
}
inline uint32_t rank_field(Fw& fw, uint32_t comm, uint32_t rank, uint32_t field) {
  return fw.dp.xmem_read(rank_field_offset(comm, rank, field));
}
inline uint64_t spare_address(Fw& fw, uint32_t offset) {
  return uint64_t{xread(fw, offset)} | (uint64_t{xread(fw, offset + 4)} << 32);
}
// Total bytes the RX buffers can hold (count x size).
inline uint64_t rx_capacity_bytes(Fw& fw) {
  return uint64_t{xread(fw, abi::kRxBufferCountOffset)} * xread(fw, abi::kRxBufferSizeOffset);
}
// Owner tokens for the spare buffers (see ControlProgramState).
inline uint64_t call_token(const CallSlot& call) { return call.issue_order + 1; }
inline uint64_t op_token(const CallSlot& call, const PeerOp& op) {
  return (call_token(call) << 5) | static_cast<uint64_t>(&op - call.ops + 1);
}
static_assert(kMaxOps < 32, "op_token keeps the op index in 5 bits");

inline uint32_t make_ctx(uint32_t context_id, bool collective) {
  return (context_id << 1) | (collective ? 1u : 0u);
}

void log_line(Fw& fw, int level, const LogLine& line);
inline bool debug_log_enabled(Fw& fw) {
  if (fw.debug_log < 0) fw.debug_log = fw.dp.log_enabled(kLogDebug) ? 1 : 0;
  return fw.debug_log != 0;
}

// ---------------------------------------------------------------------------
// arrivals.cpp
// ---------------------------------------------------------------------------
void ingest_arrival(Fw& fw, const Arrival& arrival);
// Makes arrivals for this communicator's context matchable (and checks their
// sequence numbers). Called whenever a call names the communicator.
void register_comm(Fw& fw, uint32_t offset, uint32_t context_id, uint32_t size);
// Full for arrivals in arrival order: the rest of the table is kept for the
// arrivals waiting calls ask for (fetch_arrival_for).
inline bool arrivals_full(const Fw& fw) { return fw.st.narrivals >= kMaxArrivals - kArrivalsForWaitingCalls; }
// While the table is full (arrivals_full), takes the oldest arrival the data
// plane still holds from rank `src` (or any rank) of the communicator with
// context id `context_id`, or a link error, into the table's reserve: the
// message a call waits for may have arrived after a table's worth of messages
// for later calls (a root that ran ahead, another communicator). Returns
// true if it took one.
bool fetch_arrival_for(Fw& fw, uint32_t context_id, uint32_t src);

// Oldest matchable first segment / RTS for a receive, or an error arrival
// from a matching source (the receive then fails with its bits).
// Collective contexts (ctx bit 0) match only messages of collective
// `collective_number`; messages of earlier collectives (that ended here
// before receiving them) are dropped.
uint32_t find_message(Fw& fw, uint32_t ctx, uint32_t comm, uint32_t src, uint32_t tag, uint32_t collective_number);
uint32_t find_continuation(Fw& fw, uint32_t ctx, uint32_t src, uint32_t seqn);
uint32_t find_grant(Fw& fw, uint32_t ctx, uint32_t src, uint32_t rid);
// Oldest first grant of a pre-granted transfer from `src` (any rid) for
// collective `collective_number`; drops pre-grants of earlier collectives.
uint32_t find_pregrant(Fw& fw, uint32_t ctx, uint32_t src, uint32_t collective_number);
// True if a member reported collective `collective_number` of this
// (collective) context as failed by an argument mismatch; consumes notices
// of it and of earlier collectives.
bool take_abort_notice(Fw& fw, uint32_t ctx, uint32_t collective_number);
// True if a message or pre-grant of collective `collective_number` of this
// context waits here with another signature than `signature`.
bool arrived_with_other_signature(Fw& fw, uint32_t ctx, uint32_t collective_number, uint32_t signature);
// The sender's ready notice for a staged pre-granted receive.
uint32_t find_ready(Fw& fw, uint32_t ctx, uint32_t src, uint32_t rid);
// Number of the collective starting now on this (registered) communicator.
uint32_t start_collective_number(Fw& fw, uint32_t context_id);
uint32_t find_done(Fw& fw, const PeerOp& op);
// Removes an arrival; eager payloads are released to the data plane.
void consume_arrival(Fw& fw, uint32_t index);
// arrival_log.cpp: what the arrival table holds, per (ctx, source, kind),
// at `level`; and what an expired call's ops waited for (warning).
void log_arrival_table(Fw& fw, int level);
void log_waits_of_expired_call(Fw& fw, const CallSlot& call);
// Error bits if the link to `peer` (or to any member for kRankAny) is broken.
// Asked for every pending peer operation on every pass, and
// forget_link_failure for every arrival: the usual case (no failed link) is
// answered inline, without a call or a table walk.
uint32_t failed_link_status(Fw& fw, uint32_t comm, uint32_t comm_size, uint32_t peer);
inline uint32_t peer_link_status(Fw& fw, uint32_t comm, uint32_t comm_size, uint32_t peer) {
  return fw.st.failed_link_count == 0 ? 0 : failed_link_status(fw, comm, comm_size, peer);
}
// Error bits for a receive from kRankAny that has no message yet: a member's
// link failure it has not been told about (reported once per communicator,
// see CommEntry::link_failure_unreported), or every other member's link is
// broken (nothing can come any more); 0 while it may wait.
uint32_t any_source_link_status(Fw& fw, uint32_t comm, uint32_t comm_size, uint32_t local_rank, uint32_t context_id);
// A receive from kRankAny on the communicator of `context_id` has reported
// a link failure.
void link_failure_reported(Fw& fw, uint32_t context_id);
void forget_failed_link(Fw& fw, uint32_t ip, uint32_t port);
inline void forget_link_failure(Fw& fw, uint32_t ip, uint32_t port) {
  if (fw.st.failed_link_count != 0) forget_failed_link(fw, ip, port);
}

// ---------------------------------------------------------------------------
// peer_ops.cpp, peer_send.cpp, peer_recv.cpp, collective_mismatch.cpp
// ---------------------------------------------------------------------------
// The Buf helpers are inline: every op and move builds a few Bufs.
inline Buf no_buf() {
  Buf b{};
  b.none = true;
  return b;
}
inline Buf mem_buf(uint64_t addr, bool host, bool compressed, uint32_t elem_bytes) {
  Buf b{};
  b.addr = addr;
  b.host = host;
  b.compressed = compressed;
  b.elem_bytes = elem_bytes;
  return b;
}
inline Buf stream_buf(bool compressed, uint32_t elem_bytes, uint32_t stream_id) {
  Buf b{};
  b.stream = true;
  b.compressed = compressed;
  b.elem_bytes = elem_bytes;
  b.stream_id = stream_id;
  return b;
}
inline Buf buf_at(const Buf& b, uint64_t elems) {
  Buf r = b;
  if (!b.stream && !b.none) r.addr += elems * b.elem_bytes;
  return r;
}
// Whether `count` elements at x and at y share a byte (streams and empty
// ranges share none); the second form for ranges of different lengths.
bool buf_overlap(const Buf& x, uint64_t x_count, const Buf& y, uint64_t y_count);
inline bool buf_overlap(const Buf& x, const Buf& y, uint64_t count) { return buf_overlap(x, count, y, count); }

// Advances one op as far as possible. True once it is done or failed
// (op.error). Never blocks.
bool progress_op(Fw& fw, CallSlot& call, PeerOp& op);
// Releases what an unfinished op holds (open window, spare 3) when its call
// ends early. Inline: every call's end asks it of each op, and usually there
// is nothing to release.
inline void abandon_op(Fw& fw, const CallSlot& call, PeerOp& op) {
  if (op.window_open) {
    fw.dp.close_window(op.window);
    op.window_open = false;
  }
  if (fw.st.spare3_owner == op_token(call, op)) fw.st.spare3_owner = 0;
}
// Ops waiting on `peer` of `comm` (or on any source) fail with `bits`.
// Returns the number of ops failed.
uint32_t fail_ops_waiting_on(Fw& fw, uint32_t comm, uint32_t peer, uint32_t bits);
uint32_t fail_ops_waiting_on_link(Fw& fw, uint32_t ip, uint32_t port, uint32_t bits);
// True if some op waits for this grant, ready notice or rendezvous
// completion (otherwise it is stale and dropped).
bool arrival_awaited(Fw& fw, const Arrival& a);
// An abort notice arrived: fails the running collective it names. Returns
// true when the notice is used up (applied, or its collective ran already).
bool apply_abort_notice(Fw& fw, const Arrival& a);
// A collective message or pre-grant arrived: if the running collective it
// belongs to has another signature, that call fails with INVALID_ARGUMENT
// (and notifies the members), also when no op of it receives from that peer
// (e.g. the ranks disagree on the root, so they disagree on who talks to whom).
void check_collective_arrival(Fw& fw, const Arrival& a);
// The communicator record of a context id, or nullptr.
CommEntry* comm_by_context(Fw& fw, uint32_t context_id);
// A message or abort notice of the collective that ended here last, with
// another signature than ours: fails the communicator's running or next
// collective (take_earlier_mismatch).
void note_late_mismatch(Fw& fw, const abi::WireHeader& h);
// A collective ended here with `status`: its number and signature stay on
// its communicator (CommEntry::last_number) for late messages of it.
void remember_finished_collective(Fw& fw, const CallSlot& call, uint32_t status);
// A collective about to start: true (and the mismatch is logged and used
// up) when a late message showed that the previous collective on its
// communicator was called with different arguments.
bool take_earlier_mismatch(Fw& fw, const CallSlot& call);
// After a signature mismatch: tells every other member of the call's
// communicator (kAbortNotice).
void send_abort_notices(Fw& fw, CallSlot& call);

// Executes a local move res = op0 [func op1]; returns error bits.
uint32_t local_move(Fw& fw, const CallSlot& call, uint32_t count, const Buf& op0, const Buf* op1,
                    const Buf& res);

// ---------------------------------------------------------------------------
// p2p.cpp
// ---------------------------------------------------------------------------
inline uint32_t elem_bytes(const CallSlot& call, bool compressed) {
  return compressed ? call.d.compressed_bytes : call.d.uncompressed_bytes;
}
// The call's operands as buffers: op0 = kernel stream or address 0, op1 =
// address 1, result = kernel stream (id = tag) or address 2.
Buf call_op0(const CallSlot& call);
Buf call_op1(const CallSlot& call);
Buf call_res(const CallSlot& call);
StepResult step_copy(Fw& fw, CallSlot& call);
StepResult step_combine(Fw& fw, CallSlot& call);
StepResult step_send(Fw& fw, CallSlot& call);
StepResult step_recv(Fw& fw, CallSlot& call);

// ---------------------------------------------------------------------------
// collectives/engine.cpp
// ---------------------------------------------------------------------------
StepResult step_collective(Fw& fw, CallSlot& call);

}  // namespace accl::fw::impl
