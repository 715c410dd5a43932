// SPDX-License-Identifier: Apache-2.0
//
// accl-bench-core's timing loop and its memcpy yardstick.
#include "bench_core_measure.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace accl::bench::core {

std::string human(size_t bytes) {
  char buf[32];
  if (bytes >= (size_t{1} << 30) && bytes % (size_t{1} << 30) == 0) std::snprintf(buf, sizeof buf, "%zuG", bytes >> 30);
  else if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0) std::snprintf(buf, sizeof buf, "%zuM", bytes >> 20);
  else if (bytes >= 1024 && bytes % 1024 == 0) std::snprintf(buf, sizeof buf, "%zuK", bytes >> 10);
  else std::snprintf(buf, sizeof buf, "%zu", bytes);
  return buf;
}

Sample measure(const Args& a, const std::function<void()>& once, unsigned max_iters, double min_sample_s) {
  once();
  unsigned calib = 0;
  auto c0 = Clock::now();
  double elapsed = 0;
  do {
    once();
    ++calib;
    elapsed = seconds(Clock::now() - c0);
  } while (elapsed < 0.1 * a.budget_s && calib < 1000);
  const double per = elapsed / calib;
  unsigned batch = 1;
  if (min_sample_s > 0 && per < min_sample_s) batch = static_cast<unsigned>(std::ceil(min_sample_s / std::max(per, 1e-9)));
  unsigned iters = a.fixed_iters;
  if (iters == 0) {
    double est = 0.9 * a.budget_s / (per * batch);
    iters = static_cast<unsigned>(std::clamp(est, static_cast<double>(a.min_iters), static_cast<double>(max_iters)));
  }
  std::vector<double> t, dev;
  t.reserve(iters);
  for (unsigned i = 0; i < iters; ++i) {
    last_device_s = 0;
    auto t0 = Clock::now();
    for (unsigned b = 0; b < batch; ++b) once();
    t.push_back(seconds(Clock::now() - t0) / batch);
    dev.push_back(last_device_s);
  }
  std::sort(dev.begin(), dev.end());
  Sample s = summarize(t);
  s.dev_median_s = dev.empty() ? 0 : dev[dev.size() / 2];
  return s;
}

Sample measure_memcpy(const Args& a, size_t bytes, HostMem& src, HostMem& dst) {
  return measure(a, [&] {
    std::memcpy(dst.p, src.p, bytes);
    // Keep the copy observable.
    asm volatile("" : : "r"(dst.p) : "memory");
  }, a.max_iters, 20e-6);
}

}  // namespace accl::bench::core
