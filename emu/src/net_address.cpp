// SPDX-License-Identifier: Apache-2.0
#include "net_address.hpp"

#include <arpa/inet.h>

#include <stdexcept>

namespace accl::emu {

uint32_t parse_ipv4(const std::string& text) {
  in_addr a{};
  if (inet_pton(AF_INET, text.c_str(), &a) != 1)
    throw std::invalid_argument("emulated CCLO: '" + text + "' is not an IPv4 address (use a dotted quad such as 127.0.0.1)");
  return ntohl(a.s_addr);
}

std::string ipv4_to_string(uint32_t ip) {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 0xFF) + "." + std::to_string((ip >> 8) & 0xFF) +
         "." + std::to_string(ip & 0xFF);
}

std::string to_string(const NetAddress& a) { return ipv4_to_string(a.ip) + ":" + std::to_string(a.port); }

}  // namespace accl::emu
