// SPDX-License-Identifier: Apache-2.0
//
// mpi-two-hosts: an MPI program run by run_netns.sh with one rank in each of
// two network namespaces (mpirun in namespace A, an rsh agent that "logs in"
// to namespace B) and the PMPI layer preloaded, so MPI_Allreduce, MPI_Bcast,
// MPI_Reduce and MPI_Send/MPI_Recv are carried by ACCL over the emulator's
// TCP transport across the veth pair. Every result is checked; each rank
// prints its network namespace (inode of /proc/self/ns/net) so the script
// can prove the ranks really ran on different "hosts".
//
// Only the C bindings (the C++ ones do not compile cleanly with -Wextra).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  struct stat st {};
  stat("/proc/self/ns/net", &st);
  long bad = 0;
  // 400 KB: rendezvous with the PMPI layer's defaults (eager <= 64 KiB).
  for (int n : {1, 1000, 100000}) {
    std::vector<float> a(n), b(n);
    for (int i = 0; i < n; ++i) a[i] = static_cast<float>((rank + 1) * (i % 100));
    MPI_Allreduce(a.data(), b.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i) bad += b[i] != static_cast<float>(3 * (i % 100));

    std::vector<long long> x(n), y(n, -1);
    for (int i = 0; i < n; ++i) x[i] = (1LL << 40) * (rank + 1) + i;
    MPI_Reduce(x.data(), y.data(), n, MPI_LONG_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
      for (int i = 0; i < n; ++i) bad += y[i] != (1LL << 40) * 2 + i;

    for (int i = 0; i < n; ++i) a[i] = rank == 1 ? static_cast<float>(i) : -1.0f;
    MPI_Bcast(a.data(), n, MPI_FLOAT, 1, MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i) bad += a[i] != static_cast<float>(i);

    if (rank == 0) {
      for (int i = 0; i < n; ++i) a[i] = 7.0f + static_cast<float>(i % 3);
      MPI_Send(a.data(), n, MPI_FLOAT, 1, 3, MPI_COMM_WORLD);
    } else if (rank == 1) {
      MPI_Recv(b.data(), n, MPI_FLOAT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 0; i < n; ++i) bad += b[i] != 7.0f + static_cast<float>(i % 3);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const char* bind = std::getenv("ACCL_EMU_BIND_ADDRESS");
  std::printf("mpi-two-hosts rank %d/%d netns %lu bind %s: %s (%ld wrong elements)\n", rank, size,
              static_cast<unsigned long>(st.st_ino), bind ? bind : "-", bad ? "FAIL" : "ok", bad);
  std::fflush(stdout);
  MPI_Finalize();
  return bad ? 1 : 0;
}
