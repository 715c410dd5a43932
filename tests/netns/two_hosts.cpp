// SPDX-License-Identifier: Apache-2.0
//
// two-hosts: one rank of a 2-rank ACCL job on the emulator's TCP transport,
// without MPI: every rank is told all endpoints on the command line (fixed
// ports), so run_netns.sh can start rank 0 and rank 1 in two network
// namespaces joined by a veth pair, i.e. two "hosts".
//
//   two-hosts --rank R --ranks IP0:PORT0,IP1:PORT1 --mode basic|loop|late [--loop-seconds S] [--loop-count N]
//
// Environment: ACCL_EMU_TRANSPORT=tcp, ACCL_EMU_BIND_ADDRESS=<this host's IP or 0.0.0.0>,
// ACCL_TIMEOUT_MS (the script uses 3000).
//
// basic: send/recv in both directions (eager and rendezvous sizes), allreduce,
//   bcast from each root, fp16-compressed allreduce, barrier; every result is
//   checked. Exit 0 when all were right.
// loop:  allreduces in a loop (int32; N elements each, default a mix of eager
//   and rendezvous sizes), each checked; prints "LOOP_RUNNING" once the
//   loop runs (the script then takes the link down). Exit 0 only when a call
//   fails with accl::DeviceError carrying LINK_ERROR or RECEIVE_TIMEOUT_ERROR
//   within the bound below: no error, another error type (TimeoutError: the
//   driver gave up before the device reported), other bits, or a late error
//   exit 1. Teardown after the error is timed too (it must not hang).
// late:  see run_late(): a receive that failed must not see its buffer
//   written afterwards.
//
// Before the first ACCL call the ranks meet over a plain TCP socket (rank 0
// listens on its ACCL port + 1000), so a slow start of one process cannot
// eat into the first call's timeout.
#include <accl/abi.hpp>
#include <accl/accl.hpp>
#include <accl/error.hpp>
#include <accl_emu/emulator.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using accl::ACCL;
using accl::dataType;
using accl::reduceFunction;
using Clock = std::chrono::steady_clock;

int g_rank = 0;

[[noreturn]] void die(const std::string& msg) {
  std::printf("two-hosts rank %d: FAIL: %s\n", g_rank, msg.c_str());
  std::fflush(stdout);
  std::_Exit(1);
}

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Endpoint {
  std::string ip;
  uint16_t port = 0;
};

std::vector<Endpoint> parse_ranks(const std::string& s) {
  std::vector<Endpoint> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto colon = item.rfind(':');
    if (colon == std::string::npos) die("bad endpoint '" + item + "' (want IP:PORT)");
    out.push_back(Endpoint{item.substr(0, colon), static_cast<uint16_t>(std::stoul(item.substr(colon + 1)))});
  }
  return out;
}

// Out-of-band start barrier: rank 0 accepts one connection, rank 1 connects
// (retrying while rank 0 is not up yet). Both then exchange one byte.
void start_barrier(const std::vector<Endpoint>& eps, double max_seconds) {
  const uint16_t port = static_cast<uint16_t>(eps[0].port + 1000);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, eps[0].ip.c_str(), &sa.sin_addr) != 1) die("bad IP " + eps[0].ip);
  const auto start = Clock::now();
  int fd = -1;
  if (g_rank == 0) {
    const int ls = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(ls, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(ls, 1) != 0)
      die(std::string("start barrier: bind/listen: ") + std::strerror(errno));
    timeval tv{static_cast<time_t>(max_seconds), 0};
    ::setsockopt(ls, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);  // bounds accept()
    fd = ::accept(ls, nullptr, nullptr);
    ::close(ls);
    if (fd < 0) die("start barrier: rank 1 did not connect within " + std::to_string(max_seconds) + " s");
  } else {
    while (true) {
      fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) break;
      ::close(fd);
      if (since(start) > max_seconds) die("start barrier: cannot reach rank 0 at " + eps[0].ip);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  char b = 'x';
  if (::send(fd, &b, 1, MSG_NOSIGNAL) != 1 || ::recv(fd, &b, 1, MSG_WAITALL) != 1) die("start barrier: exchange failed");
  ::close(fd);
}

int g_failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    ++g_failures;
    std::printf("two-hosts rank %d: MISMATCH %s\n", g_rank, what.c_str());
  }
}

