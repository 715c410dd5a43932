// SPDX-License-Identifier: Apache-2.0
//
// accl::Device over a RegisterPort + BufferPort: the hardware backend minus
// the runtime calls. create_xrt_device() builds it on XRT ports; tests build
// it on models.
//
// Calls: start() queues; one dispatcher thread starts queued calls in issue
// order, one hostctrl execution at a time (a card has one host controller per
// CCLO, and public ACCL runs one call per device too). Chaining is resolved
// host-side: the dispatcher starts a call only after every call in its
// `waitfor` has completed (a failed dependency still lets it run). The CCLO
// therefore never sees a dependency and the capability bit kCapChaining stays
// whatever the firmware reports.
//
// After each execution the dispatcher reads RETCODE (0x1FFC) and PERFCNT
// (0x1FF0): result(id).retcode carries the firmware's error bits unchanged
// (the driver raises them), and the duration is PERFCNT cycles at clock_mhz.
// A failed execution (runtime abort, lost card) makes result() throw HwError.
#pragma once

#include <accl/device.hpp>
#include <accl_hw/port.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace accl::hw {

struct CcloDeviceOptions {
  std::string name = "xrt";           // Device::name()
  std::string description;            // "card 0000:3b:00.1, xclbin ..." for messages
  double clock_mhz = 250.0;           // PERFCNT tick rate (public ACCL assumes 250 MHz)
  // Longest single wait on the port, so the dispatcher notices shutdown.
  std::chrono::milliseconds poll_slice{100};
};

std::unique_ptr<Device> make_cclo_device(std::unique_ptr<RegisterPort> registers,
                                         std::unique_ptr<BufferPort> buffers, CcloDeviceOptions options);

}  // namespace accl::hw
