// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Reduce_scatter latency (equal counts; MPI_SUM, MPI_FLOAT by
// default); size = bytes of the whole send buffer, each rank keeps 1/P of it.
// Built a second time with BOSU_BLOCK as osu_reduce_scatter_block
// (MPI_Reduce_scatter_block).
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o;
#ifdef BOSU_BLOCK
  const char* title = "Reduce_scatter_block Latency";
#else
  const char* title = "Reduce_scatter Latency";
#endif
  if (int st = start_collective(argc, argv, o, title, "MPI_SUM"); st >= 0) return st;
  const int me = ctx().rank, nranks = ctx().size;
  const size_t esz = type_size(o.type);
  Bytes send(o.max_size), recv(o.max_size);
  std::vector<int> counts(static_cast<size_t>(nranks), 0);
  size_t per = 0;
  Collective c;
  c.prepare = [&] {
    per = c.count / static_cast<size_t>(nranks);
    std::fill(counts.begin(), counts.end(), static_cast<int>(per));
  };
  c.call = [&] {
#ifdef BOSU_BLOCK
    MPI_Reduce_scatter_block(send.data(), recv.data(), static_cast<int>(per), mpi_type(o.type), MPI_SUM,
                             MPI_COMM_WORLD);
#else
    MPI_Reduce_scatter(send.data(), recv.data(), counts.data(), mpi_type(o.type), MPI_SUM, MPI_COMM_WORLD);
#endif
  };
  c.fill = [&](int it) {
    for (int d = 0; d < nranks; ++d)
      fill(o.type, send.data() + static_cast<size_t>(d) * per * esz, per, d, 0, it, me + 1);
    clear(recv.data(), per * esz);
  };
  c.check = [&](int it) {
    check(o.type, recv.data(), per, me, 0, it, nranks * (nranks + 1) / 2, "reduce_scatter");
  };
  run_sized(c, o, static_cast<size_t>(nranks));
  return finish(o);
}
