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
#include "bench_core_args.hpp"
#include "bench_core_measure.hpp"
#include "bench_core_sweeps.hpp"
#include "bench_core_world.hpp"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <string>

using namespace accl::bench::core;

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
