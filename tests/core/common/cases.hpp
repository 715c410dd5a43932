// SPDX-License-Identifier: Apache-2.0
//
// The parameter matrix of the collective tests: one Case per test instance.
#pragma once

#include "types.hpp"

#include <string>
#include <vector>

namespace acclt {

enum class Call {
  copy, combine, nop, sendrecv, bcast, scatter, gather, allgather, reduce, allreduce, reduce_scatter, alltoall,
  barrier,
};
std::string call_name(Call c);
bool is_rooted(Call c);
bool is_reduction(Call c);
bool is_local(Call c);  // copy, combine, nop: no peer involved
bool supports_compression(Call c);

// Which world configuration a case runs in.
enum class WorldKind {
  standard,  // 16 x 1 KiB RX buffers, eager <= 1 KiB, rendezvous above (32 KiB scratch)
  eager,     // rendezvous disabled: everything eager, multi-segment messages
  large_rx,  // PMPI defaults: 16 x 64 KiB RX buffers, eager <= 64 KiB, 4 MiB scratch
};

struct Case {
  Call call = Call::nop;
  dataType type = dataType::float32;
  reduceFunction op = reduceFunction::SUM;
  unsigned root = 0;
  CountKind count = CountKind::c17;
  Placement place = Placement::device;
  bool compressed = false;  // float32 buffers, float16 on the wire
  WorldKind world = WorldKind::standard;
};
std::string case_name(const Case& c);
// GoogleTest prints failing parameters with this.
void PrintTo(const Case& c, std::ostream* os);
// Per-case data seed, so no two tests put the same bytes in flight.
uint32_t case_seed(const Case& c);

// The matrix for `call` in a world of `world_size` ranks (see cases.cpp for
// the rules that bound its size; `quick` is the sanitizer-build subset).
std::vector<Case> make_cases(Call call, unsigned world_size, bool quick);

struct CaseNamer {
  std::string operator()(const ::testing::TestParamInfo<Case>& info) const { return case_name(info.param); }
};

}  // namespace acclt
