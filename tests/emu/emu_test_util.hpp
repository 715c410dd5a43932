// SPDX-License-Identifier: Apache-2.0
//
// Helpers for the emulator tests: devices without a firmware thread (the test
// plays the firmware through the DataPlane), and writers for the exchange
// memory records the driver would normally write.
#pragma once

#include "emu_device.hpp"
#include "net_address.hpp"

#include <accl/abi.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

namespace accl::emu::test {

using namespace std::chrono_literals;

// Counts the heap allocations of the constructing thread during its lifetime
// (test_emu replaces the global operator new, alloc_counter.cpp).
class AllocationCounter {
 public:
  AllocationCounter();
  ~AllocationCounter();
  AllocationCounter(const AllocationCounter&) = delete;
  AllocationCounter& operator=(const AllocationCounter&) = delete;
  uint64_t count() const;
};

inline DeviceSettings settings(bool firmware = false) {
  DeviceSettings s;
  s.start_firmware = firmware;
  s.spin = 20us;
  s.io_timeout = 2s;
  s.overflow_bytes = size_t{1} << 20;
  return s;
}

inline EmuOptions options(TransportKind kind = TransportKind::inproc) {
  EmuOptions o;
  o.transport = kind;
  o.bank_bytes = size_t{1} << 30;
  o.banks = 2;
  return o;
}

inline std::unique_ptr<EmuDevice> make_device(TransportKind kind = TransportKind::inproc,
                                              const DeviceSettings& s = settings()) {
  return std::make_unique<EmuDevice>(options(kind), s);
}

// Arithmetic configuration record (public layout) at `offset`.
inline void write_arith(ExchangeMemory& x, uint32_t offset, uint32_t unc, uint32_t comp, uint32_t compressor,
                        uint32_t decompressor, bool arith_compressed, const std::vector<uint32_t>& functions) {
  x.write(offset + 4 * abi::kArithUncompressedBytes, unc);
  x.write(offset + 4 * abi::kArithCompressedBytes, comp);
  x.write(offset + 4 * abi::kArithRatioLog, 0);
  x.write(offset + 4 * abi::kArithCompressorId, compressor);
  x.write(offset + 4 * abi::kArithDecompressorId, decompressor);
  x.write(offset + 4 * abi::kArithNumFunctions, static_cast<uint32_t>(functions.size()));
  x.write(offset + 4 * abi::kArithIsCompressed, arith_compressed ? 1 : 0);
  for (size_t i = 0; i < functions.size(); ++i)
    x.write(offset + 4 * (abi::kArithFunctionIds + static_cast<uint32_t>(i)), functions[i]);
}

// Standard records used by the tests (offsets well inside the config area).
inline constexpr uint32_t kArithF32 = 0x1000;      // (f32, f32): SUM MAX MIN PROD
inline constexpr uint32_t kArithF32F16 = 0x1040;   // (f32, f16), arithmetic on fp16
inline constexpr uint32_t kArithF32F16u = 0x1080;  // (f32, f16), arithmetic on fp32
inline constexpr uint32_t kArithI32 = 0x10C0;
inline constexpr uint32_t kComm = 0x1400;

inline void write_standard_arith(ExchangeMemory& x) {
  write_arith(x, kArithF32, 4, 4, 0, 0, false, {abi::kFnSumF32, abi::kFnMaxF32, abi::kFnMinF32, abi::kFnProdF32});
  write_arith(x, kArithF32F16, 4, 2, abi::kLaneF32ToF16, abi::kLaneF16ToF32, true,
              {abi::kFnSumF16, abi::kFnMaxF16, abi::kFnMinF16, abi::kFnProdF16});
  write_arith(x, kArithF32F16u, 4, 2, abi::kLaneF32ToF16, abi::kLaneF16ToF32, false,
              {abi::kFnSumF32, abi::kFnMaxF32, abi::kFnMinF32, abi::kFnProdF32});
  write_arith(x, kArithI32, 4, 4, 0, 0, false, {abi::kFnSumI32, abi::kFnMaxI32, abi::kFnMinI32, abi::kFnProdI32});
}

// Communicator record at `offset`: rank i reachable at addresses[i].
inline void write_comm(ExchangeMemory& x, uint32_t offset, const std::vector<NetAddress>& addresses, uint32_t local) {
  x.write(offset + 4 * abi::kCommSizeWord, static_cast<uint32_t>(addresses.size()));
  x.write(offset + 4 * abi::kCommLocalRankWord, local);
  for (uint32_t r = 0; r < addresses.size(); ++r) {
    uint32_t rec = offset + 4 * (abi::kCommRanksWord + abi::kCommRankRecordWords * r);
    x.write(rec + 4 * abi::kRankIp, addresses[r].ip);
    x.write(rec + 4 * abi::kRankPort, addresses[r].port);
    x.write(rec + 4 * abi::kRankInboundSeq, 0);
    x.write(rec + 4 * abi::kRankOutboundSeq, 0);
    x.write(rec + 4 * abi::kRankSession, 0xFFFFFFFFu);
    x.write(rec + 4 * abi::kRankMaxSegment, 1024);
  }
  x.write(offset + 4 * abi::comm_context_word(static_cast<uint32_t>(addresses.size())), 7);
}

// RX buffer table of `count` buffers of `size` bytes in bank 0; count last.
inline std::vector<DeviceAllocation> setup_rx(EmuDevice& d, uint32_t count, uint32_t size) {
  std::vector<DeviceAllocation> bufs;
  auto& x = d.exchange_memory();
  x.write(abi::kRxBufferSizeOffset, size);
  for (uint32_t i = 0; i < count; ++i) {
    bufs.push_back(d.allocate(size, MemoryKind::device, 0));
    uint32_t rec = abi::kRxBufferTableOffset + i * abi::kRxBufferRecordBytes;
    x.write(rec + 4 * abi::kRxStatus, abi::kRxIdle);
    x.write(rec + 4 * abi::kRxAddrLow, static_cast<uint32_t>(bufs.back().address));
    x.write(rec + 4 * abi::kRxAddrHigh, static_cast<uint32_t>(bufs.back().address >> 32));
    for (uint32_t w = abi::kRxTag; w <= abi::kRxSeqn; ++w) x.write(rec + 4 * w, 0);
  }
  x.write(abi::kRxBufferCountOffset, count);
  return bufs;
}

inline uint32_t rx_field(ExchangeMemory& x, uint32_t index, uint32_t field) {
  return x.read(abi::kRxBufferTableOffset + index * abi::kRxBufferRecordBytes + 4 * field);
}

inline fw::Operand mem(uint64_t addr, bool compressed = false, bool host = false) {
  fw::Operand o;
  o.kind = fw::OperandKind::memory;
  o.addr = addr;
  o.compressed = compressed;
  o.host = host;
  return o;
}

inline abi::WireHeader header(uint32_t count, uint32_t tag = 5, uint8_t type = abi::kMsgEager) {
  abi::WireHeader h{};
  h.count = count;
  h.tag = tag;
  h.src = 1;
  h.seqn = 3;
  h.msg_type = type;
  h.ctx = 7 << 1;
  h.msg_bytes = count;
  return h;
}

// Rendezvous data of `bytes` for transfer `rid`, to be written at `vaddr`.
inline abi::WireHeader rendezvous_data_header(uint32_t bytes, uint32_t rid, uint64_t vaddr) {
  abi::WireHeader h = header(bytes, 0, abi::kMsgRendezvousData);
  h.rid = rid;
  h.vaddr = vaddr;
  return h;
}

// The window that rendezvous data with header `h` from `from` fits exactly.
inline fw::Window window_for(const abi::WireHeader& h, const NetAddress& from) {
  fw::Window w;
  w.peer_ip = from.ip;
  w.peer_port = from.port;
  w.ctx = h.ctx;
  w.rid = h.rid;
  w.addr = h.vaddr;
  w.host = h.host != 0;
  w.bytes = h.count;
  return w;
}

template <typename T>
std::vector<T> read_back(EmuDevice& d, uint64_t addr, size_t n) {
  std::vector<T> v(n);
  d.copy_from_device(addr, v.data(), n * sizeof(T));
  return v;
}

}  // namespace accl::emu::test
