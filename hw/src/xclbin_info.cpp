// SPDX-License-Identifier: Apache-2.0
#include <accl/log.hpp>
#include <accl_hw/hostctrl.hpp>
#include <accl_hw/xclbin_info.hpp>

#include "hex.hpp"

#include <algorithm>

namespace accl::hw {
namespace {

const XclbinMem* find_mem(const XclbinInfo& info, int32_t index) {
  for (const auto& m : info.mems)
    if (m.index == index) return &m;
  return nullptr;
}

std::string list_mems(const XclbinInfo& info) {
  std::string out;
  for (const auto& m : info.mems) {
    if (!m.used) continue;
    out += (out.empty() ? "" : ", ") + std::to_string(m.index) + " " + m.tag;
  }
  return out.empty() ? "none" : out;
}

}  // namespace

KernelName parse_kernel_name(const std::string& name) {
  KernelName k;
  auto colon = name.find(':');
  k.kernel = name.substr(0, colon);
  if (colon == std::string::npos) return k;
  std::string inst = name.substr(colon + 1);
  // XRT's CU syntax puts the instance in braces; IP_LAYOUT names have none.
  if (inst.size() >= 2 && inst.front() == '{' && inst.back() == '}') inst = inst.substr(1, inst.size() - 2);
  k.instance = inst;
  return k;
}

const XclbinIp& find_ip(const XclbinInfo& info, const std::string& name, const std::string& setting) {
  const KernelName want = parse_kernel_name(name);
  for (const auto& ip : info.ips) {
    KernelName have = parse_kernel_name(ip.name);
    if (have.kernel == want.kernel && (want.instance.empty() || have.instance == want.instance)) return ip;
  }
  std::string has;
  for (const auto& ip : info.ips) {
    KernelName have = parse_kernel_name(ip.name);
    has += (has.empty() ? "" : ", ") + have.kernel + ":{" + have.instance + "}";
  }
  throw HwError("ACCL_DEVICE=xrt: kernel '" + name + "' not in xclbin " + info.path + " (" +
                (has.empty() ? std::string("it has no kernels") : "it has: " + has) + "; set " + setting + ")");
}

ResolvedXclbin resolve_xclbin(const XclbinInfo& info, const XrtOptions& options) {
  ResolvedXclbin r;
  r.cclo = find_ip(info, options.cclo_kernel, "ACCL_CCLO_KERNEL");
  r.hostctrl = find_ip(info, options.hostctrl_kernel, "ACCL_HOSTCTRL_KERNEL");

  // The hostctrl must take exactly public ACCL's 12 scalars, or set_arg would
  // write our words into the wrong arguments (or XRT would reject the sizes).
  const XclbinIp& hc = r.hostctrl;
  if (hc.args.empty()) {
    r.warnings.push_back("xclbin has no argument metadata for '" + hc.name + "'; assuming public ACCL's hostctrl");
  } else {
    for (int i = 0; i < kHostCtrlArgCount; ++i) {
      auto it = std::find_if(hc.args.begin(), hc.args.end(), [i](const XclbinArg& a) { return a.index == static_cast<uint32_t>(i); });
      if (it == hc.args.end())
        throw HwError("ACCL_DEVICE=xrt: kernel '" + options.hostctrl_kernel + "' has no argument " + std::to_string(i) +
                      ": not an ACCL host controller (it needs 12 scalar arguments)");
      if (it->size != 0 && it->size != kHostCtrlArgBytes[i])
        throw HwError("ACCL_DEVICE=xrt: kernel '" + options.hostctrl_kernel + "' argument " + std::to_string(i) + " '" +
                      it->name + "' is " + std::to_string(it->size) + " bytes, expected " +
                      std::to_string(kHostCtrlArgBytes[i]) + ": not an ACCL host controller");
      if (it->offset != 0 && it->offset != kHostCtrlArgOffset[i])
        r.warnings.push_back("hostctrl argument " + std::to_string(i) + " '" + it->name + "' sits at " + hex(it->offset) +
                             ", public ACCL's map has " + hex(kHostCtrlArgOffset[i]) + " (XRT follows the xclbin)");
    }
  }

  // Memory groups: explicit setting, else what the CCLO's memory ports reach.
  if (!options.memory_groups.empty()) {
    for (uint32_t g : options.memory_groups)
      if (!info.mems.empty() && find_mem(info, static_cast<int32_t>(g)) == nullptr)
        throw HwError("ACCL_DEVICE=xrt: ACCL_XRT_MEMORY_GROUPS names memory group " + std::to_string(g) +
                      ", not in xclbin " + info.path + " (it has: " + list_mems(info) + ")");
    r.bank_groups = options.memory_groups;
  } else {
    std::vector<XclbinArg> args = r.cclo.args;
    std::sort(args.begin(), args.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
    for (const auto& a : args)
      for (int32_t m : a.mems) {
        const XclbinMem* mem = find_mem(info, m);
        if (mem != nullptr && (mem->host || mem->streaming)) continue;
        if (std::find(r.bank_groups.begin(), r.bank_groups.end(), static_cast<uint32_t>(m)) == r.bank_groups.end())
          r.bank_groups.push_back(static_cast<uint32_t>(m));
      }
    if (r.bank_groups.empty()) {
      r.warnings.push_back("xclbin shows no memory connection of '" + r.cclo.name +
                           "'; using memory group 0 (set ACCL_XRT_MEMORY_GROUPS)");
      r.bank_groups.push_back(0);
    }
  }

  // The network kernels, before anything is loaded: a design the xclbin does
  // not have fails here, listing what it has.
  const std::string network_setting = "ACCL_HW_NETWORK to the design of this xclbin, or none";
  if (options.network.design == NetworkDesign::udp)
    r.network = {find_ip(info, kCmacIp, network_setting), find_ip(info, kNetworkLayerIp, network_setting)};
  else if (options.network.design == NetworkDesign::tcp)
    r.network = {find_ip(info, kPoeKernel, network_setting), find_ip(info, kSessionHandlerKernel, network_setting)};

  // Host-only buffers need the host memory bank the CCLO reaches.
  for (const auto& a : r.cclo.args)
    for (int32_t m : a.mems)
      if (const XclbinMem* mem = find_mem(info, m); mem != nullptr && mem->host && r.host_group < 0) r.host_group = m;
  if (r.host_group < 0)
    for (const auto& m : info.mems)
      if (m.host && m.used) {
        r.host_group = m.index;
        break;
      }
  return r;
}

uint32_t scalar_arg_bytes(const XclbinIp& ip, uint32_t index, uint32_t natural) {
  for (const auto& a : ip.args)
    if (a.index == index && (a.size == 1 || a.size == 2 || a.size == 4 || a.size == 8))
      return static_cast<uint32_t>(a.size);
  return natural;
}

}  // namespace accl::hw
