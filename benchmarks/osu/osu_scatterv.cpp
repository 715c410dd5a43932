// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Scatterv latency from rank 0; size = bytes each rank
// receives (equal counts, blocks at i x count, as OSU's osu_scatterv).
#include "osu_common.hpp"

#include <vector>

using namespace bosu;

int main(int argc, char** argv) {
  Options o;
  if (int st = start_collective(argc, argv, o, "Scatterv Latency", nullptr); st >= 0) return st;
  const int me = ctx().rank, nranks = ctx().size;
  const size_t esz = type_size(o.type);
  Bytes send(me == 0 ? o.max_size * static_cast<size_t>(nranks) : 1), recv(o.max_size);
  std::vector<int> counts(static_cast<size_t>(nranks)), displs(static_cast<size_t>(nranks));
  Collective c;
  c.prepare = [&] {
    for (int s = 0; s < nranks; ++s) {
      counts[static_cast<size_t>(s)] = static_cast<int>(c.count);
      displs[static_cast<size_t>(s)] = static_cast<int>(c.count) * s;
    }
  };
  c.call = [&] {
    MPI_Scatterv(send.data(), counts.data(), displs.data(), mpi_type(o.type), recv.data(), static_cast<int>(c.count),
                 mpi_type(o.type), 0, MPI_COMM_WORLD);
  };
  c.fill = [&](int it) {
    if (me == 0)
      for (int d = 0; d < nranks; ++d)
        fill(o.type, send.data() + static_cast<size_t>(d) * c.count * esz, c.count, d, 0, it);
    clear(recv.data(), c.count * esz);
  };
  c.check = [&](int it) { check(o.type, recv.data(), c.count, me, 0, it, 1, "scatterv"); };
  run_sized(c, o, 1);
  return finish(o);
}
