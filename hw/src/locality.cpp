// SPDX-License-Identifier: Apache-2.0
#include <accl_hw/hw.hpp>
#include <accl_hw/locality.hpp>

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <system_error>

#if ACCL_HW_HAVE_HWLOC
#include <hwloc.h>
#endif

namespace accl::hw::locality {
namespace fs = std::filesystem;

namespace {

std::string read_first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

// Name of the driver a sysfs PCI device is bound to ("" if none or unknown).
std::string sysfs_driver(const fs::path& device_dir) {
  std::error_code ec;
  fs::path target = fs::read_symlink(device_dir / "driver", ec);
  return ec ? std::string() : target.filename().string();
}

// CPUs this process may run on (sched_getaffinity), ascending.
std::vector<unsigned> affinity_cpus() {
  std::vector<unsigned> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::vector<unsigned> intersect(const std::vector<unsigned>& a, const std::vector<unsigned>& b) {
  std::vector<unsigned> sa(a), sb(b), out;
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  std::set_intersection(sa.begin(), sa.end(), sb.begin(), sb.end(), std::back_inserter(out));
  return out;
}

std::string format_bdf(unsigned domain, unsigned bus, unsigned dev, unsigned func) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", domain, bus, dev, func);
  return buf;
}

// "0000:3b:00" for "0000:3b:00.1": functions of one slot belong to one card.
std::string slot_of(const std::string& bdf) {
  auto dot = bdf.rfind('.');
  return dot == std::string::npos ? bdf : bdf.substr(0, dot);
}
unsigned function_of(const std::string& bdf) {
  auto dot = bdf.rfind('.');
  return dot == std::string::npos ? 0u : static_cast<unsigned>(std::strtoul(bdf.c_str() + dot + 1, nullptr, 16));
}

#if ACCL_HW_HAVE_HWLOC
std::vector<unsigned> bitmap_to_vector(hwloc_const_bitmap_t set) {
  std::vector<unsigned> out;
  if (set == nullptr || hwloc_bitmap_iszero(set)) return out;
  if (hwloc_bitmap_weight(set) < 0) return out;  // infinite set: never for cpusets of real objects
  int i = -1;
  while ((i = hwloc_bitmap_next(set, i)) >= 0) out.push_back(static_cast<unsigned>(i));
  return out;
}

// Owns an hwloc topology for the duration of one discovery.
struct Topology {
  hwloc_topology_t t = nullptr;
  Topology() {
    if (hwloc_topology_init(&t) != 0) throw HwError("hwloc: cannot initialize a topology");
  }
  ~Topology() { hwloc_topology_destroy(t); }
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
};

Machine discover_hwloc(const std::string& xml_path) {
  Topology topo;
  // PCI devices are dropped by hwloc's default filter; cards are what we need.
  hwloc_topology_set_io_types_filter(topo.t, HWLOC_TYPE_FILTER_KEEP_ALL);
  Machine m;
  m.source = "hwloc " ACCL_HW_HWLOC_VERSION;
  if (!xml_path.empty()) {
    if (hwloc_topology_set_xml(topo.t, xml_path.c_str()) != 0)
      throw HwError("hwloc: cannot read topology XML " + xml_path);
    m.source += " (XML " + xml_path + ")";
  } else if (const char* env = std::getenv("HWLOC_XMLFILE"); env != nullptr && *env != '\0') {
    m.source += std::string(" (HWLOC_XMLFILE ") + env + ")";  // hwloc honours it in load()
  }
  if (hwloc_topology_load(topo.t) != 0) throw HwError("hwloc: cannot load the topology" +
                                                      (xml_path.empty() ? std::string() : " from " + xml_path));
  const bool this_system = hwloc_topology_is_thissystem(topo.t) != 0;

  for (hwloc_obj_t o = hwloc_get_next_pcidev(topo.t, nullptr); o != nullptr; o = hwloc_get_next_pcidev(topo.t, o)) {
    const auto& pci = o->attr->pcidev;
    if (pci.vendor_id != kXilinxVendorId) continue;
    PciFunction f;
    f.bdf = format_bdf(pci.domain, pci.bus, pci.dev, pci.func);
    f.vendor = pci.vendor_id;
    f.device = pci.device_id;
    // I/O objects have no cpuset: their locality is the first CPU-side ancestor.
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo.t, o);
    if (anc != nullptr) {
      f.cpus = bitmap_to_vector(anc->cpuset);
      if (anc->nodeset != nullptr && hwloc_bitmap_weight(anc->nodeset) == 1)
        f.numa_node = hwloc_bitmap_first(anc->nodeset);
    }
    if (this_system) f.driver = sysfs_driver(fs::path("/sys/bus/pci/devices") / f.bdf);
    m.xilinx.push_back(std::move(f));
  }

  // Address order, like lspci and XRT's device numbering.
  std::sort(m.xilinx.begin(), m.xilinx.end(), [](const auto& a, const auto& b) { return a.bdf < b.bdf; });

