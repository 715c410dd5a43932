// SPDX-License-Identifier: Apache-2.0
//
// The calls of the ACCL driver: validate every argument before the device is
// touched, sync inputs (unless from_fpga), encode the call words, start the
// call, and wait unless run_async. Results are synced back by Request::wait().
//
// count == 0 is valid for every data call and completes at once without a
// device call (public ACCL returns nullptr for it). With a non-empty waitfor
// such a call becomes a nop on the device so that a chain through it still
// orders the calls around it.
#include <accl/accl.hpp>
#include <accl/config.hpp>
#include <accl/log.hpp>

#include "internal.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace accl {
namespace {

using detail::BufferAccess;
using detail::SyncRange;
using encoding::Operand;

// Call names with static storage: requests refer to them without a copy.
const std::string kNop = "nop";
const std::string kCopy = "copy";
const std::string kCopyToStream = "copy_to_stream";
const std::string kCopyFromStream = "copy_from_stream";
const std::string kCombine = "combine";
const std::string kSend = "send";
const std::string kStreamPut = "stream_put";
const std::string kRecv = "recv";
const std::string kBcast = "bcast";
const std::string kScatter = "scatter";
const std::string kGather = "gather";
const std::string kAllgather = "allgather";
const std::string kReduce = "reduce";
const std::string kAllreduce = "allreduce";
const std::string kReduceScatter = "reduce_scatter";
const std::string kAlltoall = "alltoall";
const std::string kBarrier = "barrier";

using Syncs = std::array<SyncRange, 2>;

Operand memory_operand(const BaseBuffer& buf) {
  Operand op;
  op.type = buf.type();
  op.address = buf.address();
  op.host_only = buf.is_host_only();
  return op;
}

Operand stream_operand(dataType type) {
  Operand op;
  op.type = type;
  op.stream = true;
  return op;
}

std::string format_words(const CallWords& words) {
  std::string text;
  char word[12];
  for (uint32_t w : words.words) {
    std::snprintf(word, sizeof word, "%s%08x", text.empty() ? "" : " ", w);
    text += word;
  }
  return text;
}

const char* function_name(reduceFunction f) {
  switch (f) {
    case reduceFunction::SUM: return "SUM";
    case reduceFunction::MAX: return "MAX";
    case reduceFunction::MIN: return "MIN";
    case reduceFunction::PROD: return "PROD";
  }
  return "unknown";
}

}  // namespace

// ---------------------------------------------------------------------------
// Shared plumbing
// ---------------------------------------------------------------------------

void ACCL::Impl::fail(const std::string& call, const std::string& cause) const {
  const int r = rank.load(std::memory_order_relaxed);
  throw ArgumentError(call, r, "call '" + call + "' on rank " + std::to_string(r) + ": " + cause);
}

void ACCL::Impl::require_initialized(const std::string& call) const {
  if (!initialized) fail(call, "not initialized (call initialize() first, and not after deinit())");
}

std::vector<detail::CommunicatorInfo>::const_iterator ACCL::Impl::find_communicator(communicatorId comm) const {
  // The global communicator is created first and never freed: no search on
  // the common path.
  if (!communicators.empty() && communicators.front().id == comm) return communicators.begin();
  auto it = std::lower_bound(communicators.begin(), communicators.end(), comm,
                             [](const detail::CommunicatorInfo& c, communicatorId id) { return c.id < id; });
  return it != communicators.end() && it->id == comm ? it : communicators.end();
}

const detail::CommunicatorInfo& ACCL::Impl::communicator(const std::string& call, communicatorId comm) const {
  auto it = find_communicator(comm);
  if (it == communicators.end()) fail(call, "communicator " + std::to_string(comm) + " does not exist");
  return *it;
}

std::shared_ptr<detail::CallRequest> ACCL::Impl::launch(const std::string& name, const CallWords& words,
                                                        const Syncs& inputs, const Syncs& outputs,
                                                        const std::vector<RequestPtr>& waitfor) {
  detail::CallRequest::Params params;
  std::vector<CallId> waitfor_ids;
  if (!waitfor.empty()) {
    waitfor_ids.reserve(waitfor.size());
    params.dependencies.reserve(waitfor.size());
    for (const RequestPtr& r : waitfor) {
      auto dep = std::dynamic_pointer_cast<detail::CallRequest>(r);
      if (!dep) fail(name, "waitfor holds an empty request");
      if (dep->context() != context.get()) fail(name, "waitfor holds a request of another ACCL instance");
      if (dep->id() != 0) waitfor_ids.push_back(dep->id());  // 0: completed without the device
      params.dependencies.push_back(std::move(dep));
    }
  }
  context->release_completed_orphans();
  for (const SyncRange& in : inputs) in.to_device();

  ACCL_LOG_DEBUG("{}: words [{}] waitfor {}", name, format_words(words), waitfor_ids.size());
  params.id = device.start(words, waitfor_ids);
  params.context = context;
  params.name = &name;
  params.rank = rank.load(std::memory_order_relaxed);
  params.timeout = timeout;
  params.outputs = outputs;
  return detail::make_request(std::move(params));
}

