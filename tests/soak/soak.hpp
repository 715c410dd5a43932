// SPDX-License-Identifier: Apache-2.0
//
// Soak: a long, seeded, random sequence of ACCL calls over P ranks, every
// result checked against a host reference.
//
// Every rank builds the same random generator from the shared seed and draws
// the same sequence of call descriptions, so no coordination is needed to
// agree on what comes next; data values are a pure function of (seed, call,
// global rank, element), so every rank can compute what it must receive from
// every other rank. Ranks drift apart freely between checkpoints (a rank not
// involved in a call skips it), which is exactly the arrival-before-receive
// and receive-before-arrival mix the firmware has to get right.
//
// Every 16 calls all ranks meet in a checkpoint allreduce (through ACCL
// itself) that carries "time is up" and "I failed" flags, so a time budget
// or one rank's error stops every rank at the same call.
#pragma once

#include <accl/accl.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace soak {

struct Options {
  uint64_t calls = 2000;      // --calls N: stop after N calls ...
  double seconds = 90;        // --seconds S: ... or at the first checkpoint after S seconds
  uint64_t seed = 20240607;   // --seed X
  unsigned ranks = 4;         // --ranks P (in-process runner only)
  std::string transport;      // --transport inproc|shm|tcp|udp ("" = ACCL_EMU_TRANSPORT / automatic)
  bool verbose = false;       // --verbose: one line per call on rank 0
  // --inject-mismatch K: rank 0 corrupts one output element of call K (or of
  // the first call it takes part in after K) before checking it. Proves the
  // checker can fail (meson test soak-selftest, which must FAIL).
  int64_t inject_mismatch = -1;
  // --skip-until K: draw but do not run calls before K (bisecting a failure:
  // does it need the history, or only the calls around it?).
  uint64_t skip_until = 0;
  // Not an option: when set, run_rank() stores the sequence position reached
  // there (for a watchdog that names where a hang happened).
  std::atomic<uint64_t>* progress = nullptr;
};

// Parses --calls/--seconds/--seed/--ranks/--transport/--verbose (also as
// "--name value"). Returns an error text, empty on success.
std::string parse_options(int argc, char** argv, Options& out);
std::string usage(const char* argv0);

struct RankReport {
  unsigned rank = 0;
  uint64_t calls_drawn = 0;      // sequence positions passed (same on every rank when all went well)
  uint64_t calls_involved = 0;   // calls this rank took part in
  uint64_t checked_elements = 0; // output elements compared with the reference
  uint64_t mismatches = 0;       // wrong elements (including clobbered sentinels)
  uint64_t errors = 0;           // exceptions (DeviceError, TimeoutError, ArgumentError, ...)
  std::vector<std::string> messages;           // first few problems, each naming call index and description
  std::map<std::string, uint64_t> per_kind;    // calls involved, by kind
  double seconds = 0;
};

// Runs the sequence on one rank. `accl` must be initialized on a global
// communicator of `size` ranks in which this is rank `rank`.
RankReport run_rank(accl::ACCL& accl, unsigned rank, unsigned size, const Options& options);

// Prints one summary for all ranks; returns the process exit code (0 only
// when every rank finished the same number of calls with zero mismatches and
// zero errors).
int summarize(const std::vector<RankReport>& reports, const Options& options, const std::string& runner);

}  // namespace soak
