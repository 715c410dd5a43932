// SPDX-License-Identifier: Apache-2.0
//
// accl-bench-core's command line: what to run, at which sizes, for how long,
// and the driver options of its emulated CCLOs.
#pragma once

#include <accl/accl.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace accl::bench::core {

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

// Parses argv; prints the usage and exits on --help (status 0) or a bad option (status 2).
Args parse_args(int argc, char** argv);

}  // namespace accl::bench::core