  for (hwloc_obj_t c = hwloc_get_next_obj_by_type(topo.t, HWLOC_OBJ_CORE, nullptr); c != nullptr;
       c = hwloc_get_next_obj_by_type(topo.t, HWLOC_OBJ_CORE, c)) {
    auto pus = bitmap_to_vector(c->cpuset);
    if (!pus.empty()) m.cores.push_back(std::move(pus));
  }
  if (m.cores.empty()) {  // topologies without core objects: every PU is a core
    for (hwloc_obj_t p = hwloc_get_next_obj_by_type(topo.t, HWLOC_OBJ_PU, nullptr); p != nullptr;
         p = hwloc_get_next_obj_by_type(topo.t, HWLOC_OBJ_PU, p))
      m.cores.push_back({p->os_index});
  }
  m.numa_nodes = hwloc_get_nbobjs_by_type(topo.t, HWLOC_OBJ_NUMANODE);

  // The binding only means something for the machine we run on.
  if (this_system) {
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (hwloc_get_cpubind(topo.t, set, HWLOC_CPUBIND_PROCESS) == 0 ||
        hwloc_get_cpubind(topo.t, set, HWLOC_CPUBIND_THREAD) == 0)
      m.bound = bitmap_to_vector(set);
    hwloc_bitmap_free(set);
  }
  return m;
}
#endif

}  // namespace

Machine discover(const std::string& xml_path) {
#if ACCL_HW_HAVE_HWLOC
  return discover_hwloc(xml_path);
#else
  if (!xml_path.empty()) throw HwError("cannot read topology XML " + xml_path + ": built without hwloc");
  return discover_sysfs("/sys");
#endif
}

Machine discover_sysfs(const std::string& root) {
  Machine m;
  m.source = "sysfs " + root;
  std::error_code ec;
  fs::path devices = fs::path(root) / "bus/pci/devices";
  for (const auto& entry : fs::directory_iterator(devices, ec)) {
    const fs::path dir = entry.path();
    auto hex = [&](const char* file) { return std::strtoul(read_first_line(dir / file).c_str(), nullptr, 16); };
    if (hex("vendor") != kXilinxVendorId) continue;
    PciFunction f;
    f.bdf = dir.filename().string();
    f.vendor = kXilinxVendorId;
    f.device = static_cast<uint16_t>(hex("device"));
    std::string numa = read_first_line(dir / "numa_node");
    f.numa_node = numa.empty() ? -1 : std::atoi(numa.c_str());
    try {
      f.cpus = parse_cpulist(read_first_line(dir / "local_cpulist"));
    } catch (const std::invalid_argument&) {
      f.cpus.clear();  // unreadable locality: the card is simply "not near" anything
    }
    f.driver = sysfs_driver(dir);
    m.xilinx.push_back(std::move(f));
  }
  std::sort(m.xilinx.begin(), m.xilinx.end(), [](const auto& a, const auto& b) { return a.bdf < b.bdf; });
  // Without hwloc we know no core structure: each allowed CPU counts as a core.
  m.bound = affinity_cpus();
  for (unsigned c : m.bound) m.cores.push_back({c});
  for (const auto& entry : fs::directory_iterator(fs::path(root) / "devices/system/node", ec))
    if (entry.path().filename().string().starts_with("node")) ++m.numa_nodes;
  return m;
}

std::vector<Card> group_cards(const std::vector<PciFunction>& functions) {
  std::map<std::string, std::vector<const PciFunction*>> slots;
  for (const auto& f : functions) slots[slot_of(f.bdf)].push_back(&f);
  std::vector<Card> cards;
  for (auto& [slot, fns] : slots) {
    const PciFunction* user = nullptr;
    for (const auto* f : fns)
      if (f->driver == "xocl") user = f;
    if (user == nullptr)  // driver unknown (XML topology, unbound card): Alveo's user PF is the last one
      user = *std::max_element(fns.begin(), fns.end(),
                               [](const auto* a, const auto* b) { return function_of(a->bdf) < function_of(b->bdf); });
    const PciFunction* mgmt = nullptr;
    for (const auto* f : fns)
      if (f != user && (mgmt == nullptr || f->driver == "xclmgmt" || function_of(f->bdf) < function_of(mgmt->bdf)))
        mgmt = f;
    Card c;
    c.bdf = user->bdf;
    c.mgmt_bdf = mgmt != nullptr ? mgmt->bdf : "";
    c.device = user->device;
    c.numa_node = user->numa_node >= 0 || mgmt == nullptr ? user->numa_node : mgmt->numa_node;
    c.cpus = !user->cpus.empty() || mgmt == nullptr ? user->cpus : mgmt->cpus;
    c.driver = user->driver;
    cards.push_back(std::move(c));
  }
  // Unknown NUMA nodes sort last so "block r of n" keeps NUMA-local cards together.
  std::sort(cards.begin(), cards.end(), [](const Card& a, const Card& b) {
    unsigned na = static_cast<unsigned>(a.numa_node), nb = static_cast<unsigned>(b.numa_node);
    return na != nb ? na < nb : a.bdf < b.bdf;
  });
  return cards;
}

