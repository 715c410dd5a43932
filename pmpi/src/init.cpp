// SPDX-License-Identifier: Apache-2.0
//
// Bring-up and teardown.
//
// MPI_Init / MPI_Init_thread: PMPI_Init*, read every setting once, duplicate
// MPI_COMM_WORLD privately (our own traffic never meets the application's),
// create this rank's device, exchange endpoints with PMPI_Allgather, bring the
// driver up on all of MPI_COMM_WORLD. Every step that can fail on one rank is
// followed by an agreement (PMPI_Allreduce) so the whole job either offloads
// or runs natively -- never half and half.
//
// MPI_Finalize: teardown runs from the delete callback of an attribute on
// MPI_COMM_SELF, which MPI runs first thing in MPI_Finalize (Open MPI no
// longer runs MPI_COMM_WORLD's callbacks at finalize). It drains detached
// sends, synchronises on the private comm (nobody closes its device while a
// peer still talks to it), prints ACCL_STATS, and frees every ACCL
// communicator including those of comms the application never freed.
#include "buffers.hpp"
#include "comms.hpp"
#include "decision_memo.hpp"
#include "errors.hpp"
#include "progress.hpp"
#include "requests.hpp"
#include "state.hpp"
#include "stats.hpp"
#include "types.hpp"

#include <accl/config.hpp>
#include <accl/log.hpp>
#include <accl_devices/devices.hpp>
#include <accl_pmpi/settings.hpp>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

namespace accl::pmpi {

bool g_native_only = true;
std::atomic<bool> g_p2p_straight{true};
bool g_barrier_straight = true;

namespace detail {
std::atomic<State*> g_state{nullptr};

State& create_state() {
  // Never destroyed: teardown is explicit, and exit-time destructors would
  // race with MPI's own atexit handlers. The local static makes concurrent
  // first calls create one State.
  static State* s = new State;
  g_state.store(s, std::memory_order_release);
  return *s;
}
}  // namespace detail

namespace {

// CPUs this host's ranks may use: the union of their affinity masks (a cpuset
// may give the job fewer than the host has; one rank's own mask would count a
// core per rank under mpirun's --bind-to core). Collective over `host_comm`:
// a rank whose mask cannot be read counts all the host's CPUs.
unsigned host_cpu_count(MPI_Comm host_comm) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) {
    CPU_ZERO(&set);
    for (unsigned c = 0; c < std::thread::hardware_concurrency() && c < CPU_SETSIZE; ++c) CPU_SET(c, &set);
  }
  PMPI_Allreduce(MPI_IN_PLACE, &set, static_cast<int>(sizeof set), MPI_BYTE, MPI_BOR, host_comm);
  const int count = CPU_COUNT(&set);
  return count > 0 ? static_cast<unsigned>(count) : std::thread::hardware_concurrency();
}

std::string upper(std::string v) {
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::toupper(c); });
  return v;
}

void warn(const std::string& text) {
  std::fprintf(stderr, "[accl-pmpi rank %d] warning: %s\n", state().world_rank, text.c_str());
}

