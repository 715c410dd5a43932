// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Scatter latency from root 0; size = bytes each rank receives.
// Built a second time with BOSU_V as osu_scatterv (MPI_Scatterv, equal
// counts, blocks at i x count, as OSU's osu_scatterv).
#include "osu_blocks.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  BlockBench b;
  if (int st = b.start(argc, argv, kVForm ? "Scatterv Latency" : "Scatter Latency"); st >= 0) return st;
  const MPI_Datatype type = mpi_type(b.o.type);
  Bytes send(b.me == 0 ? b.o.max_size * static_cast<size_t>(b.nranks) : 1), recv(b.o.max_size);
  b.c.call = [&] {
    const int count = static_cast<int>(b.c.count);
    if (kVForm)
      MPI_Scatterv(send.data(), b.blocks.counts.data(), b.blocks.displs.data(), type, recv.data(), count, type, 0,
                   MPI_COMM_WORLD);
    else
      MPI_Scatter(send.data(), count, type, recv.data(), count, type, 0, MPI_COMM_WORLD);
  };
  b.c.fill = [&](int it) {
    if (b.me == 0)
      for (int d = 0; d < b.nranks; ++d) fill(b.o.type, b.block(send, d), b.c.count, d, 0, it);
    clear(recv.data(), b.bytes(1));
  };
  b.c.check = [&](int it) { check(b.o.type, recv.data(), b.c.count, b.me, 0, it, 1, kVForm ? "scatterv" : "scatter"); };
  return b.run();
}
