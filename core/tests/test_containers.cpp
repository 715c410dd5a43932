// SPDX-License-Identifier: Apache-2.0
//
// The allocation-free building blocks of the data path: RingQueue (public,
// also used by the emulator and the PMPI layer) and the driver's recycling
// request allocator.
#include "../src/recycling_allocator.hpp"

#include <accl/ring_queue.hpp>

#include <gtest/gtest.h>

#include <memory>
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
