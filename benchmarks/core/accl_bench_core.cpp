// SPDX-License-Identifier: Apache-2.0
//
// accl-bench-core: driver-level benchmark of the embedded CCLO emulator, no MPI.
//
// N emulated CCLOs live in this process (accl::emu::create_local_world). The
// benchmark times
//   * copy      device->device (from_fpga/to_fpga) on rank 0, next to a plain
//               memcpy of the same bytes in the same run;
//   * allreduce float32 SUM over all ranks (device buffers), next to memcpy;
//   * nop       round trip of one synchronous call (µs);
//   * pingpong  send/recv ping-pong between ranks 0 and 1, one host thread
//               each (OSU latency's pattern without MPI and the PMPI layer);
//               ACCL_EMU_TRANSPORT=shm puts a shared-memory ring between
//               them instead of the in-process transport. Run it with no
//               more ranks than cores (--ranks 2 here): only such a world
//               keeps its waiting host threads spinning (create_local_world);
//   * optional sweeps of bcast, reduce, allgather, reduce_scatter, alltoall;
//   * scaling   allreduce time vs rank count next to the ring model
//               2(P-1)/P * N bytes per rank.
// Every collective result is checked once per size (outside the timed region).
//
// Sizes follow the nccl-tests convention: `bytes` is the size of the largest
// buffer of one rank (allgather: the gathered result; reduce_scatter: the
// whole input; alltoall: the whole send buffer).
//
// Collectives need every rank to take part at once: by default the benchmark
// issues the call on every rank with run_async from one thread and then waits
// for all of them (--threads: one host thread per rank instead).
#include <accl/accl.hpp>
#include <accl/config.hpp>
#include <accl_emu/emulator.hpp>

#include "bench_util.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using accl::ACCL;
using accl::Buffer;
using accl::RequestPtr;
using accl::bench::parse_bytes;
using accl::bench::pingpong_round;
using accl::bench::Sample;
using accl::bench::split;
using accl::bench::summarize;

struct Args {
  unsigned ranks = 4;
  size_t min_bytes = 64;
  size_t max_bytes = size_t{64} << 20;
  unsigned step = 2;             // size multiplier between rows
  double budget_s = 0.2;         // time budget per size (sets the iteration count)
  unsigned min_iters = 3;
  unsigned max_iters = 1000;
  unsigned fixed_iters = 0;      // --iters: fixed count instead of the budget
  unsigned nop_iters = 20000;
  unsigned pingpong_iters = 20000;
  std::vector<size_t> pingpong_sizes = {8, 1024, 4096};
  std::vector<std::string> ops = {"copy", "allreduce", "nop"};
  bool scaling = false;
  std::vector<unsigned> scale_ranks = {2, 3, 4, 6, 8, 12, 16};
  std::vector<size_t> scale_sizes = {size_t{1} << 20, size_t{16} << 20};
  bool threads = false;
  bool fpga = true;              // from_fpga/to_fpga
  std::string csv;               // path, "-" = stdout
  bool quiet = false;
  bool check = true;             // verify results once per size
  accl::InitOptions init;
  unsigned timeout_ms = 0;
};

