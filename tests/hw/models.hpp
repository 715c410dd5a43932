// SPDX-License-Identifier: Apache-2.0
//
// Models of a card behind the hardware backend's seam (hw/include/accl_hw/port.hpp),
// so the unchanged backend (CcloDevice) runs without one.
//
// RegisterModel is a register-level card: the CCLO's 8 KiB exchange memory
// and public ACCL's hostctrl AXI-Lite map. start_kernel() does what XRT does
// with a run's arguments -- each argument lands at its register offset, then
// AP_START -- and the model's "hostctrl" reads the registers back in the
// order the HLS kernel streams them to the CCLO (15 words). The offsets and
// the word order are written out here from abi.hpp, independently of the
// backend's encoder, so a test comparing the decoded words with the words the
// driver started proves the encoding end to end.
#pragma once

#include <accl/abi.hpp>
#include <accl/device.hpp>
#include <accl_hw/port.hpp>

#include <array>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace hwtest {

using accl::CallWords;
namespace abi = accl::abi;

// What the card does with one hostctrl execution, register by register:
// XRT writes each scalar argument at its offset in the hostctrl map (64-bit
// ones as two words) and sets AP_START; the hostctrl HLS kernel then streams
// 15 words to the CCLO in this order, addresses low word first.
inline CallWords hostctrl_stream(const accl::hw::HostCtrlArgs& args, std::map<uint32_t, uint32_t>& regs) {
  static constexpr uint32_t offset[12] = {
      abi::kHostCtrlScenario,    abi::kHostCtrlCount,       abi::kHostCtrlComm,
      abi::kHostCtrlRootSrcDst,  abi::kHostCtrlFunction,    abi::kHostCtrlTag,
      abi::kHostCtrlArithConfig, abi::kHostCtrlCompressionFlags, abi::kHostCtrlStreamFlags,
      abi::kHostCtrlAddr0,       abi::kHostCtrlAddr1,       abi::kHostCtrlAddr2};
  for (int i = 0; i < 12; ++i) {
    regs[offset[i]] = static_cast<uint32_t>(args.value[i]);
    if (i >= 9)
      regs[offset[i] + 4] = static_cast<uint32_t>(args.value[i] >> 32);
    else if (args.value[i] >> 32)
      throw std::logic_error("hostctrl_stream: 32-bit argument with high bits set");
  }
  regs[abi::kHostCtrlApCtrl] = 0x1;  // AP_START
  static constexpr uint32_t order[15] = {
      abi::kHostCtrlScenario,  abi::kHostCtrlCount,      abi::kHostCtrlComm,          abi::kHostCtrlRootSrcDst,
      abi::kHostCtrlFunction,  abi::kHostCtrlTag,        abi::kHostCtrlArithConfig,   abi::kHostCtrlCompressionFlags,
      abi::kHostCtrlStreamFlags, abi::kHostCtrlAddr0,    abi::kHostCtrlAddr0 + 4,     abi::kHostCtrlAddr1,
      abi::kHostCtrlAddr1 + 4, abi::kHostCtrlAddr2,      abi::kHostCtrlAddr2 + 4};
  CallWords w;
  for (int i = 0; i < 15; ++i) w.words[i] = regs[order[i]];
  return w;
}

class RegisterModel : public accl::hw::RegisterPort {
 public:
  // What the "firmware" does with one call: RETCODE and PERFCNT it writes
  // (nullopt: it writes nothing).
  struct Outcome {
    std::optional<uint32_t> retcode = 0;
    std::optional<uint32_t> ticks = 0;
  };
  std::function<Outcome(const CallWords&)> firmware = [](const CallWords&) { return Outcome{}; };

