// SPDX-License-Identifier: Apache-2.0
//
// RingQueue: a FIFO in one growing circular array, for queues on the data
// path (the emulator's arrivals, the PMPI layer's queued device operations).
// std::deque allocates and frees a block every few elements as the queue
// moves; this grows to the largest size it ever holds and then allocates
// nothing. Not thread-safe (its users hold their own lock).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace accl {

template <typename T>
class RingQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  void push_back(T value) {
    if (size_ == slots_.size()) grow();
    slots_[index(size_)] = std::move(value);
    ++size_;
  }
  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }
  void pop_front() {
    slots_[head_] = T{};  // drop what the element holds now, not when its slot is reused
    head_ = (head_ + 1) & mask();
    --size_;
  }
  void clear() {
    while (!empty()) pop_front();
    head_ = 0;
  }

  template <typename F>
  void for_each(F&& f) const {
    for (size_t i = 0; i < size_; ++i) f(slots_[index(i)]);
  }
  // Moves the first element `pick` selects into `out` and removes it, keeping
  // the others in order. False (and `out` untouched) when none is selected.
  template <typename Pred>
  bool take_first_if(Pred&& pick, T& out) {
    size_t i = 0;
    while (i < size_ && !pick(std::as_const(slots_[index(i)]))) ++i;
    if (i == size_) return false;
    out = std::move(slots_[index(i)]);
    for (; i + 1 < size_; ++i) slots_[index(i)] = std::move(slots_[index(i + 1)]);
    slots_[index(size_ - 1)] = T{};
    --size_;
    return true;
  }
  // Removes the elements `drop` selects, keeping the others in order.
  // Returns how many were removed.
  template <typename Pred>
  size_t remove_if(Pred&& drop) {
    size_t kept = 0;
    for (size_t i = 0; i < size_; ++i) {
      T& v = slots_[index(i)];
      if (drop(v)) continue;
      if (kept != i) slots_[index(kept)] = std::move(v);
      ++kept;
    }
    const size_t removed = size_ - kept;
    for (size_t i = kept; i < size_; ++i) slots_[index(i)] = T{};
    size_ = kept;
    return removed;
  }

 private:
  size_t mask() const { return slots_.size() - 1; }
  size_t index(size_t i) const { return (head_ + i) & mask(); }
  void grow() {
    std::vector<T> grown(slots_.empty() ? 16 : 2 * slots_.size());  // always a power of two
    for (size_t i = 0; i < size_; ++i) grown[i] = std::move(slots_[index(i)]);
    slots_.swap(grown);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace accl
