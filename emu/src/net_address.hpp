// SPDX-License-Identifier: Apache-2.0
//
// Helpers for NetAddress (declared in transport.hpp): parsing and printing
// IPv4 addresses in the host byte order the communicator records use.
#pragma once

#include "transport.hpp"

#include <cstdint>
#include <string>

namespace accl::emu {

// "10.10.10.1" -> 0x0A0A0A01; throws std::invalid_argument for anything else.
uint32_t parse_ipv4(const std::string& text);
std::string ipv4_to_string(uint32_t ip);

// Key for hash maps: ip in the high bits, port in the low 16.
inline uint64_t address_key(const NetAddress& a) { return (uint64_t{a.ip} << 16) | a.port; }

}  // namespace accl::emu
