// SPDX-License-Identifier: Apache-2.0
//
// core-stress: long runs and random call sequences (public ACCL's stress
// test hung on repeated send/recv): thousands of ring exchanges mixing eager
// and rendezvous sizes, message order under interleaved sizes, and a seeded
// random sequence of collectives with random roots, types and counts whose
// every result is checked.
#include "common/cases.hpp"
#include "common/types.hpp"
#include "common/world.hpp"

#include <accl/accl.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

namespace acclt {
namespace {

using accl::ACCL;
using accl::GLOBAL_COMM;
using accl::RequestPtr;

TEST(Stress, RingSendRecv2000) {
  World& w = World::get(2);
  w.run([&](unsigned r, ACCL& a) {
    const unsigned P = 2, next = (r + 1) % P, prev = (r + P - 1) % P;
    auto s = a.create_buffer<float>(1024), d = a.create_buffer<float>(1024);
    for (int it = 0; it < 2000; ++it) {
      const size_t n = (it % 3 == 0) ? 600 : (it % 3 == 1) ? 16 : 256;  // rendezvous, eager, exactly one RX buffer
      for (size_t i = 0; i < n; ++i) (*s)[i] = static_cast<float>(it * 10 + r);
      auto q = a.recv(*d, n, prev, 0, GLOBAL_COMM, false, dataType::none, true);
      a.send(*s, n, next, 0);
      q->wait();
      ASSERT_EQ((*d)[0], static_cast<float>(it * 10 + prev)) << "iteration " << it;
      ASSERT_EQ((*d)[n - 1], static_cast<float>(it * 10 + prev)) << "iteration " << it;
    }
  });
}

// MPI non-overtaking: messages on one (source, tag) arrive in send order even
// when eager and rendezvous sizes alternate.
TEST(Stress, OrderKeptAcrossEagerAndRendezvous) {
  World& w = World::get(2);
  w.run([&](unsigned r, ACCL& a) {
    const int kMsgs = 40;
    auto size_of = [](int k) { return static_cast<size_t>((k % 2) ? 700 : 5 + k); };
    std::vector<std::unique_ptr<accl::Buffer<int32_t>>> bufs;
    std::vector<RequestPtr> qs;
    for (int k = 0; k < kMsgs; ++k) {
      bufs.push_back(a.create_buffer<int32_t>(size_of(k)));
      if (r == 0) {
        for (size_t i = 0; i < size_of(k); ++i) (*bufs[k])[i] = k;
        qs.push_back(a.send(*bufs[k], size_of(k), 1, 8, GLOBAL_COMM, false, dataType::none, true));
      } else {
        qs.push_back(a.recv(*bufs[k], size_of(k), 0, 8, GLOBAL_COMM, false, dataType::none, true));
      }
    }
    for (auto& q : qs) q->wait();
    if (r == 1) {
      for (int k = 0; k < kMsgs; ++k)
        for (size_t i = 0; i < size_of(k); ++i) ASSERT_EQ((*bufs[k])[i], k) << "message " << k << " overtaken";
    }
  });
}

TEST(Stress, AllreduceLoop) {
  World& w = World::get(4);
  w.run([&](unsigned r, ACCL& a) {
    auto s = a.create_buffer<int32_t>(300), d = a.create_buffer<int32_t>(300);
    for (int it = 0; it < 300; ++it) {
      const size_t n = 1 + (it * 37) % 300;
      for (size_t i = 0; i < n; ++i) (*s)[i] = static_cast<int32_t>(it + r * i);
      a.allreduce(*s, *d, n, it % 2 ? reduceFunction::SUM : reduceFunction::MAX);
      for (size_t i = 0; i < n; ++i) {
        const int32_t exp = it % 2 ? static_cast<int32_t>(4 * it + 6 * i) : static_cast<int32_t>(it + 3 * i);
        ASSERT_EQ((*d)[i], exp) << "iteration " << it << " [" << i << "]";
      }
    }
  });
}

// Every rank sends one large message to rank 0 at once; rank 0 takes them
// source by source, so the later sources' data must wait (RX buffers,
// overflow store, arrival table) without deadlock or loss.
// fp16 compression keeps even 1 MiB messages eager.
TEST(Stress, FanInOfLargeEagerMessages) {
  for (unsigned P : {4u, 8u}) {
    World& w = World::get(P);
    w.run([&](unsigned r, ACCL& a) {
      const size_t n = (size_t{1} << 20) / 4;
      auto val = [](unsigned q, size_t i) { return pattern_value(Pattern::compressed, dataType::float32, q, i, 4); };
      if (r == 0) {
        for (unsigned q = 1; q < P; ++q) {
          auto d = a.create_buffer<float>(n);
          a.recv(*d, n, q, 6, GLOBAL_COMM, false, dataType::float16);
          EXPECT_TRUE(check_range(*d, 0, n, [&](size_t i) { return val(q, i); },
                                  "P=" + std::to_string(P) + " from " + std::to_string(q), fp16_tolerance(1)));
        }
      } else {
        auto s = a.create_buffer<float>(n);
        fill(*s, 0, n, [&](size_t i) { return val(r, i); });
        a.send(*s, n, 0, 6, GLOBAL_COMM, false, dataType::float16);
      }
    });
  }
}

// The same with rendezvous disabled and messages of a whole RX capacity
// each (16 x 1 KiB): 7 x 16 KiB arrive for 16 KiB of RX buffers.
TEST(Stress, FanInEagerOnlyAtRxCapacity) {
  World& w = World::get(8, eager_only_config());
  w.run([&](unsigned r, ACCL& a) {
    const size_t n = 16 * 1024 / 8;
    if (r == 0) {
      for (unsigned q = 7; q >= 1; --q) {  // last source first
        auto d = a.create_buffer<int64_t>(n);
        a.recv(*d, n, q, 2);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], static_cast<int64_t>(q) << 32 | static_cast<int64_t>(i));
      }
    } else {
      auto s = a.create_buffer<int64_t>(n);
      for (size_t i = 0; i < n; ++i) (*s)[i] = static_cast<int64_t>(r) << 32 | static_cast<int64_t>(i);
      a.send(*s, n, 0, 2);
    }
  });
}

