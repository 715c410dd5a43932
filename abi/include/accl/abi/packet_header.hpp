// SPDX-License-Identifier: Apache-2.0
//
// Device ABI, wire: the 64-byte header that opens every message between
// CCLOs. Part of <accl/abi.hpp>.
#pragma once

#include <stdint.h>

namespace accl::abi {

// ---------------------------------------------------------------------------
// 64-byte message header (first datapath word of every message)
// ---------------------------------------------------------------------------
enum MessageType : uint8_t {
  kMsgEager = 0,             // payload for RX buffers
  kMsgRendezvousData = 1,    // payload written at vaddr of a window opened by a CTS
  kMsgRendezvousAddr = 2,    // "clear to send": receiver publishes vaddr (public RNDZVS_INIT)
  kMsgRendezvousDone = 3,    // public RNDZVS_WR_DONE; we signal completion locally instead
  kMsgRendezvousRequest = 4, // extension: "request to send", matched like an eager message
};

// Header flags (extension word).
enum HeaderFlags : uint32_t {
  kHdrCompressed = 1u << 0,    // payload is fp16-compressed float32
  kHdrContinuation = 1u << 1,  // not the first segment of an eager message
  // Never set by the firmware: a transport may mark frames of its own with it
  // (the emulator's shared-memory rings: payload in the sender's outbox) and
  // clears it before the header reaches the receiving data plane.
  kHdrTransportFrame = 1u << 31,
};

struct WireHeader {
  uint32_t count;      // payload bytes following this header
  uint32_t tag;
  uint32_t src;        // sender's rank in the communicator
  uint32_t seqn;       // per (communicator, peer) sequence number
  uint32_t strm;       // 0 = memory; otherwise kernel stream id + 9
  uint16_t dst;        // destination session
  uint8_t msg_type;    // MessageType
  uint8_t host;        // rendezvous target in host memory
  uint64_t vaddr;      // rendezvous target address
  // extension words (zero on public hardware)
  uint32_t ctx;        // (communicator context id << 1) | 1 for collective traffic
  uint32_t msg_bytes;  // total payload bytes of the whole message
  uint32_t rid;        // rendezvous transfer id chosen by the sender
  uint32_t flags;      // HeaderFlags
  uint32_t reserved[4];
};
static_assert(sizeof(WireHeader) == 64, "the message header is one 64-byte datapath word");

}  // namespace accl::abi
