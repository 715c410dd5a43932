// SPDX-License-Identifier: Apache-2.0
//
// Addresses and register values in the hw backend's messages, as hex.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace accl::hw {

inline std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace accl::hw
