// SPDX-License-Identifier: Apache-2.0
#include "native.hpp"

#include <accl_devices/devices.hpp>
#include <accl_emu/emulator.hpp>

#include <stdexcept>
#include <utility>

namespace pyaccl {

Driver::Driver(std::unique_ptr<accl::Device> device, const accl::arithConfigMap& arith)
    : device_name_(device ? device->name() : std::string()),
      accl_(std::make_unique<accl::ACCL>(std::move(device), arith)) {}

NativeBuffer::NativeBuffer(std::shared_ptr<Driver> driver, std::unique_ptr<accl::BaseBuffer> buffer)
    : driver_(std::move(driver)), buffer_(std::move(buffer)) {}

std::shared_ptr<NativeBuffer> NativeBuffer::allocate(std::shared_ptr<Driver> driver, size_t length,
                                                     accl::dataType type, bool host_only) {
  // The element type of Buffer<T> only matters for typed access from C++;
  // Python sees raw bytes, so one instantiation serves every data type.
  const auto placement = host_only ? accl::BufferPlacement::host_only : accl::BufferPlacement::device;
  auto buffer = std::make_unique<accl::Buffer<uint8_t>>(driver->accl(), length, type, placement, nullptr, 0);
  return std::make_shared<NativeBuffer>(std::move(driver), std::move(buffer));
}

std::shared_ptr<NativeBuffer> NativeBuffer::slice(size_t start, size_t end) {
  return std::make_shared<NativeBuffer>(driver_, buffer_->slice(start, end));
}

EmuWorld::EmuWorld(unsigned size, const std::string& bind_address) {
  if (size == 0) throw std::invalid_argument("an emulated world needs at least one rank");
  accl::devices::Request request;
  request.kind = accl::devices::Kind::emu;
  if (!bind_address.empty()) request.bind_address = bind_address;
  request.port = 0;  // each device picks a free port
  for (unsigned i = 0; i < size; ++i) {
    accl::devices::Opened opened = accl::devices::open(request);
    devices_.push_back(std::move(opened.device));
    endpoints_.push_back(EmuEndpoint{opened.ip, opened.port});
  }
}

bool EmuWorld::claimed(unsigned index) const {
  std::lock_guard lock(mutex_);
  return index >= devices_.size() || devices_[index] == nullptr;
}

std::shared_ptr<Driver> EmuWorld::claim(unsigned index, const accl::arithConfigMap& arith) {
  std::unique_ptr<accl::Device> device;
  {
    std::lock_guard lock(mutex_);
    if (index >= devices_.size())
      throw std::out_of_range("rank " + std::to_string(index) + " is outside the emulated world of " +
                              std::to_string(devices_.size()) + " ranks");
    if (devices_[index] == nullptr)
      throw std::logic_error("rank " + std::to_string(index) + " of this emulated world is already taken");
    device = std::move(devices_[index]);
  }
  return std::make_shared<Driver>(std::move(device), arith);
}

std::shared_ptr<Driver> create_emulated_driver(const std::string& bind_address, int port,
                                               const accl::arithConfigMap& arith) {
  if (port < 0 || port > 0xFFFF) throw std::invalid_argument("port " + std::to_string(port) + " is not in 0..65535");
  accl::devices::Request request;
  request.kind = accl::devices::Kind::emu;
  if (!bind_address.empty()) request.bind_address = bind_address;
  request.port = static_cast<uint16_t>(port);
  return std::make_shared<Driver>(accl::devices::open(request).device, arith);
}

EmuEndpoint emulated_endpoint(Driver& driver) {
  const accl::emu::Endpoint ep = accl::emu::endpoint(driver.accl().device());
  return EmuEndpoint{ep.ip, ep.port};
}

SimulatedDriver create_simulated_driver(const std::string& rank0_address, int rank, int size,
                                        const accl::arithConfigMap& arith) {
  if (size < 1 || rank < 0 || rank >= size)
    throw std::invalid_argument("rank " + std::to_string(rank) + " is not one of " + std::to_string(size) + " ranks");
  accl::devices::Request request;
  request.kind = accl::devices::Kind::sim;
  request.rank = rank;
  request.size = size;
  if (!rank0_address.empty()) request.sim_address = rank0_address;
  accl::devices::Opened opened = accl::devices::open(request);
  SimulatedDriver out;
  out.endpoint = EmuEndpoint{opened.ip, opened.port};
  out.session_ids = std::move(opened.session_ids);
  out.driver = std::make_shared<Driver>(std::move(opened.device), arith);
  return out;
}

std::string selected_device() { return accl::devices::to_string(accl::devices::selected()); }

// The device factory always carries the XRT backend; built without XRT, it
// says so when a card is opened.
bool have_hardware_backend() { return true; }

std::shared_ptr<Driver> create_hardware_driver(const std::string& xclbin, const std::string& board,
                                               unsigned cclo_index, const accl::arithConfigMap& arith) {
  accl::devices::Request request;
  request.kind = accl::devices::Kind::xrt;
  request.xclbin = xclbin;
  if (!board.empty()) request.card = board;
  request.kernel_instance = cclo_index;
  return std::make_shared<Driver>(accl::devices::open(request).device, arith);
}

void initialize(Driver& driver, const std::vector<RankSpec>& ranks, int local_rank, unsigned nbufs,
                size_t bufsize, size_t max_eager_size, size_t max_rendezvous_size) {
  std::vector<accl::rank_t> list;
  list.reserve(ranks.size());
  for (const RankSpec& r : ranks) {
    accl::rank_t rank;
    rank.ip = r.ip;
    rank.port = r.port;
    rank.session_id = r.session_id;
    rank.max_segment_size = r.max_segment_size;
    list.push_back(std::move(rank));
  }
  accl::InitOptions options;
  options.rx_buffer_count = nbufs;
  options.rx_buffer_size = bufsize;
  options.max_eager_size = max_eager_size;
  options.max_rendezvous_size = max_rendezvous_size;
  driver.accl().initialize(list, local_rank, options);
}

}  // namespace pyaccl
