// SPDX-License-Identifier: Apache-2.0
//
// soak-local: the soak sequence (soak.hpp) on P emulated CCLOs in this
// process (accl::emu::create_local_world), one thread per rank.
//
//   soak-local [--calls N] [--seconds S] [--seed X] [--ranks P] [--transport T] [--verbose]
//
// A watchdog turns a hang into a failure that names how far each rank got:
// every wait in ACCL is bounded by the timeout, so a rank that stops making
// progress for much longer than that is a bug, not a slow machine.
#include "soak.hpp"

#include <accl_emu/emulator.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  soak::Options o;
  if (std::string err = soak::parse_options(argc, argv, o); !err.empty()) {
    if (err != "help") std::fprintf(stderr, "soak-local: %s\n", err.c_str());
    std::fprintf(stderr, "%s", soak::usage(argv[0]).c_str());
    return err == "help" ? 0 : 2;
  }
  accl::emu::EmuOptions eo = accl::emu::options_from_environment();
  if (!o.transport.empty()) eo.transport = accl::emu::parse_transport(o.transport);
  // The virtual reservation per bank is committed on use; 1 GiB x 2 is plenty
  // for 1 MiB buffers and keeps 4+ devices well inside address-space limits.
  eo.bank_bytes = size_t{1} << 30;

  std::vector<std::unique_ptr<accl::ACCL>> world;
  try {
    world = accl::emu::create_local_world(o.ranks, accl::InitOptions{}, eo);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "soak-local: cannot create the world: %s\n", e.what());
    return 1;
  }
  std::printf("soak-local: %u ranks over %s, seed %llu, up to %llu calls / %.0f s\n", o.ranks,
              accl::emu::to_string(eo.transport).c_str(), static_cast<unsigned long long>(o.seed),
              static_cast<unsigned long long>(o.calls), o.seconds);
  std::fflush(stdout);

  std::vector<std::atomic<uint64_t>> progress(o.ranks);
  std::vector<soak::RankReport> reports(o.ranks);
  std::mutex m;
  std::condition_variable cv;
  unsigned finished = 0;

  // Watchdog budget: the time budget, plus a few device timeouts for a
  // failing run to wind down, plus slack for a loaded CI machine.
  const auto timeout = world[0]->timeout();
  const auto budget = std::chrono::duration<double>(o.seconds) + 4 * timeout + std::chrono::seconds(60);
  std::thread watchdog([&] {
    std::unique_lock lock(m);
    if (cv.wait_for(lock, budget, [&] { return finished == o.ranks; })) return;
    std::fprintf(stderr, "soak-local: WATCHDOG: ranks still running after %.0f s (a hang); progress:",
                 budget.count());
    for (unsigned r = 0; r < o.ranks; ++r)
      std::fprintf(stderr, " rank %u at call %llu;", r, static_cast<unsigned long long>(progress[r].load()));
    std::fprintf(stderr, "\nreproduce: %s --seed %llu --calls %llu\n", argv[0],
                 static_cast<unsigned long long>(o.seed), static_cast<unsigned long long>(o.calls));
    std::fflush(stderr);
    std::_Exit(3);
  });

  std::vector<std::thread> threads;
  for (unsigned r = 0; r < o.ranks; ++r) {
    threads.emplace_back([&, r] {
      soak::Options mine = o;
      mine.progress = &progress[r];
      try {
        reports[r] = soak::run_rank(*world[r], r, o.ranks, mine);
      } catch (const std::exception& e) {
        reports[r].rank = r;
        reports[r].errors++;
        reports[r].messages.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
      std::lock_guard lock(m);
      ++finished;
      cv.notify_all();
    });
  }
  for (auto& t : threads) t.join();
  watchdog.join();
  const int rc = soak::summarize(reports, o, "in-process, " + accl::emu::to_string(eo.transport));
  world.clear();
  return rc;
}
