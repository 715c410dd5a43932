// SPDX-License-Identifier: Apache-2.0
//
// soak-mpi: the soak sequence (soak.hpp) with one emulated CCLO per MPI
// process, over a real transport (--transport shm|tcp|udp). As in
// tests/core/test_mpi.cpp, MPI only exchanges the endpoints before the run
// and collects the reports after it; every call of the sequence (and the
// checkpoints) goes through ACCL.
//
//   mpirun -np 4 soak-mpi --transport tcp [--calls N] [--seconds S] [--seed X]
//
// Only the C bindings (the C++ ones do not compile cleanly with -Wextra).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include "mpi_emu_accl.hpp"
#include "soak.hpp"

#include <mpi.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

// What rank 0 needs of every rank's report (the messages are printed by
// each rank itself).
struct Numbers {
  uint64_t calls_drawn, calls_involved, checked_elements, mismatches, errors;
  double seconds;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  soak::Options o;
  if (std::string err = soak::parse_options(argc, argv, o); !err.empty()) {
    if (rank == 0) std::fprintf(stderr, "soak-mpi: %s\n%s", err.c_str(), soak::usage(argv[0]).c_str());
    MPI_Finalize();
    return err == "help" ? 0 : 2;
  }

  std::unique_ptr<accl::ACCL> a = acclt::accl_over_mpi(rank, size, o.transport, size_t{1} << 30);
  if (!a) {
    MPI_Finalize();
    return 1;
  }
  if (rank == 0) {
    std::printf("soak-mpi: %d ranks over %s, seed %llu, up to %llu calls / %.0f s\n", size,
                o.transport.empty() ? "the default transport" : o.transport.c_str(),
                static_cast<unsigned long long>(o.seed), static_cast<unsigned long long>(o.calls), o.seconds);
    std::fflush(stdout);
  }

  soak::RankReport mine_report;
  try {
    mine_report = soak::run_rank(*a, static_cast<unsigned>(rank), static_cast<unsigned>(size), o);
  } catch (const std::exception& e) {
    mine_report.errors++;
    mine_report.messages.push_back("rank " + std::to_string(rank) + ": " + e.what());
  }
  // Each rank prints its own problems, one rank at a time.
  for (int r = 0; r < size; ++r) {
    if (r == rank)
      for (const auto& m : mine_report.messages) std::printf("  %s\n", m.c_str());
    std::fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  Numbers n{mine_report.calls_drawn, mine_report.calls_involved, mine_report.checked_elements,
            mine_report.mismatches, mine_report.errors, mine_report.seconds};
  std::vector<Numbers> gathered(size);
  MPI_Gather(&n, sizeof n, MPI_BYTE, gathered.data(), sizeof n, MPI_BYTE, 0, MPI_COMM_WORLD);
  int rc = 0;
  if (rank == 0) {
    std::vector<soak::RankReport> reports(size);
    for (int r = 0; r < size; ++r) {
      reports[r].rank = static_cast<unsigned>(r);
      reports[r].calls_drawn = gathered[r].calls_drawn;
      reports[r].calls_involved = gathered[r].calls_involved;
      reports[r].checked_elements = gathered[r].checked_elements;
      reports[r].mismatches = gathered[r].mismatches;
      reports[r].errors = gathered[r].errors;
      reports[r].seconds = gathered[r].seconds;
    }
    reports[0].per_kind = mine_report.per_kind;  // rank 0's view; the others' are similar
    rc = soak::summarize(reports, o, "mpi, " + (o.transport.empty() ? std::string("default transport") : o.transport));
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  a.reset();
  MPI_Finalize();
  return rc;
}
