// SPDX-License-Identifier: Apache-2.0
//
// Configuration of the CCLO: initialize/deinit, the exchange-memory layout
// (RX buffer table, spare buffers, communicators, arithmetic configurations,
// tuning registers) and communicator management.
#include <accl/accl.hpp>
#include <accl/config.hpp>
#include <accl/log.hpp>

#include "internal.hpp"
#include "public_firmware.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <limits>

namespace accl {
namespace {

constexpr uint32_t kWordBytes = 4;

// Public ACCL's tuning defaults (accl-reference §1.2 step 8).
constexpr uint32_t kDefaultGatherFlatTreeMaxFanin = 2;
constexpr uint32_t kDefaultGatherFlatTreeMaxCount = 32768;
constexpr uint32_t kDefaultBcastFlatTreeMaxRanks = 3;
constexpr uint32_t kDefaultReduceFlatTreeMaxRanks = 4;
constexpr uint32_t kReduceFlatTreeMaxCountCap = 32768;

// Public ACCL allocates three rendezvous scratch ("spare") buffers.
constexpr uint32_t kSpareOffsets[] = {abi::kSpare1Offset, abi::kSpare2Offset, abi::kSpare3Offset};

uint32_t arith_record_bytes(const ArithConfig& c) {
  return (abi::kArithFunctionIds + static_cast<uint32_t>(c.arith_tdest.size())) * kWordBytes;
}

uint32_t comm_record_bytes(size_t nranks) {
  return abi::comm_record_words(static_cast<uint32_t>(nranks)) * kWordBytes;
}

// IPv4 dotted quad -> host-order integer (10.10.10.1 == 0x0A0A0A01).
std::optional<uint32_t> parse_ipv4(const std::string& ip) {
  in_addr addr{};
  if (inet_pton(AF_INET, ip.c_str(), &addr) != 1) return std::nullopt;
  return ntohl(addr.s_addr);
}

std::string format_ipv4(uint32_t host_order) {
  in_addr addr{};
  addr.s_addr = htonl(host_order);
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &addr, text, sizeof text);
  return text;
}

uint32_t clamp_to_word(uint64_t value) {
  return static_cast<uint32_t>(std::min<uint64_t>(value, std::numeric_limits<uint32_t>::max()));
}

}  // namespace

ACCL::Impl::Impl(ACCL& owner, std::unique_ptr<Device> dev, const arithConfigMap& arith_map)
    : self(owner),
      context(std::make_shared<detail::DeviceContext>(std::move(dev))),
      device(*context->device),
      arith(arith_map),
      timeout(std::chrono::duration_cast<std::chrono::microseconds>(config::get_ms("ACCL_TIMEOUT_MS"))) {}

void ACCL::Impl::config_call(const std::string& name, abi::ConfigFunction function, uint32_t value) {
  CallWords words;
  words[abi::kWordScenario] = abi::kConfig;
  words[abi::kWordFunction] = function;
  words[abi::kWordCount] = value;
  // Public ACCL leaves tag at TAG_ANY in every call that has none.
  words[abi::kWordTag] = abi::kTagAny;
  static const std::vector<RequestPtr> no_waitfor;
  auto request = launch(name, words, {}, {}, no_waitfor);
  request->wait();
}

