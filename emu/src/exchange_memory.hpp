// SPDX-License-Identifier: Apache-2.0
//
// The 8 KiB exchange (configuration) memory of one emulated CCLO. The driver
// (MMIO), the firmware thread and transport threads (RX buffer records) all
// touch it concurrently, so every word is an atomic.
#pragma once

#include <accl/abi.hpp>

#include <array>
#include <atomic>
#include <cstdint>

namespace accl::emu {

class ExchangeMemory {
 public:
  static constexpr uint32_t kBytes = abi::kExchangeMemorySize;
  static constexpr uint32_t kWords = kBytes / 4;

  static constexpr bool valid(uint32_t offset) { return offset % 4 == 0 && offset < kBytes; }
  // True when the `words` words starting at `offset` are all inside.
  static constexpr bool valid_range(uint32_t offset, uint32_t words) {
    return offset % 4 == 0 && offset < kBytes && words <= (kBytes - offset) / 4;
  }

  // MMIO access from the host: throws std::out_of_range (with the offset in
  // the message) for misaligned or out-of-range offsets.
  uint32_t read(uint32_t offset) const;
  void write(uint32_t offset, uint32_t value);

  // Unchecked access for callers that validated the offset. Acquire/release
  // so a record written field by field and then published through its status
  // word (RX buffers) is seen whole.
  uint32_t load(uint32_t offset) const noexcept {
    return words_[offset / 4].load(std::memory_order_acquire);
  }
  void store(uint32_t offset, uint32_t value) noexcept {
    words_[offset / 4].store(value, std::memory_order_release);
  }
  bool compare_exchange(uint32_t offset, uint32_t expected, uint32_t desired) noexcept {
    return words_[offset / 4].compare_exchange_strong(expected, desired, std::memory_order_acq_rel);
  }

  void clear() noexcept;

 private:
  std::array<std::atomic<uint32_t>, kWords> words_{};
};

}  // namespace accl::emu
