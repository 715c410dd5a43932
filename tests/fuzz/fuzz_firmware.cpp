// SPDX-License-Identifier: Apache-2.0
//
// fuzz_firmware: the CCLO control program (firmware/) receiving arbitrary
// network traffic. The harness is the firmware's whole outside world -- a
// DataPlane that is the driver (valid calls on a P-rank communicator), the
// network (arrivals decoded from the fuzzer's bytes: eager segments, RTS,
// grants, rendezvous completions, link errors, with bogus sources, contexts,
// sequence numbers, counts, offsets, rids) and the clock (virtual: time
// moves only when the input says so or the input is used up) -- so one input
// always replays the same way, on one thread.
//
// Moves are checked, not executed: the harness only needs to know which
// memory each one touches. Invariants (violation = "FUZZ INVARIANT VIOLATED"):
//   F1 every memory operand a move reads lies inside a buffer of a call that
//      is still running, a spare buffer, or the payload of an arrival the
//      firmware holds and has not released;
//   F2 every memory a move writes and every rendezvous window the firmware
//      opens lies inside a buffer of a call still running or a spare buffer
//      (never in a send-only input, never in released or foreign memory);
//   F3 when a call finishes, no window into its buffers is still open (a late
//      peer must not be able to write into memory the user got back);
//   F4 an arrival's payload is released at most once;
//   F5 a network move's header.count equals the payload bytes it produces;
//   F6 exchange memory accesses stay inside the 8 KiB;
//   F7 liveness: once the input is used up, every call finishes by its
//      deadline (plus slack) and the firmware goes idle;
//   plus AddressSanitizer / UBSan (array bounds) in the firmware itself.
// Inputs with bit 7 of the first byte set also submit raw, unvalidated call
// words; then F1/F2 are not checked (the data plane, not the firmware,
// guards memory against a broken driver) but everything else is.
#include "fuzz_common.hpp"

#include <accl/abi.hpp>
#include <accl_fw/control_program.hpp>
#include <accl_fw/dataplane.hpp>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <vector>

namespace {

using namespace accl;
using accl::fuzz::Input;

constexpr uint32_t kComm = 0x400;
constexpr uint32_t kArithI32 = 0x1000;
constexpr uint32_t kArithF32 = 0x1040;
constexpr uint32_t kArithF32F16 = 0x1080;
constexpr uint64_t kDeviceBase = 0x0000010000000000ull;
constexpr uint64_t kHostBase = 0x00007F0000000000ull;
constexpr uint64_t kPayloadBase = 0x0000500000000000ull;
constexpr uint64_t kSpareBase = 0x0000020000000000ull;
constexpr uint32_t kContext = 5;
constexpr uint64_t kMaxSteps = 2'000'000;  // DataPlane calls per input before we call it a livelock

uint32_t peer_ip(uint32_t q) { return 0x0A000001u + q; }
uint32_t peer_port(uint32_t q) { return 6000 + q; }

struct Region {
  uint64_t addr = 0;
  uint64_t bytes = 0;
  bool host = false;
  uint64_t call = 0;  // owning call id; 0 = spare
  bool writable = true;
};

class Harness final : public fw::DataPlane {
 public:
  explicit Harness(Input& in) : in_(in) {}

  void run() {
    configure();
    const size_t align = std::max<size_t>(fw::ControlProgram::state_alignment(), alignof(std::max_align_t));
    void* state = ::operator new(fw::ControlProgram::state_bytes(), std::align_val_t(align));
    {
      fw::ControlProgram program(*this, state);
      program.run();
    }
    ::operator delete(state, std::align_val_t(align));
  }

  // --- DataPlane ---------------------------------------------------------------
  uint32_t xmem_read(uint32_t offset) override {
    step();
    FUZZ_CHECK(offset % 4 == 0 && offset < abi::kExchangeMemorySize, "F6: exchange memory read at 0x%x", offset);
    return xmem_[offset / 4];
  }
  void xmem_write(uint32_t offset, uint32_t value) override {
    step();
    FUZZ_CHECK(offset % 4 == 0 && offset < abi::kExchangeMemorySize, "F6: exchange memory write at 0x%x", offset);
    xmem_[offset / 4] = value;
  }

