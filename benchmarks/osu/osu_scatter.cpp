// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Scatter latency from root 0; size = bytes each rank receives.
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o = defaults(Kind::collective, Type::mpi_char);
  if (int st = start(argc, argv, Kind::collective, o, 1); st >= 0) return st;
  header("Scatter Latency", o, true, nullptr);
  const int me = ctx().rank, nranks = ctx().size;
  const size_t esz = type_size(o.type);
  Bytes send(me == 0 ? o.max_size * static_cast<size_t>(nranks) : 1), recv(o.max_size);
  size_t count = 0;
  auto fill_root = [&](int it) {
    if (me != 0) return;
    for (int d = 0; d < nranks; ++d) fill(o.type, send.data() + static_cast<size_t>(d) * count * esz, count, d, 0, it);
  };
  Collective c;
  c.prepare = [&](size_t, size_t n) {
    count = n;
    fill_root(0);
  };
  c.call = [&] {
    MPI_Scatter(send.data(), static_cast<int>(count), mpi_type(o.type), recv.data(), static_cast<int>(count),
                mpi_type(o.type), 0, MPI_COMM_WORLD);
  };
  c.fill = [&](int it) {
    fill_root(it);
    clear(recv.data(), count * esz);
  };
  c.check = [&](int it) { check(o.type, recv.data(), count, me, 0, it, 1, "scatter"); };
  run_sized(c, o, 1);
  int status = finish(o);
  MPI_Finalize();
  return status;
}
