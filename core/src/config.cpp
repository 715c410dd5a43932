// SPDX-License-Identifier: Apache-2.0
#include <accl/config.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>

namespace accl::config {

// The single table of settings. Keep README.md's table in sync (a test checks it).
const std::vector<Setting>& settings() {
  static const std::vector<Setting> table = {
      // core
      {"ACCL_LOG_LEVEL", "error", "log level: off, error, warn, info, debug, trace"},
      {"ACCL_TIMEOUT_MS", "10000", "device timeout for every call; a call that cannot finish ends in a timeout error"},
      {"ACCL_DEVICE", "emu", "device behind ACCL: emu (bundled emulator), xrt (Alveo card), none (PMPI: run natively)"},
      {"ACCL_RX_BUFFER_COUNT", "16", "number of RX spare buffers (PMPI layer and accl-bench-core)"},
      {"ACCL_RX_BUFFER_SIZE", "65536", "bytes per RX spare buffer (PMPI layer and accl-bench-core)"},
      {"ACCL_MAX_EAGER_SIZE", "65536", "largest message sent eagerly in bytes, larger ones use rendezvous (PMPI layer and accl-bench-core); when unset, 65536 or ACCL_RX_BUFFER_COUNT x ACCL_RX_BUFFER_SIZE if that is smaller; PMPI: all ranks use the smallest value any rank has"},
      {"ACCL_MAX_RENDEZVOUS_SIZE", "4194304", "bytes of each scratch buffer used by collectives; 0 = eager only"},
      // emulator
      {"ACCL_EMU_TRANSPORT", "auto", "emulator transport: auto (in-process, else shm on one host, else tcp), inproc, shm, tcp, udp"},
      {"ACCL_EMU_BIND_ADDRESS", "127.0.0.1", "address the emulated CCLO listens on (never all interfaces by default); 0.0.0.0: every interface, and peers know the CCLO by the host's first non-loopback IPv4 address"},
      {"ACCL_EMU_OVERFLOW_BYTES", "268435456", "bytes of unexpected eager data the emulator keeps when all RX buffers are full; pages become resident as data first needs them; when the store empties after a burst deeper than 8 MiB, the pages beyond the first 8 MiB are released; a message that finds it full is discarded and its receive fails"},
      {"ACCL_EMU_SHM_DIRECT_BYTES", "", "smallest rendezvous payload the shm transport writes straight into the receiving process's buffer (process_vm_writev: one copy instead of two through a ring); 0 = never; empty = 262144 where a 1 MiB process_vm_writev takes at most twice as long as memcpy (measured once per process), else never"},
      {"ACCL_EMU_POLL_LEASE_US", "", "how long after a host thread's last poll the shm transport's reader threads leave incoming messages to it before they take over; empty = 1000, or 10000 when the host has more ACCL processes than cores (a polling thread is then preempted for whole scheduler slices, and readers woken meanwhile find no free core; the process count is known under the PMPI layer, cores = all the host's)"},
      {"ACCL_EMU_SPIN_US", "50", "how long emulator threads spin before they block"},
      {"ACCL_EMU_DRIVE_SPIN_US", "300", "how long a host thread waiting for a call keeps driving its emulated CCLO without progress before it blocks, when the host has at most one ACCL process per core (else ACCL_EMU_SPIN_US)"},
      {"ACCL_EMU_YIELD_US", "1000", "how long a host thread waiting for a call keeps driving its emulated CCLO without progress, yielding the core between polls, before it blocks, when the host has more ACCL processes than cores (0: no yielding, block after ACCL_EMU_SPIN_US)"},
      {"ACCL_EMU_FAULTS", "", "test-only network faults, comma list of key=value: seed=N, drop/dup/reorder/corrupt=probability per message, delay_us=N (random 0..N per message), slow_us=N (fixed per message), peer=ip:port / from=ip:port (only links to / out of that CCLO); UDP turns drop/dup/reorder/corrupt into datagram faults it repairs, other transports report them (corrupt goes undetected there); empty = off"},
      {"ACCL_JOB_SECRET", "", "per-job secret emulated CCLOs require from peers (the PMPI layer generates one)"},
      // hardware
      {"ACCL_XCLBIN", "", "xclbin to load for ACCL_DEVICE=xrt"},
      {"ACCL_DEVICE_INDEX", "", "Alveo card for ACCL_DEVICE=xrt: XRT index or PCI address (0000:3b:00.1); default: the card nearest to this rank"},
      {"ACCL_CCLO_KERNEL", "ccl_offload:{ccl_offload_0}", "name of the CCLO IP in the xclbin"},
      {"ACCL_HOSTCTRL_KERNEL", "hostctrl:{hostctrl_0_0}", "name of the host-controller kernel in the xclbin"},
      {"ACCL_XRT_MEMORY_GROUPS", "", "XRT memory group of each device bank, comma list (default: the banks the CCLO's memory ports reach)"},
      {"ACCL_CCLO_CLOCK_MHZ", "250", "CCLO clock of the card in MHz: converts its perf counter (cycles) to call durations"},
      // PMPI layer
      {"ACCL_OFFLOAD", "on", "PMPI: on = offload eligible calls to ACCL, off = pure interposition"},
      {"ACCL_OFFLOAD_CALLS", "", "PMPI: comma list of calls to offload (default all); ^ negates, e.g. ^send,recv"},
      {"ACCL_FALLBACK", "silent", "PMPI: silent, warn (one line per fallback), error (abort when a call would fall back)"},
      {"ACCL_TRACE", "0", "PMPI: 1 = one line per call: offloaded or fallback and why"},
      {"ACCL_STATS", "0", "PMPI: 1 = table at MPI_Finalize: calls, bytes, offloaded vs fallback by reason, time"},
      {"ACCL_MIN_BYTES", "0", "PMPI: calls moving fewer bytes run natively (per call: ACCL_<CALL>_MIN_BYTES)"},
      {"ACCL_MAX_BYTES", "0", "PMPI: calls moving more bytes run natively; 0 = no limit (per call: ACCL_<CALL>_MAX_BYTES)"},
      {"ACCL_P2P_STAGING_BYTES", "67108864", "PMPI: bytes of large blocking-send payloads copied aside so MPI_Send returns before the receiver matches; beyond it MPI_Send waits"},
      {"ACCL_PMPI_TIMEOUT_MS", "", "PMPI: device timeout of offloaded MPI calls; empty = ACCL_TIMEOUT_MS if that is set, else 300000 (MPI ranks may enter a collective minutes apart)"},
      {"ACCL_BUFFER_CACHE", "64", "PMPI: ACCL wrappers of user buffers kept for reuse (no per-call allocation); 0 = wrap every call"},
  };
  return table;
}

namespace {
const Setting& find(const char* name) {
  for (const auto& s : settings())
    if (std::string_view(s.name) == name) return s;
  // Per-call PMPI thresholds are a family: ACCL_<CALL>_MIN_BYTES / _MAX_BYTES.
  static thread_local Setting family{nullptr, "0", "per-call threshold"};
  std::string_view n(name);
  if (n.starts_with("ACCL_") && (n.ends_with("_MIN_BYTES") || n.ends_with("_MAX_BYTES"))) {
    family.name = name;
    return family;
  }
  throw std::invalid_argument(std::string("unknown ACCL setting ") + name);
}
}  // namespace

std::optional<std::string> get(const char* name) {
  (void)find(name);
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::string get_string(const char* name) {
  auto v = get(name);
  return v ? *v : std::string(find(name).default_value);
}

int64_t get_int(const char* name) {
  std::string v = get_string(name);
  if (v.empty()) return 0;
  size_t used = 0;
  int64_t out = 0;
  try {
    out = std::stoll(v, &used, 0);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size()) throw std::invalid_argument(std::string(name) + "=" + v + " is not an integer");
  return out;
}

bool get_bool(const char* name) {
  std::string v = get_string(name);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "1" || v == "on" || v == "yes" || v == "true") return true;
  if (v == "0" || v == "off" || v == "no" || v == "false" || v.empty()) return false;
  throw std::invalid_argument(std::string(name) + "=" + v + " is not a boolean (use 1/0, on/off)");
}

std::chrono::milliseconds get_ms(const char* name) { return std::chrono::milliseconds(get_int(name)); }

uint64_t max_eager_size(uint64_t rx_buffer_count, uint64_t rx_buffer_size) {
  const int64_t value = get_int("ACCL_MAX_EAGER_SIZE");
  if (get("ACCL_MAX_EAGER_SIZE")) return static_cast<uint64_t>(value);  // the firmware judges a set value
  // The firmware refuses an eager size its RX buffers cannot hold at once;
  // smaller buffers than the defaults must not turn the default into an error.
  return std::min(static_cast<uint64_t>(value), rx_buffer_count * rx_buffer_size);
}

}  // namespace accl::config