[[noreturn]] void usage(int status) {
  std::FILE* out = status == 0 ? stdout : stderr;
  std::fprintf(out,
      "Usage: accl-bench-core [options]\n"
      "  --ranks N            emulated CCLOs in this process (default 4, up to 16)\n"
      "  --ops LIST           comma list of copy,allreduce,nop,pingpong,bcast,reduce,\n"
      "                       allgather,reduce_scatter,alltoall (default copy,allreduce,nop)\n"
      "  --all                every op above\n"
      "  --min BYTES --max BYTES  size range (default 64 .. 64M; K/M/G suffixes)\n"
      "  --step F             size multiplier between rows (default 2)\n"
      "  --budget SEC         time budget per size (default 0.2; sets iterations)\n"
      "  --iters N            fixed iteration count per size instead of --budget\n"
      "  --max-iters N        cap of budget-derived iterations (default 1000)\n"
      "  --nop-iters N        nop round trips (default 20000)\n"
      "  --pingpong-iters N   pingpong round trips per size (default 20000)\n"
      "  --pingpong-sizes LIST  pingpong message sizes (default 8,1K,4K)\n"
      "  --scaling            allreduce vs rank count next to the ring model\n"
      "  --scale-ranks LIST   rank counts for --scaling (default 2,3,4,6,8,12,16)\n"
      "  --scale-sizes LIST   sizes for --scaling (default 1M,16M)\n"
      "  --only-scaling       skip the per-op sweeps (with --scaling)\n"
      "  --threads            one host thread per rank instead of run_async from one thread\n"
      "  --host               host<->device syncs on every call (from_fpga/to_fpga=false)\n"
      "  --no-check           skip the result checks (e.g. when profiling)\n"
      "  --rx-count N --rx-size BYTES --eager BYTES --rendezvous BYTES\n"
      "                       driver InitOptions (default: ACCL_RX_BUFFER_COUNT etc.)\n"
      "  --timeout-ms MS      device timeout per call\n"
      "  --csv PATH           also write CSV (\"-\": CSV on stdout instead of tables)\n"
      "  -h, --help\n");
  std::exit(status);
}

Args parse_args(int argc, char** argv) {
  Args a;
  a.init.rx_buffer_count = static_cast<unsigned>(accl::config::get_int("ACCL_RX_BUFFER_COUNT"));
  a.init.rx_buffer_size = static_cast<size_t>(accl::config::get_int("ACCL_RX_BUFFER_SIZE"));
  a.init.max_rendezvous_size = static_cast<size_t>(accl::config::get_int("ACCL_MAX_RENDEZVOUS_SIZE"));
  bool only_scaling = false;
  std::optional<size_t> eager;  // --eager; else ACCL_MAX_EAGER_SIZE, capped by the final RX buffers
  try {
    for (int i = 1; i < argc; ++i) {
      std::string o = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(o + " needs a value");
        return argv[++i];
      };
      if (o == "-h" || o == "--help") usage(0);
      else if (o == "--ranks") a.ranks = static_cast<unsigned>(std::stoul(next()));
      else if (o == "--ops") a.ops = split(next());
      else if (o == "--all") a.ops = {"copy", "allreduce", "nop", "pingpong", "bcast", "reduce", "allgather", "reduce_scatter", "alltoall"};
      else if (o == "--min") a.min_bytes = parse_bytes(next());
      else if (o == "--max") a.max_bytes = parse_bytes(next());
      else if (o == "--step") a.step = static_cast<unsigned>(std::stoul(next()));
      else if (o == "--budget") a.budget_s = std::stod(next());
      else if (o == "--iters") a.fixed_iters = static_cast<unsigned>(std::stoul(next()));
      else if (o == "--max-iters") a.max_iters = static_cast<unsigned>(std::stoul(next()));
      else if (o == "--nop-iters") a.nop_iters = static_cast<unsigned>(std::stoul(next()));
      else if (o == "--pingpong-iters") a.pingpong_iters = static_cast<unsigned>(std::stoul(next()));
      else if (o == "--pingpong-sizes") {
        a.pingpong_sizes.clear();
        for (auto& s : split(next())) a.pingpong_sizes.push_back(parse_bytes(s));
      }
      else if (o == "--scaling") a.scaling = true;
      else if (o == "--only-scaling") a.scaling = only_scaling = true;
      else if (o == "--scale-ranks") {
        a.scale_ranks.clear();
        for (auto& s : split(next())) a.scale_ranks.push_back(static_cast<unsigned>(std::stoul(s)));
      } else if (o == "--scale-sizes") {
        a.scale_sizes.clear();
        for (auto& s : split(next())) a.scale_sizes.push_back(parse_bytes(s));
      } else if (o == "--threads") a.threads = true;
      else if (o == "--host") a.fpga = false;
      else if (o == "--no-check") a.check = false;
      else if (o == "--rx-count") a.init.rx_buffer_count = static_cast<unsigned>(std::stoul(next()));
      else if (o == "--rx-size") a.init.rx_buffer_size = parse_bytes(next());
      else if (o == "--eager") eager = parse_bytes(next());
      else if (o == "--rendezvous") a.init.max_rendezvous_size = parse_bytes(next());
      else if (o == "--timeout-ms") a.timeout_ms = static_cast<unsigned>(std::stoul(next()));
      else if (o == "--csv") a.csv = next();
      else throw std::invalid_argument("unknown option " + o);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accl-bench-core: %s\n", e.what());
    usage(2);
  }
  a.init.max_eager_size =
      eager ? *eager
            : static_cast<size_t>(accl::config::max_eager_size(a.init.rx_buffer_count, a.init.rx_buffer_size));
  if (only_scaling) a.ops.clear();
  if (a.ranks < 1 || a.ranks > 64) {
    std::fprintf(stderr, "accl-bench-core: --ranks must be 1..64\n");
    std::exit(2);
  }
  if (a.step < 2) a.step = 2;
  if (a.min_bytes < 4) a.min_bytes = 4;
  a.quiet = a.csv == "-";
  return a;
}