void ACCL::Impl::initialize(const std::vector<rank_t>& ranks, int local_rank, const InitOptions& options) {
  static const std::string kCall = "initialize";
  if (initialized) fail(kCall, "already initialized; call deinit() first");
  if (ranks.empty()) fail(kCall, "the rank list is empty");
  if (local_rank < 0 || static_cast<size_t>(local_rank) >= ranks.size())
    fail(kCall, "local rank " + std::to_string(local_rank) + " is outside the " + std::to_string(ranks.size()) +
                    " ranks");
  rank = local_rank;
  if (options.rx_buffer_count == 0) fail(kCall, "at least one RX buffer is needed");
  if (options.rx_buffer_size == 0 || options.rx_buffer_size > std::numeric_limits<uint32_t>::max())
    fail(kCall, "RX buffer size " + std::to_string(options.rx_buffer_size) + " is not in 1..2^32-1 bytes");
  if (options.max_eager_size > std::numeric_limits<uint32_t>::max() ||
      options.max_rendezvous_size > std::numeric_limits<uint32_t>::max())
    fail(kCall, "message size thresholds must fit in 32 bits");
  for (const auto& [key, cfg] : arith)
    if (cfg.arith_tdest.size() > abi::kMaxReduceFunctions)
      fail(kCall, "an arithmetic configuration lists " + std::to_string(cfg.arith_tdest.size()) +
                      " functions; the CCLO takes at most " + std::to_string(abi::kMaxReduceFunctions));

  (void)checked_ips(kCall, ranks);

  // Everything the driver places in exchange memory must fit below the tuning
  // registers; check before touching the device.
  const uint64_t rx_table_end =
      abi::kRxBufferTableOffset + uint64_t{abi::kRxBufferRecordBytes} * options.rx_buffer_count;
  uint64_t needed = rx_table_end + comm_record_bytes(ranks.size());
  // Extension types are optional (loaded while they fit, see
  // load_arithmetic_configs); public ACCL's must fit.
  for (const auto& [key, cfg] : arith)
    if (abi::data_type_capabilities(key.first) == 0 && abi::data_type_capabilities(key.second) == 0)
      needed += arith_record_bytes(cfg);
  if (needed > abi::kConfigAreaEnd)
    fail(kCall, std::to_string(options.rx_buffer_count) + " RX buffers, a communicator of " +
                    std::to_string(ranks.size()) + " ranks and the arithmetic configurations need " +
                    std::to_string(needed) + " bytes of exchange memory; only " +
                    std::to_string(abi::kConfigAreaEnd) + " exist");

  if (options.timeout.count() > 0) timeout = options.timeout;
  rx_buffer_size = options.rx_buffer_size;
  max_eager_size = options.max_eager_size;
  max_rendezvous_size = options.max_rendezvous_size;

  try {
    config_call("soft_reset", abi::kResetPeripherals, 0);
    const uint32_t caps = device.read(abi::kCapabilitiesOffset);
    capabilities = (caps & abi::kCapValid) ? caps : 0;
    hwid = device.read(abi::kHwIdOffset);
    // The public firmware would refuse these at its config calls below, after
    // the buffers are in place: say why before anything is allocated.
    if (detail::public_fw::applies(capabilities)) {
      const std::string problem =
          detail::public_fw::threshold_problem(rx_buffer_size, max_eager_size, max_rendezvous_size);
      if (!problem.empty()) fail(kCall, problem);
    }

    // RX buffers: zeroed device memory, one record each; the count goes in
    // last because the CCLO starts using the table as soon as it is non-zero.
    const std::vector<char> zeros(rx_buffer_size, 0);
    for (uint32_t i = 0; i < options.rx_buffer_count; ++i) {
      DeviceAllocation buf = device.allocate(rx_buffer_size, MemoryKind::device, 0);
      rx_buffers.push_back(buf);
      device.copy_to_device(buf.address, zeros.data(), zeros.size());
      const uint32_t record = abi::kRxBufferTableOffset + i * abi::kRxBufferRecordBytes;
      device.write(record + abi::kRxStatus * kWordBytes, abi::kRxIdle);
      device.write(record + abi::kRxAddrLow * kWordBytes, static_cast<uint32_t>(buf.address));
      device.write(record + abi::kRxAddrHigh * kWordBytes, static_cast<uint32_t>(buf.address >> 32));
      for (uint32_t w = abi::kRxTag; w < abi::kRxBufferRecordWords; ++w) device.write(record + w * kWordBytes, 0);
    }
    device.write(abi::kRxBufferSizeOffset, static_cast<uint32_t>(rx_buffer_size));
    device.write(abi::kRxBufferCountOffset, options.rx_buffer_count);

    // Rendezvous scratch buffers (address 0: eager only).
    for (uint32_t offset : kSpareOffsets) {
      uint64_t address = 0;
      if (max_rendezvous_size > 0) {
        DeviceAllocation spare = device.allocate(max_rendezvous_size, MemoryKind::device, 0);
        spare_buffers.push_back(spare);
        address = spare.address;
      }
      device.write(offset, static_cast<uint32_t>(address));
      device.write(offset + kWordBytes, static_cast<uint32_t>(address >> 32));
    }

    exchange.reset(static_cast<uint32_t>(rx_table_end), abi::kConfigAreaEnd);
    communicators.clear();
    next_communicator_id = 0;
    communicators_created = 0;
    global_ranks = ranks;
    create_communicator(kCall, ranks, local_rank, std::nullopt);

    load_arithmetic_configs();

    device.write(abi::kGatherFlatTreeMaxFanin, kDefaultGatherFlatTreeMaxFanin);
    device.write(abi::kGatherFlatTreeMaxCount, kDefaultGatherFlatTreeMaxCount);
    device.write(abi::kBcastFlatTreeMaxRanks, kDefaultBcastFlatTreeMaxRanks);
    device.write(abi::kReduceFlatTreeMaxRanks, kDefaultReduceFlatTreeMaxRanks);
    device.write(abi::kReduceFlatTreeMaxCount,
                 std::min<uint32_t>(static_cast<uint32_t>(max_rendezvous_size / 4), kReduceFlatTreeMaxCountCap));
    device.write(abi::kConfigReadyOffset, 1);

    config_call("set_timeout", abi::kSetTimeout,
                detail::public_fw::applies(capabilities)
                    ? detail::public_fw::timeout_counter(timeout)
                    : clamp_to_word(static_cast<uint64_t>(timeout.count())));
    config_call("set_max_eager_msg_size", abi::kSetMaxEagerSize, static_cast<uint32_t>(max_eager_size));
    config_call("set_max_rendezvous_msg_size", abi::kSetMaxRendezvousSize,
                static_cast<uint32_t>(max_rendezvous_size));
    config_call("enable_packets", abi::kEnablePackets, 0);
  } catch (...) {
    release_configuration_memory();
    throw;
  }
  initialized = true;
  ACCL_LOG_INFO("initialized on {}: {} ranks, {} RX buffers of {} bytes, eager <= {} bytes, rendezvous scratch {} "
                "bytes, timeout {} us, capabilities {:#x}",
                device.name(), ranks.size(), options.rx_buffer_count, rx_buffer_size, max_eager_size,
                max_rendezvous_size, timeout.count(), capabilities);
}

