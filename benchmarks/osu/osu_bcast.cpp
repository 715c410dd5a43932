// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Bcast latency from root 0 (MPI_CHAR by default).
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o;
  if (int st = start_collective(argc, argv, o, "Broadcast Latency", nullptr); st >= 0) return st;
  const int me = ctx().rank;
  Bytes buf(o.max_size);
  Collective c;
  c.call = [&] { MPI_Bcast(buf.data(), static_cast<int>(c.count), mpi_type(o.type), 0, MPI_COMM_WORLD); };
  c.fill = [&](int it) {
    if (me == 0) fill(o.type, buf.data(), c.count, 0, 0, it);
    else clear(buf.data(), c.count * type_size(o.type));
  };
  c.check = [&](int it) {
    if (me != 0) check(o.type, buf.data(), c.count, 0, 0, it, 1, "bcast");
  };
  run_sized(c, o, 1);
  return finish(o);
}
