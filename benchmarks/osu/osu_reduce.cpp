// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Reduce latency to root 0 (MPI_SUM, MPI_FLOAT by default).
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o;
  if (int st = start_collective(argc, argv, o, "Reduce Latency", "MPI_SUM"); st >= 0) return st;
  const int me = ctx().rank, nranks = ctx().size;
  Bytes send(o.max_size), recv(o.max_size);
  Collective c;
  c.call = [&] {
    MPI_Reduce(send.data(), recv.data(), static_cast<int>(c.count), mpi_type(o.type), MPI_SUM, 0, MPI_COMM_WORLD);
  };
  c.fill = [&](int it) {
    fill(o.type, send.data(), c.count, 0, 0, it, me + 1);
    clear(recv.data(), c.count * type_size(o.type));
  };
  c.check = [&](int it) {
    if (me == 0) check(o.type, recv.data(), c.count, 0, 0, it, nranks * (nranks + 1) / 2, "reduce");
  };
  run_sized(c, o, 1);
  return finish(o);
}