// Messages far above everything else in the suite: 48 MiB allreduce, 16 MiB
// bcast with fp16 on the wire, 8 MiB per peer alltoall.
TEST(Stress, VeryLargeMessages) {
  if (options().quick) GTEST_SKIP() << "quick mode";
  World& w = World::get(2);
  w.run([&](unsigned r, ACCL& a) {
    {
      const size_t n = 12u << 20;  // 48 MiB of int32
      auto s = a.create_buffer<int32_t>(n), d = a.create_buffer<int32_t>(n);
      for (size_t i = 0; i < n; ++i) (*s)[i] = static_cast<int32_t>(i % 1000003) * (r ? -1 : 2);
      a.allreduce(*s, *d, n, reduceFunction::SUM);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], static_cast<int32_t>(i % 1000003)) << "allreduce [" << i << "]";
    }
    {
      const size_t n = 4u << 20;  // 16 MiB of float32
      auto b = a.create_buffer<float>(n);
      for (size_t i = 0; i < n; ++i) (*b)[i] = r == 1 ? static_cast<float>(i % 2000) : -1.0f;
      a.bcast(*b, n, 1, GLOBAL_COMM, false, false, dataType::float16);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*b)[i], static_cast<float>(i % 2000)) << "bcast [" << i << "]";
    }
    {
      const size_t n = 1u << 20;  // 8 MiB per peer of int64
      auto s = a.create_buffer<int64_t>(2 * n), d = a.create_buffer<int64_t>(2 * n);
      for (size_t i = 0; i < 2 * n; ++i) (*s)[i] = static_cast<int64_t>(r) << 40 | static_cast<int64_t>(i);
      a.alltoall(*s, *d, n);
      for (unsigned q = 0; q < 2; ++q)
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ((*d)[q * n + i], static_cast<int64_t>(q) << 40 | static_cast<int64_t>(r * n + i)) << "alltoall";
    }
  });
}

// A seeded random sequence of calls, the same on every rank: groups of 1-4
// calls are issued back to back with run_async (several collectives queued on
// one communicator), waited for in random order, then every result checked.
struct Pending {
  Call call;
  dataType type;
  size_t n;
  unsigned root, src, dst;
  reduceFunction op;
  bool compressed;
  uint32_t seed;
  std::unique_ptr<accl::BaseBuffer> s, d;
  RequestPtr req;
  std::string what;
};

