// SPDX-License-Identifier: Apache-2.0
#include "fake_cclo.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace accl::fw::test {
namespace {

// Moves the oldest entry of `queue` to `out`; false when there is none.
template <typename T>
bool pop_oldest(std::deque<T>& queue, T& out) {
  if (queue.empty()) return false;
  out = queue.front();
  queue.pop_front();
  return true;
}

template <typename T>
void apply(uint32_t kind, uint8_t* res, const uint8_t* a, const uint8_t* b, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    T x, y, r;
    std::memcpy(&x, a + i * sizeof(T), sizeof(T));
    std::memcpy(&y, b + i * sizeof(T), sizeof(T));
    switch (kind) {
      case 0: r = x + y; break;
      case 1: r = x > y ? x : y; break;
      case 2: r = x < y ? x : y; break;
      default: r = x * y; break;
    }
    std::memcpy(res + i * sizeof(T), &r, sizeof(T));
  }
}

// arith function id -> (operation 0 sum 1 max 2 min 3 prod, type 0 f32 1 f64 2 i32 3 i64)
bool reduce(uint32_t fn, uint8_t* res, const uint8_t* a, const uint8_t* b, uint32_t count) {
  if (fn >= abi::kNumArithFunctions || fn % 5 == 4) return false;  // f16 not supported here
  const uint32_t op = fn / 5;
  switch (fn % 5) {
    case 0: apply<float>(op, res, a, b, count); return true;
    case 1: apply<double>(op, res, a, b, count); return true;
    case 2: apply<int32_t>(op, res, a, b, count); return true;
    default: apply<int64_t>(op, res, a, b, count); return true;
  }
}

bool verbose() {
  const char* v = std::getenv("FW_TEST_VERBOSE");
  return v != nullptr && *v != '\0' && *v != '0';
}

}  // namespace

FakeCclo::FakeCclo(FakeFabric& fabric, uint32_t index)
    : fabric_(fabric), index_(index), xmem_(abi::kExchangeMemorySize / 4), memory_(fabric.options().memory_bytes) {
  const size_t align = ControlProgram::state_alignment();
  state_storage_.reset(new unsigned char[ControlProgram::state_bytes() + align]);
  auto raw = reinterpret_cast<uintptr_t>(state_storage_.get());
  state_ = reinterpret_cast<void*>((raw + align - 1) / align * align);
  program_ = std::make_unique<ControlProgram>(*this, state_);
}

FakeCclo::~FakeCclo() { stop(); }

void FakeCclo::start() {
  stop_ = false;
  thread_ = std::thread([this] { program_->run(); });
}

void FakeCclo::stop() {
  stop_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t FakeCclo::submit(const CallWords& words) {
  std::lock_guard<std::mutex> lock(mutex_);
  Call c{};
  std::memcpy(c.words, words.data(), sizeof(c.words));
  c.id = next_call_id_++;
  calls_.push_back(c);
  cv_.notify_all();
  return c.id;
}

std::optional<uint32_t> FakeCclo::wait(uint64_t id, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return results_.count(id) != 0; })) return std::nullopt;
  const uint32_t rc = results_[id];
  results_.erase(id);
  return rc;
}

uint32_t FakeCclo::call(const CallWords& words) { return wait(submit(words)).value_or(0xDEADBEEF); }

void FakeCclo::inject(const Arrival& arrival) {
  std::lock_guard<std::mutex> lock(mutex_);
  arrivals_.push_back(arrival);
  cv_.notify_all();
}

size_t FakeCclo::windows_open() {
  std::lock_guard<std::mutex> lock(mutex_);
  return windows_.size();
}

size_t FakeCclo::payloads_held() {
  std::lock_guard<std::mutex> lock(mutex_);
  return payloads_.size();
}

std::vector<uint8_t> FakeCclo::stream_contents() {
  std::lock_guard<std::mutex> lock(mutex_);
  return {stream_.begin(), stream_.end()};
}

