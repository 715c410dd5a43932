// SPDX-License-Identifier: Apache-2.0
//
// 64-byte alignment: heap buffers and the padding of ring and stream slots.
#pragma once

#include <cstddef>
#include <memory>
#include <new>

namespace accl::emu::transport_detail {

inline constexpr size_t round_up64(size_t n) { return (n + 63) & ~size_t{63}; }

// 64-byte aligned heap buffer (staging chunks, ring-size scratch).
struct AlignedBuffer {
  struct Free {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<std::byte[], Free> data;
  size_t size = 0;

  void ensure(size_t bytes) {
    if (bytes <= size) return;
    data.reset(new (std::align_val_t(64)) std::byte[bytes]);
    size = bytes;
  }
  std::byte* get() const { return data.get(); }
};

}  // namespace accl::emu::transport_detail
