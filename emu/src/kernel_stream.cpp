// SPDX-License-Identifier: Apache-2.0
#include "kernel_stream.hpp"

#include <cstring>

namespace accl::emu {

KernelStream::PushStatus KernelStream::push(uint32_t stream_id, std::vector<std::byte> data,
                                           Clock::time_point deadline) {
  if (data.empty()) return PushStatus::ok;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto room = [&] {
      return interrupted_ || bytes_ == 0 || (bytes_ <= capacity_ && data.size() <= capacity_ - bytes_);
    };
    if (!space_cv_.wait_until(lock, deadline, room)) return PushStatus::full;
    if (interrupted_) return PushStatus::interrupted;
    bytes_ += data.size();
    chunks_.push_back(Chunk{stream_id, std::move(data)});
  }
  cv_.notify_all();
  return PushStatus::ok;
}

bool KernelStream::pull(std::byte* dst, size_t bytes, Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_until(lock, deadline, [&] { return bytes_ >= bytes || interrupted_; })) return false;
  if (bytes_ < bytes) return false;  // interrupted
  size_t done = 0;
  while (done < bytes) {
    Chunk& c = chunks_.front();
    size_t n = std::min(bytes - done, c.data.size() - c.consumed);
    std::memcpy(dst + done, c.data.data() + c.consumed, n);
    c.consumed += n;
    done += n;
    if (c.consumed == c.data.size()) chunks_.pop_front();
  }
  bytes_ -= bytes;
  lock.unlock();
  space_cv_.notify_all();
  return true;
}

size_t KernelStream::available() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

int64_t KernelStream::front_stream_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return chunks_.empty() ? -1 : static_cast<int64_t>(chunks_.front().stream_id);
}

void KernelStream::clear() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    chunks_.clear();
    bytes_ = 0;
  }
  space_cv_.notify_all();
}

void KernelStream::interrupt() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    interrupted_ = true;
  }
  cv_.notify_all();
  space_cv_.notify_all();
}

}  // namespace accl::emu
