// SPDX-License-Identifier: Apache-2.0
//
// accl::Device over the RegisterPort/BufferPort seam (see cclo_device.hpp for
// the call model). Nothing here knows about XRT.
#include <accl/log.hpp>
#include <accl_hw/cclo_device.hpp>
#include <accl_hw/hw.hpp>

#include "hex.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace accl::hw {
namespace {

class CcloDevice final : public Device {
 public:
  CcloDevice(std::unique_ptr<RegisterPort> registers, std::unique_ptr<BufferPort> buffers, CcloDeviceOptions options)
      : regs_(std::move(registers)), bufs_(std::move(buffers)), opts_(std::move(options)) {
    if (!regs_ || !bufs_) throw HwError("CcloDevice needs both a register port and a buffer port");
    if (opts_.poll_slice < std::chrono::milliseconds(1)) opts_.poll_slice = std::chrono::milliseconds(1);
    dispatcher_ = std::thread([this] { dispatch_loop(); });
  }

  ~CcloDevice() override {
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    done_cv_.notify_all();
    dispatcher_.join();
    std::lock_guard lk(mem_mu_);
    for (auto& [addr, region] : regions_) {
      try {
        bufs_->release(region.buf.handle);
      } catch (const std::exception& e) {
        ACCL_LOG_WARN("{}: releasing buffer at {} failed: {}", opts_.name, hex(addr), e.what());
      }
    }
  }

  CcloDevice(const CcloDevice&) = delete;
  CcloDevice& operator=(const CcloDevice&) = delete;

  std::string name() const override { return opts_.name; }

  // --- exchange memory ---
  uint32_t read(uint32_t offset) override {
    check_offset(offset, "read");
    std::lock_guard g(reg_mu_);
    return regs_->read32(offset);
  }
  void write(uint32_t offset, uint32_t value) override {
    check_offset(offset, "write");
    std::lock_guard g(reg_mu_);
    regs_->write32(offset, value);
  }

  // --- calls ---
  CallId start(const CallWords& call, std::span<const CallId> waitfor) override {
    std::lock_guard lk(mu_);
    if (stopping_) throw HwError(opts_.name + ": start after the device was closed");
    const CallId id = next_id_++;
    Call c;
    c.words = call;
    // Only calls still known can hold this one back; a released or unknown id
    // has completed by definition (the driver consumed its result).
    for (CallId dep : waitfor)
      if (dep < id && calls_.count(dep) != 0) c.waitfor.push_back(dep);
    calls_.emplace(id, std::move(c));
    queue_.push_back(id);
    work_cv_.notify_one();
    return id;
  }

  bool wait(CallId id, std::chrono::nanoseconds timeout) override {
    std::unique_lock lk(mu_);
    check_issued(id, "wait on");
    auto pred = [&] { return complete_locked(id); };
    // Very long timeouts ("forever") would overflow now() + timeout.
    if (timeout >= std::chrono::hours(24 * 365)) {
      done_cv_.wait(lk, pred);
      return true;
    }
    return done_cv_.wait_for(lk, timeout, pred);
  }

  bool test(CallId id) override {
    std::lock_guard lk(mu_);
    check_issued(id, "test of");
    return complete_locked(id);
  }

  CallResult result(CallId id) override {
    std::lock_guard lk(mu_);
    auto it = calls_.find(id);
    if (it == calls_.end()) throw HwError(opts_.name + ": result of unknown call id " + std::to_string(id));
    const Call& c = it->second;
    if (c.state == State::failed)
      throw HwError(opts_.name + (opts_.description.empty() ? "" : " (" + opts_.description + ")") + ": call " +
                    std::to_string(id) + " (" + scenario_name(c.words[abi::kWordScenario]) + ") failed: " + c.failure);
    if (c.state != State::done)
      throw HwError(opts_.name + ": result of call " + std::to_string(id) + " requested before it completed");
    return c.result;
  }

  void release(CallId id) override {
    std::lock_guard lk(mu_);
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    // A running call is dropped by the dispatcher once it ends.
    if (it->second.state == State::done || it->second.state == State::failed)
      calls_.erase(it);
    else
      it->second.released = true;
  }

  // --- memory ---
  DeviceAllocation allocate(size_t bytes, MemoryKind kind, unsigned bank) override {
    // Runtimes refuse empty buffer objects; a 1-byte one keeps addresses unique.
    PortBuffer pb = bufs_->allocate(std::max<size_t>(bytes, 1), kind, bank);
    Region r{pb, pb.address, bytes, kind, kind == MemoryKind::host_only ? pb.host_ptr : nullptr};
    std::lock_guard lk(mem_mu_);
    regions_.emplace(r.address, r);
    return DeviceAllocation{r.address, r.host_ptr, bytes, kind};
  }

