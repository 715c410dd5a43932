// SPDX-License-Identifier: Apache-2.0
//
// The driver on public ACCL's firmware: 2 and 3 ACCL instances (one thread
// each) over the simulator-session device, each connected to its own public
// cclo_emu process (the public control program and HLS data path compiled
// for the host). Only what public rules allow: eager messages (every payload
// at most the RX buffer size), SUM and MAX, explicit tags, rendezvous size
// above the eager size. cclo_emu sleeps ~10 ms per Ethernet packet, so
// counts are small.
//
// Exit 77 (skipped) with the reason when cclo_emu is not built (build it with
// `ninja -C build accl-public-emu`: public ACCL's build.sh, 3-6 minutes;
// scripts/run-tests.sh does) or public ACCL's folder is absent.
#include "cclo_emu_session.hpp"

#include <accl/accl.hpp>
#include <accl_hw/sim.hpp>

#include <gtest/gtest.h>

#include <barrier>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

namespace {

namespace hw = accl::hw;
using accl::ACCL;
using accl::dataType;
using accl::reduceFunction;

constexpr unsigned kCount = 16;

std::string g_cclo_emu;  // path, set by main

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One driver per rank on the session, initialized as public rules require.
std::unique_ptr<ACCL> open_rank(const std::string& address, int rank, int size) {
  hw::SimOptions o;
  o.address = address;
  o.rank = rank;
  o.size = size;
  o.reply_timeout = std::chrono::seconds(60);  // cclo_emu answers ~5 s after launch
  auto accl = std::make_unique<ACCL>(hw::make_sim_device(o));
  std::vector<accl::rank_t> ranks;
  const int base = static_cast<int>(hw::parse_sim_address(address).port);
  // As public ACCL's drivers fill the table for cclo_emu: session id = rank.
  for (int r = 0; r < size; ++r) ranks.push_back({"127.0.0.1", base + r, r, 0});
  accl::InitOptions init;
  init.rx_buffer_count = 4;
  init.rx_buffer_size = 1024;
  init.max_eager_size = 1024;       // public: at least the RX buffer size
  init.max_rendezvous_size = 4096;  // public: above the eager size, never 0
  // A small collective takes about a second on an idle machine; on a loaded
  // 2-core one, 3 cclo_emu processes (each spinning a dozen threads) took
  // more than 20 s for one allreduce. The public firmware ignores the value.
  init.timeout = std::chrono::seconds(120);
  accl->initialize(ranks, rank, init);
  return accl;
}

// Parameter: the number of ranks (cclo_emu processes).
class PublicCcloEmu : public ::testing::TestWithParam<int> {
 protected:
  int size() const { return GetParam(); }
  void SetUp() override {
    session_ = std::make_unique<accl::test::CcloEmuSession>(g_cclo_emu, size(), ACCL_SIM_TEST_LOG_DIR);
  }
  void TearDown() override {
    if (HasFailure())
      for (const auto& log : session_->logs()) std::cerr << "---- " << log << " (tail)\n" << tail(file_text(log));
    session_.reset();
  }
  static std::string tail(const std::string& s) { return s.size() > 3000 ? s.substr(s.size() - 3000) : s; }

