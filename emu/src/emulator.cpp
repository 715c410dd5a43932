// SPDX-License-Identifier: Apache-2.0
//
// Public entry points of the emulator (emu/include/accl_emu/emulator.hpp).
#include "emu_device.hpp"
#include "net_address.hpp"
#include "transport_faults.hpp"

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

void validate_settings() {
  config::validate(config::Layer::emu);
  // What the table cannot say: the address and the fault grammar.
  if (auto bind = config::get("ACCL_EMU_BIND_ADDRESS")) {
    try {
      (void)parse_ipv4(*bind);
    } catch (const std::invalid_argument&) {
      throw config::SettingError("ACCL_EMU_BIND_ADDRESS", *bind, "not an IPv4 address",
                                 "a dotted quad of this host, e.g. 127.0.0.1 or 0.0.0.0");
    }
  }
  if (auto faults = config::get("ACCL_EMU_FAULTS")) {
    try {
      (void)parse_faults(*faults);
    } catch (const std::invalid_argument& e) {
      std::string why = e.what();
      if (why.starts_with("ACCL_EMU_FAULTS: ")) why.erase(0, 17);  // the name leads our message already
      throw config::SettingError("ACCL_EMU_FAULTS", *faults, why, "");
    }
  }
}

EmuOptions options_from_environment() {
  validate_settings();
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
