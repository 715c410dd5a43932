// SPDX-License-Identifier: Apache-2.0
//
// Pieces shared by the socket-based transports (TCP, UDP, shared memory):
// file descriptors, addresses, deadlines, the job-secret credential and the
// connection handshake, plus tuning knobs and test hooks.
//
// Header-only on purpose: the emulator library only has to compile
// transport_tcp.cpp, transport_udp.cpp and transport_shm.cpp.
#pragma once

#include "thread_name.hpp"
#include "transport.hpp"

#include <accl/config.hpp>
#include <accl/log.hpp>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <new>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

namespace accl::emu {

// ---------------------------------------------------------------------------
// Tuning knobs and test hooks. The public factories in transport.hpp use the
// defaults; tests (and a future configuration setting) use these overloads.
// ---------------------------------------------------------------------------
struct TcpTuning {
  // Staging chunk the PayloadWriter fills before each large write: big enough
  // that one write() per chunk keeps loopback above 1.5 GB/s, small enough to
  // stay in L2/L3.
  size_t staging_bytes = size_t{512} << 10;
  // An inbound connection must complete its handshake within this time.
  std::chrono::milliseconds handshake_timeout{5000};
};

struct ShmTuning {
  // Data bytes of each ring (at least 64 KiB, rounded up to whole pages).
  // Every rank maps one ring per peer and direction, so this times 2(P-1) is
  // resident per rank: about 1 MiB keeps 8 ranks at +15 MiB (8 MiB cost
  // +112 MiB) while four 256 KiB pieces in flight still stream at memory
  // speed. The extra 64 KiB let a whole 1 MiB message and its header (plus
  // the small control messages around it) fit: its sender then never waits
  // for a receiver that is not running, which on an oversubscribed host
  // means a time slice. 4 ranks on 2 cores, 1 MiB blocks, best of 16 runs
  // with -c, against 1 MiB rings: alltoall 2643 -> 2225 us, allgather
  // 2420 -> 1948 us, allreduce 4 MiB (1 MiB ring steps) 4620 -> 3895 us.
  // 2 MiB rings also hold it but double the cache footprint: the 2 MiB
  // allreduce lost (1578 -> 2091 us).
  size_t ring_bytes = (size_t{1} << 20) + (size_t{64} << 10);
  // Largest piece published at once, so the receiver copies out of the ring
  // while the sender still fills it.
  size_t max_piece_bytes = size_t{256} << 10;
  // connect() to a peer on a local address retries this long (bounded by the
  // deadline) for the peer's endpoint to appear before answering "not
  // reachable" (nullptr), so a device can still fall back to TCP in time.
  std::chrono::milliseconds local_connect_grace{2000};
  std::chrono::milliseconds handshake_timeout{5000};
  // How long after a host thread's last Transport::poll() the reader threads
  // leave delivery to the pollers (see PollActivity in transport_shm.cpp);
  // a message sent later wakes a parked reader. make_shm_transport(options)
  // takes it from shm_poll_lease().
  std::chrono::microseconds poll_lease{1000};
  // While the lease runs, the control thread looks at it this often (or at
  // its end, if later) instead of at every end: a sender wakes a parked
  // reader itself once the lease is over, so this check only serves a
  // message that arrived while the lease ran and was left there when the
  // polls stopped without end_polling(); such a message waits up to this
  // long. With a 1 ms lease the control thread used to wake every
  // millisecond while a host thread polled, preempting a spinning rank:
  // 2-rank 8 B ping-pong, 100,000 round trips, one in a hundred took 8-20 us
  // instead of 1.5-3.
  std::chrono::microseconds lease_backstop{10000};
  // Bytes of the outbox (rounded up to whole pages) that holds payloads sent
  // to several peers, copied once for all of them (see Outbox in
  // transport_shm.cpp); payloads of up to half of it use it. Its pages are
  // allocated and touched at the first such payload. 0: no outbox.
  size_t outbox_bytes = size_t{4} << 20;
  // Smallest rendezvous payload for one peer that the sender writes straight
  // into the receiver's window with process_vm_writev (see DirectGate in
  // transport_shm.cpp): one copy instead of two. 0: never. Both sides must
  // allow it. (make_shm_transport takes it from ACCL_EMU_SHM_DIRECT_BYTES or,
  // unset, from the host's measured copy costs: shm_direct_min_bytes.)
  size_t direct_min_bytes = 0;
};

struct UdpTuning {
  // Payload bytes of one datagram (a multiple of 64, at most ~63 KiB).
  size_t datagram_payload = 61440;
  // Datagrams a link may have unacknowledged (at most 64; capped by the
  // receiver's advertised window, which follows its socket buffer).
  uint32_t max_window = 48;
  // Retransmission: initial timeout, backoff cap, and how many timeouts in a
  // row without progress break the link.
  std::chrono::milliseconds initial_rto{20};
  std::chrono::milliseconds max_rto{400};
  uint32_t max_retries = 12;
  // false = detect-and-report: any loss, duplicate or corruption breaks the
  // link (link_failed) instead of being repaired.
  bool retransmit = true;
  // Liveness: a link sends a keepalive after this much silence, and a peer
  // silent for liveness_timeout is declared dead.
  std::chrono::milliseconds keepalive_interval{500};
  std::chrono::milliseconds liveness_timeout{10000};
  std::chrono::milliseconds handshake_interval{50};
  // Test-only fault injection on outgoing data datagrams (0 = off): drop,
  // corrupt one byte after checksumming, send twice, or hold back and send
  // after the next one (reorder), each for about one datagram in N (chosen
  // pseudo-randomly, reproducibly).
  uint32_t drop_every = 0;
  uint32_t corrupt_every = 0;
  uint32_t duplicate_every = 0;
  uint32_t reorder_every = 0;
};

std::unique_ptr<Transport> make_tcp_transport(const TransportOptions& options, const TcpTuning& tuning);
std::unique_ptr<Transport> make_udp_transport(const TransportOptions& options, const UdpTuning& tuning);
std::unique_ptr<Transport> make_shm_transport(const TransportOptions& options, const ShmTuning& tuning);

// The shm poll lease for a host running `host_processes` ACCL processes (0:
// unknown) on `cores` cores: `configured` (ACCL_EMU_POLL_LEASE_US) when set
// and positive, else 1 ms, or 10 ms when there are more processes than
// cores (`cores`: std::thread::hardware_concurrency(), which ignores CPU
// affinity and cgroup limits). Oversubscribed, a polling host thread waits
// for a core whole scheduler slices at a time (milliseconds with two
// runnable threads per core), so a 1 ms lease lapsed at most of those
// preemptions: the control thread woke the parked readers, which found no
// free core either and took time slices from the ranks with work
// (docs/architecture.md has the measurements). With a core per process a
// lapse means the host really stopped polling, and a reader then has a
// core to take over on.
std::chrono::microseconds shm_poll_lease(int64_t configured_us, unsigned host_processes, unsigned cores);

// Direct writes (ShmTuning::direct_min_bytes) pay where the kernel copies
// between processes nearly as fast as memcpy: then one copy beats a ring's
// two. Where it is much slower, the ring wins, its two copies running at
// once on the sender's and the receiver's cores. Measured, best of 3
// alternating runs: on the Firecracker VM of 2026-11-27 (1 MiB
// process_vm_readv, the kernel copy measured then, 46-68 us; memcpy
// 30-43 us) direct writes made 1 MiB allgather and alltoall on 2 ranks 25 %
// faster; on the VM of 2026-11-28 (process_vm_writev 57-67 us, memcpy
// 23 us) the rings were faster almost everywhere: osu_bw 4 MiB 1.56x
// against 1.07x native, osu_latency 4 MiB 282 against 468 us, allgather
// 2 ranks 1 MiB 105 against 136 us.
constexpr double kShmDirectMaxSlowdown = 2.0;
constexpr size_t kShmDirectDefaultMinBytes = size_t{256} << 10;
// The threshold from the best times to copy 1 MiB with process_vm_writev and
// with memcpy: kShmDirectDefaultMinBytes if the kernel copy takes at most
// kShmDirectMaxSlowdown times as long, else 0 (also when either is not a
// positive finite time: the copy failed).
size_t shm_direct_min_for(double kernel_copy_ns, double memcpy_ns);
// ACCL_EMU_SHM_DIRECT_BYTES: `configured` as set; unset (nullopt): measured
// once per process with shm_direct_min_for.
size_t shm_direct_min_bytes(std::optional<size_t> configured);

namespace transport_detail {

// ---------------------------------------------------------------------------
// File descriptors
// ---------------------------------------------------------------------------
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

[[noreturn]] inline void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// ---------------------------------------------------------------------------
// Addresses
// ---------------------------------------------------------------------------
inline std::string format_address(const NetAddress& a) {
  return std::to_string((a.ip >> 24) & 0xFF) + "." + std::to_string((a.ip >> 16) & 0xFF) + "." +
         std::to_string((a.ip >> 8) & 0xFF) + "." + std::to_string(a.ip & 0xFF) + ":" + std::to_string(a.port);
}

inline sockaddr_in to_sockaddr(const NetAddress& a) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(a.ip);
  sa.sin_port = htons(a.port);
  return sa;
}

inline NetAddress from_sockaddr(const sockaddr_in& sa) {
  return NetAddress{ntohl(sa.sin_addr.s_addr), ntohs(sa.sin_port)};
}

inline uint64_t address_key(const NetAddress& a) { return (uint64_t{a.ip} << 16) | a.port; }

// The port the kernel actually bound `fd` to (port 0 = "pick one").
inline NetAddress bound_address(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) throw_errno("getsockname");
  return from_sockaddr(sa);
}

