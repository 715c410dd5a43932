// SPDX-License-Identifier: Apache-2.0
//
// A started call. Requests of synchronous calls come back completed.
#pragma once

#include <accl/device.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace accl {

class Request {
 public:
  enum class State { queued, completed, failed };

  virtual ~Request() = default;
  // Waits (bounded by the ACCL timeout), runs the post-call host syncs, and
  // throws DeviceError / TimeoutError naming the call and rank on failure.
  virtual void wait() = 0;
  // True when the call completed within `timeout` (errors are thrown as above).
  virtual bool wait(std::chrono::milliseconds timeout) = 0;
  // Non-blocking: true once complete (errors are thrown as above).
  virtual bool test() = 0;
  virtual uint32_t retcode() const = 0;       // valid once complete
  virtual uint64_t duration_ns() const = 0;   // device-measured, valid once complete
  virtual const std::string& call_name() const = 0;
  virtual CallId id() const = 0;              // device call id (for waitfor)
};
using RequestPtr = std::shared_ptr<Request>;

}  // namespace accl