float fval(unsigned rank, size_t i, unsigned salt) {
  return static_cast<float>((rank + 1) * 1000 + (i * 7 + salt) % 997);
}

void run_basic(ACCL& a) {
  const unsigned r = static_cast<unsigned>(g_rank), peer = 1 - r;
  // Eager (<= 1 KiB), exactly one RX buffer, just above, rendezvous in one and many pieces.
  for (size_t n : {size_t{1}, size_t{17}, size_t{256}, size_t{257}, size_t{5000}, size_t{300000}}) {
    for (unsigned from = 0; from < 2; ++from) {
      auto b = a.create_buffer<float>(n);
      if (r == from) {
        for (size_t i = 0; i < n; ++i) (*b)[i] = fval(r, i, 1);
        a.send(*b, static_cast<unsigned>(n), peer, 11);
      } else {
        a.recv(*b, static_cast<unsigned>(n), from, 11);
        size_t bad = 0;
        for (size_t i = 0; i < n; ++i) bad += (*b)[i] != fval(from, i, 1);
        expect(bad == 0, "send/recv " + std::to_string(from) + "->" + std::to_string(r) + " n=" + std::to_string(n));
      }
    }
  }
  std::printf("two-hosts rank %d: send/recv both directions ok\n", g_rank);

  for (size_t n : {size_t{1}, size_t{1000}, size_t{100000}}) {
    auto s = a.create_buffer<int64_t>(n), d = a.create_buffer<int64_t>(n);
    for (size_t i = 0; i < n; ++i) (*s)[i] = (int64_t{1} << 40) * (r + 1) + static_cast<int64_t>(i);
    a.allreduce(*s, *d, static_cast<unsigned>(n), reduceFunction::SUM);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += (*d)[i] != (int64_t{1} << 40) * 3 + 2 * static_cast<int64_t>(i);
    expect(bad == 0, "allreduce int64 SUM n=" + std::to_string(n));

    auto fs = a.create_buffer<double>(n), fd = a.create_buffer<double>(n);
    for (size_t i = 0; i < n; ++i) (*fs)[i] = (r == i % 2) ? 0.5 * static_cast<double>(i) : -1.0;
    a.allreduce(*fs, *fd, static_cast<unsigned>(n), reduceFunction::MAX);
    bad = 0;
    for (size_t i = 0; i < n; ++i) bad += (*fd)[i] != 0.5 * static_cast<double>(i);
    expect(bad == 0, "allreduce float64 MAX n=" + std::to_string(n));
  }
  std::printf("two-hosts rank %d: allreduce ok\n", g_rank);

  for (unsigned root = 0; root < 2; ++root)
    for (size_t n : {size_t{17}, size_t{100000}}) {
      auto b = a.create_buffer<float>(n);
      for (size_t i = 0; i < n; ++i) (*b)[i] = r == root ? fval(root, i, 2) : -1.0f;
      a.bcast(*b, static_cast<unsigned>(n), root);
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) bad += (*b)[i] != fval(root, i, 2);
      expect(bad == 0, "bcast root " + std::to_string(root) + " n=" + std::to_string(n));
    }
  std::printf("two-hosts rank %d: bcast ok\n", g_rank);

  {
    const size_t n = 5000;
    auto s = a.create_buffer<float>(n), d = a.create_buffer<float>(n);
    for (size_t i = 0; i < n; ++i) (*s)[i] = 1.0f + static_cast<float>(i % 1000) / 1000.0f + 0.1f * static_cast<float>(r);
    a.allreduce(*s, *d, static_cast<unsigned>(n), reduceFunction::SUM, accl::GLOBAL_COMM, false, false, dataType::float16);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const double want = 2.0 + 2.0 * static_cast<double>(i % 1000) / 1000.0 + 0.1;
      bad += std::fabs((*d)[i] - want) > 4 * std::ldexp(1.0, -11) * want;
    }
    expect(bad == 0, "allreduce float32 with fp16 wire n=5000");
  }
  for (int i = 0; i < 20; ++i) a.barrier();
  std::printf("two-hosts rank %d: compressed allreduce and barrier ok\n", g_rank);
}

