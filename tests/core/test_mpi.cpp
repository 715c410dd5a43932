// SPDX-License-Identifier: Apache-2.0
//
// core-mpi-<transport>-np<N>: one emulated CCLO per MPI process, reached over
// a real transport (--transport=tcp|shm|udp). MPI only exchanges the
// endpoints (MPI_Allgather); everything else goes through ACCL. Every rank
// runs every test (SPMD); the exit code is non-zero on every rank when any
// rank failed.
// Only the C bindings (the C++ ones do not compile cleanly with -Wextra).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include "common/types.hpp"
#include "mpi_emu_accl.hpp"

#include <accl/accl.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace acclt {
namespace {

using accl::ACCL;
using accl::GLOBAL_COMM;

int g_rank = 0, g_size = 1;
ACCL* g_accl = nullptr;

ACCL& accl_() { return *g_accl; }

// Before and after each test all ranks meet, so one test's traffic never
// overlaps the next one's start.
class MpiTest : public ::testing::Test {
 protected:
  void SetUp() override { MPI_Barrier(MPI_COMM_WORLD); }
  void TearDown() override { MPI_Barrier(MPI_COMM_WORLD); }
};

template <typename T>
double v(dataType t, Pattern p, unsigned rank, size_t i, uint32_t seed = 0) {
  return roundtrip<T>(pattern_value(p, t, rank, i, seed));
}

template <typename F>
void for_types(const std::vector<dataType>& types, F&& f) {
  for (dataType t : types) dispatch_type(t, [&]<typename T>() { f.template operator()<T>(t); });
}

const std::vector<size_t> kCounts = {1, 17, 256, 257, (1u << 20) / 4};  // float32: 1 RX buffer = 256

TEST_F(MpiTest, SendRecvRing) {
  ACCL& a = accl_();
  const unsigned P = g_size, r = g_rank, next = (r + 1) % P, prev = (r + P - 1) % P;
  for_types({dataType::float32, dataType::int64, dataType::float16}, [&]<typename T>(dataType t) {
    for (size_t n : kCounts) {
      auto s = a.create_buffer<T>(n), d = a.create_buffer<T>(n);
      fill(*s, 0, n, [&](size_t i) { return v<T>(t, Pattern::unique, r, i); });
      auto q = a.recv(*d, n, prev, 3, GLOBAL_COMM, false, dataType::none, true);
      a.send(*s, n, next, 3);
      q->wait();
      EXPECT_TRUE(check_range(*d, 0, n, [&](size_t i) { return v<T>(t, Pattern::unique, prev, i); },
                              type_name(t) + " n=" + std::to_string(n) + " from " + std::to_string(prev)));
    }
  });
}

TEST_F(MpiTest, SendRecvCompressed) {
  ACCL& a = accl_();
  const unsigned P = g_size, r = g_rank, next = (r + 1) % P, prev = (r + P - 1) % P;
  for (size_t n : {size_t{17}, size_t{5000}}) {
    auto s = a.create_buffer<float>(n), d = a.create_buffer<float>(n);
    fill(*s, 0, n, [&](size_t i) { return pattern_value(Pattern::compressed, dataType::float32, r, i, 1); });
    auto q = a.recv(*d, n, prev, 4, GLOBAL_COMM, false, dataType::float16, true);
    a.send(*s, n, next, 4, GLOBAL_COMM, false, dataType::float16);
    q->wait();
    EXPECT_TRUE(check_range(*d, 0, n,
                            [&](size_t i) { return pattern_value(Pattern::compressed, dataType::float32, prev, i, 1); },
                            "fp16 wire n=" + std::to_string(n), fp16_tolerance(1)));
  }
}

TEST_F(MpiTest, BcastEveryRoot) {
  ACCL& a = accl_();
  const unsigned P = g_size, r = g_rank;
  for_types({dataType::float32, dataType::int32}, [&]<typename T>(dataType t) {
    for (size_t n : kCounts)
      for (unsigned root = 0; root < P; ++root) {
        auto b = a.create_buffer<T>(n);
        if (r == root) fill(*b, 0, n, [&](size_t i) { return v<T>(t, Pattern::unique, root, i); });
        else fill(*b, 0, n, [](size_t) { return kSentinel; });
        a.bcast(*b, n, root);
        EXPECT_TRUE(check_range(*b, 0, n, [&](size_t i) { return v<T>(t, Pattern::unique, root, i); },
                                type_name(t) + " root " + std::to_string(root) + " n=" + std::to_string(n)));
      }
  });
}

TEST_F(MpiTest, ReduceEveryRootSumMax) {
  ACCL& a = accl_();
  const unsigned P = g_size, r = g_rank;
  for_types({dataType::float32, dataType::int64, dataType::float16}, [&]<typename T>(dataType t) {
    for (reduceFunction op : {reduceFunction::SUM, reduceFunction::MAX})
      for (size_t n : {size_t{17}, size_t{257}, size_t{100000}})
        for (unsigned root = 0; root < P; ++root) {
          const Pattern pat = pattern_for(op);
          auto s = a.create_buffer<T>(n), d = a.create_buffer<T>(n);
          fill(*s, 0, n, [&](size_t i) { return v<T>(t, pat, r, i, root); });
          a.reduce(*s, *d, n, root, op);
          if (r == root) {
            EXPECT_TRUE(check_range(*d, 0, n, [&](size_t i) {
              double acc = v<T>(t, pat, 0, i, root);
              for (unsigned q = 1; q < P; ++q) acc = reduce_ref(op, acc, v<T>(t, pat, q, i, root));
              return acc;
            }, type_name(t) + " " + op_name(op) + " root " + std::to_string(root) + " n=" + std::to_string(n)));
          }
        }
  });
}

TEST_F(MpiTest, AllreduceSmallAndBig) {
  ACCL& a = accl_();
  const unsigned P = g_size, r = g_rank;
  for_types({dataType::float32, dataType::float64, dataType::int32, dataType::int64, dataType::float16},
            [&]<typename T>(dataType t) {
    for (reduceFunction op : {reduceFunction::SUM, reduceFunction::MAX, reduceFunction::MIN, reduceFunction::PROD})
      for (size_t n : {size_t{1}, size_t{17}, size_t{1000}, (size_t{1} << 20) / elem_bytes(t)}) {
        if (n > 1000 && op != reduceFunction::SUM && t != dataType::float32) continue;
        const Pattern pat = pattern_for(op);
        auto s = a.create_buffer<T>(n), d = a.create_buffer<T>(n);
        fill(*s, 0, n, [&](size_t i) { return v<T>(t, pat, r, i, 3); });
        a.allreduce(*s, *d, n, op);
        EXPECT_TRUE(check_range(*d, 0, n, [&](size_t i) {
          double acc = v<T>(t, pat, 0, i, 3);
          for (unsigned q = 1; q < P; ++q) acc = reduce_ref(op, acc, v<T>(t, pat, q, i, 3));
          return acc;
        }, type_name(t) + " " + op_name(op) + " n=" + std::to_string(n)));
      }
  });
}

TEST_F(MpiTest, AllreduceCompressed) {
  ACCL& a = accl_();
  const unsigned P = g_size, r = g_rank;
  for (size_t n : {size_t{17}, size_t{300000}}) {
    auto s = a.create_buffer<float>(n), d = a.create_buffer<float>(n);
    fill(*s, 0, n, [&](size_t i) { return pattern_value(Pattern::compressed, dataType::float32, r, i, 2); });
    a.allreduce(*s, *d, n, reduceFunction::SUM, GLOBAL_COMM, false, false, dataType::float16);
    EXPECT_TRUE(check_range(*d, 0, n, [&](size_t i) {
      double acc = 0;
      for (unsigned q = 0; q < P; ++q) acc += pattern_value(Pattern::compressed, dataType::float32, q, i, 2);
      return acc;
    }, "fp16 wire allreduce n=" + std::to_string(n), fp16_tolerance(2 * P + 2)));
  }
}

TEST_F(MpiTest, Alltoall) {
  ACCL& a = accl_();
  const unsigned P = g_size, r = g_rank;
  for_types({dataType::float32, dataType::int64}, [&]<typename T>(dataType t) {
    for (size_t n : {size_t{1}, size_t{17}, size_t{257}, size_t{65536}}) {
      auto s = a.create_buffer<T>(n * P), d = a.create_buffer<T>(n * P);
      fill(*s, 0, n * P, [&](size_t i) { return v<T>(t, Pattern::unique, r, i); });
      a.alltoall(*s, *d, n);
      for (unsigned q = 0; q < P; ++q)
        EXPECT_TRUE(check_range(*d, q * n, n, [&](size_t i) { return v<T>(t, Pattern::unique, q, r * n + i); },
                                type_name(t) + " n=" + std::to_string(n) + " chunk from " + std::to_string(q)));
    }
  });
}

TEST_F(MpiTest, Allgather) {
  ACCL& a = accl_();
  const unsigned P = g_size, r = g_rank;
  for_types({dataType::float32, dataType::int32, dataType::float16}, [&]<typename T>(dataType t) {
    for (size_t n : {size_t{1}, size_t{17}, size_t{257}, size_t{100000}}) {
      auto s = a.create_buffer<T>(n), d = a.create_buffer<T>(n * P);
      fill(*s, 0, n, [&](size_t i) { return v<T>(t, Pattern::unique, r, i); });
      a.allgather(*s, *d, n);
      for (unsigned q = 0; q < P; ++q)
        EXPECT_TRUE(check_range(*d, q * n, n, [&](size_t i) { return v<T>(t, Pattern::unique, q, i); },
                                type_name(t) + " n=" + std::to_string(n) + " chunk of " + std::to_string(q)));
    }
  });
}

TEST_F(MpiTest, GatherScatterReduceScatter) {
  ACCL& a = accl_();
  const unsigned P = g_size, r = g_rank;
  for (size_t n : {size_t{17}, size_t{257}, size_t{50000}}) {
    auto s = a.create_buffer<int32_t>(n * P), d = a.create_buffer<int32_t>(n * P);
    auto val = [&](unsigned q, size_t i) { return static_cast<double>(q * 1000000 + i); };
    fill(*s, 0, n * P, [&](size_t i) { return val(r, i); });
    const unsigned root = P - 1;
    a.gather(*s, *d, n, root);
    if (r == root) {
      for (unsigned q = 0; q < P; ++q)
        EXPECT_TRUE(check_range(*d, q * n, n, [&](size_t i) { return val(q, i); }, "gather chunk " + std::to_string(q)));
    }
    a.scatter(*s, *d, n, root);
    EXPECT_TRUE(check_range(*d, 0, n, [&](size_t i) { return val(root, r * n + i); }, "scatter"));
    a.reduce_scatter(*s, *d, n, reduceFunction::SUM);
    EXPECT_TRUE(check_range(*d, 0, n, [&](size_t i) {
      double acc = 0;
      for (unsigned q = 0; q < P; ++q) acc += val(q, r * n + i);
      return acc;
    }, "reduce_scatter"));
  }
}

TEST_F(MpiTest, Barrier) {
  ACCL& a = accl_();
  for (int i = 0; i < 50; ++i) a.barrier();
  // Barrier orders: every rank's MPI-visible flag set before the barrier is
  // seen by everyone after it (checked with a one-sided MPI_Allreduce after).
  int before = 1, sum = 0;
  a.barrier();
  MPI_Allreduce(&before, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(sum, g_size);
}

TEST_F(MpiTest, AsyncOverlapAndChaining) {
  ACCL& a = accl_();
  const unsigned P = g_size, r = g_rank;
  const size_t n = 100000;
  auto x = a.create_buffer<double>(n), y = a.create_buffer<double>(n), z = a.create_buffer<double>(n);
  for (size_t i = 0; i < n; ++i) (*x)[i] = static_cast<double>(r + 1);
  auto q1 = a.allreduce(*x, *y, n, reduceFunction::SUM, GLOBAL_COMM, false, true, dataType::none, true);
  auto q2 = a.allreduce(*y, *z, n, reduceFunction::SUM, GLOBAL_COMM, true, false, dataType::none, true, {q1});
  volatile double host = 0;
  for (int i = 0; i < 100000; ++i) host = host + 1.0;
  q2->wait();
  const double s = P * (P + 1) / 2.0;
  for (size_t i = 0; i < n; ++i) ASSERT_EQ((*z)[i], P * s) << i;
}

TEST_F(MpiTest, SplitCommunicatorsAndWildcards) {
  ACCL& a = accl_();
  const unsigned P = g_size, r = g_rank;
  if (P < 2) GTEST_SKIP() << "needs 2 ranks";
  // Evens and odds (context ids given: both groups create one communicator).
  std::vector<int> grp;
  for (unsigned q = r % 2; q < P; q += 2) grp.push_back(static_cast<int>(q));
  const accl::communicatorId c = a.split_communicator(grp, 40u + r % 2);
  const unsigned cs = a.get_comm_size(c), cr = a.get_comm_rank(c);
  EXPECT_EQ(cs, grp.size());
  const size_t n = 3000;
  auto s = a.create_buffer<int32_t>(n), d = a.create_buffer<int32_t>(n), g = a.create_buffer<int32_t>(n);
  for (size_t i = 0; i < n; ++i) (*s)[i] = static_cast<int32_t>(r * 10 + i);
  // Allreduce on the split and the global communicator at the same time.
  auto q1 = a.allreduce(*s, *d, n, reduceFunction::SUM, c, false, false, dataType::none, true);
  auto q2 = a.allreduce(*s, *g, n, reduceFunction::MAX, GLOBAL_COMM, false, false, dataType::none, true);
  q1->wait();
  q2->wait();
  int64_t rank_sum = 0;
  for (int q : grp) rank_sum += q * 10;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ((*d)[i], static_cast<int32_t>(rank_sum + cs * i)) << "split allreduce";
    ASSERT_EQ((*g)[i], static_cast<int32_t>((P - 1) * 10 + i)) << "global allreduce";
  }
  // Everyone sends to global rank 0 with its own tag; rank 0 takes RANK_ANY / TAG_ANY.
  if (r == 0) {
    unsigned seen = 0;
    for (unsigned k = 1; k < P; ++k) {
      a.recv(*d, n, accl::RANK_ANY, accl::TAG_ANY);
      const unsigned src = static_cast<unsigned>((*d)[0]) / 10;
      ASSERT_TRUE(src >= 1 && src < P) << src;
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], static_cast<int32_t>(src * 10 + i));
      seen |= 1u << src;
    }
    EXPECT_EQ(seen, ((1u << P) - 1) & ~1u);
  } else {
    a.send(*s, n, 0, 70 + r);
  }
  (void)cr;
  a.free_communicator(c);
}

// Prints failures of non-zero ranks with a rank prefix (rank 0 keeps the
// normal GoogleTest output).
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::printf("[rank %d] FAILURE %s:%d\n%s\n", g_rank, r.file_name() ? r.file_name() : "?", r.line_number(),
                r.summary());
    std::fflush(stdout);
  }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    if (t.result()->Failed()) std::printf("[rank %d] FAILED %s.%s\n", g_rank, t.test_suite_name(), t.name());
  }
};

}  // namespace
}  // namespace acclt

int main(int argc, char** argv) {
  using namespace acclt;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  parse_options(&argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (g_rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter);
  }

  int rc = 0;
  // Setup on every rank; tests run only if it worked everywhere.
  std::unique_ptr<accl::ACCL> a = accl_over_mpi(g_rank, g_size, options().transport);
  g_accl = a.get();
  if (a) {
    if (g_rank == 0)
      std::printf("ACCL over %s, %d ranks\n",
                  options().transport.empty() ? "the default transport" : options().transport.c_str(), g_size);
    try {
      rc = RUN_ALL_TESTS();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[rank %d] %s\n", g_rank, e.what());
      rc = 1;
    }
  } else {
    rc = 1;
  }
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  a.reset();
  MPI_Finalize();
  return worst;
}