// Every value was validated before (first_bad_setting): read_settings only
// converts.
void read_settings(Settings& s) {
  s.offload = config::get_bool("ACCL_OFFLOAD");
  const std::string fb = config::get_choice("ACCL_FALLBACK");
  s.fallback = fb == "warn" ? FallbackMode::warn : fb == "error" ? FallbackMode::error : FallbackMode::silent;
  s.trace = config::get_bool("ACCL_TRACE");
  s.stats = config::get_bool("ACCL_STATS");
  s.device = devices::to_string(devices::selected());
  const std::vector<bool> enabled = settings::offload_calls(config::get_string("ACCL_OFFLOAD_CALLS"));
  std::copy(enabled.begin(), enabled.end(), s.enabled.begin());
  const auto global_min = static_cast<uint64_t>(config::get_int("ACCL_MIN_BYTES"));
  const auto global_max = static_cast<uint64_t>(config::get_int("ACCL_MAX_BYTES"));
  const bool global_set = config::get("ACCL_MIN_BYTES") || config::get("ACCL_MAX_BYTES");
  s.policy = tuning::policy();
  if (s.policy == tuning::Policy::automatic) s.table = tuning::load(tuning::selected_path());
  for (size_t c = 0; c < kNumCalls; ++c) {
    const std::string base = "ACCL_" + upper(call_setting(static_cast<Call>(c)));
    const std::string min_name = base + "_MIN_BYTES", max_name = base + "_MAX_BYTES";
    s.min_bytes[c] =
        config::get(min_name.c_str()) ? static_cast<uint64_t>(config::get_int(min_name.c_str())) : global_min;
    s.max_bytes[c] =
        config::get(max_name.c_str()) ? static_cast<uint64_t>(config::get_int(max_name.c_str())) : global_max;
    s.thresholds_set[c] = global_set || config::get(min_name.c_str()) || config::get(max_name.c_str());
  }
  // Point-to-point is all-or-nothing per communicator (see p2p_entry.cpp).
  s.p2p = s.enabled[static_cast<size_t>(Call::Send)] && s.enabled[static_cast<size_t>(Call::Recv)];
  s.rx_buffer_count = static_cast<unsigned>(config::get_int("ACCL_RX_BUFFER_COUNT"));
  s.rx_buffer_size = static_cast<size_t>(config::get_int("ACCL_RX_BUFFER_SIZE"));
  s.max_eager_size = static_cast<size_t>(config::max_eager_size(s.rx_buffer_count, s.rx_buffer_size));
  s.max_rendezvous_size = static_cast<size_t>(config::get_int("ACCL_MAX_RENDEZVOUS_SIZE"));
  s.staging_limit = static_cast<size_t>(config::get_int("ACCL_P2P_STAGING_BYTES"));
  s.buffer_cache = static_cast<size_t>(config::get_int("ACCL_BUFFER_CACHE"));
  // MPI programs legitimately enter a collective long after their peers
  // (rank 0 computes for a minute first); the device must not call that a
  // failure after the 10 s that suit direct ACCL users. A user's explicit
  // ACCL_TIMEOUT_MS still counts, ACCL_PMPI_TIMEOUT_MS overrides both. The
  // table's range keeps either within what the device counts (32 bits of us).
  s.timeout_ms = kDefaultPmpiTimeoutMs;
  if (config::get("ACCL_PMPI_TIMEOUT_MS")) s.timeout_ms = config::get_int("ACCL_PMPI_TIMEOUT_MS");
  else if (config::get("ACCL_TIMEOUT_MS")) s.timeout_ms = config::get_int("ACCL_TIMEOUT_MS");
}

// The start-up check of every layer's settings (each layer validates its
// own; this process may load all four): the first bad one's message
// ("ACCL_X=value: ..."), or empty.
std::string first_bad_setting(int world_size) {
  try {
    config::validate(config::Layer::core);
    devices::validate_settings();
    settings::validate(world_size);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// A bad setting stops the job in MPI_Init, before any rank offloads or
// falls back: every rank that has one says which, the ranks agree, then
// one aborts. (Running natively instead would hide the mistake.)
void stop_on_bad_settings() {
  State& st = state();
  const std::string bad = first_bad_setting(st.world_size);
  if (!bad.empty()) {
    std::fprintf(stderr, "[accl-pmpi rank %d] error: bad setting: %s\n", st.world_rank, bad.c_str());
    std::fflush(stderr);
  }
  // Inside MPI_Init the application has no traffic on MPI_COMM_WORLD yet.
  int mine = bad.empty() ? 1 : 0, all = 0;
  PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all == 1) {
    if (st.world_rank == 0)
      for (const auto& line : settings::unknown_setting_warnings()) warn(line);
    return;
  }
  // Every rank that has a bad setting has said so (before the agreement):
  // whichever rank aborts first ends the job.
  PMPI_Abort(MPI_COMM_WORLD, 2);
}

// The offload decision must come out alike on every member of a collective,
// or one rank would offload while its peers call native MPI. Its inputs
// (ACCL_POLICY, the tuning table, call list and thresholds) are settings each
// rank reads for itself, so the ranks compare them before any call.
void stop_on_policy_mismatch() {
  State& st = state();
  const uint64_t mine = policy_digest();
  const uint64_t both[2] = {mine, ~mine};
  uint64_t low[2] = {};
  PMPI_Allreduce(both, low, 2, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  if (low[0] == mine && ~low[1] == mine) return;
  const std::string file = st.s.policy == tuning::Policy::automatic ? ", tuning file " + st.s.table.path : "";
  std::fprintf(stderr,
               "[accl-pmpi rank %d] error: the ranks would decide offloading differently: ACCL_POLICY, "
               "ACCL_TUNING_FILE's table, ACCL_OFFLOAD_CALLS or the ACCL_*_BYTES thresholds differ between ranks "
               "(here: ACCL_POLICY=%s%s)\n",
               st.world_rank, config::get_choice("ACCL_POLICY").c_str(), file.c_str());
  std::fflush(stderr);
  PMPI_Abort(MPI_COMM_WORLD, 2);
}

std::string make_secret() {
  std::random_device rd;
  std::string out;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) out += hex[rd() & 15];
  return out;
}

uint64_t host_hash() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return std::hash<std::string>{}(name);
}