namespace {

// Validation helpers bound to one call.
class Checker {
 public:
  Checker(const ACCL::Impl& impl, const std::string& call) : impl_(impl), call_(call) {
    impl.require_initialized(call);
  }

  const detail::CommunicatorInfo& comm(communicatorId id) const { return impl_.communicator(call_, id); }

  // `what` holds at least `needed` elements and belongs to this driver.
  void buffer(const char* what, const BaseBuffer& buf, uint64_t needed, const char* why = nullptr) const {
    if (&buf.owner() != &impl_.self) impl_.fail(call_, std::string(what) + " was created by another ACCL instance");
    if (buf.length() < needed)
      impl_.fail(call_, std::string(what) + " holds " + std::to_string(buf.length()) + " elements but the call needs " +
                            std::to_string(needed) + (why ? std::string(" (") + why + ")" : std::string()));
  }

  void rank_in(const char* what, uint32_t r, const detail::CommunicatorInfo& c, bool any_allowed = false) const {
    if (any_allowed && r == abi::kRankAny) return;
    if (r >= c.size)
      impl_.fail(call_, std::string(what) + " " + std::to_string(r) + " is outside the communicator of " +
                            std::to_string(c.size) + " ranks");
  }

  void function(reduceFunction f) const {
    const auto index = static_cast<uint32_t>(f);
    if (index > static_cast<uint32_t>(reduceFunction::PROD))
      impl_.fail(call_, "reduce function " + std::to_string(index) + " does not exist");
    const bool supported = f == reduceFunction::SUM || f == reduceFunction::MAX ||
                           (f == reduceFunction::MIN && (impl_.capabilities & abi::kCapReduceMin)) ||
                           (f == reduceFunction::PROD && (impl_.capabilities & abi::kCapReduceProd));
    if (!supported) impl_.fail(call_, std::string("reduce function ") + function_name(f) + " is not supported by this CCLO");
  }

  void data_type(const char* what, dataType t) const {
    if (abi::data_type_bytes(t) == 0) impl_.fail(call_, std::string(what) + " needs a data type");
  }

  // Public hardware (no capability word) is trusted to implement the call.
  void capability(uint32_t bit, const char* feature) const {
    if ((impl_.capabilities & abi::kCapValid) && !(impl_.capabilities & bit))
      impl_.fail(call_, std::string(feature) + " is not supported by this CCLO");
  }

  void stream_id(uint32_t id) const {
    if (id > abi::kMaxStreamId)
      impl_.fail(call_, "stream id " + std::to_string(id) + " is above the largest, " +
                            std::to_string(abi::kMaxStreamId));
  }

 private:
  const ACCL::Impl& impl_;
  const std::string& call_;
};

SyncRange input(const BaseBuffer& buf, uint64_t elements, bool from_fpga) {
  return from_fpga ? SyncRange{} : BufferAccess::range(buf, elements);
}
SyncRange output(const BaseBuffer& buf, uint64_t elements, bool to_fpga) {
  return to_fpga ? SyncRange{} : BufferAccess::range(buf, elements);
}

// One call of the driver from its first check to its launch. It names the
// rank in the log and holds the driver mutex from before the first check
// until the call is on the device; it releases the mutex before waiting, so
// one thread's blocking call never holds up another thread's call on the
// same driver. A call checks its arguments, fills in `spec` and the ranges to
// sync, and issues.
class Call {
  // Declared before `check`: the rank scope and the lock are in place before
  // the first check runs.
  ACCL::Impl& impl_;
  const std::string& name_;
  log::ScopedRank scoped_rank_;
  std::unique_lock<std::mutex> lock_;

 public:
  Call(ACCL::Impl& impl, const std::string& name)
      : impl_(impl), name_(name), scoped_rank_(impl.rank.load()), lock_(impl.mutex), check(impl, name) {}

  // For calls that move spec.count elements: with none to move, the call
  // completes without the device.
  RequestPtr issue(const std::vector<RequestPtr>& waitfor, bool run_async) {
    return launch(spec.count != 0, waitfor, run_async);
  }

