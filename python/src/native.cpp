// SPDX-License-Identifier: Apache-2.0
#include "native.hpp"

#include <accl_emu/emulator.hpp>
#if PYACCL_HAVE_HW
#include <accl_hw/hw.hpp>
#endif

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
  accl::emu::EmuOptions options = accl::emu::options_from_environment();
  if (!bind_address.empty()) options.bind_address = bind_address;
  options.port = 0;  // each device picks a free port
  for (unsigned i = 0; i < size; ++i) {
    devices_.push_back(accl::emu::create_device(options));
    const accl::emu::Endpoint ep = accl::emu::endpoint(*devices_.back());
    endpoints_.push_back(EmuEndpoint{ep.ip, ep.port});
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
  accl::emu::EmuOptions options = accl::emu::options_from_environment();
  if (!bind_address.empty()) options.bind_address = bind_address;
  options.port = static_cast<uint16_t>(port);
  return std::make_shared<Driver>(accl::emu::create_device(options), arith);
}

EmuEndpoint emulated_endpoint(Driver& driver) {
  const accl::emu::Endpoint ep = accl::emu::endpoint(driver.accl().device());
  return EmuEndpoint{ep.ip, ep.port};
}

bool have_hardware_backend() { return PYACCL_HAVE_HW != 0; }

std::shared_ptr<Driver> create_hardware_driver([[maybe_unused]] const std::string& xclbin,
                                               [[maybe_unused]] const std::string& board,
                                               [[maybe_unused]] unsigned cclo_index,
                                               [[maybe_unused]] const accl::arithConfigMap& arith) {
#if PYACCL_HAVE_HW
  accl::hw::XrtOptions options = accl::hw::options_from_environment();
  options.xclbin = xclbin;
  if (!board.empty()) options.device = board;
  // Kernel instance names follow public ACCL's accl_network_utils.
  const std::string index = std::to_string(cclo_index);
  options.cclo_kernel = "ccl_offload:{ccl_offload_" + index + "}";
  options.hostctrl_kernel = "hostctrl:{hostctrl_" + index + "_0}";
  return std::make_shared<Driver>(accl::hw::create_xrt_device(options), arith);
#else
  throw std::runtime_error("pyaccl was built without the hardware backend (libaccl_hw); "
                           "use sim_mode=True for the emulator");
#endif
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
