// SPDX-License-Identifier: Apache-2.0
//
// The collectives accl-bench-core times: their buffers, shapes, calls and
// expected results.
#include "bench_core_world.hpp"

namespace accl::bench::core {

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

namespace {

float sum_over(unsigned p, size_t i) {
  float s = 0;
  for (unsigned r = 0; r < p; ++r) s += value(r, i);
  return s;
}

}  // namespace

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

}  // namespace accl::bench::core
