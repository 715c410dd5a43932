// SPDX-License-Identifier: Apache-2.0
// OSU-style bandwidth (osu_bw) and, built with BOSU_BIDIR, bi-directional
// bandwidth (osu_bibw) between ranks 0 and 1: per iteration a window of -W
// non-blocking messages, then (uni-directional) a short acknowledgement.
// MB/s = 10^6 bytes per second.
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o = defaults(Kind::bandwidth, Type::mpi_char);
  if (int st = start(argc, argv, Kind::bandwidth, o, 2); st >= 0) return st;
#ifdef BOSU_BIDIR
  const bool bidir = true;
  header("Bi-Directional Bandwidth", o, true, nullptr);
#else
  const bool bidir = false;
  header("Bandwidth", o, true, nullptr);
#endif
  say("# Window size: %d\n", o.window);
  say("# Size      Bandwidth (MB/s)");
  if (o.full) say("  Messages/s  Iterations");
  if (o.validate) say("  Validation");
  say("\n");
  const int me = ctx().rank;
  const size_t esz = type_size(o.type);
  const MPI_Datatype dt = mpi_type(o.type);
  const size_t W = static_cast<size_t>(o.window);
  // One slot per window message when that fits in 64 MiB, else all share one
  // (OSU always shares; separate slots make -c meaningful).
  const bool distinct = W * o.max_size <= (size_t{64} << 20);
  const size_t slots = distinct ? W : 1;
  Bytes sbuf(slots * std::max<size_t>(o.max_size, 1)), rbuf(slots * std::max<size_t>(o.max_size, 1));
  std::vector<MPI_Request> reqs(2 * W);
  int ack = 0;
  const int peer = me == 0 ? 1 : 0;
  for (size_t size : sizes(o, esz, 1)) {
    const int count = static_cast<int>(size / esz);
    const int skip = o.skip(size), iters = o.iters(size);
    auto slot = [&](unsigned char* base, size_t j) { return base + (distinct ? j * size : 0); };
    auto key = [&](size_t j) { return static_cast<int>(distinct ? j : 0); };
    long before = ctx().errors;
    double total = 0;
    for (size_t j = 0; j < slots; ++j) fill(o.type, slot(sbuf.data(), j), static_cast<size_t>(count), me, key(j), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me <= 1) {
      for (int i = 0; i < skip + iters; ++i) {
        const bool sender = bidir || me == 0, receiver = bidir || me == 1;
        if (o.validate) {
          if (sender)
            for (size_t j = 0; j < slots; ++j)
              fill(o.type, slot(sbuf.data(), j), static_cast<size_t>(count), me, key(j), i);
          if (receiver) clear(rbuf.data(), slots * size);
        }
        double t0 = MPI_Wtime();
        size_t n = 0;
        if (receiver)
          for (size_t j = 0; j < W; ++j)
            MPI_Irecv(slot(rbuf.data(), j), count, dt, peer, 100, MPI_COMM_WORLD, &reqs[n++]);
        if (sender)
          for (size_t j = 0; j < W; ++j)
            MPI_Isend(slot(sbuf.data(), j), count, dt, peer, 100, MPI_COMM_WORLD, &reqs[n++]);
        MPI_Waitall(static_cast<int>(n), reqs.data(), MPI_STATUSES_IGNORE);
        if (!bidir) {
          if (me == 0) MPI_Recv(&ack, 1, MPI_INT, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          else MPI_Send(&ack, 1, MPI_INT, 0, 101, MPI_COMM_WORLD);
        }
        double t = MPI_Wtime() - t0;
        if (o.validate && receiver)
          for (size_t j = 0; j < slots; ++j)
            check(o.type, slot(rbuf.data(), j), static_cast<size_t>(count), peer, key(j), i, 1, "bw");
        if (i >= skip) total += t;
      }
    }
    const bool failed = any_rank_failed(before);
    if (me == 0) {
      double msgs = static_cast<double>(iters) * static_cast<double>(W) * (bidir ? 2.0 : 1.0);
      std::printf("%-10zu%18.2f", size, msgs * static_cast<double>(size) / total / 1e6);
      if (o.full) std::printf("%12.0f%12d", msgs / total, iters);
      end_row(o, failed);
    }
  }
  return finish(o);
}
