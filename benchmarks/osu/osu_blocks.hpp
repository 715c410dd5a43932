// SPDX-License-Identifier: Apache-2.0
//
// What the benchmarks of per-rank blocks share (osu_allgather, osu_gather,
// osu_scatter, osu_alltoall, each built a second time with BOSU_V as its v
// form: osu_allgatherv and so on; the neighbourhood collectives of
// osu_neighbor.cpp).
#pragma once

#include "osu_common.hpp"

#include <vector>

namespace bosu {

// Whether this program is the v form of its collective.
#ifdef BOSU_V
constexpr bool kVForm = true;
#else
constexpr bool kVForm = false;
#endif

// The counts and displacements of a v-form call moving equal blocks:
// `count` items each, block i at i x count, as OSU's v benchmarks do.
struct EqualBlocks {
  std::vector<int> counts, displs;
  void set(int nranks, size_t count) {
    counts.assign(static_cast<size_t>(nranks), static_cast<int>(count));
    displs.resize(static_cast<size_t>(nranks));
    for (int s = 0; s < nranks; ++s) displs[static_cast<size_t>(s)] = static_cast<int>(count) * s;
  }
};

// The options, this rank, the number of ranks, the element size, the
// collective and (v forms) its equal blocks, set for every size. Stays
// where it is declared: c.prepare refers to it.
struct BlockBench {
  Options o;
  int me = 0, nranks = 0;
  size_t esz = 0;
  Collective c;
  EqualBlocks blocks;

  // start_collective(): -1 to continue, else the exit status.
  int start(int& argc, char**& argv, const char* title) {
    if (int st = start_collective(argc, argv, o, title, nullptr); st >= 0) return st;
    me = ctx().rank;
    nranks = ctx().size;
    esz = type_size(o.type);
    if (kVForm) c.prepare = [this] { blocks.set(nranks, c.count); };
    return -1;
  }
  // Block `i` of a buffer of blocks of the current size.
  unsigned char* block(const Bytes& buf, int i) const { return buf.data() + static_cast<size_t>(i) * c.count * esz; }
  // Bytes of `n` blocks of the current size.
  size_t bytes(int n) const { return c.count * esz * static_cast<size_t>(n); }
  // The timed sizes, then the program's exit status.
  int run() {
    run_sized(c, o, 1);
    return finish(o);
  }
};

}  // namespace bosu
