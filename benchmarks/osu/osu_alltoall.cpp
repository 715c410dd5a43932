// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Alltoall latency; size = bytes each rank sends to each rank.
// Built a second time with BOSU_V as osu_alltoallv (MPI_Alltoallv, equal
// counts, blocks at i x count, as OSU's osu_alltoallv).
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o;
  const char* name = kVForm ? "alltoallv" : "alltoall";
  const char* title = kVForm ? "All-to-Allv Personalized Exchange Latency" : "All-to-All Personalized Exchange Latency";
  if (int st = start_collective(argc, argv, o, title, nullptr); st >= 0) return st;
  const int me = ctx().rank, nranks = ctx().size;
  const size_t esz = type_size(o.type);
  const size_t total = o.max_size * static_cast<size_t>(nranks);
  Bytes send(total), recv(total);
  Collective c;
  EqualBlocks blocks(nranks);
  if (kVForm) c.prepare = [&] { blocks.set(c.count); };
  c.call = [&] {
    if (kVForm)
      MPI_Alltoallv(send.data(), blocks.counts.data(), blocks.displs.data(), mpi_type(o.type), recv.data(),
                    blocks.counts.data(), blocks.displs.data(), mpi_type(o.type), MPI_COMM_WORLD);
    else
      MPI_Alltoall(send.data(), static_cast<int>(c.count), mpi_type(o.type), recv.data(), static_cast<int>(c.count),
                   mpi_type(o.type), MPI_COMM_WORLD);
  };
  c.fill = [&](int it) {
    for (int d = 0; d < nranks; ++d)
      fill(o.type, send.data() + static_cast<size_t>(d) * c.count * esz, c.count, me, d, it);
    clear(recv.data(), c.count * esz * static_cast<size_t>(nranks));
  };
  c.check = [&](int it) {
    for (int s = 0; s < nranks; ++s)
      check(o.type, recv.data() + static_cast<size_t>(s) * c.count * esz, c.count, s, me, it, 1, name);
  };
  run_sized(c, o, 1);
  return finish(o);
}