template <typename T>
void check_pending(const Pending& p, unsigned r, unsigned P) {
  const Pattern pat =
      p.compressed ? Pattern::compressed : (is_reduction(p.call) ? pattern_for(p.op) : Pattern::unique);
  auto val = [&](unsigned q, size_t i) { return roundtrip<T>(pattern_value(pat, p.type, q, i, p.seed)); };
  auto fold = [&](size_t i) {
    double acc = val(0, i);
    for (unsigned q = 1; q < P; ++q) acc = reduce_ref(p.op, acc, val(q, i));
    return roundtrip<T>(acc);
  };
  const Tolerance tol = !p.compressed ? Tolerance{} : is_reduction(p.call) ? fp16_tolerance(2 * P + 2) : fp16_tolerance(1);
  const auto& s = static_cast<const accl::Buffer<T>&>(*p.s);
  const auto& d = static_cast<const accl::Buffer<T>&>(*p.d);
  const size_t n = p.n;
  switch (p.call) {
    case Call::sendrecv:
      if (r == p.dst) {
        EXPECT_TRUE(check_range(d, 0, n, [&](size_t i) { return val(p.src, i); }, p.what, tol));
      }
      break;
    case Call::bcast:
      EXPECT_TRUE(check_range(s, 0, n, [&](size_t i) { return val(p.root, i); }, p.what, tol));
      break;
    case Call::scatter:
      EXPECT_TRUE(check_range(d, 0, n, [&](size_t i) { return val(p.root, r * n + i); }, p.what, tol));
      break;
    case Call::gather:
      if (r == p.root) {
        EXPECT_TRUE(check_range(d, 0, n * P, [&](size_t i) { return val(i / n, i % n); }, p.what, tol));
      }
      break;
    case Call::allgather:
      EXPECT_TRUE(check_range(d, 0, n * P, [&](size_t i) { return val(i / n, i % n); }, p.what, tol));
      break;
    case Call::reduce:
      if (r == p.root) {
        EXPECT_TRUE(check_range(d, 0, n, fold, p.what, tol));
      }
      break;
    case Call::allreduce: EXPECT_TRUE(check_range(d, 0, n, fold, p.what, tol)); break;
    case Call::reduce_scatter:
      EXPECT_TRUE(check_range(d, 0, n, [&](size_t i) { return fold(r * n + i); }, p.what, tol));
      break;
    case Call::alltoall:
      EXPECT_TRUE(check_range(d, 0, n * P, [&](size_t i) { return val(i / n, r * n + i % n); }, p.what, tol));
      break;
    default: break;
  }
}

class RandomSequence : public ::testing::TestWithParam<std::tuple<unsigned, unsigned, int>> {};

