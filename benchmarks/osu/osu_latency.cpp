// SPDX-License-Identifier: Apache-2.0
// OSU-style point-to-point latency: ping-pong between ranks 0 and 1 with
// blocking MPI_Send/MPI_Recv; prints half the round-trip time. Other ranks
// only take part in the per-size bookkeeping.
#include "osu_common.hpp"

using namespace bosu;

int main(int argc, char** argv) {
  Options o = defaults(Kind::latency, Type::mpi_char);
  if (int st = start(argc, argv, Kind::latency, o, 2); st >= 0) return st;
  header("Latency", o, true, nullptr);
  latency_columns(o, true);
  const int me = ctx().rank;
  const size_t esz = type_size(o.type);
  const MPI_Datatype dt = mpi_type(o.type);
  Bytes sbuf(o.max_size), rbuf(o.max_size);
  for (size_t size : sizes(o, esz, 0)) {
    const int count = static_cast<int>(size / esz);
    const int skip = o.skip(size), iters = o.iters(size);
    long before = ctx().errors;
    double total = 0, best = 1e30, worst = 0;
    fill(o.type, sbuf.data(), static_cast<size_t>(count), 0, 0, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
      for (int i = 0; i < skip + iters; ++i) {
        if (o.validate) {
          fill(o.type, sbuf.data(), static_cast<size_t>(count), 0, 1, i);
          clear(rbuf.data(), size);
        }
        double t0 = MPI_Wtime();
        MPI_Send(sbuf.data(), count, dt, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(rbuf.data(), count, dt, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double t = MPI_Wtime() - t0;
        if (o.validate) check(o.type, rbuf.data(), static_cast<size_t>(count), 0, 1, i, 1, "latency (echo)");
        if (i >= skip) {
          total += t;
          best = std::min(best, t);
          worst = std::max(worst, t);
        }
      }
    } else if (me == 1) {
      for (int i = 0; i < skip + iters; ++i) {
        if (o.validate) clear(rbuf.data(), size);
        MPI_Recv(rbuf.data(), count, dt, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(rbuf.data(), count, dt, 0, 1, MPI_COMM_WORLD);
        if (o.validate) check(o.type, rbuf.data(), static_cast<size_t>(count), 0, 1, i, 1, "latency");
      }
    }
    const bool failed = any_rank_failed(before);
    if (me == 0) {
      std::printf("%-10zu%18.2f", size, total * 1e6 / (2.0 * iters));
      if (o.full) std::printf("%18.2f%18.2f%12d", best * 1e6 / 2, worst * 1e6 / 2, iters);
      end_row(o, failed);
    }
  }
  return finish(o);
}