  bool pop_call(fw::Call& out) override {
    step();
    if (calls_.empty()) return false;
    out = calls_.front();
    calls_.pop_front();
    // The driver sets CFGRDY after its config calls completed; the firmware
    // clears it at power-on, before it pops the first call.
    if (out.words[abi::kWordScenario] != abi::kConfig && !configured_) {
      xmem_[abi::kConfigReadyOffset / 4] = 1;
      configured_ = true;
    }
    // The firmware takes the call now: its deadline is now + the timeout in
    // force (a set_timeout call applies to the calls popped after it).
    const uint32_t* w = out.words;
    if (w[abi::kWordScenario] == abi::kConfig && w[abi::kWordFunction] == abi::kSetTimeout)
      timeout_ns_ = w[abi::kWordCount] ? uint64_t{w[abi::kWordCount]} * 1000 : kDefaultTimeoutNs;
    if (w[abi::kWordScenario] == abi::kConfig && w[abi::kWordFunction] == abi::kResetPeripherals)
      timeout_ns_ = kDefaultTimeoutNs;
    last_deadline_ = std::max(last_deadline_, now_ + timeout_ns_);
    return true;
  }

  void finish_call(uint64_t id, uint32_t, uint64_t) override {
    step();
    FUZZ_CHECK(running_.erase(id) == 1, "finish_call for call %llu that is not running",
               static_cast<unsigned long long>(id));
    // F3: no window may still point into this call's buffers.
    for (const auto& [key, w] : windows_) {
      for (const Region& r : regions_) {
        if (r.call != id) continue;
        FUZZ_CHECK(!(w.host == r.host && w.addr < r.addr + r.bytes && r.addr < w.addr + w.bytes),
                   "F3: call %llu finished with a rendezvous window (rid %u, %llu bytes at 0x%llx) still open into "
                   "its buffer",
                   static_cast<unsigned long long>(id), w.rid, static_cast<unsigned long long>(w.bytes),
                   static_cast<unsigned long long>(w.addr));
      }
    }
    std::erase_if(regions_, [&](const Region& r) { return r.call == id; });
  }

  uint32_t move(const fw::Move& m) override {
    step();
    uint32_t unc = 4, comp = 4;
    if (m.arcfg % 4 == 0 && m.arcfg + 8 <= abi::kExchangeMemorySize && m.arcfg != 0) {
      unc = xmem_[m.arcfg / 4];
      comp = xmem_[m.arcfg / 4 + 1];
      if (comp == 0) comp = unc;
    }
    const auto bytes_of = [&](const fw::Operand& o) { return uint64_t{m.count} * (o.compressed ? comp : unc); };
    check_operand(m.op0, bytes_of(m.op0), false, "op0");
    check_operand(m.op1, bytes_of(m.op1), false, "op1");
    if (m.res.kind == fw::OperandKind::memory) check_operand(m.res, bytes_of(m.res), true, "res");
    if (m.res.kind == fw::OperandKind::network) {
      const bool has_payload = m.op0.kind != fw::OperandKind::none;
      const uint64_t payload = has_payload ? bytes_of(m.res) : 0;
      // Raw call words may point the arith config into records the firmware
      // rewrites (sequence numbers): element sizes then change under it.
      const bool known_config = m.arcfg == kArithI32 || m.arcfg == kArithF32 || m.arcfg == kArithF32F16;
      FUZZ_CHECK(m.header.count == payload || (raw_calls_ && !known_config),
                 "F5: network move with header.count %u but %llu payload bytes", m.header.count,
                 static_cast<unsigned long long>(payload));
      if (m.header.msg_type == abi::kMsgRendezvousRequest) rts_rids_.push_back(m.header.rid);
    }
    return 0;
  }

