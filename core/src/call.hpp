// SPDX-License-Identifier: Apache-2.0
//
// One call of the driver from its first check to its launch, shared by the
// files of the calls (point_to_point.cpp, collectives.cpp): validate every
// argument before the device is touched, sync inputs (unless from_fpga),
// encode the call words, start the call, and wait unless run_async. Results
// are synced back by Request::wait(). Defined in full here, as they were
// beside the calls, so every call still inlines them.
//
// count == 0 is valid for every data call and completes at once without a
// device call (public ACCL returns nullptr for it). With a non-empty waitfor
// such a call becomes a nop on the device so that a chain through it still
// orders the calls around it.
#pragma once

#include <accl/accl.hpp>
#include <accl/call_encoding.hpp>
#include <accl/log.hpp>

#include "internal.hpp"
#include "public_firmware.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace accl::detail {

inline encoding::Operand memory_operand(const BaseBuffer& buf) {
  encoding::Operand op;
  op.type = buf.type();
  op.address = buf.address();
  op.host_only = buf.is_host_only();
  return op;
}

inline encoding::Operand stream_operand(dataType type) {
  encoding::Operand op;
  op.type = type;
  op.stream = true;
  return op;
}

inline const char* function_name(reduceFunction f) {
  switch (f) {
    case reduceFunction::SUM: return "SUM";
    case reduceFunction::MAX: return "MAX";
    case reduceFunction::MIN: return "MIN";
    case reduceFunction::PROD: return "PROD";
    case reduceFunction::BAND: return "BAND";
    case reduceFunction::BOR: return "BOR";
    case reduceFunction::BXOR: return "BXOR";
    case reduceFunction::LAND: return "LAND";
    case reduceFunction::LOR: return "LOR";
    case reduceFunction::LXOR: return "LXOR";
    case reduceFunction::MINLOC: return "MINLOC";
    case reduceFunction::MAXLOC: return "MAXLOC";
  }
  return "unknown";
}

// Validation helpers bound to one call.
class Checker {
 public:
  Checker(const ACCL::Impl& impl, const std::string& call) : impl_(impl), call_(call) {
    impl.require_initialized(call);
  }

  const detail::CommunicatorInfo& comm(communicatorId id) const { return impl_.communicator(call_, id); }

  // `what` holds at least `needed` elements and belongs to this driver.
  void buffer(const char* what, const BaseBuffer& buf, uint64_t needed, const char* why = nullptr) const {
    if (&buf.owner() != &impl_.self) impl_.fail(call_, std::string(what) + " was created by another ACCL instance");
    if (buf.length() < needed)
      impl_.fail(call_, std::string(what) + " holds " + std::to_string(buf.length()) + " elements but the call needs " +
                            std::to_string(needed) + (why ? std::string(" (") + why + ")" : std::string()));
  }

  void rank_in(const char* what, uint32_t r, const detail::CommunicatorInfo& c, bool any_allowed = false) const {
    if (any_allowed && r == abi::kRankAny) {
      if (public_fw::applies(impl_.capabilities))
        impl_.fail(call_, std::string(what) + " RANK_ANY: the public firmware (no capability word) matches "
                                              "receives by source rank only");
      return;
    }
    if (r >= c.size)
      impl_.fail(call_, std::string(what) + " " + std::to_string(r) + " is outside the communicator of " +
                            std::to_string(c.size) + " ranks");
  }

  void function(reduceFunction f) const {
    const auto index = static_cast<uint32_t>(f);
    if (index > static_cast<uint32_t>(reduceFunction::MAXLOC))
      impl_.fail(call_, "reduce function " + std::to_string(index) + " does not exist");
    const uint32_t needs = abi::reduce_function_capabilities(index);
    if ((impl_.capabilities & needs) != needs)
      impl_.fail(call_, std::string("reduce function ") + function_name(f) + " is not supported by this CCLO" +
                            (public_fw::applies(impl_.capabilities)
                                 ? " (the public firmware, no capability word: SUM and MAX only)"
                                 : ""));
  }

  void data_type(const char* what, dataType t) const {
    if (abi::data_type_bytes(t) == 0) impl_.fail(call_, std::string(what) + " needs a data type");
  }

  // Public hardware (no capability word) is trusted to implement the call.
  void capability(uint32_t bit, const char* feature) const {
    if ((impl_.capabilities & abi::kCapValid) && !(impl_.capabilities & bit))
      impl_.fail(call_, std::string(feature) + " is not supported by this CCLO");
  }

  void stream_id(uint32_t id) const {
    if (id > abi::kMaxStreamId)
      impl_.fail(call_, "stream id " + std::to_string(id) + " is above the largest, " +
                            std::to_string(abi::kMaxStreamId));
  }

