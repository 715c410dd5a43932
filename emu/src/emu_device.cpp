// SPDX-License-Identifier: Apache-2.0
#include "emu_device.hpp"

#include "net_address.hpp"

#include <accl/config.hpp>
#include <accl/log.hpp>

#if ACCL_EMU_HAVE_FIRMWARE
#include <accl_fw/control_program.hpp>
#endif

#include <new>
#include <stdexcept>

namespace accl::emu {

DeviceSettings DeviceSettings::from_environment() {
  DeviceSettings s;
  s.spin = std::chrono::microseconds(std::max<int64_t>(0, config::get_int("ACCL_EMU_SPIN_US")));
  int64_t timeout_ms = config::get_int("ACCL_TIMEOUT_MS");
  s.io_timeout = std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 10000);
  s.overflow_bytes = static_cast<size_t>(std::max<int64_t>(0, config::get_int("ACCL_EMU_OVERFLOW_BYTES")));
  return s;
}

EmuDevice::EmuDevice(const EmuOptions& options, const DeviceSettings& settings)
    : kind_(options.transport),
      self_{parse_ipv4(options.bind_address), options.port},
      doorbell_(settings.spin),
      memory_(options.banks, options.bank_bytes, settings.overflow_bytes),
      calls_(xmem_, doorbell_, settings.spin),
      sink_(xmem_, memory_, streams_, doorbell_, settings.io_timeout),
      transports_(start_transports(options)),
      links_(kind_, self_, sink_, transports_),
      mover_(xmem_, memory_, streams_, links_, settings.io_timeout),
      dataplane_(xmem_, calls_, sink_, streams_, links_, mover_, doorbell_) {
  // A peer that broke its link to us is likely unreachable the other way too.
  sink_.set_link_failure_hook([this](const NetAddress& peer) { links_.forget(peer); });
  if (!settings.start_firmware) return;
#if ACCL_EMU_HAVE_FIRMWARE
  const size_t align = std::max<size_t>(fw::ControlProgram::state_alignment(), alignof(std::max_align_t));
  firmware_state_ = ::operator new(fw::ControlProgram::state_bytes(), std::align_val_t(align));
  try {
    firmware_ = std::thread([this] { firmware_main(); });
  } catch (...) {
    ::operator delete(firmware_state_, std::align_val_t(align));
    firmware_state_ = nullptr;
    throw;
  }
#else
  ACCL_LOG_WARN("emulated CCLO {}: built without the firmware; calls will not run", to_string(self_));
#endif
}

EmuDevice::~EmuDevice() {
  // 1. Stop the firmware thread: the doorbell wakes idle(), interrupting the
  //    kernel stream ends a blocked pull.
  doorbell_.stop();
  streams_.interrupt();
  if (firmware_.joinable()) firmware_.join();
#if ACCL_EMU_HAVE_FIRMWARE
  if (firmware_state_ != nullptr) {
    const size_t align = std::max<size_t>(fw::ControlProgram::state_alignment(), alignof(std::max_align_t));
    ::operator delete(firmware_state_, std::align_val_t(align));
  }
#endif
  // 2. No host thread may wait for calls nobody will run.
  calls_.abort_all(abi::kNotReady);
  // 3. Drop outbound links, then stop the transports so no thread calls the
  //    sink any more before it goes away.
  links_.clear();
  for (auto* t : {&transports_.udp, &transports_.tcp, &transports_.shm, &transports_.inproc})
    if (*t) (*t)->stop();
}

TransportSet EmuDevice::start_transports(const EmuOptions& options) {
  TransportSet set;
  TransportOptions to;
  to.bind = self_;
  to.job_secret = options.job_secret;
  // Each transport is started right away so its port is bound before the
  // next one takes the same number (automatic: all share one port number).
  auto open = [&](std::unique_ptr<Transport> t) {
    t->start(sink_);
    to.bind.port = t->local_address().port;
    return t;
  };
  [[maybe_unused]] auto missing = [](const char* kind) {
    return std::runtime_error(std::string("emulated CCLO: the ") + kind + " transport is not built into this library");
  };
  switch (options.transport) {
    case TransportKind::automatic:
#if ACCL_EMU_HAVE_TCP
      set.tcp = open(make_tcp_transport(to));
#endif
      set.inproc = open(make_inproc_transport(to));
#if ACCL_EMU_HAVE_SHM
      set.shm = open(make_shm_transport(to));
#endif
      break;
    case TransportKind::inproc:
      set.inproc = open(make_inproc_transport(to));
      break;
    case TransportKind::shm:
#if ACCL_EMU_HAVE_SHM
      set.shm = open(make_shm_transport(to));
      break;
#else
      throw missing("shm");
#endif
    case TransportKind::tcp:
#if ACCL_EMU_HAVE_TCP
      set.tcp = open(make_tcp_transport(to));
      break;
#else
      throw missing("tcp");
#endif
    case TransportKind::udp:
#if ACCL_EMU_HAVE_UDP
      set.udp = open(make_udp_transport(to));
      break;
#else
      throw missing("udp");
#endif
  }
  self_.port = to.bind.port;
  ACCL_LOG_DEBUG("emulated CCLO listening on {} ({})", to_string(self_), to_string(options.transport));
  return set;
}

void EmuDevice::firmware_main() {
  log::set_thread_rank(-1);  // set by the data plane once the driver configured a communicator
#if ACCL_EMU_HAVE_FIRMWARE
  try {
    fw::ControlProgram program(dataplane_, firmware_state_);
    while (!doorbell_.stopped()) {
      program.run();
      // run() returns only on stop; if it comes back otherwise, power the
      // control program up again rather than leaving the device dead.
      if (!doorbell_.stopped()) ACCL_LOG_WARN("emulated CCLO: control program returned; restarting it");
    }
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("emulated CCLO: firmware thread failed: {}", e.what());
  }
#endif
}

Endpoint EmuDevice::endpoint() const { return Endpoint{ipv4_to_string(self_.ip), self_.port}; }

}  // namespace accl::emu
