// SPDX-License-Identifier: Apache-2.0
#include "sim_memory.hpp"

#include <accl_hw/sim.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

namespace accl::hw {
namespace {

// Public ACCL's simulated buffers start on 4 KiB boundaries (the RTL
// simulation's address decoding relies on it) and each memory is 256 MiB
// (ACCL_SIM_MEM_SIZE_KB); the session refuses what lies beyond.
constexpr uint64_t kPageBytes = 4096;
constexpr uint64_t kSpaceBytes = uint64_t{256} << 20;

uint64_t whole_pages(size_t bytes) {
  return (std::max<uint64_t>(bytes, 1) + kPageBytes - 1) / kPageBytes * kPageBytes;
}

}  // namespace

uint64_t SimMemory::reserve(Space& space, size_t bytes) {
  const uint64_t need = whole_pages(bytes);
  // First gap from address 0 between the reserved ranges.
  uint64_t candidate = 0;
  for (const auto& [start, size] : space.used) {
    if (start - candidate >= need) break;
    candidate = start + size;
  }
  if (need > kSpaceBytes || candidate > kSpaceBytes - need)
    throw SimError("simulator session at " + session_->endpoint() + ": no room for " + std::to_string(bytes) +
                   " bytes in its " + space.name + " (256 MiB, as public ACCL's simulations)");
  // The session learns of every buffer (the RTL simulation checks the range).
  session_->mem_allocate(candidate, bytes, &space == &host_);
  space.used.emplace(candidate, need);
  return candidate;
}

PortBuffer SimMemory::add(Entry entry) {
  PortBuffer pb;
  pb.address = entry.address;
  pb.bytes = entry.bytes;
  pb.host_ptr = entry.host_ptr;
  pb.handle = next_handle_++;
  if (entry.host) host_by_address_.emplace(entry.address, pb.handle);
  entries_.emplace(pb.handle, std::move(entry));
  return pb;
}

PortBuffer SimMemory::allocate_device(size_t bytes, unsigned bank) {
  if (bank != 0)
    throw SimError("simulator session at " + session_->endpoint() + ": device bank " + std::to_string(bank) +
                   " does not exist (public ACCL's simulations have one bank, 0)");
  std::lock_guard lk(mu_);
  Entry e;
  e.address = reserve(device_, bytes);
  e.bytes = bytes;
  return add(std::move(e));
}

PortBuffer SimMemory::allocate_host(size_t bytes) {
  Entry e;
  e.owned = std::make_unique<uint8_t[]>(std::max<size_t>(bytes, 1));  // value-initialized: zeroed
  e.host_ptr = e.owned.get();
  return map_host_entry(std::move(e), bytes);
}

PortBuffer SimMemory::map_host(void* ptr, size_t bytes) {
  Entry e;
  e.host_ptr = ptr;
  return map_host_entry(std::move(e), bytes);
}

PortBuffer SimMemory::map_host_entry(Entry e, size_t bytes) {
  std::lock_guard lk(mu_);
  e.host = true;
  e.bytes = bytes;
  e.address = reserve(host_, bytes);
  return add(std::move(e));
}

void SimMemory::release(uint64_t handle) {
  std::lock_guard lk(mu_);
  auto it = entries_.find(handle);
  if (it == entries_.end()) return;
  // Nothing to tell the session: it never frees; the range is reused here.
  const Entry& e = it->second;
  (e.host ? host_ : device_).used.erase(e.address);
  if (e.host) {
    auto [first, last] = host_by_address_.equal_range(e.address);
    for (auto h = first; h != last; ++h)
      if (h->second == handle) {
        host_by_address_.erase(h);
        break;
      }
  }
  entries_.erase(it);
}

const SimMemory::Entry& SimMemory::device_entry(uint64_t handle, size_t offset, size_t bytes, const char* what) const {
  auto it = entries_.find(handle);
  if (it == entries_.end() || it->second.host)
    throw SimError("simulator session: " + std::string(what) + " of unknown device buffer " + std::to_string(handle));
  if (offset > it->second.bytes || bytes > it->second.bytes - offset)
    throw SimError("simulator session: " + std::string(what) + " of " + std::to_string(bytes) + " bytes at offset " +
                   std::to_string(offset) + " passes the end of a " + std::to_string(it->second.bytes) +
                   "-byte buffer");
  return it->second;
}

void SimMemory::write(uint64_t handle, size_t offset, const void* src, size_t bytes) {
  uint64_t address = 0;
  {
    std::lock_guard lk(mu_);
    address = device_entry(handle, offset, bytes, "write").address + offset;
  }
  session_->mem_write(address, false, src, bytes);
}

void SimMemory::read(uint64_t handle, size_t offset, void* dst, size_t bytes) {
  uint64_t address = 0;
  {
    std::lock_guard lk(mu_);
    address = device_entry(handle, offset, bytes, "read").address + offset;
  }
  session_->mem_read(address, false, dst, bytes);
}

const SimMemory::Entry* SimMemory::host_entry_at(uint64_t address) const {
  auto it = host_by_address_.upper_bound(address);
  if (it == host_by_address_.begin()) return nullptr;
  const Entry& e = entries_.at(std::prev(it)->second);
  return address - e.address < std::max<size_t>(e.bytes, 1) ? &e : nullptr;
}

namespace {

// Operand i's host flag in the stream-flags argument: (host_flags << 8) | stream_flags.
bool host_flag(const HostCtrlArgs& args, int operand) {
  static constexpr uint64_t kFlags[] = {abi::kOp0Host, abi::kOp1Host, abi::kResHost};
  return ((args.value[kArgStreamFlags] >> 8) & kFlags[operand]) != 0;
}

}  // namespace

void SimMemory::push_host_operands(const HostCtrlArgs& args) {
  std::lock_guard lk(mu_);
  std::vector<const Entry*> pushed;
  for (int operand = 0; operand < 3; ++operand) {
    if (!host_flag(args, operand)) continue;
    const uint64_t address = args.value[kArgAddr0 + operand];
    const Entry* e = host_entry_at(address);
    if (e == nullptr)
      throw SimError("simulator session at " + session_->endpoint() + ": host operand address " +
                     std::to_string(address) + " is in no host-only buffer of this device");
    // The result too: the call may write only part of it, and the pull
    // afterwards brings the whole buffer back.
    if (std::find(pushed.begin(), pushed.end(), e) != pushed.end() || e->bytes == 0) continue;
    session_->mem_write(e->address, true, e->host_ptr, e->bytes);
    pushed.push_back(e);
  }
}

void SimMemory::pull_host_result(const HostCtrlArgs& args) {
  constexpr int kResult = 2;
  if (!host_flag(args, kResult)) return;
  std::lock_guard lk(mu_);
  const Entry* e = host_entry_at(args.value[kArgAddr0 + kResult]);
  if (e == nullptr || e->bytes == 0) return;  // released while the call ran
  session_->mem_read(e->address, true, e->host_ptr, e->bytes);
}

}  // namespace accl::hw
