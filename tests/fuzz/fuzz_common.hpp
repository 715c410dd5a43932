// SPDX-License-Identifier: Apache-2.0
//
// Shared pieces of the libFuzzer harnesses: a reader that turns the fuzzer's
// bytes into a program (running out of bytes yields zeros, so every input is
// a valid program), and FUZZ_CHECK, which turns a violated invariant into a
// crash libFuzzer records (abort), with a message saying which invariant.
#pragma once

#include <accl/abi.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace accl::fuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool empty() const { return p_ >= end_; }
  size_t left() const { return empty() ? 0 : static_cast<size_t>(end_ - p_); }
  uint8_t u8() { return empty() ? 0 : *p_++; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() { return u16() | (uint32_t{u16()} << 16); }
  uint64_t u64() { return u32() | (uint64_t{u32()} << 32); }
  // Copies up to n bytes; the rest of dst is zero-filled.
  void bytes(void* dst, size_t n) {
    const size_t take = n < left() ? n : left();
    if (take) std::memcpy(dst, p_, take);
    if (take < n) std::memset(static_cast<char*>(dst) + take, 0, n - take);
    p_ += take;
  }
  // Up to n raw bytes at the current position (for streaming them out).
  const uint8_t* take(size_t n, size_t& got) {
    got = n < left() ? n : left();
    const uint8_t* at = p_;
    p_ += got;
    return at;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

[[noreturn]] inline void violated(const char* file, int line, const char* what, const char* detail) {
  std::fprintf(stderr, "\n==FUZZ INVARIANT VIOLATED== %s:%d: %s\n  %s\n", file, line, what, detail);
  std::fflush(stderr);
  std::abort();
}

// Byte i of the payload of message `serial`: what the harness writes as the
// "transport" and expects back in the arrival.
inline std::byte pattern_byte(uint32_t serial, uint64_t i) {
  return static_cast<std::byte>((serial * 131u + static_cast<uint32_t>(i) * 7u + static_cast<uint32_t>(i >> 8)) & 0xFF);
}

}  // namespace accl::fuzz

#define FUZZ_CHECK(cond, detail_fmt, ...)                                                        \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      char fuzz_detail_[512];                                                                    \
      std::snprintf(fuzz_detail_, sizeof fuzz_detail_, detail_fmt __VA_OPT__(, ) __VA_ARGS__);   \
      ::accl::fuzz::violated(__FILE__, __LINE__, #cond, fuzz_detail_);                           \
    }                                                                                            \
  } while (0)