  bool pop_arrival(fw::Arrival& out) override {
    step();
    if (arrivals_.empty()) return false;
    out = arrivals_.front();
    arrivals_.pop_front();
    if (out.token != 0) live_payloads_[out.token] = Region{out.payload_addr, out.header.count, false, 0, false};
    return true;
  }

  bool pop_arrival_for(uint32_t context_id, uint32_t src, fw::Arrival& out) override {
    step();
    for (auto it = arrivals_.begin(); it != arrivals_.end(); ++it) {
      if (!fw::arrival_is_for(*it, context_id, src)) continue;
      out = *it;
      arrivals_.erase(it);
      if (out.token != 0) live_payloads_[out.token] = Region{out.payload_addr, out.header.count, false, 0, false};
      return true;
    }
    return false;
  }

  void release_payload(const fw::Arrival& a) override {
    step();
    if (a.token == 0) return;
    FUZZ_CHECK(live_payloads_.erase(a.token) == 1, "F4: payload token %llu released twice (or never delivered)",
               static_cast<unsigned long long>(a.token));
  }

  uint32_t open_window(const fw::Window& w) override {
    step();
    if (!raw_calls_) {
      FUZZ_CHECK(w.bytes == 0 || writable(w.addr, w.host, w.bytes),
                 "F2: window of %llu bytes at 0x%llx%s is not inside a running call's buffer or a spare",
                 static_cast<unsigned long long>(w.bytes), static_cast<unsigned long long>(w.addr),
                 w.host ? " (host)" : "");
    }
    windows_[key(w)] = w;
    return 0;
  }
  void close_window(const fw::Window& w) override {
    step();
    windows_.erase(key(w));
  }

  void reset_datapath() override {
    step();
    arrivals_.clear();
    windows_.clear();
    live_payloads_.clear();
  }
  uint32_t hw_id() override { return 1 | abi::kHwIdDma | abi::kHwIdArith | abi::kHwIdCompression; }
  uint32_t capabilities() override { return 0x8000007F; }

  uint64_t now_ns() override { return now_; }

  // The firmware has nothing to do: feed it the next event of the input, or
  // once the input is used up, let virtual time run to its next deadline.
  void idle(uint64_t deadline_ns) override {
    step();
    if (!in_.empty()) {
      next_event();
      return;
    }
    if (running_.empty() && calls_.empty()) {
      stop_ = true;
      return;
    }
    FUZZ_CHECK(now_ <= last_deadline_ + kSlackNs,
               "F7: %zu call(s) still running %llu ms (virtual) after the last deadline", running_.size(),
               static_cast<unsigned long long>((now_ - last_deadline_) / 1000000));
    now_ = std::max(now_ + 1000, deadline_ns);
  }
  bool stop_requested() override { return stop_; }
  bool log_enabled(int) override { return false; }
  void log(int, const char*) override {}

 private:
  static constexpr uint64_t kSlackNs = 1'000'000'000ull;  // 1 s virtual
  static constexpr uint64_t kDefaultTimeoutNs = 10'000'000'000ull;  // firmware default (firmware/README.md)

  static uint64_t key(const fw::Window& w) {
    return (uint64_t{w.peer_ip} << 32) ^ (uint64_t{w.peer_port} << 48) ^ (uint64_t{w.ctx} << 20) ^ w.rid;
  }

  void step() { FUZZ_CHECK(++steps_ < kMaxSteps, "F7: livelock: %llu data-plane calls for one input", static_cast<unsigned long long>(steps_)); }

  bool inside(uint64_t addr, bool host, uint64_t bytes, bool for_write) const {
    for (const Region& r : regions_)
      if (r.host == host && addr >= r.addr && bytes <= r.bytes && addr - r.addr <= r.bytes - bytes &&
          (!for_write || r.writable))
        return true;
    if (!for_write && !host)
      for (const auto& [token, r] : live_payloads_)
        if (addr >= r.addr && bytes <= r.bytes && addr - r.addr <= r.bytes - bytes) return true;
    return false;
  }
  bool writable(uint64_t addr, bool host, uint64_t bytes) const { return inside(addr, host, bytes, true); }