  // For calls without data (nop, barrier): they always reach the device.
  RequestPtr issue_always(const std::vector<RequestPtr>& waitfor, bool run_async) {
    return launch(true, waitfor, run_async);
  }

  const Checker check;
  encoding::CallSpec spec;
  // A call with one range to sync sets it by element (inputs[0] = ...):
  // assigning a braced list built a temporary pair and moved both ranges.
  Syncs inputs;
  Syncs outputs;

 private:
  RequestPtr launch(bool needs_device, const std::vector<RequestPtr>& waitfor, bool run_async) {
    encoding::Encoded encoded = encoding::encode_call(spec, impl_.arith_slots);
    if (!encoded.ok()) impl_.fail(name_, encoded.error);

    std::shared_ptr<detail::CallRequest> request;
    if (!needs_device) {
      if (waitfor.empty()) {
        detail::CallRequest::Params params;
        params.context = impl_.context;
        params.name = &name_;
        params.rank = impl_.rank.load(std::memory_order_relaxed);
        return detail::make_request(std::move(params));
      }
      CallWords nop;
      nop[abi::kWordScenario] = abi::kNop;
      nop[abi::kWordComm] = encoded.words[abi::kWordComm];
      nop[abi::kWordTag] = abi::kTagAny;
      request = impl_.launch(name_, nop, {}, {}, waitfor);
    } else {
      request = impl_.launch(name_, encoded.words, inputs, outputs, waitfor);
    }
    lock_.unlock();
    if (!run_async) request->wait();
    return request;
  }
};

}  // namespace

// ---------------------------------------------------------------------------
// Lifecycle and configuration
// ---------------------------------------------------------------------------

static std::unique_ptr<Device> require_device(std::unique_ptr<Device> device) {
  if (!device) throw ArgumentError("ACCL", -1, "call 'ACCL' on rank -1: no device given");
  // The driver's start-up: a bad core setting stops here, named, not later
  // as a timeout or a firmware code (config::SettingError).
  config::validate(config::Layer::core);
  return device;
}

ACCL::ACCL(std::unique_ptr<Device> device, const arithConfigMap& arith)
    : impl_(std::make_unique<Impl>(*this, require_device(std::move(device)), arith)) {}

ACCL::~ACCL() {
  try {
    deinit();
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("deinit in the destructor failed: {}", e.what());
  } catch (...) {
    ACCL_LOG_ERROR("deinit in the destructor failed");
  }
}

void ACCL::initialize(const std::vector<rank_t>& ranks, int local_rank, unsigned int nbufs, size_t bufsize,
                      size_t max_eager_size, size_t max_rendezvous_size) {
  InitOptions options;
  options.rx_buffer_count = nbufs;
  options.rx_buffer_size = bufsize;
  options.max_eager_size = max_eager_size;
  options.max_rendezvous_size = max_rendezvous_size;
  initialize(ranks, local_rank, options);
}

void ACCL::initialize(const std::vector<rank_t>& ranks, int local_rank, const InitOptions& options) {
  log::ScopedRank scoped(local_rank);
  std::lock_guard lock(impl_->mutex);
  impl_->initialize(ranks, local_rank, options);
}

void ACCL::deinit() {
  log::ScopedRank scoped(impl_->rank.load());
  std::lock_guard lock(impl_->mutex);
  impl_->deinit();
}

void ACCL::soft_reset() {
  log::ScopedRank scoped(impl_->rank.load());
  std::lock_guard lock(impl_->mutex);
  impl_->config_call("soft_reset", abi::kResetPeripherals, 0);
}

bool ACCL::initialized() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->initialized;
}

void ACCL::set_timeout(std::chrono::microseconds timeout) {
  static const std::string kCall = "set_timeout";
  log::ScopedRank scoped(impl_->rank.load());
  std::lock_guard lock(impl_->mutex);
  impl_->require_initialized(kCall);
  if (timeout.count() <= 0 || timeout.count() > std::numeric_limits<uint32_t>::max())
    impl_->fail(kCall, "timeout " + std::to_string(timeout.count()) + " us is not in 1..2^32-1 us");
  impl_->config_call(kCall, abi::kSetTimeout, static_cast<uint32_t>(timeout.count()));
  impl_->timeout = timeout;
}

std::chrono::microseconds ACCL::timeout() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->timeout;
}

