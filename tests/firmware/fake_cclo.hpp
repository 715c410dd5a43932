// SPDX-License-Identifier: Apache-2.0
//
// A small in-memory data plane for firmware unit tests. Each FakeCclo runs a
// real ControlProgram on its own thread; FakeFabric wires several of them
// together (rank i of every test communicator is fabric member i). Moves are
// executed synchronously: network results are delivered straight into the
// peer's arrival queue (eager) or its open window (rendezvous data; a window
// that reduces on landing receives operand (+) payload).
//
// Arithmetic: sum/max/min/prod on int32/int64/float32/float64 by arith
// function id. No compression (that is covered on the emulator).
#pragma once

#include <accl/abi.hpp>
#include <accl_fw/control_program.hpp>
#include <accl_fw/dataplane.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace accl::fw::test {

class FakeFabric;

using CallWords = std::array<uint32_t, abi::kCallWords>;

// Exchange-memory layout used by configure().
inline constexpr uint32_t kCommOffset = 0x200;
inline constexpr uint32_t kContextId = 7;
inline constexpr uint32_t kArithI32 = 0x600;
inline constexpr uint32_t kArithF32 = 0x640;
inline constexpr uint64_t kSpareBase = 0x300000;
inline constexpr uint64_t kSpareStride = 0x100000;
inline constexpr uint64_t kPayloadBase = 1ull << 40; // eager payloads live in a separate store

struct FabricOptions {
  uint32_t rx_count = 16;
  uint32_t rx_size = 1024;
  uint32_t max_eager = 1024;
  uint32_t max_rendezvous = 32 * 1024;
  uint32_t timeout_us = 5'000'000;
  uint32_t max_segment = 0;  // per-rank max segment word; 0 = RX buffer size
  uint64_t memory_bytes = 8u << 20;  // device memory per fake CCLO
};

class FakeCclo final : public DataPlane {
 public:
  FakeCclo(FakeFabric& fabric, uint32_t index);
  ~FakeCclo();
  FakeCclo(const FakeCclo&) = delete;
  FakeCclo& operator=(const FakeCclo&) = delete;

  void start();
  void stop();

