// SPDX-License-Identifier: Apache-2.0
//
// Where the cards and cores are: Xilinx PCI functions with their NUMA node
// (hwloc), which card each MPI rank of a host should drive, and which cores a
// rank can use without competing with the other ranks of its host (for the
// emulator's threads). Discovery returns plain data; the choices are pure
// functions over it so they are testable with any topology.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace accl::hw::locality {

inline constexpr uint16_t kXilinxVendorId = 0x10ee;

struct PciFunction {
  std::string bdf;          // "0000:3b:00.1"
  uint16_t vendor = 0;
  uint16_t device = 0;
  int numa_node = -1;       // -1: unknown (no single NUMA node is local)
  std::vector<unsigned> cpus;  // PUs (OS indices) local to the device
  std::string driver;       // "xocl", "xclmgmt", ... when known (sysfs)
};

// One Alveo card: the PCI functions of one slot. Alveo shells expose a
// management function (PF0, xclmgmt) and a user function (PF1, xocl); XRT
// opens the user function.
struct Card {
  std::string bdf;       // user function: what XRT opens
  std::string mgmt_bdf;  // management function ("" if not seen)
  uint16_t device = 0;   // PCI device id of the user function
  int numa_node = -1;
  std::vector<unsigned> cpus;
  std::string driver;
};

struct Machine {
  std::vector<PciFunction> xilinx;           // every function with vendor 0x10ee
  std::vector<std::vector<unsigned>> cores;  // allowed PUs of each core, topology order
  std::vector<unsigned> bound;               // PUs this process may run on now ("" unknown)
  int numa_nodes = 0;
  std::string source;                        // "hwloc 2.9.0", "hwloc XML <file>", "sysfs <root>"
};

// This machine through hwloc (or an hwloc XML file). Without hwloc at build
// time, falls back to discover_sysfs("/sys").
Machine discover(const std::string& xml_path = "");
// Xilinx functions from a sysfs tree (<root>/bus/pci/devices/*), cores from
// the CPUs this process may use. Used without hwloc, and by tests on a fake tree.
Machine discover_sysfs(const std::string& root);

// Groups functions by slot (domain:bus:device) into cards, sorted by NUMA
// node then address. The user function is the one bound to xocl, else the
// highest function number of the slot.
std::vector<Card> group_cards(const std::vector<PciFunction>& functions);

// This process's rank among the ranks of its host, from the launcher:
// OMPI_COMM_WORLD_LOCAL_RANK/SIZE (Open MPI), MPI_LOCALRANKID/MPI_LOCALNRANKS
// (MPICH Hydra). {0, 1, "no launcher"} outside a launcher.
struct LocalRank {
  int rank = 0;
  int size = 1;
  std::string source;
};
LocalRank local_rank_from_environment();

struct CardChoice {
  size_t index = 0;    // into the cards vector
  std::string reason;  // one line for logs / accl-info
};
// The nearest card for one local rank. When this process is bound to a
// subset of the machine (by the launcher), the nearest set is the cards local
// to those PUs (all cards if none is); local ranks are spread round-robin over
// it. Unbound, local ranks are split blockwise over all cards (sorted by NUMA
// node), so neighbouring ranks -- which launchers place on neighbouring cores
// -- share a card and every card gets ranks. Throws std::invalid_argument for
// an empty card list.
CardChoice choose_card(const std::vector<Card>& cards, const std::vector<unsigned>& bound,
                       const std::vector<unsigned>& machine_cpus, int local_rank, int local_size);

// Cores for one of `local_size` ranks on a host: a contiguous block of cores
// (topology order, so blocks stay within a NUMA node where possible) with all
// their PUs. More ranks than cores share cores round-robin.
std::vector<unsigned> split_cores(const std::vector<std::vector<unsigned>>& cores, int local_rank, int local_size);

// What the emulator can pin a rank's threads to: the launcher's binding when
// it bound this process to part of the machine, else split_cores() over the
// machine's allowed cores.
std::vector<unsigned> suggest_cpuset(const Machine& machine, int local_rank, int local_size);
std::vector<unsigned> suggest_cpuset(int local_rank, int local_size);  // discover() of this machine

// "0-3,8,10-11" and back (the Linux cpulist format).
std::string to_cpulist(const std::vector<unsigned>& cpus);
std::vector<unsigned> parse_cpulist(const std::string& text);

}  // namespace accl::hw::locality
