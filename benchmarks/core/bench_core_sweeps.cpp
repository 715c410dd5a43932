// SPDX-License-Identifier: Apache-2.0
//
// accl-bench-core's measurements, op by op.
#include "bench_core_sweeps.hpp"

#include <accl/accl.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

namespace accl::bench::core {
namespace {

std::vector<size_t> size_list(const Args& a) {
  std::vector<size_t> s;
  for (size_t b = a.min_bytes; b <= a.max_bytes; b *= a.step) s.push_back(b);
  return s;
}

// One collective at one size on world `w`. Returns false on a wrong result.
bool run_collective(const Args& a, World& w, const OpSpec& op, size_t bytes, Sample& s, size_t& count_out) {
  size_t se = 0, de = 0, c = 0;
  op.shape(bytes / 4, w.size(), se, de, c);
  count_out = c;
  if (c == 0) return true;
  auto b = make_buffers(w, se, de);
  const unsigned count = static_cast<unsigned>(c);
  s = measure(a, [&] { w.all([&](unsigned r, bool as) { return op.call(w[r], b[r], count, a.fpga, as); }); },
              a.max_iters);
  return !a.check || verify(op, w, b, c, de) == 0;
}

}  // namespace

void bench_copy(const Args& a, World& w, Out& out, Targets& tg) {
  out.table("\n# copy: rank 0, %s, vs memcpy of the same bytes (median of iterations)\n",
            a.fpga ? "device->device (from_fpga/to_fpga)" : "host->host (with syncs)");
  out.table("%10s %7s %12s %10s %10s %12s %10s %8s\n", "bytes", "iters", "copy(us)", "dev(us)", "GB/s", "memcpy(us)",
            "GB/s", "ratio");
  const size_t maxb = a.max_bytes;
  auto src = w[0].create_buffer<float>(maxb / 4);
  auto dst = w[0].create_buffer<float>(maxb / 4);
  for (size_t i = 0; i < maxb / 4; ++i) (*src)[i] = static_cast<float>(i % 1000);
  src->sync_to_device();
  dst->sync_to_device();
  HostMem hs(maxb), hd(maxb);
  double worst_big = 1e9;
  for (size_t bytes : size_list(a)) {
    unsigned count = static_cast<unsigned>(bytes / 4);
    Sample s = measure(a, [&] {
      auto req = w[0].copy(*src, *dst, count, a.fpga, a.fpga);
      last_device_s = static_cast<double>(req->duration_ns()) * 1e-9;
    }, a.max_iters);
    Sample m = measure_memcpy(a, bytes, hs, hd);
    double gbps = static_cast<double>(bytes) / s.median_s / 1e9;
    double mgbps = static_cast<double>(bytes) / m.median_s / 1e9;
    dst->sync_from_device();
    bool ok = (*dst)[count - 1] == (*src)[count - 1] && (*dst)[0] == (*src)[0];
    if (!ok) ++failures;
    out.table("%10s %7u %12.2f %10.2f %10.3f %12.2f %10.3f %8.3f%s\n", human(bytes).c_str(), s.iters,
              s.median_s * 1e6, s.dev_median_s * 1e6, gbps, m.median_s * 1e6, mgbps, gbps / mgbps,
              ok ? "" : "  WRONG RESULT");
    out.row("sweep", "copy", 1, bytes, s, gbps, gbps, &m, 0, 0, ok ? "ok" : "wrong");
    if (bytes >= (size_t{1} << 20)) worst_big = std::min(worst_big, gbps / mgbps);
  }
  if (worst_big < 1e9) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "copy >= 0.5x memcpy bandwidth at >= 1 MiB (worst ratio %.3f)", worst_big);
    tg.add(worst_big >= 0.5, buf);
  }
}