  // --- host side ---
  uint64_t submit(const CallWords& words);
  // Waits for the call's RETCODE; nullopt on timeout.
  std::optional<uint32_t> wait(uint64_t id, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  uint32_t call(const CallWords& words);  // submit + wait (returns 0xDEADBEEF on timeout)
  void inject(const Arrival& arrival);    // as if the data plane had received it
  // One pass of the control program, for tests that drive it by hand: only
  // after stop() (or before start()), never beside the program's thread.
  ControlProgram::PollResult poll_once() { return program_->poll(); }

  uint32_t xmem(uint32_t offset) const { return xmem_[offset / 4].load(); }
  void set_xmem(uint32_t offset, uint32_t value) { xmem_[offset / 4].store(value); }
  template <typename T>
  void write(uint64_t addr, const std::vector<T>& values) {
    std::memcpy(memory_.data() + addr, values.data(), values.size() * sizeof(T));
  }
  template <typename T>
  std::vector<T> read(uint64_t addr, size_t n) const {
    std::vector<T> out(n);
    std::memcpy(out.data(), memory_.data() + addr, n * sizeof(T));
    return out;
  }
  uint32_t ip() const { return 0x0A000001u + index_; }
  uint32_t port() const { return 5000 + index_; }
  uint32_t index() const { return index_; }
  size_t windows_open();
  size_t payloads_held();
  size_t windows_opened_total() const { return windows_opened_.load(); }
  size_t reducing_windows_opened_total() const { return reducing_windows_opened_.load(); }
  std::vector<uint8_t> stream_contents();
  // Every message this CCLO sent: destination rank, type and the move's
  // shared_payload key and deadline.
  struct Sent {
    uint32_t dst_rank;
    uint8_t msg_type;
    uint64_t shared_payload;
    uint64_t deadline_ns;
  };
  std::vector<Sent> sent();

  // Receive side of the fake network.
  void deliver(const abi::WireHeader& header, std::vector<uint8_t> payload, uint32_t from_ip, uint32_t from_port);

  // --- DataPlane ---
  uint32_t xmem_read(uint32_t offset) override { return xmem_[offset / 4].load(); }
  void xmem_write(uint32_t offset, uint32_t value) override { xmem_[offset / 4].store(value); }
  bool pop_call(Call& out) override;
  void finish_call(uint64_t id, uint32_t retcode, uint64_t duration_ns) override;
  uint32_t move(const Move& m) override;
  bool pop_arrival(Arrival& out) override;
  bool pop_arrival_for(uint32_t context_id, uint32_t src, Arrival& out) override;
  void release_payload(const Arrival& a) override;
  uint32_t open_window(const Window& w) override;
  void close_window(const Window& w) override;
  void reset_datapath() override;
  uint32_t hw_id() override { return 0x00ABCD2F; }
  uint32_t capabilities() override { return 0x8000007F; }
  uint64_t now_ns() override;
  void idle(uint64_t deadline_ns) override;
  bool stop_requested() override { return stop_.load(); }
  bool log_enabled(int level) override;
  void log(int level, const char* message) override;

 private:
  bool read_operand(const Operand& op, uint32_t count, uint32_t elem_bytes, std::vector<uint8_t>& out);
  uint8_t* memory_at(uint64_t addr, bool host, uint64_t bytes);

  FakeFabric& fabric_;
  uint32_t index_;
  std::vector<std::atomic<uint32_t>> xmem_;
  std::vector<uint8_t> memory_;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Call> calls_;
  std::map<uint64_t, uint32_t> results_;
  std::deque<Arrival> arrivals_;
  std::map<uint64_t, std::vector<uint8_t>> payloads_;  // token -> eager payload
  uint64_t next_token_ = 1;
  std::vector<Window> windows_;
  std::atomic<size_t> windows_opened_{0};
  std::atomic<size_t> reducing_windows_opened_{0};
  std::deque<uint8_t> stream_;
  std::vector<Sent> sent_;
  uint64_t next_call_id_ = 1;

  std::atomic<bool> stop_{false};
  std::unique_ptr<unsigned char[]> state_storage_;
  void* state_ = nullptr;
  std::unique_ptr<ControlProgram> program_;
  std::thread thread_;
};

class FakeFabric {
 public:
  explicit FakeFabric(uint32_t size, FabricOptions options = {});
  ~FakeFabric();
  FakeCclo& operator[](uint32_t i) { return *members_[i]; }
  uint32_t size() const { return static_cast<uint32_t>(members_.size()); }
  FakeCclo* find(uint32_t ip, uint32_t port);
  const FabricOptions& options() const { return options_; }
  // Writes RX buffers, the communicator, arith configs and spares, runs the
  // config calls and sets CFGRDY on every member.
  void configure();

 private:
  FabricOptions options_;
  std::vector<std::unique_ptr<FakeCclo>> members_;
};

// Call word builder.
struct CallBuilder {
  CallWords w{};
  explicit CallBuilder(uint32_t scenario) {
    w[abi::kWordScenario] = scenario;
    w[abi::kWordComm] = kCommOffset;
    w[abi::kWordArithConfig] = kArithI32;
    w[abi::kWordTag] = abi::kTagAny;
  }
  CallBuilder& count(uint32_t v) { w[abi::kWordCount] = v; return *this; }
  CallBuilder& comm(uint32_t v) { w[abi::kWordComm] = v; return *this; }
  CallBuilder& rank(uint32_t v) { w[abi::kWordRootSrcDst] = v; return *this; }
  CallBuilder& function(uint32_t v) { w[abi::kWordFunction] = v; return *this; }
  CallBuilder& tag(uint32_t v) { w[abi::kWordTag] = v; return *this; }
  CallBuilder& arith(uint32_t v) { w[abi::kWordArithConfig] = v; return *this; }
  CallBuilder& streams(uint32_t v) { w[abi::kWordStreamFlags] = v; return *this; }
  CallBuilder& addr(int i, uint64_t a) {
    w[abi::kWordAddr0Low + 2 * i] = static_cast<uint32_t>(a);
    w[abi::kWordAddr0Low + 2 * i + 1] = static_cast<uint32_t>(a >> 32);
    return *this;
  }
  operator const CallWords&() const { return w; }
};

}  // namespace accl::fw::test
