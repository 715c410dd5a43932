// SPDX-License-Identifier: Apache-2.0
//
// Card discovery and placement on hwloc XML topologies (tests/hw/data) and
// fake sysfs trees, so they run the same on any machine.
#include <accl_hw/hw.hpp>
#include <accl_hw/locality.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace loc = accl::hw::locality;
namespace fs = std::filesystem;

namespace {

const std::string kData = HW_TEST_DATA;

std::vector<unsigned> range(unsigned a, unsigned b) {
  std::vector<unsigned> v;
  for (unsigned i = a; i <= b; ++i) v.push_back(i);
  return v;
}

loc::Card card(const std::string& bdf, int numa, std::vector<unsigned> cpus) {
  loc::Card c;
  c.bdf = bdf;
  c.numa_node = numa;
  c.cpus = std::move(cpus);
  return c;
}

}  // namespace

TEST(HwLocality, CpuListFormat) {
  EXPECT_EQ(loc::to_cpulist({3, 0, 1, 2, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(loc::to_cpulist({}), "");
  EXPECT_EQ(loc::parse_cpulist("0-3,8,10-11\n"), (std::vector<unsigned>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_TRUE(loc::parse_cpulist("").empty());
  EXPECT_THROW(loc::parse_cpulist("3-1"), std::invalid_argument);
  EXPECT_THROW(loc::parse_cpulist("1,"), std::invalid_argument);
  EXPECT_THROW(loc::parse_cpulist("a"), std::invalid_argument);
}

#if ACCL_HW_HAVE_HWLOC
TEST(HwLocality, HwlocXmlFindsCardsWithTheirNumaNode) {
  loc::Machine m = loc::discover(kData + "/two_numa_three_cards.xml");
  EXPECT_EQ(m.numa_nodes, 2);
  EXPECT_EQ(m.cores.size(), 8u);
  EXPECT_TRUE(m.bound.empty()) << "an XML topology says nothing about this process";
  ASSERT_EQ(m.xilinx.size(), 6u) << "the Intel NIC is not a Xilinx function";
  auto cards = loc::group_cards(m.xilinx);
  ASSERT_EQ(cards.size(), 3u);
  EXPECT_EQ(cards[0].bdf, "0000:3b:00.1");
  EXPECT_EQ(cards[0].mgmt_bdf, "0000:3b:00.0");
  EXPECT_EQ(cards[0].numa_node, 0);
  EXPECT_EQ(cards[0].cpus, range(0, 3));
  EXPECT_EQ(cards[0].device, 0x5021);
  EXPECT_EQ(cards[1].bdf, "0000:af:00.1");
  EXPECT_EQ(cards[1].numa_node, 1);
  EXPECT_EQ(cards[1].cpus, range(4, 7));
  EXPECT_EQ(cards[2].bdf, "0000:d8:00.1");
}

TEST(HwLocality, HwlocXmlWithoutCards) {
  loc::Machine m = loc::discover(kData + "/no_cards.xml");
  EXPECT_TRUE(m.xilinx.empty());
  EXPECT_EQ(m.cores.size(), 2u);
  EXPECT_THROW(loc::discover(kData + "/missing.xml"), accl::hw::HwError);
}

TEST(HwLocality, ThisMachineLoads) {
  loc::Machine m = loc::discover();
  EXPECT_FALSE(m.cores.empty());
  EXPECT_FALSE(m.bound.empty()) << "this process's binding is known on this system";
  EXPECT_NE(m.source.find("hwloc"), std::string::npos);
}
#endif

TEST(HwLocality, SysfsTree) {
  fs::path root = fs::temp_directory_path() / ("accl_hw_sysfs_" + std::to_string(::getpid()));
  fs::remove_all(root);
  auto dev = [&](const std::string& bdf, const char* vendor, const char* device, const char* numa, const char* cpus,
                 const char* driver) {
    fs::path d = root / "bus/pci/devices" / bdf;
    fs::create_directories(d);
    std::ofstream(d / "vendor") << vendor << "\n";
    std::ofstream(d / "device") << device << "\n";
    std::ofstream(d / "numa_node") << numa << "\n";
    std::ofstream(d / "local_cpulist") << cpus << "\n";
    if (driver != nullptr) {
      fs::create_directories(root / "bus/pci/drivers" / driver);
      fs::create_directory_symlink(root / "bus/pci/drivers" / driver, d / "driver");
    }
  };
  // Function 0 bound to xocl here: the driver, not the function number, marks the user function.
  dev("0000:65:00.0", "0x10ee", "0x5005", "1", "8-15", "xocl");
  dev("0000:65:00.1", "0x10ee", "0x5004", "1", "8-15", "xclmgmt");
  dev("0000:17:00.1", "0x10ee", "0x500d", "0", "0-7", nullptr);
  dev("0000:17:00.0", "0x10ee", "0x500c", "0", "0-7", nullptr);
  dev("0000:00:1f.0", "0x8086", "0xa1c1", "-1", "", nullptr);
  fs::create_directories(root / "devices/system/node/node0");
  fs::create_directories(root / "devices/system/node/node1");

  loc::Machine m = loc::discover_sysfs(root.string());
  EXPECT_EQ(m.xilinx.size(), 4u);
  EXPECT_EQ(m.numa_nodes, 2);
  auto cards = loc::group_cards(m.xilinx);
  ASSERT_EQ(cards.size(), 2u);
  EXPECT_EQ(cards[0].bdf, "0000:17:00.1");
  EXPECT_EQ(cards[0].numa_node, 0);
  EXPECT_EQ(cards[1].bdf, "0000:65:00.0");
  EXPECT_EQ(cards[1].mgmt_bdf, "0000:65:00.1");
  EXPECT_EQ(cards[1].driver, "xocl");
  EXPECT_EQ(cards[1].cpus, range(8, 15));
  fs::remove_all(root);
}

TEST(HwLocality, UnboundRanksSplitBlockwiseOverCards) {
  std::vector<loc::Card> cards = {card("a", 0, range(0, 3)), card("b", 1, range(4, 7))};
  auto all = range(0, 7);
  // 4 ranks, 2 cards: ranks 0,1 -> a; 2,3 -> b (launchers fill sockets in order).
  for (int r = 0; r < 4; ++r) EXPECT_EQ(loc::choose_card(cards, all, all, r, 4).index, static_cast<size_t>(r / 2));
  // Binding to the whole machine is no binding.
  EXPECT_EQ(loc::choose_card(cards, {}, all, 3, 4).index, 1u);
  // Fewer ranks than cards spread out too.
  std::vector<loc::Card> four = {card("a", 0, range(0, 1)), card("b", 0, range(0, 1)), card("c", 1, range(2, 3)),
                                 card("d", 1, range(2, 3))};
  EXPECT_EQ(loc::choose_card(four, {}, range(0, 3), 0, 2).index, 0u);
  EXPECT_EQ(loc::choose_card(four, {}, range(0, 3), 1, 2).index, 2u);
  EXPECT_THROW(loc::choose_card({}, {}, all, 0, 1), std::invalid_argument);
}

TEST(HwLocality, BoundRanksTakeTheNearestCard) {
  std::vector<loc::Card> cards = {card("a0", 0, range(0, 3)), card("a1", 0, range(0, 3)), card("b", 1, range(4, 7))};
  auto all = range(0, 7);
  // Bound to socket 1: the only card there, whatever the local rank.
  for (int r = 0; r < 4; ++r) EXPECT_EQ(loc::choose_card(cards, {5}, all, r, 4).index, 2u);
  // Bound to socket 0: spread over its two cards.
  EXPECT_EQ(loc::choose_card(cards, {1}, all, 0, 4).index, 0u);
  EXPECT_EQ(loc::choose_card(cards, {2}, all, 1, 4).index, 1u);
  auto c = loc::choose_card(cards, {1}, all, 2, 4);
  EXPECT_EQ(c.index, 0u);
  EXPECT_NE(c.reason.find("nearest"), std::string::npos) << c.reason;
  // Bound where no card is local: every card is a candidate.
  std::vector<loc::Card> far = {card("x", 1, range(4, 7)), card("y", 1, range(4, 7))};
  EXPECT_EQ(loc::choose_card(far, {0}, all, 1, 2).index, 1u);
}

TEST(HwLocality, SplitCoresGivesEachRankItsOwnBlock) {
  std::vector<std::vector<unsigned>> cores = {{0, 8}, {1, 9}, {2, 10}, {3, 11}};
  EXPECT_EQ(loc::split_cores(cores, 0, 2), (std::vector<unsigned>{0, 1, 8, 9}));
  EXPECT_EQ(loc::split_cores(cores, 1, 2), (std::vector<unsigned>{2, 3, 10, 11}));
  EXPECT_EQ(loc::split_cores(cores, 2, 4), (std::vector<unsigned>{2, 10}));
  // 3 ranks on 4 cores: blocks 0 | 1 | 2-3, no overlap, nothing left out.
  std::vector<unsigned> seen;
  for (int r = 0; r < 3; ++r) {
    auto s = loc::split_cores(cores, r, 3);
    EXPECT_FALSE(s.empty());
    seen.insert(seen.end(), s.begin(), s.end());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<unsigned>{0, 1, 2, 3, 8, 9, 10, 11}));
  // 8 ranks on 4 cores: neighbours share.
  EXPECT_EQ(loc::split_cores(cores, 0, 8), loc::split_cores(cores, 1, 8));
  EXPECT_NE(loc::split_cores(cores, 1, 8), loc::split_cores(cores, 2, 8));
  EXPECT_TRUE(loc::split_cores({}, 0, 1).empty());
}

TEST(HwLocality, SuggestCpusetRespectsTheLaunchersBinding) {
  loc::Machine m;
  m.cores = {{0}, {1}, {2}, {3}};
  m.bound = {0, 1, 2, 3};  // whole machine: split
  EXPECT_EQ(loc::suggest_cpuset(m, 1, 2), (std::vector<unsigned>{2, 3}));
  m.bound = {3};  // the launcher bound this rank: keep it
  EXPECT_EQ(loc::suggest_cpuset(m, 0, 2), (std::vector<unsigned>{3}));
  // This machine: something non-empty, within what we may use.
  auto mine = loc::suggest_cpuset(0, 1);
  EXPECT_FALSE(mine.empty());
}

TEST(HwLocality, LocalRankFromTheLauncher) {
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  ::unsetenv("MPI_LOCALRANKID");
  ::unsetenv("MPI_LOCALNRANKS");
  auto none = loc::local_rank_from_environment();
  EXPECT_EQ(none.rank, 0);
  EXPECT_EQ(none.size, 1);
  ::setenv("MPI_LOCALRANKID", "2", 1);
  ::setenv("MPI_LOCALNRANKS", "4", 1);
  auto hydra = loc::local_rank_from_environment();
  EXPECT_EQ(hydra.rank, 2);
  EXPECT_EQ(hydra.size, 4);
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "8", 1);
  auto ompi = loc::local_rank_from_environment();
  EXPECT_EQ(ompi.rank, 3);
  EXPECT_EQ(ompi.size, 8);
  EXPECT_EQ(ompi.source, "OMPI_COMM_WORLD_LOCAL_RANK");
  ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "junk", 1);  // ignored: next launcher's variables
  EXPECT_EQ(loc::local_rank_from_environment().rank, 2);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  ::unsetenv("MPI_LOCALRANKID");
  ::unsetenv("MPI_LOCALNRANKS");
}
