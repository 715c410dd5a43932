// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Alltoall latency; size = bytes each rank sends to each rank.
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o = defaults(Kind::collective, Type::mpi_char);
  if (int st = start(argc, argv, Kind::collective, o, 1); st >= 0) return st;
  header("All-to-All Personalized Exchange Latency", o, true, nullptr);
  const int me = ctx().rank, nranks = ctx().size;
  const size_t esz = type_size(o.type);
  const size_t total = o.max_size * static_cast<size_t>(nranks);
  Bytes send(total), recv(total);
  size_t count = 0;
  auto fill_send = [&](int it) {
    for (int d = 0; d < nranks; ++d) fill(o.type, send.data() + static_cast<size_t>(d) * count * esz, count, me, d, it);
  };
  Collective c;
  c.prepare = [&](size_t, size_t n) {
    count = n;
    fill_send(0);
  };
  c.call = [&] {
    MPI_Alltoall(send.data(), static_cast<int>(count), mpi_type(o.type), recv.data(), static_cast<int>(count),
                 mpi_type(o.type), MPI_COMM_WORLD);
  };
  c.fill = [&](int it) {
    fill_send(it);
    clear(recv.data(), count * esz * static_cast<size_t>(nranks));
  };
  c.check = [&](int it) {
    for (int s = 0; s < nranks; ++s)
      check(o.type, recv.data() + static_cast<size_t>(s) * count * esz, count, s, me, it, 1, "alltoall");
  };
  run_sized(c, o, 1);
  int status = finish(o);
  MPI_Finalize();
  return status;
}