bool FakeCclo::pop_call(Call& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  return pop_oldest(calls_, out);
}

void FakeCclo::finish_call(uint64_t id, uint32_t retcode, uint64_t /*duration_ns*/) {
  std::lock_guard<std::mutex> lock(mutex_);
  results_[id] = retcode;
  xmem_[abi::kRetcodeOffset / 4] = retcode;
  cv_.notify_all();
}

uint8_t* FakeCclo::memory_at(uint64_t addr, bool /*host*/, uint64_t bytes) {
  if (addr >= kPayloadBase) {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t token = (addr - kPayloadBase) >> 32;
    auto it = payloads_.find(token);
    if (it == payloads_.end()) return nullptr;
    const uint64_t offset = (addr - kPayloadBase) & 0xFFFFFFFFu;
    if (offset + bytes > it->second.size()) return nullptr;
    return it->second.data() + offset;
  }
  if (addr + bytes > memory_.size()) return nullptr;
  return memory_.data() + addr;
}

bool FakeCclo::read_operand(const Operand& op, uint32_t count, uint32_t elem_bytes, std::vector<uint8_t>& out) {
  const uint64_t bytes = uint64_t{count} * elem_bytes;
  out.assign(bytes, 0);
  if (op.kind == OperandKind::memory) {
    const uint8_t* p = memory_at(op.addr, op.host, bytes);
    if (p == nullptr) return false;
    if (bytes != 0) std::memcpy(out.data(), p, bytes);  // out.data() may be null when empty
    return true;
  }
  if (op.kind == OperandKind::stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stream_.size() < bytes) return false;
    for (uint64_t i = 0; i < bytes; ++i) {
      out[i] = stream_.front();
      stream_.pop_front();
    }
    return true;
  }
  return op.kind == OperandKind::none && bytes == 0;
}

std::vector<FakeCclo::Sent> FakeCclo::sent() {
  std::lock_guard<std::mutex> lock(mutex_);
  return sent_;
}

uint32_t FakeCclo::move(const Move& m) {
  if (m.op0.compressed || m.op1.compressed || m.res.compressed) return abi::kCompressionError;
  const uint32_t elem_bytes = xmem(m.arcfg + 4 * abi::kArithUncompressedBytes);
  std::vector<uint8_t> data;
  if (!read_operand(m.op0, m.count, elem_bytes, data)) return abi::kDmaDecodeError;
  if (m.op1.kind != OperandKind::none) {
    std::vector<uint8_t> other;
    if (!read_operand(m.op1, m.count, elem_bytes, other)) return abi::kDmaDecodeError;
    const uint32_t fn = xmem(m.arcfg + 4 * (abi::kArithFunctionIds + m.func));
    if (!reduce(fn, data.data(), data.data(), other.data(), m.count)) return abi::kArithError;
  }
  switch (m.res.kind) {
    case OperandKind::memory: {
      uint8_t* p = memory_at(m.res.addr, m.res.host, data.size());
      if (p == nullptr) return abi::kDmaDecodeError;
      std::memcpy(p, data.data(), data.size());
      return 0;
    }
    case OperandKind::stream: {
      std::lock_guard<std::mutex> lock(mutex_);
      stream_.insert(stream_.end(), data.begin(), data.end());
      return 0;
    }
    case OperandKind::network: {
      if (m.header.count != data.size()) return abi::kDmaSizeError;
      const uint32_t ip = xmem(m.comm + 4 * (abi::kCommRanksWord + abi::kCommRankRecordWords * m.dst_rank));
      const uint32_t port = xmem(m.comm + 4 * (abi::kCommRanksWord + abi::kCommRankRecordWords * m.dst_rank + 1));
      FakeCclo* peer = fabric_.find(ip, port);
      if (peer == nullptr) return abi::kLinkError;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        sent_.push_back(Sent{m.dst_rank, m.header.msg_type, m.shared_payload, m.deadline_ns});
      }
      peer->deliver(m.header, std::move(data), this->ip(), this->port());
      return 0;
    }
    default:
      return abi::kDmaDecodeError;
  }
}