  // Runs body(rank, accl) on every rank at once; failures of any show.
  // As an MPI job would, the ranks meet after initialize (a message reaching
  // a CCLO whose RX buffers are not configured yet is lost) and before the
  // drivers go (a reset must not cut a peer's last packets short).
  void on_all_ranks(const std::function<void(int, ACCL&)>& body) {
    std::vector<std::thread> threads;
    std::vector<std::string> errors(size());
    std::barrier meet(size());
    for (int r = 0; r < size(); ++r)
      threads.emplace_back([&, r] {
        std::unique_ptr<ACCL> accl;
        try {
          accl = open_rank(session_->address(), r, size());
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
        meet.arrive_and_wait();
        try {
          if (accl) body(r, *accl);
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
        meet.arrive_and_wait();
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(session_->exited(), "");
  }

  std::unique_ptr<accl::test::CcloEmuSession> session_;
};

TEST_P(PublicCcloEmu, SendRecvAllreduceBcastReduceAllgather) {
  const int n = size();
  on_all_ranks([n](int rank, ACCL& accl) {
    // The public firmware has no capability word.
    EXPECT_EQ(accl.get_capabilities(), 0u);

    // send/recv from rank 0 to the last rank, eager (64 bytes), explicit tag.
    auto msg = accl.create_buffer<int32_t>(kCount);
    if (rank == 0) {
      for (unsigned i = 0; i < kCount; ++i) (*msg)[i] = static_cast<int32_t>(1000 + i);
      accl.send(*msg, kCount, n - 1, 7);
    } else if (rank == n - 1) {
      accl.recv(*msg, kCount, 0, 7);
      for (unsigned i = 0; i < kCount; ++i) EXPECT_EQ((*msg)[i], static_cast<int32_t>(1000 + i)) << "recv " << i;
    }

    // allreduce SUM of 16 floats.
    auto src = accl.create_buffer<float>(kCount);
    auto dst = accl.create_buffer<float>(kCount);
    for (unsigned i = 0; i < kCount; ++i) (*src)[i] = static_cast<float>(rank * 100 + i);
    accl.allreduce(*src, *dst, kCount, reduceFunction::SUM);
    for (unsigned i = 0; i < kCount; ++i)
      EXPECT_EQ((*dst)[i], static_cast<float>(100 * n * (n - 1) / 2 + n * i)) << "allreduce " << i;

    // bcast of 16 ints from rank 1.
    auto b = accl.create_buffer<int32_t>(kCount);
    for (unsigned i = 0; i < kCount; ++i) (*b)[i] = rank == 1 ? static_cast<int32_t>(7 * i + 3) : -1;
    accl.bcast(*b, kCount, 1);
    for (unsigned i = 0; i < kCount; ++i) EXPECT_EQ((*b)[i], static_cast<int32_t>(7 * i + 3)) << "bcast " << i;

    // reduce MAX of 16 ints to rank 0: element i is largest on rank i % n.
    auto rsrc = accl.create_buffer<int32_t>(kCount);
    auto rdst = accl.create_buffer<int32_t>(kCount);
    for (unsigned i = 0; i < kCount; ++i) {
      (*rsrc)[i] = static_cast<int32_t>(i % n == static_cast<unsigned>(rank) ? 50 + i : i);
      (*rdst)[i] = -1;
    }
    accl.reduce(*rsrc, *rdst, kCount, 0, reduceFunction::MAX);
    if (rank == 0) {
      for (unsigned i = 0; i < kCount; ++i) EXPECT_EQ((*rdst)[i], static_cast<int32_t>(50 + i)) << "reduce " << i;
    }

    // allgather of 8 floats per rank.
    constexpr unsigned kPart = 8;
    auto part = accl.create_buffer<float>(kPart);
    auto all = accl.create_buffer<float>(kPart * n);
    for (unsigned i = 0; i < kPart; ++i) (*part)[i] = static_cast<float>(rank * 1000 + i);
    accl.allgather(*part, *all, kPart);
    for (unsigned i = 0; i < kPart * n; ++i)
      EXPECT_EQ((*all)[i], static_cast<float>((i / kPart) * 1000 + i % kPart)) << "allgather " << i;

    // What this firmware would refuse mid-run or never finish (cclo_emu's
    // HWID reads 0: UDP, no rendezvous) is refused before it sees it.
    auto refused = [&](const std::function<void()>& call, const std::string& rule) {
      try {
        call();
        ADD_FAILURE() << "not refused: " << rule;
      } catch (const accl::ArgumentError& e) {
        EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
      }
    };
    auto big = accl.create_buffer<float>(512);  // 2 KiB: above the 1 KiB eager size
    refused([&] { accl.allreduce(*big, *big, 512, reduceFunction::SUM); }, "above max_eager_size 1024");
    refused([&] { accl.alltoall(*big, *big, 4); }, "alltoall: the public firmware");
    refused([&] { accl.recv(*msg, kCount, accl::RANK_ANY, 7); }, "RANK_ANY");
    refused([&] { accl.allreduce(*src, *dst, kCount, reduceFunction::MIN); }, "SUM and MAX only");
    refused([&] { accl.set_max_rendezvous_msg_size(0); }, "max_rendezvous_size 0 is not above max_eager_size");
  });
}

// Shadowing is the device's business, the same at any rank count: 2 ranks
// only (each rank more costs CI about a minute here).
class PublicCcloEmuHostOnly : public PublicCcloEmu {};

TEST_P(PublicCcloEmuHostOnly, HostOnlyBuffersAreShadowedAroundCalls) {
  const int n = size();
  on_all_ranks([n](int rank, ACCL& accl) {
    // Host-only memory lives in the session's separate host address space:
    // the device pushes operands before the call and pulls the result after.
    auto src = accl.create_buffer_host<float>(kCount);
    std::vector<float> user(kCount, -1.0f);
    auto dst = accl.create_buffer_host<float>(user.data(), kCount);
    for (unsigned i = 0; i < kCount; ++i) (*src)[i] = static_cast<float>(rank + 1) * static_cast<float>(i);
    accl.allreduce(*src, *dst, kCount, reduceFunction::SUM);
    for (unsigned i = 0; i < kCount; ++i)
      EXPECT_EQ(user[i], static_cast<float>(n * (n + 1) / 2) * static_cast<float>(i)) << "allreduce " << i;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, PublicCcloEmu, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& p) { return std::to_string(p.param); });
INSTANTIATE_TEST_SUITE_P(Ranks, PublicCcloEmuHostOnly, ::testing::Values(2),
                         [](const ::testing::TestParamInfo<int>& p) { return std::to_string(p.param); });

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // The arguments gtest leaves: the path of public cclo_emu, and the folder
  // of public ACCL it is built from.
  g_cclo_emu = argc > 1 ? argv[1] : "";
  const std::string peer = argc > 2 ? argv[2] : "";
  if (!hw::built_with_sim()) {
    std::cout << "SKIP: libaccl_hw was built without ZeroMQ/nlohmann-json (no simulator-session device)\n";
    return 77;
  }
  if (const std::string why = accl::test::cclo_emu_missing(g_cclo_emu, peer); !why.empty()) {
    std::cout << "SKIP: " << why << "\n";
    return 77;
  }
  return RUN_ALL_TESTS();
}
