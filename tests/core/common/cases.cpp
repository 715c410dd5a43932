// SPDX-License-Identifier: Apache-2.0
//
// Matrix rules (world size P):
//  * counts 1, 17, one RX buffer, one RX buffer + 1 element: every type x
//    every reduce function x device and host buffers x every root;
//    float32 also with mixed placement (inputs device, outputs host-only);
//  * 1 MiB: every type x every function on device buffers, float32 and
//    int32 on host buffers; roots {0, P-1} (P >= 8: float32 and int64 only);
//  * one scratch buffer (32 KiB) and one element more: float16, float32,
//    int64 x every function x roots {0, P-1};
//  * fp16 wire compression (float32 buffers): every count, every function,
//    device buffers (host buffers for count 17), every root for small counts;
//  * eager-only world (rendezvous disabled): float16, float32, int64 x
//    SUM, MAX x counts 17, RX buffer + 1, 3 RX buffers + 5 x every root;
//  * large-RX world (PMPI defaults): float32, int32 x SUM, PROD x counts 17,
//    max eager, max eager + 1, RX buffer + 1 x roots {0, P-1};
//  * quick (sanitizer builds): counts 17 and RX buffer + 1, roots {0, P-1},
//    float32 / int64 / float16, no 1 MiB, no eager world.
#include "cases.hpp"

#include <algorithm>
#include <functional>
#include <ostream>
#include <set>

