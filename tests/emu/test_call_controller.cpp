// SPDX-License-Identifier: Apache-2.0
// Call controller: FIFO hand-off, device-side chaining, waits with deadlines.
#include "emu_test_util.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <span>
#include <thread>

namespace accl::emu::test {
namespace {

CallWords call(uint32_t scenario, uint32_t count = 0) {
  CallWords w;
  w[abi::kWordScenario] = scenario;
  w[abi::kWordCount] = count;
  return w;
}

TEST(EmuCallController, FifoAndResult) {
  auto d = make_device();
  auto& dp = d->dataplane();
  CallId a = d->start(call(abi::kNop, 1), {});
  CallId b = d->start(call(abi::kCopy, 2), {});
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_FALSE(d->test(a));
  fw::Call c;
  ASSERT_TRUE(dp.pop_call(c));
  EXPECT_EQ(c.id, a);
  EXPECT_EQ(c.words[abi::kWordCount], 1u);
  ASSERT_TRUE(dp.pop_call(c));
  EXPECT_EQ(c.id, b);
  EXPECT_EQ(c.words[abi::kWordScenario], static_cast<uint32_t>(abi::kCopy));
  EXPECT_FALSE(dp.pop_call(c));
  EXPECT_THROW(d->result(a), std::logic_error);
  dp.finish_call(a, abi::kReceiveTimeoutError, 4000);
  EXPECT_TRUE(d->test(a));
  EXPECT_TRUE(d->wait(a, 0ns));
  EXPECT_EQ(d->result(a).retcode, static_cast<uint32_t>(abi::kReceiveTimeoutError));
  EXPECT_EQ(d->result(a).duration_ns, 4000u);
  EXPECT_EQ(d->read(abi::kRetcodeOffset), static_cast<uint32_t>(abi::kReceiveTimeoutError));
  EXPECT_EQ(d->read(abi::kPerfCounterOffset), 1000u);  // 4 ns cycles
  d->release(a);
  EXPECT_THROW(d->result(a), std::invalid_argument);
  EXPECT_TRUE(d->test(a));  // released ids count as complete
  EXPECT_THROW(d->wait(999, 0ns), std::invalid_argument);
  dp.finish_call(b, 0, 0);
  dp.finish_call(b, 0, 0);  // duplicate: logged, ignored
  EXPECT_EQ(d->result(b).retcode, 0u);
}

TEST(EmuCallController, ChainingHoldsDependentCalls) {
  auto d = make_device();
  auto& dp = d->dataplane();
  CallId a = d->start(call(abi::kNop), {});
  CallId b = d->start(call(abi::kNop), {});
  std::vector<CallId> deps{a, b};
  CallId c = d->start(call(abi::kCopy), deps);
  CallId e = d->start(call(abi::kNop), std::vector<CallId>{c});
  fw::Call got;
  ASSERT_TRUE(dp.pop_call(got));
  EXPECT_EQ(got.id, a);
  ASSERT_TRUE(dp.pop_call(got));
  EXPECT_EQ(got.id, b);
  EXPECT_FALSE(dp.pop_call(got));  // c waits for a and b
  dp.finish_call(a, 0, 0);
  EXPECT_FALSE(dp.pop_call(got));
  dp.finish_call(b, abi::kLinkError, 0);  // a failed dependency still releases c
  ASSERT_TRUE(dp.pop_call(got));
  EXPECT_EQ(got.id, c);
  EXPECT_FALSE(dp.pop_call(got));
  dp.finish_call(c, 0, 0);
  ASSERT_TRUE(dp.pop_call(got));
  EXPECT_EQ(got.id, e);
  dp.finish_call(e, 0, 0);
  // Dependencies that already completed or were released are satisfied.
  d->release(a);
  CallId f = d->start(call(abi::kNop), std::vector<CallId>{a, b, 12345});
  ASSERT_TRUE(dp.pop_call(got));
  EXPECT_EQ(got.id, f);
  dp.finish_call(f, 0, 0);
}

TEST(EmuCallController, WaitTimesOutAndWakes) {
  auto d = make_device();
  auto& dp = d->dataplane();
  CallId a = d->start(call(abi::kNop), {});
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(d->wait(a, 30ms));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
  std::thread fw([&] {
    fw::Call c;
    while (!dp.pop_call(c)) dp.idle(dp.now_ns() + 1'000'000);
    std::this_thread::sleep_for(20ms);
    dp.finish_call(c.id, 0, 100);
  });
  EXPECT_TRUE(d->wait(a, 5s));
  fw.join();
  EXPECT_EQ(d->result(a).duration_ns, 100u);
}

TEST(EmuCallController, IdleWakesOnNewCallAndRespectsDeadline) {
  auto d = make_device();
  auto& dp = d->dataplane();
  dp.idle(dp.now_ns());  // consume earlier events
  uint64_t t0 = dp.now_ns();
  dp.idle(t0 + 20'000'000);
  EXPECT_GE(dp.now_ns() - t0, 19'000'000u);
  std::thread starter([&] {
    std::this_thread::sleep_for(10ms);
    d->start(call(abi::kNop), {});
  });
  t0 = dp.now_ns();
  fw::Call c;
  while (!dp.pop_call(c)) dp.idle(t0 + 5'000'000'000ull);
  EXPECT_LT(dp.now_ns() - t0, 2'000'000'000u);
  starter.join();
  dp.finish_call(c.id, 0, 0);
}

TEST(EmuCallController, ManyWaitersManyCalls) {
  auto d = make_device();
  auto& dp = d->dataplane();
  constexpr int kCalls = 200;
  std::atomic<bool> stop{false};
  std::thread fw([&] {
    fw::Call c;
    while (!stop.load()) {
      if (dp.pop_call(c)) dp.finish_call(c.id, c.words[abi::kWordCount], 0);
      else dp.idle(dp.now_ns() + 1'000'000);
    }
  });
  std::vector<std::thread> hosts;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    hosts.emplace_back([&, t] {
      CallId prev = 0;
      for (int i = 0; i < kCalls; ++i) {
        std::vector<CallId> deps;
        if (prev != 0) deps.push_back(prev);
        CallId id = d->start(call(abi::kNop, static_cast<uint32_t>(t * 1000 + i)), deps);
        if (i % 3 == 0) {
          if (d->wait(id, 10s) && d->result(id).retcode == static_cast<uint32_t>(t * 1000 + i)) ok++;
          d->release(id);
          prev = 0;
        } else {
          if (prev != 0) d->release(prev);
          prev = id;
          ok++;
        }
      }
      if (prev != 0) {
        d->wait(prev, 10s);
        d->release(prev);
      }
    });
  }
  for (auto& h : hosts) h.join();
  stop = true;
  fw.join();
  EXPECT_EQ(ok.load(), 4 * kCalls);
}

TEST(EmuCallController, AbortEndsOpenCalls) {
  ExchangeMemory x;
  Wakeup doorbell(10us);
  CallController cc(x, doorbell, 10us);
  CallId a = cc.start(call(abi::kNop), {});
  CallId b = cc.start(call(abi::kNop), std::vector<CallId>{a});
  bool woke = false;
  std::thread waiter([&] { woke = cc.wait(b, 10s); });
  std::this_thread::sleep_for(10ms);
  cc.abort_all(abi::kNotReady);  // what ~EmuDevice does once the firmware is gone
  waiter.join();
  EXPECT_TRUE(woke);
  EXPECT_EQ(cc.result(a).retcode, static_cast<uint32_t>(abi::kNotReady));
  EXPECT_EQ(cc.result(b).retcode, static_cast<uint32_t>(abi::kNotReady));
  fw::Call c;
  EXPECT_FALSE(cc.pop(c));
}

// The data path allocates nothing per call once warmed up: entries are
// pooled, found through a ring indexed by id, the ready queue is intrusive.
// (Before: one make_shared entry, one hash node and deque blocks per call.)
TEST(EmuCallController, NoAllocationPerCallOnceWarm) {
  auto d = make_device();
  auto& dp = d->dataplane();
  auto cycle = [&] {
    CallId a = d->start(call(abi::kNop), {});
    CallId b = d->start(call(abi::kCopy), std::span<const CallId>(&a, 1));
    fw::Call c;
    ASSERT_TRUE(dp.pop_call(c));
    dp.finish_call(c.id, 0, 0);
    ASSERT_TRUE(dp.pop_call(c));  // b became ready when a finished
    EXPECT_FALSE(d->test(b));
    dp.finish_call(c.id, 0, 0);
    EXPECT_TRUE(d->wait(b, 0ns));
    EXPECT_EQ(d->result(b).retcode, 0u);
    d->release(a);
    d->release(b);
  };
  for (int i = 0; i < 1000; ++i) cycle();  // warm-up: pool, ring and vectors reach their size
  AllocationCounter allocations;
  for (int i = 0; i < 10000; ++i) cycle();
  EXPECT_EQ(allocations.count(), 0u);
}

// test() answers recent calls without the lock: the answer must match the
// locked one for calls whose slot in the recent table was taken by a later
// call (ids 64 apart), for released calls whose entry was reused, and ids
// never started must still be refused.
TEST(EmuCallController, TestAnswersRecentOlderAndReusedCalls) {
  auto d = make_device();
  auto& dp = d->dataplane();
  constexpr int kCalls = 300;
  std::vector<CallId> ids;
  for (int i = 0; i < kCalls; ++i) ids.push_back(d->start(call(abi::kNop, static_cast<uint32_t>(i)), {}));
  std::vector<bool> finished(kCalls, false);
  fw::Call c;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(dp.pop_call(c));
    if (i % 3 != 1) {  // leave every third call running
      dp.finish_call(c.id, 0, 0);
      finished[static_cast<size_t>(i)] = true;
    }
  }
  for (int i = 0; i < kCalls; ++i) EXPECT_EQ(d->test(ids[static_cast<size_t>(i)]), finished[static_cast<size_t>(i)]) << "call " << i;
  // Released calls hand their entries to new calls: the new calls are not
  // done, the released ones still count as done.
  for (int i = 0; i < kCalls; ++i)
    if (finished[static_cast<size_t>(i)]) d->release(ids[static_cast<size_t>(i)]);
  std::vector<CallId> later;
  for (int i = 0; i < 100; ++i) later.push_back(d->start(call(abi::kNop), {}));
  for (CallId id : later) EXPECT_FALSE(d->test(id));
  for (int i = 0; i < kCalls; ++i) EXPECT_EQ(d->test(ids[static_cast<size_t>(i)]), finished[static_cast<size_t>(i)]) << "call " << i;
  EXPECT_THROW(d->test(0), std::invalid_argument);
  EXPECT_THROW(d->test(later.back() + 1), std::invalid_argument);
  for (size_t i = 0; i < later.size(); ++i) {
    ASSERT_TRUE(dp.pop_call(c));
    dp.finish_call(c.id, 0, 0);
  }
  for (CallId id : later) EXPECT_TRUE(d->test(id));
}

// test_result() answers as test() followed by result(): for calls among the
// recent ones (lock-free) and for older ones (under the mutex) alike.
TEST(EmuCallController, TestResultAnswersAsTestThenResult) {
  auto d = make_device();
  auto& dp = d->dataplane();
  constexpr int kCalls = 200;  // beyond the controller's recent-call window
  std::vector<CallId> ids;
  for (int i = 0; i < kCalls; ++i) ids.push_back(d->start(call(abi::kNop, static_cast<uint32_t>(i)), {}));
  fw::Call c;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(dp.pop_call(c));
    if (i % 2 == 0) dp.finish_call(c.id, static_cast<uint32_t>(i) & abi::kReceiveTimeoutError, 4u * static_cast<uint64_t>(i));
  }
  for (int i = 0; i < kCalls; ++i) {
    const CallId id = ids[static_cast<size_t>(i)];
    CallResult out{.retcode = 77, .duration_ns = 77};
    const bool done = d->test_result(id, out);
    EXPECT_EQ(done, d->test(id)) << "call " << i;
    if (done) {
      EXPECT_EQ(out.retcode, d->result(id).retcode) << "call " << i;
      EXPECT_EQ(out.duration_ns, 4u * static_cast<uint64_t>(i)) << "call " << i;
    } else {
      EXPECT_EQ(out.retcode, 77u) << "call " << i;  // untouched while running
    }
  }
  // Released: complete for test(), unknown for result(); test_result throws as that pair would.
  CallResult out;
  d->release(ids[0]);
  EXPECT_TRUE(d->test(ids[0]));
  EXPECT_THROW(d->test_result(ids[0], out), std::invalid_argument);
  EXPECT_THROW(d->test_result(0, out), std::invalid_argument);
  EXPECT_THROW(d->test_result(ids.back() + 1, out), std::invalid_argument);
  for (int i = 1; i < kCalls; i += 2) dp.finish_call(ids[static_cast<size_t>(i)], 0, 0);
  for (int i = 1; i < kCalls; i += 2) EXPECT_TRUE(d->test_result(ids[static_cast<size_t>(i)], out)) << "call " << i;
}

// A call kept unreleased while many later calls come and go stays findable
// (the id ring stops growing and moves it aside) and completes normally.
TEST(EmuCallController, LongLivedCallAmongManyOthers) {
  auto d = make_device();
  auto& dp = d->dataplane();
  CallId pinned = d->start(call(abi::kRecv), {});
  fw::Call c;
  ASSERT_TRUE(dp.pop_call(c));
  ASSERT_EQ(c.id, pinned);
  CallId kept = 0;  // one more unreleased call in the middle of the run
  for (int i = 0; i < 200000; ++i) {
    CallId id = d->start(call(abi::kNop), {});
    ASSERT_TRUE(dp.pop_call(c));
    ASSERT_EQ(c.id, id);
    dp.finish_call(id, 0, 0);
    if (i == 100000) kept = id;
    else d->release(id);
  }
  EXPECT_FALSE(d->test(pinned));
  EXPECT_THROW(d->result(pinned), std::logic_error);
  CallId dependent = d->start(call(abi::kNop), std::vector<CallId>{pinned, kept});
  EXPECT_FALSE(dp.pop_call(c));  // waits for the pinned call
  dp.finish_call(pinned, abi::kReceiveTimeoutError, 0);
  EXPECT_TRUE(d->wait(pinned, 0ns));
  EXPECT_EQ(d->result(pinned).retcode, static_cast<uint32_t>(abi::kReceiveTimeoutError));
  EXPECT_EQ(d->result(kept).retcode, 0u);
  ASSERT_TRUE(dp.pop_call(c));
  EXPECT_EQ(c.id, dependent);
  d->release(pinned);
  d->release(kept);
  EXPECT_TRUE(d->test(pinned));
  EXPECT_THROW(d->result(kept), std::invalid_argument);
}

// Caller-driven progress: with the firmware running, a nop completes inside
// start() on the calling thread (the firmware thread is not woken for it),
// so test() right after start() sees it done. Before, every call was handed
// to the firmware thread and test() right after start() almost always saw
// it still running.
TEST(EmuCallController, CallerRunsTheFirmware) {
  auto d = make_device(TransportKind::inproc, settings(/*firmware=*/true));
  ASSERT_TRUE(d->firmware_running());
  int done_at_once = 0;
  const int calls = 1000;
  for (int i = 0; i < calls; ++i) {
    CallId id = d->start(call(abi::kNop), {});
    if (d->test(id)) ++done_at_once;
    ASSERT_TRUE(d->wait(id, 5s));
    EXPECT_EQ(d->result(id).retcode, 0u);
    d->release(id);
  }
  // Not all: the firmware thread may hold the firmware (e.g. its periodic
  // pass) at the moment of a start(); then it runs the call instead.
  EXPECT_GE(done_at_once, calls * 9 / 10);
}

// Several host threads waiting on one device share the firmware: every call
// completes, whoever runs it.
TEST(EmuCallController, ConcurrentDriversShareTheFirmware) {
  auto d = make_device(TransportKind::inproc, settings(/*firmware=*/true));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        CallId a = d->start(call(abi::kNop), {});
        CallId b = d->start(call(abi::kNop), std::span<const CallId>(&a, 1));
        if (!d->wait(b, 5s) || !d->wait(a, 5s) || d->result(a).retcode != 0 || d->result(b).retcode != 0)
          ++failures;
        d->release(a);
        d->release(b);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace accl::emu::test
