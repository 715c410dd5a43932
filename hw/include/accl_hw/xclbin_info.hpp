// SPDX-License-Identifier: Apache-2.0
//
// What the backend needs from an xclbin, as plain data. The XRT port fills
// it from xrt::xclbin; resolve_xclbin() then finds the CCLO and hostctrl
// instances, checks the hostctrl argument layout and picks memory groups --
// all without a card, so every "not in xclbin" path is testable.
#pragma once

#include <accl_hw/hw.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace accl::hw {

struct XclbinArg {
  std::string name;
  uint32_t index = 0;
  uint64_t size = 0;    // bytes (scalars); 0 or pointer size for ports
  uint64_t offset = 0;  // AXI-Lite offset
  std::vector<int32_t> mems;  // memory groups this argument is connected to
};

// One compute unit / IP instance, named "kernel:instance" as in IP_LAYOUT.
struct XclbinIp {
  std::string name;
  std::vector<XclbinArg> args;
};

struct XclbinMem {
  int32_t index = 0;
  std::string tag;        // "DDR[0]", "HBM[3]", "HOST[0]"
  bool host = false;      // host memory (host-only buffers live here)
  bool streaming = false; // stream connection, not addressable memory
  bool used = true;
};

struct XclbinInfo {
  std::string path;
  std::vector<XclbinIp> ips;
  std::vector<XclbinMem> mems;
};

// "hostctrl:{hostctrl_0_0}" -> {"hostctrl", "hostctrl_0_0"}; "hostctrl" -> {"hostctrl", ""} (any instance).
struct KernelName {
  std::string kernel;
  std::string instance;
};
KernelName parse_kernel_name(const std::string& name);

// The IP named `name` (in the syntax above). Throws HwError
// "kernel 'hostctrl:{hostctrl_0_0}' not in xclbin <path> (it has: ...; set <setting>)".
const XclbinIp& find_ip(const XclbinInfo& info, const std::string& name, const std::string& setting);

struct ResolvedXclbin {
  XclbinIp cclo;      // copies: the result outlives the XclbinInfo it came from
  XclbinIp hostctrl;
  std::vector<uint32_t> bank_groups;  // memory group per device bank (bank 0 first)
  int32_t host_group = -1;            // memory group for host-only buffers; -1: none
  // The network kernels options.network.design needs (network.hpp), in the
  // order udp: CMAC, network layer; tcp: POE, session handler. Empty for none.
  std::vector<XclbinIp> network;
  std::vector<std::string> warnings;  // logged by the caller
};

// Finds both kernels (and the network kernels options.network asks for),
// checks the hostctrl arguments (12 scalars: nine of 4 bytes, three of 8)
// and derives memory groups (options.memory_groups wins).
ResolvedXclbin resolve_xclbin(const XclbinInfo& info, const XrtOptions& options);

// Bytes to pass for scalar argument `index` of `ip`: the size the xclbin
// declares when it is 1, 2, 4 or 8, else `natural` (the C type's width; also
// without argument metadata).
uint32_t scalar_arg_bytes(const XclbinIp& ip, uint32_t index, uint32_t natural);

}  // namespace accl::hw
