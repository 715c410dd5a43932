// SPDX-License-Identifier: Apache-2.0
//
// core-errors: every misuse ends in a named error, never a hang or a silent
// wrong result, and the device stays usable afterwards: bad root / rank /
// count / buffer size / communicator / function / type, calls before
// initialize() and after deinit(), a message above the RX capacity with
// rendezvous disabled, a peer that never sends (timeout naming call and
// rank), truncation.
#include "common/types.hpp"
#include "common/world.hpp"

#include <accl/accl.hpp>
#include <accl_emu/emulator.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include <typeinfo>

namespace acclt {
namespace {

using accl::ACCL;
using accl::ArgumentError;
using accl::GLOBAL_COMM;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

WorldConfig errors_config() {
  WorldConfig c;
  c.name = "errors";
  return c;
}

// The device still works: a small allreduce across the world.
void expect_world_usable(World& w, const std::string& after) {
  w.run([&](unsigned r, ACCL& a) {
    auto s = a.create_buffer<int32_t>(5), d = a.create_buffer<int32_t>(5);
    for (int i = 0; i < 5; ++i) (*s)[i] = static_cast<int>(r) + i;
    a.allreduce(*s, *d, 5, reduceFunction::SUM);
    const int P = static_cast<int>(w.size());
    for (int i = 0; i < 5; ++i) ASSERT_EQ((*d)[i], P * (P - 1) / 2 + P * i) << "after " << after;
  });
}

// Expects `stmt` to throw ArgumentError naming `call` and this rank.
#define EXPECT_ARG_ERROR(stmt, callname, rank_)                                                         \
  do {                                                                                                 \
    try {                                                                                              \
      stmt;                                                                                            \
      ADD_FAILURE() << "no ArgumentError from: " #stmt;                                                \
    } catch (const accl::ArgumentError& e) {                                                           \
      EXPECT_EQ(e.call(), callname) << e.what();                                                       \
      EXPECT_EQ(e.rank(), static_cast<int>(rank_)) << e.what();                                        \
      EXPECT_NE(std::string(e.what()).find(callname), std::string::npos)                               \
          << "message does not name the call: " << e.what();                                          \
    } catch (const std::exception& e) {                                                                \
      ADD_FAILURE() << "expected ArgumentError from " #stmt ", got " << typeid(e).name() << ": "       \
                    << e.what();                                                                       \
    }                                                                                                  \
  } while (0)

TEST(ArgumentErrors, BadRootAndRank) {
  World& w = World::get(2, errors_config());
  w.run([&](unsigned r, ACCL& a) {
    auto s = a.create_buffer<float>(64), d = a.create_buffer<float>(64);
    EXPECT_ARG_ERROR(a.bcast(*s, 4, 2), "bcast", r);
    EXPECT_ARG_ERROR(a.bcast(*s, 4, 1000), "bcast", r);
    EXPECT_ARG_ERROR(a.scatter(*s, *d, 4, 2), "scatter", r);
    EXPECT_ARG_ERROR(a.gather(*s, *d, 4, 2), "gather", r);
    EXPECT_ARG_ERROR(a.reduce(*s, *d, 4, 2, reduceFunction::SUM), "reduce", r);
    EXPECT_ARG_ERROR(a.send(*s, 4, 2), "send", r);
    EXPECT_ARG_ERROR(a.recv(*d, 4, 5), "recv", r);
    EXPECT_ARG_ERROR(a.stream_put(*s, 4, 2, 9), "stream_put", r);
  });
  expect_world_usable(w, "bad root / rank");
}

TEST(ArgumentErrors, BufferTooSmallForCount) {
  World& w = World::get(2, errors_config());
  w.run([&](unsigned r, ACCL& a) {
    auto b8 = a.create_buffer<int32_t>(8), b16 = a.create_buffer<int32_t>(16), b15 = a.create_buffer<int32_t>(15);
    auto h8 = a.create_buffer_host<int32_t>(8);
    EXPECT_ARG_ERROR(a.copy(*b8, *b16, 9), "copy", r);
    EXPECT_ARG_ERROR(a.copy(*b16, *b8, 9), "copy", r);
    EXPECT_ARG_ERROR(a.copy(*b16, *h8, 9), "copy", r);
    EXPECT_ARG_ERROR(a.combine(9, reduceFunction::SUM, *b16, *b8, *b16), "combine", r);
    EXPECT_ARG_ERROR(a.send(*b8, 9, 1 - r), "send", r);
    EXPECT_ARG_ERROR(a.recv(*b8, 9, 1 - r), "recv", r);
    EXPECT_ARG_ERROR(a.bcast(*b8, 9, 0), "bcast", r);
    // Per-rank counts: the P x count side must fit too.
    EXPECT_ARG_ERROR(a.allgather(*b8, *b15, 8), "allgather", r);
    EXPECT_ARG_ERROR(a.alltoall(*b15, *b16, 8), "alltoall", r);
    EXPECT_ARG_ERROR(a.alltoall(*b16, *b15, 8), "alltoall", r);
    EXPECT_ARG_ERROR(a.reduce_scatter(*b15, *b8, 8, reduceFunction::SUM), "reduce_scatter", r);
    EXPECT_ARG_ERROR(a.allreduce(*b16, *b8, 9, reduceFunction::SUM), "allreduce", r);
    if (r == 0) {
      EXPECT_ARG_ERROR(a.scatter(*b15, *b8, 8, 0), "scatter", r);
      EXPECT_ARG_ERROR(a.gather(*b8, *b15, 8, 0), "gather", r);
      EXPECT_ARG_ERROR(a.reduce(*b16, *b8, 9, 0, reduceFunction::MAX), "reduce", r);
    }
    // A slice is as small as its range.
    auto s = b16->slice(4, 8);
    EXPECT_ARG_ERROR(a.copy(*s, *b16, 5), "copy", r);
  });
  expect_world_usable(w, "buffer too small");
}

TEST(ArgumentErrors, BadCommunicator) {
  World& w = World::get(2, errors_config());
  w.run([&](unsigned r, ACCL& a) {
    auto s = a.create_buffer<float>(16), d = a.create_buffer<float>(16);
    const accl::communicatorId bad = 4242;
    EXPECT_ARG_ERROR(a.send(*s, 4, 1 - r, 0, bad), "send", r);
    EXPECT_ARG_ERROR(a.recv(*d, 4, 1 - r, 0, bad), "recv", r);
    EXPECT_ARG_ERROR(a.bcast(*s, 4, 0, bad), "bcast", r);
    EXPECT_ARG_ERROR(a.allreduce(*s, *d, 4, reduceFunction::SUM, bad), "allreduce", r);
    EXPECT_ARG_ERROR(a.alltoall(*s, *d, 4, bad), "alltoall", r);
    EXPECT_ARG_ERROR(a.barrier(bad), "barrier", r);
    EXPECT_THROW(a.get_comm_size(bad), accl::Error);
  });
  expect_world_usable(w, "bad communicator");
}

TEST(ArgumentErrors, FreedCommunicator) {
  World& w = World::get(2, errors_config());
  w.run([&](unsigned r, ACCL& a) {
    const accl::communicatorId c = a.split_communicator({0, 1});
    auto s = a.create_buffer<int32_t>(4), d = a.create_buffer<int32_t>(4);
    for (int i = 0; i < 4; ++i) (*s)[i] = i;
    a.allreduce(*s, *d, 4, reduceFunction::SUM, c);
    for (int i = 0; i < 4; ++i) EXPECT_EQ((*d)[i], 2 * i);
    a.free_communicator(c);
    EXPECT_ARG_ERROR(a.allreduce(*s, *d, 4, reduceFunction::SUM, c), "allreduce", r);
    EXPECT_ARG_ERROR(a.send(*s, 4, 1 - r, 0, c), "send", r);
  });
  expect_world_usable(w, "freed communicator");
}

TEST(ArgumentErrors, BadFunctionTypeAndCompression) {
  World& w = World::get(2, errors_config());
  w.run([&](unsigned r, ACCL& a) {
    auto f = a.create_buffer<float>(16), f2 = a.create_buffer<float>(16);
    auto i32 = a.create_buffer<int32_t>(16), i32b = a.create_buffer<int32_t>(16);
    auto d = a.create_buffer<double>(16);
    const auto bad_fn = static_cast<reduceFunction>(9);
    EXPECT_ARG_ERROR(a.combine(4, bad_fn, *f, *f2, *f2), "combine", r);
    EXPECT_ARG_ERROR(a.allreduce(*f, *f2, 4, bad_fn), "allreduce", r);
    // Operand types must agree.
    EXPECT_ARG_ERROR(a.allreduce(*f, *i32, 4, reduceFunction::SUM), "allreduce", r);
    EXPECT_ARG_ERROR(a.combine(4, reduceFunction::SUM, *f, *d, *f2), "combine", r);
    // fp16 compression is defined for float32 only (no (int32, float16) or (float64, float16) config).
    EXPECT_ARG_ERROR(a.allreduce(*i32, *i32b, 4, reduceFunction::SUM, GLOBAL_COMM, false, false, dataType::float16),
                     "allreduce", r);
    EXPECT_ARG_ERROR(a.send(*d, 4, 1 - r, 0, GLOBAL_COMM, false, dataType::float16), "send", r);
    // Kernel stream ids above 246 do not exist.
    EXPECT_ARG_ERROR(a.stream_put(*f, 4, 1 - r, 247), "stream_put", r);
  });
  expect_world_usable(w, "bad function / type / compression");
}

// Count 0: every call either completes at once (nothing to do) or is refused
// with ArgumentError; never a hang or a device error.
TEST(ArgumentErrors, ZeroCountNeverHangs) {
  World& w = World::get(2, errors_config());
  w.run([&](unsigned r, ACCL& a) {
    auto s = a.create_buffer<float>(8), d = a.create_buffer<float>(8);
    const unsigned peer = 1 - r;
    std::vector<std::pair<std::string, std::function<void()>>> calls = {
        {"copy", [&] { a.copy(*s, *d, 0); }},
        {"combine", [&] { a.combine(0, reduceFunction::SUM, *s, *s, *d); }},
        {"bcast", [&] { a.bcast(*s, 0, 0); }},
        {"scatter", [&] { a.scatter(*s, *d, 0, 1); }},
        {"gather", [&] { a.gather(*s, *d, 0, 0); }},
        {"allgather", [&] { a.allgather(*s, *d, 0); }},
        {"reduce", [&] { a.reduce(*s, *d, 0, 1, reduceFunction::SUM); }},
        {"allreduce", [&] { a.allreduce(*s, *d, 0, reduceFunction::SUM); }},
        {"reduce_scatter", [&] { a.reduce_scatter(*s, *d, 0, reduceFunction::SUM); }},
        {"alltoall", [&] { a.alltoall(*s, *d, 0); }},
        {"sendrecv", [&] {
           auto q = a.recv(*d, 0, peer, 5, GLOBAL_COMM, false, dataType::none, true);
           a.send(*s, 0, peer, 5);
           q->wait();
         }},
    };
    for (auto& [name, call] : calls) {
      const auto t0 = Clock::now();
      try {
        call();
      } catch (const accl::ArgumentError&) {
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << " with count 0 on rank " << r << ": " << e.what();
      }
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
      EXPECT_LT(ms, 2000) << name << " with count 0 took " << ms << " ms on rank " << r;
    }
  });
  expect_world_usable(w, "count 0");
}

// --- configuration state -----------------------------------------------------

TEST(Unconfigured, CallsBeforeInitializeAndAfterDeinit) {
  accl::emu::EmuOptions eo = accl::emu::options_from_environment();
  eo.port = 0;
  auto dev = accl::emu::create_device(eo);
  ASSERT_TRUE(dev);
  const accl::emu::Endpoint ep = accl::emu::endpoint(*dev);
  ACCL a(std::move(dev));
  EXPECT_FALSE(a.initialized());
  auto b = a.create_buffer<float>(8), c = a.create_buffer<float>(8);
  EXPECT_ARG_ERROR(a.nop(), "nop", a.local_rank());
  EXPECT_ARG_ERROR(a.copy(*b, *c, 8), "copy", a.local_rank());
  EXPECT_ARG_ERROR(a.barrier(), "barrier", a.local_rank());

  accl::rank_t self;
  self.ip = ep.ip;
  self.port = ep.port;
  a.initialize({self}, 0);
  EXPECT_TRUE(a.initialized());
  for (int i = 0; i < 8; ++i) (*b)[i] = 1.5f * i;
  a.copy(*b, *c, 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ((*c)[i], 1.5f * i);

  a.deinit();
  EXPECT_FALSE(a.initialized());
  EXPECT_ARG_ERROR(a.nop(), "nop", 0);
  EXPECT_ARG_ERROR(a.copy(*b, *c, 8), "copy", 0);
  EXPECT_ARG_ERROR(a.allreduce(*b, *c, 8, reduceFunction::SUM), "allreduce", 0);

  // Buffers survive deinit and the object can be initialized again.
  a.initialize({self}, 0);
  for (int i = 0; i < 8; ++i) (*b)[i] = -2.0f * i;
  a.copy(*b, *c, 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ((*c)[i], -2.0f * i);
  a.deinit();
}

TEST(Unconfigured, DeinitAndReinitializeLocalWorld) {
  auto world = accl::emu::create_local_world(2);
  ASSERT_EQ(world.size(), 2u);
  std::vector<accl::rank_t> ranks = world[0]->get_comm_group();
  ASSERT_EQ(ranks.size(), 2u);
  for (auto& a : world) a->deinit();
  for (auto& a : world) EXPECT_ARG_ERROR(a->barrier(), "barrier", a->local_rank());
  std::vector<std::thread> th;
  for (int r = 0; r < 2; ++r) th.emplace_back([&, r] { world[r]->initialize(ranks, r); });
  for (auto& t : th) t.join();
  th.clear();
  std::vector<int32_t> got(2, 0);
  for (int r = 0; r < 2; ++r)
    th.emplace_back([&, r] {
      try {
        auto s = world[r]->create_buffer<int32_t>(1), d = world[r]->create_buffer<int32_t>(1);
        (*s)[0] = 10 + r;
        world[r]->allreduce(*s, *d, 1, reduceFunction::SUM);
        got[r] = (*d)[0];
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  for (auto& t : th) t.join();
  EXPECT_EQ(got[0], 21);
  EXPECT_EQ(got[1], 21);
}

// --- timeouts ------------------------------------------------------------------

// Rank 0 waits for a message rank 1 never sends: a timeout error naming the
// call and the rank, after about the configured timeout (300 ms), not the
// default one.
TEST(Timeout, PeerNeverSends) {
  World& w = World::get(2, errors_config());
  w.run([&](unsigned r, ACCL& a) {
    if (r != 0) return;
    const auto saved = a.timeout();
    a.set_timeout(300ms);
    EXPECT_EQ(a.timeout(), std::chrono::microseconds(300000));
    auto buf = a.create_buffer<float>(64);
    const auto t0 = Clock::now();
    try {
      a.recv(*buf, 64, 1, 77);
      ADD_FAILURE() << "recv from a silent peer returned";
    } catch (const accl::Error& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
      EXPECT_GE(ms, 250) << "timed out too early: " << e.what();
      EXPECT_LE(ms, 3000) << "timeout not honoured: " << e.what();
      EXPECT_EQ(e.call(), "recv") << e.what();
      EXPECT_EQ(e.rank(), 0) << e.what();
      const std::string msg = e.what();
      EXPECT_NE(msg.find("recv"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
      if (auto* de = dynamic_cast<const accl::DeviceError*>(&e)) {
        EXPECT_TRUE(de->retcode() & accl::abi::kReceiveTimeoutError) << msg;
        EXPECT_NE(msg.find("RECEIVE_TIMEOUT_ERROR"), std::string::npos) << msg;
      } else {
        EXPECT_NE(dynamic_cast<const accl::TimeoutError*>(&e), nullptr) << "unexpected error kind: " << msg;
      }
    }
    a.set_timeout(saved);
    // The device is usable right after.
    a.nop();
  });
  expect_world_usable(w, "recv timeout");
}

// The same for a collective and for async requests.
TEST(Timeout, CollectiveWithMissingRank) {
  World& w = World::get(3, errors_config());
  w.run([&](unsigned r, ACCL& a) {
    if (r == 2) return;  // never joins
    a.set_timeout(300ms);
    auto s = a.create_buffer<int32_t>(10), d = a.create_buffer<int32_t>(10);
    const auto t0 = Clock::now();
    auto req = a.allreduce(*s, *d, 10, reduceFunction::SUM, GLOBAL_COMM, false, false, dataType::none, true);
    try {
      req->wait();
      ADD_FAILURE() << "rank " << r << ": allreduce without rank 2 completed";
    } catch (const accl::Error& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
      EXPECT_LE(ms, 3000) << e.what();
      EXPECT_EQ(e.call(), "allreduce") << e.what();
      EXPECT_EQ(e.rank(), static_cast<int>(r)) << e.what();
      EXPECT_NE(std::string(e.what()).find("allreduce"), std::string::npos) << e.what();
    }
  });
  w.poison();  // partial collective traffic may be left in RX buffers
}

// Collectives whose arguments differ across ranks (count, reduce function,
// root): the firmware compares a signature of each collective carried by its
// messages and fails with INVALID_ARGUMENT. Every rank ends within the
// timeout with an error (count and function: INVALID_ARGUMENT on every rank,
// long before the timeout; root: INVALID_ARGUMENT where detectable, else a
// timeout), a rank that "succeeds" does so only where the mismatch is harmless
// (it holds the data of the root it named), no
// buffer is written beyond its count, and the next correct collective works
// (messages of the failed one are never matched by it). Eager and rendezvous
// sizes. Before the signature, count and function mismatches returned wrong
// data as success.
// in_place: one rank runs the allreduce in place, the others do not; at
// sizes where that changes the algorithm (the direct allreduce is not in
// place) the ranks must fail like for any other argument mismatch.
enum class Mismatch { count, function, root, in_place };

struct MismatchCase {
  unsigned P;
  Mismatch kind;
  unsigned n;  // elements (rendezvous above 256 int32 with the default 1 KiB eager limit)
};

class CollectiveMismatch : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(CollectiveMismatch, NamedErrorNeverWrongData) {
  const MismatchCase c = GetParam();
  auto world = accl::emu::create_local_world(c.P);
  constexpr unsigned kGuard = 64;
  constexpr int32_t kSentinel = -777;
  std::vector<std::string> outcome(c.P);
  // One byte per rank: the rank threads write their own entries at the same
  // time, and std::vector<bool> packs them into shared words (a data race
  // that lost an entry once, in CI).
  std::vector<char> invalid_argument(c.P, 0);
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (unsigned r = 0; r < c.P; ++r) {
    threads.emplace_back([&, r] {
      ACCL& a = *world[r];
      a.set_timeout(1s);
      const bool odd = r == c.P - 1;  // the rank with other arguments
      const unsigned count = c.kind == Mismatch::count && odd ? 2 * c.n : c.n;
      auto s = a.create_buffer<int32_t>(count + kGuard), d = a.create_buffer<int32_t>(count + kGuard);
      for (unsigned i = 0; i < count + kGuard; ++i) {
        (*s)[i] = i < count ? static_cast<int32_t>(r + 1 + i) : kSentinel;
        (*d)[i] = kSentinel;
      }
      try {
        if (c.kind == Mismatch::root) {
          a.bcast(*s, count, odd ? 1 : 0);
        } else {
          const auto f = c.kind == Mismatch::function && odd ? reduceFunction::MAX : reduceFunction::SUM;
          if (c.kind == Mismatch::in_place && odd) a.allreduce(*s, *s, count, f);
          else a.allreduce(*s, *d, count, f);
        }
        outcome[r] = "success";
      } catch (const accl::Error& e) {
        outcome[r] = e.what();
        if (auto* de = dynamic_cast<const accl::DeviceError*>(&e)) {
          invalid_argument[r] = (de->retcode() & accl::abi::kInvalidArgument) != 0 ? 1 : 0;
          if (invalid_argument[r]) {
            EXPECT_NE(outcome[r].find("different arguments"), std::string::npos) << outcome[r];
          }
        }
      }
      for (unsigned i = count; i < count + kGuard; ++i) {
        ASSERT_EQ((*s)[i], kSentinel) << "rank " << r << " wrote past its count at " << i;
        ASSERT_EQ((*d)[i], kSentinel) << "rank " << r << " wrote past its count at " << i;
      }
      if (outcome[r] == "success") {
        // Count and function mismatches: the odd rank and its neighbours
        // always exchange messages, so nobody may succeed. A root mismatch
        // changes who talks to whom, so it is often not observable; a rank
        // may finish only where that is harmless: it holds the data of the
        // root it named (a root keeps its own).
        ASSERT_EQ(c.kind, Mismatch::root) << "rank " << r << " reported success";
        const unsigned my_root = odd ? 1 : 0;
        for (unsigned i = 0; i < count; ++i) ASSERT_EQ((*s)[i], static_cast<int32_t>(my_root + 1 + i)) << i;
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  std::string all;
  for (unsigned r = 0; r < c.P; ++r) all += "\n rank " + std::to_string(r) + ": " + outcome[r];
  EXPECT_LE(ms, 5000) << all;
  // Count and function: in every allreduce algorithm some rank receives from
  // a rank with other arguments, names the mismatch and tells all members
  // (abort notice), so every rank fails with INVALID_ARGUMENT, not a timeout.
  if (c.kind != Mismatch::root) {
    for (unsigned r = 0; r < c.P; ++r) EXPECT_TRUE(invalid_argument[r]) << "rank " << r << all;
    EXPECT_LT(ms, 900) << "mismatch not reported before the 1 s timeout" << all;
  }
  // Root: a rank still running the collective that gets a message of it from
  // a rank that named another root names the mismatch; but ranks may also
  // just wait for messages that never come (RECEIVE_TIMEOUT_ERROR) or finish
  // harmlessly (checked above), depending on timing and the algorithm.

  // The next collective with equal arguments works on every rank; after a
  // root mismatch, a rank whose broadcast succeeded while a late message of
  // it showed the mismatch reports it there instead (see
  // BcastRootMismatch), and the one after that works.
  const int rounds = c.kind == Mismatch::root ? 2 : 1;
  for (int round = 0; round < rounds; ++round) {
    threads.clear();
    for (unsigned r = 0; r < c.P; ++r) {
      threads.emplace_back([&, r, round] {
        ACCL& a = *world[r];
        auto s = a.create_buffer<int32_t>(c.n), d = a.create_buffer<int32_t>(c.n);
        for (unsigned i = 0; i < c.n; ++i) (*s)[i] = static_cast<int32_t>(r + i);
        try {
          a.allreduce(*s, *d, c.n, reduceFunction::SUM);
          const int P = static_cast<int>(c.P);
          for (unsigned i = 0; i < c.n; ++i) ASSERT_EQ((*d)[i], P * (P - 1) / 2 + P * static_cast<int>(i)) << i;
        } catch (const accl::Error& e) {
          const bool reports_earlier = round == 0 && rounds == 2 &&
                                       std::string(e.what()).find("different arguments") != std::string::npos;
          if (!reports_earlier) ADD_FAILURE() << "rank " << r << " after the mismatch: " << e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
  }
}

// Issue 38: MPI_Bcast with different roots returned success on every rank
// when the ranks that named themselves root only sent (2 ranks naming 0 and
// 1; 3 ranks each naming itself): nobody received a message of the
// broadcast while it ran, so nobody compared signatures. A message of it
// that arrives after it ended now fails the communicator's next collective
// with INVALID_ARGUMENT ("different arguments") on every such rank, and
// the collective after that works again.
struct RootMismatchCase {
  std::vector<unsigned> roots;  // the root each rank names
  unsigned n;                   // int32 elements (eager at 40, pre-granted rendezvous at 3000)
};

class BcastRootMismatch : public ::testing::TestWithParam<RootMismatchCase> {};

TEST_P(BcastRootMismatch, ReportedOnEveryRankNeverSilent) {
  const RootMismatchCase c = GetParam();
  const unsigned P = static_cast<unsigned>(c.roots.size());
  auto world = accl::emu::create_local_world(P);
  std::vector<std::string> bcast_outcome(P), next_outcome(P);
  std::vector<std::thread> threads;
  for (unsigned r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      ACCL& a = *world[r];
      a.set_timeout(1s);
      auto b = a.create_buffer<int32_t>(c.n);
      auto s = a.create_buffer<int32_t>(c.n), d = a.create_buffer<int32_t>(c.n);
      for (unsigned i = 0; i < c.n; ++i) (*b)[i] = (*s)[i] = static_cast<int32_t>(r);
      try {
        a.bcast(*b, c.n, c.roots[r]);
        bcast_outcome[r] = "success";
      } catch (const accl::Error& e) {
        bcast_outcome[r] = e.what();
      }
      try {
        a.allreduce(*s, *d, c.n, reduceFunction::SUM);
        next_outcome[r] = "success";
        for (unsigned i = 0; i < c.n; ++i) ASSERT_EQ((*d)[i], static_cast<int32_t>(P * (P - 1) / 2)) << i;
      } catch (const accl::Error& e) {
        next_outcome[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::string all;
  for (unsigned r = 0; r < P; ++r)
    all += "\n rank " + std::to_string(r) + ": bcast " + bcast_outcome[r] + "; next " + next_outcome[r];
  for (unsigned r = 0; r < P; ++r) {
    // Every rank names itself root here: each only sends, so each must hear
    // of the mismatch through the late messages of the others.
    EXPECT_TRUE(bcast_outcome[r] != "success" || next_outcome[r].find("different arguments") != std::string::npos)
        << "rank " << r << " never reported the root mismatch" << all;
  }
  // The collective after that works everywhere.
  threads.clear();
  for (unsigned r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      ACCL& a = *world[r];
      auto s = a.create_buffer<int32_t>(c.n), d = a.create_buffer<int32_t>(c.n);
      for (unsigned i = 0; i < c.n; ++i) (*s)[i] = static_cast<int32_t>(r);
      try {
        a.allreduce(*s, *d, c.n, reduceFunction::SUM);
        for (unsigned i = 0; i < c.n; ++i) ASSERT_EQ((*d)[i], static_cast<int32_t>(P * (P - 1) / 2)) << i;
      } catch (const accl::Error& e) {
        ADD_FAILURE() << "rank " << r << " after the reported mismatch: " << e.what() << all;
      }
    });
  }
  for (auto& t : threads) t.join();
}

INSTANTIATE_TEST_SUITE_P(Roots, BcastRootMismatch,
                         ::testing::Values(RootMismatchCase{{0, 1}, 40}, RootMismatchCase{{0, 1}, 3000},
                                           RootMismatchCase{{0, 1, 2}, 40}, RootMismatchCase{{0, 1, 2}, 3000}),
                         [](const ::testing::TestParamInfo<RootMismatchCase>& i) {
                           return "P" + std::to_string(i.param.roots.size()) + "_n" + std::to_string(i.param.n);
                         });

std::vector<MismatchCase> mismatch_cases() {
  std::vector<MismatchCase> v;
  for (unsigned P = 2; P <= 4; ++P)
    for (Mismatch k : {Mismatch::count, Mismatch::function, Mismatch::root})
      for (unsigned n : {40u, 3000u}) v.push_back({P, k, n});
  v.push_back({4, Mismatch::in_place, 4 * 131072});  // 512 KiB chunks: the direct allreduce, unless in place
  return v;
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectiveMismatch, ::testing::ValuesIn(mismatch_cases()),
                         [](const ::testing::TestParamInfo<MismatchCase>& i) {
                           const char* kind = i.param.kind == Mismatch::count      ? "count"
                                              : i.param.kind == Mismatch::function ? "function"
                                              : i.param.kind == Mismatch::in_place ? "in_place"
                                                                                   : "root";
                           return std::string(kind) + "_P" + std::to_string(i.param.P) + "_n" +
                                  std::to_string(i.param.n);
                         });

// Destroying drivers while a request is still pending must not hang: the
// destructor ends the call (or waits at most its timeout).
TEST(Lifecycle, DestroyWithPendingRequest) {
  auto world = accl::emu::create_local_world(2);
  for (auto& a : world) a->set_timeout(1s);
  auto buf = world[0]->create_buffer<float>(100);
  auto req = world[0]->recv(*buf, 100, 1, 1, GLOBAL_COMM, false, dataType::none, true);
  EXPECT_FALSE(req->test());
  const auto t0 = Clock::now();
  buf.reset();
  world.clear();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_LT(ms, 5000) << "destroying the world took " << ms << " ms";
  // The request outlives its driver: asking it must not crash or hang.
  try {
    (void)req->test();
  } catch (const accl::Error&) {
  }
}

// A failed asynchronous request reports its error through test() and wait().
TEST(Timeout, AsyncRequestFailsThroughTestAndWait) {
  World& w = World::get(2, errors_config());
  w.run([&](unsigned r, ACCL& a) {
    if (r != 0) return;
    const auto saved = a.timeout();
    a.set_timeout(300ms);
    auto buf = a.create_buffer<int32_t>(8);
    auto req = a.recv(*buf, 8, 1, 99, GLOBAL_COMM, false, dataType::none, true);
    const auto deadline = Clock::now() + 5s;
    bool threw = false;
    while (Clock::now() < deadline) {
      try {
        if (req->test()) break;
      } catch (const accl::Error& e) {
        threw = true;
        EXPECT_EQ(e.call(), "recv") << e.what();
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
    EXPECT_TRUE(threw) << "test() never reported the timeout";
    EXPECT_THROW(req->wait(), accl::Error) << "wait() after the failure";
    a.set_timeout(saved);
  });
  expect_world_usable(w, "async timeout");
}

// --- rendezvous disabled, message above the RX capacity ------------------------

TEST(EagerOnly, MessageAboveRxCapacityIsAnErrorNotAHang) {
  WorldConfig cfg = eager_only_config();
  cfg.name = "eager-errors";
  cfg.timeout = 2s;
  World& w = World::get(2, cfg);
  const size_t capacity = 16 * 1024;  // 16 RX buffers of 1 KiB
  const size_t n = 4 * capacity / sizeof(float);
  w.run([&](unsigned r, ACCL& a) {
    auto b = a.create_buffer<float>(n);
    for (size_t i = 0; i < n; ++i) (*b)[i] = static_cast<float>(i);
    const auto t0 = Clock::now();
    try {
      if (r == 0) a.send(*b, n, 1, 3);
      else a.recv(*b, n, 0, 3);
      ADD_FAILURE() << "rank " << r << ": a " << n * 4 << "-byte message with rendezvous disabled and "
                    << capacity << " bytes of RX buffers succeeded";
    } catch (const accl::Error& e) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
      EXPECT_FALSE(std::string(e.what()).empty());
      EXPECT_EQ(e.rank(), static_cast<int>(r)) << e.what();
      if (r == 0) {
        // The sender knows at once: it must not wait for a timeout.
        EXPECT_EQ(dynamic_cast<const accl::TimeoutError*>(&e), nullptr) << e.what();
        if (auto* de = dynamic_cast<const accl::DeviceError*>(&e)) {
          EXPECT_FALSE(de->retcode() & accl::abi::kReceiveTimeoutError) << e.what();
        }
        EXPECT_LT(ms, 1500) << e.what();
      }
      EXPECT_LT(ms, 5000) << e.what();
      std::printf("rank %u: %s\n", r, e.what());
    }
  });
  w.poison();
}

// The limit is the RX capacity in wire bytes: exactly 16 KiB passes (also as
// 8192 float32 compressed to fp16), one element more is refused on both sides.
TEST(EagerOnly, PointToPointLimitIsTheRxCapacityInWireBytes) {
  WorldConfig cfg = eager_only_config();
  cfg.name = "eager-limit";
  cfg.timeout = 2s;
  struct Case {
    size_t n;
    bool compressed;
    bool fits;
  };
  for (const Case c : {Case{4096, false, true}, Case{4097, false, false}, Case{8192, true, true},
                       Case{8193, true, false}}) {
    World& w = World::get(2, cfg);
    w.run([&](unsigned r, ACCL& a) {
      const dataType cd = c.compressed ? dataType::float16 : dataType::none;
      auto b = a.create_buffer<float>(c.n);
      for (size_t i = 0; i < c.n; ++i) (*b)[i] = r == 1 ? static_cast<float>(i % 1000) : -1.0f;
      const std::string what = std::to_string(c.n) + " float32" + (c.compressed ? " (fp16 on the wire)" : "");
      try {
        if (r == 1) a.send(*b, c.n, 0, 4, GLOBAL_COMM, false, cd);
        else a.recv(*b, c.n, 1, 4, GLOBAL_COMM, false, cd);
        EXPECT_TRUE(c.fits) << what << " exceeds the RX capacity but rank " << r << " succeeded";
        if (r == 0) {
          for (size_t i = 0; i < c.n; ++i) ASSERT_EQ((*b)[i], static_cast<float>(i % 1000)) << what;
        }
      } catch (const accl::Error& e) {
        EXPECT_FALSE(c.fits) << what << " fits the RX capacity: " << e.what();
        EXPECT_EQ(dynamic_cast<const accl::TimeoutError*>(&e), nullptr) << e.what();
        const auto* de = dynamic_cast<const accl::DeviceError*>(&e);
        if (de != nullptr) {
          EXPECT_FALSE(de->retcode() & accl::abi::kReceiveTimeoutError) << e.what();
        }
      }
    });
    if (!c.fits) w.poison();
  }
}

// Collectives with chunks far above the RX capacity, rendezvous disabled: the
// firmware may split them into RX-buffer-sized messages (then the result must
// be right) or refuse them; what it must not do is hang or deliver wrong
// data. When a call fails, some rank must name a cause other than a
// timeout (the others may time out waiting for it).
class EagerOnlyCollective : public ::testing::TestWithParam<std::string> {};

TEST_P(EagerOnlyCollective, AboveRxCapacityCompletesOrNamesTheCause) {
  const std::string call = GetParam();
  WorldConfig cfg = eager_only_config();
  cfg.name = "eager-errors";
  cfg.timeout = 2s;
  World& w = World::fresh(3, cfg);
  const unsigned P = 3;
  const size_t n = 4 * 16 * 1024 / sizeof(int32_t);  // 4 x the RX capacity per rank
  std::atomic<int> failures{0}, named_failures{0};
  std::vector<std::string> messages(P);
  w.run([&](unsigned r, ACCL& a) {
    auto s = a.create_buffer<int32_t>(n * P), d = a.create_buffer<int32_t>(n * P);
    for (size_t i = 0; i < n * P; ++i) {
      (*s)[i] = static_cast<int32_t>(r * 10000000 + i);
      (*d)[i] = -1;
    }
    d->sync_to_device();
    auto val = [](unsigned q, size_t i) { return static_cast<int32_t>(q * 10000000 + i); };
    try {
      if (call == "bcast") {
        a.bcast(*s, n, 1);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ((*s)[i], val(1, i)) << "rank " << r << " [" << i << "]";
      } else if (call == "scatter") {
        a.scatter(*s, *d, n, 1);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], val(1, r * n + i)) << "rank " << r << " [" << i << "]";
      } else if (call == "gather") {
        a.gather(*s, *d, n, 1);
        if (r == 1) {
          for (size_t i = 0; i < n * P; ++i) ASSERT_EQ((*d)[i], val(i / n, i % n)) << "[" << i << "]";
        }
      } else if (call == "allgather") {
        a.allgather(*s, *d, n);
        for (size_t i = 0; i < n * P; ++i) ASSERT_EQ((*d)[i], val(i / n, i % n)) << "rank " << r << " [" << i << "]";
      } else if (call == "reduce") {
        a.reduce(*s, *d, n, 1, reduceFunction::SUM);
        if (r == 1) {
          for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], val(0, i) + val(1, i) + val(2, i)) << "[" << i << "]";
        }
      } else if (call == "allreduce") {
        a.allreduce(*s, *d, n, reduceFunction::MAX);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ((*d)[i], val(2, i)) << "rank " << r << " [" << i << "]";
      } else if (call == "reduce_scatter") {
        a.reduce_scatter(*s, *d, n, reduceFunction::SUM);
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ((*d)[i], val(0, r * n + i) + val(1, r * n + i) + val(2, r * n + i)) << "rank " << r;
      } else if (call == "alltoall") {
        a.alltoall(*s, *d, n);
        for (size_t i = 0; i < n * P; ++i)
          ASSERT_EQ((*d)[i], val(i / n, r * n + i % n)) << "rank " << r << " [" << i << "]";
      }
    } catch (const accl::Error& e) {
      failures.fetch_add(1);
      const auto* de = dynamic_cast<const accl::DeviceError*>(&e);
      const bool timeout = dynamic_cast<const accl::TimeoutError*>(&e) != nullptr ||
                           (de != nullptr && (de->retcode() & accl::abi::kReceiveTimeoutError));
      if (!timeout) named_failures.fetch_add(1);
      messages[r] = e.what();
    }
  });
  if (failures.load() > 0) {
    std::string all;
    for (unsigned r = 0; r < P; ++r) all += "\n  rank " + std::to_string(r) + ": " + messages[r];
    std::printf("%s failed as allowed:%s\n", call.c_str(), all.c_str());
    EXPECT_GT(named_failures.load(), 0) << call << ": only timeouts, no rank named the cause:" << all;
    w.poison();
  }
}

INSTANTIATE_TEST_SUITE_P(Calls, EagerOnlyCollective,
                         ::testing::Values("bcast", "scatter", "gather", "allgather", "reduce", "allreduce",
                                           "reduce_scatter", "alltoall"),
                         [](const ::testing::TestParamInfo<std::string>& pi) { return pi.param; });

// --- truncation ------------------------------------------------------------------

TEST(Truncation, MessageLargerThanPostedReceive) {
  for (size_t sent : {size_t{20}, size_t{1000}}) {  // eager and rendezvous
    World& w = World::get(2, errors_config());
    w.run([&](unsigned r, ACCL& a) {
      a.set_timeout(2s);
      auto b = a.create_buffer<float>(sent);
      if (r == 0) {
        try {
          a.send(*b, sent, 1, 5);
        } catch (const accl::Error& e) {
          std::printf("sender: %s\n", e.what());  // allowed for rendezvous (receiver refused)
        }
      } else {
        try {
          a.recv(*b, 10, 0, 5);
          ADD_FAILURE() << "recv of 10 elements accepted a " << sent << "-element message";
        } catch (const accl::DeviceError& e) {
          EXPECT_TRUE(e.retcode() & accl::abi::kTruncationError) << e.what();
          EXPECT_EQ(e.call(), "recv");
        }
      }
    });
    w.poison();
  }
}

// --- error formatting --------------------------------------------------------------

TEST(ErrorNames, PublicBitsByName) {
  EXPECT_EQ(accl::error_code_to_string(0), "OK");
  EXPECT_EQ(accl::error_code_to_string(accl::abi::kReceiveTimeoutError), "RECEIVE_TIMEOUT_ERROR");
  EXPECT_EQ(accl::error_code_to_string(accl::abi::kDmaSizeError), "DMA_SIZE_ERROR");
  const auto names = accl::error_bit_names(accl::abi::kPackSeqNumberError | accl::abi::kCollectiveNotImplemented);
  ASSERT_EQ(names.size(), 2u);
  EXPECT_NE(std::find(names.begin(), names.end(), "PACK_SEQ_NUMBER_ERROR"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "COLLECTIVE_NOT_IMPLEMENTED"), names.end());
  const std::string both = accl::error_code_to_string(accl::abi::kDmaSizeError | accl::abi::kReceiveTimeoutError);
  EXPECT_NE(both.find("DMA_SIZE_ERROR"), std::string::npos);
  EXPECT_NE(both.find("RECEIVE_TIMEOUT_ERROR"), std::string::npos);
  for (int bit = 0; bit < 32; ++bit)
    EXPECT_EQ(accl::error_bit_names(1u << bit).size(), 1u) << "bit " << bit << " has no name";
  accl::DeviceError de("allreduce", 3, accl::abi::kReceiveTimeoutError);
  EXPECT_EQ(de.call(), "allreduce");
  EXPECT_EQ(de.rank(), 3);
  EXPECT_EQ(de.retcode(), accl::abi::kReceiveTimeoutError);
  const std::string w = de.what();
  EXPECT_NE(w.find("allreduce"), std::string::npos) << w;
  EXPECT_NE(w.find("rank 3"), std::string::npos) << w;
  EXPECT_NE(w.find("RECEIVE_TIMEOUT_ERROR"), std::string::npos) << w;
}

}  // namespace
}  // namespace acclt
