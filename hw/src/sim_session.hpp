// SPDX-License-Identifier: Apache-2.0
//
// One connection to one instance of a public ACCL simulation session: the
// seven request types of its ZeroMQ protocol (public ACCL's
// test/model/zmq/zmq_server.cpp is the reference), each a JSON object sent
// on a REQ socket and answered by one JSON object with a "status".
//   0 MMIO read {addr} -> {rdata}       1 MMIO write {addr, wdata}
//   2 memory read {addr, len, host}     3 memory write {addr, host, wdata}
//     -> {rdata: [bytes]}                  (bytes as JSON numbers)
//   4 allocate {addr, len, host}        5 call {ctrl_id, 12 hostctrl arguments}
//   6 wait {ctrl_id} -> status 0 done (once per call), 1 still running
// Requests are serialized (one REQ socket, one request in flight). A reply
// that does not come within the reply timeout breaks the session: that
// request and every later one throw SimError naming the endpoint.
#pragma once

#include <accl_hw/hostctrl.hpp>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace accl::hw {

class SimSession {
 public:
  SimSession(std::string endpoint, std::chrono::milliseconds reply_timeout);
  SimSession(const SimSession&) = delete;
  SimSession& operator=(const SimSession&) = delete;

  const std::string& endpoint() const { return endpoint_; }

  uint32_t mmio_read(uint32_t offset);
  void mmio_write(uint32_t offset, uint32_t value);
  // Memory of the device (host == false) or the session's host memory.
  void mem_allocate(uint64_t address, size_t bytes, bool host);
  void mem_write(uint64_t address, bool host, const void* src, size_t bytes);
  void mem_read(uint64_t address, bool host, void* dst, size_t bytes);
  // Starts one call on host controller 0 (public ACCL's drivers use only it).
  void start_call(const HostCtrlArgs& args);
  // One wait request: true when the running call has finished. The session
  // reports "finished" once per call.
  bool call_finished();

 private:
  nlohmann::json exchange(const nlohmann::json& request, const std::string& what);

  const std::string endpoint_;
  const std::chrono::milliseconds reply_timeout_;
  std::mutex mu_;  // one request in flight on the REQ socket
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string broken_;  // why the session stopped answering; "" while it answers
};

}  // namespace accl::hw
