// SPDX-License-Identifier: Apache-2.0
//
// ACCL_DEVICE=xrt where something is missing: fail fast, with an accl::Error
// naming it. Runs on machines without a card (this one, CI).
#include <accl/config.hpp>
#include <accl/error.hpp>
#include <accl_hw/hw.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

namespace hw = accl::hw;
namespace fs = std::filesystem;

namespace {

const std::string kData = HW_TEST_DATA;

// Clean ACCL_/launcher environment for each test.
class HwNoCard : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"ACCL_XCLBIN", "ACCL_DEVICE_INDEX", "ACCL_CCLO_KERNEL", "ACCL_HOSTCTRL_KERNEL",
                          "ACCL_XRT_MEMORY_GROUPS", "ACCL_CCLO_CLOCK_MHZ", "OMPI_COMM_WORLD_LOCAL_RANK",
                          "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "HWLOC_XMLFILE"})
      ::unsetenv(v);
    ::setenv("ACCL_DEVICE", "xrt", 1);
  }
  void TearDown() override { ::unsetenv("ACCL_DEVICE"); }

  // The message create_xrt_device() fails with ("" if it did not).
  static std::string open_error(const hw::XrtOptions& o) {
    try {
      auto dev = hw::create_xrt_device(o);
    } catch (const accl::Error& e) {  // every failure is an accl::Error
      return e.what();
    }
    return "";
  }
  static std::string open_error_from_env() {
    hw::XrtOptions o;
    try {
      o = hw::options_from_environment();
    } catch (const accl::Error& e) {
      return e.what();
    }
    return open_error(o);
  }

  // An xclbin with the right magic and no sections: XRT parses it, it has no kernels.
  static std::string empty_xclbin() {
    fs::path p = fs::temp_directory_path() / ("accl_hw_empty_" + std::to_string(::getpid()) + ".xclbin");
    std::vector<char> bytes(4096, 0);
    std::memcpy(bytes.data(), "xclbin2", 8);
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p.string();
  }
};

}  // namespace

