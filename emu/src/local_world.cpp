// SPDX-License-Identifier: Apache-2.0
//
// create_local_world(): N emulated CCLOs in this process, each driven by its
// own ACCL object, initialized on one global communicator.
#include <accl_emu/emulator.hpp>

#include <sched.h>

#include <exception>
#include <stdexcept>
#include <thread>

namespace accl::emu {

namespace {

// CPUs this process may run on (taskset, cpusets), which all ranks of the
// world share; the host's count where that cannot be read.
unsigned usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::thread::hardware_concurrency();
}

}  // namespace

std::vector<std::unique_ptr<ACCL>> create_local_world(unsigned world_size, const InitOptions& init,
                                                      EmuOptions options) {
  if (world_size == 0) throw std::invalid_argument("create_local_world: world size must be at least 1");
  std::vector<std::unique_ptr<Device>> devices;
  std::vector<rank_t> ranks;
  const unsigned cores = usable_cores();
  for (unsigned i = 0; i < world_size; ++i) {
    EmuOptions o = options;
    // A world that fits the cores runs like as many ACCL processes with a
    // core each (typically a host thread per rank): waiting host threads
    // keep a floor under their driving spin. Without it one slow wait made
    // the peer's wait slow too, and the budgets of a ping-pong collapsed to
    // blocking on every call (2 ranks: 27 us one way instead of ~1.4 us).
    // Larger worlds stay "unknown": one thread often drives all their CCLOs
    // (run_async), which the yielding policy for oversubscription does not fit.
    if (o.host_processes == 0 && world_size <= cores) o.host_processes = world_size;
    // A fixed base port gives ranks consecutive ports; 0 lets each pick a free one.
    if (options.port != 0) {
      if (options.port + i > 0xFFFF) throw std::invalid_argument("create_local_world: port range exceeds 65535");
      o.port = static_cast<uint16_t>(options.port + i);
    }
    devices.push_back(create_device(o));
    Endpoint ep = endpoint(*devices.back());
    rank_t r;
    r.ip = ep.ip;
    r.port = ep.port;
    r.session_id = static_cast<int>(i);
    r.max_segment_size = 0;  // = RX buffer size
    ranks.push_back(r);
  }
  std::vector<std::unique_ptr<ACCL>> world;
  for (auto& d : devices) world.push_back(std::make_unique<ACCL>(std::move(d)));
  // Initialize all ranks concurrently: initialize() only configures the local
  // CCLO today, but nothing breaks if it ever talks to peers.
  std::vector<std::exception_ptr> errors(world_size);
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < world_size; ++i) {
    threads.emplace_back([&, i] {
      try {
        world[i]->initialize(ranks, static_cast<int>(i), init);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return world;
}

}  // namespace accl::emu
