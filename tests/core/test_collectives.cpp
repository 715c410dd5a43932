// SPDX-License-Identifier: Apache-2.0
//
// core-collectives-<P>: every call of the driver in an in-process world of P
// ranks (--world-size=P), over the matrix of common/cases.cpp: data types,
// reduce functions, roots, counts (1, 17, one RX buffer, one more element,
// 1 MiB), device / host-only / mixed buffers, fp16 wire compression, and an
// eager-only world (rendezvous disabled).
//
// Every rank contributes different data; expected results are computed on
// the host. Elements beyond the result must keep their sentinel and inputs
// must stay unchanged.
#include "common/cases.hpp"
#include "common/types.hpp"
#include "common/world.hpp"

#include <accl/accl.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace acclt {
namespace {

using accl::ACCL;
using accl::GLOBAL_COMM;

unsigned world_size() { return options().world_size == 0 ? 2 : options().world_size; }

constexpr size_t kPad = 3;  // elements after every result that must stay untouched

// Output buffer: sentinel everywhere, also in device memory.
template <typename T>
std::unique_ptr<accl::Buffer<T>> out_buffer(ACCL& a, size_t length, bool host_only) {
  auto b = make_buffer<T>(a, length, host_only);
  fill_sentinel(*b);
  if (!host_only) b->sync_to_device();
  return b;
}

// Input buffer: gen(i) on [0, n), sentinel after.
template <typename T, typename G>
std::unique_ptr<accl::Buffer<T>> in_buffer(ACCL& a, size_t n, bool host_only, G&& gen) {
  auto b = make_buffer<T>(a, n + kPad, host_only);
  fill_sentinel(*b);
  fill(*b, 0, n, gen);
  return b;
}

class CollectiveTest : public ::testing::TestWithParam<Case> {
 protected:
  void Run(Call call) {
    const Case& c = GetParam();
    ASSERT_EQ(c.call, call);
    World& w = c.world == WorldKind::eager      ? World::get(world_size(), eager_only_config())
               : c.world == WorldKind::large_rx ? World::get(world_size(), large_rx_config())
                                                : World::get(world_size());
    dispatch_type(c.type, [&]<typename T>() { this->RunTyped<T>(w, c); });
  }

