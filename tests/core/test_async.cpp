// SPDX-License-Identifier: Apache-2.0
//
// core-async: run_async really returns before the call completes (public
// ACCL blocked on an idle queue), wait / wait(timeout) / test, host work
// overlapping device work, and device-side chaining with waitfor.
#include "common/cases.hpp"
#include "common/types.hpp"
#include "common/world.hpp"

#include <accl/accl.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace acclt {
namespace {

using accl::ACCL;
using accl::GLOBAL_COMM;
using accl::RequestPtr;
using namespace std::chrono_literals;

// A host-side one-shot flag between rank threads.
class Signal {
 public:
  void set() {
    std::lock_guard<std::mutex> lk(m_);
    set_ = true;
    cv_.notify_all();
  }
  bool wait_for(std::chrono::milliseconds t) {
    std::unique_lock<std::mutex> lk(m_);
    return cv_.wait_for(lk, t, [&] { return set_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool set_ = false;
};

constexpr auto kPeerWait = 10s;  // how long the "late" ranks wait for the async issuer

TEST(Async, RecvReturnsBeforeSenderStarts) {
  World& w = World::get(2);
  Signal issued, sent;
  w.run([&](unsigned r, ACCL& a) {
    const size_t n = 1000;  // rendezvous size with the default configuration
    auto buf = a.create_buffer<float>(n);
    if (r == 0) {
      for (size_t i = 0; i < n; ++i) (*buf)[i] = -1;
      buf->sync_to_device();
      RequestPtr req = a.recv(*buf, n, 1, 9, GLOBAL_COMM, false, dataType::none, /*run_async=*/true);
      ASSERT_TRUE(req);
      issued.set();
      EXPECT_FALSE(req->test()) << "recv completed although nobody sent";
      EXPECT_FALSE(req->wait(100ms)) << "wait(100ms) must time out while the peer has not sent";
      EXPECT_FALSE(sent.wait_for(0ms));
      ASSERT_TRUE(sent.wait_for(kPeerWait));
      req->wait();
      EXPECT_TRUE(req->test());
      EXPECT_TRUE(req->wait(0ms));
      EXPECT_EQ(req->retcode(), 0u);
      EXPECT_EQ(req->call_name(), "recv");
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*buf)[i], 3.0f * i) << i;
    } else {
      ASSERT_TRUE(issued.wait_for(kPeerWait)) << "rank 0's run_async recv did not return";
      std::this_thread::sleep_for(150ms);
      for (size_t i = 0; i < n; ++i) (*buf)[i] = 3.0f * i;
      a.send(*buf, n, 0, 9);
      sent.set();
    }
  });
}

// For every collective: rank 0 issues it with run_async, and only once that
// call has returned do the other ranks start theirs. A run_async that blocks
// until completion deadlocks here (caught by the peers' bounded wait).
class AsyncEveryCall : public ::testing::TestWithParam<std::tuple<Call, unsigned>> {};

TEST_P(AsyncEveryCall, ReturnsBeforeCompletion) {
  const auto [call, P] = GetParam();
  World& w = World::get(P);
  Signal issued;
  const size_t n = 300;  // > one RX buffer of float32: rendezvous
  w.run([&, call = call, P = P](unsigned r, ACCL& a) {
    auto src = a.create_buffer<int32_t>(n * P);
    auto dst = a.create_buffer<int32_t>(n * P);
    for (size_t i = 0; i < n * P; ++i) {
      (*src)[i] = static_cast<int32_t>(r * 100000 + i);
      (*dst)[i] = -1;
    }
    dst->sync_to_device();
    if (r != 0) {
      ASSERT_TRUE(issued.wait_for(kPeerWait)) << call_name(call) << ": run_async on rank 0 blocked";
    }
    const bool async = (r == 0);
    const unsigned root = P - 1;  // rank 0 is never the root: it must wait for others
    RequestPtr req;
    switch (call) {
      case Call::sendrecv:
        if (r == 0) req = a.recv(*dst, n, 1, 1, GLOBAL_COMM, false, dataType::none, true);
        else if (r == 1) a.send(*src, n, 0, 1);
        break;
      case Call::bcast: req = a.bcast(r == root ? *src : *dst, n, root, GLOBAL_COMM, false, false, dataType::none, async); break;
      case Call::scatter: req = a.scatter(*src, *dst, n, root, GLOBAL_COMM, false, false, dataType::none, async); break;
      case Call::gather: req = a.gather(*src, *dst, n, 0, GLOBAL_COMM, false, false, dataType::none, async); break;
      case Call::allgather: req = a.allgather(*src, *dst, n, GLOBAL_COMM, false, false, dataType::none, async); break;
      case Call::reduce:
        req = a.reduce(*src, *dst, n, 0, reduceFunction::SUM, GLOBAL_COMM, false, false, dataType::none, async);
        break;
      case Call::allreduce:
        req = a.allreduce(*src, *dst, n, reduceFunction::SUM, GLOBAL_COMM, false, false, dataType::none, async);
        break;
      case Call::reduce_scatter:
        req = a.reduce_scatter(*src, *dst, n, reduceFunction::SUM, GLOBAL_COMM, false, false, dataType::none, async);
        break;
      case Call::alltoall: req = a.alltoall(*src, *dst, n, GLOBAL_COMM, false, false, dataType::none, async); break;
      case Call::barrier: req = a.barrier(GLOBAL_COMM, async); break;
      default: FAIL();
    }
    if (r == 0) {
      ASSERT_TRUE(req);
      issued.set();
      // Host work while the call is in flight.
      volatile double acc = 0;
      for (int i = 0; i < 200000; ++i) acc = acc + i * 0.5;
      req->wait();
      EXPECT_EQ(req->retcode(), 0u);
      EXPECT_EQ(req->call_name(), call == Call::sendrecv ? std::string("recv") : call_name(call));
      // Result spot checks on rank 0.
      auto sum_over_ranks = [&](size_t idx) {
        int64_t s = 0;
        for (unsigned q = 0; q < P; ++q) s += q * 100000 + idx;
        return static_cast<int32_t>(s);
      };
      for (size_t i = 0; i < n; ++i) {
        switch (call) {
          case Call::sendrecv: ASSERT_EQ((*dst)[i], static_cast<int32_t>(100000 + i)); break;
          case Call::bcast: ASSERT_EQ((*dst)[i], static_cast<int32_t>(root * 100000 + i)); break;
          case Call::scatter: ASSERT_EQ((*dst)[i], static_cast<int32_t>(root * 100000 + i)); break;
          case Call::gather:
          case Call::allgather:
            for (unsigned q = 0; q < P; ++q) ASSERT_EQ((*dst)[q * n + i], static_cast<int32_t>(q * 100000 + i));
            break;
          case Call::reduce:
          case Call::allreduce:
          case Call::reduce_scatter: ASSERT_EQ((*dst)[i], sum_over_ranks(i)); break;
          case Call::alltoall:
            for (unsigned q = 0; q < P; ++q) ASSERT_EQ((*dst)[q * n + i], static_cast<int32_t>(q * 100000 + i));
            break;
          default: break;
        }
      }
    } else if (req) {
      EXPECT_TRUE(req->test()) << "a synchronous call returns a completed request";
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Calls, AsyncEveryCall,
    ::testing::Combine(::testing::Values(Call::sendrecv, Call::bcast, Call::scatter, Call::gather, Call::allgather,
                                         Call::reduce, Call::allreduce, Call::reduce_scatter, Call::alltoall,
                                         Call::barrier),
                       ::testing::Values(2u, 3u)),
    [](const ::testing::TestParamInfo<std::tuple<Call, unsigned>>& pi) {
      return call_name(std::get<0>(pi.param)) + "_P" + std::to_string(std::get<1>(pi.param));
    });

TEST(Async, TestPollsWhileHostWorks) {
  World& w = World::get(3);
  w.run([&](unsigned r, ACCL& a) {
    const size_t n = (1u << 20) / 4;
    auto src = a.create_buffer<float>(n), dst = a.create_buffer<float>(n);
    for (size_t i = 0; i < n; ++i) (*src)[i] = static_cast<float>((i + r) % 100);
    auto req = a.allreduce(*src, *dst, n, reduceFunction::SUM, GLOBAL_COMM, false, false, dataType::none, true);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    uint64_t host_work = 0;
    while (!req->test()) {
      for (int i = 0; i < 1000; ++i) host_work += static_cast<uint64_t>(i) ^ host_work;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "rank " << r << ": test() never became true";
    }
    (void)host_work;
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ((*dst)[i], static_cast<float>((i % 100) + ((i + 1) % 100) + ((i + 2) % 100))) << i;
  });
}

TEST(Async, ManyOutstandingRequestsWaitedInReverse) {
  World& w = World::get(2);
  w.run([&](unsigned r, ACCL& a) {
    std::vector<RequestPtr> reqs;
    std::vector<std::unique_ptr<accl::Buffer<int32_t>>> bufs;
    const unsigned peer = 1 - r;
    for (int i = 0; i < 24; ++i) {
      bufs.push_back(a.create_buffer<int32_t>(17));
      if (r == 0) {
        for (int k = 0; k < 17; ++k) (*bufs.back())[k] = i * 100 + k;
        reqs.push_back(a.send(*bufs.back(), 17, peer, i, GLOBAL_COMM, false, dataType::none, true));
      } else {
        reqs.push_back(a.recv(*bufs.back(), 17, peer, i, GLOBAL_COMM, false, dataType::none, true));
      }
      reqs.push_back(a.nop(true));
    }
    for (auto it = reqs.rbegin(); it != reqs.rend(); ++it) (*it)->wait();
    for (auto& q : reqs) EXPECT_EQ(q->retcode(), 0u);
    if (r == 1) {
      for (int i = 0; i < 24; ++i)
        for (int k = 0; k < 17; ++k) ASSERT_EQ((*bufs[i])[k], i * 100 + k) << "message " << i;
    }
  });
}

// waitfor: the device holds a call until its dependencies completed. The
// whole chain is issued before the data it depends on exists.
TEST(Chaining, RecvThenCopyThenCombine) {
  World& w = World::get(2);
  Signal chained;
  w.run([&](unsigned r, ACCL& a) {
    const size_t n = 500;
    if (r == 0) {
      auto in = a.create_buffer<int64_t>(n), mid = a.create_buffer<int64_t>(n), out = a.create_buffer<int64_t>(n);
      for (size_t i = 0; i < n; ++i) (*out)[i] = -1;
      auto r1 = a.recv(*in, n, 1, 4, GLOBAL_COMM, /*to_fpga=*/true, dataType::none, true);
      auto r2 = a.copy(*in, *mid, n, /*from_fpga=*/true, /*to_fpga=*/true, true, {r1});
      auto r3 = a.combine(n, reduceFunction::SUM, *in, *mid, *out, true, true, false, true, {r2});
      chained.set();
      EXPECT_FALSE(r2->test()) << "copy ran before the recv it waits for";
      EXPECT_FALSE(r3->test()) << "combine ran before the copy it waits for";
      r3->wait();
      EXPECT_TRUE(r1->test());
      EXPECT_TRUE(r2->test());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*out)[i], 2 * (int64_t{1} << 33) + 2 * static_cast<int64_t>(i)) << i;
    } else {
      auto src = a.create_buffer<int64_t>(n);
      for (size_t i = 0; i < n; ++i) (*src)[i] = (int64_t{1} << 33) + static_cast<int64_t>(i);
      ASSERT_TRUE(chained.wait_for(kPeerWait));
      std::this_thread::sleep_for(100ms);
      a.send(*src, n, 0, 4);
    }
  });
}

TEST(Chaining, CollectivesOnDeviceData) {
  World& w = World::get(3);
  w.run([&](unsigned r, ACCL& a) {
    const unsigned P = 3;
    const size_t n = 700;
    auto x = a.create_buffer<double>(n), y = a.create_buffer<double>(n), z = a.create_buffer<double>(n);
    for (size_t i = 0; i < n; ++i) (*x)[i] = static_cast<double>(r + 1) * i;
    // y = sum x  (stays on the device), z = sum y = P * sum x, then bcast z from 2.
    auto q1 = a.allreduce(*x, *y, n, reduceFunction::SUM, GLOBAL_COMM, false, true, dataType::none, true);
    auto q2 = a.allreduce(*y, *z, n, reduceFunction::SUM, GLOBAL_COMM, true, true, dataType::none, true, {q1});
    auto q3 = a.bcast(*z, n, 2, GLOBAL_COMM, true, false, dataType::none, true, {q2});
    q3->wait();
    EXPECT_TRUE(q1->test());
    EXPECT_TRUE(q2->test());
    // The root's buffer is an input of bcast: its host mirror is not a result.
    if (r == 2) z->sync_from_device();
    for (size_t i = 0; i < n; ++i) ASSERT_EQ((*z)[i], static_cast<double>(P * (1 + 2 + 3) * i)) << "rank " << r << " [" << i << "]";
  });
}

TEST(Chaining, LongNopChain) {
  World& w = World::get(1);
  w.run([&](unsigned, ACCL& a) {
    std::vector<RequestPtr> chain;
    chain.push_back(a.nop(true));
    for (int i = 0; i < 100; ++i) chain.push_back(a.nop(true, {chain.back()}));
    chain.back()->wait();
    for (auto& q : chain) EXPECT_TRUE(q->test());
  });
}

}  // namespace
}  // namespace acclt
