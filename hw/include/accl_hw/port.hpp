// SPDX-License-Identifier: Apache-2.0
//
// The seam between the hardware backend's logic and the card. Everything the
// backend decides (call encoding, exchange-memory bounds, retcode and perf
// counter read-back, call ordering and chaining, buffer bookkeeping) lives in
// CcloDevice (cclo_device.hpp) and talks to the card only through these two
// narrow interfaces. XrtRegisterPort / XrtBufferPort (src/xrt_port.cpp) are
// the only code that calls XRT; tests implement the same interfaces on a
// register model or an emulated CCLO and run the unchanged backend on top.
#pragma once

#include <accl/device.hpp>
#include <accl_hw/hostctrl.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace accl::hw {

enum class RunState {
  done,     // the hostctrl execution finished (the CCLO returned a status word)
  pending,  // still running when the wait timed out
  failed,   // the runtime aborted or lost the execution (detail says why)
};

struct RunStatus {
  RunState state = RunState::pending;
  std::string detail;
};

// CCLO registers and the host-controller kernel. Calls are never concurrent:
// CcloDevice serializes register access and runs one execution at a time.
class RegisterPort {
 public:
  virtual ~RegisterPort() = default;
  // CCLO AXI-Lite (exchange memory): byte offset, 32-bit word.
  virtual uint32_t read32(uint32_t offset) = 0;
  virtual void write32(uint32_t offset, uint32_t value) = 0;
  // Starts one hostctrl execution with all 12 arguments. At most one
  // execution is in flight; the next start follows a wait that returned done
  // or failed.
  virtual void start_kernel(const HostCtrlArgs& args) = 0;
  // Waits at most `timeout` (>= 1 ms) for the running execution.
  virtual RunStatus wait_kernel(std::chrono::milliseconds timeout) = 0;
};

// One buffer object of the card's runtime.
struct PortBuffer {
  uint64_t handle = 0;       // port-chosen, never 0
  uint64_t address = 0;      // device address the CCLO uses
  void* host_ptr = nullptr;  // host view of host-only memory; nullptr for device memory
  size_t bytes = 0;
};

class BufferPort {
 public:
  virtual ~BufferPort() = default;
  // Device memory in `bank` (MemoryKind::device) or host memory the CCLO
  // reaches (MemoryKind::host_only, host_ptr set).
  virtual PortBuffer allocate(size_t bytes, MemoryKind kind, unsigned bank) = 0;
  // Host-only buffer over existing memory; ptr and bytes are multiples of
  // page_size() (CcloDevice widens unaligned ranges).
  virtual PortBuffer map_user(void* ptr, size_t bytes) = 0;
  virtual void release(uint64_t handle) = 0;
  // Device memory only: copy and synchronize [offset, offset + bytes).
  virtual void write(uint64_t handle, size_t offset, const void* src, size_t bytes) = 0;
  virtual void read(uint64_t handle, size_t offset, void* dst, size_t bytes) = 0;
  // Alignment the runtime requires for user pointers.
  virtual size_t page_size() const { return 4096; }
};

}  // namespace accl::hw
