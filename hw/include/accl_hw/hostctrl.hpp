// SPDX-License-Identifier: Apache-2.0
//
// How a call reaches the CCLO on a card: the host-controller ("hostctrl")
// kernel takes the call as 12 scalar arguments and streams them to the CCLO
// as the 15 call words (addresses split low/high). This header is the single
// place that maps CallWords onto those arguments; the XRT port and the test
// models only move the resulting values.
#pragma once

#include <accl/abi.hpp>
#include <accl/device.hpp>

#include <array>
#include <cstdint>
#include <string>

namespace accl::hw {

// Argument ids of the hostctrl kernel (public ACCL XRTDevice: SCENARIO 0 ..
// ADDR_2 11). Arguments 12 and 13 are the command/status streams XRT never sees.
enum HostCtrlArg : int {
  kArgScenario = 0,
  kArgCount = 1,
  kArgComm = 2,
  kArgRootSrcDst = 3,
  kArgFunction = 4,
  kArgTag = 5,
  kArgArithConfig = 6,
  kArgCompressionFlags = 7,
  kArgStreamFlags = 8,
  kArgAddr0 = 9,
  kArgAddr1 = 10,
  kArgAddr2 = 11,
  kHostCtrlArgCount = 12,
};

// Width in bytes of each argument: nine 32-bit words, three 64-bit addresses.
inline constexpr std::array<uint32_t, kHostCtrlArgCount> kHostCtrlArgBytes = {4, 4, 4, 4, 4, 4, 4, 4, 4, 8, 8, 8};

// AXI-Lite offset of each argument in public ACCL's hostctrl register map.
// XRT places arguments by the xclbin's metadata, not by this table; it is
// used to warn about a hostctrl whose map differs from the public one.
inline constexpr std::array<uint32_t, kHostCtrlArgCount> kHostCtrlArgOffset = {
    abi::kHostCtrlScenario,     abi::kHostCtrlCount,       abi::kHostCtrlComm,
    abi::kHostCtrlRootSrcDst,   abi::kHostCtrlFunction,    abi::kHostCtrlTag,
    abi::kHostCtrlArithConfig,  abi::kHostCtrlCompressionFlags, abi::kHostCtrlStreamFlags,
    abi::kHostCtrlAddr0,        abi::kHostCtrlAddr1,       abi::kHostCtrlAddr2,
};

// The 12 argument values of one hostctrl execution (32-bit arguments hold
// their value in the low half).
struct HostCtrlArgs {
  std::array<uint64_t, kHostCtrlArgCount> value{};
  friend bool operator==(const HostCtrlArgs&, const HostCtrlArgs&) = default;
};

// Every argument is taken from the call, for every scenario. Public ACCL sets
// only some per scenario and so drops COUNT on config calls (set_timeout,
// set_max_*); setting all twelve costs nothing and cannot lose a field.
HostCtrlArgs encode_call(const CallWords& call);

// "allreduce", "config", ... or "scenario 77".
std::string scenario_name(uint32_t scenario);
// One line for logs and errors: "allreduce count=1024 comm=0x1a4 root=0 fn=0 tag=0x..."
std::string describe_call(const CallWords& call);

}  // namespace accl::hw
