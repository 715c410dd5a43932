// SPDX-License-Identifier: Apache-2.0
#include "dataplane.hpp"

#include <accl/log.hpp>

#include <algorithm>

namespace accl::emu {

namespace {
log::Level host_level(int level) {
  switch (level) {
    case fw::kLogError: return log::Level::error;
    case fw::kLogWarn: return log::Level::warn;
    case fw::kLogInfo: return log::Level::info;
    case fw::kLogDebug: return log::Level::debug;
    default: return log::Level::trace;
  }
}
}  // namespace

EmuDataPlane::EmuDataPlane(ExchangeMemory& xmem, CallController& calls, ReceiveSink& sink, KernelStream& streams,
                           LinkTable& links, Mover& mover, Wakeup& doorbell)
    : xmem_(xmem), calls_(calls), sink_(sink), streams_(streams), links_(links), mover_(mover), doorbell_(doorbell) {}

uint32_t EmuDataPlane::xmem_read(uint32_t offset) {
  if (!ExchangeMemory::valid(offset)) {
    ACCL_LOG_ERROR("emulated CCLO: firmware read of exchange memory at invalid offset 0x{:x}", offset);
    return 0;
  }
  return xmem_.load(offset);
}

void EmuDataPlane::xmem_write(uint32_t offset, uint32_t value) {
  if (!ExchangeMemory::valid(offset)) {
    ACCL_LOG_ERROR("emulated CCLO: firmware write of exchange memory at invalid offset 0x{:x} ignored", offset);
    return;
  }
  xmem_.store(offset, value);
}

// Log lines of the firmware thread carry the CCLO's rank once the driver has
// configured it: the local rank of the first communicator, which the driver
// writes right after the RX buffer table.
void EmuDataPlane::update_thread_rank() {
  if (xmem_.load(abi::kConfigReadyOffset) == 0) return;
  uint32_t n = xmem_.load(abi::kRxBufferCountOffset);
  uint32_t comm = abi::kRxBufferTableOffset + n * abi::kRxBufferRecordBytes;
  if (n > (abi::kConfigAreaEnd - abi::kRxBufferTableOffset) / abi::kRxBufferRecordBytes ||
      !ExchangeMemory::valid_range(comm, abi::kCommRanksWord))
    return;
  uint32_t size = xmem_.load(comm + 4 * abi::kCommSizeWord);
  uint32_t rank = xmem_.load(comm + 4 * abi::kCommLocalRankWord);
  log_rank_.store(size > 0 && rank < size ? static_cast<int>(rank) : -1, std::memory_order_relaxed);
  rank_known_ = true;
}

bool EmuDataPlane::pop_call(fw::Call& out) {
  try {
    if (!calls_.pop(out)) return false;
    if (!rank_known_) update_thread_rank();
    return true;
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("emulated CCLO: pop_call failed: {}", e.what());
    return false;
  }
}

void EmuDataPlane::finish_call(uint64_t id, uint32_t retcode, uint64_t duration_ns) {
  try {
    calls_.finish(id, retcode, duration_ns);
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("emulated CCLO: finish_call failed: {}", e.what());
  }
}

uint32_t EmuDataPlane::move(const fw::Move& m) { return mover_.move(m); }

bool EmuDataPlane::pop_arrival(fw::Arrival& out) {
  try {
    return sink_.pop_arrival(out);
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("emulated CCLO: pop_arrival failed: {}", e.what());
    return false;
  }
}

bool EmuDataPlane::pop_arrival_for(uint32_t context_id, uint32_t src, fw::Arrival& out) {
  try {
    return sink_.pop_arrival_for(context_id, src, out);
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("emulated CCLO: pop_arrival_for failed: {}", e.what());
    return false;
  }
}

void EmuDataPlane::release_payload(const fw::Arrival& a) {
  try {
    sink_.release_payload(a);
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("emulated CCLO: release_payload failed: {}", e.what());
  }
}

uint32_t EmuDataPlane::open_window(const fw::Window& w) {
  try {
    if (w.reduce) {
      ArithFunction fn{};
      if (const uint32_t err = mover_.landing_function(w.arcfg, w.func, fn); err != 0) {
        ACCL_LOG_ERROR("emulated CCLO: rendezvous window that reduces on landing: function {} of the arithmetic "
                       "configuration at 0x{:x} is invalid or needs a conversion",
                       w.func, w.arcfg);
        return err;
      }
      return sink_.open_window(w, &fn);
    }
    return sink_.open_window(w);
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("emulated CCLO: open_window failed: {}", e.what());
    return abi::kDmaInternalError;
  }
}

void EmuDataPlane::close_window(const fw::Window& w) {
  try {
    sink_.close_window(w);
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("emulated CCLO: close_window failed: {}", e.what());
  }
}

void EmuDataPlane::reset_datapath() {
  try {
    sink_.reset();
    streams_.clear();
    links_.clear();
    rank_known_ = false;
    log_rank_.store(-1, std::memory_order_relaxed);
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("emulated CCLO: reset_datapath failed: {}", e.what());
  }
}

uint32_t EmuDataPlane::hw_id() { return kHwId; }
uint32_t EmuDataPlane::capabilities() { return kCapabilities; }

uint64_t EmuDataPlane::now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Wakeup::Clock::now().time_since_epoch()).count());
}

void EmuDataPlane::idle(uint64_t deadline_ns) {
  try {
    // Block at most 100 ms per call: a safety net against any lost wakeup,
    // invisible in cost (the firmware simply looks again).
    uint64_t now = now_ns();
    uint64_t limit = now + 100'000'000;
    uint64_t until = std::min(deadline_ns, limit);
    if (until <= now) {
      seen_epoch_ = doorbell_.epoch();
      return;
    }
    auto deadline = Wakeup::Clock::time_point(std::chrono::nanoseconds(until));
    seen_epoch_ = doorbell_.wait(seen_epoch_, deadline);
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("emulated CCLO: idle failed: {}", e.what());
  }
}

bool EmuDataPlane::stop_requested() { return doorbell_.stopped(); }

bool EmuDataPlane::log_enabled(int level) { return log::enabled(host_level(level)); }

void EmuDataPlane::log(int level, const char* message) {
  try {
    ACCL_LOG_AT(host_level(level), "{}", message != nullptr ? message : "");
  } catch (...) {
    // Logging must never take the firmware down.
  }
}

}  // namespace accl::emu
