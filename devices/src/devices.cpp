// SPDX-License-Identifier: Apache-2.0
#include <accl_devices/devices.hpp>

#include <accl/config.hpp>
#include <accl_emu/emulator.hpp>
#include <accl_hw/hw.hpp>
#include <accl_hw/sim.hpp>

#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

namespace accl::devices {
namespace {

Opened open_emulated(const Request& request) {
  emu::EmuOptions options = emu::options_from_environment();
  if (request.bind_address) options.bind_address = *request.bind_address;
  options.port = request.port;
  if (request.job_secret) options.job_secret = *request.job_secret;
  options.host_processes = request.host_processes;
  options.host_cores = request.host_cores;
  Opened out;
  out.device = emu::create_device(options);
  const emu::Endpoint ep = emu::endpoint(*out.device);
  out.ip = ep.ip;
  out.port = ep.port;
  return out;
}

Opened open_card(const Request& request) {
  hw::XrtOptions options = hw::options_from_environment();
  if (request.xclbin) options.xclbin = *request.xclbin;
  if (request.card) options.device = *request.card;
  if (request.kernel_instance) {
    // Kernel instance names follow public ACCL's accl_network_utils.
    const std::string index = std::to_string(*request.kernel_instance);
    options.cclo_kernel = "ccl_offload:{ccl_offload_" + index + "}";
    options.hostctrl_kernel = "hostctrl:{hostctrl_" + index + "_0}";
  }
  // The card's network (ACCL_HW_NETWORK) uses the same addresses as below.
  options.network = hw::network_plan_from_environment(request.rank, request.size);
  Opened out;
  hw::NetworkResult network;
  out.device = hw::create_xrt_device(options, &network);
  out.session_ids = std::move(network.session_ids);
  // Public ACCL's convention for the card's network: 10.10.10.<rank+1>,
  // port 5500 + rank (accl_network_utils).
  out.ip = "10.10.10." + std::to_string(request.rank + 1);
  out.port = 5500 + request.rank;
  return out;
}

// One instance of a public ACCL simulation session, as public ACCL's drivers
// address it in sim mode (accl_network_utils' generate_ranks): rank r at
// 127.0.0.1, port P+r, session id r. The instances' emulated Ethernet joins
// them by session id (ip and port only name them), so every rank's session
// id is known here from the job size.
Opened open_simulated(const Request& request) {
  hw::SimOptions options = hw::sim_options_from_environment(request.rank, request.size);
  if (request.sim_address) options.address = *request.sim_address;
  const hw::SimAddress rank0 = hw::parse_sim_address(options.address);
  Opened out;
  out.device = hw::make_sim_device(options);
  out.ip = "127.0.0.1";
  out.port = static_cast<int>(rank0.port) + request.rank;
  // make_sim_device has checked that the rank is one of `size`.
  out.session_ids.resize(static_cast<size_t>(request.size));
  std::iota(out.session_ids.begin(), out.session_ids.end(), 0);
  return out;
}

}  // namespace

const char* to_string(Kind kind) {
  switch (kind) {
    case Kind::emu: return "emu";
    case Kind::xrt: return "xrt";
    case Kind::sim: return "sim";
    case Kind::none: return "none";
  }
  return "?";
}

Kind selected() {
  const std::string word = config::get_choice("ACCL_DEVICE");
  if (word == "xrt") return Kind::xrt;
  if (word == "sim") return Kind::sim;
  if (word == "none") return Kind::none;
  return Kind::emu;
}

Opened open(const Request& request) {
  switch (request.kind) {
    case Kind::emu: return open_emulated(request);
    case Kind::xrt: return open_card(request);
    case Kind::sim: return open_simulated(request);
    case Kind::none: break;
  }
  throw std::invalid_argument("devices::open: kind \"none\" names no device to open");
}

std::vector<void (*)()> settings_checks() { return {&emu::validate_settings, &hw::validate_settings}; }

void validate_settings() {
  for (auto check : settings_checks()) check();
}

void check_job(int processes) {
  // The in-process transport connects only CCLOs of one process; a job's
  // processes would first meet at their first call, as a link error.
  if (processes > 1 && selected() == Kind::emu && config::get_choice("ACCL_EMU_TRANSPORT") == "inproc")
    throw config::SettingError("ACCL_EMU_TRANSPORT", config::get_string("ACCL_EMU_TRANSPORT"),
                               "the in-process transport reaches only this process, and this MPI job has " +
                                   std::to_string(processes) + " ranks",
                               "auto, shm, tcp, udp");
}

}  // namespace accl::devices
