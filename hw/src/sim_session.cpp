// SPDX-License-Identifier: Apache-2.0
#include "sim_session.hpp"

#include <accl/log.hpp>
#include <accl_hw/sim.hpp>

#include <algorithm>
#include <cstdio>

namespace accl::hw {
namespace {

using json = nlohmann::json;

// Request types of the protocol.
enum RequestType : unsigned {
  kMmioRead = 0,
  kMmioWrite = 1,
  kMemRead = 2,
  kMemWrite = 3,
  kMemAllocate = 4,
  kCall = 5,
  kWait = 6,
};

// Host controller the calls go to.
constexpr unsigned kControllerId = 0;
// Bytes per memory request: every byte travels as a JSON number, so large
// transfers are split to keep each reply well inside the reply timeout.
constexpr size_t kMemChunkBytes = 64 * 1024;

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string bytes_at(size_t bytes, uint64_t address, bool host) {
  return std::to_string(bytes) + " bytes at " + (host ? "host " : "device ") + hex(address);
}

}  // namespace

SimSession::SimSession(std::string endpoint, std::chrono::milliseconds reply_timeout)
    : endpoint_(std::move(endpoint)), reply_timeout_(reply_timeout), socket_(context_, zmq::socket_type::req) {
  try {
    const int timeout_ms = static_cast<int>(std::min<int64_t>(reply_timeout_.count(), INT32_MAX));
    socket_.set(zmq::sockopt::rcvtimeo, timeout_ms);
    socket_.set(zmq::sockopt::sndtimeo, timeout_ms);
    socket_.set(zmq::sockopt::linger, 0);  // closing never waits for an absent session
    socket_.connect(endpoint_);
  } catch (const zmq::error_t& e) {
    throw SimError("simulator session at " + endpoint_ + ": cannot connect: " + e.what());
  }
}

json SimSession::exchange(const json& request, const std::string& what) {
  std::lock_guard lk(mu_);
  if (!broken_.empty())
    throw SimError("simulator session at " + endpoint_ + " stopped answering earlier (" + broken_ + "); " + what +
                   " not sent");
  const std::string text = request.dump();
  std::string reply;
  try {
    if (!socket_.send(zmq::buffer(text), zmq::send_flags::none)) {
      broken_ = "could not send " + what + " within " + std::to_string(reply_timeout_.count()) + " ms";
      throw SimError("simulator session at " + endpoint_ + ": " + broken_ + " (ACCL_SIM_REPLY_TIMEOUT_MS)");
    }
    zmq::message_t message;
    if (!socket_.recv(message, zmq::recv_flags::none)) {
      // A REQ socket that missed its reply cannot send again: the session is gone.
      broken_ = "no reply to " + what + " within " + std::to_string(reply_timeout_.count()) + " ms";
      throw SimError("simulator session at " + endpoint_ + ": " + broken_ + " (ACCL_SIM_REPLY_TIMEOUT_MS)");
    }
    reply = message.to_string();
  } catch (const zmq::error_t& e) {
    broken_ = what + " failed: " + e.what();
    throw SimError("simulator session at " + endpoint_ + ": " + broken_);
  }
  json parsed = json::parse(reply, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("status") ||
      !parsed["status"].is_number_integer())
    throw SimError("simulator session at " + endpoint_ + ": reply to " + what + " is not a protocol reply: '" +
                   reply.substr(0, 200) + "'");
  return parsed;
}

namespace {

// The status of a request other than wait: 0 is done, anything else refused.
void require_ok(const json& reply, const std::string& endpoint, const std::string& what) {
  const int64_t status = reply["status"].get<int64_t>();
  if (status != 0)
    throw SimError("simulator session at " + endpoint + " refused " + what + " (status " + std::to_string(status) +
                   ")");
}

}  // namespace

uint32_t SimSession::mmio_read(uint32_t offset) {
  const std::string what = "an MMIO read of " + hex(offset);
  const json reply = exchange({{"type", kMmioRead}, {"addr", offset}}, what);
  require_ok(reply, endpoint_, what);
  if (!reply.contains("rdata") || !reply["rdata"].is_number_integer())
    throw SimError("simulator session at " + endpoint_ + ": reply to " + what + " has no rdata");
  return static_cast<uint32_t>(reply["rdata"].get<int64_t>());
}

void SimSession::mmio_write(uint32_t offset, uint32_t value) {
  const std::string what = "an MMIO write of " + hex(value) + " to " + hex(offset);
  require_ok(exchange({{"type", kMmioWrite}, {"addr", offset}, {"wdata", value}}, what), endpoint_, what);
}

void SimSession::mem_allocate(uint64_t address, size_t bytes, bool host) {
  const std::string what = "an allocation of " + bytes_at(bytes, address, host);
  require_ok(exchange({{"type", kMemAllocate}, {"addr", address}, {"len", bytes}, {"host", host}}, what), endpoint_,
             what);
}

void SimSession::mem_write(uint64_t address, bool host, const void* src, size_t bytes) {
  const auto* in = static_cast<const uint8_t*>(src);
  for (size_t done = 0; done < bytes; done += kMemChunkBytes) {
    const size_t n = std::min(kMemChunkBytes, bytes - done);
    json data = json::array();
    data.get_ref<json::array_t&>().reserve(n);
    for (size_t i = 0; i < n; ++i) data.push_back(static_cast<unsigned>(in[done + i]));
    const std::string what = "a memory write of " + bytes_at(n, address + done, host);
    require_ok(exchange({{"type", kMemWrite}, {"addr", address + done}, {"host", host}, {"wdata", std::move(data)}},
                        what),
               endpoint_, what);
  }
}

void SimSession::mem_read(uint64_t address, bool host, void* dst, size_t bytes) {
  auto* out = static_cast<uint8_t*>(dst);
  for (size_t done = 0; done < bytes; done += kMemChunkBytes) {
    const size_t n = std::min(kMemChunkBytes, bytes - done);
    const std::string what = "a memory read of " + bytes_at(n, address + done, host);
    const json reply = exchange({{"type", kMemRead}, {"addr", address + done}, {"len", n}, {"host", host}}, what);
    require_ok(reply, endpoint_, what);
    const auto it = reply.find("rdata");
    if (it == reply.end() || !it->is_array() || it->size() != n)
      throw SimError("simulator session at " + endpoint_ + ": reply to " + what + " does not hold " +
                     std::to_string(n) + " bytes");
    for (size_t i = 0; i < n; ++i) {
      const json& b = (*it)[i];
      if (!b.is_number_integer())
        throw SimError("simulator session at " + endpoint_ + ": reply to " + what + " holds a non-number");
      // cclo_emu sends its bytes as signed chars (-128..127), the RTL
      // simulation as 0..255: the low eight bits are the byte either way.
      out[done + i] = static_cast<uint8_t>(b.get<int64_t>() & 0xFF);
    }
  }
}

void SimSession::start_call(const HostCtrlArgs& args) {
  const auto& v = args.value;
  const json request = {
      {"type", kCall},
      {"ctrl_id", kControllerId},
      {"scenario", v[kArgScenario]},
      {"count", v[kArgCount]},
      {"comm", v[kArgComm]},
      {"root_src_dst", v[kArgRootSrcDst]},
      {"function", v[kArgFunction]},
      {"tag", v[kArgTag]},
      {"arithcfg", v[kArgArithConfig]},
      {"compression_flags", v[kArgCompressionFlags]},
      {"stream_flags", v[kArgStreamFlags]},
      {"addr_0", v[kArgAddr0]},
      {"addr_1", v[kArgAddr1]},
      {"addr_2", v[kArgAddr2]},
  };
  const std::string what = "the start of a " + scenario_name(static_cast<uint32_t>(v[kArgScenario])) + " call";
  require_ok(exchange(request, what), endpoint_, what);
}

bool SimSession::call_finished() {
  const json reply = exchange({{"type", kWait}, {"ctrl_id", kControllerId}}, "a wait request");
  const int64_t status = reply["status"].get<int64_t>();
  if (status == 0) return true;
  if (status == 1) return false;
  throw SimError("simulator session at " + endpoint_ + " refused a wait request (status " + std::to_string(status) +
                 ")");
}

}  // namespace accl::hw
