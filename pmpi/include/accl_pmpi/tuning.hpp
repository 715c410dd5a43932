// SPDX-License-Identifier: Apache-2.0
//
// The offload policy as data (ACCL_POLICY, ACCL_TUNING_FILE): which calls the
// PMPI layer offloads, per call x communicator size x message size. MPI-free,
// like settings.hpp, so accl-info and the settings test check a file with the
// code MPI_Init runs.
//
// The file is JSON (format "accl-tuning-1", written by tools/accl-tune):
//   {"format": "accl-tuning-1", "default": "native",
//    "rules": [{"call": ["allreduce", "iallreduce"], "ranks": [2, 4],
//               "bytes": [8192, null], "use": "offload"}, ...],
//    "comment": ..., "measured": {...}}
// A rule names calls as ACCL_OFFLOAD_CALLS does (calls.def setting or MPI
// names, groups p2p/coll/icoll/all), optional inclusive windows of
// communicator sizes and of bytes (as ACCL_MIN_BYTES counts them; null = no
// upper limit), and "offload" or "native". The first rule that holds decides;
// no rule: "default". Point-to-point is decided per communicator (a receiver
// cannot know a message's size before it matches), so rules that select p2p
// calls take no bytes window. No per-call algorithm: the firmware picks it
// from its own table (firmware/src/collectives/tuning_table.cpp) and the 15
// call words carry no hint.
//
// Every input of a decision (call, communicator size, bytes, the table) is
// the same on every member, so all of them decide alike; MPI_Init checks that
// the ranks loaded the same table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace accl::pmpi::tuning {

enum class Policy : uint8_t { automatic, offload, native };

struct Rule {
  std::vector<bool> calls;  // by calls.def index
  uint64_t min_ranks = 0;
  uint64_t max_ranks = UINT64_MAX;
  uint64_t min_bytes = 0;
  uint64_t max_bytes = UINT64_MAX;
  bool offload = false;
};

struct Table {
  std::string path;  // where it was read from
  bool default_offload = false;
  std::vector<Rule> rules;
  // Per call index, the rules that name it, in order (index()): a decision
  // runs on every intercepted call, native ones included, and scanning all
  // rules cost about 250 instructions per call. Empty: scan them all.
  std::vector<std::vector<uint32_t>> by_call;

  // Builds by_call for calls.def indices below `calls` (after rules change).
  void index(size_t calls);
  // The first rule for (call index, communicator size, bytes), else the default.
  bool offloads(size_t call, uint64_t ranks, uint64_t bytes) const;
  // Whether it offloads (call index, communicator size) whatever the bytes.
  bool offloads_every_size(size_t call, uint64_t ranks) const;
  // Whether some rule (or the default) could offload the call at some
  // communicator size and byte count; false: native everywhere.
  bool may_offload(size_t call) const;
  // A digest of the decisions (not of comments or metadata): equal on ranks
  // that would decide alike.
  uint64_t digest() const;
};

// ACCL_POLICY.
Policy policy();

// The shipped default file: next to the build tree's sources when this
// program was loaded from that build tree, else the installed package's copy.
std::string default_path();

// ACCL_TUNING_FILE, else default_path().
std::string selected_path();

// Reads and checks a tuning file. Throws config::SettingError naming
// ACCL_TUNING_FILE, the file and the line (JSON syntax) or the field
// (rules[3].bytes) that is wrong.
Table load(const std::string& path);

}  // namespace accl::pmpi::tuning
