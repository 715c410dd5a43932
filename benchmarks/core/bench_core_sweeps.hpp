// SPDX-License-Identifier: Apache-2.0
//
// What accl-bench-core measures: one function per op (copy, nop, pingpong,
// a collective's size sweep, allreduce scaling), the targets they judge and
// the count of failures they saw.
#pragma once

#include "bench_core_args.hpp"
#include "bench_core_measure.hpp"
#include "bench_core_world.hpp"

#include <string>
#include <vector>

namespace accl::bench::core {

struct Targets {
  std::vector<std::string> lines;
  bool all_met = true;
  void add(bool met, const std::string& what) {
    lines.push_back(std::string(met ? "  MET   " : "  MISSED") + "  " + what);
    all_met = all_met && met;
  }
};

inline int failures = 0;

void bench_copy(const Args& a, World& w, Out& out, Targets& tg);
void bench_nop(const Args& a, World& w, Out& out, Targets& tg);
// OSU latency's pattern between ranks 0 and 1 of the world, each on a host
// thread of its own: rank 0 sends and waits for the echo, rank 1 receives and
// sends back. Host buffers over plain memory, as the PMPI layer uses them.
// Each message carries its iteration number, which the receiver checks.
void bench_pingpong(const Args& a, World& w, Out& out);
void bench_collective(const Args& a, World& w, const OpSpec& op, Out& out, Targets& tg);
void bench_scaling(const Args& a, Out& out);

}  // namespace accl::bench::core
