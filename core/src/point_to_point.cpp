// SPDX-License-Identifier: Apache-2.0
//
// The driver's primitives and point-to-point calls (nop, copy, combine,
// send, recv, stream_put), each built on detail::Call (call.hpp).
#include <accl/accl.hpp>

#include "call.hpp"

#include <vector>

namespace accl {

// ---------------------------------------------------------------------------
// Primitives
// ---------------------------------------------------------------------------

RequestPtr ACCL::nop(bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kNop);
  call.spec = {.scenario = abi::kNop, .comm_address = call.check.comm(GLOBAL_COMM).address};
  return call.issue_always(waitfor, run_async);
}

RequestPtr ACCL::copy(BaseBuffer& src, BaseBuffer& dst, unsigned int count, bool from_fpga, bool to_fpga,
                      bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kCopy);
  call.check.buffer("src", src, count);
  call.check.buffer("dst", dst, count);
  call.spec = {.scenario = abi::kCopy, .count = count, .comm_address = call.check.comm(GLOBAL_COMM).address,
               .op0 = memory_operand(src), .result = memory_operand(dst)};
  call.inputs[0] = input(src, count, from_fpga);
  call.outputs[0] = output(dst, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::copy_to_stream(BaseBuffer& src, unsigned int count, bool from_fpga, bool run_async,
                                const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kCopyToStream);
  call.check.buffer("src", src, count);
  call.spec = {.scenario = abi::kCopy, .count = count, .comm_address = call.check.comm(GLOBAL_COMM).address,
               .op0 = memory_operand(src), .result = stream_operand(src.type())};
  call.inputs[0] = input(src, count, from_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::copy_from_stream(BaseBuffer& dst, unsigned int count, bool to_fpga, bool run_async,
                                  const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kCopyFromStream);
  call.check.buffer("dst", dst, count);
  call.spec = {.scenario = abi::kCopy, .count = count, .comm_address = call.check.comm(GLOBAL_COMM).address,
               .op0 = stream_operand(dst.type()), .result = memory_operand(dst)};
  call.outputs[0] = output(dst, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::combine(unsigned int count, reduceFunction function, BaseBuffer& val1, BaseBuffer& val2,
                         BaseBuffer& result, bool val1_from_fpga, bool val2_from_fpga, bool to_fpga, bool run_async,
                         const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kCombine);
  call.check.buffer("val1", val1, count);
  call.check.buffer("val2", val2, count);
  call.check.buffer("result", result, count);
  call.check.function(function);
  call.spec = {.scenario = abi::kCombine, .count = count, .comm_address = call.check.comm(GLOBAL_COMM).address,
               .function = static_cast<uint32_t>(function), .op0 = memory_operand(val1), .op1 = memory_operand(val2),
               .result = memory_operand(result)};
  call.inputs = {input(val1, count, val1_from_fpga), input(val2, count, val2_from_fpga)};
  call.outputs[0] = output(result, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::send(BaseBuffer& src, unsigned int count, unsigned int dst, unsigned int tag, communicatorId comm,
                      bool from_fpga, dataType compress_dtype, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kSend);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("destination", dst, c);
  call.check.buffer("src", src, count);
  call.spec = {.scenario = abi::kSend, .count = count, .comm_address = c.address, .root_src_dst = dst, .tag = tag,
               .op0 = memory_operand(src), .compress_dtype = compress_dtype};
  call.inputs[0] = input(src, count, from_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::send(dataType src_type, unsigned int count, unsigned int dst, unsigned int tag, communicatorId comm,
                      dataType compress_dtype, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kSend);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("destination", dst, c);
  call.check.data_type("the stream", src_type);
  call.spec = {.scenario = abi::kSend, .count = count, .comm_address = c.address, .root_src_dst = dst, .tag = tag,
               .op0 = stream_operand(src_type), .compress_dtype = compress_dtype};
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::stream_put(BaseBuffer& src, unsigned int count, unsigned int dst, unsigned int stream_id,
                            communicatorId comm, bool from_fpga, dataType compress_dtype, bool run_async,
                            const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kStreamPut);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("destination", dst, c);
  call.check.stream_id(stream_id);
  call.check.buffer("src", src, count);
  // The stream id goes in the tag: the remote CCLO pushes to that stream instead of matching a recv.
  call.spec = {.scenario = abi::kSend, .count = count, .comm_address = c.address, .root_src_dst = dst,
               .tag = stream_id, .op0 = memory_operand(src), .result = stream_operand(src.type()),
               .compress_dtype = compress_dtype};
  call.inputs[0] = input(src, count, from_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::recv(BaseBuffer& dst, unsigned int count, unsigned int src, unsigned int tag, communicatorId comm,
                      bool to_fpga, dataType compress_dtype, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kRecv);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("source", src, c, true);
  call.check.buffer("dst", dst, count);
  call.spec = {.scenario = abi::kRecv, .count = count, .comm_address = c.address, .root_src_dst = src, .tag = tag,
               .result = memory_operand(dst), .compress_dtype = compress_dtype};
  call.outputs[0] = output(dst, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::recv(dataType dst_type, unsigned int count, unsigned int src, unsigned int tag, communicatorId comm,
                      dataType compress_dtype, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kRecv);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("source", src, c, true);
  call.check.data_type("the stream", dst_type);
  call.spec = {.scenario = abi::kRecv, .count = count, .comm_address = c.address, .root_src_dst = src, .tag = tag,
               .result = stream_operand(dst_type), .compress_dtype = compress_dtype};
  return call.issue(waitfor, run_async);
}

}  // namespace accl
