// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Allgather latency; size = bytes each rank contributes.
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o = defaults(Kind::collective, Type::mpi_char);
  if (int st = start(argc, argv, Kind::collective, o, 1); st >= 0) return st;
  header("Allgather Latency", o, true, nullptr);
  const int me = ctx().rank, nranks = ctx().size;
  const size_t esz = type_size(o.type);
  Bytes send(o.max_size), recv(o.max_size * static_cast<size_t>(nranks));
  size_t count = 0;
  Collective c;
  c.prepare = [&](size_t, size_t n) {
    count = n;
    fill(o.type, send.data(), n, me, 0, 0);
  };
  c.call = [&] {
    MPI_Allgather(send.data(), static_cast<int>(count), mpi_type(o.type), recv.data(), static_cast<int>(count),
                  mpi_type(o.type), MPI_COMM_WORLD);
  };
  c.fill = [&](int it) {
    fill(o.type, send.data(), count, me, 0, it);
    clear(recv.data(), count * esz * static_cast<size_t>(nranks));
  };
  c.check = [&](int it) {
    for (int s = 0; s < nranks; ++s)
      check(o.type, recv.data() + static_cast<size_t>(s) * count * esz, count, s, 0, it, 1, "allgather");
  };
  run_sized(c, o, 1);
  int status = finish(o);
  MPI_Finalize();
  return status;
}