void ACCL::set_max_eager_msg_size(size_t bytes) {
  static const std::string kCall = "set_max_eager_msg_size";
  log::ScopedRank scoped(impl_->rank.load());
  std::lock_guard lock(impl_->mutex);
  impl_->require_initialized(kCall);
  if (bytes > std::numeric_limits<uint32_t>::max()) impl_->fail(kCall, "size does not fit in 32 bits");
  impl_->config_call(kCall, abi::kSetMaxEagerSize, static_cast<uint32_t>(bytes));
  impl_->max_eager_size = bytes;
}

void ACCL::set_max_rendezvous_msg_size(size_t bytes) {
  static const std::string kCall = "set_max_rendezvous_msg_size";
  log::ScopedRank scoped(impl_->rank.load());
  std::lock_guard lock(impl_->mutex);
  impl_->require_initialized(kCall);
  if (bytes > std::numeric_limits<uint32_t>::max()) impl_->fail(kCall, "size does not fit in 32 bits");
  impl_->config_call(kCall, abi::kSetMaxRendezvousSize, static_cast<uint32_t>(bytes));
  impl_->max_rendezvous_size = bytes;
}

// ---------------------------------------------------------------------------
// Communicators
// ---------------------------------------------------------------------------

communicatorId ACCL::create_communicator(const std::vector<rank_t>& ranks, int local_rank,
                                         std::optional<uint32_t> context_id) {
  static const std::string kCall = "create_communicator";
  log::ScopedRank scoped(impl_->rank.load());
  std::lock_guard lock(impl_->mutex);
  impl_->require_initialized(kCall);
  return impl_->create_communicator(kCall, ranks, local_rank, context_id);
}

communicatorId ACCL::split_communicator(const std::vector<int>& global_indices, std::optional<uint32_t> context_id) {
  static const std::string kCall = "split_communicator";
  log::ScopedRank scoped(impl_->rank.load());
  std::lock_guard lock(impl_->mutex);
  Impl& im = *impl_;
  im.require_initialized(kCall);
  const auto& global = im.global_ranks;
  std::vector<rank_t> ranks;
  ranks.reserve(global_indices.size());
  std::vector<bool> seen(global.size(), false);
  int local = -1;
  for (size_t i = 0; i < global_indices.size(); ++i) {
    const int g = global_indices[i];
    if (g < 0 || static_cast<size_t>(g) >= global.size())
      im.fail(kCall, "global rank " + std::to_string(g) + " is outside the global communicator of " +
                         std::to_string(global.size()) + " ranks");
    if (seen[static_cast<size_t>(g)]) im.fail(kCall, "global rank " + std::to_string(g) + " is listed twice");
    seen[static_cast<size_t>(g)] = true;
    if (g == im.rank.load()) local = static_cast<int>(i);
    ranks.push_back(global[static_cast<size_t>(g)]);
  }
  if (local < 0) im.fail(kCall, "this rank is not a member of the new communicator");
  return im.create_communicator(kCall, ranks, local, context_id);
}

void ACCL::free_communicator(communicatorId comm) {
  log::ScopedRank scoped(impl_->rank.load());
  std::lock_guard lock(impl_->mutex);
  impl_->require_initialized("free_communicator");
  impl_->free_communicator(comm);
}

std::vector<rank_t> ACCL::get_comm_group(communicatorId comm) {
  std::lock_guard lock(impl_->mutex);
  impl_->require_initialized("get_comm_group");
  return impl_->read_comm_group(comm);
}

unsigned int ACCL::get_comm_rank(communicatorId comm) const {
  std::lock_guard lock(impl_->mutex);
  impl_->require_initialized("get_comm_rank");
  return impl_->communicator("get_comm_rank", comm).local_rank;
}

unsigned int ACCL::get_comm_size(communicatorId comm) const {
  std::lock_guard lock(impl_->mutex);
  impl_->require_initialized("get_comm_size");
  return impl_->communicator("get_comm_size", comm).size;
}

uint32_t ACCL::get_communicator_addr(communicatorId comm) const {
  std::lock_guard lock(impl_->mutex);
  impl_->require_initialized("get_communicator_addr");
  return impl_->communicator("get_communicator_addr", comm).address;
}

uint32_t ACCL::get_arithmetic_config_addr(std::pair<dataType, dataType> key) const {
  static const std::string kCall = "get_arithmetic_config_addr";
  std::lock_guard lock(impl_->mutex);
  impl_->require_initialized(kCall);
  auto it = impl_->arith_slots.find(key);
  if (it == impl_->arith_slots.end())
    impl_->fail(kCall, std::string("no arithmetic configuration for (") + encoding::data_type_name(key.first) + ", " +
                           encoding::data_type_name(key.second) + ")");
  return it->second.address;
}

// ---------------------------------------------------------------------------
// Device facts and dumps
// ---------------------------------------------------------------------------

