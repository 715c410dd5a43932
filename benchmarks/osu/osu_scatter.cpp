// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Scatter latency from root 0; size = bytes each rank receives.
// Built a second time with BOSU_V as osu_scatterv (MPI_Scatterv, equal
// counts, blocks at i x count, as OSU's osu_scatterv).
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o;
  const char* name = kVForm ? "scatterv" : "scatter";
  const char* title = kVForm ? "Scatterv Latency" : "Scatter Latency";
  if (int st = start_collective(argc, argv, o, title, nullptr); st >= 0) return st;
  const int me = ctx().rank, nranks = ctx().size;
  const size_t esz = type_size(o.type);
  Bytes send(me == 0 ? o.max_size * static_cast<size_t>(nranks) : 1), recv(o.max_size);
  Collective c;
  EqualBlocks blocks(nranks);
  if (kVForm) c.prepare = [&] { blocks.set(c.count); };
  c.call = [&] {
    if (kVForm)
      MPI_Scatterv(send.data(), blocks.counts.data(), blocks.displs.data(), mpi_type(o.type), recv.data(),
                   static_cast<int>(c.count), mpi_type(o.type), 0, MPI_COMM_WORLD);
    else
      MPI_Scatter(send.data(), static_cast<int>(c.count), mpi_type(o.type), recv.data(), static_cast<int>(c.count),
                  mpi_type(o.type), 0, MPI_COMM_WORLD);
  };
  c.fill = [&](int it) {
    if (me == 0)
      for (int d = 0; d < nranks; ++d)
        fill(o.type, send.data() + static_cast<size_t>(d) * c.count * esz, c.count, d, 0, it);
    clear(recv.data(), c.count * esz);
  };
  c.check = [&](int it) { check(o.type, recv.data(), c.count, me, 0, it, 1, name); };
  run_sized(c, o, 1);
  return finish(o);
}
