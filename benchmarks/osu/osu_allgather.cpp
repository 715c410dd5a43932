// SPDX-License-Identifier: Apache-2.0
// OSU-style MPI_Allgather latency; size = bytes each rank contributes.
// Built a second time with BOSU_V as osu_allgatherv (MPI_Allgatherv, equal
// counts, blocks at i x count, as OSU's osu_allgatherv).
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o;
  const char* name = kVForm ? "allgatherv" : "allgather";
  const char* title = kVForm ? "Allgatherv Latency" : "Allgather Latency";
  if (int st = start_collective(argc, argv, o, title, nullptr); st >= 0) return st;
  const int me = ctx().rank, nranks = ctx().size;
  const size_t esz = type_size(o.type);
  Bytes send(o.max_size), recv(o.max_size * static_cast<size_t>(nranks));
  Collective c;
  EqualBlocks blocks(nranks);
  if (kVForm) c.prepare = [&] { blocks.set(c.count); };
  c.call = [&] {
    if (kVForm)
      MPI_Allgatherv(send.data(), static_cast<int>(c.count), mpi_type(o.type), recv.data(), blocks.counts.data(),
                     blocks.displs.data(), mpi_type(o.type), MPI_COMM_WORLD);
    else
      MPI_Allgather(send.data(), static_cast<int>(c.count), mpi_type(o.type), recv.data(), static_cast<int>(c.count),
                    mpi_type(o.type), MPI_COMM_WORLD);
  };
  c.fill = [&](int it) {
    fill(o.type, send.data(), c.count, me, 0, it);
    clear(recv.data(), c.count * esz * static_cast<size_t>(nranks));
  };
  c.check = [&](int it) {
    for (int s = 0; s < nranks; ++s)
      check(o.type, recv.data() + static_cast<size_t>(s) * c.count * esz, c.count, s, 0, it, 1, name);
  };
  run_sized(c, o, 1);
  return finish(o);
}
