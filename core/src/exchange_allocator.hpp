// SPDX-License-Identifier: Apache-2.0
//
// Allocator for the driver-managed part of exchange memory (communicator and
// arithmetic-configuration records). First fit from the lowest address, so a
// fresh configuration is laid out exactly like public ACCL's bump allocator,
// and freed records are reused by later ones.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace accl::detail {

class ExchangeAllocator {
 public:
  // Manages [begin, end); everything previously allocated is forgotten.
  void reset(uint32_t begin, uint32_t end);
  // Byte offset of `bytes` (rounded up to whole words), or nullopt when no
  // free block is large enough.
  std::optional<uint32_t> allocate(uint32_t bytes);
  // Returns a block from allocate(); neighbouring free blocks merge.
  void release(uint32_t offset, uint32_t bytes);
  uint32_t bytes_free() const;
  uint32_t largest_free_block() const;

 private:
  std::map<uint32_t, uint32_t> free_;  // offset -> bytes, non-adjacent
};

}  // namespace accl::detail
