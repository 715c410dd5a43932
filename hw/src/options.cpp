// SPDX-License-Identifier: Apache-2.0
//
// XrtOptions from the environment and the runtime-free steps of opening a
// card: which card, and whether the xclbin setting is usable.
#include <accl/config.hpp>
#include <accl_hw/hw.hpp>
#include <accl_hw/locality.hpp>
#include <accl_hw/sim.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace accl::hw {
namespace {

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\n");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\n");
  return s.substr(a, b - a + 1);
}

bool all_hex(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!std::isxdigit(c)) return false;
  return true;
}

std::vector<uint32_t> parse_groups(const std::string& value) {
  std::vector<uint32_t> out;
  size_t pos = 0;
  while (pos <= value.size()) {
    size_t comma = value.find(',', pos);
    std::string item = trim(value.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    char* end = nullptr;
    errno = 0;
    unsigned long g = item.empty() ? 0 : std::strtoul(item.c_str(), &end, 0);
    if (item.empty() || *end != '\0' || errno != 0 || g > 0xFFFFu)
      throw HwError("ACCL_XRT_MEMORY_GROUPS=" + value + ": not a comma list of XRT memory group ids (e.g. 0,1)");
    out.push_back(static_cast<uint32_t>(g));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace

CardTarget parse_card(const std::string& raw, const std::string& setting) {
  const std::string value = trim(raw);
  CardTarget t;
  t.reason = setting + "=" + value;
  if (!value.empty() && value.find_first_not_of("0123456789") == std::string::npos && value.size() <= 6) {
    t.by_index = true;
    t.index = static_cast<unsigned>(std::stoul(value));
    return t;
  }
  // PCI address: [domain:]bus:device.function, hex.
  std::string v = value;
  if (std::count(v.begin(), v.end(), ':') == 1) v = "0000:" + v;
  const bool bdf = v.size() == 12 && v[4] == ':' && v[7] == ':' && v[10] == '.' && all_hex(v.substr(0, 4)) &&
                   all_hex(v.substr(5, 2)) && all_hex(v.substr(8, 2)) && v[11] >= '0' && v[11] <= '7';
  if (!bdf)
    throw HwError(setting + "=" + raw + ": not a card index or PCI address (e.g. 0 or 0000:3b:00.1)");
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  t.bdf = v;
  return t;
}

void validate_settings() {
  try {
    config::validate(config::Layer::hw);
  } catch (const config::SettingError& e) {
    throw HwError(e.what());  // every hw failure is an accl::Error
  }
  if (auto dev = config::get("ACCL_DEVICE_INDEX")) (void)parse_card(*dev);
  if (auto groups = config::get("ACCL_XRT_MEMORY_GROUPS")) (void)parse_groups(*groups);
  if (auto address = config::get("ACCL_SIM_ADDRESS")) (void)parse_sim_address(*address);
}

XrtOptions options_from_environment() {
  validate_settings();
  XrtOptions o;
  o.xclbin = config::get_string("ACCL_XCLBIN");
  o.device = trim(config::get_string("ACCL_DEVICE_INDEX"));
  o.cclo_kernel = trim(config::get_string("ACCL_CCLO_KERNEL"));
  o.hostctrl_kernel = trim(config::get_string("ACCL_HOSTCTRL_KERNEL"));
  if (auto groups = config::get("ACCL_XRT_MEMORY_GROUPS")) o.memory_groups = parse_groups(*groups);
  o.clock_mhz = config::get_real("ACCL_CCLO_CLOCK_MHZ");
  auto lr = locality::local_rank_from_environment();
  o.local_rank = lr.rank;
  o.local_size = lr.size;
  return o;
}

CardTarget select_card(const XrtOptions& options) {
  if (!options.device.empty()) return parse_card(options.device);
  locality::Machine m = locality::discover(options.topology_xml);
  auto cards = locality::group_cards(m.xilinx);
  if (cards.empty()) {
    const std::string seer = m.source.starts_with("hwloc") ? "hwloc" : m.source;
    throw HwError("ACCL_DEVICE=xrt: no Alveo card found (" + seer + " saw " + std::to_string(m.xilinx.size()) +
                  " Xilinx PCI devices); set ACCL_DEVICE_INDEX to open a card by XRT index or PCI address");
  }
  std::vector<unsigned> all;
  for (const auto& core : m.cores) all.insert(all.end(), core.begin(), core.end());
  auto choice = locality::choose_card(cards, m.bound, all, options.local_rank, options.local_size);
  CardTarget t;
  t.bdf = cards[choice.index].bdf;
  t.reason = choice.reason;
  return t;
}

void check_xclbin_file(const XrtOptions& options) {
  if (options.xclbin.empty())
    throw HwError("ACCL_DEVICE=xrt: ACCL_XCLBIN not set (path of the xclbin holding the CCLO and hostctrl kernels)");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(options.xclbin, ec))
    throw HwError("ACCL_DEVICE=xrt: ACCL_XCLBIN=" + options.xclbin + ": " +
                  (std::filesystem::exists(options.xclbin, ec) ? "not a regular file" : "no such file"));
  std::ifstream in(options.xclbin, std::ios::binary);
  if (!in) throw HwError("ACCL_DEVICE=xrt: ACCL_XCLBIN=" + options.xclbin + ": cannot read (" + std::strerror(errno) + ")");
}

bool built_with_hwloc() { return ACCL_HW_HAVE_HWLOC != 0; }

std::string hwloc_version() {
#if ACCL_HW_HAVE_HWLOC
  return ACCL_HW_HWLOC_VERSION;
#else
  return "";
#endif
}

}  // namespace accl::hw
