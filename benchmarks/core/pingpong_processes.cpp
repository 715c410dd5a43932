// SPDX-License-Identifier: Apache-2.0
//
// accl-bench-pingpong: one-way latency between two processes on this host,
// without MPI, at one of two layers:
//
//   --layer transport  an emulator transport alone (shared memory, or TCP):
//                      64-byte wire header + payload. Over shared memory each
//                      side polls its transport while it waits, as a driving
//                      host thread of the emulated CCLO does
//                      (driver_enters, poll); TCP delivers on its reader
//                      threads, so there the waiting side yields the core;
//   --layer driver     the ACCL driver API over the emulated CCLO (firmware,
//                      data plane and that transport): send() and recv() of
//                      host buffers, as an ACCL application would call them.
//
// The parent and a forked child play ping-pong; the parent times it. Every
// message carries its round number, which the receiver checks. With
// osu_latency natively and under libaccl_pmpi.so (the same two processes,
// plus MPI and the PMPI layer) the benchmark report builds the latency
// ladder: what each layer adds on the way from the wire to MPI_Recv.
#include "bench_util.hpp"

#include <accl/accl.hpp>
#include <accl_emu/emulator.hpp>
#include <accl_emu/transport_probe.hpp>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using accl::emu::TransportProbe;
using Clock = TransportProbe::Clock;

constexpr unsigned kWarmup = 200;

struct Args {
  std::string layer = "transport";
  std::string transport = "shm";
  unsigned iters = 20000;
  std::vector<size_t> sizes = {8, 1024, 4096};
  std::chrono::seconds timeout{20};
};

[[noreturn]] void usage(int status) {
  std::fprintf(status == 0 ? stdout : stderr,
               "Usage: accl-bench-pingpong [--layer transport|driver] [--transport shm|tcp] [--iters N]\n"
               "                           [--sizes LIST] [--timeout-s S]\n"
               "  One-way latency (round trip / 2) between two processes: an emulator transport alone, or\n"
               "  the ACCL driver API over the emulated CCLO. Defaults: transport layer, shm, 20000 round\n"
               "  trips per size after 200 untimed ones, sizes 8,1024,4096 (bytes; K/M suffixes).\n");
  std::exit(status);
}

void parse_into(Args& a, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string o = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(2);
      return argv[++i];
    };
    if (o == "-h" || o == "--help") usage(0);
    else if (o == "--layer") a.layer = next();
    else if (o == "--transport") a.transport = next();
    else if (o == "--iters") a.iters = static_cast<unsigned>(std::stoul(next()));
    else if (o == "--timeout-s") a.timeout = std::chrono::seconds(std::stoul(next()));
    else if (o == "--sizes") {
      a.sizes.clear();
      for (const std::string& item : accl::bench::split(next())) a.sizes.push_back(accl::bench::parse_bytes(item));
    } else usage(2);
  }
}

Args parse_args(int argc, char** argv) {
  Args a;
  try {
    parse_into(a, argc, argv);
  } catch (const std::exception& e) {  // stoul / parse_bytes on a bad value
    std::fprintf(stderr, "accl-bench-pingpong: %s\n", e.what());
    usage(2);
  }
  if ((a.layer != "transport" && a.layer != "driver") || (a.transport != "shm" && a.transport != "tcp") ||
      a.sizes.empty() || a.iters == 0)
    usage(2);
  return a;
}

// The two processes talk through a pair of pipes before and after the
// measurement (addresses, "ready", "done").
struct Pipe {
  int to_peer = -1;
  int from_peer = -1;
  void put(const void* p, size_t n) const {
    if (::write(to_peer, p, n) != static_cast<ssize_t>(n)) throw std::runtime_error("pipe write failed");
  }
  void get(void* p, size_t n) const {
    if (::read(from_peer, p, n) != static_cast<ssize_t>(n)) throw std::runtime_error("pipe read failed (peer gone)");
  }
  void sync() const {
    char token = 1;
    put(&token, 1);
    get(&token, 1);
  }
};

// ---------------------------------------------------------------------------
// --layer transport
// ---------------------------------------------------------------------------

