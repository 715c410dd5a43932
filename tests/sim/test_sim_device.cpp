// SPDX-License-Identifier: Apache-2.0
//
// The simulator-session device without a session: its address grammar, its
// settings, and a session that is not there (nothing on the port, or a port
// that accepts connections but never answers) as a named error within the
// reply timeout, never a hang.
#include "scoped_env.hpp"

#include <accl_hw/sim.hpp>

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <stdexcept>

namespace {

namespace hw = accl::hw;
using namespace std::chrono_literals;
using accl::test::ScopedEnv;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const hw::SimError& e) {
    return e.what();
  }
  return "";
}

// A listening TCP socket on a free loopback port that never accepts: the
// kernel completes connections into its backlog, nobody speaks.
class SilentListener {
 public:
  SilentListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("cannot listen on a loopback port");
    port_ = ntohs(a.sin_port);
  }
  ~SilentListener() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A loopback port nothing listens on (bound, then released).
int closed_port() {
  const SilentListener l;
  return l.port();
}

TEST(SimDevice, AddressGrammar) {
  const hw::SimAddress a = hw::parse_sim_address("tcp://localhost:5500");
  EXPECT_EQ(a.host, "localhost");
  EXPECT_EQ(a.port, 5500u);
  EXPECT_EQ(hw::sim_endpoint(a, 0), "tcp://localhost:5500");
  EXPECT_EQ(hw::sim_endpoint(a, 3), "tcp://localhost:5503");
  EXPECT_EQ(hw::parse_sim_address("tcp://10.1.2.3:1").host, "10.1.2.3");

  EXPECT_EQ(error_of([] { hw::parse_sim_address("localhost:5500"); }),
            "ACCL_SIM_ADDRESS=localhost:5500: not a tcp:// address; allowed: tcp://host:port (e.g. "
            "tcp://127.0.0.1:5500, the port of rank 0's simulator instance)");
  for (const char* bad : {"tcp://", "tcp://host", "tcp://:5500", "tcp://host:", "tcp://host:0", "tcp://host:65536",
                          "tcp://host:55x", "tcp://ho st:5500", "ipc:///tmp/x"})
    EXPECT_EQ(error_of([&] { hw::parse_sim_address(bad); }).rfind(std::string("ACCL_SIM_ADDRESS=") + bad + ": ", 0),
              0u)
        << bad;
  EXPECT_EQ(error_of([&] { hw::sim_endpoint(hw::parse_sim_address("tcp://h:65535"), 1); }),
            "simulator session at tcp://h:65535: rank 1 would listen on port 65536, beyond 65535");
}

TEST(SimDevice, OptionsFromTheEnvironment) {
  {
    const hw::SimOptions o = hw::sim_options_from_environment(1, 2);
    EXPECT_EQ(o.address, "tcp://127.0.0.1:5500");
    EXPECT_EQ(o.reply_timeout, 30000ms);
    EXPECT_EQ(o.rank, 1);
    EXPECT_EQ(o.size, 2);
  }
  ScopedEnv address("ACCL_SIM_ADDRESS", "tcp://sim-host:6000");
  ScopedEnv timeout("ACCL_SIM_REPLY_TIMEOUT_MS", "1500");
  const hw::SimOptions o = hw::sim_options_from_environment(0, 4);
  EXPECT_EQ(o.address, "tcp://sim-host:6000");
  EXPECT_EQ(o.reply_timeout, 1500ms);

  ScopedEnv bad("ACCL_SIM_ADDRESS", "sim-host:6000");
  EXPECT_EQ(error_of([] { hw::validate_settings(); }).rfind("ACCL_SIM_ADDRESS=sim-host:6000: not a tcp:// address", 0),
            0u);
}

TEST(SimDevice, NothingOnThePortIsANamedErrorAtOnce) {
  if (!hw::built_with_sim()) GTEST_SKIP() << "built without ZeroMQ";
  const int port = closed_port();
  hw::SimOptions o;
  o.address = "tcp://127.0.0.1:" + std::to_string(port - 1);
  o.rank = 1;
  o.size = 2;
  o.reply_timeout = 20s;
  const auto start = std::chrono::steady_clock::now();
  const std::string error = error_of([&] { hw::make_sim_device(o); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << "a refused connection needs no timeout";
  EXPECT_EQ(error.rfind("no simulator session at tcp://127.0.0.1:" + std::to_string(port) + ": Connection refused", 0),
            0u)
      << error;
  EXPECT_NE(error.find("cclo_emu -s 2 -r 1 -p " + std::to_string(port - 1)), std::string::npos) << error;
}

TEST(SimDevice, APortThatNeverAnswersIsANamedErrorWithinTheReplyTimeout) {
  if (!hw::built_with_sim()) GTEST_SKIP() << "built without ZeroMQ";
  const SilentListener silent;
  hw::SimOptions o;
  o.address = "tcp://127.0.0.1:" + std::to_string(silent.port());
  o.reply_timeout = 400ms;
  const auto start = std::chrono::steady_clock::now();
  const std::string error = error_of([&] { hw::make_sim_device(o); });
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 400ms);
  EXPECT_LT(took, 3s);
  EXPECT_EQ(error.rfind("no simulator session at tcp://127.0.0.1:" + std::to_string(silent.port()) + ": ", 0), 0u)
      << error;
  EXPECT_NE(error.find("no reply to an MMIO read of 0x1ff8 within 400 ms (ACCL_SIM_REPLY_TIMEOUT_MS)"),
            std::string::npos)
      << error;
}

TEST(SimDevice, BadOptionsAreRefusedBeforeConnecting) {
  hw::SimOptions o;
  o.rank = 2;
  o.size = 2;
  EXPECT_EQ(error_of([&] { hw::make_sim_device(o); }), "simulator session: rank 2 is not one of 2 ranks");
  o.rank = 0;
  o.address = "tcp://127.0.0.1";
  EXPECT_EQ(error_of([&] { hw::make_sim_device(o); }).rfind("simulator address=tcp://127.0.0.1: no port", 0), 0u);
}

}  // namespace