  DeviceAllocation map_host(void* ptr, size_t bytes) override {
    // Runtimes pin whole pages only: map the pages around [ptr, ptr+bytes)
    // and hand out the address of ptr inside them. The extra bytes are the
    // caller's own pages, so nothing is copied and nothing foreign is exposed
    // to the CCLO beyond what the driver addresses.
    const size_t page = bufs_->page_size();
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    const uintptr_t base = p & ~(uintptr_t{page} - 1);
    const uintptr_t end = (p + std::max<size_t>(bytes, 1) + page - 1) & ~(uintptr_t{page} - 1);
    PortBuffer pb = bufs_->map_user(reinterpret_cast<void*>(base), end - base);
    Region r{pb, pb.address + (p - base), bytes, MemoryKind::host_only, ptr};
    std::lock_guard lk(mem_mu_);
    regions_.emplace(r.address, r);
    return DeviceAllocation{r.address, ptr, bytes, MemoryKind::host_only};
  }

  void free(const DeviceAllocation& alloc) override {
    std::lock_guard lk(mem_mu_);
    auto [first, last] = regions_.equal_range(alloc.address);
    // Two mappings of the same user memory share an address; bytes and host
    // pointer tell them apart.
    for (auto it = first; it != last; ++it) {
      if (it->second.bytes != alloc.bytes || (alloc.host_ptr != nullptr && it->second.host_ptr != alloc.host_ptr))
        continue;
      bufs_->release(it->second.buf.handle);
      regions_.erase(it);
      return;
    }
    // free() runs from buffer destructors: report, never throw.
    ACCL_LOG_WARN("{}: free of unknown allocation at {} ({} bytes)", opts_.name, hex(alloc.address), alloc.bytes);
  }

  void copy_to_device(uint64_t address, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    std::lock_guard lk(mem_mu_);
    const Region& r = region_for(address, bytes, "copy_to_device");
    const size_t off = address - r.address;
    if (r.kind == MemoryKind::host_only)  // the CCLO reads host memory directly: no runtime call
      std::memmove(static_cast<char*>(r.host_ptr) + off, src, bytes);
    else
      bufs_->write(r.buf.handle, off + (r.address - r.buf.address), src, bytes);
  }

  void copy_from_device(uint64_t address, void* dst, size_t bytes) override {
    if (bytes == 0) return;
    std::lock_guard lk(mem_mu_);
    const Region& r = region_for(address, bytes, "copy_from_device");
    const size_t off = address - r.address;
    if (r.kind == MemoryKind::host_only)
      std::memmove(dst, static_cast<const char*>(r.host_ptr) + off, bytes);
    else
      bufs_->read(r.buf.handle, off + (r.address - r.buf.address), dst, bytes);
  }

 private:
  enum class State { queued, running, done, failed };
  struct Call {
    CallWords words;
    std::vector<CallId> waitfor;
    State state = State::queued;
    CallResult result;
    std::string failure;
    bool released = false;
  };
  struct Region {
    PortBuffer buf;
    uint64_t address = 0;  // CCLO address of the first byte handed out
    size_t bytes = 0;      // bytes handed out
    MemoryKind kind = MemoryKind::device;
    void* host_ptr = nullptr;  // host view of `address` (host-only memory)
  };

  void check_offset(uint32_t offset, const char* what) const {
    // An AXI-Lite access outside the CCLO's range can stall the PCIe link on a
    // real card, so out-of-range offsets never reach the port.
    if (offset % 4 != 0 || offset >= abi::kExchangeMemorySize)
      throw HwError(opts_.name + ": exchange memory " + what + " at " + hex(offset) +
                    " outside the 8 KiB configuration space or not word aligned");
  }

  // As the emulator: an id never issued is a bug; a released one is complete.
  void check_issued(CallId id, const char* what) const {
    if (id == 0 || id >= next_id_) throw HwError(opts_.name + ": " + what + " unknown call id " + std::to_string(id));
  }

  // Unknown ids count as complete: they were released after completing.
  bool complete_locked(CallId id) const {
    auto it = calls_.find(id);
    return it == calls_.end() || it->second.state == State::done || it->second.state == State::failed;
  }

  const Region& region_for(uint64_t address, size_t bytes, const char* what) const {
    auto it = regions_.upper_bound(address);
    while (it != regions_.begin()) {
      --it;
      const Region& r = it->second;
      // Mappings of overlapping user memory can overlap, so keep looking
      // below the nearest start; the nearest one matches almost always.
      const uint64_t off = address - r.address, size = std::max<size_t>(r.bytes, 1);
      if (off < size && bytes <= size - off) return r;
    }
    throw HwError(opts_.name + ": " + what + " of " + std::to_string(bytes) + " bytes at " + hex(address) +
                  " is not inside one buffer of this device");
  }