// Writes the arithmetic configurations: public ACCL's types first (their
// room was checked), then the extension types the device reports, each while
// exchange memory has room (a type left out makes supports(f, type) false and
// its calls fail in the driver). Function entries past PROD are written only
// to a device that reports a function there, so public hardware gets public
// ACCL's records.
void ACCL::Impl::load_arithmetic_configs() {
  const uint32_t extended_functions = abi::kCapReduceBitwise | abi::kCapReduceLogical | abi::kCapReduceLoc;
  const size_t max_functions = (capabilities & extended_functions) ? abi::kMaxReduceFunctions : abi::kProd + 1;
  arith_slots.clear();
  for (const bool extension : {false, true}) {
    for (const auto& [key, cfg] : arith) {
      const uint32_t needs = abi::data_type_capabilities(key.first) | abi::data_type_capabilities(key.second);
      if ((needs != 0) != extension) continue;
      if ((capabilities & needs) != needs) continue;  // the device does not have the type
      std::vector<uint32_t> functions = cfg.arith_tdest;
      if (functions.size() > max_functions) functions.resize(max_functions);
      const uint32_t bytes = (abi::kArithFunctionIds + static_cast<uint32_t>(functions.size())) * kWordBytes;
      const std::optional<uint32_t> slot = exchange.allocate(bytes);
      if (!slot) {  // only an extension can miss: the others were counted before
        ACCL_LOG_WARN("arithmetic configuration ({}, {}) left out: exchange memory is full",
                      encoding::data_type_name(key.first), encoding::data_type_name(key.second));
        continue;
      }
      const uint32_t address = *slot;
      auto word = [&](uint32_t index, uint32_t value) { device.write(address + index * kWordBytes, value); };
      word(abi::kArithUncompressedBytes, cfg.uncompressed_elem_bytes);
      word(abi::kArithCompressedBytes, cfg.compressed_elem_bytes);
      word(abi::kArithRatioLog, cfg.elem_ratio_log);
      word(abi::kArithCompressorId, cfg.compressor_tdest);
      word(abi::kArithDecompressorId, cfg.decompressor_tdest);
      word(abi::kArithNumFunctions, static_cast<uint32_t>(functions.size()));
      word(abi::kArithIsCompressed, cfg.arith_is_compressed ? 1 : 0);
      uint32_t undefined = 0;
      for (size_t f = 0; f < functions.size(); ++f) {
        word(abi::kArithFunctionIds + static_cast<uint32_t>(f), functions[f]);
        if (functions[f] == abi::kFnNone) undefined |= 1u << f;
      }
      arith_slots[key] = {address, static_cast<uint32_t>(functions.size()), undefined};
    }
  }
}

