// SPDX-License-Identifier: Apache-2.0
//
// Runs a command beside a public ACCL simulation session:
//   sim_mpi_launcher CCLO_EMU PEER_DIR RANKS TIMEOUT_S -- COMMAND ARGS...
// starts RANKS public cclo_emu processes on free ports (cclo_emu_session.hpp),
// runs COMMAND with ACCL_SIM_ADDRESS naming rank 0's instance (the PMPI
// layer's ACCL_DEVICE=sim then connects rank r to instance r), and returns
// its exit status. COMMAND runs in a process group of its own, killed when
// it outlives TIMEOUT_S; the session goes with the launcher. On failure the
// tail of every cclo_emu log follows the command's output.
//
// Exit 77 (skipped) with the reason when cclo_emu cannot run here: built
// without the simulator-session device, public ACCL's folder absent, or
// cclo_emu not built (ninja -C <builddir> accl-public-emu).
#include "cclo_emu_session.hpp"

#include <accl_hw/sim.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kSkip = 77;

std::string log_tail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

// Runs argv in a new process group; its exit status, or 124 after `timeout`
// (the group is killed then).
int run(const std::vector<std::string>& args, std::chrono::seconds timeout) {
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::cerr << "sim_mpi_launcher: fork failed\n";
    return 1;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::cerr << "sim_mpi_launcher: cannot run " << args[0] << "\n";
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (std::chrono::steady_clock::now() > deadline) {
      std::cerr << "sim_mpi_launcher: " << args[0] << " still running after " << timeout.count()
                << " s: killing its process group\n";
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7 || std::string(argv[5]) != "--") {
    std::cerr << "usage: sim_mpi_launcher CCLO_EMU PEER_DIR RANKS TIMEOUT_S -- COMMAND ARGS...\n";
    return 2;
  }
  const std::string cclo_emu = argv[1], peer = argv[2];
  const int ranks = std::atoi(argv[3]);
  const auto timeout = std::chrono::seconds(std::atoi(argv[4]));
  if (ranks < 1 || timeout.count() < 1) {
    std::cerr << "sim_mpi_launcher: RANKS and TIMEOUT_S must be positive\n";
    return 2;
  }
  if (!accl::hw::built_with_sim()) {
    std::cout << "SKIP: libaccl_hw was built without ZeroMQ/nlohmann-json (no simulator-session device)\n";
    return kSkip;
  }
  if (const std::string why = accl::test::cclo_emu_missing(cclo_emu, peer); !why.empty()) {
    std::cout << "SKIP: " << why << "\n";
    return kSkip;
  }
  const std::vector<std::string> command(argv + 6, argv + argc);
  try {
    accl::test::CcloEmuSession session(cclo_emu, ranks, ACCL_SIM_TEST_LOG_DIR);
    ::setenv("ACCL_SIM_ADDRESS", session.address().c_str(), 1);
    std::cout << "sim_mpi_launcher: " << ranks << " cclo_emu at " << session.address() << std::endl;
    const int status = run(command, timeout);
    const std::string gone = session.exited();
    if (!gone.empty()) std::cerr << "sim_mpi_launcher: " << gone << "\n";
    if (status != 0 || !gone.empty()) {
      for (const auto& log : session.logs()) std::cerr << "---- " << log << " (tail)\n" << log_tail(log) << "\n";
      return status != 0 ? status : 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "sim_mpi_launcher: " << e.what() << "\n";
    return 1;
  }
}
