// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Allgather latency; size = bytes each rank contributes.
// Built a second time with BOSU_V as osu_allgatherv (MPI_Allgatherv, equal
// counts, blocks at i x count, as OSU's osu_allgatherv).
#include "osu_blocks.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  BlockBench b;
  if (int st = b.start(argc, argv, kVForm ? "Allgatherv Latency" : "Allgather Latency"); st >= 0) return st;
  const MPI_Datatype type = mpi_type(b.o.type);
  Bytes send(b.o.max_size), recv(b.o.max_size * static_cast<size_t>(b.nranks));
  b.c.call = [&] {
    const int count = static_cast<int>(b.c.count);
    if (kVForm)
      MPI_Allgatherv(send.data(), count, type, recv.data(), b.blocks.counts.data(), b.blocks.displs.data(), type,
                     MPI_COMM_WORLD);
    else
      MPI_Allgather(send.data(), count, type, recv.data(), count, type, MPI_COMM_WORLD);
  };
  b.c.fill = [&](int it) {
    fill(b.o.type, send.data(), b.c.count, b.me, 0, it);
    clear(recv.data(), b.bytes(b.nranks));
  };
  b.c.check = [&](int it) {
    for (int s = 0; s < b.nranks; ++s)
      check(b.o.type, b.block(recv, s), b.c.count, s, 0, it, 1, kVForm ? "allgatherv" : "allgather");
  };
  return b.run();
}
