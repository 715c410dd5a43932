// SPDX-License-Identifier: Apache-2.0
//
// The bring-up the MPI test programs share (tests/core/test_mpi.cpp,
// tests/soak/soak_mpi.cpp): one emulated CCLO per MPI process, reached over a
// real transport. MPI only exchanges the endpoints; everything else goes
// through ACCL.
#pragma once

// Only the C bindings (the C++ ones do not compile cleanly with -Wextra): the
// including program defines these before its first MPI include.
#if !defined(OMPI_SKIP_MPICXX) || !defined(MPICH_SKIP_MPICXX)
#error "define OMPI_SKIP_MPICXX and MPICH_SKIP_MPICXX before including mpi_emu_accl.hpp"
#endif
#include <accl/accl.hpp>
#include <accl_emu/emulator.hpp>

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace acclt {

// Collective over MPI_COMM_WORLD: every rank creates its emulated device
// (options from the ACCL_EMU_* environment, any free port; `transport` and
// `bank_bytes` override them unless empty / 0), the endpoints are exchanged
// with MPI_Allgather and every rank initializes its ACCL with all of them.
// A rank that fails says why on stderr. The result is null on every rank
// unless the bring-up worked on every rank.
inline std::unique_ptr<accl::ACCL> accl_over_mpi(int rank, int size, const std::string& transport,
                                                 size_t bank_bytes = 0) {
  int ok = 1;
  std::unique_ptr<accl::Device> dev;
  try {
    accl::emu::EmuOptions eo = accl::emu::options_from_environment();
    eo.port = 0;
    if (bank_bytes != 0) eo.bank_bytes = bank_bytes;
    if (!transport.empty()) eo.transport = accl::emu::parse_transport(transport);
    dev = accl::emu::create_device(eo);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] create_device failed: %s\n", rank, e.what());
    ok = 0;
  }
  // Endpoints on the wire: IPv4 text + port.
  struct Wire {
    char ip[16];
    int32_t port;
  } mine{};
  if (dev) {
    const accl::emu::Endpoint ep = accl::emu::endpoint(*dev);
    std::strncpy(mine.ip, ep.ip.c_str(), sizeof(mine.ip) - 1);
    mine.port = ep.port;
  }
  std::vector<Wire> all(size);
  MPI_Allgather(&mine, sizeof(Wire), MPI_BYTE, all.data(), sizeof(Wire), MPI_BYTE, MPI_COMM_WORLD);
  std::vector<accl::rank_t> ranks(size);
  for (int i = 0; i < size; ++i) {
    ranks[i].ip = all[i].ip;
    ranks[i].port = all[i].port;
  }
  std::unique_ptr<accl::ACCL> a;
  if (ok) {
    try {
      a = std::make_unique<accl::ACCL>(std::move(dev));
      a->initialize(ranks, rank, accl::InitOptions{});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[rank %d] ACCL initialize failed: %s\n", rank, e.what());
      ok = 0;
    }
  }
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_ok) a.reset();
  return a;
}

}  // namespace acclt