std::vector<double> play_transport(const Args& a, int rank, const Pipe& pipe, size_t bytes) {
  TransportProbe t(accl::emu::parse_transport(a.transport), bytes, 2);
  const TransportProbe::Address mine = t.local_address();
  pipe.put(&mine, sizeof mine);
  TransportProbe::Address peer{};
  pipe.get(&peer, sizeof peer);
  t.connect(peer, Clock::now() + a.timeout);
  pipe.sync();  // both linked: the peer's inbound ring exists

  t.driver_enters();  // a host thread drives: the reader threads leave the rings to our polls
  std::vector<double> one_way;
  one_way.reserve(a.iters);
  uint64_t expected = 0;
  for (unsigned i = 0; i < kWarmup + a.iters; ++i) {
    const auto t0 = Clock::now();
    if (rank == 1) {
      if (!t.await(++expected, Clock::now() + a.timeout))
        throw std::runtime_error("echo side: message lost or timed out");
      if (t.last_round() != i || (bytes >= 4 && t.first_word() != i))
        throw std::runtime_error("echo side: wrong round or payload");
    }
    if (!t.send(i, Clock::now() + a.timeout)) throw std::runtime_error("send failed");
    if (rank == 0) {
      if (!t.await(++expected, Clock::now() + a.timeout))
        throw std::runtime_error("timing side: echo lost or timed out");
      if (t.last_round() != i || (bytes >= 4 && t.first_word() != i))
        throw std::runtime_error("timing side: wrong round or payload");
      if (i >= kWarmup) one_way.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / 2);
    }
  }
  t.driver_leaves();
  pipe.sync();  // neither side stops while the other may still read
  t.stop();
  return one_way;
}

// ---------------------------------------------------------------------------
// --layer driver
// ---------------------------------------------------------------------------

std::vector<double> play_driver(const Args& a, int rank, const Pipe& pipe, size_t bytes) {
  accl::emu::EmuOptions options = accl::emu::options_from_environment();
  options.transport = accl::emu::parse_transport(a.transport);
  options.host_processes = 2;  // what the PMPI layer tells it for 2 ranks on one host
  auto device = accl::emu::create_device(options);
  const accl::emu::Endpoint mine = accl::emu::endpoint(*device);
  const uint16_t my_port = mine.port;
  pipe.put(&my_port, sizeof my_port);
  uint16_t peer_port = 0;
  pipe.get(&peer_port, sizeof peer_port);
  std::vector<accl::rank_t> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r].ip = mine.ip;
    ranks[r].port = r == rank ? my_port : peer_port;
    ranks[r].session_id = r;
  }
  accl::ACCL driver(std::move(device));
  driver.initialize(ranks, rank, accl::InitOptions{});
  driver.set_timeout(a.timeout);
  // initialize() resets the CCLO's data path (soft reset), which drops what
  // arrived before: the first ping waits until both sides are initialized.
  // (Without this, the TCP rung lost it now and then in CI: both sides then
  // waited for each other until the receive timeout.)
  pipe.sync();

  std::vector<int32_t> memory(std::max<size_t>(bytes / 4, 1), 0);
  auto buf = driver.create_buffer_host<int32_t>(memory.data(), memory.size());
  constexpr unsigned kTag = 5;
  std::vector<double> one_way;
  one_way.reserve(a.iters);
  for (unsigned i = 0; i < kWarmup + a.iters; ++i) {
    const auto t0 = Clock::now();
    if (!accl::bench::pingpong_round(driver, *buf, memory, rank, i, kTag))
      throw std::runtime_error(rank == 0 ? "timing side: wrong echo" : "echo side: wrong payload");
    if (rank == 0 && i >= kWarmup) one_way.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / 2);
  }
  pipe.sync();  // both done before either tears its CCLO down
  buf.reset();
  driver.deinit();
  return one_way;
}

std::vector<double> play(const Args& a, int rank, const Pipe& pipe, size_t bytes) {
  return a.layer == "driver" ? play_driver(a, rank, pipe, bytes) : play_transport(a, rank, pipe, bytes);
}