uint32_t ACCL::get_hwid() { return impl_->device.read(abi::kHwIdOffset); }

uint32_t ACCL::get_capabilities() {
  const uint32_t caps = impl_->device.read(abi::kCapabilitiesOffset);
  return (caps & abi::kCapValid) ? caps : 0;
}

uint32_t ACCL::link_status(unsigned int rank, communicatorId comm) {
  static const std::string kCall = "link_status";
  log::ScopedRank scoped(impl_->rank.load());
  std::lock_guard lock(impl_->mutex);
  impl_->require_initialized(kCall);
  const detail::CommunicatorInfo& c = impl_->communicator(kCall, comm);
  if (rank >= c.size)
    impl_->fail(kCall, "rank " + std::to_string(rank) + " is outside the communicator of " + std::to_string(c.size) +
                           " ranks");
  if ((get_capabilities() & abi::kCapLinkStatus) == 0)
    impl_->fail(kCall, "the device does not report link status (no link-status capability)");
  CallWords words{};
  words[abi::kWordScenario] = abi::kConfig;
  words[abi::kWordFunction] = abi::kGetLinkStatus;
  words[abi::kWordComm] = c.address;
  words[abi::kWordRootSrcDst] = rank;
  words[abi::kWordTag] = abi::kTagAny;
  static const std::vector<RequestPtr> no_waitfor;
  auto request = impl_->launch(kCall, words, {}, {}, no_waitfor);
  try {
    request->wait();
  } catch (const DeviceError& e) {
    return e.retcode();  // the answer, not a failure of the call
  }
  return 0;
}

bool ACCL::supports(reduceFunction f) {
  const uint32_t caps = get_capabilities();
  switch (f) {
    case reduceFunction::SUM:
    case reduceFunction::MAX: return true;
    case reduceFunction::MIN: return (caps & abi::kCapReduceMin) != 0;
    case reduceFunction::PROD: return (caps & abi::kCapReduceProd) != 0;
  }
  return false;
}

bool ACCL::is_simulated() const { return impl_->device.simulated(); }

Device& ACCL::device() { return impl_->device; }

int ACCL::local_rank() const { return impl_->rank.load(std::memory_order_relaxed); }

std::string ACCL::dump_exchange_memory() {
  // Four words per line; runs of all-zero lines collapse into one "*" line
  // (like hexdump) so the dump stays readable.
  std::string text;
  char line[64];
  bool in_zero_run = false;
  for (uint32_t offset = 0; offset < abi::kExchangeMemorySize; offset += 16) {
    uint32_t w[4];
    for (uint32_t i = 0; i < 4; ++i) w[i] = impl_->device.read(offset + 4 * i);
    const bool zero = (w[0] | w[1] | w[2] | w[3]) == 0;
    if (zero && in_zero_run) continue;
    in_zero_run = zero;
    if (zero && offset != 0) {
      text += "*\n";
      continue;
    }
    std::snprintf(line, sizeof line, "0x%04x: %08x %08x %08x %08x\n", offset, w[0], w[1], w[2], w[3]);
    text += line;
  }
  return text;
}

std::string ACCL::dump_rx_buffers() {
  Device& dev = impl_->device;
  const uint32_t count = dev.read(abi::kRxBufferCountOffset);
  const uint32_t max_records = (abi::kConfigAreaEnd - abi::kRxBufferTableOffset) / abi::kRxBufferRecordBytes;
  std::string text = "RX buffers: " + std::to_string(count) + " of " +
                     std::to_string(dev.read(abi::kRxBufferSizeOffset)) + " bytes\n";
  char line[160];
  for (uint32_t i = 0; i < std::min(count, max_records); ++i) {
    const uint32_t base = abi::kRxBufferTableOffset + i * abi::kRxBufferRecordBytes;
    uint32_t f[abi::kRxBufferRecordWords];
    for (uint32_t w = 0; w < abi::kRxBufferRecordWords; ++w) f[w] = dev.read(base + 4 * w);
    const char* status = f[abi::kRxStatus] == abi::kRxIdle       ? "idle"
                         : f[abi::kRxStatus] == abi::kRxEnqueued ? "enqueued"
                         : f[abi::kRxStatus] == abi::kRxReserved ? "reserved"
                         : f[abi::kRxStatus] == abi::kRxError    ? "error"
                                                                 : "unknown";
    std::snprintf(line, sizeof line, "%3u %-8s addr 0x%08x%08x tag 0x%08x len %u src %u seqn %u\n", i, status,
                  f[abi::kRxAddrHigh], f[abi::kRxAddrLow], f[abi::kRxTag], f[abi::kRxLen], f[abi::kRxSrc],
                  f[abi::kRxSeqn]);
    text += line;
  }
  return text;
}