 private:
  const ACCL::Impl& impl_;
  const std::string& call_;
};

inline SyncRange input(const BaseBuffer& buf, uint64_t elements, bool from_fpga) {
  return from_fpga ? SyncRange{} : BufferAccess::range(buf, elements);
}
inline SyncRange output(const BaseBuffer& buf, uint64_t elements, bool to_fpga) {
  return to_fpga ? SyncRange{} : BufferAccess::range(buf, elements);
}

// One call of the driver from its first check to its launch. It names the
// rank in the log and holds the driver mutex from before the first check
// until the call is on the device; it releases the mutex before waiting, so
// one thread's blocking call never holds up another thread's call on the
// same driver. A call checks its arguments, fills in `spec` and the ranges to
// sync, and issues.
class Call {
  // Declared before `check`: the rank scope and the lock are in place before
  // the first check runs.
  ACCL::Impl& impl_;
  const std::string& name_;
  log::ScopedRank scoped_rank_;
  std::unique_lock<std::mutex> lock_;

 public:
  Call(ACCL::Impl& impl, const std::string& name)
      : impl_(impl), name_(name), scoped_rank_(impl.rank.load()), lock_(impl.mutex), check(impl, name) {}

  // For calls that move spec.count elements: with none to move, the call
  // completes without the device.
  RequestPtr issue(const std::vector<RequestPtr>& waitfor, bool run_async) {
    return launch(spec.count != 0, waitfor, run_async);
  }

  // For calls without data (nop, barrier): they always reach the device.
  RequestPtr issue_always(const std::vector<RequestPtr>& waitfor, bool run_async) {
    return launch(true, waitfor, run_async);
  }

  const Checker check;
  encoding::CallSpec spec;
  // A call with one range to sync sets it by element (inputs[0] = ...):
  // assigning a braced list built a temporary pair and moved both ranges.
  Syncs inputs;
  Syncs outputs;

 private:
  // What the public firmware cannot finish is refused before the device
  // sees it (public_firmware.hpp).
  void check_public_rules(const CallWords& words) const {
    uint32_t comm_size = 0;
    for (const auto& c : impl_.communicators)
      if (c.address == spec.comm_address) comm_size = c.size;
    const std::string problem = public_fw::call_problem(spec, words, comm_size, impl_.max_eager_size,
                                                        public_fw::rdma_stack(impl_.hwid));
    if (!problem.empty()) impl_.fail(name_, problem);
  }

  RequestPtr launch(bool needs_device, const std::vector<RequestPtr>& waitfor, bool run_async) {
    encoding::Encoded encoded = encoding::encode_call(spec, impl_.arith_slots);
    if (!encoded.ok()) impl_.fail(name_, encoded.error);
    if (needs_device && public_fw::applies(impl_.capabilities)) check_public_rules(encoded.words);

    std::shared_ptr<detail::CallRequest> request;
    if (!needs_device) {
      if (waitfor.empty()) {
        detail::CallRequest::Params params;
        params.context = impl_.context;
        params.name = &name_;
        params.rank = impl_.rank.load(std::memory_order_relaxed);
        return detail::make_request(std::move(params));
      }
      CallWords nop;
      nop[abi::kWordScenario] = abi::kNop;
      nop[abi::kWordComm] = encoded.words[abi::kWordComm];
      nop[abi::kWordTag] = abi::kTagAny;
      request = impl_.launch(name_, nop, {}, {}, waitfor);
    } else {
      request = impl_.launch(name_, encoded.words, inputs, outputs, waitfor);
    }
    lock_.unlock();
    if (!run_async) request->wait();
    return request;
  }
};

}  // namespace accl::detail

namespace accl {

// Call names with static storage: requests refer to them without a copy.
inline const std::string kNop = "nop";
inline const std::string kCopy = "copy";
inline const std::string kCopyToStream = "copy_to_stream";
inline const std::string kCopyFromStream = "copy_from_stream";
inline const std::string kCombine = "combine";
inline const std::string kSend = "send";
inline const std::string kStreamPut = "stream_put";
inline const std::string kRecv = "recv";
inline const std::string kBcast = "bcast";
inline const std::string kScatter = "scatter";
inline const std::string kGather = "gather";
inline const std::string kAllgather = "allgather";
inline const std::string kReduce = "reduce";
inline const std::string kAllreduce = "allreduce";
inline const std::string kReduceScatter = "reduce_scatter";
inline const std::string kAlltoall = "alltoall";
inline const std::string kBarrier = "barrier";

// What the files of the calls use from here, by short name.
using detail::Call;
using detail::input;
using detail::memory_operand;
using detail::output;
using detail::stream_operand;
}  // namespace accl
