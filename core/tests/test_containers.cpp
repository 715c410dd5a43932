// SPDX-License-Identifier: Apache-2.0
//
// The allocation-free building blocks of the data path: RingQueue (public,
// also used by the emulator and the PMPI layer), SeqlockMemo (the PMPI
// layer's remembered decisions) and the driver's recycling request allocator.
#include "../src/recycling_allocator.hpp"

#include <accl/ring_queue.hpp>
#include <accl/seqlock_memo.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace {

TEST(RingQueue, KeepsFifoOrderAcrossWrapAroundAndGrowth) {
  accl::RingQueue<int> q;
  EXPECT_TRUE(q.empty());
  int next_in = 0, next_out = 0;
  // Interleave pushes and pops so the head wraps many times, and let the
  // queue grow several times while wrapped.
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 3 + round % 40; ++i) q.push_back(next_in++);
    for (int i = 0; i < 2 + round % 37 && !q.empty(); ++i) {
      ASSERT_EQ(q.front(), next_out) << "round " << round;
      q.pop_front();
      ++next_out;
    }
    ASSERT_EQ(q.size(), static_cast<size_t>(next_in - next_out));
  }
  while (!q.empty()) {
    ASSERT_EQ(q.front(), next_out++);
    q.pop_front();
  }
  EXPECT_EQ(next_out, next_in);
}

TEST(RingQueue, RemoveIfKeepsTheOthersInOrder) {
  accl::RingQueue<int> q;
  for (int i = 0; i < 10; ++i) q.push_back(i);
  for (int i = 0; i < 6; ++i) q.pop_front();  // head is now in the middle
  for (int i = 10; i < 30; ++i) q.push_back(i);  // wraps and grows
  EXPECT_EQ(q.remove_if([](int v) { return v % 3 == 0; }), 8u);  // 6 9 12 .. 27
  std::vector<int> rest;
  q.for_each([&](int v) { rest.push_back(v); });
  std::vector<int> expected;
  for (int i = 6; i < 30; ++i)
    if (i % 3 != 0) expected.push_back(i);
  EXPECT_EQ(rest, expected);
  q.clear();
  EXPECT_TRUE(q.empty());
  q.push_back(42);
  EXPECT_EQ(q.front(), 42);
}

TEST(RingQueue, PoppedAndRemovedElementsReleaseWhatTheyHold) {
  auto held = std::make_shared<int>(1);
  accl::RingQueue<std::shared_ptr<int>> q;
  q.push_back(held);
  q.push_back(held);
  q.push_back(held);
  EXPECT_EQ(held.use_count(), 4);
  q.pop_front();
  EXPECT_EQ(held.use_count(), 3);
  q.remove_if([](const std::shared_ptr<int>&) { return true; });
  EXPECT_EQ(held.use_count(), 1);
}

struct Payload {
  explicit Payload(int v) : value(v) {}
  int value;
  char pad[200];
};

using Memo = accl::SeqlockMemo<3>;

TEST(SeqlockMemo, FindsWhatWasRememberedUnderItsEpochOnly) {
  Memo memo;
  const Memo::Key a{1, 2, 3}, b{1, 2, 4};
  EXPECT_EQ(memo.find(a, 1), 0u);
  memo.remember(a, 1, 42);
  EXPECT_EQ(memo.find(a, 1), 42u);
  EXPECT_EQ(memo.find(b, 1), 0u) << "one word differs";
  EXPECT_EQ(memo.find(a, 2), 0u) << "a later epoch forgets";
  EXPECT_EQ(memo.find(Memo::Key{}, 0), 0u) << "an unwritten way matches no key";
}

TEST(SeqlockMemo, HoldsTwoKeysAndReplacesTheOldest) {
  Memo memo;
  const Memo::Key a{1, 0, 0}, b{2, 0, 0}, c{3, 0, 0};
  memo.remember(a, 1, 10);
  memo.remember(b, 1, 20);
  EXPECT_EQ(memo.find(a, 1), 10u);
  EXPECT_EQ(memo.find(b, 1), 20u);
  memo.remember(c, 1, 30);
  EXPECT_EQ(memo.find(a, 1), 0u);
  EXPECT_EQ(memo.find(b, 1), 20u);
  EXPECT_EQ(memo.find(c, 1), 30u);
}

// Writers keep replacing the ways with keys {k, k, k} and value k + 1 while
// readers look keys up: a hit must never pair a key with another key's value
// or be assembled from two writes (the seqlock's promise).
TEST(SeqlockMemo, ConcurrentReadersNeverSeeATornEntry) {
  Memo memo;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> hits{0}, torn{0};
  std::vector<std::thread> threads;
  for (uint64_t w = 0; w < 2; ++w)
    threads.emplace_back([&, w] {
      for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        const uint64_t k = (i * 2 + w) % 7;
        memo.remember(Memo::Key{k, k, k}, 1, k + 1);
      }
    });
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&] {
      for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        const uint64_t k = i % 7;
        const uint64_t v = memo.find(Memo::Key{k, k, k}, 1);
        if (v == 0) continue;
        hits.fetch_add(1, std::memory_order_relaxed);
        if (v != k + 1) torn.fetch_add(1, std::memory_order_relaxed);
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_GT(hits.load(), 0u);
  EXPECT_EQ(torn.load(), 0u);
}

TEST(RecyclingAllocator, AFreedRequestBlockIsReusedForTheNext) {
  using Alloc = accl::detail::RecyclingAllocator<Payload>;
  const void* first = nullptr;
  {
    auto p = std::allocate_shared<Payload>(Alloc(), 1);
    first = p.get();
  }
  auto q = std::allocate_shared<Payload>(Alloc(), 2);
  EXPECT_EQ(static_cast<const void*>(q.get()), first) << "the block of the freed object was not recycled";
  EXPECT_EQ(q->value, 2);
  // Several alive at once get distinct blocks.
  auto r = std::allocate_shared<Payload>(Alloc(), 3);
  EXPECT_NE(r.get(), q.get());
  EXPECT_EQ(q->value, 2);
  EXPECT_EQ(r->value, 3);
}

}  // namespace
