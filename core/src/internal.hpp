// SPDX-License-Identifier: Apache-2.0
//
// Driver internals shared by the files of core/src (not installed).
#pragma once

#include <accl/accl.hpp>
#include <accl/call_encoding.hpp>

#include "exchange_allocator.hpp"
#include "recycling_allocator.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace accl::detail {

// The device and what must outlive the ACCL object with it. Buffers and
// requests hold a reference, so a buffer freed (or a request dropped) after
// the ACCL object is gone still talks to a live device.
struct DeviceContext {
  explicit DeviceContext(std::unique_ptr<Device> dev) : device(std::move(dev)) {}
  std::unique_ptr<Device> device;

  // Calls whose Request was dropped before they completed: the device may
  // only release a completed call, so they are released later.
  void release_when_complete(CallId id);
  // Inline: every launch asks, and there almost never are any.
  void release_completed_orphans() {
    if (orphan_count_.load(std::memory_order_acquire) != 0) release_orphans_that_completed();
  }

 private:
  void release_orphans_that_completed();

  std::mutex orphan_mutex_;
  std::vector<CallId> orphans_;
  // orphans_.size(), readable without the mutex: every launch checks for
  // orphans, and there almost never are any (a lock per call for nothing).
  std::atomic<size_t> orphan_count_{0};
};

// Memory behind a buffer and all of its slices.
struct BufferStorage {
  std::shared_ptr<DeviceContext> context;
  DeviceAllocation allocation;     // bytes == 0: nothing allocated
  void* owned_host = nullptr;      // host mirror we allocated (std::free)
  bool mapped_user_memory = false; // allocation came from map_host
  BufferStorage() = default;
  BufferStorage(const BufferStorage&) = delete;
  BufferStorage& operator=(const BufferStorage&) = delete;
  ~BufferStorage();
};

// A byte range of a device buffer to copy between host mirror and device.
// Holds the storage so the copy stays valid even if the user drops the buffer.
struct SyncRange {
  std::shared_ptr<BufferStorage> storage;
  void* host = nullptr;
  uint64_t address = 0;
  size_t bytes = 0;

  bool empty() const { return bytes == 0; }
  // Inline: most calls have an empty range or two (host-only buffers, unused
  // operands) and skip the copy without a call.
  void to_device() const {
    if (bytes != 0) copy_to_device();
  }
  void from_device() const {
    if (bytes != 0) copy_from_device();
  }
  void copy_to_device() const;
  void copy_from_device() const;
};

// The ranges a call syncs on its way in (inputs) or out (outputs): two at most.
using Syncs = std::array<SyncRange, 2>;

// Access to BaseBuffer's private parts for the driver.
struct BufferAccess {
  // Elements [0, elements) of `buffer` for syncing; empty for host-only
  // buffers (the CCLO reaches them directly) and for 0 elements.
  static SyncRange range(const BaseBuffer& buffer, uint64_t elements);
  static const std::shared_ptr<BufferStorage>& storage(const BaseBuffer& buffer) { return buffer.storage_; }
};

// How long the driver waits for a call before it gives up: the device's own
// timeout plus a margin, so the firmware's RECEIVE_TIMEOUT_ERROR normally
// arrives first and names the real cause.
std::chrono::nanoseconds driver_wait_bound(std::chrono::microseconds device_timeout);

// The Request behind every RequestPtr the driver returns.
class CallRequest final : public Request {
 public:
  struct Params {
    std::shared_ptr<DeviceContext> context;
    const std::string* name = nullptr;  // static storage (see call_name())
    int rank = -1;
    std::chrono::microseconds timeout{0};
    CallId id = 0;  // 0: completed without a device call
    Syncs outputs;
    std::vector<std::shared_ptr<CallRequest>> dependencies;  // waitfor, to report their failures
  };
  // Params by rvalue reference here and in make_request(): passed by value,
  // each hop cost a move and a destructor on every call.
  explicit CallRequest(Params&& params);
  ~CallRequest() override;

  void wait() override;
  bool wait(std::chrono::milliseconds timeout) override;
  bool test() override;
  uint32_t retcode() const override { return retcode_.load(std::memory_order_acquire); }
  uint64_t duration_ns() const override { return duration_ns_.load(std::memory_order_acquire); }
  const std::string& call_name() const override { return *params_.name; }
  CallId id() const override { return params_.id; }

  State state() const { return state_.load(std::memory_order_acquire); }
  const DeviceContext* context() const { return params_.context.get(); }

 private:
  // Collects the result of a call the device reports complete (once);
  // `collected`: its result, already read from the device (test_result).
  void finish(const CallResult* collected = nullptr);
  // Finishes the completed, still queued calls this one waits for
  // (transitively), deepest first, holding one request's lock at a time.
  void finish_dependencies();
  void throw_if_failed() const;