void ACCL::Impl::release_configuration_memory() {
  for (const auto& buf : rx_buffers) device.free(buf);
  for (const auto& buf : spare_buffers) device.free(buf);
  rx_buffers.clear();
  spare_buffers.clear();
  communicators.clear();
  arith_slots.clear();
  global_ranks.clear();
}

void ACCL::Impl::deinit() {
  if (!initialized) return;
  initialized = false;
  try {
    // Stops the firmware from touching RX and spare buffers before they go.
    config_call("soft_reset", abi::kResetPeripherals, 0);
  } catch (const std::exception& e) {
    ACCL_LOG_WARN("soft reset during deinit failed: {}", e.what());
  }
  release_configuration_memory();
}

std::vector<uint32_t> ACCL::Impl::checked_ips(const std::string& call, const std::vector<rank_t>& ranks) const {
  std::vector<uint32_t> ips(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    auto ip = parse_ipv4(ranks[r].ip);
    if (!ip) fail(call, "rank " + std::to_string(r) + " has IP '" + ranks[r].ip + "', which is not IPv4");
    if (ranks[r].port < 0 || ranks[r].port > 65535)
      fail(call, "rank " + std::to_string(r) + " has port " + std::to_string(ranks[r].port));
    ips[r] = *ip;
  }
  return ips;
}