  template <typename T>
  void RunTyped(World& w, const Case& c) {
    const unsigned P = w.size();
    const size_t n = count_of(c.count, c.type, w.rx_buffer_bytes(), w.config().init.max_eager_size,
                              w.config().init.max_rendezvous_size);
    ASSERT_GT(n, 0u);
    const uint32_t seed = case_seed(c);
    const Pattern pat =
        c.compressed ? Pattern::compressed : (is_reduction(c.call) ? pattern_for(c.op) : Pattern::unique);
    auto val = [&](unsigned rank, size_t i) { return roundtrip<T>(pattern_value(pat, c.type, rank, i, seed)); };
    const dataType cd = c.compressed ? dataType::float16 : dataType::none;
    // Data movement: one fp16 rounding; reductions: one per hop and per add.
    const Tolerance tol = !c.compressed ? Tolerance{}
                                        : is_reduction(c.call) ? fp16_tolerance(2 * P + 2) : fp16_tolerance(1);
    const bool in_host = c.place == Placement::host;
    const bool out_host = c.place != Placement::device;
    const std::string call = call_name(c.call);
    auto fold = [&](size_t i, size_t offset) {  // reduction over ranks of val(q, offset + i)
      double acc = val(0, offset + i);
      for (unsigned q = 1; q < P; ++q) acc = reduce_ref(c.op, acc, val(q, offset + i));
      return roundtrip<T>(acc);
    };
    auto where = [&](unsigned r, const std::string& what) {
      return call + " rank " + std::to_string(r) + " of " + std::to_string(P) + ": " + what;
    };

    w.run([&](unsigned r, ACCL& a) {
      // This rank's input: val(r, i) on [0, count). The call must leave it as it is.
      auto own_input = [&](size_t count) {
        return in_buffer<T>(a, count, in_host, [&](size_t i) { return val(r, i); });
      };
      auto expect_unchanged = [&](const accl::Buffer<T>& src, size_t count) {
        EXPECT_TRUE(check_range(src, 0, count, [&](size_t i) { return val(r, i); }, where(r, "src unchanged")));
      };
      // Gathered: chunk q of `dst` holds rank q's input, nothing is written past the P chunks.
      auto expect_gathered = [&](const accl::Buffer<T>& dst) {
        for (unsigned q = 0; q < P; ++q)
          EXPECT_TRUE(check_range(dst, q * n, n, [&](size_t i) { return val(q, i); },
                                  where(r, "chunk of rank " + std::to_string(q)), tol));
        EXPECT_TRUE(check_sentinel(dst, n * P, where(r, "tail")));
      };
      switch (c.call) {
        case Call::copy: {
          auto src = own_input(n);
          auto dst = out_buffer<T>(a, n + kPad, out_host);
          a.copy(*src, *dst, static_cast<unsigned>(n));
          EXPECT_TRUE(check_range(*dst, 0, n, [&](size_t i) { return val(r, i); }, where(r, "dst")));
          EXPECT_TRUE(check_sentinel(*dst, n, where(r, "dst tail")));
          expect_unchanged(*src, n);
          break;
        }
        case Call::combine: {
          auto v2 = [&](size_t i) { return roundtrip<T>(pattern_value(pat, c.type, r + 11, i, seed + 1)); };
          auto a1 = own_input(n);
          auto a2 = in_buffer<T>(a, n, in_host, v2);
          auto res = out_buffer<T>(a, n + kPad, out_host);
          a.combine(static_cast<unsigned>(n), c.op, *a1, *a2, *res);
          EXPECT_TRUE(check_range(
              *res, 0, n, [&](size_t i) { return roundtrip<T>(reduce_ref(c.op, val(r, i), v2(i))); },
              where(r, "result")));
          EXPECT_TRUE(check_sentinel(*res, n, where(r, "result tail")));
          break;
        }
        case Call::sendrecv: {
          const unsigned next = (r + 1) % P, prev = (r + P - 1) % P;
          auto src = own_input(n);
          auto dst = out_buffer<T>(a, n + kPad, out_host);
          // src to `to` and from `from` into dst, tags tag_base + sender. The
          // receive is posted first (asynchronously): a rendezvous send waits for it.
          auto exchange = [&](unsigned to, unsigned from, unsigned tag_base, const std::string& got,
                              const std::string& tail) {
            auto rq = a.recv(*dst, static_cast<unsigned>(n), from, tag_base + from, GLOBAL_COMM, false, cd, true);
            a.send(*src, static_cast<unsigned>(n), to, tag_base + r, GLOBAL_COMM, false, cd);
            rq->wait();
            EXPECT_TRUE(check_range(*dst, 0, n, [&](size_t i) { return val(from, i); },
                                    where(r, got + std::to_string(from)), tol));
            EXPECT_TRUE(check_sentinel(*dst, n, where(r, tail)));
          };
          exchange(next, prev, 100, "received from ", "dst tail");
          expect_unchanged(*src, n);
          // And back the other way with another tag, reusing the buffers.
          fill_sentinel(*dst);
          if (!out_host) dst->sync_to_device();
          exchange(prev, next, 200, "received back from ", "dst tail (back)");
          break;
        }
        case Call::bcast: {
          const bool host = in_host || (c.place == Placement::mixed && r != c.root);
          std::unique_ptr<accl::Buffer<T>> buf;
          if (r == c.root) buf = in_buffer<T>(a, n, host, [&](size_t i) { return val(c.root, i); });
          else buf = out_buffer<T>(a, n + kPad, host);
          a.bcast(*buf, static_cast<unsigned>(n), c.root, GLOBAL_COMM, false, false, cd);
          if (r == c.root) {
            EXPECT_TRUE(check_range(*buf, 0, n, [&](size_t i) { return val(c.root, i); }, where(r, "root data")));
          } else {
            EXPECT_TRUE(check_range(*buf, 0, n, [&](size_t i) { return val(c.root, i); },
                                    where(r, "from root " + std::to_string(c.root)), tol));
          }
          EXPECT_TRUE(check_sentinel(*buf, n, where(r, "tail")));
          break;
        }
        case Call::scatter: {
          // Every rank passes a full send buffer with its own data: only the root's may be read.
          auto src = own_input(n * P);
          auto dst = out_buffer<T>(a, n + kPad, out_host);
          a.scatter(*src, *dst, static_cast<unsigned>(n), c.root, GLOBAL_COMM, false, false, cd);
          EXPECT_TRUE(check_range(*dst, 0, n, [&](size_t i) { return val(c.root, r * n + i); },
                                  where(r, "chunk from root " + std::to_string(c.root)), tol));
          EXPECT_TRUE(check_sentinel(*dst, n, where(r, "tail")));
          expect_unchanged(*src, n * P);
          break;
        }
        case Call::gather: {
          auto src = own_input(n);
          auto dst = out_buffer<T>(a, n * P + kPad, out_host);
          a.gather(*src, *dst, static_cast<unsigned>(n), c.root, GLOBAL_COMM, false, false, cd);
          if (r == c.root) expect_gathered(*dst);
          expect_unchanged(*src, n);
          break;
        }
        case Call::allgather: {
          auto src = own_input(n);
          auto dst = out_buffer<T>(a, n * P + kPad, out_host);
          a.allgather(*src, *dst, static_cast<unsigned>(n), GLOBAL_COMM, false, false, cd);
          expect_gathered(*dst);
          expect_unchanged(*src, n);
          break;
        }
        case Call::reduce: {
          auto src = own_input(n);
          auto dst = out_buffer<T>(a, n + kPad, out_host);
          a.reduce(*src, *dst, static_cast<unsigned>(n), c.root, c.op, GLOBAL_COMM, false, false, cd);
          if (r == c.root) {
            EXPECT_TRUE(check_range(*dst, 0, n, [&](size_t i) { return fold(i, 0); }, where(r, "result"), tol));
            EXPECT_TRUE(check_sentinel(*dst, n, where(r, "tail")));
          }
          expect_unchanged(*src, n);
          break;
        }
        case Call::allreduce: {
          auto src = own_input(n);
          auto dst = out_buffer<T>(a, n + kPad, out_host);
          a.allreduce(*src, *dst, static_cast<unsigned>(n), c.op, GLOBAL_COMM, false, false, cd);
          EXPECT_TRUE(check_range(*dst, 0, n, [&](size_t i) { return fold(i, 0); }, where(r, "result"), tol));
          EXPECT_TRUE(check_sentinel(*dst, n, where(r, "tail")));
          expect_unchanged(*src, n);
          break;
        }
        case Call::reduce_scatter: {
          auto src = own_input(n * P);
          auto dst = out_buffer<T>(a, n + kPad, out_host);
          a.reduce_scatter(*src, *dst, static_cast<unsigned>(n), c.op, GLOBAL_COMM, false, false, cd);
          EXPECT_TRUE(check_range(*dst, 0, n, [&](size_t i) { return fold(i, r * n); },
                                  where(r, "reduced chunk " + std::to_string(r)), tol));
          EXPECT_TRUE(check_sentinel(*dst, n, where(r, "tail")));
          expect_unchanged(*src, n * P);
          break;
        }
        case Call::alltoall: {
          auto src = own_input(n * P);
          auto dst = out_buffer<T>(a, n * P + kPad, out_host);
          a.alltoall(*src, *dst, static_cast<unsigned>(n), GLOBAL_COMM, false, false, cd);
          for (unsigned q = 0; q < P; ++q)
            EXPECT_TRUE(check_range(*dst, q * n, n, [&](size_t i) { return val(q, r * n + i); },
                                    where(r, "chunk from rank " + std::to_string(q)), tol));
          EXPECT_TRUE(check_sentinel(*dst, n * P, where(r, "tail")));
          expect_unchanged(*src, n * P);
          break;
        }
        case Call::nop:
        case Call::barrier:
          FAIL() << "not a data call";
      }
    });
  }
};

#define ACCL_COLLECTIVE_SUITE(Suite, CallId)                                                               \
  class Suite : public CollectiveTest {};                                                                  \
  TEST_P(Suite, Run) { Run(CallId); }                                                                      \
  INSTANTIATE_TEST_SUITE_P(P, Suite, ::testing::ValuesIn(make_cases(CallId, world_size(), options().quick)), \
                           CaseNamer());                                                                   \
  GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Suite)