// True if `ip` belongs to this host (loopback or one of its interfaces):
// only then can a peer have a shared-memory endpoint here.
inline bool is_local_ipv4(uint32_t ip) {
  if ((ip >> 24) == 127) return true;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* it = list; it != nullptr && !found; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    found = ntohl(reinterpret_cast<const sockaddr_in*>(it->ifa_addr)->sin_addr.s_addr) == ip;
  }
  ::freeifaddrs(list);
  return found;
}

// The address a CCLO bound to `bound` is known by: its identity in
// communicator records and in every handshake (HelloIdentity), the address
// peers dial and the `from` its messages are delivered with. A wildcard bind
// (0.0.0.0: listen on every interface) names no host, so the identity is
// this host's first non-loopback IPv4 address that is up (127.0.0.1 if there
// is none). Receivers take a peer's identity from its handshake, never from
// the source address its packets come from: that differs with the route
// (a connection to 127.0.0.1 comes from 127.0.0.1, not from the address in
// the records), and rendezvous windows, link failures and cached links are
// all keyed by the identity.
inline NetAddress identity_address(const NetAddress& bound) {
  if (bound.ip != 0) return bound;
  NetAddress identity{0x7F000001u, bound.port};
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return identity;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if ((it->ifa_flags & IFF_UP) == 0 || (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(it->ifa_addr)->sin_addr.s_addr);
    if (ip == 0 || (ip >> 24) == 127) continue;
    identity.ip = ip;
    break;
  }
  ::freeifaddrs(list);
  return identity;
}