TEST_F(HwNoCard, OptionsFromEnvironment) {
  hw::XrtOptions o = hw::options_from_environment();
  EXPECT_EQ(o.xclbin, "");
  EXPECT_EQ(o.device, "");
  EXPECT_EQ(o.cclo_kernel, hw::kDefaultCcloKernel);
  EXPECT_EQ(o.hostctrl_kernel, hw::kDefaultHostCtrlKernel);
  EXPECT_DOUBLE_EQ(o.clock_mhz, 250.0);
  EXPECT_TRUE(o.memory_groups.empty());
  // The settings table carries the same defaults.
  EXPECT_EQ(accl::config::get_string("ACCL_CCLO_KERNEL"), hw::kDefaultCcloKernel);
  EXPECT_EQ(accl::config::get_string("ACCL_HOSTCTRL_KERNEL"), hw::kDefaultHostCtrlKernel);

  ::setenv("ACCL_XCLBIN", "/opt/accl/ccl_offload.xclbin", 1);
  ::setenv("ACCL_DEVICE_INDEX", "0000:3B:00.1", 1);
  ::setenv("ACCL_CCLO_KERNEL", "ccl_offload:{ccl_offload_1}", 1);
  ::setenv("ACCL_HOSTCTRL_KERNEL", "hostctrl:{hostctrl_1_0}", 1);
  ::setenv("ACCL_XRT_MEMORY_GROUPS", "1, 0", 1);
  ::setenv("ACCL_CCLO_CLOCK_MHZ", "300", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  o = hw::options_from_environment();
  EXPECT_EQ(o.xclbin, "/opt/accl/ccl_offload.xclbin");
  EXPECT_EQ(o.device, "0000:3B:00.1");
  EXPECT_EQ(o.cclo_kernel, "ccl_offload:{ccl_offload_1}");
  EXPECT_EQ(o.hostctrl_kernel, "hostctrl:{hostctrl_1_0}");
  EXPECT_EQ(o.memory_groups, (std::vector<uint32_t>{1, 0}));
  EXPECT_DOUBLE_EQ(o.clock_mhz, 300.0);
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_EQ(o.local_size, 2);

  ::setenv("ACCL_XRT_MEMORY_GROUPS", "1,,2", 1);
  EXPECT_THROW(hw::options_from_environment(), hw::HwError);
  ::unsetenv("ACCL_XRT_MEMORY_GROUPS");
  ::setenv("ACCL_CCLO_CLOCK_MHZ", "fast", 1);
  EXPECT_THROW(hw::options_from_environment(), hw::HwError);
  ::unsetenv("ACCL_CCLO_CLOCK_MHZ");
  ::setenv("ACCL_DEVICE_INDEX", "card0", 1);
  try {
    hw::options_from_environment();
    FAIL();
  } catch (const accl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ACCL_DEVICE_INDEX=card0: not a card index or PCI address"), std::string::npos);
  }
}

TEST_F(HwNoCard, CardByIndexOrAddress) {
  auto t = hw::parse_card("1");
  EXPECT_TRUE(t.by_index);
  EXPECT_EQ(t.index, 1u);
  t = hw::parse_card("3b:00.1");
  EXPECT_FALSE(t.by_index);
  EXPECT_EQ(t.bdf, "0000:3b:00.1");
  t = hw::parse_card("0001:AF:00.1");
  EXPECT_EQ(t.bdf, "0001:af:00.1");
  EXPECT_THROW(hw::parse_card("0000:3b:00.9"), hw::HwError);
  EXPECT_THROW(hw::parse_card("-1"), hw::HwError);
}

TEST_F(HwNoCard, NearestCardFromTopology) {
  hw::XrtOptions o;
  o.topology_xml = kData + "/two_numa_three_cards.xml";
  o.local_rank = 3;
  o.local_size = 4;
  auto t = hw::select_card(o);
  EXPECT_FALSE(t.by_index);
  EXPECT_EQ(t.bdf, "0000:d8:00.1");  // rank 3 of 4 over 3 cards: block 2
  o.device = "5";                    // ACCL_DEVICE_INDEX overrides locality
  t = hw::select_card(o);
  EXPECT_TRUE(t.by_index);
  EXPECT_EQ(t.index, 5u);
}

TEST_F(HwNoCard, NoCardIsNamed) {
  hw::XrtOptions o;
  o.topology_xml = kData + "/no_cards.xml";
  o.xclbin = "/nonexistent.xclbin";
  std::string e = open_error(o);
  if (!hw::built_with_xrt()) {  // nothing to configure around: that comes first
    EXPECT_NE(e.find("built without XRT"), std::string::npos) << e;
    return;
  }
  EXPECT_NE(e.find("ACCL_DEVICE=xrt: no Alveo card found (hwloc saw 0 Xilinx PCI devices)"), std::string::npos) << e;
}

TEST_F(HwNoCard, ThisMachine) {
  // ACCL_DEVICE=xrt with nothing else set, on the machine the tests run on.
  std::string e = open_error_from_env();
  ASSERT_NE(e, "") << "opening a card must fail without ACCL_XCLBIN";
  if (!hw::built_with_xrt()) GTEST_SKIP() << e;
  if (e.find("no Alveo card found") == std::string::npos) {
    // A machine with a card gets as far as the xclbin (or reports no XRT).
    EXPECT_TRUE(e.find("ACCL_XCLBIN not set") != std::string::npos || e.find("built without XRT") != std::string::npos)
        << e;
    GTEST_SKIP() << "this machine has a Xilinx card: " << e;
  }
  EXPECT_NE(e.find("hwloc saw 0 Xilinx PCI devices"), std::string::npos) << e;
}

TEST_F(HwNoCard, MissingXclbinIsNamed) {
  hw::XrtOptions o;
  o.topology_xml = kData + "/two_numa_three_cards.xml";  // a card "exists"
  std::string e = open_error(o);
  if (!hw::built_with_xrt()) GTEST_SKIP() << e;
  EXPECT_NE(e.find("ACCL_DEVICE=xrt: ACCL_XCLBIN not set"), std::string::npos) << e;

  o.xclbin = "/nonexistent/accl.xclbin";
  e = open_error(o);
  EXPECT_NE(e.find("ACCL_XCLBIN=/nonexistent/accl.xclbin: no such file"), std::string::npos) << e;

  o.xclbin = kData;  // a directory
  e = open_error(o);
  EXPECT_NE(e.find("not a regular file"), std::string::npos) << e;

  o.xclbin = kData + "/no_cards.xml";  // a file, not an xclbin
  e = open_error(o);
  EXPECT_NE(e.find("not a valid xclbin"), std::string::npos) << e;
}

TEST_F(HwNoCard, MissingKernelIsNamed) {
  if (!hw::built_with_xrt()) GTEST_SKIP() << "needs XRT to parse the xclbin";
  hw::XrtOptions o;
  o.device = "0";  // skip discovery: the xclbin is checked before the card is opened
  o.xclbin = empty_xclbin();
  std::string e = open_error(o);
  EXPECT_NE(e.find("kernel 'ccl_offload:{ccl_offload_0}' not in xclbin " + o.xclbin + " (it has no kernels"),
            std::string::npos)
      << e;
  o.cclo_kernel = "ccl_offload";
  e = open_error(o);
  EXPECT_NE(e.find("kernel 'ccl_offload' not in xclbin"), std::string::npos) << e;
  fs::remove(o.xclbin);
}

TEST_F(HwNoCard, WithoutXrtTheFactoryStillFailsCleanly) {
  if (hw::built_with_xrt()) {
    EXPECT_FALSE(hw::xrt_version().empty());
    GTEST_SKIP() << "built with XRT " << hw::xrt_version();
  }
  hw::XrtOptions o;
  o.device = "0";
  EXPECT_NE(open_error(o).find("built without XRT"), std::string::npos);
}

#ifdef ACCL_INFO_PATH
// accl-info works without a card and reports every section.
TEST_F(HwNoCard, AcclInfoRuns) {
  ::setenv("ACCL_XCLBIN", "/some/where.xclbin", 1);
  std::string cmd = std::string(ACCL_INFO_PATH) + " --topology " + kData + "/two_numa_three_cards.xml 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
  ASSERT_TRUE(pipe);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe.get())) > 0) out.append(buf.data(), n);
  int status = ::pclose(pipe.release());
  EXPECT_EQ(status, 0) << out;
  for (const char* want : {"ACCL for MPI", "XRT backend:", "hwloc:", "cards:                     3",
                           "0000:3b:00.1 (mgmt 0000:3b:00.0)", "card for this rank:", "emulator cpuset:",
                           "ACCL_XCLBIN:               /some/where.xclbin (set)", "ACCL_TIMEOUT_MS:"})
    EXPECT_NE(out.find(want), std::string::npos) << "missing '" << want << "' in:\n" << out;
  for (const auto& s : accl::config::settings()) EXPECT_NE(out.find(s.name), std::string::npos) << s.name;
#if ACCL_INFO_HAVE_EMU
  EXPECT_NE(out.find("transports:"), std::string::npos) << out;
  EXPECT_NE(out.find("inproc"), std::string::npos) << out;
  EXPECT_NE(out.find("capabilities:              0x8"), std::string::npos) << "valid capability word:\n" << out;
#endif
}
#endif

TEST_F(HwNoCard, BadNetworkPlanIsRefusedBeforeXrtLoadsAnything) {
  // A card chosen by index and a readable file: the next step would be XRT
  // parsing the xclbin. A network plan that cannot work stops before it.
  hw::XrtOptions o;
  o.device = "0";
  o.xclbin = empty_xclbin();
  o.network.design = hw::NetworkDesign::udp;
  o.network.rank = 5;
  o.network.peers = hw::public_network_peers(2);
  const std::string e = open_error(o);
  fs::remove(o.xclbin);
  if (!hw::built_with_xrt()) GTEST_SKIP() << e;
  EXPECT_NE(e.find("network bring-up: rank 5 is not among the 2 ranks to connect"), std::string::npos) << e;
}