std::string ACCL::dump_communicator(communicatorId comm) {
  uint32_t address;
  {
    std::lock_guard lock(impl_->mutex);
    impl_->require_initialized("dump_communicator");
    address = impl_->communicator("dump_communicator", comm).address;
  }
  Device& dev = impl_->device;
  const uint32_t size = dev.read(address + 4 * abi::kCommSizeWord);
  char line[192];
  std::snprintf(line, sizeof line, "communicator %u at 0x%04x: %u ranks, local rank %u, context %u\n", comm, address,
                size, dev.read(address + 4 * abi::kCommLocalRankWord),
                dev.read(address + 4 * abi::comm_context_word(size)));
  std::string text = line;
  for (uint32_t r = 0; r < size; ++r) {
    const uint32_t base = address + 4 * (abi::kCommRanksWord + r * abi::kCommRankRecordWords);
    uint32_t f[abi::kCommRankRecordWords];
    for (uint32_t w = 0; w < abi::kCommRankRecordWords; ++w) f[w] = dev.read(base + 4 * w);
    std::snprintf(line, sizeof line,
                  "%4u ip %u.%u.%u.%u port %u in-seq %u out-seq %u session 0x%08x max-segment %u\n", r,
                  f[abi::kRankIp] >> 24, (f[abi::kRankIp] >> 16) & 0xFF, (f[abi::kRankIp] >> 8) & 0xFF,
                  f[abi::kRankIp] & 0xFF, f[abi::kRankPort], f[abi::kRankInboundSeq], f[abi::kRankOutboundSeq],
                  f[abi::kRankSession], f[abi::kRankMaxSegment]);
    text += line;
  }
  return text;
}

// ---------------------------------------------------------------------------
// Primitives
// ---------------------------------------------------------------------------

RequestPtr ACCL::nop(bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kNop);
  call.spec = {.scenario = abi::kNop, .comm_address = call.check.comm(GLOBAL_COMM).address};
  return call.issue_always(waitfor, run_async);
}