TEST_P(RandomSequence, EveryResultChecked) {
  const auto [P, seed0, kind] = GetParam();
  World& w = kind == 1 ? World::get(P, eager_only_config()) : kind == 2 ? World::get(P, large_rx_config()) : World::get(P);
  const int kCalls = options().quick ? 60 : 300;
  w.run([&, P = P, seed0 = seed0, kind = kind](unsigned r, ACCL& a) {
    std::mt19937 rng(seed0 * 7919 + P);  // same on every rank
    const std::vector<Call> calls = {Call::sendrecv, Call::bcast, Call::scatter, Call::gather, Call::allgather,
                                     Call::reduce, Call::allreduce, Call::reduce_scatter, Call::alltoall,
                                     Call::barrier};
    const std::vector<size_t> counts = {1, 3, 17, 255, 256, 257, 1000, 4096, 4097, 5000, 17000};
    int issued = 0;
    while (issued < kCalls) {
      const unsigned group = 1 + rng() % 4;
      std::vector<Pending> ps;
      for (unsigned g = 0; g < group; ++g, ++issued) {
        Pending p;
        p.call = calls[rng() % calls.size()];
        p.n = counts[rng() % counts.size()];
        p.root = rng() % P;
        p.src = rng() % P;
        p.dst = (p.src + 1 + rng() % std::max(1u, P - 1)) % P;
        p.op = all_ops()[rng() % 4];
        p.type = all_types()[rng() % 5];
        p.compressed = p.type == dataType::float32 && rng() % 3 == 0;
        // Eager only: a point-to-point message must fit the 16 x 1 KiB RX buffers
        // (larger ones are refused, see core-errors EagerOnly.*).
        if (kind == 1 && p.call == Call::sendrecv)
          p.n = std::min(p.n, size_t{16 * 1024} / (p.compressed ? 2 : elem_bytes(p.type)));
        const bool host = rng() % 2;
        p.seed = rng() % 1000;
        const dataType cd = p.compressed ? dataType::float16 : dataType::none;
        const unsigned tag = 1000 + issued;
        p.what = "call " + std::to_string(issued) + " " + call_name(p.call) + " " + type_name(p.type) +
                 (p.compressed ? " fp16wire" : "") + " n=" + std::to_string(p.n) + " root " +
                 std::to_string(p.root) + " " + op_name(p.op) + (host ? " host" : " device") + " rank " +
                 std::to_string(r) + " (seed " + std::to_string(seed0) + ")";
        dispatch_type(p.type, [&]<typename T>() {
          const Pattern pat =
              p.compressed ? Pattern::compressed : (is_reduction(p.call) ? pattern_for(p.op) : Pattern::unique);
          auto s = make_buffer<T>(a, p.n * P, host), d = make_buffer<T>(a, p.n * P, host);
          fill(*s, 0, p.n * P, [&](size_t i) { return roundtrip<T>(pattern_value(pat, p.type, r, i, p.seed)); });
          const unsigned n = static_cast<unsigned>(p.n);
          switch (p.call) {
            case Call::sendrecv:
              if (P < 2) break;
              if (r == p.src) p.req = a.send(*s, n, p.dst, tag, GLOBAL_COMM, false, cd, true);
              if (r == p.dst) p.req = a.recv(*d, n, p.src, tag, GLOBAL_COMM, false, cd, true);
              break;
            case Call::bcast: p.req = a.bcast(*s, n, p.root, GLOBAL_COMM, false, false, cd, true); break;
            case Call::scatter: p.req = a.scatter(*s, *d, n, p.root, GLOBAL_COMM, false, false, cd, true); break;
            case Call::gather: p.req = a.gather(*s, *d, n, p.root, GLOBAL_COMM, false, false, cd, true); break;
            case Call::allgather: p.req = a.allgather(*s, *d, n, GLOBAL_COMM, false, false, cd, true); break;
            case Call::reduce:
              p.req = a.reduce(*s, *d, n, p.root, p.op, GLOBAL_COMM, false, false, cd, true);
              break;
            case Call::allreduce: p.req = a.allreduce(*s, *d, n, p.op, GLOBAL_COMM, false, false, cd, true); break;
            case Call::reduce_scatter:
              p.req = a.reduce_scatter(*s, *d, n, p.op, GLOBAL_COMM, false, false, cd, true);
              break;
            case Call::alltoall: p.req = a.alltoall(*s, *d, n, GLOBAL_COMM, false, false, cd, true); break;
            case Call::barrier: p.req = a.barrier(GLOBAL_COMM, true); break;
            default: break;
          }
          p.s = std::move(s);
          p.d = std::move(d);
        });
        ps.push_back(std::move(p));
      }
      // Wait in a random (rank-specific) order.
      std::vector<size_t> order(ps.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      std::shuffle(order.begin(), order.end(), std::mt19937(r * 31 + issued));
      for (size_t k : order)
        if (ps[k].req) {
          try {
            ps[k].req->wait();
          } catch (const std::exception& e) {
            FAIL() << ps[k].what << ": " << e.what();
          }
        }
      for (const Pending& p : ps) dispatch_type(p.type, [&]<typename T>() { check_pending<T>(p, r, P); });
      if (::testing::Test::HasFailure()) return;  // later calls would only cascade
    }
  });
}

std::string random_name(const ::testing::TestParamInfo<std::tuple<unsigned, unsigned, int>>& pi) {
  static const char* kinds[] = {"standard", "eager", "largerx"};
  return std::string(kinds[std::get<2>(pi.param)]) + "_P" + std::to_string(std::get<0>(pi.param)) + "_seed" +
         std::to_string(std::get<1>(pi.param));
}
// world kind 0: standard, 1: eager only, 2: large RX buffers (PMPI defaults)
INSTANTIATE_TEST_SUITE_P(Standard, RandomSequence,
                         ::testing::Combine(::testing::Values(2u, 3u, 4u, 5u, 8u), ::testing::Values(1u, 2u, 3u),
                                            ::testing::Values(0)),
                         random_name);
INSTANTIATE_TEST_SUITE_P(OtherWorlds, RandomSequence,
                         ::testing::Combine(::testing::Values(3u, 8u), ::testing::Values(4u), ::testing::Values(1, 2)),
                         random_name);

}  // namespace
}  // namespace acclt