  void check_operand(const fw::Operand& o, uint64_t bytes, bool write, const char* which) {
    if (o.kind != fw::OperandKind::memory || bytes == 0 || raw_calls_) return;
    FUZZ_CHECK(inside(o.addr, o.host, bytes, write), "%s: move %s %s %llu bytes at 0x%llx%s outside every allowed region",
               write ? "F2" : "F1", write ? "writes" : "reads", which, static_cast<unsigned long long>(bytes),
               static_cast<unsigned long long>(o.addr), o.host ? " (host)" : "");
  }

  // --- the driver ----------------------------------------------------------------
  void set(uint32_t offset, uint32_t v) { xmem_[offset / 4] = v; }

  void arith(uint32_t at, uint32_t unc, uint32_t comp, bool compressed, uint32_t f0) {
    const uint32_t w[] = {unc, comp, 0, 0, 1, 4, compressed ? 1u : 0u, f0, f0 + 5, f0 + 10, f0 + 15};
    for (uint32_t i = 0; i < 11; ++i) set(at + 4 * i, w[i]);
  }

  void configure() {
    const uint8_t flags = in_.u8();
    raw_calls_ = (flags & 0x80) != 0;
    P_ = 2 + in_.u8() % 3;
    local_ = in_.u8() % P_;
    static constexpr uint32_t kRxSizes[] = {64, 256, 1024};
    static constexpr uint32_t kEager[] = {64, 1024, 4096, 0xFFFFFFFF};
    static constexpr uint32_t kRndzv[] = {0, 64, 256, 32768};
    rx_count_ = 1 + in_.u8() % 16;
    rx_size_ = kRxSizes[in_.u8() % 3];
    const uint32_t eager = std::min<uint32_t>(kEager[in_.u8() % 4], rx_count_ * rx_size_);
    spare_ = kRndzv[in_.u8() % 4];
    set(abi::kRxBufferSizeOffset, rx_size_);
    for (uint32_t i = 0; i < rx_count_; ++i)
      set(abi::kRxBufferTableOffset + i * abi::kRxBufferRecordBytes + 4 * abi::kRxAddrLow, 0x100000 + i * rx_size_);
    set(abi::kRxBufferCountOffset, rx_count_);
    set(kComm + 4 * abi::kCommSizeWord, P_);
    set(kComm + 4 * abi::kCommLocalRankWord, local_);
    for (uint32_t q = 0; q < P_; ++q) {
      const uint32_t base = kComm + 4 * (abi::kCommRanksWord + abi::kCommRankRecordWords * q);
      set(base + 4 * abi::kRankIp, peer_ip(q));
      set(base + 4 * abi::kRankPort, peer_port(q));
      set(base + 4 * abi::kRankSession, q);
      set(base + 4 * abi::kRankMaxSegment, (flags & 1) ? 0 : rx_size_ / 2);
    }
    set(kComm + 4 * abi::comm_context_word(P_), kContext);
    arith(kArithI32, 4, 4, false, abi::kFnSumI32);
    arith(kArithF32, 4, 4, false, abi::kFnSumF32);
    arith(kArithF32F16, 4, 2, true, abi::kFnSumF16);
    const uint32_t spares[] = {abi::kSpare1Offset, abi::kSpare2Offset, abi::kSpare3Offset};
    for (uint32_t i = 0; i < 3; ++i) {
      const uint64_t a = kSpareBase + i * 0x100000;
      set(spares[i], static_cast<uint32_t>(a));
      set(spares[i] + 4, static_cast<uint32_t>(a >> 32));
      if (spare_ != 0) regions_.push_back(Region{a, spare_, false, 0, true});
    }
    // Config calls, as the driver issues them, then CFGRDY.
    auto config = [&](uint32_t function, uint32_t count) {
      fw::Call c{};
      c.words[abi::kWordScenario] = abi::kConfig;
      c.words[abi::kWordFunction] = function;
      c.words[abi::kWordCount] = count;
      submit(c);
    };
    config(abi::kSetTimeout, 1000 + 1000u * (in_.u8() % 50));  // 1..50 ms virtual
    config(abi::kSetMaxEagerSize, eager);
    config(abi::kSetMaxRendezvousSize, spare_);
    // CFGRDY = 1 once the config calls ran (power-on clears it): pop_call().
  }

