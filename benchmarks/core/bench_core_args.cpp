// SPDX-License-Identifier: Apache-2.0
//
// accl-bench-core's options: parsing and the usage text.
#include "bench_core_args.hpp"

#include "bench_util.hpp"

#include <accl/config.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <stdexcept>

namespace accl::bench::core {
namespace {

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

}  // namespace

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

}  // namespace accl::bench::core