ACCL_COLLECTIVE_SUITE(Copy, Call::copy);
ACCL_COLLECTIVE_SUITE(Combine, Call::combine);
ACCL_COLLECTIVE_SUITE(SendRecv, Call::sendrecv);
ACCL_COLLECTIVE_SUITE(Bcast, Call::bcast);
ACCL_COLLECTIVE_SUITE(Scatter, Call::scatter);
ACCL_COLLECTIVE_SUITE(Gather, Call::gather);
ACCL_COLLECTIVE_SUITE(Allgather, Call::allgather);
ACCL_COLLECTIVE_SUITE(Reduce, Call::reduce);
ACCL_COLLECTIVE_SUITE(Allreduce, Call::allreduce);
ACCL_COLLECTIVE_SUITE(ReduceScatter, Call::reduce_scatter);
ACCL_COLLECTIVE_SUITE(Alltoall, Call::alltoall);

// --- calls without data ------------------------------------------------------

TEST(Nop, SyncAndAsyncOnEveryRank) {
  World& w = World::get(world_size());
  w.run([&](unsigned r, ACCL& a) {
    auto req = a.nop();
    ASSERT_TRUE(req);
    EXPECT_TRUE(req->test()) << "rank " << r << ": a synchronous call returns a completed request";
    EXPECT_EQ(req->retcode(), 0u) << "rank " << r;
    EXPECT_EQ(req->call_name(), "nop");
    auto areq = a.nop(true);
    ASSERT_TRUE(areq);
    areq->wait();
    EXPECT_EQ(areq->retcode(), 0u) << "rank " << r;
    EXPECT_NE(areq->id(), req->id()) << "rank " << r << ": call ids are distinct";
  });
}