std::string human(size_t bytes) {
  char buf[32];
  if (bytes >= (size_t{1} << 30) && bytes % (size_t{1} << 30) == 0) std::snprintf(buf, sizeof buf, "%zuG", bytes >> 30);
  else if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0) std::snprintf(buf, sizeof buf, "%zuM", bytes >> 20);
  else if (bytes >= 1024 && bytes % 1024 == 0) std::snprintf(buf, sizeof buf, "%zuK", bytes >> 10);
  else std::snprintf(buf, sizeof buf, "%zu", bytes);
  return buf;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Device-measured duration of the operation that just ran (set by the op).
double last_device_s = 0;

// Runs `once` (one operation) for about --budget seconds: one untimed first
// call (page faults, connection set-up), a timed calibration of up to 10 % of
// the budget, then the measured iterations. Operations faster than
// `min_sample_s` are timed in batches (one sample = mean of the batch), so
// clock overhead does not dominate (memcpy of small sizes).
Sample measure(const Args& a, const std::function<void()>& once, unsigned max_iters, double min_sample_s = 0) {
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

Sample measure_memcpy(const Args& a, size_t bytes, HostMem& src, HostMem& dst) {
  return measure(a, [&] {
    std::memcpy(dst.p, src.p, bytes);
    // Keep the copy observable.
    asm volatile("" : : "r"(dst.p) : "memory");
  }, a.max_iters, 20e-6);
}

// ----------------------------------------------------------------------------
// Output: aligned tables on stdout and/or CSV rows.
// ----------------------------------------------------------------------------
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

// ----------------------------------------------------------------------------
// A world of in-process CCLOs and a way to run one collective on all ranks.
// ----------------------------------------------------------------------------
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
float value(unsigned rank, size_t i) { return static_cast<float>((rank * 7 + i * 3) % 61 + 1); }

struct PerRank {
  FBuf src, dst;
};

// Buffers of `src_elems` / `dst_elems` floats on every rank, filled with
// value(rank, i) and synced to the device.
std::vector<PerRank> make_buffers(World& w, size_t src_elems, size_t dst_elems) {
  std::vector<PerRank> b(w.size());
  for (unsigned r = 0; r < w.size(); ++r) {
    b[r].src = w[r].create_buffer<float>(std::max<size_t>(src_elems, 1));
    b[r].dst = w[r].create_buffer<float>(std::max<size_t>(dst_elems, 1));
    for (size_t i = 0; i < src_elems; ++i) (*b[r].src)[i] = value(r, i);
    std::fill(b[r].dst->begin(), b[r].dst->end(), -1.0f);
    b[r].src->sync_to_device();
    b[r].dst->sync_to_device();
  }
  return b;
}

// ----------------------------------------------------------------------------
// Ops
// ----------------------------------------------------------------------------
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

float sum_over(unsigned p, size_t i) {
  float s = 0;
  for (unsigned r = 0; r < p; ++r) s += value(r, i);
  return s;
}

std::vector<OpSpec> collective_ops() {
  using RF = accl::reduceFunction;
  std::vector<OpSpec> ops;
  ops.push_back({"allreduce",
                 [](size_t e, unsigned, size_t& s, size_t& d, size_t& c) { s = d = c = e; },
                 [](ACCL& x, PerRank& b, unsigned c, bool f, bool as) {
                   return x.allreduce(*b.src, *b.dst, c, RF::SUM, accl::GLOBAL_COMM, f, f, accl::dataType::none, as);
                 },
                 [](unsigned, unsigned p, size_t, size_t i) -> std::optional<float> { return sum_over(p, i); }});
  ops.push_back({"bcast",
                 [](size_t e, unsigned, size_t& s, size_t& d, size_t& c) { s = d = c = e; },
                 [](ACCL& x, PerRank& b, unsigned c, bool f, bool as) {
                   return x.bcast(*b.src, c, 0, accl::GLOBAL_COMM, f, f, accl::dataType::none, as);
                 },
                 nullptr});  // bcast works in place on src; checked separately below
  ops.push_back({"reduce",
                 [](size_t e, unsigned, size_t& s, size_t& d, size_t& c) { s = d = c = e; },
                 [](ACCL& x, PerRank& b, unsigned c, bool f, bool as) {
                   return x.reduce(*b.src, *b.dst, c, 0, RF::SUM, accl::GLOBAL_COMM, f, f, accl::dataType::none, as);
                 },
                 [](unsigned r, unsigned p, size_t, size_t i) -> std::optional<float> {
                   if (r != 0) return std::nullopt;
                   return sum_over(p, i);
                 }});
  ops.push_back({"allgather",
                 [](size_t e, unsigned p, size_t& s, size_t& d, size_t& c) {
                   c = e / p;
                   s = c;
                   d = c * p;
                 },
                 [](ACCL& x, PerRank& b, unsigned c, bool f, bool as) {
                   return x.allgather(*b.src, *b.dst, c, accl::GLOBAL_COMM, f, f, accl::dataType::none, as);
                 },
                 [](unsigned, unsigned, size_t c, size_t i) -> std::optional<float> {
                   return value(static_cast<unsigned>(i / c), i % c);
                 }});
  ops.push_back({"reduce_scatter",
                 [](size_t e, unsigned p, size_t& s, size_t& d, size_t& c) {
                   c = e / p;
                   s = c * p;
                   d = c;
                 },
                 [](ACCL& x, PerRank& b, unsigned c, bool f, bool as) {
                   return x.reduce_scatter(*b.src, *b.dst, c, RF::SUM, accl::GLOBAL_COMM, f, f, accl::dataType::none, as);
                 },
                 [](unsigned r, unsigned p, size_t c, size_t i) -> std::optional<float> {
                   return sum_over(p, r * c + i);
                 }});
  ops.push_back({"alltoall",
                 [](size_t e, unsigned p, size_t& s, size_t& d, size_t& c) {
                   c = e / p;
                   s = d = c * p;
                 },
                 [](ACCL& x, PerRank& b, unsigned c, bool f, bool as) {
                   return x.alltoall(*b.src, *b.dst, c, accl::GLOBAL_COMM, f, f, accl::dataType::none, as);
                 },
                 [](unsigned r, unsigned, size_t c, size_t i) -> std::optional<float> {
                   // Block s of rank r's result is block r of rank s's input.
                   unsigned s = static_cast<unsigned>(i / c);
                   return value(s, r * c + i % c);
                 }});
  return ops;
}

// Checks every rank's result; returns the number of wrong elements.
size_t verify(const OpSpec& op, World& w, std::vector<PerRank>& b, size_t count, size_t dst_elems) {
  size_t bad = 0;
  for (unsigned r = 0; r < w.size(); ++r) {
    if (op.name == "bcast") {
      b[r].src->sync_from_device();
      for (size_t i = 0; i < count; ++i)
        if ((*b[r].src)[i] != value(0, i)) ++bad;
      continue;
    }
    b[r].dst->sync_from_device();
    for (size_t i = 0; i < dst_elems; ++i) {
      auto want = op.expect(r, w.size(), count, i);
      if (want && (*b[r].dst)[i] != *want) {
        if (bad == 0)
          std::fprintf(stderr, "accl-bench-core: %s rank %u element %zu: got %g want %g\n", op.name.c_str(), r, i,
                       static_cast<double>((*b[r].dst)[i]), static_cast<double>(*want));
        ++bad;
      }
    }
  }
  return bad;
}

std::vector<size_t> size_list(const Args& a) {
  std::vector<size_t> s;
  for (size_t b = a.min_bytes; b <= a.max_bytes; b *= a.step) s.push_back(b);
  return s;
}

struct Targets {
  std::vector<std::string> lines;
  bool all_met = true;
  void add(bool met, const std::string& what) {
    lines.push_back(std::string(met ? "  MET   " : "  MISSED") + "  " + what);
    all_met = all_met && met;
  }
};

int failures = 0;

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

// OSU latency's pattern between ranks 0 and 1 of the world, each on a host
// thread of its own: rank 0 sends and waits for the echo, rank 1 receives and
// sends back. Host buffers over plain memory, as the PMPI layer uses them.
// Each message carries its iteration number, which the receiver checks.
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

}  // namespace

