// SPDX-License-Identifier: Apache-2.0
//
// The C++ side of pyaccl, free of pybind11: a driver handle that owns one
// ACCL object and its device, buffers that keep that driver alive, and the
// in-process emulated worlds sim_mode uses. module.cpp exposes these to
// Python; the seed 003 API itself is written in Python (pyaccl/*.py).
#pragma once

#include <accl/accl.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace pyaccl {

// One ACCL object and the device it drives. Shared by every buffer created
// from it, so the ACCL object outlives the Python driver object if buffers
// are still alive (their destructors free device memory through it).
class Driver {
 public:
  Driver(std::unique_ptr<accl::Device> device, const accl::arithConfigMap& arith);
  accl::ACCL& accl() { return *accl_; }
  const std::string& device_name() const { return device_name_; }

 private:
  std::string device_name_;  // kept: accl_->device() is gone once accl_ is
  std::unique_ptr<accl::ACCL> accl_;
};

// A driver buffer (or a slice of one) plus the driver it belongs to.
class NativeBuffer {
 public:
  NativeBuffer(std::shared_ptr<Driver> driver, std::unique_ptr<accl::BaseBuffer> buffer);
  // Allocates `length` elements of `type`: device memory with a host mirror,
  // or host-only memory the CCLO reaches directly.
  static std::shared_ptr<NativeBuffer> allocate(std::shared_ptr<Driver> driver, size_t length,
                                                accl::dataType type, bool host_only);

  accl::BaseBuffer& get() { return *buffer_; }
  const accl::BaseBuffer& get() const { return *buffer_; }
  const std::shared_ptr<Driver>& driver() const { return driver_; }
  // Elements [start, end): shares memory with this buffer.
  std::shared_ptr<NativeBuffer> slice(size_t start, size_t end);

 private:
  std::shared_ptr<Driver> driver_;
  std::unique_ptr<accl::BaseBuffer> buffer_;
};

// One rank's entry of a rank list as Python passes it.
struct RankSpec {
  std::string ip;
  int port = 0;
  int session_id = -1;
  uint64_t max_segment_size = 0;  // 0 = RX buffer size
};

// Where an emulated device listens.
struct EmuEndpoint {
  std::string ip;
  int port = 0;
};

// sim_mode without a rank list: every rank of one world is an emulated CCLO
// of this process. Creating all of them when the first rank asks lets each
// pick a free port (no port range to guess) and gives every rank the full
// rank list before its peers exist; each accl() instance then claims its
// own device.
class EmuWorld {
 public:
  EmuWorld(unsigned size, const std::string& bind_address);
  unsigned size() const { return static_cast<unsigned>(endpoints_.size()); }
  const std::vector<EmuEndpoint>& endpoints() const { return endpoints_; }
  bool claimed(unsigned index) const;
  // Moves device `index` into a new driver; each index can be claimed once.
  std::shared_ptr<Driver> claim(unsigned index, const accl::arithConfigMap& arith);

 private:
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<accl::Device>> devices_;  // null once claimed
  std::vector<EmuEndpoint> endpoints_;
};

// An emulated CCLO listening on bind_address:port (port 0: any free port).
std::shared_ptr<Driver> create_emulated_driver(const std::string& bind_address, int port,
                                               const accl::arithConfigMap& arith);
// The endpoint the emulated device behind `driver` listens on.
EmuEndpoint emulated_endpoint(Driver& driver);

// One instance of a public ACCL simulation session (cclo_emu or the RTL
// simulation): the instance of `rank` of `size`, listening on rank 0's port
// + rank. `rank0_address` is tcp://host:port of rank 0's instance; empty:
// ACCL_SIM_ADDRESS. Throws "no simulator session at ..." (bounded by
// ACCL_SIM_REPLY_TIMEOUT_MS) when the instance does not answer.
struct SimulatedDriver {
  std::shared_ptr<Driver> driver;
  EmuEndpoint endpoint;  // how peers name this rank in their communicator tables
  std::vector<int> session_ids;  // per rank, as the session numbers its instances
};
SimulatedDriver create_simulated_driver(const std::string& rank0_address, int rank, int size,
                                        const accl::arithConfigMap& arith);

// ACCL_DEVICE's choice: "emu" (default), "xrt", "sim" or "none".
std::string selected_device();

// Whether this build links the hardware backend (libaccl_hw).
bool have_hardware_backend();
// A CCLO on an Alveo card: `xclbin` loaded on card `board` (empty: the
// backend's choice, i.e. ACCL_DEVICE_INDEX or the nearest card), instance
// `cclo_index` of the CCLO/hostctrl kernels in the xclbin.
std::shared_ptr<Driver> create_hardware_driver(const std::string& xclbin, const std::string& board,
                                               unsigned cclo_index, const accl::arithConfigMap& arith);

// ACCL::initialize over a Python rank list.
void initialize(Driver& driver, const std::vector<RankSpec>& ranks, int local_rank, unsigned nbufs,
                size_t bufsize, size_t max_eager_size, size_t max_rendezvous_size);

}  // namespace pyaccl