// No rank leaves the barrier before every rank has entered it. Ranks arrive
// staggered (rank r after r x 15 ms), several rounds.
TEST(Barrier, NobodyLeavesEarly) {
  World& w = World::get(world_size());
  const unsigned P = w.size();
  for (int round = 0; round < 3; ++round) {
    std::atomic<unsigned> entered{0};
    w.run([&](unsigned r, ACCL& a) {
      std::this_thread::sleep_for(std::chrono::milliseconds(15 * ((r + round) % P)));
      entered.fetch_add(1);
      a.barrier();
      EXPECT_EQ(entered.load(), P) << "rank " << r << " left barrier round " << round << " before all entered";
    });
  }
}

TEST(Barrier, ManyInARow) {
  World& w = World::get(world_size());
  w.run([&](unsigned, ACCL& a) {
    for (int i = 0; i < 20; ++i) a.barrier();
  });
}

// Calls of different kinds back to back on one world (protocol state must
// carry over: public ACCL hung on eager calls after a rendezvous alltoall).
TEST(Sequence, MixedCallsBackToBack) {
  World& w = World::get(world_size());
  const unsigned P = w.size();
  const size_t rx = w.rx_buffer_bytes() / 4;
  w.run([&](unsigned r, ACCL& a) {
    for (size_t n : {size_t{5}, rx + 1, size_t{3}, 4 * rx + 3}) {
      auto src = a.create_buffer<int32_t>(n * P);
      auto dst = a.create_buffer<int32_t>(n * P);
      for (size_t i = 0; i < n * P; ++i) (*src)[i] = static_cast<int32_t>(r * 1000 + i);
      a.alltoall(*src, *dst, static_cast<unsigned>(n));
      for (unsigned q = 0; q < P; ++q)
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ((*dst)[q * n + i], static_cast<int32_t>(q * 1000 + r * n + i)) << "alltoall n=" << n;
      a.allreduce(*src, *dst, static_cast<unsigned>(n), reduceFunction::SUM);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ((*dst)[i], static_cast<int32_t>(1000 * P * (P - 1) / 2 + P * i)) << "allreduce n=" << n;
      a.barrier();
      a.bcast(*src, static_cast<unsigned>(n), P - 1);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ((*src)[i], static_cast<int32_t>((P - 1) * 1000 + i)) << "bcast n=" << n;
    }
  });
}

