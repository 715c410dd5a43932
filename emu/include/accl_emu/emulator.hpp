// SPDX-License-Identifier: Apache-2.0
//
// The bundled CCLO emulator, embedded in the calling process. Each emulated
// CCLO runs the firmware (firmware/) on a thread of its own over an emulated
// data plane, and reaches its peers through a transport chosen per peer:
// in-process (peers in the same process), shared memory (same host), TCP or
// UDP (any host).
#pragma once

#include <accl/accl.hpp>
#include <accl/device.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace accl::emu {

enum class TransportKind {
  automatic,  // in-process if the peer lives here, else shared memory on this host, else TCP
  inproc,
  shm,
  tcp,
  udp,
};
TransportKind parse_transport(const std::string& name);  // "auto", "inproc", "shm", "tcp", "udp"
std::string to_string(TransportKind kind);

struct EmuOptions {
  // Where this CCLO is reachable. port 0 picks a free port (see endpoint()).
  std::string bind_address = "127.0.0.1";
  uint16_t port = 0;
  // Default: ACCL_EMU_TRANSPORT, else automatic.
  TransportKind transport = TransportKind::automatic;
  // Per-job secret peers must present when connecting (ACCL_JOB_SECRET);
  // empty = no check.
  std::string job_secret;
  // Device memory per bank (virtual reservation; pages are committed on use).
  size_t bank_bytes = size_t{16} << 30;
  unsigned banks = 2;
  // How many processes with an emulated CCLO run on this host (0 = not
  // known). With at most one per core a waiting host thread may drive its
  // CCLO longer (ACCL_EMU_DRIVE_SPIN_US): it holds a core nobody else needs.
  // With more of them than cores it yields the core between polls
  // (ACCL_EMU_YIELD_US) instead of blocking at once. create_local_world()
  // counts its CCLOs when they fit the CPUs the process may use and this is
  // left at 0.
  unsigned host_processes = 0;
  // The CPUs those processes may use (a cpuset or mpirun's binding may give
  // them fewer than the host has); 0 = all the host's.
  unsigned host_cores = 0;
};

// The emulator's start-up check of its ACCL_ settings (the emu rows of the
// settings table, the bind address, the fault grammar); throws
// config::SettingError ("ACCL_X=value: ...") for the first bad one.
void validate_settings();

// Options with every field taken from the ACCL_EMU_* environment (validated
// first: throws config::SettingError).
EmuOptions options_from_environment();

// Creates one emulated CCLO and starts listening on its endpoint.
std::unique_ptr<Device> create_device(const EmuOptions& options);

// The endpoint a device created by create_device() listens on.
struct Endpoint {
  std::string ip;
  uint16_t port = 0;
};
Endpoint endpoint(const Device& device);

// Seed 000 in one call: `world_size` emulated CCLOs in this process, each
// with its ACCL driver initialized on a global communicator of all of them.
std::vector<std::unique_ptr<ACCL>> create_local_world(unsigned world_size, const InitOptions& init = {},
                                                      EmuOptions options = options_from_environment());

}  // namespace accl::emu