  void submit(fw::Call c) {
    c.id = ++next_call_id_;
    running_.insert(c.id);
    calls_.push_back(c);
  }

  uint64_t alloc(uint64_t bytes, bool host, uint64_t call, bool writable) {
    uint64_t& next = host ? next_host_ : next_device_;
    const uint64_t a = (host ? kHostBase : kDeviceBase) + next;
    next += (bytes + 127) & ~uint64_t{63};
    if (bytes > 0) regions_.push_back(Region{a, bytes, host, call, writable});
    return a;
  }

  uint32_t draw_count() {
    const uint8_t sel = in_.u8();
    switch (sel % 6) {
      case 0: return sel / 6 % 4;                           // 0..3
      case 1: return rx_size_ / 4 - 1 + in_.u8() % 3;       // around one RX buffer / segment
      case 2: return spare_ ? spare_ / 4 - 1 + in_.u8() % 3 : 1 + in_.u8();  // around the spare size
      case 3: return 1 + in_.u16() % 3000;
      default: return 1 + in_.u8();
    }
  }

  void next_call() {
    fw::Call c{};
    const uint64_t id = next_call_id_ + 1;
    if (raw_calls_ && in_.u8() % 4 == 0) {
      in_.bytes(c.words, sizeof c.words);
      c.words[abi::kWordComm] = in_.u8() & 1 ? kComm : c.words[abi::kWordComm];
      submit(c);
      return;
    }
    static constexpr uint32_t kScenarios[] = {abi::kSend,      abi::kRecv,       abi::kBcast,     abi::kScatter,
                                              abi::kGather,    abi::kReduce,     abi::kAllgather, abi::kAllreduce,
                                              abi::kReduceScatter, abi::kAlltoall, abi::kBarrier,  abi::kCopy,
                                              abi::kCombine,   abi::kRecv,       abi::kSend,      abi::kAllreduce};
    const uint32_t sc = kScenarios[in_.u8() % 16];
    const uint8_t opts = in_.u8();
    const bool compressed = (opts & 1) && sc != abi::kBarrier && sc != abi::kCopy && sc != abi::kCombine;
    const bool in_place = (opts & 2) != 0;
    const uint32_t count = draw_count();
    const uint64_t n = count;
    const uint32_t elem = 4;
    uint64_t b0 = 0, b1 = 0, br = 0;  // bytes of op0 / op1 / result
    switch (sc) {
      case abi::kSend: b0 = n; break;
      case abi::kRecv: br = n; break;
      case abi::kBcast: b0 = br = n; break;
      case abi::kScatter: b0 = n * P_; br = n; break;
      case abi::kGather: b0 = n; br = n * P_; break;
      case abi::kAllgather: b0 = n; br = n * P_; b1 = br; break;
      case abi::kReduce: b0 = n; br = n; break;
      case abi::kAllreduce: b0 = n; br = n; b1 = br; break;
      case abi::kReduceScatter: b0 = n * P_; br = n; break;
      case abi::kAlltoall: b0 = n * P_; br = n * P_; b1 = br; break;
      case abi::kCopy: b0 = br = n; break;
      case abi::kCombine: b0 = b1 = br = n; break;
      default: break;
    }
    const bool h0 = opts & 4, h1 = opts & 8, hr = opts & 16;
    const uint64_t a0 = b0 ? alloc(b0 * elem, h0, id, sc == abi::kBcast) : 0;
    uint64_t ar = br ? alloc(br * elem, hr, id, true) : 0;
    bool res_host = hr;
    if (sc == abi::kBcast || ((sc == abi::kAllreduce || sc == abi::kReduce || sc == abi::kAlltoall) && in_place)) {
      ar = a0;
      res_host = h0;
      for (Region& r : regions_) if (r.addr == a0 && r.call == id) r.writable = true;
    }
    uint64_t a1 = 0;
    bool op1_host = h1;
    if (sc == abi::kAllgather || sc == abi::kAllreduce || sc == abi::kAlltoall) {
      a1 = ar;
      op1_host = res_host;
    } else if (b1) {
      a1 = alloc(b1 * elem, h1, id, false);
    }
    uint32_t root = in_.u8();
    if (sc == abi::kRecv && root % 8 == 7) root = abi::kRankAny;
    else root %= P_;
    uint32_t tag = in_.u8();
    if (tag >= 250) tag = abi::kTagAny;
    c.words[abi::kWordScenario] = sc;
    c.words[abi::kWordCount] = count;
    c.words[abi::kWordComm] = kComm;
    c.words[abi::kWordRootSrcDst] = root;
    c.words[abi::kWordFunction] = (opts >> 5) % 4;
    c.words[abi::kWordTag] = tag;
    c.words[abi::kWordArithConfig] = compressed ? kArithF32F16 : (opts & 32) ? kArithF32 : kArithI32;
    c.words[abi::kWordCompressionFlags] = compressed ? uint32_t{abi::kEthCompressed} : 0u;
    const uint32_t host_flags = (h0 && b0 ? uint32_t{abi::kOp0Host} : 0u) | (op1_host && a1 ? uint32_t{abi::kOp1Host} : 0u) |
                                (res_host && (br || sc == abi::kBcast) ? uint32_t{abi::kResHost} : 0u);
    c.words[abi::kWordStreamFlags] = host_flags << 8;
    auto put = [&](int i, uint64_t a) {
      c.words[abi::kWordAddr0Low + 2 * i] = static_cast<uint32_t>(a);
      c.words[abi::kWordAddr0High + 2 * i] = static_cast<uint32_t>(a >> 32);
    };
    put(0, a0);
    put(1, a1);
    put(2, ar);
    submit(c);
  }

