// SPDX-License-Identifier: Apache-2.0
//
// accl-info: what this installation of ACCL for MPI can do, in the spirit of
// ompi_info / ucx_info. Version and build features, the Alveo cards this host
// has and which one this rank would drive, the emulator's transports and
// capability word, and every ACCL_ setting with its value and meaning.
// Works without a card (and without XRT or the emulator built in).
#include <accl/abi.hpp>
#include <accl/config.hpp>
#include <accl_devices/devices.hpp>
#include <accl_hw/hw.hpp>
#include <accl_hw/sim.hpp>
#include <accl_hw/locality.hpp>
#include <accl_pmpi/settings.hpp>  // the PMPI layer's settings check (MPI-free)
#include <accl_pmpi/tuning.hpp>    // the file of ACCL_POLICY=auto

#if ACCL_INFO_HAVE_EMU
#include <accl_emu/emulator.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using namespace accl;

// Human output: "  key: value" under section titles. Parsable output
// (--parsable): one "section:key:value" line per fact, stable for scripts.
class Printer {
 public:
  explicit Printer(bool parsable) : parsable_(parsable) {}
  void section(const std::string& title, const std::string& tag) {
    tag_ = tag;
    if (!parsable_) std::printf("%s%s\n", first_ ? "" : "\n", title.c_str());
    first_ = false;
  }
  // `remark` is for people only ("(default)"); parsable output drops it.
  void item(const std::string& key, const std::string& value, const std::string& remark = "") {
    if (parsable_) {
      std::string k = key;  // keys are single words in parsable output
      for (auto& c : k)
        if (c == ' ') c = '_';
      std::printf("%s:%s:%s\n", tag_.c_str(), k.c_str(), value.c_str());
    } else {
      std::printf("  %-26s %s%s\n", (key + ":").c_str(), value.c_str(), remark.empty() ? "" : (" " + remark).c_str());
    }
  }
  void note(const std::string& text) {
    if (!parsable_) std::printf("    %s\n", text.c_str());
  }

 private:
  bool parsable_;
  bool first_ = true;
  std::string tag_;
};

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

