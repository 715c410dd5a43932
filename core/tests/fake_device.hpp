// SPDX-License-Identifier: Apache-2.0
//
// An in-memory Device for driver unit tests: exchange memory as an array,
// device memory as byte vectors, and a call log. Calls complete at once (or
// when the test says so) with a retcode the test chooses. Copy calls really
// copy, using the element size from the arithmetic configuration the call
// points at, so tests see data flow through sync_to/from_device.
#pragma once

#include <accl/abi.hpp>
#include <accl/device.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

namespace accl::testing {

class FakeDevice : public Device {
 public:
  struct Call {
    CallId id = 0;
    CallWords words;
    std::vector<CallId> waitfor;
  };
  struct Copy {
    uint64_t address;
    size_t bytes;
  };

  // Everything the test inspects; shared so it survives the ACCL object.
  struct State {
    std::mutex mutex;
    std::condition_variable completed_cv;
    std::array<uint32_t, abi::kExchangeMemorySize / 4> exchange{};
    std::vector<std::pair<uint32_t, uint32_t>> writes;  // (offset, value) in order
    std::vector<Call> calls;
    std::vector<Copy> to_device, from_device;
    std::map<CallId, CallResult> completed;
    std::set<CallId> released;
    std::set<CallId> started;
    // Device memory: base address -> bytes.
    std::map<uint64_t, std::vector<uint8_t>> memory;
    std::map<uint64_t, std::unique_ptr<std::vector<uint8_t>>> host_only;  // address == host pointer
    uint64_t next_address = 0x1'0000'0000ull;  // above 4 GiB: high address words matter
    int live_allocations = 0;
    int freed_allocations = 0;

    // Behaviour knobs.
    std::atomic<bool> auto_complete{true};  // false: complete(id) finishes calls
    std::function<uint32_t(const CallWords&)> retcode;  // default: 0
    uint32_t capabilities_after_reset = 0;
    uint32_t hwid = 0x12345678;

    std::vector<Call> calls_of(abi::Scenario s) {
      std::lock_guard lock(mutex);
      std::vector<Call> out;
      for (const auto& c : calls)
        if (c.words[abi::kWordScenario] == s) out.push_back(c);
      return out;
    }
    std::vector<Call> data_calls() {  // everything but config calls
      std::lock_guard lock(mutex);
      std::vector<Call> out;
      for (const auto& c : calls)
        if (c.words[abi::kWordScenario] != abi::kConfig) out.push_back(c);
      return out;
    }
    uint32_t word(uint32_t offset) {
      std::lock_guard lock(mutex);
      return exchange.at(offset / 4);
    }
  };

  explicit FakeDevice(std::shared_ptr<State> state = std::make_shared<State>()) : state_(std::move(state)) {
    state_->exchange[abi::kHwIdOffset / 4] = state_->hwid;
  }
  const std::shared_ptr<State>& state() const { return state_; }

  // Completes a call started with auto_complete == false.
  // retcode 0: the call also does its work (see execute()).
  void complete(CallId id, uint32_t retcode = 0) {
    if (retcode == 0) {
      CallWords words;
      {
        std::lock_guard lock(state_->mutex);
        for (const auto& c : state_->calls)
          if (c.id == id) words = c.words;
      }
      retcode = execute(words);
    }
    complete_locked_with(id, retcode);
  }

  std::string name() const override { return "fake"; }

  uint32_t read(uint32_t offset) override {
    std::lock_guard lock(state_->mutex);
    check_offset(offset);
    return state_->exchange[offset / 4];
  }
  void write(uint32_t offset, uint32_t value) override {
    std::lock_guard lock(state_->mutex);
    check_offset(offset);
    state_->exchange[offset / 4] = value;
    state_->writes.emplace_back(offset, value);
  }

  CallId start(const CallWords& call, std::span<const CallId> waitfor) override {
    CallId id;
    bool run_now;
    {
      std::lock_guard lock(state_->mutex);
      id = next_id_++;
      state_->calls.push_back({id, call, std::vector<CallId>(waitfor.begin(), waitfor.end())});
      state_->started.insert(id);
      for (CallId w : waitfor)
        if (!state_->started.count(w) || state_->released.count(w))
          throw std::logic_error("waitfor names a call the device does not know");
      run_now = state_->auto_complete || call[abi::kWordScenario] == abi::kConfig;
    }
    if (run_now) complete_locked_with(id, execute(call));
    return id;
  }

  bool wait(CallId id, std::chrono::nanoseconds timeout) override {
    std::unique_lock lock(state_->mutex);
    return state_->completed_cv.wait_for(lock, timeout, [&] { return state_->completed.count(id) != 0; });
  }
  bool test(CallId id) override {
    std::lock_guard lock(state_->mutex);
    return state_->completed.count(id) != 0;
  }
  CallResult result(CallId id) override {
    std::lock_guard lock(state_->mutex);
    return state_->completed.at(id);
  }
  void release(CallId id) override {
    std::lock_guard lock(state_->mutex);
    if (!state_->completed.count(id)) throw std::logic_error("release of a call that is not complete");
    state_->released.insert(id);
  }