// Returns the process exit code.
int run_loop(ACCL& a, double loop_seconds, size_t fixed_count) {
  const unsigned r = static_cast<unsigned>(g_rank);
  const auto timeout = std::chrono::duration<double>(a.timeout()).count();
  // The device reports a wait that passes its deadline; allow the driver's
  // own margin (timeout / 4 + 0.1 s) and scheduling slack on a loaded host.
  const double bound = 2 * timeout + 2.0;
  const auto start = Clock::now();
  uint64_t iterations = 0;
  bool announced = false;
  while (since(start) < loop_seconds) {
    // Mostly eager, every 4th in rendezvous pieces: the link may go down in
    // either protocol.
    const size_t n = fixed_count != 0 ? fixed_count : iterations % 4 == 3 ? 20000 : 1 + iterations % 200;
    auto s = a.create_buffer<int32_t>(n), d = a.create_buffer<int32_t>(n);
    for (size_t i = 0; i < n; ++i) (*s)[i] = static_cast<int32_t>(iterations + i * (r + 1));
    const auto call_start = Clock::now();
    try {
      a.allreduce(*s, *d, static_cast<unsigned>(n), reduceFunction::SUM);
    } catch (const accl::DeviceError& e) {
      const double took = since(call_start);
      const uint32_t bits = e.retcode();
      const bool named = (bits & (accl::abi::kLinkError | accl::abi::kReceiveTimeoutError)) != 0;
      std::printf("two-hosts rank %d: after %llu good allreduces: accl::DeviceError after %.2f s (bound %.1f s): %s\n",
                  g_rank, static_cast<unsigned long long>(iterations), took, bound, e.what());
      std::fflush(stdout);
      if (!named) return 1;
      if (took > bound) {
        std::printf("two-hosts rank %d: FAIL: the error came later than %.1f s\n", g_rank, bound);
        return 1;
      }
      return 0;
    } catch (const accl::Error& e) {
      std::printf("two-hosts rank %d: FAIL: expected accl::DeviceError (LINK_ERROR or RECEIVE_TIMEOUT_ERROR), got "
                  "%s after %.2f s: %s\n",
                  g_rank, dynamic_cast<const accl::TimeoutError*>(&e) ? "accl::TimeoutError" : "another accl::Error",
                  since(call_start), e.what());
      return 1;
    }
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += (*d)[i] != static_cast<int32_t>(2 * iterations + i * 3);
    if (bad) {
      std::printf("two-hosts rank %d: FAIL: allreduce %llu: %zu wrong elements\n", g_rank,
                  static_cast<unsigned long long>(iterations), bad);
      return 1;
    }
    ++iterations;
    if (!announced && iterations >= 20) {
      std::printf("LOOP_RUNNING\n");
      std::fflush(stdout);
      announced = true;
    }
  }
  std::printf("two-hosts rank %d: FAIL: no error within %.0f s (%llu allreduces): was the link taken down?\n",
              g_rank, loop_seconds, static_cast<unsigned long long>(iterations));
  return 1;
}

