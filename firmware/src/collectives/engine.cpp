// SPDX-License-Identifier: Apache-2.0
//
// The collective round engine: sets up a collective's arguments (including
// kernel-stream staging), selects the algorithm once, then runs its rounds.
// Position is kept in the CallSlot (phase, round, op states), so a collective
// that waits for a peer yields and resumes exactly where it stopped.
#include "collective.hpp"

namespace accl::fw::impl {

// ---------------------------------------------------------------------------
// Round builder
// ---------------------------------------------------------------------------
bool Round::reserve() {
  if (!full()) return true;
  // A plan asked for more concurrent ops than a call has: a firmware bug,
  // reported instead of silently dropping a transfer (which would hang a peer).
  call_.status |= abi::kCollectiveNotImplemented;
  return false;
}

PeerOp& Round::add(OpKind kind, uint32_t count) {
  PeerOp& op = call_.ops[call_.nops++];
  zero_bytes(&op, sizeof(op));
  op.kind = kind;
  op.count = count;
  op.tag = tag_;
  op.ctx = make_ctx(call_.d.context_id, true);
  op.wire_compressed = call_.args.wire_compressed;
  return op;
}

void Round::send(uint32_t peer, const Buf& from, uint32_t count) {
  if (!reserve()) return;
  PeerOp& op = add(OpKind::send, count);
  op.peer = peer;
  op.a = from;
}

void Round::send_reduced(uint32_t peer, const Buf& a, const Buf& b, uint32_t count) {
  if (!reserve()) return;
  PeerOp& op = add(OpKind::send, count);
  op.peer = peer;
  op.a = a;
  op.b = b;
  op.fused = true;
}

void Round::recv(uint32_t peer, const Buf& into, uint32_t count) {
  if (!reserve()) return;
  PeerOp& op = add(OpKind::recv, count);
  op.peer = peer;
  op.tag = abi::kTagAny;  // collective messages are matched by source order
  op.dst = into;
}

void Round::recv_reduce(uint32_t peer, const Buf& x, const Buf& into, uint32_t count) {
  if (!reserve()) return;
  PeerOp& op = add(OpKind::recv, count);
  op.peer = peer;
  op.tag = abi::kTagAny;
  op.a = x;
  op.dst = into;
  op.fused = true;
}

void Round::copy(const Buf& from, const Buf& to, uint32_t count) {
  if (!reserve()) return;
  PeerOp& op = add(OpKind::local, count);
  op.a = from;
  op.dst = to;
}

void Round::combine(const Buf& a, const Buf& b, const Buf& to, uint32_t count) {
  if (!reserve()) return;
  PeerOp& op = add(OpKind::local, count);
  op.a = a;
  op.b = b;
  op.dst = to;
  op.fused = true;
}

namespace {

constexpr uint32_t kMaxRoundsPerStep = 64;  // fairness: let other calls run between bursts

// Sends of one round that carry the same bytes (the direct allgather and the
// flat bcast send one buffer to every peer) get one key (fw::Move::
// shared_payload), so the data plane may copy the payload out of the buffer
// once for all of them instead of once per peer. Only plain sends of plain
// memory, and only when no op of the round writes into that source.
void mark_shared_sends(Fw& fw, CallSlot& call) {
  for (uint32_t i = 0; i < call.nops; ++i) {
    PeerOp& first = call.ops[i];
    if (first.kind != OpKind::send || first.fused || first.shared_payload != 0 || first.a.stream || first.a.none)
      continue;
    bool written = false;
    for (uint32_t j = 0; j < call.nops && !written; ++j) {
      const PeerOp& w = call.ops[j];
      written = w.kind != OpKind::send && buf_overlap(first.a, first.count, w.dst, w.count);
    }
    if (written) continue;
    for (uint32_t j = i + 1; j < call.nops; ++j) {
      PeerOp& twin = call.ops[j];
      if (twin.kind != OpKind::send || twin.fused || twin.count != first.count ||
          twin.wire_compressed != first.wire_compressed || !same_memory(twin.a, first.a))
        continue;
      if (first.shared_payload == 0) first.shared_payload = ++fw.st.last_payload_key;
      twin.shared_payload = first.shared_payload;
    }
  }
}

// Calls the plan of `algorithm` (direct calls: no function-pointer tables,
// which would need the GOT in position-independent builds).
bool run_plan(uint32_t algorithm, const CollArgs& args, uint32_t round, Round& out) {
  switch (algorithm) {
    case kAlgoBcastFlat: return plan_bcast_flat(args, round, out);
    case kAlgoBcastBinomial: return plan_bcast_binomial(args, round, out);
    case kAlgoScatterFlat: return plan_scatter_flat(args, round, out);
    case kAlgoGatherFlat: return plan_gather_flat(args, round, out);
    case kAlgoAllgatherRing: return plan_allgather_ring(args, round, out);
    case kAlgoAllgatherDoubling: return plan_allgather_doubling(args, round, out);
    case kAlgoAllgatherDirect: return plan_allgather_direct(args, round, out);
    case kAlgoReduceFlat: return plan_reduce_flat(args, round, out);
    case kAlgoReduceChain: return plan_reduce_chain(args, round, out);
    case kAlgoAllreduceRing: return plan_allreduce_ring(args, round, out);
    case kAlgoAllreduceRingDirect: return plan_allreduce_ring_direct(args, round, out);
    case kAlgoAllreduceDirect: return plan_allreduce_direct(args, round, out);
    case kAlgoAllreduceReduceBcast: return plan_allreduce_reduce_bcast(args, round, out);
    case kAlgoAllreduceHalvingDoubling: return plan_allreduce_halving_doubling(args, round, out);
    case kAlgoReduceScatterRing: return plan_reduce_scatter_ring(args, round, out);
    case kAlgoReduceScatterHalving: return plan_reduce_scatter_halving(args, round, out);
    case kAlgoReduceScatterDirect: return plan_reduce_scatter_direct(args, round, out);
    case kAlgoAlltoallPairwise: return plan_alltoall_pairwise(args, round, out);
    case kAlgoAlltoallInPlace: return plan_alltoall_inplace(args, round, out);
    case kAlgoBarrierDissemination: return plan_barrier_dissemination(args, round, out);
    default: return false;
  }
}

// Elements of the source / result buffer of each collective (count is per
// rank for scatter, gather, allgather, reduce_scatter and alltoall).
uint32_t source_elems(uint32_t scenario, uint32_t count, uint32_t P) {
  switch (scenario) {
    case abi::kScatter:
    case abi::kReduceScatter:
    case abi::kAlltoall:
      return count * P;
    case abi::kBarrier:
      return 0;
    default:
      return count;
  }
}

uint32_t result_elems(uint32_t scenario, uint32_t count, uint32_t P) {
  switch (scenario) {
    case abi::kGather:
    case abi::kAllgather:
    case abi::kAlltoall:
      return count * P;
    case abi::kBarrier:
      return 0;
    default:
      return count;
  }
}

uint32_t tuning(Fw& fw, uint32_t offset, uint32_t fallback) {
  const uint32_t v = xread(fw, offset);
  return v == 0 ? fallback : v;
}

// FNV-1a over the 4 bytes of `w`, little end first.
constexpr uint32_t fnv1a_word(uint32_t h, uint32_t w) {
  for (uint32_t b = 0; b < 4; ++b) h = (h ^ ((w >> (8 * b)) & 0xFFu)) * 16777619u;
  return h;
}

// Everything about a collective that must be equal on all ranks for the
// ranks to exchange the same messages, folded into one nonzero word
// (FNV-1a): kind, count, root (rooted kinds), reduce function and its
// arithmetic unit id, which also tells the data type (reducing kinds),
// element sizes and wire compression. Per-rank properties (buffer addresses,
// host/stream flags, the arith config's offset) stay out. prepare() adds the
// selected algorithm (signature_with_algorithm).
uint32_t collective_signature(Fw& fw, const Decoded& d) {
  const bool rooted = d.scenario == abi::kBcast || d.scenario == abi::kScatter || d.scenario == abi::kGather ||
                      d.scenario == abi::kReduce;
  const bool reducing = d.scenario == abi::kReduce || d.scenario == abi::kAllreduce ||
                        d.scenario == abi::kReduceScatter;
  const uint32_t words[] = {
      d.scenario,
      d.scenario == abi::kBarrier ? 0u : d.count,  // a barrier moves no data: its count means nothing
      rooted ? d.root_src_dst : 0u,
      reducing ? d.function : 0u,
      reducing ? xread(fw, d.arcfg + 4 * (abi::kArithFunctionIds + d.function)) : 0u,
      d.uncompressed_bytes,
      d.compressed_bytes,
      d.compression & abi::kEthCompressed,
  };
  uint32_t h = 2166136261u;
  for (uint32_t w : words) h = fnv1a_word(h, w);
  return h == 0 ? 1u : h;
}

uint32_t signature_with_algorithm(uint32_t signature, uint32_t algorithm) {
  const uint32_t h = fnv1a_word(signature, algorithm);
  return h == 0 ? 1u : h;
}

void fill_args(Fw& fw, CallSlot& call) {
  CollArgs& a = call.args;
  const Decoded& d = call.d;
  call.signature = collective_signature(fw, d);
  a.P = d.comm_size;
  a.rank = d.local_rank;
  a.root = d.root_src_dst;
  a.count = d.count;
  a.func = d.function;
  a.wire_compressed = (d.compression & abi::kEthCompressed) != 0;
  a.src = call_op0(call);
  a.dst = call_res(call);
  a.spare_bytes = fw.st.max_rendezvous_bytes;
  a.max_eager_bytes = fw.st.max_eager_bytes;
  const uint32_t spare_offsets[3] = {abi::kSpare1Offset, abi::kSpare2Offset, abi::kSpare3Offset};
  for (uint32_t i = 0; i < 3; ++i) {
    a.spare[i] = mem_buf(spare_address(fw, spare_offsets[i]), false, false, d.uncompressed_bytes);
  }
  a.gather_flat_max_fanin = tuning(fw, abi::kGatherFlatTreeMaxFanin, 2);
  a.gather_flat_max_bytes = tuning(fw, abi::kGatherFlatTreeMaxCount, 32768);
  a.bcast_flat_max_ranks = tuning(fw, abi::kBcastFlatTreeMaxRanks, 3);
  a.reduce_flat_max_ranks = tuning(fw, abi::kReduceFlatTreeMaxRanks, 4);
  a.reduce_flat_max_bytes = tuning(fw, abi::kReduceFlatTreeMaxCount, min_of<uint32_t>(a.spare_bytes / 4, 32768));
}

// A spare buffer viewed with the representation of `like`.
Buf spare_like(const CollArgs& a, uint32_t index, const Buf& like) {
  Buf b = a.spare[index];
  b.compressed = like.compressed;
  b.elem_bytes = like.elem_bytes;
  return b;
}

// Whether this rank reads its source / produces a result in this collective
// (a root does not receive a broadcast; only the root gets a reduce/gather).
bool rank_reads_source(uint32_t scenario, const CollArgs& a) {
  if (scenario == abi::kBcast || scenario == abi::kScatter) return a.rank == a.root;
  return scenario != abi::kBarrier;
}
bool rank_writes_result(uint32_t scenario, const CollArgs& a) {
  if (scenario == abi::kBcast) return a.rank != a.root;
  if (scenario == abi::kGather || scenario == abi::kReduce) return a.rank == a.root;
  return scenario != abi::kBarrier;
}

bool needs_stream_staging(const CallSlot& call) {
  const CollArgs& a = call.args;
  return (a.src.stream && rank_reads_source(call.d.scenario, a)) ||
         (a.dst.stream && rank_writes_result(call.d.scenario, a));
}

// Kernel-stream operands are staged through spare buffers: an algorithm may
// read its source several times and write its result in pieces, which a
// stream cannot do. Only the operands this rank really uses are touched, so
// a non-root never pulls from or pushes to its stream. Returns error bits.
uint32_t stage_streams(Fw& fw, CallSlot& call) {
  CollArgs& a = call.args;
  const uint32_t src_elems = source_elems(call.d.scenario, a.count, a.P);
  const uint32_t dst_elems = result_elems(call.d.scenario, a.count, a.P);
  if (a.src.stream && rank_reads_source(call.d.scenario, a)) {
    const Buf staged = spare_like(a, 0, a.src);
    if (uint64_t{src_elems} * staged.elem_bytes > a.spare_bytes) return abi::kDmaSizeError;
    const uint32_t status = local_move(fw, call, src_elems, a.src, nullptr, staged);
    if (status != 0) return status;
    a.src = staged;
  }
  if (a.dst.stream && rank_writes_result(call.d.scenario, a)) {
    const Buf staged = spare_like(a, 1, a.dst);
    if (uint64_t{dst_elems} * staged.elem_bytes > a.spare_bytes) return abi::kDmaSizeError;
    call.stage_out_from = staged;
    call.stage_out_to = a.dst;
    call.stage_out_count = dst_elems;
    a.dst = staged;
  }
  return 0;
}

// Single-rank communicators: the result is a copy of the source.
StepResult run_single_rank(Fw& fw, CallSlot& call) {
  const uint32_t scenario = call.d.scenario;
  if (scenario == abi::kBarrier || scenario == abi::kBcast) return StepResult::finished;
  call.status |= local_move(fw, call, call.d.count, call.args.src, nullptr, call.args.dst);
  return StepResult::finished;
}

void log_selection(Fw& fw, const CallSlot& call) {
  if (!debug_log_enabled(fw)) return;
  LogLine line;
  line.str("call ").dec(call.id).str(" scenario ").dec(call.d.scenario).str(" P ").dec(call.args.P).str(" count ")
      .dec(call.args.count).str(": ").str(algorithm_name(call.algorithm));
  log_line(fw, kLogDebug, line);
}

// Fills the arguments and selects the algorithm (both depend only on the
// call words and exchange memory, so this can be repeated).
void prepare(Fw& fw, CallSlot& call) {
  fill_args(fw, call);
  if (call.args.P == 1) return;
  const uint32_t src_elems = source_elems(call.d.scenario, call.args.count, call.args.P);
  SelectionInput in{};
  in.scenario = call.d.scenario;
  in.max_eager_bytes = fw.st.max_eager_bytes;
  in.in_place = buf_overlap(call.args.src, call.args.dst, src_elems) ||
                buf_overlap(call.args.dst, call.args.src, result_elems(call.d.scenario, call.args.count, call.args.P));
  call.algorithm = select_algorithm(in, call.args);
  // The choice may depend on whether this rank works in place (alltoall,
  // allreduce), which MPI requires to be the same on every rank; should the
  // ranks still pick different algorithms, their signatures differ and the
  // collective fails with INVALID_ARGUMENT instead of matching messages
  // that mean different things.
  call.signature = signature_with_algorithm(call.signature, call.algorithm);
}

bool uses_spare_algorithm(const CallSlot& call) {
  return algorithm_uses_spares(call.algorithm) && spare_elems(call.args) > 0;
}

// True if a collective issued before `call` has not started yet and will
// take spares 1 and 2. Spares go to collectives in issue order: otherwise a
// later collective could take them on one rank while an earlier one (waiting
// behind another collective of its communicator) takes them first on another
// rank, and each would wait for the one the other rank cannot start.
bool earlier_collective_wants_spares(Fw& fw, const CallSlot& call) {
  ControlProgramState& st = fw.st;
  for (uint32_t i = 0; i < st.ncalls; ++i) {
    CallSlot& other = st.calls[st.order[i]];
    if (&other == &call || !other.collective || other.phase != CallPhase::start ||
        other.issue_order >= call.issue_order) {
      continue;
    }
    prepare(fw, other);  // recomputed when it starts
    if (other.args.P == 1 || other.algorithm == kAlgoNone) continue;
    if (needs_stream_staging(other) || uses_spare_algorithm(other)) return true;
  }
  return false;
}

StepResult start_collective(Fw& fw, CallSlot& call) {
  prepare(fw, call);
  if (call.args.P == 1) return run_single_rank(fw, call);
  if (call.algorithm == kAlgoNone) {
    call.status |= abi::kCollectiveNotImplemented;
    return StepResult::finished;
  }
  const bool staging = needs_stream_staging(call);
  const bool spare_algorithm = uses_spare_algorithm(call);
  if (staging && spare_algorithm) {
    call.status |= abi::kCollectiveNotImplemented;  // both would need spares 1 and 2
    return StepResult::finished;
  }
  if (staging || spare_algorithm) {
    // Spares 1 and 2 serve one collective at a time (collectives on other
    // communicators may run concurrently): wait until they are free and no
    // earlier collective is still to take them.
    const uint64_t token = call_token(call);
    if (fw.st.spare12_owner != 0 && fw.st.spare12_owner != token) return StepResult::not_ready;
    if (fw.st.spare12_owner != token && earlier_collective_wants_spares(fw, call)) return StepResult::not_ready;
    fw.st.spare12_owner = token;
  }
  log_selection(fw, call);
  call.status |= stage_streams(fw, call);
  if (call.status != 0) return StepResult::finished;
  call.phase = CallPhase::running;
  call.round = 0;
  call.round_open = false;
  return StepResult::not_ready;
}

}  // namespace

StepResult step_collective(Fw& fw, CallSlot& call) {
  if (call.phase == CallPhase::start) {
    // A member already found that the ranks called this collective with
    // different arguments (its abort notice waited for us).
    // The previous collective was called with different arguments, found
    // only after it ended here: this one reports it, and its members learn
    // at once (abort notices) instead of waiting for us until the timeout.
    // Checked before the abort notices: a member may have failed this one
    // for its own earlier mismatch already, and ours must not be left over
    // to fail the collective after it.
    if (take_earlier_mismatch(fw, call)) {
      call.status |= abi::kInvalidArgument;
      call.signature_mismatch = true;
      send_abort_notices(fw, call);
      return StepResult::finished;
    }
    if (take_abort_notice(fw, make_ctx(call.d.context_id, true), call.collective_number)) {
      call.status |= abi::kInvalidArgument;
      return StepResult::finished;
    }
    if (start_collective(fw, call) == StepResult::finished) return StepResult::finished;
    // A member's message for this collective came before we started it.
    if (arrived_with_other_signature(fw, make_ctx(call.d.context_id, true), call.collective_number,
                                     call.signature)) {
      call.status |= abi::kInvalidArgument;
      call.signature_mismatch = true;
    }
  }
  // Failed from outside: an abort notice of another member, or a message of
  // this collective with another signature (check_collective_arrival).
  if (call.status != 0) {
    if (call.signature_mismatch) send_abort_notices(fw, call);
    return StepResult::finished;
  }
  for (uint32_t rounds = 0; call.phase == CallPhase::running && rounds < kMaxRoundsPerStep; ++rounds) {
    if (!call.round_open) {
      call.nops = 0;
      Round round(call, call.round);
      if (!run_plan(call.algorithm, call.args, call.round, round)) {
        call.phase = CallPhase::staging_out;
        break;
      }
      if (call.status != 0) return StepResult::finished;
      mark_shared_sends(fw, call);
      call.round_open = true;
    }
    // Receives first, then sends, then local moves (plan order within each
    // kind, so receives from one peer still match in plan order). A receive's
    // start only posts its pre-grant, while a granted send or a local move
    // copies its whole payload before returning: posted first, our grant
    // reaches the peer whose send waits for it before we copy anything, so
    // in a ring the ranks' transfers overlap instead of waiting for each
    // other's in turn.
    constexpr OpKind kProgressOrder[] = {OpKind::recv, OpKind::send, OpKind::local};
    bool all_done = true;
    for (const OpKind kind : kProgressOrder) {
      for (uint32_t i = 0; i < call.nops; ++i) {
        PeerOp& op = call.ops[i];
        if (op.kind != kind) continue;
        if (!progress_op(fw, call, op)) all_done = false;
        if (op.error != 0) {
          call.status |= op.error;
          // Tell the other members at once, so they fail by name instead of
          // waiting for their timeout on messages that will not come.
          if (call.signature_mismatch) send_abort_notices(fw, call);
          return StepResult::finished;
        }
      }
    }
    if (!all_done) return StepResult::not_ready;
    call.round++;
    call.round_open = false;
  }
  if (call.phase == CallPhase::staging_out) {
    if (call.stage_out_to.stream) {
      call.status |= local_move(fw, call, call.stage_out_count, call.stage_out_from, nullptr, call.stage_out_to);
    }
    call.phase = CallPhase::finished;
    return StepResult::finished;
  }
  return StepResult::not_ready;
}

}  // namespace accl::fw::impl