// compress_dtype=float16 puts fp16 on the wire: what arrives is the float16
// rounding (round to nearest even, as accl::float_to_half) of what was sent,
// not the original float32 values.
TEST(Compression, WireCarriesFp16) {
  if (world_size() < 2) GTEST_SKIP() << "needs a peer";
  World& w = World::get(world_size());
  const unsigned P = w.size();
  w.run([&](unsigned r, ACCL& a) {
    const size_t n = 1000;
    auto val = [](unsigned q, size_t i) { return pattern_value(Pattern::compressed, dataType::float32, q, i, 9); };
    auto s = a.create_buffer<float>(n), d = a.create_buffer<float>(n), b = a.create_buffer<float>(n);
    fill(*s, 0, n, [&](size_t i) { return val(r, i); });
    const unsigned next = (r + 1) % P, prev = (r + P - 1) % P;
    auto q = a.recv(*d, n, prev, 21, GLOBAL_COMM, false, dataType::float16, true);
    a.send(*s, n, next, 21, GLOBAL_COMM, false, dataType::float16);
    q->wait();
    EXPECT_TRUE(check_range(*d, 0, n, [&](size_t i) { return fp16_roundtrip(val(prev, i)); },
                            "send/recv with fp16 on the wire, rank " + std::to_string(r)));
    size_t changed = 0;
    for (size_t i = 0; i < n; ++i) changed += (*d)[i] != static_cast<float>(val(prev, i));
    EXPECT_GT(changed, n / 2) << "values arrived unrounded: the wire did not carry fp16";
    // bcast: non-roots get the rounded root data.
    fill(*b, 0, n, [&](size_t i) { return r == 0 ? val(0, i) : kSentinel; });
    a.bcast(*b, n, 0, GLOBAL_COMM, false, false, dataType::float16);
    if (r != 0) {
      EXPECT_TRUE(check_range(*b, 0, n, [&](size_t i) { return fp16_roundtrip(val(0, i)); },
                              "bcast with fp16 on the wire, rank " + std::to_string(r)));
    }
  });
}

