// SPDX-License-Identifier: Apache-2.0
//
// A world of in-process CCLOs, a way to run one collective on all of its
// ranks, the per-rank buffers and the collectives the benchmark times.
#pragma once

#include "bench_core_args.hpp"
#include "bench_core_measure.hpp"

#include <accl/accl.hpp>
#include <accl_emu/emulator.hpp>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace accl::bench::core {

class World {
 public:
  World(const Args& a, unsigned n) : n_(n) {
    accl_ = accl::emu::create_local_world(n, a.init);
    if (a.timeout_ms != 0)
      for (auto& x : accl_) x->set_timeout(std::chrono::milliseconds(a.timeout_ms));
    if (a.threads && n > 1) start_threads();
  }
  ~World() {
    if (!workers_.empty()) {
      job_ = nullptr;
      stop_ = true;
      start_->arrive_and_wait();
      for (auto& t : workers_) t.join();
    }
    for (auto& x : accl_) {
      try {
        x->deinit();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "accl-bench-core: deinit: %s\n", e.what());
      }
    }
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  unsigned size() const { return n_; }
  ACCL& operator[](unsigned r) { return *accl_[r]; }

  // Runs call(rank, run_async) on every rank and waits for all of them.
  void all(const std::function<RequestPtr(unsigned, bool)>& call) {
    if (workers_.empty()) {
      std::vector<RequestPtr> reqs(n_);
      for (unsigned r = 0; r < n_; ++r) reqs[r] = call(r, n_ > 1);
      double dev = 0;
      for (unsigned r = 0; r < n_; ++r)
        if (reqs[r]) {
          reqs[r]->wait();
          dev = std::max(dev, static_cast<double>(reqs[r]->duration_ns()) * 1e-9);
        }
      last_device_s = dev;
      return;
    }
    job_ = &call;
    start_->arrive_and_wait();
    done_->arrive_and_wait();
    last_device_s = *std::max_element(dev_.begin(), dev_.end());
    if (error_) {
      auto e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }

 private:
  void start_threads() {
    dev_.assign(n_, 0.0);
    start_ = std::make_unique<std::barrier<>>(static_cast<std::ptrdiff_t>(n_ + 1));
    done_ = std::make_unique<std::barrier<>>(static_cast<std::ptrdiff_t>(n_ + 1));
    for (unsigned r = 0; r < n_; ++r)
      workers_.emplace_back([this, r] {
        for (;;) {
          start_->arrive_and_wait();
          if (stop_) return;
          try {
            auto req = (*job_)(r, false);
            dev_[r] = req ? static_cast<double>(req->duration_ns()) * 1e-9 : 0.0;
          } catch (...) {
            std::lock_guard<std::mutex> lock(mu_);
            if (!error_) error_ = std::current_exception();
          }
          done_->arrive_and_wait();
        }
      });
  }

  unsigned n_;
  std::vector<std::unique_ptr<ACCL>> accl_;
  std::vector<std::thread> workers_;
  std::unique_ptr<std::barrier<>> start_, done_;
  const std::function<RequestPtr(unsigned, bool)>* job_ = nullptr;
  bool stop_ = false;
  std::mutex mu_;
  std::exception_ptr error_;
  std::vector<double> dev_;  // per-rank device duration of the last job
};

using FBuf = std::unique_ptr<Buffer<float>>;

// Small integers so float sums stay exact.
inline float value(unsigned rank, size_t i) { return static_cast<float>((rank * 7 + i * 3) % 61 + 1); }

struct PerRank {
  FBuf src, dst;
};

// Buffers of `src_elems` / `dst_elems` floats on every rank, filled with
// value(rank, i) and synced to the device.
std::vector<PerRank> make_buffers(World& w, size_t src_elems, size_t dst_elems);

struct OpSpec {
  std::string name;
  // Element counts for `bytes` on `p` ranks: src, dst, and the count argument.
  std::function<void(size_t elems, unsigned p, size_t& src, size_t& dst, size_t& count)> shape;
  std::function<RequestPtr(ACCL&, PerRank&, unsigned count, bool fpga, bool async)> call;
  // Expected dst element i on `rank` (nullopt: not checked on this rank).
  std::function<std::optional<float>(unsigned rank, unsigned p, size_t count, size_t i)> expect;
  double bus_factor(unsigned p) const {  // nccl-tests bus bandwidth factor
    double P = p;
    if (name == "allreduce") return 2 * (P - 1) / P;
    if (name == "allgather" || name == "reduce_scatter" || name == "alltoall") return (P - 1) / P;
    return 1;
  }
};

std::vector<OpSpec> collective_ops();

// Checks every rank's result; returns the number of wrong elements.
size_t verify(const OpSpec& op, World& w, std::vector<PerRank>& b, size_t count, size_t dst_elems);

}  // namespace accl::bench::core
