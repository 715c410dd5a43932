// SPDX-License-Identifier: Apache-2.0
//
// NetAddress <-> sockaddr_in, and which address names this host: the
// identity a transport is known by in handshakes and records.
#pragma once

#include "net_address.hpp"
#include "socket_io.hpp"
#include "transport.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace accl::emu::transport_detail {

inline std::string format_address(const NetAddress& a) {
  return std::to_string((a.ip >> 24) & 0xFF) + "." + std::to_string((a.ip >> 16) & 0xFF) + "." +
         std::to_string((a.ip >> 8) & 0xFF) + "." + std::to_string(a.ip & 0xFF) + ":" + std::to_string(a.port);
}

inline sockaddr_in to_sockaddr(const NetAddress& a) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(a.ip);
  sa.sin_port = htons(a.port);
  return sa;
}

inline NetAddress from_sockaddr(const sockaddr_in& sa) {
  return NetAddress{ntohl(sa.sin_addr.s_addr), ntohs(sa.sin_port)};
}

// The port the kernel actually bound `fd` to (port 0 = "pick one").
inline NetAddress bound_address(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) throw_errno("getsockname");
  return from_sockaddr(sa);
}

// True if `ip` belongs to this host (loopback or one of its interfaces):
// only then can a peer have a shared-memory endpoint here.
inline bool is_local_ipv4(uint32_t ip) {
  if ((ip >> 24) == 127) return true;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* it = list; it != nullptr && !found; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    found = ntohl(reinterpret_cast<const sockaddr_in*>(it->ifa_addr)->sin_addr.s_addr) == ip;
  }
  ::freeifaddrs(list);
  return found;
}

// The address a CCLO bound to `bound` is known by: its identity in
// communicator records and in every handshake (HelloIdentity), the address
// peers dial and the `from` its messages are delivered with. A wildcard bind
// (0.0.0.0: listen on every interface) names no host, so the identity is
// this host's first non-loopback IPv4 address that is up (127.0.0.1 if there
// is none). Receivers take a peer's identity from its handshake, never from
// the source address its packets come from: that differs with the route
// (a connection to 127.0.0.1 comes from 127.0.0.1, not from the address in
// the records), and rendezvous windows, link failures and cached links are
// all keyed by the identity.
inline NetAddress identity_address(const NetAddress& bound) {
  if (bound.ip != 0) return bound;
  NetAddress identity{0x7F000001u, bound.port};
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return identity;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if ((it->ifa_flags & IFF_UP) == 0 || (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(it->ifa_addr)->sin_addr.s_addr);
    if (ip == 0 || (ip >> 24) == 127) continue;
    identity.ip = ip;
    break;
  }
  ::freeifaddrs(list);
  return identity;
}

}  // namespace accl::emu::transport_detail
