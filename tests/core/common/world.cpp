// SPDX-License-Identifier: Apache-2.0
#include "world.hpp"

#include <accl_emu/emulator.hpp>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <latch>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

namespace acclt {

WorldConfig eager_only_config() {
  WorldConfig c;
  c.name = "eager";
  c.init.rx_buffer_count = 16;
  c.init.rx_buffer_size = 1024;
  c.init.max_eager_size = 1024;
  c.init.max_rendezvous_size = 0;
  return c;
}

WorldConfig large_rx_config() {
  WorldConfig c;
  c.name = "largerx";
  c.init.rx_buffer_count = 16;
  c.init.rx_buffer_size = 64 * 1024;
  c.init.max_eager_size = 64 * 1024;
  c.init.max_rendezvous_size = 4 * 1024 * 1024;
  return c;
}

std::string current_test_name() {
  const ::testing::TestInfo* ti = ::testing::UnitTest::GetInstance()->current_test_info();
  if (ti == nullptr) return "(no test)";
  return std::string(ti->test_suite_name()) + "." + ti->name();
}

namespace {
std::map<std::string, std::unique_ptr<World>>& cache() {
  static std::map<std::string, std::unique_ptr<World>> c;
  return c;
}
}  // namespace

World& World::get(unsigned size, const WorldConfig& config) {
  const std::string key = config.name + "/" + std::to_string(size) + "/" + config.transport;
  auto& c = cache();
  auto it = c.find(key);
  if (it != c.end() && it->second->poisoned()) {
    it->second.reset();  // destroy before creating the replacement
    c.erase(it);
    it = c.end();
  }
  if (it == c.end()) it = c.emplace(key, std::make_unique<World>(size, config)).first;
  return *it->second;
}

World& World::fresh(unsigned size, const WorldConfig& config) {
  const std::string key = config.name + "/" + std::to_string(size) + "/" + config.transport;
  auto& c = cache();
  c.erase(key);  // destroy before creating the replacement
  return *c.emplace(key, std::make_unique<World>(size, config)).first->second;
}

void World::discard_all() { cache().clear(); }

World::World(unsigned size, const WorldConfig& config) : config_(config) {
  accl::emu::EmuOptions emu = accl::emu::options_from_environment();
  const std::string transport = !config.transport.empty() ? config.transport : options().transport;
  if (!transport.empty()) emu.transport = accl::emu::parse_transport(transport);
  ranks_ = accl::emu::create_local_world(size, config.init, emu);
  if (ranks_.size() != size)
    throw std::runtime_error("create_local_world(" + std::to_string(size) + ") returned " +
                             std::to_string(ranks_.size()) + " ranks");
  if (config.timeout.count() > 0)
    for (auto& a : ranks_) a->set_timeout(config.timeout);
}

World::~World() {
  // Destroy ranks in reverse order; each destructor deinitializes its CCLO.
  while (!ranks_.empty()) ranks_.pop_back();
}

size_t World::rx_buffer_bytes() { return at(0).device().read(accl::abi::kRxBufferSizeOffset); }

std::chrono::milliseconds World::watchdog() const {
  auto t = std::chrono::duration_cast<std::chrono::milliseconds>(ranks_.at(0)->timeout());
  if (t.count() <= 0) t = std::chrono::milliseconds(20000);
  return 4 * t + std::chrono::milliseconds(15000);
}

void World::run(const std::function<void(unsigned, accl::ACCL&)>& body) {
  std::vector<unsigned> all(size());
  for (unsigned r = 0; r < size(); ++r) all[r] = r;
  run_on(all, body);
}

void World::run_on(const std::vector<unsigned>& ranks, const std::function<void(unsigned, accl::ACCL&)>& body) {
  const size_t n = ranks.size();
  std::vector<std::string> errors(n);
  std::vector<bool> done(n, false);
  std::mutex m;
  std::condition_variable cv;
  size_t finished = 0;
  std::latch start(static_cast<std::ptrdiff_t>(n));
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    threads.emplace_back([&, k] {
      const unsigned r = ranks[k];
      start.arrive_and_wait();
      std::string err;
      try {
        body(r, at(r));
      } catch (const accl::Error& e) {
        err = std::string("accl::Error (call '") + e.call() + "', rank " + std::to_string(e.rank()) +
              "): " + e.what();
      } catch (const std::exception& e) {
        err = std::string("exception: ") + e.what();
      } catch (...) {
        err = "unknown exception";
      }
      std::lock_guard<std::mutex> lk(m);
      errors[k] = std::move(err);
      done[k] = true;
      ++finished;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lk(m);
    if (!cv.wait_for(lk, watchdog(), [&] { return finished == n; })) {
      std::ostringstream os;
      os << "HANG in " << current_test_name() << ": world of " << size() << " (" << config_.name
         << "), ranks still running after " << watchdog().count() << " ms:";
      for (size_t k = 0; k < n; ++k)
        if (!done[k]) os << " " << ranks[k];
      os << ". Aborting (a call did not honour its timeout).\n";
      std::fputs(os.str().c_str(), stderr);
      std::fflush(stderr);
      std::fflush(stdout);
      std::abort();
    }
  }
  for (auto& t : threads) t.join();
  for (size_t k = 0; k < n; ++k)
    if (!errors[k].empty()) ADD_FAILURE() << "rank " << ranks[k] << ": " << errors[k];
  if (::testing::Test::HasFailure()) poison();
}

}  // namespace acclt