  DeviceAllocation allocate(size_t bytes, MemoryKind kind, unsigned bank) override {
    std::lock_guard lock(state_->mutex);
    DeviceAllocation a;
    a.bytes = bytes;
    a.kind = kind;
    if (kind == MemoryKind::host_only) {
      auto mem = std::make_unique<std::vector<uint8_t>>(bytes);
      a.host_ptr = mem->data();
      a.address = reinterpret_cast<uint64_t>(a.host_ptr);
      state_->host_only[a.address] = std::move(mem);
    } else {
      a.address = state_->next_address + (uint64_t{bank} << 40);
      state_->next_address += (bytes + 4095) / 4096 * 4096;
      state_->memory[a.address] = std::vector<uint8_t>(bytes, 0xEE);  // garbage until written
    }
    ++state_->live_allocations;
    return a;
  }
  DeviceAllocation map_host(void* ptr, size_t bytes) override {
    std::lock_guard lock(state_->mutex);
    ++state_->live_allocations;
    DeviceAllocation a;
    a.address = reinterpret_cast<uint64_t>(ptr);
    a.host_ptr = ptr;
    a.bytes = bytes;
    a.kind = MemoryKind::host_only;
    return a;
  }
  void free(const DeviceAllocation& alloc) override {
    std::lock_guard lock(state_->mutex);
    if (alloc.kind == MemoryKind::device) state_->memory.erase(alloc.address);
    else state_->host_only.erase(alloc.address);
    --state_->live_allocations;
    ++state_->freed_allocations;
  }
  void copy_to_device(uint64_t address, const void* src, size_t bytes) override {
    std::lock_guard lock(state_->mutex);
    std::memcpy(device_bytes(address, bytes), src, bytes);
    state_->to_device.push_back({address, bytes});
  }
  void copy_from_device(uint64_t address, void* dst, size_t bytes) override {
    std::lock_guard lock(state_->mutex);
    std::memcpy(dst, device_bytes(address, bytes), bytes);
    state_->from_device.push_back({address, bytes});
  }

 private:
  static void check_offset(uint32_t offset) {
    if (offset % 4 != 0 || offset >= abi::kExchangeMemorySize) throw std::out_of_range("exchange memory offset");
  }

  uint8_t* device_bytes(uint64_t address, size_t bytes) {
    auto it = state_->memory.upper_bound(address);
    if (it == state_->memory.begin()) throw std::out_of_range("address outside device memory");
    --it;
    if (address + bytes > it->first + it->second.size()) throw std::out_of_range("range outside the allocation");
    return it->second.data() + (address - it->first);
  }

  // Host-only operands are host pointers; device operands live in `memory`.
  uint8_t* operand_bytes(uint64_t address, size_t bytes, bool host) {
    return host ? reinterpret_cast<uint8_t*>(address) : device_bytes(address, bytes);
  }

  // What the call does to memory. Only copies move data; config calls update
  // the words a real CCLO would.
  uint32_t execute(const CallWords& call) {
    uint32_t retcode = 0;
    std::lock_guard lock(state_->mutex);
    if (state_->retcode) retcode = state_->retcode(call);
    if (retcode != 0) return retcode;
    const uint32_t scenario = call[abi::kWordScenario];
    if (scenario == abi::kConfig && call[abi::kWordFunction] == abi::kResetPeripherals) {
      state_->exchange[abi::kConfigReadyOffset / 4] = 0;
      state_->exchange[abi::kCapabilitiesOffset / 4] = state_->capabilities_after_reset;
    }
    const uint32_t streams = call[abi::kWordStreamFlags] & 0xFF;
    if (scenario == abi::kCopy && streams == 0) {
      const uint32_t arith = call[abi::kWordArithConfig];
      const uint32_t elem_bytes = state_->exchange[arith / 4 + abi::kArithUncompressedBytes];
      const size_t bytes = size_t{call[abi::kWordCount]} * elem_bytes;
      const uint32_t host = call[abi::kWordStreamFlags] >> 8;
      std::memmove(operand_bytes(call.addr(2), bytes, host & abi::kResHost),
                   operand_bytes(call.addr(0), bytes, host & abi::kOp0Host), bytes);
    }
    return 0;
  }

  void complete_locked_with(CallId id, uint32_t retcode) {
    {
      std::lock_guard lock(state_->mutex);
      state_->completed[id] = CallResult{retcode, 1000};
    }
    state_->completed_cv.notify_all();
  }

  std::shared_ptr<State> state_;
  CallId next_id_ = 1;  // guarded by state_->mutex
};

}  // namespace accl::testing