  // --- the network -----------------------------------------------------------------
  uint32_t draw_src() {
    const uint8_t s = in_.u8();
    if (s >= 250) return s == 255 ? 0xFFFFFFFFu : P_ + (s - 250);  // not a member
    return s % P_;
  }
  uint32_t draw_ctx(bool collective_hint) {
    const uint8_t s = in_.u8();
    switch (s % 8) {
      case 0: return s;                                // garbage
      case 1: return (kContext << 1) | (collective_hint ? 0u : 1u);
      default: return (kContext << 1) | (collective_hint ? 1u : 0u);
    }
  }

  fw::Arrival from(uint32_t src) {
    fw::Arrival a;
    a.peer_ip = src < P_ ? peer_ip(src) : 0x0A0000F0u;
    a.peer_port = src < P_ ? peer_port(src) : 1;
    a.header.src = src;
    a.header.dst = static_cast<uint16_t>(local_);
    return a;
  }

  uint32_t draw_seqn(uint32_t src) {
    uint32_t& next = seqn_[src % 64];
    const uint8_t s = in_.u8();
    if (s % 8 == 7) return in_.u32();  // gap / repeat
    return next++;
  }

  void next_arrival(uint8_t kind) {
    const uint32_t src = draw_src();
    fw::Arrival a = from(src);
    abi::WireHeader& h = a.header;
    const uint8_t opts = in_.u8();
    h.ctx = draw_ctx(opts & 1);
    const uint8_t t = in_.u8();
    h.tag = t >= 250 ? abi::kTagAny : t;
    switch (kind) {
      case 0: {  // eager segment (first or continuation)
        h.msg_type = abi::kMsgEager;
        h.seqn = draw_seqn(src);
        h.count = in_.u16() % 4096;
        h.msg_bytes = opts & 2 ? in_.u32() : h.count + (opts & 4 ? h.count : 0);
        h.flags = (opts & 8 ? uint32_t{abi::kHdrContinuation} : 0u) | (opts & 16 ? uint32_t{abi::kHdrCompressed} : 0u);
        if (opts & 32) {
          a.status = abi::kDmaSizeError;  // the data plane had no room: no payload
        } else if (h.count > 0) {
          a.token = ++next_token_;
          a.payload_addr = kPayloadBase + a.token * 0x10000;
          a.rx_index = static_cast<uint32_t>(a.token % rx_count_);
        }
        break;
      }
      case 1:  // request to send
        h.msg_type = abi::kMsgRendezvousRequest;
        h.seqn = draw_seqn(src);
        h.rid = in_.u8() | (opts & 2 ? 0x80000000u : 0);
        h.msg_bytes = opts & 4 ? in_.u32() : in_.u16();
        h.flags = opts & 16 ? abi::kHdrCompressed : 0;
        break;
      case 2: {  // grant (address message)
        h.msg_type = abi::kMsgRendezvousAddr;
        const uint8_t r = in_.u8();
        h.rid = (r % 2 == 0 && !rts_rids_.empty()) ? rts_rids_[r / 2 % rts_rids_.size()] : (r | (opts & 2 ? 0x80000000u : 0));
        h.vaddr = in_.u64();
        h.host = opts & 4 ? 1 : 0;
        h.msg_bytes = opts & 8 ? in_.u32() : in_.u16();
        h.reserved[0] = opts & 16 ? in_.u32() : in_.u16();
        h.reserved[1] = opts & 32 ? 1 : 0;  // pre-grant marker
        break;
      }
      case 3: {  // the data plane completed a window (or reports a broken one)
        a.kind = fw::ArrivalKind::rendezvous_done;
        h.msg_type = abi::kMsgRendezvousData;
        if (!windows_.empty() && !(opts & 2)) {
          auto it = windows_.begin();
          std::advance(it, in_.u8() % windows_.size());
          const fw::Window w = it->second;
          windows_.erase(it);  // one window, one transfer
          h.ctx = w.ctx;
          h.rid = w.rid;
          h.vaddr = w.addr;
          h.host = w.host ? 1 : 0;
          h.count = static_cast<uint32_t>(w.bytes);
          a.peer_ip = w.peer_ip;
          a.peer_port = w.peer_port;
          h.src = src;
          if (opts & 4) a.status = abi::kLinkError;
        } else {
          h.rid = in_.u32();
          h.count = in_.u16();
          a.status = abi::kDmaDecodeError;  // what the sink reports for data matching no window
        }
        break;
      }
      default:  // link error
        a = from(src);
        a.kind = fw::ArrivalKind::link_error;
        a.status = abi::kLinkError;
        break;
    }
    arrivals_.push_back(a);
  }

