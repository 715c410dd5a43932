// SPDX-License-Identifier: Apache-2.0
//
// A fake card for the network bring-up (hw/include/accl_hw/network.hpp):
// register files and kernels that log every access, in order, as one line
// each, so a test compares the whole sequence with the one public ACCL's
// accl_network_utils produces. The lines:
//   "<port> R 0x<offset> -> 0x<value>"       register read
//   "<port> W 0x<offset> 0x<value>"          register write
//   "<port> alloc arg<N> <bytes>"            kernel buffer allocation
//   "<port> start <value>/<bytes> ... buf<handle>"   kernel execution
//   "<port> wait"                            wait for the execution
#pragma once

#include <accl_hw/network.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hwtest {

using Trace = std::vector<std::string>;

inline std::string hx(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// What a test expects, line by line, in the fakes' format.
struct Expect {
  Trace lines;
  void read(const std::string& port, uint32_t offset, uint32_t value) {
    lines.push_back(port + " R " + hx(offset) + " -> " + hx(value));
  }
  void write(const std::string& port, uint32_t offset, uint32_t value) {
    lines.push_back(port + " W " + hx(offset) + " " + hx(value));
  }
  void line(const std::string& text) { lines.push_back(text); }
};

// A register file. Reads return what was written, unless `on_read` answers.
class FakeIp : public accl::hw::IpRegisterPort {
 public:
  FakeIp(std::string name, Trace& trace) : name_(std::move(name)), trace_(trace) {}
  std::map<uint32_t, uint32_t> regs;
  std::function<std::optional<uint32_t>(uint32_t offset)> on_read;
  std::function<void(uint32_t offset, uint32_t value)> on_write;

  uint32_t read32(uint32_t offset) override {
    std::optional<uint32_t> v = on_read ? on_read(offset) : std::nullopt;
    const uint32_t value = v ? *v : regs[offset];
    trace_.push_back(name_ + " R " + hx(offset) + " -> " + hx(value));
    return value;
  }
  void write32(uint32_t offset, uint32_t value) override {
    trace_.push_back(name_ + " W " + hx(offset) + " " + hx(value));
    regs[offset] = value;
    if (on_write) on_write(offset, value);
  }

 private:
  std::string name_;
  Trace& trace_;
};

// A kernel. `on_start` plays the kernel (it may set registers); `on_wait`
// says how the wait ends (done by default).
class FakeKernel : public accl::hw::KernelPort {
 public:
  FakeKernel(std::string name, Trace& trace) : name_(std::move(name)), trace_(trace) {}
  std::map<uint32_t, uint32_t> regs;
  std::function<void(const std::vector<accl::hw::KernelArg>&, std::map<uint32_t, uint32_t>&)> on_start;
  std::function<accl::hw::RunStatus()> on_wait;
  std::vector<size_t> buffer_bytes;  // by handle - 1

  uint64_t allocate_buffer(int arg, size_t bytes) override {
    trace_.push_back(name_ + " alloc arg" + std::to_string(arg) + " " + std::to_string(bytes));
    buffer_bytes.push_back(bytes);
    return buffer_bytes.size();
  }
  void start(const std::vector<accl::hw::KernelArg>& args) override {
    std::string line = name_ + " start";
    for (const auto& a : args)
      line += a.buffer ? " buf" + std::to_string(a.value) : " " + hx(a.value) + "/" + std::to_string(a.bytes);
    trace_.push_back(line);
    if (on_start) on_start(args, regs);
  }
  accl::hw::RunStatus wait(std::chrono::milliseconds) override {
    trace_.push_back(name_ + " wait");
    return on_wait ? on_wait() : accl::hw::RunStatus{accl::hw::RunState::done, ""};
  }
  uint32_t read32(uint32_t offset) override {
    const uint32_t value = regs[offset];
    trace_.push_back(name_ + " R " + hx(offset) + " -> " + hx(value));
    return value;
  }

 private:
  std::string name_;
  Trace& trace_;
};

// Lines that differ, for a readable failure: "line N: expected ... / got ...".
inline std::string first_difference(const Trace& want, const Trace& got) {
  for (size_t i = 0; i < std::max(want.size(), got.size()); ++i) {
    const std::string w = i < want.size() ? want[i] : "(end)";
    const std::string g = i < got.size() ? got[i] : "(end)";
    if (w != g) return "line " + std::to_string(i) + ": expected '" + w + "', got '" + g + "'";
  }
  return "";
}

inline accl::hw::NetworkPlan test_plan(accl::hw::NetworkDesign design, int rank, int size) {
  accl::hw::NetworkPlan plan;
  plan.design = design;
  plan.rank = rank;
  plan.peers = accl::hw::public_network_peers(size);
  plan.timeout = std::chrono::milliseconds(200);
  plan.retry_interval = std::chrono::milliseconds(0);
  return plan;
}

}  // namespace hwtest