void bench_nop(const Args& a, World& w, Out& out, Targets& tg) {
  for (int i = 0; i < 100; ++i) w[0].nop();
  std::vector<double> t, dev;
  t.reserve(a.nop_iters);
  dev.reserve(a.nop_iters);
  for (unsigned i = 0; i < a.nop_iters; ++i) {
    auto t0 = Clock::now();
    auto req = w[0].nop();
    t.push_back(seconds(Clock::now() - t0));
    dev.push_back(static_cast<double>(req->duration_ns()) * 1e-9);
  }
  Sample s = summarize(t);
  std::sort(dev.begin(), dev.end());
  s.dev_median_s = dev[dev.size() / 2];
  double p99 = t[std::min(t.size() - 1, t.size() * 99 / 100)];
  out.table("\n# nop: synchronous round trip on rank 0 (%u calls)\n", s.iters);
  out.table("  median %.2f us   mean %.2f us   min %.2f us   p99 %.2f us   (device-measured median %.2f us)\n",
            s.median_s * 1e6, s.mean_s * 1e6, s.min_s * 1e6, p99 * 1e6, s.dev_median_s * 1e6);
  out.row("nop", "nop", 1, 0, s, 0, 0, nullptr, 0, 0, "ok");
  char buf[120];
  std::snprintf(buf, sizeof buf, "nop round trip <= 5 us (median %.2f us)", s.median_s * 1e6);
  tg.add(s.median_s * 1e6 <= 5.0, buf);
}

void bench_pingpong(const Args& a, World& w, Out& out) {
  if (w.size() < 2) throw std::invalid_argument("pingpong needs --ranks 2 or more");
  const char* transport = std::getenv("ACCL_EMU_TRANSPORT");
  out.table("\n# pingpong: ranks 0 and 1, one host thread each, transport %s; one-way latency = round trip / 2\n",
            transport != nullptr && *transport != '\0' ? transport : "auto");
  out.table("%10s %7s %12s %12s %12s\n", "bytes", "iters", "median(us)", "min(us)", "mean(us)");
  constexpr unsigned kTag = 7;
  constexpr unsigned kWarmup = 200;
  for (size_t bytes : a.pingpong_sizes) {
    const size_t elems = std::max<size_t>(bytes / 4, 1);
    std::vector<int32_t> mem0(elems, 0), mem1(elems, 0);
    auto b0 = w[0].create_buffer_host<int32_t>(mem0.data(), elems);
    auto b1 = w[1].create_buffer_host<int32_t>(mem1.data(), elems);
    const unsigned total = kWarmup + a.pingpong_iters;
    std::vector<double> round_trips;
    round_trips.reserve(a.pingpong_iters);
    std::atomic<unsigned> wrong{0};
    std::exception_ptr echo_error;
    std::thread echo([&] {
      try {
        for (unsigned i = 0; i < total; ++i)
          if (!pingpong_round(w[1], *b1, mem1, 1, i, kTag)) ++wrong;
      } catch (...) {
        echo_error = std::current_exception();
      }
    });
    try {
      for (unsigned i = 0; i < total; ++i) {
        const auto t0 = Clock::now();
        if (!pingpong_round(w[0], *b0, mem0, 0, i, kTag)) ++wrong;
        if (i >= kWarmup) round_trips.push_back(seconds(Clock::now() - t0) / 2);
      }
    } catch (...) {
      echo.join();  // its next receive ends at the device timeout
      throw;
    }
    echo.join();
    if (echo_error) std::rethrow_exception(echo_error);
    Sample s = summarize(round_trips);
    const bool ok = wrong.load() == 0;
    if (!ok) ++failures;
    out.table("%10s %7u %12.3f %12.3f %12.3f%s\n", human(elems * 4).c_str(), s.iters, s.median_s * 1e6,
              s.min_s * 1e6, s.mean_s * 1e6, ok ? "" : "  WRONG RESULT");
    out.row("pingpong", "pingpong", 2, elems * 4, s, 0, 0, nullptr, 0, 0, ok ? "ok" : "wrong");
  }
}

