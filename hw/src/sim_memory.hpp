// SPDX-License-Identifier: Apache-2.0
//
// The driver side's book of a simulator instance's memory. The session
// allocates nothing itself: public ACCL's simulated buffers pick their own
// addresses, from 0 upward in 4 KiB steps, in device bank 0 and in a
// separate host address space, and the session never frees. Here freed
// ranges are reused (first fit from address 0), so a long run does not grow
// the session's memory without bound.
//
// Host-only buffers are shadowed: the bytes the driver and the user see live
// in this process (PortBuffer::host_ptr); the session's host address space
// holds a copy that push_host_operands() refreshes before each call and
// pull_host_result() brings back after it, whole buffers at a time, as public
// ACCL's simulated buffers sync around every call.
#pragma once

#include "sim_session.hpp"

#include <accl/device.hpp>
#include <accl_hw/hostctrl.hpp>
#include <accl_hw/port.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace accl::hw {

class SimMemory {
 public:
  explicit SimMemory(std::shared_ptr<SimSession> session) : session_(std::move(session)) {}

  // Device memory (bank 0 only: public ACCL's simulations have one bank).
  PortBuffer allocate_device(size_t bytes, unsigned bank);
  // Host-only memory owned here (zeroed).
  PortBuffer allocate_host(size_t bytes);
  // Host-only memory over the caller's bytes.
  PortBuffer map_host(void* ptr, size_t bytes);
  void release(uint64_t handle);
  // Device buffers only (host-only bytes are read and written in place).
  void write(uint64_t handle, size_t offset, const void* src, size_t bytes);
  void read(uint64_t handle, size_t offset, void* dst, size_t bytes);

  // Around one call: copy the host-only buffers its operands name (host
  // flags of the stream-flags argument) to the session, and afterwards its
  // host-only result buffer back.
  void push_host_operands(const HostCtrlArgs& args);
  void pull_host_result(const HostCtrlArgs& args);

 private:
  // One address space: reserved ranges by start address.
  struct Space {
    const char* name;
    std::map<uint64_t, uint64_t> used;  // start -> bytes (whole pages)
  };
  struct Entry {
    uint64_t address = 0;
    size_t bytes = 0;
    bool host = false;
    void* host_ptr = nullptr;            // host-only: the bytes this process sees
    std::unique_ptr<uint8_t[]> owned;    // host-only memory allocated here
  };

  // A free range of `bytes` in `space`, announced to the session.
  uint64_t reserve(Space& space, size_t bytes);
  PortBuffer map_host_entry(Entry entry, size_t bytes);
  PortBuffer add(Entry entry);
  const Entry& device_entry(uint64_t handle, size_t offset, size_t bytes, const char* what) const;
  // The host-only buffer holding `address`, or nullptr.
  const Entry* host_entry_at(uint64_t address) const;

  std::shared_ptr<SimSession> session_;
  std::mutex mu_;
  Space device_{"device bank 0", {}};
  Space host_{"host memory", {}};
  std::unordered_map<uint64_t, Entry> entries_;  // by handle
  std::map<uint64_t, uint64_t> host_by_address_;  // host-only: address -> handle
  uint64_t next_handle_ = 1;
};

}  // namespace accl::hw
