// SPDX-License-Identifier: Apache-2.0
//
// repro-staging-deadlock: reproducer of a failure the soak found (first as
// soak-local --seed 5, calls #5647/#5648; then --transport udp --seed 22,
// calls #1572/#1573). Two collectives whose receives are staged through spare
// buffer 3 run concurrently on two communicators over the same 4 ranks, in
// different rank orders. Here: two in-place allreduces (rendezvous-sized, so
// their receive-reduce steps stage through spare 3 because the local operand
// overlaps the result), int64 MAX on {3, 2, 1, 0} and int32 MAX on the global
// communicator.
//
// Every rank's calls then end with RECEIVE_TIMEOUT_ERROR, and the emulator
// logs rendezvous data it had to discard ("matches no open window", "does not
// fit its window: 16384 bytes ... vs window 16392 bytes"): a sender wrote a
// piece for a grant the receiver meant for another piece. Either allreduce
// alone, or both out of place, never fails (see the report for the analysis).
//
// The interleaving is timing dependent, so the program injects small random
// per-message delays (ACCL_EMU_FAULTS seed=S,delay_us=300 for a few seeds,
// unless the environment sets ACCL_EMU_FAULTS; delays keep every link in
// order, so they must not change any result) and repeats the pair of calls.
// Exit 0 when every attempt completes with correct results; 1 otherwise.
#include <accl/accl.hpp>
#include <accl/error.hpp>
#include <accl_emu/emulator.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace accl;

constexpr unsigned P = 4;
constexpr int kAttempts = 12;
constexpr unsigned n1 = 8195, n2 = 6936;  // int64 / int32: 64 KiB + 24 B and 27 KiB, rendezvous

// One world, kAttempts pairs of calls. Returns the failed rank-attempts.
int run_world() {
  emu::EmuOptions eo = emu::options_from_environment();
  eo.transport = emu::TransportKind::inproc;
  eo.bank_bytes = size_t{1} << 30;
  auto world = emu::create_local_world(P, InitOptions{}, eo);
  for (auto& a : world) a->set_timeout(std::chrono::seconds(2));  // a stuck call ends as a timeout

  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (unsigned r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      ACCL& a = *world[r];
      const communicatorId reversed = a.split_communicator({3, 2, 1, 0}, 103u);
      for (int attempt = 0; attempt < kAttempts; ++attempt) {
        auto b1 = a.create_buffer<int64_t>(n1);
        auto b2 = a.create_buffer<int32_t>(n2);
        for (unsigned i = 0; i < n1; ++i) (*b1)[i] = static_cast<int64_t>(r * 10 + i);
        for (unsigned i = 0; i < n2; ++i) (*b2)[i] = static_cast<int32_t>(r + i);
        try {
          auto q1 = a.allreduce(*b1, *b1, n1, reduceFunction::MAX, reversed, false, false, dataType::none, true);
          auto q2 = a.allreduce(*b2, *b2, n2, reduceFunction::MAX, GLOBAL_COMM, false, false, dataType::none, true);
          q1->wait();
          q2->wait();
          bool ok = true;
          for (unsigned i = 0; i < n1; ++i) ok = ok && (*b1)[i] == static_cast<int64_t>((P - 1) * 10 + i);
          for (unsigned i = 0; i < n2; ++i) ok = ok && (*b2)[i] == static_cast<int32_t>(P - 1 + i);
          if (!ok) {
            std::printf("rank %u attempt %d: wrong result\n", r, attempt);
            failures++;
            break;
          }
        } catch (const Error& e) {
          std::printf("rank %u attempt %d: %s\n", r, attempt, e.what());
          failures++;
          break;  // later attempts would only report the aftermath
        }
      }
      a.free_communicator(reversed);
    });
  }
  for (auto& t : threads) t.join();
  return failures.load();
}

}  // namespace

int main() {
  const char* preset = std::getenv("ACCL_EMU_FAULTS");
  std::vector<std::string> faults;
  if (preset != nullptr) faults.push_back(preset);
  else
    for (int seed = 1; seed <= 4; ++seed) faults.push_back("seed=" + std::to_string(seed) + ",delay_us=300");
  int failures = 0;
  for (const std::string& f : faults) {
    setenv("ACCL_EMU_FAULTS", f.c_str(), 1);
    const int n = run_world();
    std::printf("ACCL_EMU_FAULTS=%s: %d failed rank-attempts\n", f.c_str(), n);
    failures += n;
  }
  std::printf("repro-staging-deadlock: %s\n", failures == 0 ? "PASS" : "FAIL");
  return failures == 0 ? 0 : 1;
}