// In place (send buffer == receive buffer), as MPI_IN_PLACE maps to: the
// driver may refuse aliasing with ArgumentError, but if it accepts the call
// the result must be right.
TEST(InPlace, AllreduceReduceAlltoallAllgather) {
  World& w = World::get(world_size());
  const unsigned P = w.size();
  for (size_t n : {size_t{17}, size_t{300}, size_t{5000}}) {
    w.run([&](unsigned r, ACCL& a) {
      auto val = [](unsigned q, size_t i) { return static_cast<int32_t>(q * 100000 + i); };
      auto b = a.create_buffer<int32_t>(n * P);
      auto accepted = [&](auto&& call, const std::string& what) {
        try {
          call();
          return true;
        } catch (const accl::ArgumentError& e) {
          std::printf("rank %u: %s in place refused: %s\n", r, what.c_str(), e.what());
          return false;
        }
      };
      // allreduce
      for (size_t i = 0; i < n; ++i) (*b)[i] = val(r, i);
      if (accepted([&] { a.allreduce(*b, *b, n, reduceFunction::SUM); }, "allreduce")) {
        for (size_t i = 0; i < n; ++i) {
          int64_t sum = 0;
          for (unsigned q = 0; q < P; ++q) sum += val(q, i);
          ASSERT_EQ((*b)[i], static_cast<int32_t>(sum)) << "in-place allreduce rank " << r << " n=" << n;
        }
      }
      // reduce to root 0
      for (size_t i = 0; i < n; ++i) (*b)[i] = val(r, i);
      if (accepted([&] { a.reduce(*b, *b, n, 0, reduceFunction::MAX); }, "reduce") && r == 0) {
        for (size_t i = 0; i < n; ++i) ASSERT_EQ((*b)[i], val(P - 1, i)) << "in-place reduce n=" << n;
      }
      // alltoall
      for (size_t i = 0; i < n * P; ++i) (*b)[i] = val(r, i);
      if (accepted([&] { a.alltoall(*b, *b, n); }, "alltoall")) {
        for (unsigned q = 0; q < P; ++q)
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ((*b)[q * n + i], val(q, r * n + i)) << "in-place alltoall rank " << r << " n=" << n;
      }
      // allgather: own contribution already in its slot
      for (size_t i = 0; i < n * P; ++i) (*b)[i] = -1;
      for (size_t i = 0; i < n; ++i) (*b)[r * n + i] = val(r, i);
      auto own = b->slice(r * n, (r + 1) * n);
      if (accepted([&] { a.allgather(*own, *b, n); }, "allgather")) {
        b->sync_from_device();
        for (unsigned q = 0; q < P; ++q)
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ((*b)[q * n + i], val(q, i)) << "in-place allgather rank " << r << " n=" << n;
      }
    });
  }
}

// Point-to-point to oneself inside a larger world, interleaved with traffic
// from a peer on the same tag.
TEST(PointToPoint, ToSelfInsideWorld) {
  World& w = World::get(world_size());
  const unsigned P = w.size();
  w.run([&](unsigned r, ACCL& a) {
    for (size_t n : {size_t{5}, size_t{700}}) {
      auto s = a.create_buffer<float>(n), d = a.create_buffer<float>(n);
      for (size_t i = 0; i < n; ++i) (*s)[i] = static_cast<float>(r * 1000 + i);
      auto q = a.recv(*d, n, r, 33, GLOBAL_COMM, false, dataType::none, true);
      a.send(*s, n, r, 33);
      q->wait();
      for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], static_cast<float>(r * 1000 + i)) << "self send, rank " << r;
    }
  });
  (void)P;
}

// Extreme tag values.
TEST(PointToPoint, TagRange) {
  if (world_size() < 2) GTEST_SKIP() << "needs a peer";
  World& w = World::get(world_size());
  w.run([&](unsigned r, ACCL& a) {
    if (r > 1) return;
    for (unsigned tag : {0u, 1u, 0x7FFFFFFFu, 0xFFFFFFFEu}) {
      auto b = a.create_buffer<int32_t>(3);
      if (r == 0) {
        (*b)[0] = static_cast<int32_t>(tag);
        (*b)[1] = 7;
        (*b)[2] = -7;
        a.send(*b, 3, 1, tag);
      } else {
        a.recv(*b, 3, 0, tag);
        EXPECT_EQ((*b)[0], static_cast<int32_t>(tag));
        EXPECT_EQ((*b)[2], -7);
      }
    }
  });
}

