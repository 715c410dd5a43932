// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Gather latency to root 0; size = bytes each rank contributes.
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o;
  if (int st = start_collective(argc, argv, o, "Gather Latency", nullptr); st >= 0) return st;
  const int me = ctx().rank, nranks = ctx().size;
  const size_t esz = type_size(o.type);
  Bytes send(o.max_size), recv(me == 0 ? o.max_size * static_cast<size_t>(nranks) : 1);
  Collective c;
  c.call = [&] {
    MPI_Gather(send.data(), static_cast<int>(c.count), mpi_type(o.type), recv.data(), static_cast<int>(c.count),
               mpi_type(o.type), 0, MPI_COMM_WORLD);
  };
  c.fill = [&](int it) {
    fill(o.type, send.data(), c.count, me, 0, it);
    if (me == 0) clear(recv.data(), c.count * esz * static_cast<size_t>(nranks));
  };
  c.check = [&](int it) {
    if (me != 0) return;
    for (int s = 0; s < nranks; ++s)
      check(o.type, recv.data() + static_cast<size_t>(s) * c.count * esz, c.count, s, 0, it, 1, "gather");
  };
  run_sized(c, o, 1);
  return finish(o);
}
