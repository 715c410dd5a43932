// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Gather latency to root 0; size = bytes each rank contributes.
// Built a second time with BOSU_V as osu_gatherv (MPI_Gatherv, equal counts,
// blocks at i x count, as OSU's osu_gatherv).
#include "osu_blocks.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  BlockBench b;
  if (int st = b.start(argc, argv, kVForm ? "Gatherv Latency" : "Gather Latency"); st >= 0) return st;
  const MPI_Datatype type = mpi_type(b.o.type);
  Bytes send(b.o.max_size), recv(b.me == 0 ? b.o.max_size * static_cast<size_t>(b.nranks) : 1);
  b.c.call = [&] {
    const int count = static_cast<int>(b.c.count);
    if (kVForm)
      MPI_Gatherv(send.data(), count, type, recv.data(), b.blocks.counts.data(), b.blocks.displs.data(), type, 0,
                  MPI_COMM_WORLD);
    else
      MPI_Gather(send.data(), count, type, recv.data(), count, type, 0, MPI_COMM_WORLD);
  };
  b.c.fill = [&](int it) {
    fill(b.o.type, send.data(), b.c.count, b.me, 0, it);
    if (b.me == 0) clear(recv.data(), b.bytes(b.nranks));
  };
  b.c.check = [&](int it) {
    if (b.me != 0) return;
    for (int s = 0; s < b.nranks; ++s)
      check(b.o.type, b.block(recv, s), b.c.count, s, 0, it, 1, kVForm ? "gatherv" : "gather");
  };
  return b.run();
}
