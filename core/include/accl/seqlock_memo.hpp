// SPDX-License-Identifier: Apache-2.0
//
// SeqlockMemo: a tiny cache from a key of machine words to one non-zero
// word, read on a per-call path by any number of threads without a lock (the
// PMPI layer's remembered decisions: MPI_THREAD_MULTIPLE programs call the
// same MPI function concurrently). Each way is a seqlock:
// a writer makes its sequence odd, stores, makes it even again; a reader
// trusts what it compared only if the sequence was even and unchanged around
// its loads, so it never matches a key half-written by another thread. The
// words are atomics: the writer stores them with release order and readers
// load them with acquire order, which is what keeps a reader's second look at
// the sequence after its loads of the words, without a fence (ThreadSanitizer
// does not model fences). On x86-64 both are plain moves.
//
// An `epoch` is part of every key: the owner bumps it when anything the
// remembered values depend on may have changed, which forgets them all.
//
// Tests: core/tests/test_containers.cpp (also under ThreadSanitizer).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace accl {

template <size_t Words, size_t Ways = 2>
class SeqlockMemo {
 public:
  using Key = std::array<uint64_t, Words>;

  // The value remembered for `key` under `epoch`; 0 when there is none.
  uint64_t find(const Key& key, uint64_t epoch) const noexcept {
    for (const Way& way : ways_) {
      const uint32_t before = way.seq.load(std::memory_order_acquire);
      if (before & 1u) continue;  // a writer is inside
      const uint64_t epoch_differs = way.epoch.load(std::memory_order_acquire) ^ epoch;
      if ((differing(way, key, std::make_index_sequence<Words>{}) | epoch_differs) != 0) continue;
      const uint64_t value = way.value.load(std::memory_order_acquire);
      // A word read from a writer's store synchronises with it, so this load
      // sees that writer's odd sequence or later: the entry is then rejected.
      if (way.seq.load(std::memory_order_relaxed) == before) return value;
    }
    return 0;
  }

  // Remembers `value` (non-zero) for `key` in the next way round robin. A way
  // another thread is writing is left alone: this call is then not remembered.
  void remember(const Key& key, uint64_t epoch, uint64_t value) noexcept {
    Way& way = ways_[next_.fetch_add(1, std::memory_order_relaxed) % Ways];
    uint32_t seq = way.seq.load(std::memory_order_relaxed);
    if ((seq & 1u) != 0 || !way.seq.compare_exchange_strong(seq, seq + 1, std::memory_order_relaxed)) return;
    // Release stores: a reader that sees any of them also sees the odd
    // sequence made above (their acquire loads pair with these).
    way.epoch.store(epoch, std::memory_order_release);
    for (size_t i = 0; i < Words; ++i) way.key[i].store(key[i], std::memory_order_release);
    way.value.store(value, std::memory_order_release);
    way.seq.store(seq + 2, std::memory_order_release);
  }

 private:
  struct Way {
    std::atomic<uint32_t> seq{0};
    std::atomic<uint64_t> epoch{0};  // 0: never written (owners start their epoch at 1)
    std::array<std::atomic<uint64_t>, Words> key{};
    std::atomic<uint64_t> value{0};
  };

  // Non-zero unless every word of `key` is the way's: unrolled, no branch per
  // word (a hit, the common case, reads them all anyway).
  template <size_t... I>
  static uint64_t differing(const Way& way, const Key& key, std::index_sequence<I...>) noexcept {
    return ((way.key[I].load(std::memory_order_acquire) ^ key[I]) | ...);
  }
  std::array<Way, Ways> ways_{};
  std::atomic<uint32_t> next_{0};
};

}  // namespace accl
