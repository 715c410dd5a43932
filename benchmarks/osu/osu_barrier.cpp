// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Barrier latency.
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o = defaults(Kind::barrier, Type::mpi_char);
  if (int st = start(argc, argv, Kind::barrier, o, 1); st >= 0) return st;
  header("Barrier Latency", o, false, nullptr);
  latency_columns(o, false);
  Collective c;
  c.call = [] { MPI_Barrier(MPI_COMM_WORLD); };
  double us = time_collective(c, o, 0);
  latency_row(-1, us, o.iters(0), o, 0);
  return finish(o);
}
