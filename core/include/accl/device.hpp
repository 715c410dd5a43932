// SPDX-License-Identifier: Apache-2.0
//
// The register-level CCLO device seen by the driver. Both the bundled emulator
// (emu/) and the XRT backend (hw/) implement this one interface; the driver
// cannot tell them apart except by speed (and simulated()). Which one a
// process opens is decided in one place, devices/ (accl_devices/devices.hpp).
#pragma once

#include <accl/abi.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace accl {

// One call as the host controller hands it to the CCLO: the 15 argument
// words of the public ABI (addresses split into low/high words).
struct CallWords {
  std::array<uint32_t, abi::kCallWords> words{};

  uint32_t& operator[](abi::CallWord w) { return words[w]; }
  uint32_t operator[](abi::CallWord w) const { return words[w]; }
  void set_addr(int operand, uint64_t addr) {
    words[abi::kWordAddr0Low + 2 * operand] = static_cast<uint32_t>(addr);
    words[abi::kWordAddr0High + 2 * operand] = static_cast<uint32_t>(addr >> 32);
  }
  uint64_t addr(int operand) const {
    return static_cast<uint64_t>(words[abi::kWordAddr0Low + 2 * operand]) |
           (static_cast<uint64_t>(words[abi::kWordAddr0High + 2 * operand]) << 32);
  }
};

// Identifies one started call on one device. 0 is never a valid id.
using CallId = uint64_t;

struct CallResult {
  uint32_t retcode = 0;        // RETCODE error bits of this call
  uint64_t duration_ns = 0;    // device-measured execution time
};

// Where a memory allocation lives.
enum class MemoryKind {
  device,     // device memory bank (the host needs sync to see it)
  host_only,  // host memory the CCLO reaches directly (host flag set in calls)
};

struct DeviceAllocation {
  uint64_t address = 0;   // address the CCLO uses in calls
  void* host_ptr = nullptr;  // for host_only: where the host sees the bytes
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::device;
};

class Device {
 public:
  virtual ~Device() = default;

  // "emu" or "xrt"; for messages only.
  virtual std::string name() const = 0;

  // --- Exchange memory and status registers (byte offsets, 32-bit words) ---
  virtual uint32_t read(uint32_t offset) = 0;
  virtual void write(uint32_t offset, uint32_t value) = 0;

  // --- Calls ---
  // Queues a call. It starts on the device once every call in `waitfor`
  // (started on this device) has completed; a failed dependency still lets
  // the dependent call run (the driver reports the failure). Returns at once.
  virtual CallId start(const CallWords& call, std::span<const CallId> waitfor) = 0;
  // Blocks until the call completes or `timeout` passes; true when complete.
  virtual bool wait(CallId id, std::chrono::nanoseconds timeout) = 0;
  virtual bool test(CallId id) = 0;
  // Result of a completed call. Valid until release().
  virtual CallResult result(CallId id) = 0;
  virtual void release(CallId id) = 0;

  // --- Memory ---
  virtual DeviceAllocation allocate(size_t bytes, MemoryKind kind, unsigned bank) = 0;
  // Makes existing host memory reachable by the CCLO as host_only memory
  // (emulator: the pointer itself; XRT: a user-pointer buffer object).
  virtual DeviceAllocation map_host(void* ptr, size_t bytes) = 0;
  virtual void free(const DeviceAllocation& alloc) = 0;
  virtual void copy_to_device(uint64_t address, const void* src, size_t bytes) = 0;
  virtual void copy_from_device(uint64_t address, void* dst, size_t bytes) = 0;

  // --- Added after the interface above; last, so that the slots before it
  // keep their places for devices built against the older header ---
  // test() and, when it says complete, result() in one trip: a driver that
  // polls a call collects its result the moment it sees it complete, and a
  // device may answer both from one look at the call. Throws as those two do.
  // (Defined out of line: inlined, callers paid for a guess at the target
  // on their every poll.)
  virtual bool test_result(CallId id, CallResult& out);

  // Whether the CCLO is simulated in software (the bundled emulator, a
  // simulator client) rather than an FPGA. A property of the device, not of
  // its name: the default is hardware.
  virtual bool simulated() const;
};

}  // namespace accl
