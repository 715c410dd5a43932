// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Alltoall latency; size = bytes each rank sends to each rank.
// Built a second time with BOSU_V as osu_alltoallv (MPI_Alltoallv, equal
// counts, blocks at i x count, as OSU's osu_alltoallv).
#include "osu_blocks.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  BlockBench b;
  const char* title = kVForm ? "All-to-Allv Personalized Exchange Latency" : "All-to-All Personalized Exchange Latency";
  if (int st = b.start(argc, argv, title); st >= 0) return st;
  const MPI_Datatype type = mpi_type(b.o.type);
  const size_t total = b.o.max_size * static_cast<size_t>(b.nranks);
  Bytes send(total), recv(total);
  b.c.call = [&] {
    const int count = static_cast<int>(b.c.count);
    const int *counts = b.blocks.counts.data(), *displs = b.blocks.displs.data();
    if (kVForm)
      MPI_Alltoallv(send.data(), counts, displs, type, recv.data(), counts, displs, type, MPI_COMM_WORLD);
    else
      MPI_Alltoall(send.data(), count, type, recv.data(), count, type, MPI_COMM_WORLD);
  };
  b.c.fill = [&](int it) {
    for (int d = 0; d < b.nranks; ++d) fill(b.o.type, b.block(send, d), b.c.count, b.me, d, it);
    clear(recv.data(), b.bytes(b.nranks));
  };
  b.c.check = [&](int it) {
    for (int s = 0; s < b.nranks; ++s)
      check(b.o.type, b.block(recv, s), b.c.count, s, b.me, it, 1, kVForm ? "alltoallv" : "alltoall");
  };
  return b.run();
}
