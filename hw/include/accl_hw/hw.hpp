// SPDX-License-Identifier: Apache-2.0
//
// The XRT hardware backend: one accl::Device over an Alveo card running the
// ACCL CCLO xclbin. Which backend a process uses (ACCL_DEVICE) is decided by
// the device factory (devices/) or the application; this header only builds
// the xrt one.
#pragma once

#include <accl/device.hpp>
#include <accl/error.hpp>
#include <accl_hw/network.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace accl::hw {

// Everything the backend throws: a missing card, runtime, xclbin or kernel,
// a bad setting, a failed runtime call. The message names what is missing.
// `device` names the backend (the simulator-session device's SimError, sim.hpp).
class HwError : public Error {
 public:
  explicit HwError(const std::string& what, int rank = -1, std::string device = "xrt device")
      : Error(std::move(device), rank, what) {}
};

// Public ACCL's kernel names (accl_network_utils), instance 0.
inline constexpr const char* kDefaultCcloKernel = "ccl_offload:{ccl_offload_0}";
inline constexpr const char* kDefaultHostCtrlKernel = "hostctrl:{hostctrl_0_0}";
inline constexpr double kDefaultClockMhz = 250.0;

struct XrtOptions {
  std::string xclbin;  // required
  // "" = the card nearest to this rank (hw/include/accl_hw/locality.hpp);
  // digits = XRT device index; otherwise a PCI address ("0000:3b:00.1").
  std::string device;
  std::string cclo_kernel = kDefaultCcloKernel;
  std::string hostctrl_kernel = kDefaultHostCtrlKernel;
  // XRT memory group of each device bank; empty = the groups the CCLO's
  // memory ports are connected to in the xclbin.
  std::vector<uint32_t> memory_groups;
  double clock_mhz = kDefaultClockMhz;
  // This rank among the ranks of its host, for the nearest-card choice.
  int local_rank = 0;
  int local_size = 1;
  // hwloc XML topology to use instead of this machine's (tests, what-if runs).
  std::string topology_xml;
  // The card's network bring-up before the device is returned (network.hpp);
  // design none = configured already. network_plan_from_environment() fills
  // it from ACCL_HW_NETWORK for a rank of a job of known size.
  NetworkPlan network;
};

// ACCL_XCLBIN, ACCL_DEVICE_INDEX, ACCL_CCLO_KERNEL, ACCL_HOSTCTRL_KERNEL,
// ACCL_XRT_MEMORY_GROUPS, ACCL_CCLO_CLOCK_MHZ and the launcher's local rank
// (OMPI_COMM_WORLD_LOCAL_RANK/SIZE, MPI_LOCALRANKID/MPI_LOCALNRANKS).
// Throws HwError for malformed values (validate_settings first).
XrtOptions options_from_environment();

// The hw layer's start-up check of its ACCL_ settings (the hw rows of the
// settings table, the card and memory-group grammars), whether or not a card
// is opened: throws HwError "ACCL_X=value: ..." for the first bad one.
void validate_settings();

// Opens the card, loads the xclbin, finds both kernels, brings up the network
// when options.network asks for it (its outcome, the session id of each
// rank, lands in *network when given) and returns the device. Fails fast with
// HwError naming the first missing piece: card, xclbin, kernel, runtime,
// network step. Without XRT at build time it always throws.
std::unique_ptr<Device> create_xrt_device(const XrtOptions& options, NetworkResult* network = nullptr);

// Build facts for accl-info.
bool built_with_xrt();
std::string xrt_version();    // "2.13.0", or "" without XRT
bool built_with_hwloc();
std::string hwloc_version();  // "2.9.0", or ""

// --- pieces of create_xrt_device that need no runtime (tested directly) ---

// Which card to open.
struct CardTarget {
  bool by_index = false;
  unsigned index = 0;   // XRT device index when by_index
  std::string bdf;      // PCI address otherwise
  std::string reason;   // how it was chosen, for logs and accl-info
};
// From options.device, else the nearest card found by hwloc. Throws HwError
// "no Alveo card found (hwloc saw N Xilinx PCI devices)" when there is none.
CardTarget select_card(const XrtOptions& options);
// Parses an ACCL_DEVICE_INDEX value; `setting` names the source in errors.
CardTarget parse_card(const std::string& value, const std::string& setting = "ACCL_DEVICE_INDEX");
// The xclbin option is set and names a readable file.
void check_xclbin_file(const XrtOptions& options);

}  // namespace accl::hw