void FakeCclo::deliver(const abi::WireHeader& header, std::vector<uint8_t> payload, uint32_t from_ip,
                       uint32_t from_port) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (header.strm != 0) {  // kernel-stream traffic bypasses the firmware
    stream_.insert(stream_.end(), payload.begin(), payload.end());
    return;
  }
  Arrival a;
  a.header = header;
  a.peer_ip = from_ip;
  a.peer_port = from_port;
  if (header.msg_type == abi::kMsgRendezvousData) {
    for (const Window& w : windows_) {
      if (w.peer_ip == from_ip && w.peer_port == from_port && w.ctx == header.ctx && w.rid == header.rid &&
          w.bytes == payload.size() && w.addr == header.vaddr) {
        if (w.reduce) {  // reduce on landing: result = operand (+) payload
          const uint32_t elem_bytes = xmem(w.arcfg + 4 * abi::kArithUncompressedBytes);
          const uint32_t fn = xmem(w.arcfg + 4 * (abi::kArithFunctionIds + w.func));
          if (elem_bytes == 0 || !reduce(fn, memory_.data() + w.addr, memory_.data() + w.operand_addr,
                                         payload.data(), static_cast<uint32_t>(payload.size() / elem_bytes)))
            a.status = abi::kArithError;
        } else {
          std::memcpy(memory_.data() + w.addr, payload.data(), payload.size());
        }
        a.kind = ArrivalKind::rendezvous_done;
        arrivals_.push_back(a);
        cv_.notify_all();
        return;
      }
    }
    std::fprintf(stderr, "fake cclo %u: rendezvous data without matching window (rid %u, %zu bytes)\n", index_,
                 header.rid, payload.size());
    return;
  }
  if (header.msg_type == abi::kMsgEager) {
    const uint64_t token = next_token_++;
    payloads_[token] = std::move(payload);
    a.token = token;
    a.payload_addr = kPayloadBase + (token << 32);
  }
  arrivals_.push_back(a);
  cv_.notify_all();
}

bool FakeCclo::pop_arrival(Arrival& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  return pop_oldest(arrivals_, out);
}

bool FakeCclo::pop_arrival_for(uint32_t context_id, uint32_t src, Arrival& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = arrivals_.begin(); it != arrivals_.end(); ++it) {
    if (!arrival_is_for(*it, context_id, src)) continue;
    out = *it;
    arrivals_.erase(it);
    return true;
  }
  return false;
}

void FakeCclo::release_payload(const Arrival& a) {
  std::lock_guard<std::mutex> lock(mutex_);
  payloads_.erase(a.token);
}

uint32_t FakeCclo::open_window(const Window& w) {
  if (w.addr + w.bytes > memory_.size()) return abi::kInvalidArgument;
  if (w.reduce && w.operand_addr + w.bytes > memory_.size()) return abi::kInvalidArgument;
  std::lock_guard<std::mutex> lock(mutex_);
  windows_.push_back(w);
  windows_opened_++;
  if (w.reduce) reducing_windows_opened_++;
  return 0;
}

void FakeCclo::close_window(const Window& w) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = windows_.begin(); it != windows_.end(); ++it) {
    if (it->rid == w.rid && it->peer_ip == w.peer_ip && it->peer_port == w.peer_port && it->addr == w.addr) {
      windows_.erase(it);
      return;
    }
  }
}

void FakeCclo::reset_datapath() {
  std::lock_guard<std::mutex> lock(mutex_);
  arrivals_.clear();
  payloads_.clear();
  windows_.clear();
  stream_.clear();
}

uint64_t FakeCclo::now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

void FakeCclo::idle(uint64_t deadline_ns) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline_ns));
  cv_.wait_until(lock, deadline, [&] { return stop_.load() || !calls_.empty() || !arrivals_.empty(); });
}