// What each rank contributes to the endpoint exchange.
struct Endpoint {
  int ok;
  int port;
  uint64_t host;
  uint64_t rx_buffer_size;  // eager segments to this rank must fit its RX buffers
  char ip[48];
  char why[200];
};

// MIN over the private comm: every rank learns whether all of them succeeded.
bool all_agree(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, state().private_comm);
  return all == 1;
}

void device_unavailable(const std::string& why) {
  State& st = state();
  if (st.s.fallback == FallbackMode::error) {
    std::fprintf(stderr, "[accl-pmpi rank %d] error: no ACCL device (%s) and ACCL_FALLBACK=error: aborting\n",
                 st.world_rank, why.c_str());
    std::fflush(stderr);
    PMPI_Abort(MPI_COMM_WORLD, 3);
  }
  if (st.world_rank == 0) warn("no ACCL device, every call runs natively: " + why);
}

// Which reduce function runs on which data type, agreed (bitwise AND) like
// the capabilities above: reduction_type() offloads only what every rank's
// device reported (a public-firmware device reports none of the extensions).
void agree_device_reductions(State& st) {
  std::array<uint32_t, abi::kNumDataTypes + 1> mine{};
  for (uint32_t f = 0; f <= abi::kMaxLoc; ++f) {
    const auto func = static_cast<reduceFunction>(f);
    if (st.accl->supports(func)) mine[abi::kNumDataTypes] |= 1u << f;
    for (uint32_t t = 1; t < abi::kNumDataTypes; ++t)
      if (st.accl->supports(func, static_cast<dataType>(t))) mine[t] |= 1u << f;
  }
  std::array<uint32_t, abi::kNumDataTypes + 1> agreed{};
  PMPI_Allreduce(mine.data(), agreed.data(), static_cast<int>(mine.size()), MPI_UINT32_T, MPI_BAND, st.private_comm);
  st.device_ops = agreed[abi::kNumDataTypes];
  std::copy(agreed.begin(), agreed.begin() + abi::kNumDataTypes, st.device_type_ops.begin());
}