  // --- seam ---
  uint32_t read32(uint32_t offset) override {
    std::lock_guard lk(mu_);
    return xmem_.at(offset / 4);
  }
  void write32(uint32_t offset, uint32_t value) override {
    std::lock_guard lk(mu_);
    xmem_.at(offset / 4) = value;
    xmem_log_.emplace_back(offset, value);
  }
  void start_kernel(const accl::hw::HostCtrlArgs& args) override {
    std::unique_lock lk(mu_);
    if (running_) throw std::logic_error("RegisterModel: start while an execution is running");
    CallWords w = hostctrl_stream(args, regs_);
    received_.push_back(w);
    starts_log_.push_back(xmem_log_.size());
    running_ = true;
    if (!hold_) finish_locked();
  }
  accl::hw::RunStatus wait_kernel(std::chrono::milliseconds timeout) override {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, timeout, [&] { return !running_; });
    if (running_) return {accl::hw::RunState::pending, ""};
    if (fail_) {
      std::string why = *fail_;
      fail_.reset();
      return {accl::hw::RunState::failed, why};
    }
    return {accl::hw::RunState::done, ""};
  }

  // --- test controls ---
  // Held executions stay running until release().
  void hold(bool on) {
    std::lock_guard lk(mu_);
    hold_ = on;
  }
  void release() {
    std::lock_guard lk(mu_);
    if (running_) finish_locked();
  }
  // The runtime reports the next execution as failed.
  void fail_next(const std::string& why) {
    std::lock_guard lk(mu_);
    fail_ = why;
  }
  std::vector<CallWords> received() {
    std::lock_guard lk(mu_);
    return received_;
  }
  uint32_t reg(uint32_t offset) {
    std::lock_guard lk(mu_);
    return regs_[offset];
  }
  uint32_t xmem(uint32_t offset) {
    std::lock_guard lk(mu_);
    return xmem_.at(offset / 4);
  }
  std::vector<std::pair<uint32_t, uint32_t>> xmem_log() {
    std::lock_guard lk(mu_);
    return xmem_log_;
  }
  // Index into xmem_log() at which each execution started.
  std::vector<size_t> starts() {
    std::lock_guard lk(mu_);
    return starts_log_;
  }

 private:
  void finish_locked() {
    Outcome o = firmware(received_.back());
    if (o.retcode) xmem_.at(abi::kRetcodeOffset / 4) = *o.retcode;
    if (o.ticks) xmem_.at(abi::kPerfCounterOffset / 4) = *o.ticks;
    regs_[abi::kHostCtrlApCtrl] = 0x6;  // AP_DONE | AP_IDLE
    running_ = false;
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::array<uint32_t, abi::kExchangeMemorySize / 4> xmem_{};
  std::map<uint32_t, uint32_t> regs_;
  std::vector<std::pair<uint32_t, uint32_t>> xmem_log_;
  std::vector<CallWords> received_;
  std::vector<size_t> starts_log_;
  bool running_ = false;
  bool hold_ = false;
  std::optional<std::string> fail_;
};

// Buffer objects as plain host memory; records every runtime operation.
class FakeBufferPort : public accl::hw::BufferPort {
 public:
  struct Op {
    std::string what;  // allocate, map_user, release, write, read
    uint64_t handle = 0;
    size_t offset = 0;
    size_t bytes = 0;
    unsigned bank = 0;
    const void* ptr = nullptr;
  };

