// SPDX-License-Identifier: Apache-2.0
//
// Public entry points of the emulator (emu/include/accl_emu/emulator.hpp).
#include "emu_device.hpp"

#include <accl/config.hpp>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace accl::emu {

TransportKind parse_transport(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "auto" || n == "automatic" || n.empty()) return TransportKind::automatic;
  if (n == "inproc") return TransportKind::inproc;
  if (n == "shm") return TransportKind::shm;
  if (n == "tcp") return TransportKind::tcp;
  if (n == "udp") return TransportKind::udp;
  throw std::invalid_argument("unknown emulator transport '" + name + "' (use auto, inproc, shm, tcp or udp)");
}

std::string to_string(TransportKind kind) {
  switch (kind) {
    case TransportKind::automatic: return "auto";
    case TransportKind::inproc: return "inproc";
    case TransportKind::shm: return "shm";
    case TransportKind::tcp: return "tcp";
    case TransportKind::udp: return "udp";
  }
  return "unknown";
}

EmuOptions options_from_environment() {
  EmuOptions o;
  o.bind_address = config::get_string("ACCL_EMU_BIND_ADDRESS");
  o.transport = parse_transport(config::get_string("ACCL_EMU_TRANSPORT"));
  o.job_secret = config::get_string("ACCL_JOB_SECRET");
  return o;
}

std::unique_ptr<Device> create_device(const EmuOptions& options) {
  return std::make_unique<EmuDevice>(options, DeviceSettings::from_environment());
}

Endpoint endpoint(const Device& device) {
  auto* emu = dynamic_cast<const EmuDevice*>(&device);
  if (emu == nullptr) throw std::invalid_argument("endpoint(): device '" + device.name() + "' is not an emulated CCLO");
  return emu->endpoint();
}

}  // namespace accl::emu
