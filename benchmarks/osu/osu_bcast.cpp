// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Bcast latency from root 0 (MPI_CHAR by default).
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o = defaults(Kind::collective, Type::mpi_char);
  if (int st = start(argc, argv, Kind::collective, o, 1); st >= 0) return st;
  header("Broadcast Latency", o, true, nullptr);
  const int me = ctx().rank;
  Bytes buf(o.max_size);
  size_t count = 0;
  Collective c;
  c.prepare = [&](size_t, size_t n) {
    count = n;
    if (me == 0) fill(o.type, buf.data(), n, 0, 0, 0);
  };
  c.call = [&] { MPI_Bcast(buf.data(), static_cast<int>(count), mpi_type(o.type), 0, MPI_COMM_WORLD); };
  c.fill = [&](int it) {
    if (me == 0) fill(o.type, buf.data(), count, 0, 0, it);
    else clear(buf.data(), count * type_size(o.type));
  };
  c.check = [&](int it) {
    if (me != 0) check(o.type, buf.data(), count, 0, 0, it, 1, "bcast");
  };
  run_sized(c, o, 1);
  int status = finish(o);
  MPI_Finalize();
  return status;
}
