// SPDX-License-Identifier: Apache-2.0
#include "exchange_allocator.hpp"

#include <algorithm>
#include <iterator>

namespace accl::detail {
namespace {
uint32_t whole_words(uint32_t bytes) { return (bytes + 3u) & ~3u; }
}  // namespace

void ExchangeAllocator::reset(uint32_t begin, uint32_t end) {
  free_.clear();
  if (end > begin) free_[begin] = end - begin;
}

std::optional<uint32_t> ExchangeAllocator::allocate(uint32_t bytes) {
  const uint32_t need = whole_words(bytes);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    const uint32_t offset = it->first;
    const uint32_t rest = it->second - need;
    free_.erase(it);
    if (rest > 0) free_[offset + need] = rest;
    return offset;
  }
  return std::nullopt;
}

void ExchangeAllocator::release(uint32_t offset, uint32_t bytes) {
  uint32_t size = whole_words(bytes);
  if (size == 0) return;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {  // merge with the block after
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {  // merge into the block before
      prev->second += size;
      return;
    }
  }
  free_[offset] = size;
}

uint32_t ExchangeAllocator::bytes_free() const {
  uint32_t total = 0;
  for (const auto& [offset, size] : free_) total += size;
  return total;
}

uint32_t ExchangeAllocator::largest_free_block() const {
  uint32_t largest = 0;
  for (const auto& [offset, size] : free_) largest = std::max(largest, size);
  return largest;
}

}  // namespace accl::detail
