// SPDX-License-Identifier: Apache-2.0
//
// The ACCL driver around its calls: the launch every call ends in, the
// lifecycle and settings, communicators, device facts and dumps, and waiting
// on requests. The calls themselves are in point_to_point.cpp and
// collectives.cpp, what each of them does on its way in call.hpp.
#include <accl/accl.hpp>
#include <accl/config.hpp>
#include <accl/log.hpp>

#include "internal.hpp"
#include "public_firmware.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace accl {
namespace {

std::string format_words(const CallWords& words) {
  std::string text;
  char word[12];
  for (uint32_t w : words.words) {
    std::snprintf(word, sizeof word, "%s%08x", text.empty() ? "" : " ", w);
    text += word;
  }
  return text;
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
                                                        const detail::Syncs& inputs, const detail::Syncs& outputs,
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
  for (const detail::SyncRange& in : inputs) in.to_device();

  ACCL_LOG_DEBUG("{}: words [{}] waitfor {}", name, format_words(words), waitfor_ids.size());
  params.id = device.start(words, waitfor_ids);
  params.context = context;
  params.name = &name;
  params.rank = rank.load(std::memory_order_relaxed);
  params.timeout = timeout;
  params.outputs = outputs;
  return detail::make_request(std::move(params));
}

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
  const bool public_firmware = detail::public_fw::applies(impl_->capabilities);
  impl_->config_call(kCall, abi::kSetTimeout,
                     public_firmware ? detail::public_fw::timeout_counter(timeout)
                                     : static_cast<uint32_t>(timeout.count()));
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
  if (detail::public_fw::applies(impl_->capabilities)) {
    // The public firmware checks only the RX buffer size here; a rendezvous
    // size left at or below the new eager size would break its rule too.
    const std::string problem =
        detail::public_fw::threshold_problem(impl_->rx_buffer_size, bytes, impl_->max_rendezvous_size);
    if (!problem.empty()) impl_->fail(kCall, problem);
  }
  impl_->config_call(kCall, abi::kSetMaxEagerSize, static_cast<uint32_t>(bytes));
  impl_->max_eager_size = bytes;
}

void ACCL::set_max_rendezvous_msg_size(size_t bytes) {
  static const std::string kCall = "set_max_rendezvous_msg_size";
  log::ScopedRank scoped(impl_->rank.load());
  std::lock_guard lock(impl_->mutex);
  impl_->require_initialized(kCall);
  if (bytes > std::numeric_limits<uint32_t>::max()) impl_->fail(kCall, "size does not fit in 32 bits");
  if (detail::public_fw::applies(impl_->capabilities)) {
    const std::string problem =
        detail::public_fw::threshold_problem(impl_->rx_buffer_size, impl_->max_eager_size, bytes);
    if (!problem.empty()) impl_->fail(kCall, problem);
  }
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
  const uint32_t needs = abi::reduce_function_capabilities(static_cast<uint32_t>(f));
  return (get_capabilities() & needs) == needs;
}

bool ACCL::supports(reduceFunction f, dataType t) {
  if (!supports(f)) return false;
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->arith_slots.find({t, t});
  const auto index = static_cast<uint32_t>(f);
  return it != impl_->arith_slots.end() && index < it->second.num_functions &&
         (it->second.undefined_functions >> index & 1u) == 0;
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
  bool with_context;
  {
    std::lock_guard lock(impl_->mutex);
    impl_->require_initialized("dump_communicator");
    address = impl_->communicator("dump_communicator", comm).address;
    with_context = !detail::public_fw::applies(impl_->capabilities);
  }
  Device& dev = impl_->device;
  const uint32_t size = dev.read(address + 4 * abi::kCommSizeWord);
  char line[192];
  // A public firmware's record has no context word (the next word is not ours).
  const std::string context =
      with_context ? std::to_string(dev.read(address + 4 * abi::comm_context_word(size))) : std::string("none");
  std::snprintf(line, sizeof line, "communicator %u at 0x%04x: %u ranks, local rank %u, context %s\n", comm, address,
                size, dev.read(address + 4 * abi::kCommLocalRankWord), context.c_str());
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
