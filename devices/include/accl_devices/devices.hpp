// SPDX-License-Identifier: Apache-2.0
//
// The device factory: which CCLO device a process drives and how it is
// opened. The only place that reads ACCL_DEVICE; the PMPI layer, pyaccl and
// accl-info ask here instead of choosing between the bundled emulator (emu/)
// and the XRT backend (hw/) themselves. A new kind of device is added here
// and nowhere else.
#pragma once

#include <accl/device.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace accl::devices {

enum class Kind : uint8_t {
  emu,   // the bundled emulator, in this process
  xrt,   // an Alveo card through XRT
  sim,   // one instance of a public ACCL simulation session (cclo_emu, RTL simulation)
  none,  // no device: the PMPI layer runs every call natively
};
const char* to_string(Kind kind);  // "emu", "xrt", "sim", "none"

// ACCL_DEVICE (default emu). Throws config::SettingError for an unknown word.
Kind selected();

// What a caller fixes about the device it opens; everything left unset
// comes from the device's own ACCL_ settings.
struct Request {
  Kind kind = Kind::emu;
  // The process's place in its job: an Alveo card's network address follows
  // its rank (public ACCL's 10.10.10.<rank+1>, port 5500 + rank); an emulated
  // CCLO waits longer before it blocks when it has a core to itself.
  int rank = 0;
  // Ranks in the job; 0 = unknown. A card's network bring-up addresses every
  // rank, and a simulation session has one instance per rank (rank r's on port P+r).
  int size = 0;
  unsigned host_processes = 0;  // processes with a device on this host; 0 = unknown
  unsigned host_cores = 0;      // CPUs those processes may use; 0 = all the host's
  // emu
  std::optional<std::string> bind_address;  // ACCL_EMU_BIND_ADDRESS
  uint16_t port = 0;                        // 0: any free port
  std::optional<std::string> job_secret;    // ACCL_JOB_SECRET
  // xrt
  std::optional<std::string> xclbin;          // ACCL_XCLBIN
  std::optional<std::string> card;            // ACCL_DEVICE_INDEX, else the card nearest to this rank
  std::optional<unsigned> kernel_instance;    // instance N of the CCLO and hostctrl kernels
                                              // (ACCL_CCLO_KERNEL / ACCL_HOSTCTRL_KERNEL)
  // sim
  std::optional<std::string> sim_address;  // ACCL_SIM_ADDRESS: tcp://host:port of rank 0's instance
};

// An open device and where its peers reach it: the rank_t its peers put in
// their communicator tables for it.
struct Opened {
  std::unique_ptr<Device> device;
  std::string ip;
  int port = 0;
  // Per rank: the session this device reaches it through (rank_t::session_id),
  // when opening the device set up the network (ACCL_HW_NETWORK) or joined a
  // simulation session (whose instances find each other by session id, which
  // public ACCL's drivers set to the rank); empty otherwise.
  std::vector<int> session_ids;
};

// Opens the device `request` describes. Throws what the backend throws
// (config::SettingError, hw::HwError, accl::Error) and std::invalid_argument
// for Kind::none.
//
// A simulation session's instance drops messages that reach it before its
// RX buffers are configured: the ranks of a job on Kind::sim must meet after
// ACCL::initialize() and before their first call (the PMPI layer agrees on
// the bring-up then; pyaccl and direct users barrier themselves).
Opened open(const Request& request);

// The start-up checks of the device layers' settings, the emulator's then
// the XRT backend's; each throws config::SettingError or hw::HwError for its
// layer's first bad setting (accl-info runs each to report every layer).
std::vector<void (*)()> settings_checks();
// All of them, in that order: throws the first problem.
void validate_settings();

// What the device settings must not combine in a job of `processes`
// processes: the emulator's in-process transport reaches only its own
// process. Throws config::SettingError.
void check_job(int processes);

}  // namespace accl::devices