// late: rank 0 sends one 64 MiB message; rank 1 receives it into a host-only
// buffer. The script takes the link down mid-transfer (after "RECV_POSTED"),
// waits for rank 1's receive to fail ("CALL_FAILED"), brings the link back
// and lets the queued bytes flow. Rank 1 refills its buffer with a canary as
// soon as the receive failed and checks, 6 s later, that no byte of it was
// overwritten: once a call has failed, its buffer belongs to the user again.
int run_late(ACCL& a) {
  const size_t n = size_t{16} << 20;  // floats: 64 MiB
  if (g_rank == 0) {
    auto s = a.create_buffer<float>(n);
    for (size_t i = 0; i < n; ++i) (*s)[i] = 1.0f;
    std::printf("SEND_STARTED\n");
    try {
      a.send(*s, static_cast<unsigned>(n), 1, 5);
      std::printf("two-hosts rank 0: send completed\n");
    } catch (const accl::Error& e) {
      std::printf("two-hosts rank 0: send failed: %s\n", e.what());
    }
    std::this_thread::sleep_for(std::chrono::seconds(8));  // keep the socket open while rank 1 checks
    return 0;
  }
  auto d = a.create_buffer_host<float>(n);
  for (size_t i = 0; i < n; ++i) (*d)[i] = 0.0f;
  std::printf("RECV_POSTED\n");
  try {
    a.recv(*d, static_cast<unsigned>(n), 0, 5);
    std::printf("two-hosts rank 1: the receive completed (the link went down too late?)\n");
    return 1;
  } catch (const accl::Error& e) {
    std::printf("two-hosts rank 1: receive failed as expected: %s\n", e.what());
  }
  constexpr float kCanary = -7.0f;
  for (size_t i = 0; i < n; ++i) (*d)[i] = kCanary;
  std::printf("CALL_FAILED\n");
  std::this_thread::sleep_for(std::chrono::seconds(6));
  size_t changed = 0, first = n;
  for (size_t i = 0; i < n; ++i)
    if ((*d)[i] != kCanary) {
      if (first == n) first = i;
      ++changed;
    }
  if (changed) {
    std::printf("two-hosts rank 1: FAIL: %zu elements of the buffer (first at %zu) were written after the receive had "
                "already failed\n", changed, first);
    return 1;
  }
  std::printf("two-hosts rank 1: buffer untouched after the failure\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string ranks_arg, mode = "basic";
  double loop_seconds = 60;
  size_t loop_count = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--rank") g_rank = std::stoi(v);
    else if (k == "--ranks") ranks_arg = v;
    else if (k == "--mode") mode = v;
    else if (k == "--loop-seconds") loop_seconds = std::stod(v);
    else if (k == "--loop-count") loop_count = std::stoul(v);
    else die("unknown option " + k);
  }
  const std::vector<Endpoint> eps = parse_ranks(ranks_arg);
  if (eps.size() != 2 || g_rank < 0 || g_rank > 1) die("need --rank 0|1 and --ranks IP0:PORT0,IP1:PORT1");
  if (mode != "basic" && mode != "loop" && mode != "late") die("--mode must be basic, loop or late");
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  accl::emu::EmuOptions eo = accl::emu::options_from_environment();
  if (eo.transport != accl::emu::TransportKind::tcp) die("run with ACCL_EMU_TRANSPORT=tcp");
  // 0.0.0.0 listens on every interface; the CCLO is then known by this
  // host's address, which must be the one the peer has in its records.
  const bool wildcard = eo.bind_address == "0.0.0.0";
  if (eo.bind_address != eps[g_rank].ip && !wildcard)
    die("ACCL_EMU_BIND_ADDRESS (" + eo.bind_address + ") is not this rank's IP " + eps[g_rank].ip);
  eo.port = eps[g_rank].port;
  eo.bank_bytes = size_t{1} << 30;

  std::unique_ptr<ACCL> a;
  try {
    auto device = accl::emu::create_device(eo);
    const accl::emu::Endpoint me = accl::emu::endpoint(*device);
    if (me.ip != eps[g_rank].ip || me.port != eps[g_rank].port)
      die("bound to " + eo.bind_address + ", the CCLO is known as " + me.ip + ":" + std::to_string(me.port) +
          ", not as this rank's " + eps[g_rank].ip + ":" + std::to_string(eps[g_rank].port));
    a = std::make_unique<ACCL>(std::move(device));
    std::vector<accl::rank_t> ranks(2);
    for (int q = 0; q < 2; ++q) {
      ranks[q].ip = eps[q].ip;
      ranks[q].port = eps[q].port;
    }
    a->initialize(ranks, g_rank, accl::InitOptions{});
  } catch (const std::exception& e) {
    die(std::string("setup: ") + e.what());
  }
  std::printf("two-hosts rank %d: listening on %s:%u (tcp), timeout %lld ms, mode %s\n", g_rank, eo.bind_address.c_str(),
              eo.port, static_cast<long long>(a->timeout().count() / 1000), mode.c_str());
  start_barrier(eps, 60);

  int rc = 0;
  if (mode == "basic") {
    try {
      run_basic(*a);
    } catch (const std::exception& e) {
      die(std::string("basic: ") + e.what());
    }
    rc = g_failures == 0 ? 0 : 1;
    std::printf("two-hosts rank %d: %s\n", g_rank, rc == 0 ? "PASS" : "FAIL");
  } else if (mode == "late") {
    rc = run_late(*a);
  } else {
    rc = run_loop(*a, loop_seconds, loop_count);
  }
  // Teardown must not hang either (also after a broken link).
  const auto t = Clock::now();
  a.reset();
  std::printf("two-hosts rank %d: teardown took %.2f s\n", g_rank, since(t));
  return rc;
}
