// SPDX-License-Identifier: Apache-2.0
//
// Small helpers shared by the benchmarks of benchmarks/core: command-line
// sizes and lists, the summary of a set of per-iteration times, and one round
// of a checked ping-pong.
#pragma once

#include <accl/accl.hpp>

#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace accl::bench {

// "4096", "4K", "1.5M", "2GiB" -> bytes. Throws std::invalid_argument on
// anything else (including trailing garbage).
inline size_t parse_bytes(const std::string& s) {
  size_t used = 0;
  const double v = std::stod(s, &used);
  const std::string suffix = s.substr(used);
  double mult = 1;
  if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = 1024.0;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB") mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB") mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty()) throw std::invalid_argument("bad size '" + s + "'");
  if (v < 0) throw std::invalid_argument("negative size '" + s + "'");
  return static_cast<size_t>(v * mult);
}

// "a,b,,c" -> {"a", "b", "c"}.
inline std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    if (comma > pos) out.push_back(s.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return out;
}

// Per-call times of one measurement (seconds).
struct Sample {
  unsigned iters = 0;
  double mean_s = 0, median_s = 0, min_s = 0;
  double dev_median_s = 0;  // device-measured duration (Request::duration_ns, max over ranks), where known
};

// Sorts `t` and summarizes it.
inline Sample summarize(std::vector<double>& t) {
  Sample s;
  s.iters = static_cast<unsigned>(t.size());
  if (t.empty()) return s;
  std::sort(t.begin(), t.end());
  s.min_s = t.front();
  s.median_s = t[t.size() / 2];
  s.mean_s = std::accumulate(t.begin(), t.end(), 0.0) / static_cast<double>(t.size());
  return s;
}

// One round of OSU latency's ping-pong between ranks 0 and 1 of `driver`'s
// global communicator over `buf`, a host buffer over `mem`: rank 0 sends the
// round number and receives the echo, rank 1 receives it and sends back its
// complement. False when what arrived (first and last element) was not this
// round's.
inline bool pingpong_round(accl::ACCL& driver, accl::BaseBuffer& buf, std::span<int32_t> mem, int rank,
                           unsigned round, unsigned tag) {
  const auto count = static_cast<unsigned>(mem.size());
  const auto peer = static_cast<unsigned>(1 - rank);
  const auto ping = static_cast<int32_t>(round);
  if (rank == 0) {
    mem.front() = mem.back() = ping;
    driver.send(buf, count, peer, tag);
    driver.recv(buf, count, peer, tag);
    return mem.front() == ~ping && mem.back() == ~ping;
  }
  driver.recv(buf, count, peer, tag);
  const bool ok = mem.front() == ping && mem.back() == ping;
  mem.front() = mem.back() = ~ping;
  driver.send(buf, count, peer, tag);
  return ok;
}

}  // namespace accl::bench
