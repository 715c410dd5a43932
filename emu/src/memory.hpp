// SPDX-License-Identifier: Apache-2.0
//
// Memory an emulated CCLO reaches: device memory banks, registered host
// memory, and the overflow store of the receive side.
//
// Address map (64-bit CCLO addresses):
//   device bank b:   ((b + 1) << 40) + offset, offset < bank size
//   overflow store:  (kOverflowBankTag << 40) + offset  (internal, device-like)
//   host memory:     the host pointer itself, used with the host flag
//
// Each bank is one MAP_NORESERVE mapping (pages are committed on first use)
// managed by a first-fit allocator; addresses never move, so pointers handed
// to transports stay valid for the bank's life.
#pragma once

#include <accl/device.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <vector>

namespace accl::emu {

// First-fit allocator over [0, size). Not thread-safe (Bank locks).
class RangeAllocator {
 public:
  RangeAllocator(uint64_t size, uint64_t alignment);
  // Offset of a new block of at least `bytes` (rounded up to the alignment;
  // 0 bytes counts as one unit), or nullopt when no free range fits.
  std::optional<uint64_t> allocate(uint64_t bytes);
  // Size of the freed block, or 0 when `offset` is not an allocated block.
  uint64_t free(uint64_t offset);
  uint64_t used_bytes() const { return used_; }
  uint64_t size() const { return size_; }
  size_t free_ranges() const { return free_.size(); }

 private:
  uint64_t size_;
  uint64_t alignment_;
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> free_;   // offset -> length, coalesced
  std::map<uint64_t, uint64_t> blocks_; // offset -> length of allocated blocks
};

// One contiguous mapping at a fixed CCLO base address.
class Bank {
 public:
  // release_above: when the last block is freed after blocks reached deeper
  // than this (rounded up to 2 MiB), the pages beyond it go back to the
  // system; the first release_above bytes stay resident (0: never release;
  // the overflow store after a deep burst of unexpected data).
  Bank(uint64_t base_address, size_t bytes, uint64_t alignment, uint64_t release_above = 0);
  ~Bank();
  Bank(const Bank&) = delete;
  Bank& operator=(const Bank&) = delete;

  // CCLO address of a new block, or nullopt when the bank is full.
  std::optional<uint64_t> allocate(size_t bytes);
  // Bytes freed (0: not an allocated block).
  uint64_t free(uint64_t address);
  uint64_t used_bytes() const;
  // End of the deepest block allocated since the last release, or the kept
  // part after a release (tests).
  uint64_t touched_bytes() const;

  uint64_t base() const { return base_; }
  size_t size() const { return bytes_; }
  bool contains(uint64_t address) const { return address - base_ < bytes_; }
  // Pointer to [address, address + bytes) or nullptr when it leaves the bank.
  std::byte* translate(uint64_t address, uint64_t bytes) const noexcept {
    uint64_t off = address - base_;
    if (off > bytes_ || bytes > bytes_ - off) return nullptr;
    return data_ + off;
  }

 private:
  uint64_t base_;
  size_t bytes_;
  std::byte* data_ = nullptr;
  mutable std::mutex mutex_;
  RangeAllocator alloc_;
  uint64_t release_keep_ = 0;  // bytes kept resident on a release (release_above rounded; 0: never release)
  uint64_t touched_end_ = 0;   // end of the highest block allocated since the last release
};

class DeviceMemory {
 public:
  static constexpr unsigned kAddressShift = 40;
  static constexpr uint64_t kOffsetMask = (uint64_t{1} << kAddressShift) - 1;
  static constexpr uint64_t kOverflowBankTag = 0x100;  // far above any device bank
  static constexpr uint64_t kAlignment = 4096;
  // Host addresses below this (the null page, never mapped by Linux) are never
  // memory: map_host refuses them and resolves of them fail.
  static constexpr uint64_t kFirstPageEnd = 4096;
  // Depth of the overflow store whose pages stay resident; the pages of a
  // deeper burst are released once the store is empty again (see Bank).
  static constexpr uint64_t kOverflowKeepBytes = uint64_t{8} << 20;

  DeviceMemory(unsigned banks, size_t bank_bytes, size_t overflow_bytes);
  ~DeviceMemory();

  // Device interface semantics; throw std::invalid_argument / std::bad_alloc.
  DeviceAllocation allocate(size_t bytes, MemoryKind kind, unsigned bank);
  DeviceAllocation map_host(void* ptr, size_t bytes);
  void free(const DeviceAllocation& alloc);
  // Throw std::out_of_range for addresses outside every bank / host region.
  void copy_to_device(uint64_t address, const void* src, size_t bytes);
  void copy_from_device(uint64_t address, void* dst, size_t bytes);

