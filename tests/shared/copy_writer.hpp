// SPDX-License-Identifier: Apache-2.0
//
// A PayloadWriter (emu/src/transport.hpp) that copies a message's payload
// from a prepared buffer: for tests that need exact bytes and for benchmarks
// (no pattern generation cost). Needs emu/src on the include path.
#pragma once

#include "transport.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace accl::emu {

class CopyWriter final : public PayloadWriter {
 public:
  explicit CopyWriter(const std::byte* src) : src_(src) {}
  uint32_t write(std::byte* dst, size_t offset, size_t bytes) override {
    std::memcpy(dst, src_ + offset, bytes);
    return 0;
  }

 private:
  const std::byte* src_;
};

}  // namespace accl::emu
