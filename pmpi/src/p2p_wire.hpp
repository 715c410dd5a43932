// SPDX-License-Identifier: Apache-2.0
//
// What crosses the device for one offloaded point-to-point message: the
// envelope (a 32-byte header plus the message itself when it is small) on
// device tag kEnvTag, a payload of int32 words on device tag = sequence
// number, and replies (an envelope back). The protocol is described in
// p2p_proto.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace accl::pmpi {

// The receiver pulls envelopes with receives of the largest size; a shorter
// message is fine.
struct Envelope {
  uint32_t magic;
  uint32_t flags;
  int32_t src;
  int32_t tag;
  uint32_t seq;           // device tag of the payload (and of the reply)
  uint32_t inline_bytes;  // bytes carried in data[]
  uint64_t bytes;         // whole message size in bytes
  // Only the header and inline_bytes of data travel (one device message);
  // receives take up to the whole struct.
  unsigned char data[4064];
};
static_assert(sizeof(Envelope) == 4096, "envelope receives are 1024 device words");

constexpr uint32_t kMagic = 0x41504531u;  // "APE1"
constexpr uint32_t kFlagSync = 1;
constexpr uint32_t kFlagRndv = 2;   // payload waits for the receiver's reply
constexpr uint32_t kFlagReply = 4;  // receiver -> sender: matched (seq = the message's)
constexpr uint32_t kEnvTag = 0x7FFFFFF0u;
constexpr uint32_t kSeqLimit = 0x7FFFFFF0u;  // sequence numbers stay below kEnvTag
constexpr size_t kHeaderBytes = offsetof(Envelope, data);
constexpr unsigned kEnvWords = sizeof(Envelope) / 4;  // receive size of envelope pulls
static_assert(kHeaderBytes % 4 == 0, "the envelope header is whole device words");

// Copies what an envelope carries: its header and inline bytes. The rest of
// the 4 KiB struct holds nothing, and copying it whole (twice per receive)
// cost more than the rest of matching a small message.
inline void copy_envelope(Envelope& to, const Envelope& from) {
  std::memmove(&to, &from, kHeaderBytes + std::min<size_t>(from.inline_bytes, sizeof from.data));
}

inline unsigned envelope_words(const Envelope& e) {
  return static_cast<unsigned>((kHeaderBytes + e.inline_bytes + 3) / 4);
}

inline uint32_t next_seq(uint32_t s) { return s + 1 == kSeqLimit ? 0 : s + 1; }

}  // namespace accl::pmpi
