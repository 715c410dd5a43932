// SPDX-License-Identifier: Apache-2.0
//
// A public ACCL simulation session for tests: one public cclo_emu process per
// rank (built from ../shared/peers/accl-public by its build.sh), on a block
// of free ports. cclo_emu takes ports P..P+4N-1 (commands on P+rank, emulated
// Ethernet on P+N+rank, kernel streams on P+2N.. and P+3N..). Output goes to
// <log_dir>/cclo_emu-<P>-rank<r>.log; the processes are killed (by pid) when
// the session object goes.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace accl::test {

// Why public cclo_emu cannot run here ("" when it can): the peer folder of
// public ACCL it is built from is absent, or it was not built yet.
inline std::string cclo_emu_missing(const std::string& cclo_emu, const std::string& peer_dir) {
  std::error_code ec;
  if (!cclo_emu.empty() && std::filesystem::is_regular_file(cclo_emu, ec)) return "";
  if (peer_dir.empty() || !std::filesystem::is_regular_file(peer_dir + "/build.sh", ec))
    return "no public ACCL at '" + peer_dir +
           "' (../shared/peers/accl-public beside the repository), so public cclo_emu cannot be built";
  return "public cclo_emu not built at '" + cclo_emu +
         "' (build it: ninja -C <builddir> accl-public-emu; scripts/run-tests.sh does)";
}

class CcloEmuSession {
 public:
  CcloEmuSession(const std::string& cclo_emu, int ranks, const std::string& log_dir) : ranks_(ranks) {
    base_port_ = free_port_block(4 * ranks);
    for (int r = 0; r < ranks; ++r) {
      const std::string log = log_dir + "/cclo_emu-" + std::to_string(base_port_) + "-rank" + std::to_string(r) + ".log";
      const std::vector<std::string> args = {cclo_emu, "-s", std::to_string(ranks), "-r", std::to_string(r), "-p",
                                             std::to_string(base_port_), "-c", "tcp", "-b"};
      const pid_t pid = ::fork();
      if (pid < 0) throw std::runtime_error("fork failed");
      if (pid == 0) {
        const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
          ::dup2(fd, 1);
          ::dup2(fd, 2);
        }
        std::vector<char*> argv;
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
      }
      pids_.push_back(pid);
      logs_.push_back(log);
    }
    wait_until_listening();
  }
  ~CcloEmuSession() {
    for (pid_t pid : pids_) ::kill(pid, SIGKILL);
    for (pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
  }
  CcloEmuSession(const CcloEmuSession&) = delete;
  CcloEmuSession& operator=(const CcloEmuSession&) = delete;

  int base_port() const { return base_port_; }
  std::string address() const { return "tcp://127.0.0.1:" + std::to_string(base_port_); }
  const std::vector<std::string>& logs() const { return logs_; }
  // "" while every process runs, else which one ended.
  std::string exited() const {
    for (size_t r = 0; r < pids_.size(); ++r) {
      int status = 0;
      if (::waitpid(pids_[r], &status, WNOHANG) == pids_[r])
        return "cclo_emu rank " + std::to_string(r) + " ended (status " + std::to_string(status) + "), see " + logs_[r];
    }
    return "";
  }

 private:
  // Whether `op` (bind or connect) succeeds for a TCP socket on 127.0.0.1:port.
  template <typename Op>
  static bool loopback_ok(int port, Op op) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = op(fd, reinterpret_cast<sockaddr*>(&a), socklen_t{sizeof a}) == 0;
    ::close(fd);
    return ok;
  }
  static bool port_free(int port) { return loopback_ok(port, ::bind); }
  static bool accepts(int port) { return loopback_ok(port, ::connect); }
  // cclo_emu binds its command port first, then spends ~5 s setting up before
  // it answers (the device's first request waits for that); a device made
  // before the bind would find nothing there.
  void wait_until_listening() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (int r = 0; r < ranks_; ++r) {
      while (!accepts(base_port_ + r)) {
        if (std::string gone = exited(); !gone.empty()) throw std::runtime_error(gone);
        if (std::chrono::steady_clock::now() > deadline)
          throw std::runtime_error("cclo_emu rank " + std::to_string(r) + " did not listen within 60 s, see " +
                                   logs_[r]);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
  static int free_port_block(int count) {
    constexpr int kLow = 21000, kSpan = 30000;
    const int start = kLow + static_cast<int>(::getpid() * 64 % kSpan);
    for (int tries = 0; tries < 200; ++tries) {
      const int base = kLow + (start - kLow + tries * 64) % kSpan;
      bool all = true;
      for (int p = base; p < base + count && all; ++p) all = port_free(p);
      if (all) return base;
    }
    throw std::runtime_error("no block of free ports for cclo_emu");
  }

  int ranks_;
  int base_port_ = 0;
  std::vector<pid_t> pids_;
  std::vector<std::string> logs_;
};

}  // namespace accl::test