std::string join(const std::vector<std::string>& v, const char* sep = " ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// HWID bits (public ACCL, reference §2.5).
std::string decode_hwid(uint32_t hwid) {
  static const char* stacks[] = {"UDP", "TCP", "RDMA", "stack 3"};
  std::vector<std::string> parts{std::string("stack ") + stacks[hwid & abi::kHwIdStackMask]};
  if (hwid & abi::kHwIdDma) parts.emplace_back("dma");
  if (hwid & abi::kHwIdArith) parts.emplace_back("arith");
  if (hwid & abi::kHwIdCompression) parts.emplace_back("compression");
  if (hwid & abi::kHwIdKernelStreams) parts.emplace_back("kernel-streams");
  if (hwid & abi::kHwIdDebug) parts.emplace_back("debug");
  if (hwid & abi::kHwIdExternalDma) parts.emplace_back("external-dma");
  char commit[16];
  std::snprintf(commit, sizeof(commit), "%06x", hwid >> 8);
  parts.push_back(std::string("commit ") + commit);
  return join(parts, ", ");
}

std::string decode_capabilities(uint32_t caps) {
  if (!(caps & abi::kCapValid)) return "none advertised (public firmware: SUM and MAX, eager only)";
  static const std::pair<uint32_t, const char*> bits[] = {
      {abi::kCapReduceMin, "reduce-min"}, {abi::kCapReduceProd, "reduce-prod"}, {abi::kCapRendezvous, "rendezvous"},
      {abi::kCapAlltoall, "alltoall"},    {abi::kCapBarrier, "barrier"},        {abi::kCapTagAnyRecv, "tag-any-recv"},
      {abi::kCapChaining, "chaining"},
      {abi::kCapInt8, "int8"},           {abi::kCapInt16, "int16"},            {abi::kCapUnsigned, "unsigned"},
      {abi::kCapReduceBitwise, "reduce-bitwise"}, {abi::kCapReduceLogical, "reduce-logical"},
      {abi::kCapReduceLoc, "reduce-minloc-maxloc"},
  };
  std::vector<std::string> parts;
  for (const auto& [bit, name] : bits)
    if (caps & bit) parts.emplace_back(name);
  return parts.empty() ? "valid, no optional features" : join(parts, ", ");
}

void print_build(Printer& p) {
  p.section("Build", "build");
  p.item("XRT backend", hw::built_with_xrt() ? "yes (XRT " + hw::xrt_version() + ")" : "no");
  p.item("hwloc", hw::built_with_hwloc() ? "yes (" + hw::hwloc_version() + ")" : "no (card discovery through sysfs)");
  p.item("simulator session",
         hw::built_with_sim() ? "yes (ACCL_DEVICE=sim)" : "no (built without ZeroMQ/nlohmann-json)");
#if ACCL_INFO_HAVE_EMU
  p.item("emulator", "yes");
#else
  p.item("emulator", "no");
#endif
}

void print_cards(Printer& p, const std::string& topology) {
  p.section("Cards", "cards");
  hw::locality::Machine m;
  try {
    m = hw::locality::discover(topology);
  } catch (const std::exception& e) {
    p.item("discovery", std::string("failed: ") + e.what());
    return;
  }
  size_t pus = 0;
  for (const auto& c : m.cores) pus += c.size();
  p.item("discovery", m.source);
  p.item("machine", std::to_string(m.numa_nodes) + " NUMA node(s), " + std::to_string(m.cores.size()) + " core(s), " +
                        std::to_string(pus) + " PU(s)");
  p.item("xilinx pci functions", std::to_string(m.xilinx.size()));
  for (size_t i = 0; i < m.xilinx.size(); ++i) {
    const auto& f = m.xilinx[i];
    char id[16];
    std::snprintf(id, sizeof(id), "%04x:%04x", f.vendor, f.device);
    p.item("function " + std::to_string(i), f.bdf + " [" + id + "] NUMA " + (f.numa_node < 0 ? "?" : std::to_string(f.numa_node)) +
                                    " cpus " + (f.cpus.empty() ? "?" : hw::locality::to_cpulist(f.cpus)) +
                                    (f.driver.empty() ? "" : " driver " + f.driver));
  }
  const auto cards = hw::locality::group_cards(m.xilinx);
  p.item("cards", std::to_string(cards.size()));
  for (size_t i = 0; i < cards.size(); ++i) {
    const auto& c = cards[i];
    char id[8];
    std::snprintf(id, sizeof(id), "%04x", c.device);
    p.item("card " + std::to_string(i), c.bdf + (c.mgmt_bdf.empty() ? "" : " (mgmt " + c.mgmt_bdf + ")") + " device " + id +
                                            " NUMA " + (c.numa_node < 0 ? "?" : std::to_string(c.numa_node)) + " cpus " +
                                            (c.cpus.empty() ? "?" : hw::locality::to_cpulist(c.cpus)));
  }

  const auto lr = hw::locality::local_rank_from_environment();
  p.item("local rank", std::to_string(lr.rank) + " of " + std::to_string(lr.size) + " (" + lr.source + ")");
  p.item("bound to", m.bound.empty() ? "unknown" : hw::locality::to_cpulist(m.bound));
  if (auto dev = config::get("ACCL_DEVICE_INDEX")) {
    try {
      auto t = hw::parse_card(*dev);
      p.item("card for this rank", (t.by_index ? "XRT index " + std::to_string(t.index) : t.bdf) + " (ACCL_DEVICE_INDEX)");
    } catch (const std::exception& e) {
      p.item("card for this rank", e.what());
    }
  } else if (cards.empty()) {
    p.item("card for this rank", "none");
  } else {
    std::vector<unsigned> all;
    for (const auto& c : m.cores) all.insert(all.end(), c.begin(), c.end());
    auto choice = hw::locality::choose_card(cards, m.bound, all, lr.rank, lr.size);
    p.item("card for this rank", cards[choice.index].bdf);
    p.note(choice.reason);
  }
  p.item("emulator cpuset", hw::locality::to_cpulist(hw::locality::suggest_cpuset(m, lr.rank, lr.size)));
}

#if ACCL_INFO_HAVE_EMU
// The firmware writes HWID and the capability word when it powers up, on its
// own thread: poll until the valid bit shows (or give up after a while).
void print_emulator(Printer& p) {
  p.section("Emulator", "emu");
  std::vector<std::string> available, missing;
  for (auto kind : {emu::TransportKind::inproc, emu::TransportKind::shm, emu::TransportKind::tcp, emu::TransportKind::udp}) {
    emu::EmuOptions o;
    o.transport = kind;
    try {
      auto dev = emu::create_device(o);
      available.push_back(emu::to_string(kind));
    } catch (const std::exception& e) {
      missing.push_back(emu::to_string(kind) + " (" + e.what() + ")");
    }
  }
  p.item("transports", available.empty() ? "none" : join(available));
  for (const auto& m : missing) p.note("unavailable: " + m);

  try {
    auto dev = emu::create_device(emu::options_from_environment());
    uint32_t caps = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!((caps = dev->read(abi::kCapabilitiesOffset)) & abi::kCapValid) &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const uint32_t hwid = dev->read(abi::kHwIdOffset);
    p.item("HWID", hex32(hwid));
    p.note(decode_hwid(hwid));
    p.item("capabilities", hex32(caps));
    p.note(decode_capabilities(caps));
  } catch (const std::exception& e) {
    p.item("device", std::string("cannot start an emulated CCLO: ") + e.what());
  }
}
#endif

// Every problem with the ACCL_ settings in the environment, as each layer's
// start-up check words it: first the table-driven check of every set
// variable (so all of them show, not only the first), then each layer's own
// rules. `warnings` gets the unknown names (typos).
std::vector<std::string> setting_problems(std::vector<std::string>& warnings) {
  std::vector<std::string> problems;
  auto note_problem = [&problems](const std::string& text) {
    if (std::find(problems.begin(), problems.end(), text) == problems.end()) problems.push_back(text);
  };
  for (const auto& s : config::settings()) {
    if (const char* v = std::getenv(s.name)) {
      try {
        config::check(s, v);
      } catch (const std::exception& e) {
        note_problem(e.what());
      }
    }
  }
  // The layers' own start-up checks (the same functions the layers run).
  // An MPI launcher tells how many ranks the job has; alone it is one.
  int world_size = 1;
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(var); v != nullptr && std::atoi(v) > 0) world_size = std::atoi(v);
  std::vector<std::function<void()>> layer_checks = {[] { config::validate(config::Layer::core); }};
  for (auto device_check : devices::settings_checks()) layer_checks.emplace_back(device_check);
  layer_checks.emplace_back([world_size] { pmpi::settings::validate(world_size); });
  for (const auto& check : layer_checks) {
    try {
      check();
    } catch (const std::exception& e) {
      note_problem(e.what());
    }
  }
  warnings = pmpi::settings::unknown_setting_warnings();
  return problems;
}