bool FakeCclo::log_enabled(int level) { return level <= kLogWarn || verbose(); }

void FakeCclo::log(int level, const char* message) {
  if (verbose() || level <= kLogError) std::fprintf(stderr, "[fw %u L%d] %s\n", index_, level, message);
}

// ---------------------------------------------------------------------------

FakeFabric::FakeFabric(uint32_t size, FabricOptions options) : options_(options) {
  for (uint32_t i = 0; i < size; ++i) members_.push_back(std::make_unique<FakeCclo>(*this, i));
  for (auto& m : members_) m->start();
}

FakeFabric::~FakeFabric() {
  for (auto& m : members_) m->stop();
}

FakeCclo* FakeFabric::find(uint32_t ip, uint32_t port) {
  for (auto& m : members_) {
    if (m->ip() == ip && m->port() == port) return m.get();
  }
  return nullptr;
}

void FakeFabric::configure() {
  const uint32_t P = size();
  for (uint32_t r = 0; r < P; ++r) {
    FakeCclo& c = *members_[r];
    c.set_xmem(abi::kRxBufferSizeOffset, options_.rx_size);
    for (uint32_t i = 0; i < options_.rx_count; ++i) {
      const uint32_t rec = abi::kRxBufferTableOffset + i * abi::kRxBufferRecordBytes;
      c.set_xmem(rec + 4 * abi::kRxAddrLow, 0x100000 + i * options_.rx_size);
    }
    c.set_xmem(abi::kRxBufferCountOffset, options_.rx_count);
    c.set_xmem(kCommOffset + 4 * abi::kCommSizeWord, P);
    c.set_xmem(kCommOffset + 4 * abi::kCommLocalRankWord, r);
    for (uint32_t q = 0; q < P; ++q) {
      const uint32_t base = kCommOffset + 4 * (abi::kCommRanksWord + abi::kCommRankRecordWords * q);
      c.set_xmem(base + 4 * abi::kRankIp, members_[q]->ip());
      c.set_xmem(base + 4 * abi::kRankPort, members_[q]->port());
      c.set_xmem(base + 4 * abi::kRankInboundSeq, 0);
      c.set_xmem(base + 4 * abi::kRankOutboundSeq, 0);
      c.set_xmem(base + 4 * abi::kRankSession, q);
      c.set_xmem(base + 4 * abi::kRankMaxSegment, options_.max_segment);
    }
    c.set_xmem(kCommOffset + 4 * abi::comm_context_word(P), kContextId);
    const uint32_t i32[] = {4, 4, 0, 0, 0, 4, 0, abi::kFnSumI32, abi::kFnMaxI32, abi::kFnMinI32, abi::kFnProdI32};
    const uint32_t f32[] = {4, 4, 0, 0, 0, 4, 0, abi::kFnSumF32, abi::kFnMaxF32, abi::kFnMinF32, abi::kFnProdF32};
    for (uint32_t i = 0; i < 11; ++i) {
      c.set_xmem(kArithI32 + 4 * i, i32[i]);
      c.set_xmem(kArithF32 + 4 * i, f32[i]);
    }
    const uint32_t spares[] = {abi::kSpare1Offset, abi::kSpare2Offset, abi::kSpare3Offset};
    for (uint32_t i = 0; i < 3; ++i) c.set_xmem(spares[i], static_cast<uint32_t>(kSpareBase + i * kSpareStride));
    auto config = [&](uint32_t function, uint32_t count) {
      const uint32_t rc = c.call(CallBuilder(abi::kConfig).function(function).count(count));
      if (rc != 0) throw std::runtime_error("config call failed: " + std::to_string(rc));
    };
    config(abi::kSetTimeout, options_.timeout_us);
    config(abi::kSetMaxEagerSize, options_.max_eager);
    config(abi::kSetMaxRendezvousSize, options_.max_rendezvous);
    c.set_xmem(abi::kConfigReadyOffset, 1);
  }
}

}  // namespace accl::fw::test
