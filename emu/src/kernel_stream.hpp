// SPDX-License-Identifier: Apache-2.0
//
// The user-kernel stream of an emulated CCLO, looped back: what the CCLO
// pushes towards the kernel (RES_STREAM moves, and stream_put messages from
// peers: header.strm = stream id + 9) becomes what the kernel pushes back
// (OP0_STREAM moves pull it). Public ACCL's emulator does the same with its
// kernel loopback (-b), which merges every TDEST into the one input stream;
// so pulls take bytes in arrival order whatever their stream id, and the id
// is kept for diagnostics.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace accl::emu {

class KernelStream {
 public:
  using Clock = std::chrono::steady_clock;
  // Bytes queued at most before push() applies back-pressure: enough for
  // several large stream moves in flight, far below what a peer that
  // stream_puts faster than the kernel pulls could otherwise pile up.
  static constexpr size_t kDefaultCapacityBytes = size_t{64} << 20;

  enum class PushStatus {
    ok,
    full,         // no room before the deadline: the data was dropped
    interrupted,  // device shutdown: the data was dropped
  };

  explicit KernelStream(size_t capacity_bytes = kDefaultCapacityBytes) : capacity_(capacity_bytes) {}

  // Queues `data` once there is room for it, waiting at most until
  // `deadline` (back-pressure: the hardware stream would stall its
  // producer). A chunk larger than the whole capacity waits for an empty
  // queue. An empty chunk is ok at once.
  PushStatus push(uint32_t stream_id, std::vector<std::byte> data, Clock::time_point deadline);
  // Pulls exactly `bytes` bytes, or nothing: waits until that many are queued,
  // `deadline` passes or interrupt() was called. False unless all were pulled.
  bool pull(std::byte* dst, size_t bytes, Clock::time_point deadline);
  size_t available() const;
  size_t capacity() const { return capacity_; }
  // Stream id of the oldest queued chunk (diagnostics, tests), or -1.
  int64_t front_stream_id() const;

  void clear();
  // Wakes every puller and pusher for good (device shutdown).
  void interrupt();

 private:
  struct Chunk {
    uint32_t stream_id;
    std::vector<std::byte> data;
    size_t consumed = 0;
  };
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;        // data queued (pullers wait on it)
  std::condition_variable space_cv_;  // data taken out (pushers wait on it)
  std::deque<Chunk> chunks_;
  size_t bytes_ = 0;
  bool interrupted_ = false;
};

}  // namespace accl::emu
