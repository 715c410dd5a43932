// SPDX-License-Identifier: Apache-2.0
#include "exchange_memory.hpp"

#include <cstdio>
#include <stdexcept>
#include <string>

namespace accl::emu {
namespace {
[[noreturn]] void throw_bad_offset(const char* what, uint32_t offset) {
  char text[160];
  std::snprintf(text, sizeof(text), "emulated CCLO: exchange memory %s at 0x%X: %s (valid: 4-byte aligned, below 0x%X)",
                what, offset, offset % 4 != 0 ? "misaligned" : "out of range", ExchangeMemory::kBytes);
  throw std::out_of_range(text);
}
}  // namespace

uint32_t ExchangeMemory::read(uint32_t offset) const {
  if (!valid(offset)) throw_bad_offset("read", offset);
  return load(offset);
}

void ExchangeMemory::write(uint32_t offset, uint32_t value) {
  if (!valid(offset)) throw_bad_offset("write", offset);
  store(offset, value);
}

void ExchangeMemory::clear() noexcept {
  for (auto& w : words_) w.store(0, std::memory_order_relaxed);
}

}  // namespace accl::emu