// Collectives on slices (offset device addresses) and on wrapped user memory.
TEST(Buffers, CollectivesOnSlices) {
  World& w = World::get(world_size());
  const unsigned P = w.size();
  w.run([&](unsigned r, ACCL& a) {
    for (bool host : {false, true}) {
      const size_t n = 300, off = 7;
      auto big_s = make_buffer<int32_t>(a, off + n * P + 5, host);
      auto big_d = make_buffer<int32_t>(a, off + n * P + 5, host);
      for (size_t i = 0; i < big_s->length(); ++i) (*big_s)[i] = -3;
      for (size_t i = 0; i < n * P; ++i) (*big_s)[off + i] = static_cast<int32_t>(r * 100000 + i);
      for (size_t i = 0; i < big_d->length(); ++i) (*big_d)[i] = -4;
      if (!host) {
        big_s->sync_to_device();
        big_d->sync_to_device();
      }
      auto s = big_s->slice(off, off + n * P);
      auto d = big_d->slice(off, off + n * P);
      a.allgather(*s, *d, n);
      for (unsigned q = 0; q < P; ++q)
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ((*big_d)[off + q * n + i], static_cast<int32_t>(q * 100000 + i)) << "allgather into slice";
      for (size_t i = 0; i < off; ++i) ASSERT_EQ((*big_d)[i], -4) << "allgather wrote before the slice";
      a.alltoall(*s, *big_d->slice(off, off + n * P), n, GLOBAL_COMM, false, true);
      a.allreduce(*s, *d, n, reduceFunction::SUM, GLOBAL_COMM, false, true);
      if (!host) big_d->sync_from_device();
      for (size_t i = 0; i < off; ++i) ASSERT_EQ((*big_d)[i], -4) << "before the slice, rank " << r;
      for (size_t i = 0; i < n; ++i) {
        int64_t sum = 0;
        for (unsigned q = 0; q < P; ++q) sum += q * 100000 + i;
        ASSERT_EQ((*big_d)[off + i], static_cast<int32_t>(sum)) << "allreduce into slice, rank " << r << " [" << i << "]";
      }
      // Elements n..nP of the slice hold alltoall's result (allreduce wrote only n).
      for (unsigned q = 1; q < P; ++q)
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ((*big_d)[off + q * n + i], static_cast<int32_t>(q * 100000 + r * n + i))
              << "alltoall into slice, rank " << r;
      for (size_t i = off + n * P; i < big_d->length(); ++i) ASSERT_EQ((*big_d)[i], -4) << "after the slice";
    }
  });
}

TEST(Buffers, CollectivesOnUserMemory) {
  World& w = World::get(world_size());
  const unsigned P = w.size();
  w.run([&](unsigned r, ACCL& a) {
    const size_t n = 1000;
    std::vector<double> in(n), out(n * P, -1.0), dev_out(n * P, -1.0);
    for (size_t i = 0; i < n; ++i) in[i] = r + 0.5 * i;
    auto s = a.create_buffer_host<double>(in.data(), n);
    auto d = a.create_buffer_host<double>(out.data(), n * P);
    auto dd = a.create_buffer<double>(dev_out.data(), n * P);
    a.allgather(*s, *d, n);
    a.gather(*s, *dd, n, P - 1);
    for (unsigned q = 0; q < P; ++q)
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(out[q * n + i], q + 0.5 * i) << "allgather into user memory";
        if (r == P - 1) {
          ASSERT_EQ(dev_out[q * n + i], q + 0.5 * i) << "gather into wrapped user memory";
        }
      }
  });
}

// Two independent worlds in one process, busy at the same time.
TEST(Worlds, TwoWorldsConcurrently) {
  World& w1 = World::get(world_size());
  World& w2 = World::get(world_size(), WorldConfig{"second"});
  auto body = [](World& w, int salt) {
    const unsigned P = w.size();
    w.run([&](unsigned r, ACCL& a) {
      for (int it = 0; it < 20; ++it) {
        const size_t n = (it % 2) ? 17 : 600;
        auto s = a.create_buffer<int64_t>(n), d = a.create_buffer<int64_t>(n);
        for (size_t i = 0; i < n; ++i) (*s)[i] = salt * 1000000 + r * 1000 + it;
        a.allreduce(*s, *d, n, reduceFunction::SUM);
        const int64_t exp = static_cast<int64_t>(P) * (salt * 1000000 + it) + 1000 * P * (P - 1) / 2;
        for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], exp) << "world " << salt << " iteration " << it;
      }
    });
  };
  std::thread t([&] { body(w2, 2); });
  body(w1, 1);
  t.join();
}

}  // namespace
}  // namespace acclt
