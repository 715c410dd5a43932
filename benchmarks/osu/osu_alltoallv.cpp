// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Alltoallv latency; size = bytes per pair of ranks (equal
// counts, blocks at i x count, as OSU's osu_alltoallv).
#include "osu_common.hpp"

#include <vector>

using namespace bosu;

int main(int argc, char** argv) {
  Options o;
  if (int st = start_collective(argc, argv, o, "All-to-Allv Personalized Exchange Latency", nullptr); st >= 0)
    return st;
  const int me = ctx().rank, nranks = ctx().size;
  const size_t esz = type_size(o.type);
  const size_t total = o.max_size * static_cast<size_t>(nranks);
  Bytes send(total), recv(total);
  std::vector<int> counts(static_cast<size_t>(nranks)), displs(static_cast<size_t>(nranks));
  Collective c;
  c.prepare = [&] {
    for (int s = 0; s < nranks; ++s) {
      counts[static_cast<size_t>(s)] = static_cast<int>(c.count);
      displs[static_cast<size_t>(s)] = static_cast<int>(c.count) * s;
    }
  };
  c.call = [&] {
    MPI_Alltoallv(send.data(), counts.data(), displs.data(), mpi_type(o.type), recv.data(), counts.data(),
                  displs.data(), mpi_type(o.type), MPI_COMM_WORLD);
  };
  c.fill = [&](int it) {
    for (int d = 0; d < nranks; ++d)
      fill(o.type, send.data() + static_cast<size_t>(d) * c.count * esz, c.count, me, d, it);
    clear(recv.data(), c.count * esz * static_cast<size_t>(nranks));
  };
  c.check = [&](int it) {
    for (int s = 0; s < nranks; ++s)
      check(o.type, recv.data() + static_cast<size_t>(s) * c.count * esz, c.count, s, me, it, 1, "alltoallv");
  };
  run_sized(c, o, 1);
  return finish(o);
}
