// SPDX-License-Identifier: Apache-2.0
//
// The connection handshake: the first bytes a connecting transport sends
// (its identity and job credential) and the answer it gets. Host byte order
// (all ranks of a job share one architecture, like WireHeader).
#pragma once

#include "job_secret.hpp"
#include "transport.hpp"

#include <cstdint>
#include <cstring>

namespace accl::emu::transport_detail {

inline constexpr uint32_t kHelloMagic = 0x4C434341;  // "ACCL"
inline constexpr uint16_t kHelloVersion = 1;
enum HelloKind : uint8_t { kHelloTcp = 1, kHelloUdp = 2, kHelloShm = 3 };
enum HelloStatus : uint32_t { kHelloAccepted = 0, kHelloBadSecret = 1, kHelloMalformed = 2, kHelloRefused = 3 };

struct HelloIdentity {
  uint32_t magic = kHelloMagic;
  uint16_t version = kHelloVersion;
  uint8_t kind = 0;
  uint8_t reserved0 = 0;
  uint32_t listen_ip = 0;     // the sender's identity (identity_address): what the receiver reports as `from`
  uint16_t listen_port = 0;
  uint16_t reserved1 = 0;
  uint8_t credential[32] = {};
};
static_assert(sizeof(HelloIdentity) == 48);

struct HelloReply {
  uint32_t magic = kHelloMagic;
  uint32_t status = kHelloAccepted;
};

inline HelloIdentity make_identity(HelloKind kind, const NetAddress& listen, const Credential& credential) {
  HelloIdentity id;
  id.kind = kind;
  id.listen_ip = listen.ip;
  id.listen_port = listen.port;
  std::memcpy(id.credential, credential.data(), credential.size());
  return id;
}

// kHelloAccepted or why `id` is refused. `expected` is our own credential;
// `check_secret` false (our secret is empty) accepts any credential.
inline HelloStatus check_identity(const HelloIdentity& id, HelloKind kind, const Credential& expected,
                                  bool check_secret) {
  if (id.magic != kHelloMagic || id.version != kHelloVersion || id.kind != kind) return kHelloMalformed;
  // The identity is what the peer is delivered as (see identity_address):
  // a wildcard or port 0 names nobody.
  if (id.listen_ip == 0 || id.listen_port == 0) return kHelloMalformed;
  if (check_secret && !constant_time_equal(id.credential, expected.data(), expected.size())) return kHelloBadSecret;
  return kHelloAccepted;
}

inline const char* describe(HelloStatus s) {
  switch (s) {
    case kHelloAccepted: return "accepted";
    case kHelloBadSecret: return "wrong job secret";
    case kHelloMalformed: return "malformed handshake";
    case kHelloRefused: return "refused";
  }
  return "?";
}

}  // namespace accl::emu::transport_detail
