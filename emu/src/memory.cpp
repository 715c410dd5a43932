// SPDX-License-Identifier: Apache-2.0
#include "memory.hpp"

#include <accl/log.hpp>

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace accl::emu {

namespace {
uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
constexpr uint64_t kHugePageBytes = uint64_t{2} << 20;

std::string hex(uint64_t v) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(v));
  return text;
}
}  // namespace

// ---------------------------------------------------------------------------
// RangeAllocator
// ---------------------------------------------------------------------------
RangeAllocator::RangeAllocator(uint64_t size, uint64_t alignment) : size_(size), alignment_(alignment) {
  if (size_ > 0) free_.emplace(0, size_);
}

std::optional<uint64_t> RangeAllocator::allocate(uint64_t bytes) {
  uint64_t len = round_up(bytes == 0 ? 1 : bytes, alignment_);
  if (len < bytes) return std::nullopt;  // overflow of the rounding
  // First fit: lowest address, keeps the working set of a long run compact.
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < len) continue;
    uint64_t offset = it->first;
    uint64_t rest = it->second - len;
    free_.erase(it);
    if (rest > 0) free_.emplace(offset + len, rest);
    blocks_.emplace(offset, len);
    used_ += len;
    return offset;
  }
  return std::nullopt;
}

uint64_t RangeAllocator::free(uint64_t offset) {
  auto b = blocks_.find(offset);
  if (b == blocks_.end()) return 0;
  uint64_t len = b->second;
  blocks_.erase(b);
  used_ -= len;
  // Coalesce with the free neighbours so large blocks become available again.
  auto next = free_.lower_bound(offset);
  uint64_t start = offset, end = offset + len;
  if (next != free_.end() && next->first == end) {
    end += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      free_.erase(prev);
    }
  }
  free_.emplace(start, end - start);
  return len;
}

// ---------------------------------------------------------------------------
// Bank
// ---------------------------------------------------------------------------
Bank::Bank(uint64_t base_address, size_t bytes, uint64_t alignment, uint64_t release_above)
    : base_(base_address), bytes_(bytes), alloc_(0, alignment) {
  // A large virtual reservation costs nothing until pages are touched
  // (MAP_NORESERVE: no swap accounting). If the system refuses (strict
  // overcommit, small address-space limit), fall back to smaller sizes.
  size_t want = round_up(bytes, DeviceMemory::kAlignment);
  void* p = MAP_FAILED;
  while (want >= DeviceMemory::kAlignment) {
    p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) break;
    want /= 2;
  }
  if (p == MAP_FAILED) throw std::bad_alloc();
  if (want != round_up(bytes, DeviceMemory::kAlignment))
    ACCL_LOG_WARN("emulated memory at {}: only {} of {} bytes could be reserved", hex(base_address), want, bytes);
  // Transparent huge pages cut first-touch page faults 512x for big buffers;
  // purely advisory.
  (void)madvise(p, want, MADV_HUGEPAGE);
  data_ = static_cast<std::byte*>(p);
  bytes_ = want;
  alloc_ = RangeAllocator(bytes_, alignment);
  // Huge-page aligned, so a release splits no huge page of the kept part.
  if (release_above != 0) release_keep_ = std::min<uint64_t>(round_up(release_above, kHugePageBytes), bytes_);
}

Bank::~Bank() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

std::optional<uint64_t> Bank::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto off = alloc_.allocate(bytes);
  if (!off) return std::nullopt;
  touched_end_ = std::max<uint64_t>(touched_end_, *off + std::max<size_t>(bytes, 1));
  return base_ + *off;
}

uint64_t Bank::free(uint64_t address) {
  if (!contains(address)) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t freed = alloc_.free(address - base_);
  const uint64_t keep = release_keep_;
  if (freed != 0 && keep != 0 && alloc_.used_bytes() == 0 && touched_end_ > keep) {
    // Nothing lives in the bank any more: the deep part of a burst need not
    // stay resident for the rest of the run (its pages come back zeroed on
    // next use). The first `keep` bytes, where first fit puts everyday
    // traffic, stay, so a store that keeps running deep and draining does
    // not fault its hot pages back in each time.
    const uint64_t end = std::min<uint64_t>(round_up(touched_end_, DeviceMemory::kAlignment), bytes_);
    if (madvise(data_ + keep, end - keep, MADV_DONTNEED) != 0)
      ACCL_LOG_WARN("emulated memory at {}: releasing {} bytes failed: {}", hex(base_ + keep), end - keep,
                    std::strerror(errno));
    touched_end_ = keep;
  }
  return freed;
}