communicatorId ACCL::Impl::create_communicator(const std::string& call, const std::vector<rank_t>& ranks,
                                               int local_rank, std::optional<uint32_t> context_id) {
  if (ranks.empty()) fail(call, "the rank list is empty");
  if (local_rank < 0 || static_cast<size_t>(local_rank) >= ranks.size())
    fail(call, "local rank " + std::to_string(local_rank) + " is outside the " + std::to_string(ranks.size()) +
                   " ranks");
  // The header carries (context id << 1) | collective. The public firmware
  // has no context-id word: its record ends after the ranks, as public ACCL
  // writes it, and an explicit context id cannot be honoured.
  const bool with_context = !detail::public_fw::applies(capabilities);
  if (!with_context && context_id)
    fail(call, "context id " + std::to_string(*context_id) +
                   " given, but the public firmware (no capability word) has no context-id word");
  const uint32_t context = with_context ? context_id.value_or(communicators_created) : 0;
  if (context >= (1u << 31)) fail(call, "context id " + std::to_string(context) + " does not fit in 31 bits");

  const std::vector<uint32_t> ips = checked_ips(call, ranks);

  const uint32_t bytes = comm_record_bytes(ranks.size()) - (with_context ? 0 : kWordBytes);
  const auto address = exchange.allocate(bytes);
  if (!address)
    fail(call, "exchange memory is full: a communicator of " + std::to_string(ranks.size()) + " ranks needs " +
                   std::to_string(bytes) + " bytes, the largest free block has " +
                   std::to_string(exchange.largest_free_block()) + " (free unused communicators first)");

  auto word = [&](uint32_t index, uint32_t value) { device.write(*address + index * kWordBytes, value); };
  const auto nranks = static_cast<uint32_t>(ranks.size());
  word(abi::kCommSizeWord, nranks);
  word(abi::kCommLocalRankWord, static_cast<uint32_t>(local_rank));
  for (uint32_t r = 0; r < nranks; ++r) {
    const uint32_t base = abi::kCommRanksWord + r * abi::kCommRankRecordWords;
    const rank_t& peer = ranks[r];
    // A segment must fit in one RX buffer on the receiver.
    const uint64_t segment = peer.max_segment_size == 0 ? rx_buffer_size
                                                        : std::min<uint64_t>(peer.max_segment_size, rx_buffer_size);
    word(base + abi::kRankIp, ips[r]);
    word(base + abi::kRankPort, static_cast<uint32_t>(peer.port));
    word(base + abi::kRankInboundSeq, 0);
    word(base + abi::kRankOutboundSeq, 0);
    word(base + abi::kRankSession, peer.session_id < 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(peer.session_id));
    word(base + abi::kRankMaxSegment, static_cast<uint32_t>(segment));
  }
  if (with_context) word(abi::comm_context_word(nranks), context);

  ++communicators_created;
  // After 2^32 creations the counter wraps: skip the ids still alive (the
  // global communicator's 0 among them).
  while (find_communicator(next_communicator_id) != communicators.end()) ++next_communicator_id;
  const communicatorId id = next_communicator_id++;
  detail::CommunicatorInfo info;
  info.id = id;
  info.address = *address;
  info.bytes = bytes;
  info.size = nranks;
  info.local_rank = static_cast<uint32_t>(local_rank);
  info.context_id = context;
  // Ids increase, so a new one sorts last -- except after the counter wrapped.
  const auto position = std::lower_bound(communicators.begin(), communicators.end(), id,
                                         [](const detail::CommunicatorInfo& c, communicatorId v) { return c.id < v; });
  communicators.insert(position, std::move(info));
  ACCL_LOG_DEBUG("communicator {} at {:#06x}: {} ranks, local rank {}, context {}", id, *address, nranks, local_rank,
                 context);
  return id;
}

void ACCL::Impl::free_communicator(communicatorId comm) {
  static const std::string kCall = "free_communicator";
  if (comm == GLOBAL_COMM) fail(kCall, "the global communicator cannot be freed (deinit() releases it)");
  const detail::CommunicatorInfo& info = communicator(kCall, comm);
  // Clear the record so a stale comm address can never look like a live one.
  for (uint32_t offset = 0; offset < info.bytes; offset += kWordBytes) device.write(info.address + offset, 0);
  exchange.release(info.address, info.bytes);
  communicators.erase(find_communicator(comm));
}

std::vector<rank_t> ACCL::Impl::read_comm_group(communicatorId comm) {
  const detail::CommunicatorInfo& info = communicator("get_comm_group", comm);
  const uint32_t nranks = device.read(info.address + abi::kCommSizeWord * kWordBytes);
  std::vector<rank_t> group(nranks);
  for (uint32_t r = 0; r < nranks; ++r) {
    const uint32_t base = info.address + (abi::kCommRanksWord + r * abi::kCommRankRecordWords) * kWordBytes;
    group[r].ip = format_ipv4(device.read(base + abi::kRankIp * kWordBytes));
    group[r].port = static_cast<int>(device.read(base + abi::kRankPort * kWordBytes));
    const uint32_t session = device.read(base + abi::kRankSession * kWordBytes);
    group[r].session_id = session == 0xFFFFFFFFu ? -1 : static_cast<int>(session);
    group[r].max_segment_size = device.read(base + abi::kRankMaxSegment * kWordBytes);
  }
  return group;
}

}  // namespace accl
