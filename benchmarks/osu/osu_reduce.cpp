// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Reduce latency to root 0 (MPI_SUM, MPI_FLOAT by default).
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o = defaults(Kind::collective, Type::mpi_float);
  o.min_size = 4;
  if (int st = start(argc, argv, Kind::collective, o, 1); st >= 0) return st;
  if (!require_arith_type(o)) return MPI_Finalize(), 2;
  header("Reduce Latency", o, true, "MPI_SUM");
  const int me = ctx().rank, nranks = ctx().size;
  Bytes send(o.max_size), recv(o.max_size);
  size_t count = 0;
  Collective c;
  c.prepare = [&](size_t, size_t n) {
    count = n;
    fill(o.type, send.data(), n, 0, 0, 0, me + 1);
  };
  c.call = [&] {
    MPI_Reduce(send.data(), recv.data(), static_cast<int>(count), mpi_type(o.type), MPI_SUM, 0, MPI_COMM_WORLD);
  };
  c.fill = [&](int it) {
    fill(o.type, send.data(), count, 0, 0, it, me + 1);
    clear(recv.data(), count * type_size(o.type));
  };
  c.check = [&](int it) {
    if (me == 0) check(o.type, recv.data(), count, 0, 0, it, nranks * (nranks + 1) / 2, "reduce");
  };
  run_sized(c, o, 1);
  int status = finish(o);
  MPI_Finalize();
  return status;
}