// Runs one side in a fresh child process; rank 0 writes its one-way times to
// `results` (count, then the values). The parent stays single-threaded, so
// every fork copies a process without threads.
// `others`: the pipe ends this side must not hold, or it would never see the
// end of a peer that died (its pipe reads are the only waits without a bound).
// A child whose parent died (killed at a report's timeout, say) dies too,
// instead of spinning on and distorting whatever runs next. -1: no fork.
pid_t spawn(const Args& a, int rank, const Pipe& pipe, int results, std::initializer_list<int> others, size_t bytes) {
  std::fflush(stdout);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child != 0) return child;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) std::_Exit(1);  // the parent died before prctl
  for (int fd : others) ::close(fd);
  try {
    const std::vector<double> t = play(a, rank, pipe, bytes);
    if (rank == 0) {
      const uint64_t n = t.size();
      if (::write(results, &n, sizeof n) != static_cast<ssize_t>(sizeof n) ||
          ::write(results, t.data(), n * sizeof(double)) != static_cast<ssize_t>(n * sizeof(double)))
        throw std::runtime_error("cannot report the results");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accl-bench-pingpong (rank %d, %zu B): %s\n", rank, bytes, e.what());
    std::_Exit(1);
  }
  std::_Exit(0);
}

std::vector<double> read_results(int fd) {
  uint64_t n = 0;
  if (::read(fd, &n, sizeof n) != static_cast<ssize_t>(sizeof n) || n > (uint64_t{1} << 32)) return {};
  std::vector<double> t(n);
  size_t got = 0;
  auto* dst = reinterpret_cast<char*>(t.data());
  while (got < n * sizeof(double)) {
    const ssize_t r = ::read(fd, dst + got, n * sizeof(double) - got);
    if (r <= 0) return {};
    got += static_cast<size_t>(r);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  std::printf("# accl-bench-pingpong: %s layer over %s, two processes, one-way latency = round trip / 2\n",
              a.layer.c_str(), a.transport.c_str());
  std::printf("%10s %7s %12s %12s %12s\n", "bytes", "iters", "median(us)", "min(us)", "mean(us)");
  int failures = 0;
  for (size_t bytes : a.sizes) {
    int zero_to_one[2], one_to_zero[2], results[2];
    if (::pipe(zero_to_one) != 0 || ::pipe(one_to_zero) != 0 || ::pipe(results) != 0) {
      std::perror("pipe");
      return 1;
    }
    // Each side keeps only its own ends (rank 1 reports nothing).
    const pid_t rank0 = spawn(a, 0, Pipe{zero_to_one[1], one_to_zero[0]}, results[1],
                              {zero_to_one[0], one_to_zero[1], results[0]}, bytes);
    const pid_t rank1 = rank0 < 0 ? -1
                                  : spawn(a, 1, Pipe{one_to_zero[1], zero_to_one[0]}, -1,
                                          {zero_to_one[1], one_to_zero[0], results[0], results[1]}, bytes);
    for (int fd : {zero_to_one[0], zero_to_one[1], one_to_zero[0], one_to_zero[1], results[1]}) ::close(fd);
    if (rank0 < 0 || rank1 < 0) std::perror("fork");
    std::vector<double> t = rank1 < 0 ? std::vector<double>{} : read_results(results[0]);  // empty if rank 0 failed
    ::close(results[0]);
    bool ok = rank0 > 0 && rank1 > 0;
    for (pid_t child : {rank0, rank1}) {
      int status = 0;
      if (child > 0)
        ok = ::waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0 && ok;
    }
    // The driver layer moves whole 4-byte elements (at least one).
    const size_t sent = a.layer == "driver" ? std::max<size_t>(bytes / 4, 1) * 4 : bytes;
    if (!ok || t.empty()) {
      ++failures;
      std::printf("%10zu %7s %12s\n", sent, "-", "FAILED");
      continue;
    }
    const accl::bench::Sample s = accl::bench::summarize(t);
    std::printf("%10zu %7u %12.3f %12.3f %12.3f\n", sent, s.iters, s.median_s * 1e6, s.min_s * 1e6, s.mean_s * 1e6);
  }
  return failures == 0 ? 0 : 1;
}