  Params params_;
  // Whether the call was launched with waitfor requests (params_.dependencies
  // is cleared under finish_mutex_ later; this never changes): most calls
  // have none and skip finish_dependencies() without taking the lock.
  const bool launched_with_dependencies_;
  std::mutex finish_mutex_;
  std::atomic<State> state_{State::queued};
  std::atomic<uint32_t> retcode_{0};
  std::atomic<uint64_t> duration_ns_{0};
  // Set when this call succeeded but a call it waited for failed.
  std::shared_ptr<const CallRequest> failed_dependency_;
};

// Every request the driver returns comes from here: its block is recycled
// (no allocation per call once the pool holds as many as are alive at once).
inline std::shared_ptr<CallRequest> make_request(CallRequest::Params&& params) {
  return std::allocate_shared<CallRequest>(RecyclingAllocator<CallRequest>(), std::move(params));
}

// A communicator as the driver remembers it (the record itself lives in
// exchange memory).
struct CommunicatorInfo {
  communicatorId id = 0;
  uint32_t address = 0;
  uint32_t bytes = 0;
  uint32_t size = 0;
  uint32_t local_rank = 0;
  uint32_t context_id = 0;
  std::vector<int> global_ranks;  // only for split communicators; informational
};

}  // namespace accl::detail

namespace accl {

struct ACCL::Impl {
  Impl(ACCL& owner, std::unique_ptr<Device> device, const arithConfigMap& arith_map);

  ACCL& self;

  std::shared_ptr<detail::DeviceContext> context;
  Device& device;
  arithConfigMap arith;

  mutable std::mutex mutex;  // guards everything below
  bool initialized = false;
  // Rank in the global communicator (-1 before the first initialize()); read
  // without the mutex for log and error prefixes.
  std::atomic<int> rank{-1};
  std::chrono::microseconds timeout;
  size_t rx_buffer_size = 0;
  size_t max_eager_size = 0;
  size_t max_rendezvous_size = 0;
  uint32_t capabilities = 0;  // abi::Capability bits, 0 unless kCapValid was set
  uint32_t hwid = 0;          // HWID as read at initialize() (public rules: its network stack)
  std::vector<DeviceAllocation> rx_buffers;
  std::vector<DeviceAllocation> spare_buffers;
  detail::ExchangeAllocator exchange;
  std::vector<rank_t> global_ranks;  // as given to initialize(), for split_communicator
  // Live communicators only, sorted by id: a freed one leaves no trace, so an
  // application that dups and frees communicators forever keeps this at its
  // peak live count (a table indexed by id grew by one entry per creation).
  std::vector<detail::CommunicatorInfo> communicators;
  communicatorId next_communicator_id = 0;  // increasing; reused only after 2^32 creations
  uint32_t communicators_created = 0;  // default context ids
  encoding::ArithSlots arith_slots;

  // --- configuration.cpp ---
  void initialize(const std::vector<rank_t>& ranks, int local_rank, const InitOptions& options);
  void deinit();
  communicatorId create_communicator(const std::string& call, const std::vector<rank_t>& ranks, int local_rank,
                                     std::optional<uint32_t> context_id);
  void free_communicator(communicatorId comm);
  // Host-order IPv4 of every rank; ArgumentError for a bad IP or port.
  std::vector<uint32_t> checked_ips(const std::string& call, const std::vector<rank_t>& ranks) const;
  std::vector<rank_t> read_comm_group(communicatorId comm);
  // A synchronous config call (soft reset, timeout, thresholds), checked.
  void config_call(const std::string& name, abi::ConfigFunction function, uint32_t value);
  void load_arithmetic_configs();  // mutex held, during initialize()
  void release_configuration_memory();

  // --- accl.cpp ---
  [[noreturn]] void fail(const std::string& call, const std::string& cause) const;
  void require_initialized(const std::string& call) const;
  const detail::CommunicatorInfo& communicator(const std::string& call, communicatorId comm) const;
  // Position of live communicator `comm` in `communicators`, or its end.
  std::vector<detail::CommunicatorInfo>::const_iterator find_communicator(communicatorId comm) const;
  // Validates `waitfor`, syncs `inputs` to the device and starts the call.
  // `name` must have static storage duration. Caller holds `mutex`.
  std::shared_ptr<detail::CallRequest> launch(const std::string& name, const CallWords& words,
                                              const detail::Syncs& inputs, const detail::Syncs& outputs,
                                              const std::vector<RequestPtr>& waitfor);
};

}  // namespace accl