void print_settings(Printer& p) {
  p.section("Settings (environment)", "setting");
  for (const auto& s : config::settings()) {
    auto v = config::get(s.name);
    p.item(s.name, v ? *v : s.default_value, v ? "(set)" : *s.default_value ? "(default)" : "(default: empty)");
    p.note(s.meaning);
    if (const std::string allowed = config::allowed(s); !allowed.empty()) p.note("allowed: " + allowed);
  }
  // The file ACCL_POLICY=auto reads: where it is found (the shipped default
  // lives in the package or, from a build tree, in the sources).
  p.item("tuning file", pmpi::tuning::selected_path());
  try {
    p.note(std::to_string(pmpi::tuning::load(pmpi::tuning::selected_path()).rules.size()) + " rules");
  } catch (const std::exception& e) {
    p.note(e.what());
  }
  std::vector<std::string> warnings;
  const std::vector<std::string> problems = setting_problems(warnings);
  p.item("problems", problems.empty() ? "none" : std::to_string(problems.size()));
  for (size_t i = 0; i < problems.size(); ++i) p.item("problem " + std::to_string(i + 1), problems[i]);
  for (size_t i = 0; i < warnings.size(); ++i) p.item("warning " + std::to_string(i + 1), warnings[i]);
}

// --check-settings: the start-up validation alone; exit status 1 when a
// setting would stop ACCL.
int check_settings() {
  std::vector<std::string> warnings;
  const std::vector<std::string> problems = setting_problems(warnings);
  for (const auto& w : warnings) std::fprintf(stderr, "accl-info: warning: %s\n", w.c_str());
  for (const auto& e : problems) std::fprintf(stderr, "accl-info: error: %s\n", e.c_str());
  if (problems.empty()) std::printf("settings: ok\n");
  return problems.empty() ? 0 : 1;
}

// --settings-markdown: README.md's settings table, generated from the one
// table in core/src/config_table.cpp (docs-settings-table compares them).
void print_settings_markdown() {
  std::printf("| variable | default | allowed | meaning |\n| --- | --- | --- | --- |\n");
  for (const auto& s : config::settings()) {
    const std::string def = *s.default_value ? std::string("`") + s.default_value + "`" : "(empty)";
    std::string allowed = config::allowed(s);
    if (allowed.empty()) allowed = "text";
    std::printf("| `%s` | %s | %s | %s |\n", s.name, def.c_str(), allowed.c_str(), s.meaning);
  }
}

void usage(FILE* out) {
  std::fprintf(out,
               "usage: accl-info [options]\n"
               "  -p, --parsable       one section:key:value line per fact\n"
               "      --no-emu         do not start emulated CCLOs\n"
               "      --check-settings check the ACCL_ settings only; exit status 1 when one is bad\n"
               "      --settings-markdown  print the README's settings table\n"
               "      --topology FILE  use an hwloc XML topology instead of this machine\n"
               "  -h, --help           this text\n");
}

}  // namespace

int main(int argc, char** argv) {
  bool parsable = false, emu = true;
  std::string topology;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-p" || a == "--parsable") {
      parsable = true;
    } else if (a == "--no-emu") {
      emu = false;
    } else if (a == "--check-settings") {
      return check_settings();
    } else if (a == "--settings-markdown") {
      print_settings_markdown();
      return 0;
    } else if (a == "--topology" && i + 1 < argc) {
      topology = argv[++i];
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  try {
    Printer p(parsable);
    p.section(std::string("ACCL for MPI ") + ACCL_VERSION, "package");
    p.item("version", ACCL_VERSION);
    print_build(p);
    print_cards(p, topology);
#if ACCL_INFO_HAVE_EMU
    if (emu) print_emulator(p);
#else
    (void)emu;
#endif
    print_settings(p);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accl-info: %s\n", e.what());
    return 1;
  }
  return 0;
}
