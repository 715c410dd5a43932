// SPDX-License-Identifier: Apache-2.0
//
// make_sim_device(): CcloDevice over a register port and a buffer port that
// speak a public ACCL simulation session's protocol (sim_session.hpp), and
// the start-up check that the session is there.
#include "sim_memory.hpp"
#include "sim_session.hpp"

#include <accl/log.hpp>
#include <accl_hw/cclo_device.hpp>
#include <accl_hw/sim.hpp>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace accl::hw {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// How often a running call is asked about. cclo_emu answers a wait request
// at once and a small collective there takes about a second.
constexpr milliseconds kWaitPollInterval{5};

class SimRegisterPort final : public RegisterPort {
 public:
  SimRegisterPort(std::shared_ptr<SimSession> session, std::shared_ptr<SimMemory> memory)
      : session_(std::move(session)), memory_(std::move(memory)) {}

  uint32_t read32(uint32_t offset) override { return session_->mmio_read(offset); }
  void write32(uint32_t offset, uint32_t value) override { session_->mmio_write(offset, value); }

  void start_kernel(const HostCtrlArgs& args) override {
    memory_->push_host_operands(args);
    session_->start_call(args);
    running_ = args;
  }

  RunStatus wait_kernel(milliseconds timeout) override {
    const auto deadline = steady_clock::now() + timeout;
    for (;;) {
      if (session_->call_finished()) {
        memory_->pull_host_result(running_);
        return {RunState::done, ""};
      }
      const auto now = steady_clock::now();
      if (now >= deadline) return {RunState::pending, ""};
      std::this_thread::sleep_for(std::min<steady_clock::duration>(kWaitPollInterval, deadline - now));
    }
  }

 private:
  std::shared_ptr<SimSession> session_;
  std::shared_ptr<SimMemory> memory_;
  HostCtrlArgs running_;  // the call in flight (one at a time)
};

class SimBufferPort final : public BufferPort {
 public:
  explicit SimBufferPort(std::shared_ptr<SimMemory> memory) : memory_(std::move(memory)) {}

  PortBuffer allocate(size_t bytes, MemoryKind kind, unsigned bank) override {
    return kind == MemoryKind::host_only ? memory_->allocate_host(bytes) : memory_->allocate_device(bytes, bank);
  }
  PortBuffer map_user(void* ptr, size_t bytes) override { return memory_->map_host(ptr, bytes); }
  void release(uint64_t handle) override { memory_->release(handle); }
  void write(uint64_t handle, size_t offset, const void* src, size_t bytes) override {
    memory_->write(handle, offset, src, bytes);
  }
  void read(uint64_t handle, size_t offset, void* dst, size_t bytes) override {
    memory_->read(handle, offset, dst, bytes);
  }
  // The shadow copies exactly the bytes asked for: no page widening, which
  // would copy neighbouring user bytes back over newer values.
  size_t page_size() const override { return 1; }

 private:
  std::shared_ptr<SimMemory> memory_;
};

// "" when something accepts TCP connections at host:port within `timeout`,
// else why not. Catches the common case (no session started) at once instead
// of after a whole reply timeout.
std::string tcp_refusal(const std::string& host, unsigned port, milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_INET;  // ZeroMQ resolves tcp:// names to IPv4 unless told otherwise
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) return "cannot resolve host '" + host + "': " + ::gai_strerror(rc);
  std::string why;
  const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, found->ai_protocol);
  if (fd < 0) {
    why = std::string("socket: ") + std::strerror(errno);
  } else if (::connect(fd, found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS) {
    why = std::strerror(errno);
  } else {
    pollfd p{fd, POLLOUT, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(timeout.count(), 60'000)));
    int error = 0;
    socklen_t len = sizeof error;
    if (ready == 0)
      why = "no TCP connection within " + std::to_string(timeout.count()) + " ms";
    else if (ready < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0)
      why = std::string("poll: ") + std::strerror(errno);
    else if (error != 0)
      why = std::strerror(error);
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return why;
}

}  // namespace

std::unique_ptr<Device> make_sim_device(const SimOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size)
    throw SimError("simulator session: rank " + std::to_string(options.rank) + " is not one of " +
                   std::to_string(options.size) + " ranks");
  if (options.reply_timeout < milliseconds(1))
    throw SimError("simulator session: the reply timeout must be at least 1 ms");
  if (!(options.clock_mhz > 0.0)) throw SimError("simulator session: the CCLO clock must be positive");
  const SimAddress rank0 = parse_sim_address(options.address, "simulator address");
  const std::string endpoint = sim_endpoint(rank0, options.rank);
  const std::string hint = " (start it first, e.g. public ACCL's cclo_emu -s " + std::to_string(options.size) +
                           " -r " + std::to_string(options.rank) + " -p " + std::to_string(rank0.port) +
                           "; ACCL_SIM_ADDRESS names rank 0's port)";

  const std::string refused = tcp_refusal(rank0.host, rank0.port + static_cast<unsigned>(options.rank),
                                          options.reply_timeout);
  if (!refused.empty()) throw SimError("no simulator session at " + endpoint + ": " + refused + hint, options.rank);

  auto session = std::make_shared<SimSession>(endpoint, options.reply_timeout);
  uint32_t hwid = 0;
  try {
    hwid = session->mmio_read(abi::kHwIdOffset);
  } catch (const SimError& e) {
    throw SimError("no simulator session at " + endpoint + ": " + e.what() + hint, options.rank);
  }
  ACCL_LOG_INFO("sim: rank {} of {} on simulator instance {} (hardware id {:#x})", options.rank, options.size,
                endpoint, hwid);

  auto memory = std::make_shared<SimMemory>(session);
  CcloDeviceOptions device_options;
  device_options.name = "sim";
  device_options.description = "simulator instance " + endpoint + ", rank " + std::to_string(options.rank) + " of " +
                               std::to_string(options.size);
  device_options.clock_mhz = options.clock_mhz;
  return make_cclo_device(std::make_unique<SimRegisterPort>(session, memory), std::make_unique<SimBufferPort>(memory),
                          std::move(device_options));
}

bool built_with_sim() { return true; }

}  // namespace accl::hw
