// SPDX-License-Identifier: Apache-2.0
//
// The data plane as the CCLO control program sees it. In hardware these are
// the DMA mover, arithmetic/compression lanes, (de)packetizers and RX buffer
// engines; in this project the emulator (emu/) implements them.
//
// Freestanding: no heap, no exceptions, no standard library. Everything the
// firmware needs from the outside world goes through this interface.
#pragma once

#include <accl/abi.hpp>
#include <stdint.h>

namespace accl::fw {

// One call popped from the call controller: the 15 ABI words plus the
// controller's id used to report completion.
struct Call {
  uint32_t words[abi::kCallWords];
  uint64_t id;
};

enum class OperandKind : uint8_t {
  none = 0,
  memory = 1,  // device or host memory (see `host`)
  stream = 2,  // user-kernel stream (op0: pull from kernel; res: push to kernel)
  network = 3, // res only: send as one message to a peer
};

struct Operand {
  OperandKind kind = OperandKind::none;
  bool host = false;        // address is host memory (host flag)
  bool compressed = false;  // data in this operand is in the compressed type
  uint64_t addr = 0;
};

// One data-plane instruction: res = op0 [func op1], converting between the
// uncompressed and compressed types of the arithmetic configuration as the
// `compressed` flags say. Without op1, op0 is moved (and maybe
// (de)compressed) to res. `count` is in elements.
//
// When res.kind == network the result becomes the payload of one message to
// rank `dst_rank` of the communicator at exchange-memory offset `comm`; the
// firmware prepares the complete header (header.count must equal the payload
// bytes). When res.kind == stream the result goes to the kernel stream with
// id `stream_id`.
struct Move {
  uint32_t count = 0;
  uint32_t arcfg = 0;       // exchange-memory offset of the arith config
  uint32_t func = 0;        // ReduceFunction index into arith_tdest (with op1)
  Operand op0, op1, res;
  uint32_t comm = 0;        // network: communicator record offset
  uint32_t dst_rank = 0;    // network: destination rank in that communicator
  uint32_t stream_id = 0;   // stream result: kernel stream id (TDEST)
  abi::WireHeader header{}; // network: header to send
  // Network results only. Non-zero: other moves with the same key send the
  // very same payload bytes (one buffer to several peers in one round of a
  // collective; the source does not change in between). The data plane may
  // then produce the payload once and let every receiver read that copy.
  // Zero: no such promise.
  uint64_t shared_payload = 0;
  // Network results only: the deadline of the call the move belongs to, on
  // the data plane's clock (now_ns()); 0 = none. A send may wait for room
  // until then: the call's own timeout, not only the data plane's I/O one.
  uint64_t deadline_ns = 0;
};

// What arrived from the network, in arrival order per link.
enum class ArrivalKind : uint8_t {
  message = 0,       // eager segment or rendezvous request/address (see header.msg_type)
  rendezvous_done = 1, // the payload of rendezvous transfer header.rid was written into our window
  link_error = 2,    // the link to (peer_ip, peer_port) failed; status says how
};

struct Arrival {
  ArrivalKind kind = ArrivalKind::message;
  abi::WireHeader header{};
  uint32_t status = 0;        // error bits detected by the data plane
  // Eager payload location (header.count bytes), in an RX buffer or in the
  // data plane's overflow store.
  uint64_t payload_addr = 0;
  bool payload_host = false;
  uint32_t rx_index = 0xFFFFFFFFu;  // RX buffer index, or 0xFFFFFFFF
  uint64_t token = 0;               // pass back to release_payload()
  // The link the arrival came over.
  uint32_t peer_ip = 0;
  uint32_t peer_port = 0;
};

// A rendezvous window: peer (peer_ip, peer_port) may write `bytes` bytes at
// (addr, host) with a kMsgRendezvousData message carrying `rid` and `ctx`.
//
// Reduce on landing (`reduce`): the window's memory receives
// operand[i] func payload[i] instead of the payload itself, element by
// element, with the function `func` of the arithmetic configuration at
// `arcfg`. The data plane then reads each incoming byte once, as the hardware
// reduce unit does on the stream from the depacketizer, where a landing
// followed by a local reduce move would read the result twice. Only for
// payload, operand and result in the uncompressed type when the arithmetic
// needs no conversion for it; the operand must not overlap the window.
struct Window {
  uint32_t peer_ip = 0;
  uint32_t peer_port = 0;
  uint32_t ctx = 0;
  uint32_t rid = 0;
  uint64_t addr = 0;
  bool host = false;
  uint64_t bytes = 0;
  bool compressed = false;  // incoming payload is fp16 and must land as fp16
  bool reduce = false;
  bool operand_host = false;
  uint32_t arcfg = 0;
  uint32_t func = 0;
  uint64_t operand_addr = 0;  // `bytes` bytes, in the same element type
};

// The arrivals pop_arrival_for() may take for a call waiting on rank `src`
// (or any rank: abi::kRankAny) of the communicator with context id
// `context_id`: its messages (header ctx >> 1, point-to-point and collective
// alike: they share the sequence numbers) and every link error.
inline bool arrival_is_for(const Arrival& a, uint32_t context_id, uint32_t src) {
  if (a.kind == ArrivalKind::link_error) return true;
  return (a.header.ctx >> 1) == context_id && (src == abi::kRankAny || a.header.src == src);
}

enum LogLevel : int { kLogError = 0, kLogWarn = 1, kLogInfo = 2, kLogDebug = 3, kLogTrace = 4 };

class DataPlane {
 public:
  // --- exchange memory (byte offsets) ---
  virtual uint32_t xmem_read(uint32_t offset) = 0;
  virtual void xmem_write(uint32_t offset, uint32_t value) = 0;