void start_device() {
  State& st = state();
  Endpoint me{};
  std::unique_ptr<Device> dev;
  std::vector<int> session_ids;  // per rank, when the device numbers its sessions (devices::Opened)

  // A per-job secret: emulated CCLOs only accept peers that present it.
  char secret[33] = {};
  if (st.world_rank == 0) std::snprintf(secret, sizeof secret, "%s", make_secret().c_str());
  PMPI_Bcast(secret, sizeof secret, MPI_CHAR, 0, st.private_comm);

  // Ranks on this host: with one per core, a rank waiting for a call may
  // drive its emulated CCLO longer before it blocks (ACCL_EMU_DRIVE_SPIN_US);
  // with more ranks than cores it yields between polls (ACCL_EMU_YIELD_US).
  int host_ranks = 0;
  MPI_Comm host_comm = MPI_COMM_NULL;
  PMPI_Comm_split_type(st.private_comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host_comm);
  PMPI_Comm_size(host_comm, &host_ranks);
  const unsigned cores = host_cpu_count(host_comm);
  PMPI_Comm_free(&host_comm);
  PollPacer::configure(static_cast<unsigned>(host_ranks), cores);
  ACCL_LOG_INFO("accl-pmpi: host: {} ranks on {} cores ({})", host_ranks, cores,
                core_per_process(static_cast<unsigned>(host_ranks), cores) ? "a core each" : "sharing cores");

  try {
    devices::Request request;
    request.kind = devices::selected();
    request.rank = st.world_rank;
    request.size = st.world_size;
    request.host_processes = static_cast<unsigned>(host_ranks);
    request.host_cores = cores;
    request.port = 0;  // any free port; peers learn it below
    request.job_secret = secret;
    devices::Opened opened = devices::open(request);
    dev = std::move(opened.device);
    session_ids = std::move(opened.session_ids);
    if (!session_ids.empty() && session_ids.size() != static_cast<size_t>(st.world_size))
      throw std::runtime_error("the device numbered sessions for " + std::to_string(session_ids.size()) +
                               " ranks, not the job's " + std::to_string(st.world_size));
    std::snprintf(me.ip, sizeof me.ip, "%s", opened.ip.c_str());
    me.port = opened.port;
    me.ok = 1;
  } catch (const std::exception& e) {
    me.ok = 0;
    std::snprintf(me.why, sizeof me.why, "%s", e.what());
  }
  me.host = host_hash();
  me.rx_buffer_size = st.s.rx_buffer_size;

  std::vector<Endpoint> all(static_cast<size_t>(st.world_size));
  PMPI_Allgather(&me, sizeof(Endpoint), MPI_BYTE, all.data(), sizeof(Endpoint), MPI_BYTE, st.private_comm);
  std::string why;
  for (int r = 0; r < st.world_size; ++r) {
    const Endpoint& e = all[static_cast<size_t>(r)];
    if (!e.ok && why.empty()) why = "rank " + std::to_string(r) + ": " + e.why;
  }
  // Loopback endpoints (an emulated CCLO's default) cannot reach another
  // host. A simulation session's instances meet inside the session, wherever
  // the ranks driving them run.
  if (why.empty() && st.s.device == std::string(devices::to_string(devices::Kind::emu))) {
    for (const Endpoint& e : all) {
      if (e.host != all[0].host && (std::strncmp(e.ip, "127.", 4) == 0 || std::strncmp(all[0].ip, "127.", 4) == 0)) {
        why = "ranks on several hosts but the emulator listens on loopback (set ACCL_EMU_BIND_ADDRESS)";
        break;
      }
    }
  }
  if (!why.empty()) {
    device_unavailable(why);
    return;
  }

  st.world_ranks.clear();
  for (const Endpoint& e : all) {
    rank_t r;
    r.ip = e.ip;
    r.port = e.port;
    // A card that set up its own network (TCP connections) and a simulation
    // session number their sessions; other devices have none (-1).
    if (!session_ids.empty()) r.session_id = session_ids[st.world_ranks.size()];
    // Ranks may have RX buffers of different sizes (an MPMD launch): each
    // sends eager segments that fit the receiver's, not its own.
    r.max_segment_size = e.rx_buffer_size;
    st.world_ranks.push_back(r);
  }

  // One eager size and one rendezvous size (0: eager only; else the scratch
  // buffers collectives stage through) for all ranks, the smallest any rank
  // has: they decide protocols and collective algorithms on both ends of
  // every message, and the eager size's default follows each rank's own RX
  // buffer settings, which an MPMD launch may set differently.
  const uint64_t my_sizes[2] = {st.s.max_eager_size, st.s.max_rendezvous_size};
  uint64_t sizes[2] = {};
  PMPI_Allreduce(my_sizes, sizes, 2, MPI_UINT64_T, MPI_MIN, st.private_comm);
  if (sizes[0] != my_sizes[0])
    ACCL_LOG_INFO("accl-pmpi: eager size {} instead of {} bytes, the smallest any rank asked for", sizes[0],
                  my_sizes[0]);
  st.s.max_eager_size = static_cast<size_t>(sizes[0]);
  st.s.max_rendezvous_size = static_cast<size_t>(sizes[1]);

  bool ok = true;
  std::string err;
  try {
    st.accl = std::make_unique<ACCL>(std::move(dev));
    InitOptions io;
    io.rx_buffer_count = st.s.rx_buffer_count;
    io.rx_buffer_size = st.s.rx_buffer_size;
    io.max_eager_size = st.s.max_eager_size;
    io.max_rendezvous_size = st.s.max_rendezvous_size;
    io.timeout = std::chrono::milliseconds(st.s.timeout_ms);
    st.accl->initialize(st.world_ranks, st.world_rank, io);
  } catch (const std::exception& e) {
    ok = false;
    err = e.what();
  }
  // The agreement is also where the ranks meet after initialize(): no rank
  // sends before every CCLO has its RX buffers (a public simulation session
  // drops what arrives earlier).
  if (!all_agree(ok)) {
    st.accl.reset();
    device_unavailable(ok ? "driver bring-up failed on another rank" : err);
    return;
  }

  // Capabilities, agreed (bitwise AND) so every rank applies the same rules.
  uint32_t caps = 0;
  const uint32_t cap_bits = st.accl->get_capabilities();
  const bool valid = (cap_bits & abi::kCapValid) != 0;
  if (st.accl->supports(reduceFunction::MIN)) caps |= 1u;
  if (st.accl->supports(reduceFunction::PROD)) caps |= 2u;
  // Public firmware has no capability word: wildcard receives (needed by
  // our p2p engine) are then not available, and rendezvous (every alltoall,
  // barrier, any message above the eager size) needs the RDMA stack (HWID
  // bits 0-1 == 2).
  const bool rdma = (st.accl->get_hwid() & abi::kHwIdStackMask) == 2;
  if (valid && (cap_bits & abi::kCapTagAnyRecv)) caps |= 4u;
  if (valid ? (cap_bits & abi::kCapAlltoall) != 0 : rdma) caps |= 8u;
  // The public barrier is its rendezvous address handshake: on cclo_emu over
  // tcp (HWID UDP) an MPI_Barrier never completed (sim-public-mpi-preload).
  if (valid ? (cap_bits & abi::kCapBarrier) != 0 : rdma) caps |= 16u;
  if (valid) caps |= 32u;
  if (valid || rdma) caps |= 64u;
  uint32_t agreed = 0;
  PMPI_Allreduce(&caps, &agreed, 1, MPI_UINT32_T, MPI_BAND, st.private_comm);
  st.can_min = agreed & 1u;
  st.can_prod = agreed & 2u;
  st.can_p2p = agreed & 4u;
  st.can_alltoall = agreed & 8u;
  st.can_barrier = agreed & 16u;
  st.public_firmware = (agreed & 32u) == 0;
  st.eager_only_limit = (agreed & 64u) ? 0 : st.s.max_eager_size;
  agree_device_reductions(st);
  st.active = true;
  ACCL_LOG_INFO("accl-pmpi: ACCL up on {} ranks ({}), min {} prod {} p2p {} public firmware {} eager-only limit {}",
                st.world_size, st.s.device, st.can_min, st.can_prod, st.can_p2p, st.public_firmware,
                st.eager_only_limit);
}

