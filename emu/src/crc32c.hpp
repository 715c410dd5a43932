// SPDX-License-Identifier: Apache-2.0
//
// CRC32C (Castagnoli), the checksum of the UDP framing.
//
// Ours rather than a library's: Debian 12 ships no library of CRC32C alone.
// The candidates are ISA-L (libisal2, 361 KB: a storage-acceleration library
// of erasure codes and compression, whose crc32_iscsi takes an int length)
// and crcutil (libcrcutil0 1.0: a generic CRC generator whose C++ interface
// is a template over the polynomial). Either would be one more run-time
// dependency of every rank for the few lines below, which use the CPU's
// CRC32 instruction as those libraries do.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace accl::emu::transport_detail {

// SSE4.2 instruction when the CPU has it, a table otherwise.
// crc32c(data) = crc32c_update(~0u, ...) ^ ~0u.
inline uint32_t crc32c_update_table(uint32_t crc, const void* data, size_t bytes) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) inline uint32_t crc32c_update_sse42(uint32_t crc, const void* data,
                                                                       size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = crc;
  for (; bytes >= 8; bytes -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; bytes > 0; --bytes, ++p) c32 = __builtin_ia32_crc32qi(c32, *p);
  return c32;
}
#endif

inline uint32_t crc32c_update(uint32_t crc, const void* data, size_t bytes) {
#if defined(__x86_64__)
  static const bool has_sse42 = __builtin_cpu_supports("sse4.2");
  if (has_sse42) return crc32c_update_sse42(crc, data, bytes);
#endif
  return crc32c_update_table(crc, data, bytes);
}

}  // namespace accl::emu::transport_detail
