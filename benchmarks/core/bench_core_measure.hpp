// SPDX-License-Identifier: Apache-2.0
//
// accl-bench-core's timing (a budget of iterations, memcpy as the yardstick)
// and its output (aligned tables on stdout and/or CSV rows).
#pragma once

#include "bench_core_args.hpp"
#include "bench_util.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <string>

namespace accl::bench::core {

using Clock = std::chrono::steady_clock;

std::string human(size_t bytes);

inline double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Device-measured duration of the operation that just ran (set by the op).
inline double last_device_s = 0;

// Runs `once` (one operation) for about --budget seconds: one untimed first
// call (page faults, connection set-up), a timed calibration of up to 10 % of
// the budget, then the measured iterations. Operations faster than
// `min_sample_s` are timed in batches (one sample = mean of the batch), so
// clock overhead does not dominate (memcpy of small sizes).
Sample measure(const Args& a, const std::function<void()>& once, unsigned max_iters, double min_sample_s = 0);

// Page-aligned host memory, touched.
struct HostMem {
  explicit HostMem(size_t n) : bytes(std::max<size_t>(n, 64)) {
    size_t alloc = (bytes + 4095) / 4096 * 4096;
    p = static_cast<unsigned char*>(std::aligned_alloc(4096, alloc));
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 1, alloc);
  }
  ~HostMem() { std::free(p); }
  HostMem(const HostMem&) = delete;
  HostMem& operator=(const HostMem&) = delete;
  size_t bytes;
  unsigned char* p;
};

Sample measure_memcpy(const Args& a, size_t bytes, HostMem& src, HostMem& dst);

// Output: aligned tables on stdout and/or CSV rows.
struct Out {
  const Args& a;
  std::FILE* csv = nullptr;
  bool own = false;
  explicit Out(const Args& args) : a(args) {
    if (a.csv == "-") csv = stdout;
    else if (!a.csv.empty()) {
      csv = std::fopen(a.csv.c_str(), "w");
      if (csv == nullptr) {
        std::fprintf(stderr, "accl-bench-core: cannot write %s\n", a.csv.c_str());
        std::exit(2);
      }
      own = true;
    }
    if (csv != nullptr)
      std::fprintf(csv, "section,op,ranks,bytes,iters,time_us,min_us,mean_us,gbps,busbw_gbps,memcpy_us,memcpy_gbps,"
                        "ratio_memcpy,model_us,model2_us,check,dev_us\n");
  }
  ~Out() {
    if (own) std::fclose(csv);
  }
  Out(const Out&) = delete;
  Out& operator=(const Out&) = delete;
  template <typename... T>
  void table(const char* fmt, T... v) {
    if (!a.quiet) std::printf(fmt, v...);
  }
  void table(const char* s) {
    if (!a.quiet) std::fputs(s, stdout);
  }
  void row(const char* section, const std::string& op, unsigned ranks, size_t bytes, const Sample& s, double gbps,
           double busbw, const Sample* mc, double model_us, double model2_us, const char* check) {
    if (csv == nullptr) return;
    double mc_gbps = mc != nullptr && mc->median_s > 0 ? static_cast<double>(bytes) / mc->median_s / 1e9 : 0;
    std::fprintf(csv, "%s,%s,%u,%zu,%u,%.3f,%.3f,%.3f,%.4f,%.4f,%.3f,%.4f,%.4f,%.3f,%.3f,%s,%.3f\n", section,
                 op.c_str(), ranks, bytes, s.iters, s.median_s * 1e6, s.min_s * 1e6, s.mean_s * 1e6, gbps, busbw,
                 mc != nullptr ? mc->median_s * 1e6 : 0.0, mc_gbps, mc_gbps > 0 ? gbps / mc_gbps : 0.0, model_us,
                 model2_us, check, s.dev_median_s * 1e6);
    std::fflush(csv);
  }
};

}  // namespace accl::bench::core