int self_delete_fn(MPI_Comm, int, void*, void*) {
  teardown();
  return MPI_SUCCESS;
}

void bring_up() {
  State& st = state();
  if (st.initialized) return;
  st.thread_level = MPI_THREAD_MULTIPLE;
  PMPI_Query_thread(&st.thread_level);
  st.mu.set_needed(st.thread_level == MPI_THREAD_MULTIPLE);
  PMPI_Comm_rank(MPI_COMM_WORLD, &st.world_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &st.world_size);
  log::set_thread_rank(st.world_rank);
  stop_on_bad_settings();
  try {
    read_settings(st.s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[accl-pmpi rank %d] error: bad setting: %s\n", st.world_rank, e.what());
    std::fflush(stderr);
    PMPI_Abort(MPI_COMM_WORLD, 2);
  }
  stop_on_policy_mismatch();
  st.observe = st.s.stats || st.s.trace || st.s.fallback != FallbackMode::silent;
  PMPI_Comm_dup(MPI_COMM_WORLD, &st.private_comm);
  PMPI_Comm_set_name(st.private_comm, const_cast<char*>("accl-pmpi private"));
  types_init();
  errors_init();
  requests_init();
  // Teardown hook: first thing MPI_Finalize does is delete COMM_SELF's attributes.
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete_fn, &st.self_keyval, nullptr);
  PMPI_Comm_set_attr(MPI_COMM_SELF, st.self_keyval, nullptr);
  // The device start-up is collective over the private communicator, so
  // the ranks agree first whether to start one: a rank whose own settings
  // say native (ACCL_OFFLOAD=off, ACCL_DEVICE=none; an MPMD launch may give
  // it those) would otherwise leave the others waiting for it. ACCL_POLICY=native
  // offloads nothing, so it starts no device either (the ranks agreed on the
  // policy above).
  const int wants_device = st.s.offload && st.s.device != "none" && st.s.policy != tuning::Policy::native ? 1 : 0;
  int all_want_device = 0;
  PMPI_Allreduce(&wants_device, &all_want_device, 1, MPI_INT, MPI_MIN, st.private_comm);
  if (all_want_device) start_device();
  else if (wants_device) device_unavailable("another rank runs natively (ACCL_OFFLOAD=off or ACCL_DEVICE=none there)");
  else if (st.s.offload && st.s.policy != tuning::Policy::native && st.s.fallback == FallbackMode::error &&
           st.world_rank == 0)
    warn("ACCL_DEVICE=none: every call runs natively");
  comm_registry_init();
  if (st.world != nullptr && st.world->p2p) {
    // Offloaded point-to-point needs progress while the application is in
    // native MPI (progress_thread.cpp); the layer's state is then shared
    // with that thread. No lock is held here, so switching the lock on is safe.
    st.mu.set_needed(true);
    progress_thread_start();
  }
  st.initialized = true;
  // From here on the wrappers take the slow path only when there is
  // something to do there.
  g_native_only = !st.active && !st.observe;
  g_barrier_straight = g_native_only || (!st.observe && policy_never_offloads(Call::Barrier));
  g_p2p_straight.store(g_native_only || (!st.observe && (st.world == nullptr || !st.world->p2p)),
                       std::memory_order_relaxed);
}

}  // namespace