  void dispatch_loop() {
    for (;;) {
      CallId id = 0;
      CallWords words;
      {
        std::unique_lock lk(mu_);
        work_cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
        if (stopping_) break;
        id = queue_.front();
        // Chaining, resolved host-side: a call starts only once every call in
        // its waitfor has completed. Calls start in issue order and one at a
        // time, so the dependencies (always issued earlier) have finished by
        // now and this never blocks; the check keeps the contract explicit.
        done_cv_.wait(lk, [&] {
          const Call& c = calls_.at(id);
          return stopping_ || std::all_of(c.waitfor.begin(), c.waitfor.end(), [&](CallId d) { return complete_locked(d); });
        });
        if (stopping_) break;
        queue_.pop_front();
        Call& c = calls_.at(id);
        c.state = State::running;
        words = c.words;
      }
      run_call(id, words);
    }
    // Calls that never started end as failed so their waiters return.
    std::lock_guard lk(mu_);
    for (CallId id : queue_) {
      auto it = calls_.find(id);
      if (it == calls_.end()) continue;
      it->second.state = State::failed;
      it->second.failure = "the device was closed before the call started";
    }
    queue_.clear();
    done_cv_.notify_all();
  }

  void run_call(CallId id, const CallWords& words) {
    ACCL_LOG_DEBUG("{}: call {} starts: {}", opts_.name, id, describe_call(words));
    const HostCtrlArgs args = encode_call(words);
    RunStatus st;
    uint32_t retcode = 0, ticks = 0;
    try {
      {
        std::lock_guard g(reg_mu_);
        // The firmware writes RETCODE when a call ends. Clearing it first
        // means a firmware path that skips the write reports 0, never the
        // previous call's bits.
        regs_->write32(abi::kRetcodeOffset, 0);
        regs_->start_kernel(args);
      }
      for (;;) {
        st = regs_->wait_kernel(opts_.poll_slice);
        if (st.state != RunState::pending) break;
        std::lock_guard lk(mu_);
        if (stopping_) {
          st = {RunState::failed, "the device was closed while the call was running"};
          break;
        }
      }
      if (st.state == RunState::done) {
        // One execution at a time, so these registers belong to this call.
        std::lock_guard g(reg_mu_);
        retcode = regs_->read32(abi::kRetcodeOffset);
        ticks = regs_->read32(abi::kPerfCounterOffset);
      }
    } catch (const std::exception& e) {
      st = {RunState::failed, e.what()};
    }

    std::lock_guard lk(mu_);
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    Call& c = it->second;
    if (st.state == RunState::done) {
      c.state = State::done;
      c.result.retcode = retcode;
      c.result.duration_ns = static_cast<uint64_t>(static_cast<double>(ticks) * 1000.0 / opts_.clock_mhz);
      ACCL_LOG_DEBUG("{}: call {} done: RETCODE {} PERFCNT {}", opts_.name, id, hex(retcode), ticks);
    } else {
      c.state = State::failed;
      c.failure = st.detail.empty() ? "the hostctrl execution failed" : st.detail;
      ACCL_LOG_ERROR("{}: call {} ({}) failed: {}", opts_.name, id, scenario_name(words[abi::kWordScenario]), c.failure);
    }
    if (c.released) calls_.erase(it);
    done_cv_.notify_all();
  }

  std::unique_ptr<RegisterPort> regs_;
  std::unique_ptr<BufferPort> bufs_;
  CcloDeviceOptions opts_;
  std::mutex reg_mu_;  // register access and kernel starts are never concurrent

  std::mutex mu_;  // calls_
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<CallId> queue_;
  std::unordered_map<CallId, Call> calls_;
  CallId next_id_ = 1;
  bool stopping_ = false;

  std::mutex mem_mu_;
  std::multimap<uint64_t, Region> regions_;  // by CCLO address

  std::thread dispatcher_;  // last: starts after every member above exists
};

}  // namespace

std::unique_ptr<Device> make_cclo_device(std::unique_ptr<RegisterPort> registers, std::unique_ptr<BufferPort> buffers,
                                         CcloDeviceOptions options) {
  if (!(options.clock_mhz > 0.0)) throw HwError("CCLO clock must be positive, got " + std::to_string(options.clock_mhz));
  return std::make_unique<CcloDevice>(std::move(registers), std::move(buffers), std::move(options));
}

}  // namespace accl::hw
