// SPDX-License-Identifier: Apache-2.0
//
// Errors raised by the driver. Every message names the call, the rank and
// the cause; device errors list every RETCODE bit by name.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace accl {

// Names of the set RETCODE bits, e.g. {"RECEIVE_TIMEOUT_ERROR"}.
std::vector<std::string> error_bit_names(uint32_t retcode);
// "RECEIVE_TIMEOUT_ERROR | DMA_SIZE_ERROR" (or "OK").
std::string error_code_to_string(uint32_t retcode);

// Base of everything the driver throws.
class Error : public std::runtime_error {
 public:
  Error(std::string call, int rank, const std::string& what)
      : std::runtime_error(what), call_(std::move(call)), rank_(rank) {}
  const std::string& call() const { return call_; }
  int rank() const { return rank_; }

 private:
  std::string call_;
  int rank_;
};

// The device finished the call with error bits set.
class DeviceError : public Error {
 public:
  DeviceError(std::string call, int rank, uint32_t retcode);
  uint32_t retcode() const { return retcode_; }

 private:
  uint32_t retcode_;
};

// The driver gave up waiting for the device.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// Rejected before reaching the device: bad count, rank, root, buffer size,
// communicator, type, function, or a call before initialize()/after deinit().
class ArgumentError : public Error {
 public:
  using Error::Error;
};

}  // namespace accl
