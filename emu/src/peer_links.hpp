// SPDX-License-Identifier: Apache-2.0
//
// The outbound links of a connection-oriented transport, one per peer.
#pragma once

#include "net_address.hpp"
#include "timed_mutex.hpp"
#include "transport.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

namespace accl::emu::transport_detail {

// The outbound links of a connection-oriented transport (tcp, shm), one per
// peer address: a live link is reused, and connects to one peer are
// serialized (one connection per direction) without holding up connects to
// other peers. The owner's state mutex guards the table and the owner's
// stopped flag; connect() takes the mutex itself, close_all() runs under it.
template <typename LinkType>
class PeerLinks {
 public:
  PeerLinks(std::mutex& state_mutex, const bool& stopped) : state_mutex_(state_mutex), stopped_(stopped) {}

  // `dial(peer, deadline)` opens a new link or returns nullptr. nullptr here:
  // stopped, the peer busy being dialled past the deadline, or not reached.
  template <typename Dial>
  std::shared_ptr<LinkType> connect(const NetAddress& peer, Clock::time_point deadline, Dial&& dial) {
    std::shared_ptr<Slot> slot;
    {
      std::lock_guard lock(state_mutex_);
      if (stopped_) return nullptr;
      auto& entry = slots_[address_key(peer)];
      if (!entry) entry = std::make_shared<Slot>();
      slot = entry;
      if (slot->link && !slot->link->broken()) return slot->link;
    }
    std::unique_lock connecting(slot->connect_mutex, std::defer_lock);
    if (!connecting.try_lock_until(deadline)) return nullptr;
    {
      std::lock_guard lock(state_mutex_);
      if (slot->link && !slot->link->broken()) return slot->link;
    }
    std::shared_ptr<LinkType> link = dial(peer, deadline);
    if (!link) return nullptr;
    std::lock_guard lock(state_mutex_);
    if (stopped_) {
      link->close();
      return nullptr;
    }
    slot->link = link;
    return link;
  }

  // The caller holds the state mutex (stop()).
  void close_all() {
    for (auto& [key, slot] : slots_)
      if (slot->link) slot->link->close();
  }

 private:
  struct Slot {
    TimedMutex connect_mutex;
    std::shared_ptr<LinkType> link;  // guarded by state_mutex_
  };

  std::mutex& state_mutex_;
  const bool& stopped_;
  std::map<uint64_t, std::shared_ptr<Slot>> slots_;
};

// The start of a connection-oriented transport's stop(): false if it was
// stopped before (nothing left to do). Otherwise sets the owner's stopped
// flag under its state mutex, so that no connect() opens a link from now on,
// raises `stopping` and rings the eventfd `wake_fd` its thread waits on, so
// that the thread sees the flag and ends.
inline bool begin_stop(std::mutex& state_mutex, bool& stopped, std::atomic<bool>& stopping, int wake_fd) {
  {
    std::lock_guard lock(state_mutex);
    if (stopped) return false;
    stopped = true;
  }
  stopping.store(true, std::memory_order_release);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t ignored = ::write(wake_fd, &one, sizeof one);
  return true;
}

}  // namespace accl::emu::transport_detail