uint64_t Bank::touched_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return touched_end_;
}

uint64_t Bank::used_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return alloc_.used_bytes();
}

// ---------------------------------------------------------------------------
// DeviceMemory
// ---------------------------------------------------------------------------
DeviceMemory::DeviceMemory(unsigned banks, size_t bank_bytes, size_t overflow_bytes) {
  if (banks == 0 || banks >= kOverflowBankTag - 1) throw std::invalid_argument("emulated CCLO: bank count must be 1..254");
  if (bank_bytes == 0 || bank_bytes > kOffsetMask)
    throw std::invalid_argument("emulated CCLO: bank size must be 1 byte .. 1 TiB");
  for (unsigned b = 0; b < banks; ++b)
    banks_.push_back(std::make_unique<Bank>(uint64_t{b + 1} << kAddressShift, bank_bytes, kAlignment));
  // The overflow store holds small eager segments: 64-byte granularity. A
  // burst of unexpected data above kOverflowKeepBytes is released once the
  // store empties again.
  overflow_ = std::make_unique<Bank>(kOverflowBankTag << kAddressShift,
                                     overflow_bytes == 0 ? kAlignment : overflow_bytes, 64, kOverflowKeepBytes);
}

DeviceMemory::~DeviceMemory() {
  std::unique_lock<std::shared_mutex> lock(host_mutex_);
  for (auto& [ptr, region] : host_)
    if (region.owned) std::free(reinterpret_cast<void*>(ptr));
}

DeviceAllocation DeviceMemory::allocate(size_t bytes, MemoryKind kind, unsigned bank) {
  DeviceAllocation a;
  a.bytes = bytes;
  a.kind = kind;
  if (kind == MemoryKind::host_only) {
    size_t len = round_up(bytes == 0 ? 1 : bytes, kAlignment);
    void* p = std::aligned_alloc(kAlignment, len);
    if (p == nullptr) throw std::bad_alloc();
    a.host_ptr = p;
    a.address = reinterpret_cast<uintptr_t>(p);
    std::unique_lock<std::shared_mutex> lock(host_mutex_);
    host_.emplace(a.address, HostRegion{len, true});
    host_max_bytes_ = std::max(host_max_bytes_, len);
    return a;
  }
  if (bank >= banks_.size())
    throw std::invalid_argument("emulated CCLO: memory bank " + std::to_string(bank) + " does not exist (banks: " +
                                std::to_string(banks_.size()) + ")");
  auto addr = banks_[bank]->allocate(bytes);
  if (!addr)
    throw std::bad_alloc();
  a.address = *addr;
  return a;
}

DeviceAllocation DeviceMemory::map_host(void* ptr, size_t bytes) {
  if (bytes > 0 && reinterpret_cast<uintptr_t>(ptr) < kFirstPageEnd)
    throw std::invalid_argument("emulated CCLO: map_host of " + std::to_string(bytes) + " bytes at " +
                                hex(reinterpret_cast<uintptr_t>(ptr)) +
                                ": a null or first-page pointer is never host memory");
  DeviceAllocation a;
  a.address = reinterpret_cast<uintptr_t>(ptr);
  a.host_ptr = ptr;
  a.bytes = bytes;
  a.kind = MemoryKind::host_only;
  std::unique_lock<std::shared_mutex> lock(host_mutex_);
  host_.emplace(a.address, HostRegion{bytes, false});
  host_max_bytes_ = std::max(host_max_bytes_, bytes);
  return a;
}

void DeviceMemory::free(const DeviceAllocation& alloc) {
  if (alloc.kind == MemoryKind::host_only) {
    std::unique_lock<std::shared_mutex> lock(host_mutex_);
    auto range = host_.equal_range(alloc.address);
    // Prefer the exact registration (same size) when memory was mapped twice.
    auto victim = host_.end();
    for (auto it = range.first; it != range.second; ++it) {
      if (victim == host_.end()) victim = it;
      bool exact = it->second.bytes == alloc.bytes ||
                   (it->second.owned && it->second.bytes == round_up(alloc.bytes == 0 ? 1 : alloc.bytes, kAlignment));
      if (exact) {
        victim = it;
        break;
      }
    }
    if (victim == host_.end()) {
      ACCL_LOG_ERROR("emulated CCLO: free of unknown host memory {} ({} bytes) ignored", hex(alloc.address), alloc.bytes);
      return;
    }
    host_generation_.fetch_add(1, std::memory_order_release);  // before it goes: see HostHint
    if (victim->second.owned) std::free(reinterpret_cast<void*>(victim->first));
    host_.erase(victim);
    return;
  }
  uint64_t bank = (alloc.address >> kAddressShift) - 1;
  if (bank >= banks_.size() || banks_[bank]->free(alloc.address) == 0)
    ACCL_LOG_ERROR("emulated CCLO: free of unknown device memory {} ({} bytes) ignored", hex(alloc.address), alloc.bytes);
}