  void next_event() {
    const uint8_t e = in_.u8();
    switch (e % 10) {
      case 0: case 1: case 2: next_call(); break;
      case 3: case 4: next_arrival(0); break;
      case 5: next_arrival(1); break;
      case 6: next_arrival(2); break;
      case 7: next_arrival(3); break;
      case 8: next_arrival(4); break;
      case 9: now_ += uint64_t{in_.u16()} * 1000; break;  // up to 65 ms
    }
  }

  Input& in_;
  uint32_t xmem_[abi::kExchangeMemorySize / 4] = {};
  bool raw_calls_ = false;
  bool configured_ = false;
  uint32_t P_ = 2, local_ = 0, rx_count_ = 1, rx_size_ = 64, spare_ = 0;
  std::deque<fw::Call> calls_;
  std::set<uint64_t> running_;
  uint64_t next_call_id_ = 0;
  uint64_t last_deadline_ = 0;
  uint64_t timeout_ns_ = kDefaultTimeoutNs;
  std::vector<Region> regions_;
  uint64_t next_device_ = 0, next_host_ = 0;
  std::deque<fw::Arrival> arrivals_;
  std::map<uint64_t, Region> live_payloads_;
  uint64_t next_token_ = 0;
  std::map<uint64_t, fw::Window> windows_;
  std::vector<uint32_t> rts_rids_;
  uint32_t seqn_[64] = {};
  uint64_t now_ = 1'000'000;
  uint64_t steps_ = 0;
  bool stop_ = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  Harness h(in);
  h.run();
  return 0;
}