  accl::hw::PortBuffer allocate(size_t bytes, accl::MemoryKind kind, unsigned bank) override {
    std::lock_guard lk(mu_);
    Bo bo;
    bo.data.resize(bytes);
    accl::hw::PortBuffer pb;
    pb.handle = next_handle_++;
    pb.bytes = bytes;
    // Device banks at distinct high addresses; host-only memory is seen at its host address.
    if (kind == accl::MemoryKind::host_only) {
      pb.host_ptr = bo.data.data();
      pb.address = reinterpret_cast<uintptr_t>(bo.data.data());
    } else {
      pb.address = (uint64_t{bank} + 1) << 36 | next_offset_;
      next_offset_ += (bytes + 4095) / 4096 * 4096;
    }
    bos_.emplace(pb.handle, std::move(bo));
    ops_.push_back({"allocate", pb.handle, 0, bytes, bank, nullptr});
    return pb;
  }
  accl::hw::PortBuffer map_user(void* ptr, size_t bytes) override {
    std::lock_guard lk(mu_);
    accl::hw::PortBuffer pb;
    pb.handle = next_handle_++;
    pb.address = reinterpret_cast<uintptr_t>(ptr) ^ (uint64_t{1} << 60);  // a distinct "IOVA"
    pb.host_ptr = ptr;
    pb.bytes = bytes;
    bos_.emplace(pb.handle, Bo{});
    ops_.push_back({"map_user", pb.handle, 0, bytes, 0, ptr});
    return pb;
  }
  void release(uint64_t handle) override {
    std::lock_guard lk(mu_);
    if (bos_.erase(handle) == 0) throw std::logic_error("FakeBufferPort: double release");
    ops_.push_back({"release", handle, 0, 0, 0, nullptr});
  }
  void write(uint64_t handle, size_t offset, const void* src, size_t bytes) override {
    std::lock_guard lk(mu_);
    auto& d = bos_.at(handle).data;
    if (offset + bytes > d.size()) throw std::out_of_range("FakeBufferPort: write past the buffer");
    std::memcpy(d.data() + offset, src, bytes);
    ops_.push_back({"write", handle, offset, bytes, 0, src});
  }
  void read(uint64_t handle, size_t offset, void* dst, size_t bytes) override {
    std::lock_guard lk(mu_);
    auto& d = bos_.at(handle).data;
    if (offset + bytes > d.size()) throw std::out_of_range("FakeBufferPort: read past the buffer");
    std::memcpy(dst, d.data() + offset, bytes);
    ops_.push_back({"read", handle, offset, bytes, 0, dst});
  }

  std::vector<Op> ops() {
    std::lock_guard lk(mu_);
    return ops_;
  }
  size_t live() {
    std::lock_guard lk(mu_);
    return bos_.size();
  }

 private:
  struct Bo {
    std::vector<unsigned char> data;
  };
  std::mutex mu_;
  std::map<uint64_t, Bo> bos_;
  std::vector<Op> ops_;
  uint64_t next_handle_ = 1;
  uint64_t next_offset_ = 0;
};

// The device owns its ports; tests keep the models alive past it through these.
class SharedRegisterPort : public accl::hw::RegisterPort {
 public:
  explicit SharedRegisterPort(std::shared_ptr<accl::hw::RegisterPort> p) : p_(std::move(p)) {}
  uint32_t read32(uint32_t o) override { return p_->read32(o); }
  void write32(uint32_t o, uint32_t v) override { p_->write32(o, v); }
  void start_kernel(const accl::hw::HostCtrlArgs& a) override { p_->start_kernel(a); }
  accl::hw::RunStatus wait_kernel(std::chrono::milliseconds t) override { return p_->wait_kernel(t); }

 private:
  std::shared_ptr<accl::hw::RegisterPort> p_;
};

class SharedBufferPort : public accl::hw::BufferPort {
 public:
  explicit SharedBufferPort(std::shared_ptr<accl::hw::BufferPort> p) : p_(std::move(p)) {}
  accl::hw::PortBuffer allocate(size_t b, accl::MemoryKind k, unsigned bank) override { return p_->allocate(b, k, bank); }
  accl::hw::PortBuffer map_user(void* ptr, size_t b) override { return p_->map_user(ptr, b); }
  void release(uint64_t h) override { p_->release(h); }
  void write(uint64_t h, size_t o, const void* s, size_t b) override { p_->write(h, o, s, b); }
  void read(uint64_t h, size_t o, void* d, size_t b) override { p_->read(h, o, d, b); }
  size_t page_size() const override { return p_->page_size(); }

 private:
  std::shared_ptr<accl::hw::BufferPort> p_;
};

}  // namespace hwtest
