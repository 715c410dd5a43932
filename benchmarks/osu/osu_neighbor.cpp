// SPDX-License-Identifier: Apache-2.0
// OSU-style neighbourhood collective latency on a 1-D periodic ring
// (MPI_Cart_create): every rank's neighbours are rank - 1 and rank + 1.
// Built as osu_neighbor_allgather (MPI_Neighbor_allgather; size = bytes each
// rank contributes) and, with BOSU_NEIGHBOR_ALLTOALL, as
// osu_neighbor_alltoall (MPI_Neighbor_alltoall; size = bytes each rank sends
// to each neighbour).
#include "osu_blocks.hpp"

using namespace bosu;

#ifdef BOSU_NEIGHBOR_ALLTOALL
constexpr bool kAlltoall = true;
#else
constexpr bool kAlltoall = false;
#endif

int main(int argc, char** argv) {
  BlockBench b;
  const char* title = kAlltoall ? "Neighbor All-to-All Latency" : "Neighbor Allgather Latency";
  if (int st = b.start(argc, argv, title); st >= 0) return st;
  MPI_Comm ring = MPI_COMM_NULL;
  const int dims[1] = {b.nranks}, periods[1] = {1};
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
  // Neighbour order of a Cartesian topology: the negative direction first.
  int left = 0, right = 0;
  MPI_Cart_shift(ring, 0, 1, &left, &right);
  const int neighbours[2] = {left, right};
  const MPI_Datatype type = mpi_type(b.o.type);
  Bytes send(b.o.max_size * 2), recv(b.o.max_size * 2);
  const char* what = kAlltoall ? "neighbor_alltoall" : "neighbor_allgather";
  b.c.call = [&] {
    const int count = static_cast<int>(b.c.count);
    if (kAlltoall) MPI_Neighbor_alltoall(send.data(), count, type, recv.data(), count, type, ring);
    else MPI_Neighbor_allgather(send.data(), count, type, recv.data(), count, type, ring);
  };
  // Alltoall: block d goes to neighbour d, tagged (sender, d); the left
  // neighbour sent its block 1 (towards its right, this rank), the right one
  // its block 0. Allgather: one block, tagged (sender, 0), from both.
  b.c.fill = [&](int it) {
    for (int d = 0; d < (kAlltoall ? 2 : 1); ++d) fill(b.o.type, b.block(send, d), b.c.count, b.me, d, it);
    clear(recv.data(), b.bytes(2));
  };
  b.c.check = [&](int it) {
    for (int n = 0; n < 2; ++n)
      check(b.o.type, b.block(recv, n), b.c.count, neighbours[n], kAlltoall ? 1 - n : 0, it, 1, what);
  };
  run_sized(b.c, b.o, 1);
  MPI_Comm_free(&ring);
  return finish(b.o);
}