LocalRank local_rank_from_environment() {
  static const std::pair<const char*, const char*> sources[] = {
      {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
  };
  auto parse = [](const char* name, int& out) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return false;
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (*end != '\0' || x < 0 || x > 1 << 20) return false;
    out = static_cast<int>(x);
    return true;
  };
  for (const auto& [rank_var, size_var] : sources) {
    LocalRank lr;
    if (!parse(rank_var, lr.rank)) continue;
    if (!parse(size_var, lr.size) || lr.size <= lr.rank) lr.size = lr.rank + 1;
    lr.source = rank_var;
    return lr;
  }
  return LocalRank{0, 1, "no launcher"};
}

CardChoice choose_card(const std::vector<Card>& cards, const std::vector<unsigned>& bound,
                       const std::vector<unsigned>& machine_cpus, int local_rank, int local_size) {
  if (cards.empty()) throw std::invalid_argument("choose_card: no cards");
  const size_t size = static_cast<size_t>(std::max(local_size, 1));
  const size_t rank = static_cast<size_t>(std::max(local_rank, 0)) % size;
  const std::string who = "local rank " + std::to_string(rank) + " of " + std::to_string(size);
  CardChoice choice;

  const bool bound_to_part = !bound.empty() && !machine_cpus.empty() && bound.size() < machine_cpus.size();
  if (bound_to_part) {
    size_t best = 0;
    std::vector<size_t> overlap(cards.size());
    for (size_t i = 0; i < cards.size(); ++i) {
      overlap[i] = intersect(cards[i].cpus, bound).size();
      best = std::max(best, overlap[i]);
    }
    std::vector<size_t> nearest;
    for (size_t i = 0; i < cards.size(); ++i)
      if (overlap[i] == best) nearest.push_back(i);  // best == 0: every card is equally far
    choice.index = nearest[rank % nearest.size()];
    choice.reason = (best > 0 ? "nearest to this rank's PUs " : "no card near this rank's PUs ") + to_cpulist(bound) +
                    " (" + std::to_string(nearest.size()) + " candidate card(s)), " + who;
    return choice;
  }
  // Unbound: blockwise, so rank r of s takes card floor(r * n / s).
  choice.index = rank * cards.size() / size;
  choice.reason = "process not bound to a part of the machine; " + who + " takes card " +
                  std::to_string(choice.index) + " of " + std::to_string(cards.size());
  return choice;
}

std::vector<unsigned> split_cores(const std::vector<std::vector<unsigned>>& cores, int local_rank, int local_size) {
  std::vector<unsigned> out;
  if (cores.empty()) return out;
  const size_t size = static_cast<size_t>(std::max(local_size, 1));
  const size_t rank = static_cast<size_t>(std::max(local_rank, 0)) % size;
  const size_t n = cores.size();
  size_t first = rank * n / size;
  size_t last = (rank + 1) * n / size;
  if (last == first) last = first + 1;  // more ranks than cores: neighbouring ranks share one core
  for (size_t i = first; i < last; ++i) out.insert(out.end(), cores[i].begin(), cores[i].end());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<unsigned> suggest_cpuset(const Machine& machine, int local_rank, int local_size) {
  size_t all = 0;
  for (const auto& c : machine.cores) all += c.size();
  // A launcher that bound this rank to part of the machine already chose its cores.
  if (!machine.bound.empty() && machine.bound.size() < all) {
    std::vector<unsigned> b = machine.bound;
    std::sort(b.begin(), b.end());
    return b;
  }
  return split_cores(machine.cores, local_rank, local_size);
}

std::vector<unsigned> suggest_cpuset(int local_rank, int local_size) {
  return suggest_cpuset(discover(), local_rank, local_size);
}

std::string to_cpulist(const std::vector<unsigned>& cpus) {
  std::vector<unsigned> s(cpus);
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t j = i;
    while (j + 1 < s.size() && s[j + 1] == s[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(s[i]);
    if (j > i) out += '-' + std::to_string(s[j]);
    i = j + 1;
  }
  return out;
}

std::vector<unsigned> parse_cpulist(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  std::vector<unsigned> out;
  size_t pos = 0;
  auto fail = [&]() { return std::invalid_argument("not a cpu list: '" + text + "'"); };
  auto number = [&]() {
    size_t start = pos;
    unsigned long x = 0;
    while (pos < t.size() && t[pos] >= '0' && t[pos] <= '9' && x <= 1u << 20)
      x = x * 10 + static_cast<unsigned>(t[pos++] - '0');
    if (pos == start || x > 1u << 20) throw fail();
    return static_cast<unsigned>(x);
  };
  while (pos < t.size()) {
    unsigned a = number();
    unsigned b = a;
    if (pos < t.size() && t[pos] == '-') {
      ++pos;
      b = number();
      if (b < a) throw fail();
    }
    for (unsigned c = a; c <= b; ++c) out.push_back(c);
    if (pos < t.size()) {
      if (t[pos] != ',' || pos + 1 == t.size()) throw fail();
      ++pos;
    }
  }
  return out;
}

}  // namespace accl::hw::locality
