// SPDX-License-Identifier: Apache-2.0
//
// The control program's main loop: take new calls, take arrivals, advance
// every pending call once (cooperatively, in issue order), end calls whose
// deadline passed, and sleep in the data plane when nothing moved.
//
// Calls are resumable state machines: a handler returns not_ready when it
// must wait for a peer and keeps its position (phase, round, op states) in
// its CallSlot, so waiting calls never block other calls.
#include <accl_fw/control_program.hpp>

#include "firmware.hpp"

namespace accl::fw::impl {

void log_line(Fw& fw, int level, const LogLine& line) {
  if (fw.dp.log_enabled(level)) fw.dp.log(level, line.c_str());
}

namespace {

constexpr uint64_t kMaxIdleNs = 50ull * 1000 * 1000;  // re-check stop_requested() at least this often

// Sets everything to its power-on value. The state is plain data: zero it,
// then set the few nonzero defaults.
void init_state(ControlProgramState& st) {
  zero_bytes(&st, sizeof(st));
  st.timeout_ns = kDefaultTimeoutNs;
  st.max_eager_bytes = kDefaultMaxEagerBytes;
  st.max_rendezvous_bytes = kDefaultMaxRendezvousBytes;
  st.next_rid = 1;
}

void power_on(Fw& fw) {
  init_state(fw.st);
  fw.dp.xmem_write(abi::kConfigReadyOffset, 0);
  fw.dp.xmem_write(abi::kHwIdOffset, fw.dp.hw_id());
  fw.dp.xmem_write(abi::kCapabilitiesOffset, fw.dp.capabilities());
}

bool is_collective(uint32_t scenario) {
  switch (scenario) {
    case abi::kBcast:
    case abi::kScatter:
    case abi::kGather:
    case abi::kReduce:
    case abi::kAllgather:
    case abi::kAllreduce:
    case abi::kReduceScatter:
    case abi::kBarrier:
    case abi::kAlltoall:
      return true;
    default:
      return false;
  }
}

bool is_known_scenario(uint32_t scenario) {
  return scenario == abi::kConfig || scenario == abi::kNop || scenario == abi::kCopy || scenario == abi::kCombine ||
         scenario == abi::kSend || scenario == abi::kRecv || is_collective(scenario);
}

bool uses_reduce_function(uint32_t scenario) {
  return scenario == abi::kCombine || scenario == abi::kReduce || scenario == abi::kAllreduce ||
         scenario == abi::kReduceScatter;
}

bool uses_root(uint32_t scenario) {
  return scenario == abi::kBcast || scenario == abi::kScatter || scenario == abi::kGather || scenario == abi::kReduce;
}

// Writes every field of `d`: the call words, and zero for what validate()
// fills in (a call is decoded straight into its slot, which holds the
// previous call's values).
void decode(const Call& call, Decoded& d) {
  const uint32_t* w = call.words;
  d.scenario = w[abi::kWordScenario];
  d.count = w[abi::kWordCount];
  d.comm = w[abi::kWordComm];
  d.root_src_dst = w[abi::kWordRootSrcDst];
  d.function = w[abi::kWordFunction];
  d.tag = w[abi::kWordTag];
  d.arcfg = w[abi::kWordArithConfig];
  d.compression = w[abi::kWordCompressionFlags];
  d.stream_flags = w[abi::kWordStreamFlags] & 0xFF;
  d.host_flags = (w[abi::kWordStreamFlags] >> 8) & 0xFF;
  d.addr[0] = uint64_t{w[abi::kWordAddr0Low]} | (uint64_t{w[abi::kWordAddr0High]} << 32);
  d.addr[1] = uint64_t{w[abi::kWordAddr1Low]} | (uint64_t{w[abi::kWordAddr1High]} << 32);
  d.addr[2] = uint64_t{w[abi::kWordAddr2Low]} | (uint64_t{w[abi::kWordAddr2High]} << 32);
  d.comm_size = 0;
  d.local_rank = 0;
  d.context_id = 0;
  d.uncompressed_bytes = 0;
  d.compressed_bytes = 0;
}

// Reads and checks what the call refers to in exchange memory. Returns error
// bits (0 = valid) and fills the communicator / arithmetic fields of `d`.
uint32_t validate(Fw& fw, Decoded& d) {
  if (!is_known_scenario(d.scenario)) return abi::kCollectiveNotImplemented;
  if (xread(fw, abi::kConfigReadyOffset) != 1) return abi::kNotConfigured;

  const bool needs_data = d.scenario != abi::kBarrier;
  if (needs_data) {
    // arithmetic configuration: element sizes and the reduce function table
    if (d.arcfg % 4 != 0 || uint64_t{d.arcfg} + 4 * abi::kArithFunctionIds > abi::kConfigAreaEnd) {
      return abi::kInvalidArgument;
    }
    d.uncompressed_bytes = xread(fw, d.arcfg + 4 * abi::kArithUncompressedBytes);
    d.compressed_bytes = xread(fw, d.arcfg + 4 * abi::kArithCompressedBytes);
    const uint32_t nfunctions = xread(fw, d.arcfg + 4 * abi::kArithNumFunctions);
    if (d.uncompressed_bytes == 0 || d.uncompressed_bytes > 64 || d.compressed_bytes > 64 ||
        nfunctions > abi::kMaxReduceFunctions) {
      return abi::kInvalidArgument;
    }
    if (d.compressed_bytes == 0) d.compressed_bytes = d.uncompressed_bytes;
    if (uses_reduce_function(d.scenario) && d.function >= nfunctions) return abi::kInvalidArgument;
  } else {
    d.uncompressed_bytes = d.compressed_bytes = 1;  // barrier moves no data
  }

  if (d.scenario == abi::kCopy || d.scenario == abi::kCombine) return 0;

  // communicator record
  if (d.comm % 4 != 0 || d.comm >= abi::kConfigAreaEnd) return abi::kInvalidArgument;
  d.comm_size = xread(fw, d.comm + 4 * abi::kCommSizeWord);
  d.local_rank = xread(fw, d.comm + 4 * abi::kCommLocalRankWord);
  if (d.comm_size == 0 || d.comm_size > 1024 || d.local_rank >= d.comm_size ||
      uint64_t{d.comm} + 4ull * abi::comm_record_words(d.comm_size) > abi::kConfigAreaEnd) {
    return abi::kInvalidArgument;
  }
  d.context_id = xread(fw, d.comm + 4 * abi::comm_context_word(d.comm_size));

  if (d.scenario == abi::kSend) {
    if (d.root_src_dst >= d.comm_size) return abi::kInvalidArgument;
    if ((d.stream_flags & abi::kResStream) != 0 && d.tag > abi::kMaxStreamId) return abi::kInvalidArgument;
  }
  if (d.scenario == abi::kRecv && d.root_src_dst >= d.comm_size && d.root_src_dst != abi::kRankAny) {
    return abi::kInvalidArgument;
  }
  if (uses_root(d.scenario) && d.root_src_dst >= d.comm_size) return abi::kInvalidArgument;
  // Buffers of count x P elements must be addressable with 32-bit element counts.
  if (is_collective(d.scenario) && uint64_t{d.count} * d.comm_size > 0xFFFFFFFFull) return abi::kInvalidArgument;
  return 0;
}

void log_call(Fw& fw, const char* what, const CallSlot& call, uint32_t status) {
  if (!debug_log_enabled(fw)) return;
  LogLine line;
  line.str(what).str(" call ").dec(call.id).str(" scenario ").dec(call.d.scenario).str(" count ").dec(call.d.count)
      .str(" status ").hex(status);
  log_line(fw, kLogDebug, line);
}

void remove_from_order(ControlProgramState& st, uint32_t slot) {
  uint32_t out = 0;
  for (uint32_t i = 0; i < st.ncalls; ++i) {
    if (st.order[i] != slot) st.order[out++] = st.order[i];
  }
  st.ncalls = out;
}

void finish(Fw& fw, uint32_t slot, uint32_t status) {
  CallSlot& call = fw.st.calls[slot];
  if (call.collective) remember_finished_collective(fw, call, status);
  for (uint32_t i = 0; i < call.nops; ++i) abandon_op(fw, call, call.ops[i]);
  if (fw.st.spare12_owner == call_token(call)) fw.st.spare12_owner = 0;
  const uint64_t now = fw.dp.now_ns();
  log_call(fw, "finished", call, status);
  fw.dp.finish_call(call.id, status, now > call.start_ns ? now - call.start_ns : 0);
  call.used = false;
  remove_from_order(fw.st, slot);
  fw.st.work_counter++;
}

uint32_t apply_config(Fw& fw, const Decoded& d) {
  switch (d.function) {
    case abi::kResetPeripherals:
      return 0;  // handled by the caller (it also drops the pending calls)
    case abi::kEnablePackets:
      fw.st.packets_enabled = true;
      return 0;
    case abi::kSetTimeout:
      fw.st.timeout_ns = d.count == 0 ? kDefaultTimeoutNs : uint64_t{d.count} * 1000;
      return 0;
    case abi::kSetMaxEagerSize:
      // Rule: one eager message must fit in the receiver's RX buffers
      // (count x size), so eager traffic never depends on overflow storage.
      if (uint64_t{d.count} > rx_capacity_bytes(fw)) return abi::kEagerThresholdInvalid;
      fw.st.max_eager_bytes = d.count;
      return 0;
    case abi::kGetLinkStatus: {
      // Answers with the error bits of the rank's failed link (0: up, or
      // never used). Ends at once like every config call: the caller asks
      // after a RANK_ANY receive failed with kLinkError, to learn who.
      if (d.comm % 4 != 0 || d.comm >= abi::kConfigAreaEnd) return abi::kInvalidArgument;
      const uint32_t size = xread(fw, d.comm + 4 * abi::kCommSizeWord);
      if (size == 0 || size > 1024 || uint64_t{d.comm} + 4ull * abi::comm_record_words(size) > abi::kConfigAreaEnd ||
          d.root_src_dst >= size) {
        return abi::kInvalidArgument;
      }
      return peer_link_status(fw, d.comm, size, d.root_src_dst);
    }
    case abi::kSetMaxRendezvousSize:
      // 0 disables rendezvous; otherwise it is the size of each spare buffer,
      // which must hold at least one datapath word.
      if (d.count != 0 && d.count < kMinRendezvousBytes) return abi::kRendezvousThresholdInvalid;
      fw.st.max_rendezvous_bytes = d.count;
      return 0;
    default:
      return abi::kInvalidArgument;
  }
}

void soft_reset(Fw& fw) {
  // Dropped calls end with NOT_READY, like public ACCL's HOUSEKEEP_SWRST.
  while (fw.st.ncalls > 0) finish(fw, fw.st.order[0], abi::kNotReady);
  fw.dp.reset_datapath();
  // Payload keys stay unique across resets: the data plane may still hold
  // the payload of a key handed out before (Move::shared_payload).
  const uint64_t last_payload_key = fw.st.last_payload_key;
  power_on(fw);
  fw.st.last_payload_key = last_payload_key;
  log_line(fw, kLogInfo, LogLine().str("soft reset"));
}

void start_call(Fw& fw, const Call& c) {
  fw.st.work_counter++;
  const uint64_t now = fw.dp.now_ns();
  const uint32_t scenario = c.words[abi::kWordScenario];
  if (scenario == abi::kConfig || scenario == abi::kNop) {
    // Ends at once, without a slot (a reset zeroes every slot).
    Decoded d;
    decode(c, d);
    uint32_t status = 0;
    if (scenario == abi::kConfig) {
      if (d.function == abi::kResetPeripherals) soft_reset(fw);
      status = apply_config(fw, d);
    }
    fw.dp.finish_call(c.id, status, fw.dp.now_ns() - now);
    return;
  }
  uint32_t slot = 0;
  while (fw.st.calls[slot].used) ++slot;  // the caller checked that a slot is free
  CallSlot& call = fw.st.calls[slot];
  // Decoded and checked in place (no copy of the decoded words); the slot
  // stays free if the call is rejected.
  decode(c, call.d);
  const uint32_t status = validate(fw, call.d);
  if (status != 0) {
    if (fw.dp.log_enabled(kLogWarn)) {
      LogLine line;
      line.str("call ").dec(c.id).str(" scenario ").dec(scenario).str(" rejected: ").hex(status);
      log_line(fw, kLogWarn, line);
    }
    fw.dp.finish_call(c.id, status, fw.dp.now_ns() - now);
    return;
  }
  const Decoded& d = call.d;
  call.used = true;
  call.collective = is_collective(d.scenario);
  call.round_open = false;
  call.phase = CallPhase::start;
  call.id = c.id;
  call.issue_order = fw.st.next_issue_order++;
  call.start_ns = now;
  call.deadline_ns = now + fw.st.timeout_ns;
  call.status = 0;
  call.algorithm = 0;
  call.round = 0;
  call.nops = 0;
  // The op table is zeroed op by op as a step adds them (the table is most
  // of the slot, and a send uses one op). What follows it belongs to
  // collectives alone (see CallSlot) and starts at zero for them.
  if (call.collective) zero_bytes(&call.args, sizeof(CallSlot) - offsetof(CallSlot, args));
  // The next deadline check comes within a few passes (one_pass); until
  // then idle() must not sleep past this call's deadline.
  fw.st.nearest_deadline_ns = min_of(fw.st.nearest_deadline_ns, call.deadline_ns);
  fw.st.order[fw.st.ncalls++] = slot;
  if (d.scenario != abi::kCopy && d.scenario != abi::kCombine) register_comm(fw, d.comm, d.context_id, d.comm_size);
  if (call.collective) call.collective_number = start_collective_number(fw, d.context_id);
  log_call(fw, "started", call, 0);
}

StepResult step_call(Fw& fw, CallSlot& call) {
  switch (call.d.scenario) {
    case abi::kCopy:
      return step_copy(fw, call);
    case abi::kCombine:
      return step_combine(fw, call);
    case abi::kSend:
      return step_send(fw, call);
    case abi::kRecv:
      return step_recv(fw, call);
    default:
      return step_collective(fw, call);
  }
}

// Collectives on one communicator run one at a time, in issue order.
bool blocked_by_earlier_collective(const ControlProgramState& st, uint32_t position) {
  const CallSlot& call = st.calls[st.order[position]];
  if (!call.collective) return false;
  for (uint32_t i = 0; i < position; ++i) {
    const CallSlot& earlier = st.calls[st.order[i]];
    if (earlier.collective && earlier.d.comm == call.d.comm) return true;
  }
  return false;
}

void step_all(Fw& fw) {
  ControlProgramState& st = fw.st;
  uint32_t position = 0;
  while (position < st.ncalls) {
    const uint32_t slot = st.order[position];
    if (blocked_by_earlier_collective(st, position)) {
      ++position;
      continue;
    }
    CallSlot& call = st.calls[slot];
    if (step_call(fw, call) == StepResult::finished) {
      finish(fw, slot, call.status);  // removes it from the order: same position is the next call
    } else {
      ++position;
    }
  }
}

constexpr uint32_t kPassesPerDeadlineCheck = 8;

// Ends calls whose deadline passed. Returns the nearest remaining deadline.
uint64_t expire_calls(Fw& fw) {
  const uint64_t now = fw.dp.now_ns();
  uint64_t nearest = now + kMaxIdleNs;
  uint32_t position = 0;
  while (position < fw.st.ncalls) {
    const uint32_t slot = fw.st.order[position];
    const CallSlot& call = fw.st.calls[slot];
    if (now >= call.deadline_ns) {
      if (fw.dp.log_enabled(kLogWarn)) {
        LogLine line;
        line.str("call ").dec(call.id).str(" scenario ").dec(call.d.scenario).str(" timed out");
        log_line(fw, kLogWarn, line);
        log_waits_of_expired_call(fw, call);
      }
      finish(fw, slot, call.status | abi::kReceiveTimeoutError);
      continue;
    }
    nearest = min_of(nearest, call.deadline_ns);
    ++position;
  }
  return nearest;
}

// One pass: take new calls, take arrivals, advance every pending call once,
// end expired calls. Never waits (see ControlProgram::poll()).
ControlProgram::PollResult one_pass(Fw& fw) {
  const uint64_t work_before = fw.st.work_counter;
  fw.debug_log = -1;  // ask again in this pass (run() keeps one Fw for all passes)
  Call call;
  bool calls_emptied = false;
  while (fw.st.ncalls < kMaxCalls) {
    if (!fw.dp.pop_call(call)) {
      calls_emptied = true;
      break;
    }
    start_call(fw, call);
  }
  bool arrivals_emptied = false;
  while (!arrivals_full(fw)) {
    if (!fw.dp.pop_arrival(fw.st.incoming)) {
      arrivals_emptied = true;
      break;
    }
    ingest_arrival(fw, fw.st.incoming);
  }
  if (arrivals_full(fw) != fw.st.arrivals_full_reported) {
    // Full: further arrivals stay queued in the data plane until receives
    // consume some; meanwhile a call that waits for a peer takes that
    // peer's next arrival past them (fetch_arrival_for).
    fw.st.arrivals_full_reported = arrivals_full(fw);
    if (fw.st.arrivals_full_reported) {
      log_line(fw, kLogInfo,
               LogLine().str("arrival table full (").dec(kMaxArrivals - kArrivalsForWaitingCalls)
                   .str(" unmatched arrivals): later ones are taken in for the calls that wait for them"));
      log_arrival_table(fw, kLogDebug);
    }
  }
  step_all(fw);
  // Deadlines lie milliseconds ahead while a pass takes well under a
  // microsecond, and reading the clock costs as much as the rest of an idle
  // pass: passes check them only every kPassesPerDeadlineCheck-th time
  // (hosts poll in tight loops of idle passes, and a small message's send
  // and receive each take a pass or two that progress). A call started in
  // between lowers nearest_deadline_ns itself (start_call); one that ended
  // may leave it early, which costs an idle() that returns at once.
  if (++fw.st.passes_unchecked >= kPassesPerDeadlineCheck) {
    fw.st.passes_unchecked = 0;
    fw.st.nearest_deadline_ns = expire_calls(fw);
  }
  return ControlProgram::PollResult{fw.st.work_counter != work_before, fw.st.nearest_deadline_ns,
                                   calls_emptied && arrivals_emptied && fw.st.ncalls == 0};
}

void run_loop(Fw& fw) {
  power_on(fw);
  while (!fw.dp.stop_requested()) {
    const ControlProgram::PollResult pass = one_pass(fw);
    if (!pass.progressed) fw.dp.idle(pass.next_deadline_ns);
  }
}

}  // namespace
}  // namespace accl::fw::impl

namespace accl::fw {

ControlProgram::ControlProgram(DataPlane& dataplane, void* storage)
    : dp_(dataplane), state_(static_cast<ControlProgramState*>(storage)) {}

unsigned long ControlProgram::state_bytes() { return sizeof(ControlProgramState); }
unsigned long ControlProgram::state_alignment() { return alignof(ControlProgramState); }

void ControlProgram::run() {
  impl::Fw fw{dp_, *state_};
  impl::run_loop(fw);
}

void ControlProgram::power_on() {
  impl::Fw fw{dp_, *state_};
  impl::power_on(fw);
}

ControlProgram::PollResult ControlProgram::poll() {
  impl::Fw fw{dp_, *state_};
  return impl::one_pass(fw);
}

}  // namespace accl::fw
