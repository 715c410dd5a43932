// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Allreduce latency (MPI_SUM, MPI_FLOAT by default).
// Built a second time with BOSU_SCAN as osu_scan (MPI_Scan: rank r receives
// the sum over ranks 0..r instead of over all ranks).
#include "osu_common.hpp"

using namespace bosu;

#ifdef BOSU_SCAN
constexpr bool kScan = true;
#else
constexpr bool kScan = false;
#endif

int main(int argc, char** argv) {
  Options o;
  if (int st = start_collective(argc, argv, o, kScan ? "Scan Latency" : "Allreduce Latency", "MPI_SUM"); st >= 0)
    return st;
  const int me = ctx().rank, nranks = ctx().size;
  // Rank r contributes (r + 1) x pattern: the sum over ranks 0..n-1 is n (n + 1) / 2 x pattern.
  const int summed = kScan ? me + 1 : nranks;
  Bytes send(o.max_size), recv(o.max_size);
  Collective c;
  c.call = [&] {
    const int count = static_cast<int>(c.count);
    if (kScan) MPI_Scan(send.data(), recv.data(), count, mpi_type(o.type), MPI_SUM, MPI_COMM_WORLD);
    else MPI_Allreduce(send.data(), recv.data(), count, mpi_type(o.type), MPI_SUM, MPI_COMM_WORLD);
  };
  c.fill = [&](int it) {
    fill(o.type, send.data(), c.count, 0, 0, it, me + 1);
    clear(recv.data(), c.count * type_size(o.type));
  };
  c.check = [&](int it) {
    check(o.type, recv.data(), c.count, 0, 0, it, summed * (summed + 1) / 2, kScan ? "scan" : "allreduce");
  };
  run_sized(c, o, 1);
  return finish(o);
}
