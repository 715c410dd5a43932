// SPDX-License-Identifier: Apache-2.0
//
// Freestanding helpers for the control program: no standard library is
// available (see firmware/meson.build), so the few utilities we need live here.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace accl::fw::impl {

template <typename T>
constexpr T min_of(T a, T b) {
  return a < b ? a : b;
}
template <typename T>
constexpr T max_of(T a, T b) {
  return a > b ? a : b;
}
constexpr uint64_t ceil_div(uint64_t a, uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

inline void zero_bytes(void* p, size_t n) { __builtin_memset(p, 0, n); }
inline void copy_bytes(void* dst, const void* src, size_t n) { __builtin_memcpy(dst, src, n); }

// Small fixed-size text builder for log lines (no printf in freestanding code).
class LogLine {
 public:
  LogLine& str(const char* s) {
    while (s != nullptr && *s != '\0' && len_ + 1 < sizeof(buf_)) buf_[len_++] = *s++;
    buf_[len_] = '\0';
    return *this;
  }
  LogLine& dec(uint64_t v) {
    char tmp[24];
    int n = 0;
    do {
      tmp[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0 && len_ + 1 < sizeof(buf_)) buf_[len_++] = tmp[--n];
    buf_[len_] = '\0';
    return *this;
  }
  LogLine& hex(uint64_t v) {
    static constexpr char kDigits[] = "0123456789abcdef";
    str("0x");
    char tmp[16];
    int n = 0;
    do {
      tmp[n++] = kDigits[v & 0xF];
      v >>= 4;
    } while (v != 0);
    while (n > 0 && len_ + 1 < sizeof(buf_)) buf_[len_++] = tmp[--n];
    buf_[len_] = '\0';
    return *this;
  }
  const char* c_str() const { return buf_; }

 private:
  char buf_[160] = {};
  size_t len_ = 0;
};

}  // namespace accl::fw::impl