int main(int argc, char** argv) {
  Args a = parse_args(argc, argv);
  Out out(a);
  Targets tg;
  std::string who = a.ops.empty() ? std::string("scaling only") : std::to_string(a.ranks) + " in-process emulated CCLOs";
  out.table("# accl-bench-core: %s, %s; rx %u x %zu B, eager <= %zu B, rendezvous scratch %zu B\n", who.c_str(),
            a.threads ? "collectives on one host thread per rank" : "collectives with run_async from one thread",
            a.init.rx_buffer_count,
            a.init.rx_buffer_size, a.init.max_eager_size, a.init.max_rendezvous_size);
  auto wanted = [&](const char* n) { return std::find(a.ops.begin(), a.ops.end(), n) != a.ops.end(); };
  if (!a.ops.empty()) {
    std::unique_ptr<World> w;
    try {
      w = std::make_unique<World>(a, a.ranks);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "accl-bench-core: create_local_world(%u): %s\n", a.ranks, e.what());
      return 1;
    }
    auto guarded = [&](const char* what, const std::function<void()>& f) {
      try {
        f();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "accl-bench-core: %s: %s\n", what, e.what());
        out.table("# %s FAILED: %s\n", what, e.what());
        ++failures;
      }
    };
    if (wanted("nop")) guarded("nop", [&] { bench_nop(a, *w, out, tg); });
    if (wanted("pingpong")) guarded("pingpong", [&] { bench_pingpong(a, *w, out); });
    if (wanted("copy")) guarded("copy", [&] { bench_copy(a, *w, out, tg); });
    for (const auto& op : collective_ops())
      if (wanted(op.name.c_str())) guarded(op.name.c_str(), [&] { bench_collective(a, *w, op, out, tg); });
    for (const auto& o : a.ops) {
      static const char* known[] = {"copy", "nop", "pingpong", "allreduce", "bcast", "reduce", "allgather", "reduce_scatter", "alltoall"};
      if (std::none_of(std::begin(known), std::end(known), [&](const char* k) { return o == k; }))
        std::fprintf(stderr, "accl-bench-core: unknown op '%s' ignored\n", o.c_str());
    }
  }
  if (a.scaling) bench_scaling(a, out);
  if (!tg.lines.empty()) {
    out.table("\n# targets\n");
    for (auto& l : tg.lines) out.table("%s\n", l.c_str());
  }
  if (failures > 0) std::fprintf(stderr, "accl-bench-core: %d failure(s)\n", failures);
  return failures > 0 ? 1 : 0;
}