RequestPtr ACCL::copy(BaseBuffer& src, BaseBuffer& dst, unsigned int count, bool from_fpga, bool to_fpga,
                      bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kCopy);
  call.check.buffer("src", src, count);
  call.check.buffer("dst", dst, count);
  call.spec = {.scenario = abi::kCopy, .count = count, .comm_address = call.check.comm(GLOBAL_COMM).address,
               .op0 = memory_operand(src), .result = memory_operand(dst)};
  call.inputs[0] = input(src, count, from_fpga);
  call.outputs[0] = output(dst, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::copy_to_stream(BaseBuffer& src, unsigned int count, bool from_fpga, bool run_async,
                                const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kCopyToStream);
  call.check.buffer("src", src, count);
  call.spec = {.scenario = abi::kCopy, .count = count, .comm_address = call.check.comm(GLOBAL_COMM).address,
               .op0 = memory_operand(src), .result = stream_operand(src.type())};
  call.inputs[0] = input(src, count, from_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::copy_from_stream(BaseBuffer& dst, unsigned int count, bool to_fpga, bool run_async,
                                  const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kCopyFromStream);
  call.check.buffer("dst", dst, count);
  call.spec = {.scenario = abi::kCopy, .count = count, .comm_address = call.check.comm(GLOBAL_COMM).address,
               .op0 = stream_operand(dst.type()), .result = memory_operand(dst)};
  call.outputs[0] = output(dst, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::combine(unsigned int count, reduceFunction function, BaseBuffer& val1, BaseBuffer& val2,
                         BaseBuffer& result, bool val1_from_fpga, bool val2_from_fpga, bool to_fpga, bool run_async,
                         const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kCombine);
  call.check.buffer("val1", val1, count);
  call.check.buffer("val2", val2, count);
  call.check.buffer("result", result, count);
  call.check.function(function);
  call.spec = {.scenario = abi::kCombine, .count = count, .comm_address = call.check.comm(GLOBAL_COMM).address,
               .function = static_cast<uint32_t>(function), .op0 = memory_operand(val1), .op1 = memory_operand(val2),
               .result = memory_operand(result)};
  call.inputs = {input(val1, count, val1_from_fpga), input(val2, count, val2_from_fpga)};
  call.outputs[0] = output(result, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::send(BaseBuffer& src, unsigned int count, unsigned int dst, unsigned int tag, communicatorId comm,
                      bool from_fpga, dataType compress_dtype, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kSend);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("destination", dst, c);
  call.check.buffer("src", src, count);
  call.spec = {.scenario = abi::kSend, .count = count, .comm_address = c.address, .root_src_dst = dst, .tag = tag,
               .op0 = memory_operand(src), .compress_dtype = compress_dtype};
  call.inputs[0] = input(src, count, from_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::send(dataType src_type, unsigned int count, unsigned int dst, unsigned int tag, communicatorId comm,
                      dataType compress_dtype, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kSend);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("destination", dst, c);
  call.check.data_type("the stream", src_type);
  call.spec = {.scenario = abi::kSend, .count = count, .comm_address = c.address, .root_src_dst = dst, .tag = tag,
               .op0 = stream_operand(src_type), .compress_dtype = compress_dtype};
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::stream_put(BaseBuffer& src, unsigned int count, unsigned int dst, unsigned int stream_id,
                            communicatorId comm, bool from_fpga, dataType compress_dtype, bool run_async,
                            const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kStreamPut);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("destination", dst, c);
  call.check.stream_id(stream_id);
  call.check.buffer("src", src, count);
  // The stream id goes in the tag: the remote CCLO pushes to that stream instead of matching a recv.
  call.spec = {.scenario = abi::kSend, .count = count, .comm_address = c.address, .root_src_dst = dst,
               .tag = stream_id, .op0 = memory_operand(src), .result = stream_operand(src.type()),
               .compress_dtype = compress_dtype};
  call.inputs[0] = input(src, count, from_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::recv(BaseBuffer& dst, unsigned int count, unsigned int src, unsigned int tag, communicatorId comm,
                      bool to_fpga, dataType compress_dtype, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kRecv);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("source", src, c, true);
  call.check.buffer("dst", dst, count);
  call.spec = {.scenario = abi::kRecv, .count = count, .comm_address = c.address, .root_src_dst = src, .tag = tag,
               .result = memory_operand(dst), .compress_dtype = compress_dtype};
  call.outputs[0] = output(dst, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::recv(dataType dst_type, unsigned int count, unsigned int src, unsigned int tag, communicatorId comm,
                      dataType compress_dtype, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kRecv);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("source", src, c, true);
  call.check.data_type("the stream", dst_type);
  call.spec = {.scenario = abi::kRecv, .count = count, .comm_address = c.address, .root_src_dst = src, .tag = tag,
               .result = stream_operand(dst_type), .compress_dtype = compress_dtype};
  return call.issue(waitfor, run_async);
}

// ---------------------------------------------------------------------------
// Collectives
// ---------------------------------------------------------------------------

RequestPtr ACCL::bcast(BaseBuffer& buf, unsigned int count, unsigned int root, communicatorId comm, bool from_fpga,
                       bool to_fpga, dataType compress_dtype, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kBcast);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("root", root, c);
  call.check.buffer("buf", buf, count);
  call.spec = {.scenario = abi::kBcast, .count = count, .comm_address = c.address, .root_src_dst = root,
               .op0 = memory_operand(buf), .result = memory_operand(buf), .compress_dtype = compress_dtype};
  // Only the root's data goes out; only the others' buffers change.
  const bool is_root = c.local_rank == root;
  call.inputs[0] = input(buf, is_root ? count : 0, from_fpga);
  call.outputs[0] = output(buf, is_root ? 0 : count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::scatter(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, unsigned int root,
                         communicatorId comm, bool from_fpga, bool to_fpga, dataType compress_dtype, bool run_async,
                         const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kScatter);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("root", root, c);
  const bool is_root = c.local_rank == root;
  const uint64_t all = uint64_t{count} * c.size;
  call.check.buffer("sendbuf", sendbuf, is_root ? all : 0, "count x communicator size on the root");
  call.check.buffer("recvbuf", recvbuf, count);
  call.spec = {.scenario = abi::kScatter, .count = count, .comm_address = c.address, .root_src_dst = root,
               .op0 = memory_operand(sendbuf), .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, is_root ? all : 0, from_fpga);
  call.outputs[0] = output(recvbuf, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::gather(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, unsigned int root,
                        communicatorId comm, bool from_fpga, bool to_fpga, dataType compress_dtype, bool run_async,
                        const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kGather);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("root", root, c);
  const bool is_root = c.local_rank == root;
  const uint64_t all = uint64_t{count} * c.size;
  call.check.buffer("sendbuf", sendbuf, count);
  call.check.buffer("recvbuf", recvbuf, is_root ? all : 0, "count x communicator size on the root");
  call.spec = {.scenario = abi::kGather, .count = count, .comm_address = c.address, .root_src_dst = root,
               .op0 = memory_operand(sendbuf), .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, count, from_fpga);
  call.outputs[0] = output(recvbuf, is_root ? all : 0, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::allgather(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, communicatorId comm,
                           bool from_fpga, bool to_fpga, dataType compress_dtype, bool run_async,
                           const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kAllgather);
  const auto& c = call.check.comm(comm);
  const uint64_t all = uint64_t{count} * c.size;
  call.check.buffer("sendbuf", sendbuf, count);
  call.check.buffer("recvbuf", recvbuf, all, "count x communicator size");
  call.spec = {.scenario = abi::kAllgather, .count = count, .comm_address = c.address, .op0 = memory_operand(sendbuf),
               .op1 = memory_operand(recvbuf), .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, count, from_fpga);
  call.outputs[0] = output(recvbuf, all, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::reduce(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, unsigned int root,
                        reduceFunction func, communicatorId comm, bool from_fpga, bool to_fpga,
                        dataType compress_dtype, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kReduce);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("root", root, c);
  call.check.function(func);
  const bool is_root = c.local_rank == root;
  call.check.buffer("sendbuf", sendbuf, count);
  call.check.buffer("recvbuf", recvbuf, is_root ? count : 0, "on the root");
  call.spec = {.scenario = abi::kReduce, .count = count, .comm_address = c.address, .root_src_dst = root,
               .function = static_cast<uint32_t>(func), .op0 = memory_operand(sendbuf),
               .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, count, from_fpga);
  call.outputs[0] = output(recvbuf, is_root ? count : 0, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::allreduce(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, reduceFunction func,
                           communicatorId comm, bool from_fpga, bool to_fpga, dataType compress_dtype, bool run_async,
                           const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kAllreduce);
  const auto& c = call.check.comm(comm);
  call.check.function(func);
  call.check.buffer("sendbuf", sendbuf, count);
  call.check.buffer("recvbuf", recvbuf, count);
  call.spec = {.scenario = abi::kAllreduce, .count = count, .comm_address = c.address,
               .function = static_cast<uint32_t>(func), .op0 = memory_operand(sendbuf), .op1 = memory_operand(recvbuf),
               .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, count, from_fpga);
  call.outputs[0] = output(recvbuf, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::reduce_scatter(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, reduceFunction func,
                                communicatorId comm, bool from_fpga, bool to_fpga, dataType compress_dtype,
                                bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kReduceScatter);
  const auto& c = call.check.comm(comm);
  call.check.function(func);
  const uint64_t all = uint64_t{count} * c.size;
  call.check.buffer("sendbuf", sendbuf, all, "count x communicator size");
  call.check.buffer("recvbuf", recvbuf, count);
  call.spec = {.scenario = abi::kReduceScatter, .count = count, .comm_address = c.address,
               .function = static_cast<uint32_t>(func), .op0 = memory_operand(sendbuf),
               .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, all, from_fpga);
  call.outputs[0] = output(recvbuf, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::alltoall(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, communicatorId comm,
                          bool from_fpga, bool to_fpga, dataType compress_dtype, bool run_async,
                          const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kAlltoall);
  const auto& c = call.check.comm(comm);
  call.check.capability(abi::kCapAlltoall, "alltoall");
  const uint64_t all = uint64_t{count} * c.size;
  call.check.buffer("sendbuf", sendbuf, all, "count x communicator size");
  call.check.buffer("recvbuf", recvbuf, all, "count x communicator size");
  call.spec = {.scenario = abi::kAlltoall, .count = count, .comm_address = c.address, .op0 = memory_operand(sendbuf),
               .op1 = memory_operand(recvbuf), .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, all, from_fpga);
  call.outputs[0] = output(recvbuf, all, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::barrier(communicatorId comm, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kBarrier);
  const auto& c = call.check.comm(comm);
  call.check.capability(abi::kCapBarrier, "barrier");
  call.spec = {.scenario = abi::kBarrier, .comm_address = c.address};
  return call.issue_always(waitfor, run_async);
}

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

static Request& require_request(const ACCL::Impl& impl, const RequestPtr& request, const char* call) {
  if (!request) impl.fail(call, "the request is empty");
  return *request;
}

void ACCL::wait(const RequestPtr& request) { require_request(*impl_, request, "wait").wait(); }

bool ACCL::wait(const RequestPtr& request, std::chrono::milliseconds timeout) {
  return require_request(*impl_, request, "wait").wait(timeout);
}

bool ACCL::test(const RequestPtr& request) { return require_request(*impl_, request, "test").test(); }

}  // namespace accl
