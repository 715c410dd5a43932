// SPDX-License-Identifier: Apache-2.0
//
// The seed-000 scenario: four ACCL instances in one process, each driving its
// own emulated CCLO, run an allreduce (sum) of 1000 floats from four threads;
// the result is verified against the host-computed sum and printed.
#include <accl/accl.hpp>
#include <accl_emu/emulator.hpp>

#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

int main() {
  constexpr unsigned kWorldSize = 4;
  constexpr unsigned kCount = 1000;

  accl::InitOptions init;
  init.rx_buffer_size = 16 * 1024;  // as in the seed notebook
  init.max_eager_size = 16 * 1024;
  auto instances = accl::emu::create_local_world(kWorldSize, init);

  std::vector<std::unique_ptr<accl::Buffer<float>>> sources, results;
  for (unsigned r = 0; r < kWorldSize; ++r) {
    sources.push_back(instances[r]->create_buffer<float>(kCount));
    results.push_back(instances[r]->create_buffer<float>(kCount));
    for (unsigned i = 0; i < kCount; ++i) (*sources[r])[i] = static_cast<float>(i) * static_cast<float>(r + 1);
  }

  // Collectives need every member to take part at once: one thread per instance.
  std::vector<std::thread> threads;
  for (unsigned r = 0; r < kWorldSize; ++r)
    threads.emplace_back([&, r] {
      instances[r]->allreduce(*sources[r], *results[r], kCount, accl::reduceFunction::SUM);
    });
  for (auto& t : threads) t.join();

  // Every element i must equal i * (1 + 2 + 3 + 4).
  unsigned wrong = 0;
  for (unsigned r = 0; r < kWorldSize; ++r)
    for (unsigned i = 0; i < kCount; ++i) {
      float expected = static_cast<float>(i) * 10.0f;
      if (std::fabs((*results[r])[i] - expected) > 1e-3f * std::fabs(expected)) ++wrong;
    }

  std::printf("allreduce of %u floats over %u emulated CCLOs (in-process)\n", kCount, kWorldSize);
  std::printf("rank 0 result[0..4]: %.1f %.1f %.1f %.1f %.1f ... result[999]: %.1f\n", (*results[0])[0],
              (*results[0])[1], (*results[0])[2], (*results[0])[3], (*results[0])[4], (*results[0])[999]);
  std::printf("%s: %u of %u elements wrong\n", wrong == 0 ? "VERIFIED" : "FAILED", wrong, kCount * kWorldSize);

  for (auto& instance : instances) instance->deinit();
  return wrong == 0 ? 0 : 1;
}
