// SPDX-License-Identifier: Apache-2.0
//
// Finding the CCLO and the hostctrl in an xclbin's metadata, checking the
// hostctrl's arguments and picking memory groups -- the runtime-free half of
// opening a card.
#include <accl_hw/hostctrl.hpp>
#include <accl_hw/xclbin_info.hpp>

#include <gtest/gtest.h>

namespace hw = accl::hw;

namespace {

// What a public ACCL xclbin looks like to resolve_xclbin(): a CCLO with two
// DDR ports and a host port, a hostctrl with its 12 scalars and 2 streams.
hw::XclbinInfo accl_like() {
  hw::XclbinInfo info;
  info.path = "/x/accl.xclbin";
  info.mems = {{0, "DDR[0]", false, false, true},  {1, "DDR[1]", false, false, true},
               {2, "HOST[0]", true, false, true},  {3, "dc_0", false, true, true}};
  hw::XclbinIp cclo{"ccl_offload:ccl_offload_0", {}};
  cclo.args = {{"m_axi_0", 0, 8, 0x10, {1}}, {"m_axi_1", 1, 8, 0x18, {0}}, {"m_axi_host", 2, 8, 0x20, {2}},
               {"s_axis_eth", 3, 0, 0, {3}}};
  hw::XclbinIp hostctrl{"hostctrl:hostctrl_0_0", {}};
  const char* names[] = {"scenario", "len", "comm", "root_src_dst", "function", "msg_tag", "datapath_cfg",
                         "compression_flags", "stream_flags", "addra", "addrb", "addrc"};
  for (uint32_t i = 0; i < 12; ++i)
    hostctrl.args.push_back({names[i], i, hw::kHostCtrlArgBytes[i], hw::kHostCtrlArgOffset[i], {}});
  hostctrl.args.push_back({"cmd", 12, 0, 0, {3}});
  info.ips = {{"hostctrl:hostctrl_1_0", hostctrl.args}, cclo, hostctrl, {"ccl_offload:ccl_offload_1", cclo.args}};
  return info;
}

std::string error_of(const hw::XclbinInfo& info, const hw::XrtOptions& o) {
  try {
    hw::resolve_xclbin(info, o);
  } catch (const accl::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(HwXclbin, KernelNames) {
  auto k = hw::parse_kernel_name("hostctrl:{hostctrl_0_0}");
  EXPECT_EQ(k.kernel, "hostctrl");
  EXPECT_EQ(k.instance, "hostctrl_0_0");
  k = hw::parse_kernel_name("ccl_offload:ccl_offload_2");
  EXPECT_EQ(k.instance, "ccl_offload_2");
  k = hw::parse_kernel_name("hostctrl");
  EXPECT_EQ(k.kernel, "hostctrl");
  EXPECT_EQ(k.instance, "");
}

TEST(HwXclbin, DefaultsFindInstanceZero) {
  hw::XrtOptions o;
  auto r = hw::resolve_xclbin(accl_like(), o);
  EXPECT_EQ(r.cclo.name, "ccl_offload:ccl_offload_0");
  EXPECT_EQ(r.hostctrl.name, "hostctrl:hostctrl_0_0");
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  // Banks in port order, host and stream memories excluded.
  EXPECT_EQ(r.bank_groups, (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(r.host_group, 2);
}

TEST(HwXclbin, OtherInstancesAndExplicitGroups) {
  hw::XrtOptions o;
  o.cclo_kernel = "ccl_offload:{ccl_offload_1}";
  o.hostctrl_kernel = "hostctrl:{hostctrl_1_0}";
  o.memory_groups = {0};
  auto r = hw::resolve_xclbin(accl_like(), o);
  EXPECT_EQ(r.cclo.name, "ccl_offload:ccl_offload_1");
  EXPECT_EQ(r.hostctrl.name, "hostctrl:hostctrl_1_0");
  EXPECT_EQ(r.bank_groups, (std::vector<uint32_t>{0}));
  o.memory_groups = {7};
  EXPECT_NE(error_of(accl_like(), o).find("memory group 7, not in xclbin"), std::string::npos) << error_of(accl_like(), o);
}

TEST(HwXclbin, MissingKernelIsNamed) {
  hw::XrtOptions o;
  o.hostctrl_kernel = "hostctrl:{hostctrl_9_0}";
  std::string e = error_of(accl_like(), o);
  EXPECT_NE(e.find("kernel 'hostctrl:{hostctrl_9_0}' not in xclbin /x/accl.xclbin"), std::string::npos) << e;
  EXPECT_NE(e.find("it has: hostctrl:{hostctrl_1_0}, ccl_offload:{ccl_offload_0}"), std::string::npos) << e;
  EXPECT_NE(e.find("ACCL_HOSTCTRL_KERNEL"), std::string::npos) << e;

  hw::XclbinInfo empty;
  empty.path = "/x/empty.xclbin";
  e = error_of(empty, hw::XrtOptions{});
  EXPECT_NE(e.find("kernel 'ccl_offload:{ccl_offload_0}' not in xclbin /x/empty.xclbin (it has no kernels; set "
                   "ACCL_CCLO_KERNEL)"),
            std::string::npos)
      << e;
}

TEST(HwXclbin, HostctrlMustTakeTwelveScalars) {
  auto info = accl_like();
  info.ips[2].args[9].size = 4;  // addra as a 32-bit word: not our hostctrl
  std::string e = error_of(info, hw::XrtOptions{});
  EXPECT_NE(e.find("argument 9 'addra' is 4 bytes, expected 8"), std::string::npos) << e;

  info = accl_like();
  info.ips[2].args.resize(5);
  e = error_of(info, hw::XrtOptions{});
  EXPECT_NE(e.find("has no argument 5"), std::string::npos) << e;

  // A different register map only warns: XRT places arguments by metadata.
  info = accl_like();
  info.ips[2].args[1].offset = 0x1c;
  auto r = hw::resolve_xclbin(info, hw::XrtOptions{});
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("argument 1 'len' sits at 0x1c"), std::string::npos) << r.warnings[0];
}

TEST(HwXclbin, MissingMetadataFallsBack) {
  auto info = accl_like();
  info.ips[1].args.clear();  // CCLO without connectivity
  info.ips[2].args.clear();  // hostctrl without arguments
  info.mems.clear();
  auto r = hw::resolve_xclbin(info, hw::XrtOptions{});
  EXPECT_EQ(r.bank_groups, (std::vector<uint32_t>{0}));
  EXPECT_EQ(r.host_group, -1);
  EXPECT_EQ(r.warnings.size(), 2u);
}

TEST(HwXclbin, NetworkKernelsOfTheChosenDesign) {
  hw::XrtOptions o;
  hw::XclbinInfo info = accl_like();
  EXPECT_TRUE(hw::resolve_xclbin(info, o).network.empty());  // none: no network kernel needed

  // A design the xclbin does not have fails before anything is loaded, naming the kernel.
  o.network.design = hw::NetworkDesign::tcp;
  std::string e = error_of(info, o);
  EXPECT_NE(e.find("kernel 'network_krnl:{poe_0}' not in xclbin /x/accl.xclbin"), std::string::npos) << e;
  EXPECT_NE(e.find("set ACCL_HW_NETWORK to the design of this xclbin, or none"), std::string::npos) << e;

  // Public ACCL's instance names (IP_LAYOUT spells them kernel:instance).
  info.ips.push_back({"network_krnl:poe_0", {{"ip_addr", 0, 4, 0x10, {}}}});
  info.ips.push_back({"tcp_session_handler:session_handler_0", {}});
  info.ips.push_back({"cmac_0:cmac_0", {}});
  auto r = hw::resolve_xclbin(info, o);
  ASSERT_EQ(r.network.size(), 2u);
  EXPECT_EQ(r.network[0].name, "network_krnl:poe_0");
  EXPECT_EQ(r.network[1].name, "tcp_session_handler:session_handler_0");

  o.network.design = hw::NetworkDesign::udp;  // has the CMAC, not the network layer
  e = error_of(info, o);
  EXPECT_NE(e.find("kernel 'networklayer:{networklayer_0}' not in xclbin"), std::string::npos) << e;
  info.ips.push_back({"networklayer:networklayer_0", {}});
  r = hw::resolve_xclbin(info, o);
  ASSERT_EQ(r.network.size(), 2u);
  EXPECT_EQ(r.network[0].name, "cmac_0:cmac_0");
  EXPECT_EQ(r.network[1].name, "networklayer:networklayer_0");
}

TEST(HwXclbin, ScalarWidthFollowsTheXclbin) {
  // The session handler's result arguments are pointers in its HLS source:
  // the width comes from the xclbin when it declares one.
  hw::XclbinIp ip{"tcp_session_handler:session_handler_0",
                  {{"ip", 0, 4, 0x10, {}}, {"session_id", 2, 8, 0x20, {}}, {"return_code", 3, 0, 0x30, {}},
                   {"odd", 4, 3, 0x38, {}}}};
  EXPECT_EQ(hw::scalar_arg_bytes(ip, 0, 4), 4u);
  EXPECT_EQ(hw::scalar_arg_bytes(ip, 2, 2), 8u);  // declared 8 bytes
  EXPECT_EQ(hw::scalar_arg_bytes(ip, 3, 1), 1u);  // size unknown: the C type's
  EXPECT_EQ(hw::scalar_arg_bytes(ip, 4, 4), 4u);  // not a scalar width
  EXPECT_EQ(hw::scalar_arg_bytes(ip, 9, 2), 2u);  // no metadata
}
