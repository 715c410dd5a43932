// SPDX-License-Identifier: Apache-2.0
#include "mover.hpp"

#include "fp16.hpp"
#include "net_address.hpp"

#include <accl/log.hpp>

#include <algorithm>
#include <cstring>

namespace accl::emu {

namespace {
// Elements per fused block: 8 Ki elements = at most 64 KiB per operand, so
// both operands, the intermediate and the result stay in L2.
constexpr uint64_t kBlock = 8192;

void convert(Mover::Conv c, const void* in, void* out, size_t n) {
  if (c == Mover::Conv::f32_to_f16) fp16::from_float(static_cast<const float*>(in), static_cast<uint16_t*>(out), n);
  else fp16::to_float(static_cast<const uint16_t*>(in), static_cast<float*>(out), n);
}

bool overlaps(const std::byte* a, uint64_t alen, const std::byte* b, uint64_t blen) {
  return alen > 0 && blen > 0 && a < b + blen && b < a + alen;
}
// The largest element the arithmetic unit knows (a pair of doubles).
constexpr uint32_t kMaxElementBytes = 16;

// Whether `p` is aligned for elements of `bytes`: to the largest power of two
// that divides the size, at most 8 (a 12-byte pair is two 4-byte fields; the
// temporaries below are 8-aligned, so no element may ask for more).
bool aligned(const void* p, uint32_t bytes) {
  const uint32_t alignment = std::min<uint32_t>(bytes & (~bytes + 1), 8);
  return alignment == 0 || reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

// Produces a network payload piece by piece, straight into transport memory.
class MovePayload final : public PayloadWriter {
 public:
  MovePayload(Mover& mover, const Mover::Plan& plan) : mover_(mover), plan_(plan) {}
  uint32_t write(std::byte* dst, size_t offset, size_t bytes) override {
    if (offset + bytes > plan_.count * plan_.esr) return abi::kDmaSizeError;
    // The plain copy (every eager send of unconverted data), cut anywhere:
    // the bytes themselves, without produce_bytes' element arithmetic
    // (memmove as in produce(): a message to ourselves may land on its source).
    if (plain() && plan_.src0 != nullptr) std::memmove(dst, plan_.src0 + offset, bytes);
    else mover_.produce_bytes(plan_, dst, offset, bytes);
    return 0;
  }
  const std::byte* contiguous_source(size_t bytes) const override {
    return plain() && plan_.src0 != nullptr && bytes == plan_.count * plan_.esr ? plan_.src0 : nullptr;
  }

 private:
  // Mover::produce's plain copy: one memmove of the first operand.
  bool plain() const { return !plan_.has_op1 && plan_.c0 == Mover::Conv::none && plan_.es0 == plan_.esr; }

  Mover& mover_;
  const Mover::Plan& plan_;
};
}  // namespace

Mover::Mover(ExchangeMemory& xmem, DeviceMemory& memory, KernelStream& streams, LinkTable& links,
             std::chrono::nanoseconds io_timeout)
    : xmem_(xmem), memory_(memory), streams_(streams), links_(links), io_timeout_(io_timeout) {
  for (auto& s : scratch_) s.resize(kBlock * 2);  // 8 bytes per element: room for any type
}

// Reads the arithmetic configuration and works out element sizes,
// conversions and the reduce function. Errors: kArithError for a bad record
// or function, kCompressionError for a conversion the record has no lane for.
uint32_t Mover::plan(const fw::Move& m, Plan& p) {
  p.count = m.count;
  p.has_op1 = m.op1.kind != fw::OperandKind::none;
  if (m.count == 0) return 0;  // header-only messages and dry runs need no types
  if (!ExchangeMemory::valid_range(m.arcfg, abi::kArithFunctionIds)) return abi::kArithError;
  auto word = [&](uint32_t i) { return xmem_.load(m.arcfg + 4 * i); };
  const uint32_t u = word(abi::kArithUncompressedBytes), c = word(abi::kArithCompressedBytes);
  if (u == 0 || c == 0 || u > kMaxElementBytes || c > kMaxElementBytes) return abi::kArithError;

  auto bytes_of = [&](bool compressed) { return compressed ? c : u; };
  // Conversion between the uncompressed and compressed types: only fp32 <->
  // fp16 lanes exist; with equal sizes the types are the same. The lane ids
  // are read only for a conversion (most moves convert nothing).
  uint32_t err = 0;
  auto conv = [&](bool from_c, bool to_c) {
    if (from_c == to_c || u == c) return Conv::none;
    if (u == 4 && c == 2) {
      if (!from_c && word(abi::kArithCompressorId) == abi::kLaneF32ToF16) return Conv::f32_to_f16;
      if (from_c && word(abi::kArithDecompressorId) == abi::kLaneF16ToF32) return Conv::f16_to_f32;
    }
    err |= abi::kCompressionError;
    return Conv::none;
  };
  p.es0 = bytes_of(m.op0.compressed);
  p.es1 = bytes_of(m.op1.compressed);
  p.esr = bytes_of(m.res.compressed);
  if (!p.has_op1) {
    p.c0 = conv(m.op0.compressed, m.res.compressed);
    return err;
  }
  const uint32_t nfunctions = word(abi::kArithNumFunctions);
  if (nfunctions > abi::kMaxReduceFunctions || m.func >= nfunctions ||
      !ExchangeMemory::valid_range(m.arcfg, abi::kArithFunctionIds + nfunctions))
    return abi::kArithError;
  auto fn = decode_function(word(abi::kArithFunctionIds + m.func));
  if (!fn) return abi::kArithError;
  p.fn = *fn;
  const bool arith_c = word(abi::kArithIsCompressed) != 0;
  if (elem_bytes(p.fn.type) != bytes_of(arith_c)) return abi::kArithError;
  p.c0 = conv(m.op0.compressed, arith_c);
  p.c1 = conv(m.op1.compressed, arith_c);
  p.cr = conv(arith_c, m.res.compressed);
  bool converts = p.c0 != Conv::none || p.c1 != Conv::none || p.cr != Conv::none;
  // Conversions produce floats: the arithmetic must be on those floats.
  if (converts && p.fn.type != (arith_c ? ElemType::f16 : ElemType::f32)) err |= abi::kArithError;
  return err;
}

uint32_t Mover::landing_function(uint32_t arcfg, uint32_t func, ArithFunction& out) {
  fw::Move m;
  m.count = 1;
  m.arcfg = arcfg;
  m.func = func;
  m.op0.kind = m.op1.kind = m.res.kind = fw::OperandKind::memory;
  Plan p;
  if (const uint32_t err = plan(m, p); err != 0) return err;
  if (p.c0 != Conv::none || p.c1 != Conv::none || p.cr != Conv::none || elem_bytes(p.fn.type) != p.esr)
    return abi::kArithError;
  out = p.fn;
  return 0;
}

void Mover::produce(const Plan& p, std::byte* dst, uint64_t first, uint64_t n) {
  if (n == 0) return;
  const std::byte* s0 = p.src0 + first * p.es0;
  if (!p.has_op1 && p.c0 == Conv::none) {
    if (s0 != dst) std::memmove(dst, s0, n * p.esr);  // the plain copy: one memmove
    return;
  }
  const std::byte* s1 = p.has_op1 ? p.src1 + first * p.es1 : nullptr;
  // In place (result exactly over an operand of the same element size) is
  // fine block by block; any other overlap, or a result not aligned to its
  // element size, goes through a temporary.
  bool bad = !aligned(dst, p.esr);
  if (overlaps(dst, n * p.esr, s0, n * p.es0) && !(dst == s0 && p.esr == p.es0)) bad = true;
  if (s1 != nullptr && overlaps(dst, n * p.esr, s1, n * p.es1) && !(dst == s1 && p.esr == p.es1)) bad = true;
  if (bad) {
    std::vector<uint64_t> tmp((n * p.esr + 7) / 8);
    produce(p, reinterpret_cast<std::byte*>(tmp.data()), first, n);
    std::memmove(dst, tmp.data(), n * p.esr);
    return;
  }
  if (!p.has_op1) {  // pure (de)compression
    convert(p.c0, s0, dst, n);
    return;
  }
  for (uint64_t e = 0; e < n; e += kBlock) {
    const uint64_t m = std::min(kBlock, n - e);
    const void* a = s0 + e * p.es0;
    const void* b = s1 + e * p.es1;
    std::byte* out = dst + e * p.esr;
    if (p.c0 != Conv::none) {
      convert(p.c0, a, scratch_[0].data(), m);
      a = scratch_[0].data();
    }
    if (p.c1 != Conv::none) {
      convert(p.c1, b, scratch_[1].data(), m);
      b = scratch_[1].data();
    }
    void* r = p.cr != Conv::none ? static_cast<void*>(scratch_[2].data()) : static_cast<void*>(out);
    reduce(p.fn, a, b, r, m);
    if (p.cr != Conv::none) convert(p.cr, r, out, m);
  }
}

void Mover::produce_bytes(const Plan& p, std::byte* dst, uint64_t offset, uint64_t bytes) {
  const uint64_t es = p.esr;
  if (offset % es == 0 && bytes % es == 0) {
    produce(p, dst, offset / es, bytes / es);
    return;
  }
  // Cut inside an element: whole elements in the middle directly, the
  // partial ones at either end through a one-element buffer.
  uint64_t end = offset + bytes;
  uint64_t e = offset / es;
  std::byte one[kMaxElementBytes];
  while (offset < end) {
    uint64_t elem_start = e * es;
    if (offset == elem_start && end - offset >= es) {
      uint64_t whole = (end - offset) / es;
      produce(p, dst, e, whole);
      dst += whole * es;
      offset += whole * es;
      e += whole;
      continue;
    }
    produce(p, one, e, 1);
    uint64_t from = offset - elem_start;
    uint64_t take = std::min(es - from, end - offset);
    std::memcpy(dst, one + from, take);
    dst += take;
    offset += take;
    ++e;
  }
}

// A send waits for room (a full shm ring, a slow TCP peer) until its call's
// deadline (the CCLO's timeout: 300 s under the PMPI layer). ACCL_TIMEOUT_MS
// alone (10 s) let a 4 MiB rendezvous transfer into a peer that fell behind
// on a loaded host abort its link mid-message while the call still had
// minutes (issue 37, defect 6). Never less than before: a move outside a
// call, or one whose call is late already (an abort notice), keeps
// ACCL_TIMEOUT_MS.
Clock::time_point Mover::send_deadline(Clock::time_point now, std::chrono::nanoseconds io_timeout,
                                       uint64_t call_deadline_ns) {
  const auto floor = now + io_timeout;
  if (call_deadline_ns == 0) return floor;
  return std::max(floor, Clock::time_point(std::chrono::nanoseconds(call_deadline_ns)));
}

uint32_t Mover::send(const fw::Move& m, const Plan& p) {
  // Destination from the communicator record: rank record dst_rank.
  if (!ExchangeMemory::valid_range(m.comm, abi::kCommRanksWord)) return abi::kInvalidArgument;
  const uint32_t size = xmem_.load(m.comm + 4 * abi::kCommSizeWord);
  if (m.dst_rank >= size || size > ExchangeMemory::kWords ||
      !ExchangeMemory::valid_range(m.comm, abi::comm_record_words(size) - 1))
    return abi::kInvalidArgument;
  const uint32_t rec = m.comm + 4 * (abi::kCommRanksWord + abi::kCommRankRecordWords * m.dst_rank);
  const uint32_t ip = xmem_.load(rec + 4 * abi::kRankIp);
  const uint32_t port = xmem_.load(rec + 4 * abi::kRankPort);
  if (port > 0xFFFF) return abi::kInvalidArgument;
  if (m.header.count != p.count * p.esr) {
    ACCL_LOG_ERROR("emulated CCLO: message header says {} bytes but the move produces {} ({} elements of {} bytes)",
                   m.header.count, p.count * p.esr, p.count, p.esr);
    return abi::kDmaSizeError;
  }
  MovePayload payload(*this, p);
  return links_.send(NetAddress{ip, static_cast<uint16_t>(port)}, m.header, payload,
                     send_deadline(Clock::now(), io_timeout_, m.deadline_ns),
                     m.shared_payload);
}

uint32_t Mover::move(const fw::Move& m) {
  try {
    Plan p;
    uint32_t err = plan(m, p);
    if (err != 0) {
      ACCL_LOG_ERROR("emulated CCLO: move of {} elements with arith config 0x{:x} function {} rejected (0x{:x})",
                     m.count, m.arcfg, m.func, err);
      return err;
    }
    const uint64_t n0 = p.count * p.es0, n1 = p.count * p.es1, nr = p.count * p.esr;
    if (p.count > 0) {
      // --- operands ---
      switch (m.op0.kind) {
        case fw::OperandKind::memory: {
          const std::byte* s = nullptr;
          if (uint32_t e = memory_.resolve_source(m.op0.addr, m.op0.host, n0, s, &host_hints_[0])) {
            ACCL_LOG_ERROR("emulated CCLO: move operand 0: {} bytes at 0x{:x}{} are not valid memory", n0,
                           m.op0.addr, m.op0.host ? " (host)" : "");
            return e;
          }
          p.src0 = s;
          break;
        }
        case fw::OperandKind::stream: {
          stream_in_.resize(n0);
          if (!streams_.pull(stream_in_.data(), n0, Clock::now() + io_timeout_)) {
            ACCL_LOG_ERROR("emulated CCLO: kernel stream did not deliver {} bytes in time", n0);
            return abi::kKrnlTimeoutStsError;
          }
          p.src0 = stream_in_.data();
          break;
        }
        default:
          ACCL_LOG_ERROR("emulated CCLO: move of {} elements without operand 0", m.count);
          return abi::kInvalidArgument;
      }
      if (p.has_op1) {
        const std::byte* s = nullptr;
        if (m.op1.kind != fw::OperandKind::memory) return abi::kInvalidArgument;
        if (uint32_t e = memory_.resolve_source(m.op1.addr, m.op1.host, n1, s, &host_hints_[1])) {
          ACCL_LOG_ERROR("emulated CCLO: move operand 1: {} bytes at 0x{:x}{} are not valid memory", n1, m.op1.addr,
                         m.op1.host ? " (host)" : "");
          return e;
        }
        p.src1 = s;
      }
      // The kernels take element pointers: copy a misaligned operand once
      // (only user memory mapped at odd addresses can be misaligned).
      if (p.has_op1 || p.c0 != Conv::none) {
        if (!aligned(p.src0, p.es0)) {
          snapshot_[0].assign(p.src0, p.src0 + n0);
          p.src0 = snapshot_[0].data();
        }
        if (p.src1 != nullptr && !aligned(p.src1, p.es1)) {
          snapshot_[1].assign(p.src1, p.src1 + n1);
          p.src1 = snapshot_[1].data();
        }
      }
    }
    // --- result ---
    switch (m.res.kind) {
      case fw::OperandKind::memory: {
        if (p.count == 0) return 0;
        std::byte* d = nullptr;
        if (uint32_t e = memory_.resolve(m.res.addr, m.res.host, nr, d, &host_hints_[2])) {
          ACCL_LOG_ERROR("emulated CCLO: move result: {} bytes at 0x{:x}{} are not valid memory", nr, m.res.addr,
                         m.res.host ? " (host)" : "");
          return e;
        }
        produce(p, d, 0, p.count);
        return 0;
      }
      case fw::OperandKind::stream: {
        if (p.count == 0) return 0;
        std::vector<std::byte> out(nr);
        produce(p, out.data(), 0, p.count);
        switch (streams_.push(m.stream_id, std::move(out), Clock::now() + io_timeout_)) {
          case KernelStream::PushStatus::ok:
            return 0;
          case KernelStream::PushStatus::full:
            ACCL_LOG_ERROR("emulated CCLO: kernel stream {} is full ({} of {} bytes queued): the kernel did not take "
                           "{} bytes in time; KRNL_TIMEOUT_STS_ERROR",
                           m.stream_id, streams_.available(), streams_.capacity(), nr);
            return abi::kKrnlTimeoutStsError;
          case KernelStream::PushStatus::interrupted:
            return abi::kKrnlTimeoutStsError;
        }
        return abi::kKrnlTimeoutStsError;
      }
      case fw::OperandKind::network:
        return send(m, p);
      case fw::OperandKind::none:
        return 0;  // operands consumed (e.g. a stream drained), nothing produced
    }
    return abi::kInvalidArgument;
  } catch (const std::exception& e) {
    // The firmware is built without exceptions: nothing may escape.
    ACCL_LOG_ERROR("emulated CCLO: move failed: {}", e.what());
    return abi::kDmaInternalError;
  }
}

}  // namespace accl::emu