void bench_collective(const Args& a, World& w, const OpSpec& op, Out& out, Targets& tg) {
  out.table("\n# %s: %u ranks, float32%s, %s; bytes = largest buffer of one rank\n", op.name.c_str(), w.size(),
            op.name.find("reduce") != std::string::npos ? " SUM" : "",
            a.fpga ? "device buffers (from_fpga/to_fpga)" : "host syncs");
  out.table("%10s %7s %12s %10s %10s %10s %12s %10s %8s %6s\n", "bytes", "iters", "time(us)", "dev(us)", "algGB/s",
            "busGB/s", "memcpy(us)", "GB/s", "ratio", "check");
  HostMem hs(a.max_bytes), hd(a.max_bytes);
  for (size_t bytes : size_list(a)) {
    Sample s;
    size_t count = 0;
    bool ok = false;
    try {
      ok = run_collective(a, w, op, bytes, s, count);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "accl-bench-core: %s %zu bytes: %s\n", op.name.c_str(), bytes, e.what());
      ++failures;
      out.table("%10s  FAILED: %s\n", human(bytes).c_str(), e.what());
      out.row("sweep", op.name, w.size(), bytes, s, 0, 0, nullptr, 0, 0, "error");
      break;
    }
    if (count == 0) continue;
    if (!ok) ++failures;
    Sample m = measure_memcpy(a, bytes, hs, hd);
    double gbps = static_cast<double>(bytes) / s.median_s / 1e9;
    double bus = gbps * op.bus_factor(w.size());
    double mgbps = static_cast<double>(bytes) / m.median_s / 1e9;
    out.table("%10s %7u %12.2f %10.2f %10.3f %10.3f %12.2f %10.3f %8.3f %6s\n", human(bytes).c_str(), s.iters,
              s.median_s * 1e6, s.dev_median_s * 1e6, gbps, bus, m.median_s * 1e6, mgbps, gbps / mgbps,
              ok ? "ok" : "WRONG");
    out.row("sweep", op.name, w.size(), bytes, s, gbps, bus, &m, 0, 0, ok ? "ok" : "wrong");
    if (op.name == "allreduce" && bytes == (size_t{16} << 20)) {
      char buf[120];
      std::snprintf(buf, sizeof buf, "allreduce 16 MiB >= 1 GB/s algorithm bandwidth on %u ranks (%.3f GB/s)",
                    w.size(), gbps);
      tg.add(gbps >= 1.0, buf);
    }
  }
}

void bench_scaling(const Args& a, Out& out) {
  const OpSpec op = collective_ops()[0];
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  out.table("\n# scaling: allreduce float32 SUM vs ring model (%u host cores)\n", cores);
  out.table("#   ring bytes/rank = 2(P-1)/P * N;  model = ring bytes/rank / B + 2(P-1) * nop;\n"
            "#   model(shared) = P * ring bytes/rank / (min(P, cores) * B) + 2(P-1) * nop; B = memcpy GB/s of N bytes\n");
  out.table("%5s %10s %7s %12s %10s %12s %10s %12s %12s %8s %6s\n", "ranks", "bytes", "iters", "time(us)", "algGB/s",
            "ringB/rank", "busGB/s", "model(us)", "shared(us)", "meas/sh", "check");
  size_t maxb = *std::max_element(a.scale_sizes.begin(), a.scale_sizes.end());
  HostMem hs(maxb), hd(maxb);
  for (unsigned p : a.scale_ranks) {
    std::unique_ptr<World> w;
    try {
      w = std::make_unique<World>(a, p);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "accl-bench-core: cannot create %u ranks: %s\n", p, e.what());
      ++failures;
      continue;
    }
    // Per-step latency proxy: nop round trip.
    std::vector<double> t;
    for (int i = 0; i < 2000; ++i) {
      auto t0 = Clock::now();
      (*w)[0].nop();
      t.push_back(seconds(Clock::now() - t0));
    }
    double alpha = summarize(t).median_s;
    for (size_t bytes : a.scale_sizes) {
      Sample s;
      size_t count = 0;
      bool ok = false;
      try {
        ok = run_collective(a, *w, op, bytes, s, count);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "accl-bench-core: scaling %u ranks %zu bytes: %s\n", p, bytes, e.what());
        ++failures;
        out.table("%5u %10s  FAILED: %s\n", p, human(bytes).c_str(), e.what());
        continue;
      }
      if (!ok) ++failures;
      Sample m = measure_memcpy(a, bytes, hs, hd);
      double B = static_cast<double>(bytes) / m.median_s;  // bytes/s
      double ring = 2.0 * (p - 1) / p * static_cast<double>(bytes);
      double model = ring / B + 2.0 * (p - 1) * alpha;
      double shared = p * ring / (std::min(p, cores) * B) + 2.0 * (p - 1) * alpha;
      double gbps = static_cast<double>(bytes) / s.median_s / 1e9;
      out.table("%5u %10s %7u %12.1f %10.3f %12s %10.3f %12.1f %12.1f %8.2f %6s\n", p, human(bytes).c_str(), s.iters,
                s.median_s * 1e6, gbps, human(static_cast<size_t>(ring)).c_str(), ring / s.median_s / 1e9,
                model * 1e6, shared * 1e6, s.median_s / shared, ok ? "ok" : "WRONG");
      out.row("scaling", "allreduce", p, bytes, s, gbps, ring / s.median_s / 1e9, &m, model * 1e6, shared * 1e6,
              ok ? "ok" : "wrong");
    }
  }
}

}  // namespace accl::bench::core
