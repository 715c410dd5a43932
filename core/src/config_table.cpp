// SPDX-License-Identifier: Apache-2.0
//
// The one table of ACCL_ settings: name, owning layer, type, allowed values,
// default and meaning. README.md's settings table is generated from it
// (`accl-info --settings-markdown`; the docs-settings-table test fails when
// they differ), and every layer validates its rows at start-up from it.
#include <accl/config.hpp>

#include <cstdint>

namespace accl::config {
namespace {

// The device counts call timeouts in microseconds in 32 bits (~71 minutes).
constexpr int64_t kMaxTimeoutMs = int64_t{0xFFFFFFFF} / 1000;
// Message size thresholds travel to the CCLO in 32-bit registers.
constexpr int64_t kMax32 = int64_t{0xFFFFFFFF};
// The narrowest thing the CCLO moves is one 64-byte datapath word: smaller
// RX buffers, eager limits or rendezvous buffers cannot hold one.
constexpr int64_t kDatapathWord = 64;
constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kTiB = int64_t{1} << 40;
// Waits in microseconds: up to an hour (tests hold a reader or a yielding host thread for seconds).
constexpr int64_t kHourUs = int64_t{3600} * 1000 * 1000;

Setting text(const char* name, Layer layer, const char* def, const char* meaning) {
  Setting s;
  s.name = name;
  s.layer = layer;
  s.kind = Kind::text;
  s.default_value = def;
  s.meaning = meaning;
  return s;
}

Setting choice(const char* name, Layer layer, const char* def, const char* words, const char* meaning) {
  Setting s = text(name, layer, def, meaning);
  s.kind = Kind::choice;
  s.choices = words;
  return s;
}

Setting boolean(const char* name, Layer layer, const char* def, const char* meaning) {
  Setting s = text(name, layer, def, meaning);
  s.kind = Kind::boolean;
  return s;
}

Setting integer(const char* name, Layer layer, const char* def, int64_t min, int64_t max, const char* unit,
                const char* meaning) {
  Setting s = text(name, layer, def, meaning);
  s.kind = Kind::integer;
  s.min = min;
  s.max = max;
  s.unit = unit;
  return s;
}

// An integer whose 0 switches something off, below an otherwise higher minimum.
Setting integer_or_off(const char* name, Layer layer, const char* def, int64_t min, int64_t max, const char* unit,
                       const char* meaning) {
  Setting s = integer(name, layer, def, min, max, unit, meaning);
  s.zero_allowed = true;
  return s;
}

Setting real(const char* name, Layer layer, const char* def, int64_t min, int64_t max, const char* unit,
             const char* meaning) {
  Setting s = integer(name, layer, def, min, max, unit, meaning);
  s.kind = Kind::real;
  return s;
}

std::vector<Setting> make_table() {
  const Layer core = Layer::core, emu = Layer::emu, hw = Layer::hw, pmpi = Layer::pmpi;
  return {
      // core
      choice("ACCL_LOG_LEVEL", core, "error", "off,error,warn,info,debug,trace", "log level"),
      integer("ACCL_TIMEOUT_MS", core, "10000", 1, kMaxTimeoutMs, "ms",
              "device timeout for every call; a call that cannot finish ends in a timeout error"),
      choice("ACCL_DEVICE", core, "emu", "emu,xrt,sim,none",
             "device behind ACCL: emu (bundled emulator), xrt (Alveo card), sim (a public ACCL simulation "
             "session at ACCL_SIM_ADDRESS), none (PMPI: run natively)"),
      integer("ACCL_RX_BUFFER_COUNT", core, "16", 1, 256, "",
              "number of RX spare buffers (PMPI layer and accl-bench-core)"),
      integer("ACCL_RX_BUFFER_SIZE", core, "65536", kDatapathWord, kGiB, "bytes",
              "bytes per RX spare buffer (PMPI layer and accl-bench-core)"),
      integer("ACCL_MAX_EAGER_SIZE", core, "65536", kDatapathWord, kMax32, "bytes",
              "largest message sent eagerly in bytes, larger ones use rendezvous (PMPI layer and accl-bench-core); "
              "at most ACCL_RX_BUFFER_COUNT x ACCL_RX_BUFFER_SIZE; when unset, 65536 or that product if it is "
              "smaller; PMPI: all ranks use the smallest value any rank has; public firmware (no capability word, e.g. "
              "ACCL_DEVICE=sim): at least ACCL_RX_BUFFER_SIZE, and larger messages run natively unless the card "
              "is RDMA"),
      integer_or_off("ACCL_MAX_RENDEZVOUS_SIZE", core, "4194304", kDatapathWord, kMax32, "bytes",
                     "bytes of each scratch buffer used by collectives; 0 = eager only; public firmware (no capability "
                     "word): above ACCL_MAX_EAGER_SIZE, never 0"),
      integer("ACCL_CONTENDED_SPIN_US", core, "5000", 0, 100000, "us",
              "with at most one ACCL process per core on the host: a waiting thread that another program's "
              "thread preempted keeps polling for this long instead of yielding or blocking (both give its share "
              "of the core away; a yield to a CPU-bound thread costs that thread's whole slice), and for another "
              "period each time it was preempted again meanwhile; 0 = never (cores: those the host's ranks may use, "
              "the union of their affinity masks under the PMPI layer)"),
      // emulator
      choice("ACCL_EMU_TRANSPORT", emu, "auto", "auto,inproc,shm,tcp,udp",
             "emulator transport: auto (in-process, else shm on one host, else tcp), inproc (one process only), "
             "shm, tcp, udp"),
      text("ACCL_EMU_BIND_ADDRESS", emu, "127.0.0.1",
           "IPv4 address the emulated CCLO listens on (never all interfaces by default); 0.0.0.0: every "
           "interface, and peers know the CCLO by the host's first non-loopback IPv4 address"),
      integer("ACCL_EMU_OVERFLOW_BYTES", emu, "268435456", 0, 64 * kGiB, "bytes",
              "bytes of unexpected eager data the emulator keeps when all RX buffers are full; pages become "
              "resident as data first needs them; when the store empties after a burst deeper than 8 MiB, the "
              "pages beyond the first 8 MiB are released; a message that finds it full is discarded and its "
              "receive fails"),
      integer("ACCL_EMU_SHM_DIRECT_BYTES", emu, "", 0, kTiB, "bytes",
              "smallest rendezvous payload the shm transport writes straight into the receiving process's buffer "
              "(process_vm_writev: one copy instead of two through a ring); 0 = never; empty = 262144 where a "
              "1 MiB process_vm_writev takes at most twice as long as memcpy (measured once per process), else "
              "never"),
      boolean("ACCL_EMU_SHM_SHARED_COPY", emu, "on",
              "on = the receiver of such a direct write copies part of it itself (process_vm_readv), chunk by "
              "chunk, while the sender copies the rest, so a receiver that waits for the payload lends its core; "
              "off = the sender copies it alone"),
      integer("ACCL_EMU_POLL_LEASE_US", emu, "", 1, kHourUs, "us",
              "how long after a host thread's last poll the shm transport's reader threads leave incoming "
              "messages to it before they take over; empty = 1000, or 10000 when the host has more ACCL processes "
              "than cores (a polling thread is then preempted for whole scheduler slices, and readers woken "
              "meanwhile find no free core; the process count and the cores the processes may use are known under "
              "the PMPI layer, else cores = all the host's)"),
      integer("ACCL_EMU_SPIN_US", emu, "50", 0, 100000, "us", "how long emulator threads spin before they block"),
      integer("ACCL_EMU_DRIVE_SPIN_US", emu, "300", 0, 100000, "us",
              "how long a host thread waiting for a call keeps driving its emulated CCLO without progress before "
              "it blocks, when the host has at most one ACCL process per core (else ACCL_EMU_SPIN_US)"),
      integer("ACCL_EMU_YIELD_US", emu, "1000", 0, kHourUs, "us",
              "how long a host thread waiting for a call keeps driving its emulated CCLO without progress, "
              "yielding the core between polls, before it blocks, when the host has more ACCL processes than "
              "cores (0: no yielding, block after ACCL_EMU_SPIN_US)"),
      text("ACCL_EMU_FAULTS", emu, "",
           "test-only network faults, comma list of key=value: seed=N, drop/dup/reorder/corrupt=probability per "
           "message, delay_us=N (random 0..N per message), slow_us=N (fixed per message), peer=ip:port / "
           "from=ip:port (only links to / out of that CCLO); UDP turns drop/dup/reorder/corrupt into datagram "
           "faults it repairs, other transports report them (corrupt goes undetected there); empty = off"),
      text("ACCL_JOB_SECRET", emu, "", "per-job secret emulated CCLOs require from peers (the PMPI layer generates one)"),
      // hardware
      text("ACCL_XCLBIN", hw, "", "xclbin to load for ACCL_DEVICE=xrt"),
      text("ACCL_DEVICE_INDEX", hw, "",
           "Alveo card for ACCL_DEVICE=xrt: XRT index or PCI address (0000:3b:00.1); default: the card nearest to "
           "this rank"),
      text("ACCL_CCLO_KERNEL", hw, "ccl_offload:{ccl_offload_0}", "name of the CCLO IP in the xclbin"),
      text("ACCL_HOSTCTRL_KERNEL", hw, "hostctrl:{hostctrl_0_0}", "name of the host-controller kernel in the xclbin"),
      text("ACCL_XRT_MEMORY_GROUPS", hw, "",
           "XRT memory group of each device bank, comma list of ids 0..65535 (default: the banks the CCLO's "
           "memory ports reach)"),
      real("ACCL_CCLO_CLOCK_MHZ", hw, "250", 1, 100000, "MHz",
           "CCLO clock of the card in MHz: converts its perf counter (cycles) to call durations"),
      text("ACCL_SIM_ADDRESS", hw, "tcp://127.0.0.1:5500",
           "simulator session of ACCL_DEVICE=sim (public ACCL's cclo_emu or RTL simulation): tcp://host:port of "
           "rank 0's instance; rank r's instance listens on port + r"),
      integer("ACCL_SIM_REPLY_TIMEOUT_MS", hw, "30000", 1, kMaxTimeoutMs, "ms",
              "ACCL_DEVICE=sim: longest wait for one reply of the simulator session, also for the first one at "
              "start-up (cclo_emu answers about 5 s after it starts); no reply is an error naming the session"),
      choice("ACCL_HW_NETWORK", hw, "none", "none,udp,tcp",
             "ACCL_DEVICE=xrt: bring up the card's network at start-up as public ACCL's accl_network_utils does: "
             "udp = CMAC link, socket table and ARP of its UDP design, tcp = stack buffers, POE kernel and one "
             "session per peer of its TCP design; every rank of the job must use the same; none = the network is "
             "configured already"),
      boolean("ACCL_HW_RSFEC", hw, "off", "ACCL_HW_NETWORK=udp: Reed-Solomon FEC on the CMAC (both ends of a link alike)"),
      integer("ACCL_HW_NETWORK_TIMEOUT_MS", hw, "60000", 1, kMaxTimeoutMs, "ms",
              "ACCL_HW_NETWORK: longest wait of each bring-up step that needs the link or a peer (link up, ARP "
              "answer of every peer, one session-handler run, connecting to one peer); then an error naming it"),
      // PMPI layer
      boolean("ACCL_OFFLOAD", pmpi, "on", "PMPI: on = offload eligible calls to ACCL, off = pure interposition"),
      text("ACCL_OFFLOAD_CALLS", pmpi, "",
           "PMPI: comma list of calls (send, MPI_Allreduce, ...) or groups (p2p, coll, icoll, all) to offload "
           "(default all); a leading ^ negates, e.g. ^send,recv"),
      choice("ACCL_FALLBACK", pmpi, "silent", "silent,warn,error",
             "PMPI: silent, warn (one line per fallback), error (abort when a call would fall back)"),
      boolean("ACCL_TRACE", pmpi, "0", "PMPI: 1 = one line per call: offloaded or fallback and why"),
      boolean("ACCL_STATS", pmpi, "0",
              "PMPI: 1 = table at MPI_Finalize: calls, bytes, offloaded vs fallback by reason, time"),
      integer("ACCL_MIN_BYTES", pmpi, "0", 0, kTiB, "bytes",
              "PMPI: calls moving fewer bytes run natively (per call: ACCL_<CALL>_MIN_BYTES, e.g. "
              "ACCL_ALLREDUCE_MIN_BYTES)"),
      integer("ACCL_MAX_BYTES", pmpi, "0", 0, kTiB, "bytes",
              "PMPI: calls moving more bytes run natively; 0 = no limit (per call: ACCL_<CALL>_MAX_BYTES)"),
      // PMPI offload policy (issue 40)
      choice("ACCL_POLICY", pmpi, "auto", "auto,offload,native",
             "PMPI: which eligible calls go to ACCL: auto = as the tuning file says (call x communicator size x "
             "bytes), offload = every call the device can run, native = none; ACCL_<CALL>_MIN_BYTES / _MAX_BYTES "
             "and ACCL_MIN_BYTES / ACCL_MAX_BYTES, where set, decide instead of the file for the calls they cover"),
      text("ACCL_TUNING_FILE", pmpi, "",
           "PMPI: tuning file of ACCL_POLICY=auto (JSON, written by tools/accl-tune; format in pmpi/README.md); "
           "empty = the default shipped with the package (share/accl-mpi/default.json)"),
      integer("ACCL_P2P_STAGING_BYTES", pmpi, "67108864", 0, kTiB, "bytes",
              "PMPI: bytes of large blocking-send payloads copied aside so MPI_Send returns before the receiver "
              "matches; beyond it MPI_Send waits"),
      integer("ACCL_PMPI_TIMEOUT_MS", pmpi, "", 1, kMaxTimeoutMs, "ms",
              "PMPI: device timeout of offloaded MPI calls; empty = ACCL_TIMEOUT_MS if that is set, else 300000 "
              "(MPI ranks may enter a collective minutes apart)"),
      integer("ACCL_BUFFER_CACHE", pmpi, "64", 0, 65536, "",
              "PMPI: ACCL wrappers of user buffers kept for reuse (no per-call allocation); 0 = wrap every call"),
  };
}

}  // namespace

const std::vector<Setting>& settings() {
  static const std::vector<Setting> table = make_table();
  return table;
}

}  // namespace accl::config