// ---------------------------------------------------------------------------
// Deadlines
// ---------------------------------------------------------------------------
// Milliseconds to pass to poll()/epoll_wait() so that a wait never passes
// `deadline` and never lasts longer than `cap` (callers re-check their stop
// flags at least that often). Rounds up so a 300 µs rest is not a busy loop.
inline int wait_ms(Clock::time_point deadline, std::chrono::milliseconds cap) {
  auto rest = deadline - Clock::now();
  if (rest <= Clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(rest);
  return static_cast<int>(std::min(ms, cap).count());
}

inline std::chrono::microseconds spin_duration() {
  try {
    return std::chrono::microseconds(std::clamp<int64_t>(config::get_int("ACCL_EMU_SPIN_US"), 0, 100000));
  } catch (const std::exception& e) {
    ACCL_LOG_WARN("transport: ignoring ACCL_EMU_SPIN_US: {}", e.what());
    return std::chrono::microseconds(50);
  }
}

// ---------------------------------------------------------------------------
// Job secret: SHA-256 (FIPS 180-4), so handshakes carry a fixed-size
// credential and shared-memory names never reveal the secret.
// ---------------------------------------------------------------------------
class Sha256 {
 public:
  using Digest = std::array<uint8_t, 32>;

  Sha256& update(const void* data, size_t bytes) {
    const auto* p = static_cast<const uint8_t*>(data);
    total_bytes_ += bytes;
    while (bytes > 0) {
      size_t take = std::min(bytes, sizeof buffer_ - buffered_);
      std::memcpy(buffer_ + buffered_, p, take);
      buffered_ += take;
      p += take;
      bytes -= take;
      if (buffered_ == sizeof buffer_) {
        compress(buffer_);
        buffered_ = 0;
      }
    }
    return *this;
  }
  Sha256& update(const std::string& s) { return update(s.data(), s.size()); }

  Digest finish() {
    uint64_t bits = total_bytes_ * 8;
    uint8_t pad = 0x80;
    update(&pad, 1);
    pad = 0;
    while (buffered_ != 56) update(&pad, 1);
    uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
    update(length, 8);
    Digest out{};
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<uint8_t>(state_[i] >> (24 - 8 * j));
    return out;
  }

 private:
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

  void compress(const uint8_t* block) {
    static constexpr uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = (uint32_t{block[4 * i]} << 24) | (uint32_t{block[4 * i + 1]} << 16) |
             (uint32_t{block[4 * i + 2]} << 8) | uint32_t{block[4 * i + 3]};
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a;
    state_[1] += b;
    state_[2] += c;
    state_[3] += d;
    state_[4] += e;
    state_[5] += f;
    state_[6] += g;
    state_[7] += h;
  }

  uint32_t state_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t buffer_[64] = {};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

inline std::string to_hex(const uint8_t* data, size_t bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (size_t i = 0; i < bytes; ++i) {
    out.push_back(digits[data[i] >> 4]);
    out.push_back(digits[data[i] & 0xF]);
  }
  return out;
}

using Credential = Sha256::Digest;

// What a connecting peer presents. Domain-separated from the shm name hash so
// the public name never equals the credential. Empty secret: all zeros.
inline Credential make_credential(const std::string& job_secret) {
  if (job_secret.empty()) return Credential{};
  return Sha256().update(std::string("accl-emu-credential-v1\n")).update(job_secret).finish();
}

// Compares every byte whatever the first difference, so the time taken does
// not tell a guesser how many leading bytes were right.
inline bool constant_time_equal(const uint8_t* a, const uint8_t* b, size_t bytes) {
  uint8_t diff = 0;
  for (size_t i = 0; i < bytes; ++i) diff = static_cast<uint8_t>(diff | (a[i] ^ b[i]));
  // The volatile read keeps the compiler from turning this into an early exit.
  volatile uint8_t sink = diff;
  return sink == 0;
}

// ---------------------------------------------------------------------------
// Handshake: the first bytes a connecting transport sends. Host byte order
// (all ranks of a job share one architecture, like WireHeader).
// ---------------------------------------------------------------------------
inline constexpr uint32_t kHelloMagic = 0x4C434341;  // "ACCL"
inline constexpr uint16_t kHelloVersion = 1;
enum HelloKind : uint8_t { kHelloTcp = 1, kHelloUdp = 2, kHelloShm = 3 };
enum HelloStatus : uint32_t { kHelloAccepted = 0, kHelloBadSecret = 1, kHelloMalformed = 2, kHelloRefused = 3 };

struct HelloIdentity {
  uint32_t magic = kHelloMagic;
  uint16_t version = kHelloVersion;
  uint8_t kind = 0;
  uint8_t reserved0 = 0;
  uint32_t listen_ip = 0;     // the sender's identity (identity_address): what the receiver reports as `from`
  uint16_t listen_port = 0;
  uint16_t reserved1 = 0;
  uint8_t credential[32] = {};
};
static_assert(sizeof(HelloIdentity) == 48);

struct HelloReply {
  uint32_t magic = kHelloMagic;
  uint32_t status = kHelloAccepted;
};

inline HelloIdentity make_identity(HelloKind kind, const NetAddress& listen, const Credential& credential) {
  HelloIdentity id;
  id.kind = kind;
  id.listen_ip = listen.ip;
  id.listen_port = listen.port;
  std::memcpy(id.credential, credential.data(), credential.size());
  return id;
}

// kHelloAccepted or why `id` is refused. `expected` is our own credential;
// `check_secret` false (our secret is empty) accepts any credential.
inline HelloStatus check_identity(const HelloIdentity& id, HelloKind kind, const Credential& expected,
                                  bool check_secret) {
  if (id.magic != kHelloMagic || id.version != kHelloVersion || id.kind != kind) return kHelloMalformed;
  // The identity is what the peer is delivered as (see identity_address):
  // a wildcard or port 0 names nobody.
  if (id.listen_ip == 0 || id.listen_port == 0) return kHelloMalformed;
  if (check_secret && !constant_time_equal(id.credential, expected.data(), expected.size())) return kHelloBadSecret;
  return kHelloAccepted;
}

inline const char* describe(HelloStatus s) {
  switch (s) {
    case kHelloAccepted: return "accepted";
    case kHelloBadSecret: return "wrong job secret";
    case kHelloMalformed: return "malformed handshake";
    case kHelloRefused: return "refused";
  }
  return "?";
}

inline constexpr size_t round_up64(size_t n) { return (n + 63) & ~size_t{63}; }

// ---------------------------------------------------------------------------
// Bounded I/O on non-blocking sockets
// ---------------------------------------------------------------------------
inline constexpr std::chrono::milliseconds kWaitSlice{100};

// Waits until `fd` reports one of `events`, the deadline passes or `cancel`
// becomes true; polls in slices so a cancel is seen within kWaitSlice.
// Returns the revents (0 on timeout or cancel).
inline short wait_fd(int fd, short events, Clock::time_point deadline, const std::atomic<bool>* cancel) {
  for (;;) {
    if (cancel != nullptr && cancel->load(std::memory_order_acquire)) return 0;
    pollfd p{fd, events, 0};
    int ms = wait_ms(deadline, kWaitSlice);
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return p.revents;
    if (rc < 0 && errno != EINTR) return POLLERR;
    if (ms == 0 || Clock::now() >= deadline) return 0;
  }
}

enum class IoStatus { ok, timeout, closed };

// Writes all `bytes` (MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE).
// `written` counts what went out, so callers know whether a stream is torn.
inline IoStatus write_all(int fd, const void* data, size_t bytes, Clock::time_point deadline,
                          const std::atomic<bool>* cancel, size_t& written) {
  const auto* p = static_cast<const char*>(data);
  written = 0;
  while (written < bytes) {
    ssize_t n = ::send(fd, p + written, bytes - written, MSG_NOSIGNAL);
    if (n > 0) {
      written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      short ev = wait_fd(fd, POLLOUT, deadline, cancel);
      if (ev == 0) return (cancel != nullptr && cancel->load()) ? IoStatus::closed : IoStatus::timeout;
      continue;
    }
    return IoStatus::closed;
  }
  return IoStatus::ok;
}

// Reads exactly `bytes` (stream sockets) or one datagram/record of exactly
// `bytes` (SOCK_SEQPACKET: pass seqpacket = true; a record of another size is
// reported as closed, i.e. a protocol error).
inline IoStatus read_exact(int fd, void* data, size_t bytes, Clock::time_point deadline,
                           const std::atomic<bool>* cancel, bool seqpacket = false) {
  auto* p = static_cast<char*>(data);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::recv(fd, p + got, bytes - got, seqpacket ? MSG_TRUNC : 0);
    if (n > 0) {
      if (seqpacket) return static_cast<size_t>(n) == bytes ? IoStatus::ok : IoStatus::closed;
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return IoStatus::closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      short ev = wait_fd(fd, POLLIN, deadline, cancel);
      if (ev == 0) return (cancel != nullptr && cancel->load()) ? IoStatus::closed : IoStatus::timeout;
      continue;
    }
    return IoStatus::closed;
  }
  return IoStatus::ok;
}

// True if the peer closed or reset a connection on which it never sends
// anything after the handshake (so "readable" can only mean end of stream).
inline bool peer_hung_up(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

// ---------------------------------------------------------------------------
// CRC32C (Castagnoli), used by the UDP framing: SSE4.2 instruction when the
// CPU has it, a table otherwise. crc32c(data) = crc32c_update(~0u, ...) ^ ~0u.
// ---------------------------------------------------------------------------
inline uint32_t crc32c_update_table(uint32_t crc, const void* data, size_t bytes) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) inline uint32_t crc32c_update_sse42(uint32_t crc, const void* data,
                                                                       size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = crc;
  for (; bytes >= 8; bytes -= 8, p += 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; bytes > 0; --bytes, ++p) c32 = __builtin_ia32_crc32qi(c32, *p);
  return c32;
}
#endif

inline uint32_t crc32c_update(uint32_t crc, const void* data, size_t bytes) {
#if defined(__x86_64__)
  static const bool has_sse42 = __builtin_cpu_supports("sse4.2");
  if (has_sse42) return crc32c_update_sse42(crc, data, bytes);
#endif
  return crc32c_update_table(crc, data, bytes);
}

// A mutex whose lock can give up at a deadline. Not std::timed_mutex: its
// try_lock_until uses pthread_mutex_clocklock, which ThreadSanitizer (GCC 12)
// does not intercept, so every later unlock is reported as an error.
// The lock is one atomic flag: an uncontended lock and unlock (every small
// message's send) is one exchange and one store, with no mutex round trip
// and no condition-variable notify. Only waiters use mutex_ and released_.
class TimedMutex {
 public:
  bool try_lock_until(Clock::time_point deadline) {
    if (try_lock()) return true;
    std::unique_lock lock(mutex_);
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    const bool locked = released_.wait_until(lock, deadline, [&] { return try_lock(); });
    waiters_.fetch_sub(1, std::memory_order_relaxed);
    return locked;
  }
  void lock() {
    if (try_lock()) return;
    std::unique_lock lock(mutex_);
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    released_.wait(lock, [&] { return try_lock(); });
    waiters_.fetch_sub(1, std::memory_order_relaxed);
  }
  bool try_lock() { return !locked_.exchange(true, std::memory_order_seq_cst); }
  void unlock() {
    locked_.store(false, std::memory_order_seq_cst);
    // Dekker-style with the waiter (both sides seq_cst): either its try_lock
    // after registering sees the flag clear, or we see it registered. It
    // registers and tests under mutex_, so taking mutex_ here means it is
    // either asleep on released_ (and gets the notify) or has not yet
    // tested the flag (and will see it clear).
    if (waiters_.load(std::memory_order_seq_cst) == 0) return;
    { std::lock_guard lock(mutex_); }
    released_.notify_all();
  }

 private:
  std::atomic<bool> locked_{false};
  std::atomic<int> waiters_{0};
  std::mutex mutex_;
  std::condition_variable released_;
};

// The outbound links of a connection-oriented transport (tcp, shm), one per
// peer address: a live link is reused, and connects to one peer are
// serialized (one connection per direction) without holding up connects to
// other peers. The owner's state mutex guards the table and the owner's
// stopped flag; connect() takes the mutex itself, close_all() runs under it.
template <typename LinkType>
class PeerLinks {
 public:
  PeerLinks(std::mutex& state_mutex, const bool& stopped) : state_mutex_(state_mutex), stopped_(stopped) {}

  // `dial(peer, deadline)` opens a new link or returns nullptr. nullptr here:
  // stopped, the peer busy being dialled past the deadline, or not reached.
  template <typename Dial>
  std::shared_ptr<LinkType> connect(const NetAddress& peer, Clock::time_point deadline, Dial&& dial) {
    std::shared_ptr<Slot> slot;
    {
      std::lock_guard lock(state_mutex_);
      if (stopped_) return nullptr;
      auto& entry = slots_[transport_detail::address_key(peer)];
      if (!entry) entry = std::make_shared<Slot>();
      slot = entry;
      if (slot->link && !slot->link->broken()) return slot->link;
    }
    std::unique_lock connecting(slot->connect_mutex, std::defer_lock);
    if (!connecting.try_lock_until(deadline)) return nullptr;
    {
      std::lock_guard lock(state_mutex_);
      if (slot->link && !slot->link->broken()) return slot->link;
    }
    std::shared_ptr<LinkType> link = dial(peer, deadline);
    if (!link) return nullptr;
    std::lock_guard lock(state_mutex_);
    if (stopped_) {
      link->close();
      return nullptr;
    }
    slot->link = link;
    return link;
  }

  // The caller holds the state mutex (stop()).
  void close_all() {
    for (auto& [key, slot] : slots_)
      if (slot->link) slot->link->close();
  }

 private:
  struct Slot {
    TimedMutex connect_mutex;
    std::shared_ptr<LinkType> link;  // guarded by state_mutex_
  };

  std::mutex& state_mutex_;
  const bool& stopped_;
  std::map<uint64_t, std::shared_ptr<Slot>> slots_;
};

// 64-byte aligned heap buffer (staging chunks, ring-size scratch).
struct AlignedBuffer {
  struct Free {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<std::byte[], Free> data;
  size_t size = 0;

  void ensure(size_t bytes) {
    if (bytes <= size) return;
    data.reset(new (std::align_val_t(64)) std::byte[bytes]);
    size = bytes;
  }
  std::byte* get() const { return data.get(); }
};

}  // namespace transport_detail
}  // namespace accl::emu