namespace acclt {

std::string call_name(Call c) {
  switch (c) {
    case Call::copy: return "copy";
    case Call::combine: return "combine";
    case Call::nop: return "nop";
    case Call::sendrecv: return "sendrecv";
    case Call::bcast: return "bcast";
    case Call::scatter: return "scatter";
    case Call::gather: return "gather";
    case Call::allgather: return "allgather";
    case Call::reduce: return "reduce";
    case Call::allreduce: return "allreduce";
    case Call::reduce_scatter: return "reduce_scatter";
    case Call::alltoall: return "alltoall";
    case Call::barrier: return "barrier";
  }
  return "?";
}

bool is_rooted(Call c) { return c == Call::bcast || c == Call::scatter || c == Call::gather || c == Call::reduce; }
bool is_reduction(Call c) {
  return c == Call::combine || c == Call::reduce || c == Call::allreduce || c == Call::reduce_scatter;
}
bool is_local(Call c) { return c == Call::copy || c == Call::combine || c == Call::nop; }
bool supports_compression(Call c) {
  return !(is_local(c) || c == Call::barrier);
}

std::string case_name(const Case& c) {
  std::string n;
  if (c.world == WorldKind::eager) n += "eager_";
  if (c.world == WorldKind::large_rx) n += "largerx_";
  n += type_name(c.type);
  if (c.compressed) n += "_fp16wire";
  if (is_reduction(c.call)) n += "_" + op_name(c.op);
  if (is_rooted(c.call)) n += "_root" + std::to_string(c.root);
  n += "_" + count_name(c.count);
  n += "_" + placement_name(c.place);
  return n;
}

void PrintTo(const Case& c, std::ostream* os) { *os << call_name(c.call) << "/" << case_name(c); }

uint32_t case_seed(const Case& c) {
  return static_cast<uint32_t>(std::hash<std::string>{}(call_name(c.call) + case_name(c)) % 997);
}

std::vector<Case> make_cases(Call call, unsigned P, bool quick) {
  std::vector<Case> out;
  if (P == 0) P = 1;
  const bool rooted = is_rooted(call);
  const bool red = is_reduction(call);
  const std::vector<reduceFunction> ops = red ? all_ops() : std::vector<reduceFunction>{reduceFunction::SUM};

  auto roots_all = [&] {
    std::vector<unsigned> v;
    for (unsigned r = 0; r < (rooted ? P : 1u); ++r) v.push_back(r);
    return v;
  };
  auto roots_few = [&] {
    std::set<unsigned> s = {0u};
    if (rooted) {
      s.insert(P / 2);
      s.insert(P - 1);
    }
    return std::vector<unsigned>(s.begin(), s.end());
  };
  auto roots_ends = [&] {
    std::set<unsigned> s = {0u};
    if (rooted) s.insert(P - 1);
    return std::vector<unsigned>(s.begin(), s.end());
  };

  if (call == Call::nop || call == Call::barrier) {
    out.push_back({.call = call, .count = CountKind::one});
    return out;
  }

  std::vector<dataType> types = all_types();
  std::vector<CountKind> small = {CountKind::one, CountKind::c17, CountKind::rxbuf, CountKind::rxbuf_plus1};
  if (quick) {
    types = {dataType::float16, dataType::float32, dataType::int64};
    small = {CountKind::c17, CountKind::rxbuf_plus1};
  }

  // 1. small counts, full matrix
  for (dataType t : types)
    for (Placement pl : {Placement::device, Placement::host})
      for (CountKind cnt : small)
        for (reduceFunction op : ops) {
          const auto roots = quick ? roots_ends() : roots_all();
          for (unsigned root : roots)
            out.push_back({.call = call, .type = t, .op = op, .root = root, .count = cnt, .place = pl});
        }
  // mixed placement (inputs in device memory, outputs host-only), float32
  if (!quick && call != Call::nop)
    for (CountKind cnt : {CountKind::c17, CountKind::rxbuf_plus1})
      for (reduceFunction op : ops)
        for (unsigned root : roots_ends())
          out.push_back({.call = call, .type = dataType::float32, .op = op, .root = root, .count = cnt,
                         .place = Placement::mixed});

  // 2. 1 MiB subset
  if (!quick) {
    struct Big {
      dataType t;
      Placement pl;
      std::vector<reduceFunction> ops;
    };
    std::vector<Big> bigs;
    for (dataType t : all_types())
      if (P < 8 || t == dataType::float32 || t == dataType::int64) bigs.push_back({t, Placement::device, ops});
    bigs.push_back({dataType::float32, Placement::host, {reduceFunction::SUM}});
    bigs.push_back({dataType::int32, Placement::host, {reduceFunction::MAX}});
    for (const Big& b : bigs)
      for (reduceFunction op : b.ops) {
        if (!red && op != reduceFunction::SUM) continue;
        for (unsigned root : roots_ends())
          out.push_back({.call = call, .type = b.t, .op = op, .root = root, .count = CountKind::mib, .place = b.pl});
      }
  }

  // 2b. around the scratch (max rendezvous) buffer size: 32 KiB
  if (!quick && !is_local(call))
    for (dataType t : {dataType::float16, dataType::float32, dataType::int64})
      for (CountKind cnt : {CountKind::rndzv_limit, CountKind::rndzv_limit_plus1})
        for (reduceFunction op : ops)
          for (unsigned root : roots_ends())
            out.push_back({.call = call, .type = t, .op = op, .root = root, .count = cnt, .place = Placement::device});

  // 3. fp16 wire compression of float32 data
  if (supports_compression(call)) {
    std::vector<CountKind> ccounts = small;
    if (!quick) ccounts.push_back(CountKind::mib);
    for (CountKind cnt : ccounts)
      for (reduceFunction op : ops) {
        const auto roots = (quick || cnt == CountKind::mib) ? roots_ends() : roots_all();
        for (unsigned root : roots)
          for (Placement pl : {Placement::device, Placement::host}) {
            if (pl == Placement::host && cnt != CountKind::c17) continue;
            out.push_back({.call = call, .type = dataType::float32, .op = op, .root = root, .count = cnt, .place = pl,
                           .compressed = true});
          }
      }
  }

  // 4. eager-only world: multi-segment eager messages
  if (!quick && !is_local(call)) {
    for (dataType t : {dataType::float16, dataType::float32, dataType::int64})
      for (CountKind cnt : {CountKind::c17, CountKind::rxbuf_plus1, CountKind::eager_multi})
        for (reduceFunction op : {reduceFunction::SUM, reduceFunction::MAX}) {
          if (!red && op != reduceFunction::SUM) continue;
          const auto roots = P <= 4 ? roots_all() : roots_few();
          for (unsigned root : roots)
            out.push_back({.call = call, .type = t, .op = op, .root = root, .count = cnt, .place = Placement::device,
                           .world = WorldKind::eager});
        }
    for (dataType t : {dataType::float32, dataType::int32})
      for (CountKind cnt : {CountKind::c17, CountKind::eager_limit, CountKind::eager_limit_plus1,
                            CountKind::rxbuf_plus1})
        for (reduceFunction op : {reduceFunction::SUM, reduceFunction::PROD}) {
          if (!red && op != reduceFunction::SUM) continue;
          for (unsigned root : roots_ends())
            out.push_back({.call = call, .type = t, .op = op, .root = root, .count = cnt, .place = Placement::device,
                           .world = WorldKind::large_rx});
        }
  }
  return out;
}

}  // namespace acclt