  // --- call controller ---
  // Next call whose dependencies are satisfied; false when none is waiting.
  virtual bool pop_call(Call& out) = 0;
  // Reports completion of call `id` with RETCODE `retcode` and the elapsed
  // time; the controller also mirrors them into RETCODE / PERFCNT.
  virtual void finish_call(uint64_t id, uint32_t retcode, uint64_t duration_ns) = 0;

  // --- data movement ---
  // Executes one move to completion (for network results: until the
  // transport accepted the message). Returns error bits, 0 on success.
  virtual uint32_t move(const Move& m) = 0;

  // --- network receive side ---
  virtual bool pop_arrival(Arrival& out) = 0;
  // The oldest queued arrival for which arrival_is_for(a, context_id, src)
  // holds, taken out of the queue past older ones that do not: the firmware
  // asks for it when its arrival table is full and a call waits for that
  // peer, so messages that wait for later calls never hide the one a call
  // needs now. Per (context id, source) the order stays the arrival order,
  // which is the order the sequence numbers are checked in.
  virtual bool pop_arrival_for(uint32_t context_id, uint32_t src, Arrival& out) = 0;
  // Frees the RX buffer / overflow storage of an eager arrival.
  virtual void release_payload(const Arrival& a) = 0;
  // Allows a peer to write into our memory for one rendezvous transfer.
  // Returns error bits (e.g. kInvalidArgument for a bad address).
  virtual uint32_t open_window(const Window& w) = 0;
  virtual void close_window(const Window& w) = 0;

  // --- datapath control ---
  // Soft reset: drop queued arrivals and windows, empty kernel streams,
  // forget links. Called by the firmware on HOUSEKEEP reset.
  virtual void reset_datapath() = 0;
  // Fills HWID and the capability word (values are datapath properties).
  virtual uint32_t hw_id() = 0;
  virtual uint32_t capabilities() = 0;

  // --- time and scheduling ---
  virtual uint64_t now_ns() = 0;
  // Blocks until a call or an arrival may be available, or until
  // `deadline_ns` (absolute, now_ns() clock) passes. Spurious returns are fine.
  virtual void idle(uint64_t deadline_ns) = 0;
  // True once the emulator shuts this CCLO down; the firmware loop returns.
  virtual bool stop_requested() = 0;

  // --- diagnostics (the message is a NUL-terminated string) ---
  virtual bool log_enabled(int level) = 0;
  virtual void log(int level, const char* message) = 0;

 protected:
  ~DataPlane() = default;
};

}  // namespace accl::fw