uint32_t DeviceMemory::resolve_device(uint64_t addr, uint64_t bytes, std::byte*& out,
                                      bool overflow_store) const noexcept {
  uint64_t tag = addr >> kAddressShift;
  const Bank* bank = nullptr;
  if (tag >= 1 && tag <= banks_.size()) bank = banks_[tag - 1].get();
  else if (tag == kOverflowBankTag && overflow_store) bank = overflow_.get();
  if (bank == nullptr) return abi::kDmaDecodeError;
  out = bank->translate(addr, bytes);
  return out != nullptr ? 0u : static_cast<uint32_t>(abi::kDmaSlaveError);
}

uint32_t DeviceMemory::resolve_host(uint64_t addr, uint64_t bytes, std::byte*& out, HostHint* hint) const noexcept {
  // Read before the lookup, so that a region removed after it makes what the
  // hint remembers stale.
  // Defence in depth: host address 0 (and the rest of the never-mapped first
  // page, where MPI_IN_PLACE points) is not memory even if a region there
  // were registered.
  if (addr < kFirstPageEnd && bytes > 0) return abi::kDmaDecodeError;
  const uint64_t generation = host_generation_.load(std::memory_order_acquire);
  std::shared_lock<std::shared_mutex> lock(host_mutex_);
  uint32_t err = abi::kDmaDecodeError;
  // Walk back over regions starting at or below addr; none further back than
  // the largest region can contain it.
  auto it = host_.upper_bound(addr);
  while (it != host_.begin()) {
    --it;
    uint64_t off = addr - it->first;
    if (off > host_max_bytes_) break;
    if (off < it->second.bytes || (off == it->second.bytes && bytes == 0)) {
      if (bytes <= it->second.bytes - off) {
        if (hint != nullptr) hint->remember(it->first, it->second.bytes, generation);
        out = reinterpret_cast<std::byte*>(addr);
        return 0;
      }
      err = abi::kDmaSlaveError;  // starts inside a region but runs past its end
    }
  }
  return err;
}

uint32_t DeviceMemory::resolve_searched(uint64_t addr, bool host, uint64_t bytes, std::byte*& out,
                                        HostHint* hint) const noexcept {
  out = nullptr;
  return host ? resolve_host(addr, bytes, out, hint) : resolve_device(addr, bytes, out, false);
}

uint32_t DeviceMemory::resolve_source_searched(uint64_t addr, bool host, uint64_t bytes, const std::byte*& out,
                                               HostHint* hint) const noexcept {
  out = nullptr;
  std::byte* p = nullptr;
  const uint32_t err = host ? resolve_host(addr, bytes, p, hint) : resolve_device(addr, bytes, p, true);
  out = p;
  return err;
}

std::byte* DeviceMemory::checked(uint64_t address, size_t bytes, const char* what) const {
  std::byte* p = nullptr;
  // copy_to/from_device takes the CCLO address of any allocation: a device
  // bank address, or a host_only allocation's address (then a plain copy).
  uint32_t err = resolve_device(address, bytes, p, false);
  if (err == abi::kDmaDecodeError) err = resolve_host(address, bytes, p);
  if (err != 0) {
    throw std::out_of_range(std::string("emulated CCLO: ") + what + " of " + std::to_string(bytes) + " bytes at " +
                            hex(address) +
                            (err == abi::kDmaSlaveError ? " runs past the end of its memory bank or buffer"
                                                        : " is not in any memory bank or registered host buffer"));
  }
  return p;
}

void DeviceMemory::copy_to_device(uint64_t address, const void* src, size_t bytes) {
  std::byte* p = checked(address, bytes, "copy_to_device");
  if (bytes > 0) std::memcpy(p, src, bytes);
}

void DeviceMemory::copy_from_device(uint64_t address, void* dst, size_t bytes) {
  const std::byte* p = checked(address, bytes, "copy_from_device");
  if (bytes > 0) std::memcpy(dst, p, bytes);
}

}  // namespace accl::emu