  // What one caller remembers of the registered host regions that its last
  // resolves through it found (one thread at a time per hint; the Mover keeps
  // one per operand): a range inside one of them resolves again without the
  // lock and the region search while no host region was removed since. A
  // few regions, not one: the PMPI layer stages small messages in a few
  // buffers in turn.
  struct HostHint {
    struct Region {
      uintptr_t base = 0;
      uint64_t bytes = 0;  // 0: matches nothing
    };
    static constexpr unsigned kRegions = 4;
    Region regions[kRegions];
    unsigned next = 0;        // the one replaced next
    uint64_t generation = 0;  // host_generation_ when they were found; 0: nothing remembered

    // [addr, addr + len) lies inside a region remembered at `now` (an empty
    // range at a region's end is left to the search).
    bool covers(uint64_t addr, uint64_t len, uint64_t now) const {
      if (generation != now) return false;
      for (const Region& r : regions) {
        const uint64_t off = addr - r.base;
        if (off < r.bytes && len <= r.bytes - off) return true;
      }
      return false;
    }
    void remember(uintptr_t base, uint64_t bytes, uint64_t found_at) {
      if (generation != found_at) {
        *this = HostHint{};
        generation = found_at;
      }
      regions[next] = Region{base, bytes};
      next = (next + 1) % kRegions;
    }
  };

  // Data-plane access: pointer to [addr, addr + bytes) or error bits
  // (kDmaDecodeError: address in no bank/region; kDmaSlaveError: the range
  // runs past the end of its bank/region). Never throws. The overflow store
  // is not memory anyone may name: its addresses are rejected
  // (kDmaDecodeError), so no move result, RX buffer or rendezvous window can
  // land on payloads queued there.
  // `hint`: see HostHint (host addresses only; may be null).
  // A current hint answers inline.
  uint32_t resolve(uint64_t addr, bool host, uint64_t bytes, std::byte*& out,
                   HostHint* hint = nullptr) const noexcept {
    if (hinted(addr, host, bytes, hint)) {
      out = reinterpret_cast<std::byte*>(addr);
      return 0;
    }
    return resolve_searched(addr, host, bytes, out, hint);
  }
  // Read-only access for move operands: as resolve(), and also the overflow
  // store, where the firmware reads unexpected eager payloads from.
  uint32_t resolve_source(uint64_t addr, bool host, uint64_t bytes, const std::byte*& out,
                          HostHint* hint = nullptr) const noexcept {
    if (hinted(addr, host, bytes, hint)) {
      out = reinterpret_cast<const std::byte*>(addr);
      return 0;
    }
    return resolve_source_searched(addr, host, bytes, out, hint);
  }

  Bank& overflow() { return *overflow_; }
  unsigned banks() const { return static_cast<unsigned>(banks_.size()); }

 private:
  struct HostRegion {
    size_t bytes;
    bool owned;  // allocated by us (free it) or mapped user memory
  };
  uint32_t resolve_device(uint64_t addr, uint64_t bytes, std::byte*& out, bool overflow_store) const noexcept;
  uint32_t resolve_host(uint64_t addr, uint64_t bytes, std::byte*& out, HostHint* hint = nullptr) const noexcept;
  bool hinted(uint64_t addr, bool host, uint64_t bytes, const HostHint* hint) const noexcept {
    // The generation is read before the hint is trusted: a region removed
    // after this read was mapped when the caller asked.
    return host && hint != nullptr && hint->covers(addr, bytes, host_generation_.load(std::memory_order_acquire));
  }
  // resolve() / resolve_source() without a current hint: the search.
  uint32_t resolve_searched(uint64_t addr, bool host, uint64_t bytes, std::byte*& out, HostHint* hint) const noexcept;
  uint32_t resolve_source_searched(uint64_t addr, bool host, uint64_t bytes, const std::byte*& out,
                                   HostHint* hint) const noexcept;
  std::byte* checked(uint64_t address, size_t bytes, const char* what) const;

  std::vector<std::unique_ptr<Bank>> banks_;
  std::unique_ptr<Bank> overflow_;
  // Host memory the CCLO may touch. Regions may overlap (a user maps the same
  // memory twice), hence multimap + the largest size to bound the search.
  mutable std::shared_mutex host_mutex_;
  std::multimap<uintptr_t, HostRegion> host_;
  size_t host_max_bytes_ = 0;
  // Bumped (under host_mutex_) whenever a host region goes away: what a
  // HostHint remembers from before may no longer be mapped. Adding regions
  // leaves remembered ones valid.
  std::atomic<uint64_t> host_generation_{1};
};

}  // namespace accl::emu