void teardown() {
  State& st = state();
  if (!st.initialized || st.torn_down) return;
  if (st.active) {
    p2p_drain();
    PMPI_Barrier(st.private_comm);  // every rank is done with ACCL traffic
  }
  progress_thread_stop();
  if (st.s.stats) stats_print();
  g_native_only = true;
  g_barrier_straight = true;
  g_p2p_straight.store(true, std::memory_order_relaxed);
  {
    std::lock_guard lock(st.mu);
    requests_teardown();
    p2p_teardown();
    buffers_teardown();
    st.torn_down = true;
  }
  // Device first (its threads stop writing into our memory), then the
  // communicator states, including those of never-freed comms.
  st.accl.reset();
  comm_registry_teardown();
  st.active = false;
  forget_decisions();
  if (st.private_comm != MPI_COMM_NULL) PMPI_Comm_free(&st.private_comm);
}

}  // namespace accl::pmpi

using namespace accl::pmpi;

ACCL_PMPI_EXPORT int MPI_Init(int* argc, char*** argv) {
  const int rc = PMPI_Init(argc, argv);
  if (rc != MPI_SUCCESS) return rc;
  bring_up();
  return rc;
}

ACCL_PMPI_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  // The layer itself is thread-safe (State::mu, taken when MPI grants
  // MULTIPLE), so the level MPI grants is passed on unchanged: it stays honest.
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc != MPI_SUCCESS) return rc;
  bring_up();
  return rc;
}

ACCL_PMPI_EXPORT int MPI_Finalize(void) {
  // Teardown runs from the MPI_COMM_SELF attribute callback inside
  // PMPI_Finalize (also when someone calls PMPI_Finalize directly).
  return PMPI_Finalize();
}

// --- communicator creation: ACCL communicators are made right here ----------

ACCL_PMPI_EXPORT int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_dup(comm, newcomm);
  if (rc == MPI_SUCCESS && !g_native_only) comm_created(*newcomm);
  return rc;
}

ACCL_PMPI_EXPORT int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_dup_with_info(comm, info, newcomm);
  if (rc == MPI_SUCCESS && !g_native_only) comm_created(*newcomm);
  return rc;
}

ACCL_PMPI_EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_split(comm, color, key, newcomm);
  if (rc == MPI_SUCCESS && !g_native_only) comm_created(*newcomm);
  return rc;
}

ACCL_PMPI_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_split_type(comm, split_type, key, info, newcomm);
  if (rc == MPI_SUCCESS && !g_native_only) comm_created(*newcomm);
  return rc;
}

ACCL_PMPI_EXPORT int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_create(comm, group, newcomm);
  if (rc == MPI_SUCCESS && !g_native_only) comm_created(*newcomm);
  return rc;
}

ACCL_PMPI_EXPORT int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_create_group(comm, group, tag, newcomm);
  if (rc == MPI_SUCCESS && !g_native_only) comm_created(*newcomm);
  return rc;
}
