// SPDX-License-Identifier: Apache-2.0
//
// The driver's collectives (bcast, scatter, gather, allgather, reduce,
// allreduce, reduce_scatter, alltoall, barrier), each built on detail::Call
// (call.hpp).
#include <accl/accl.hpp>

#include "call.hpp"

#include <vector>

namespace accl {

// ---------------------------------------------------------------------------
// Collectives
// ---------------------------------------------------------------------------

RequestPtr ACCL::bcast(BaseBuffer& buf, unsigned int count, unsigned int root, communicatorId comm, bool from_fpga,
                       bool to_fpga, dataType compress_dtype, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kBcast);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("root", root, c);
  call.check.buffer("buf", buf, count);
  call.spec = {.scenario = abi::kBcast, .count = count, .comm_address = c.address, .root_src_dst = root,
               .op0 = memory_operand(buf), .result = memory_operand(buf), .compress_dtype = compress_dtype};
  // Only the root's data goes out; only the others' buffers change.
  const bool is_root = c.local_rank == root;
  call.inputs[0] = input(buf, is_root ? count : 0, from_fpga);
  call.outputs[0] = output(buf, is_root ? 0 : count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::scatter(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, unsigned int root,
                         communicatorId comm, bool from_fpga, bool to_fpga, dataType compress_dtype, bool run_async,
                         const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kScatter);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("root", root, c);
  const bool is_root = c.local_rank == root;
  const uint64_t all = uint64_t{count} * c.size;
  call.check.buffer("sendbuf", sendbuf, is_root ? all : 0, "count x communicator size on the root");
  call.check.buffer("recvbuf", recvbuf, count);
  call.spec = {.scenario = abi::kScatter, .count = count, .comm_address = c.address, .root_src_dst = root,
               .op0 = memory_operand(sendbuf), .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, is_root ? all : 0, from_fpga);
  call.outputs[0] = output(recvbuf, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::gather(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, unsigned int root,
                        communicatorId comm, bool from_fpga, bool to_fpga, dataType compress_dtype, bool run_async,
                        const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kGather);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("root", root, c);
  const bool is_root = c.local_rank == root;
  const uint64_t all = uint64_t{count} * c.size;
  call.check.buffer("sendbuf", sendbuf, count);
  call.check.buffer("recvbuf", recvbuf, is_root ? all : 0, "count x communicator size on the root");
  call.spec = {.scenario = abi::kGather, .count = count, .comm_address = c.address, .root_src_dst = root,
               .op0 = memory_operand(sendbuf), .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, count, from_fpga);
  call.outputs[0] = output(recvbuf, is_root ? all : 0, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::allgather(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, communicatorId comm,
                           bool from_fpga, bool to_fpga, dataType compress_dtype, bool run_async,
                           const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kAllgather);
  const auto& c = call.check.comm(comm);
  const uint64_t all = uint64_t{count} * c.size;
  call.check.buffer("sendbuf", sendbuf, count);
  call.check.buffer("recvbuf", recvbuf, all, "count x communicator size");
  call.spec = {.scenario = abi::kAllgather, .count = count, .comm_address = c.address, .op0 = memory_operand(sendbuf),
               .op1 = memory_operand(recvbuf), .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, count, from_fpga);
  call.outputs[0] = output(recvbuf, all, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::reduce(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, unsigned int root,
                        reduceFunction func, communicatorId comm, bool from_fpga, bool to_fpga,
                        dataType compress_dtype, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kReduce);
  const auto& c = call.check.comm(comm);
  call.check.rank_in("root", root, c);
  call.check.function(func);
  const bool is_root = c.local_rank == root;
  call.check.buffer("sendbuf", sendbuf, count);
  call.check.buffer("recvbuf", recvbuf, is_root ? count : 0, "on the root");
  call.spec = {.scenario = abi::kReduce, .count = count, .comm_address = c.address, .root_src_dst = root,
               .function = static_cast<uint32_t>(func), .op0 = memory_operand(sendbuf),
               .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, count, from_fpga);
  call.outputs[0] = output(recvbuf, is_root ? count : 0, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::allreduce(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, reduceFunction func,
                           communicatorId comm, bool from_fpga, bool to_fpga, dataType compress_dtype, bool run_async,
                           const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kAllreduce);
  const auto& c = call.check.comm(comm);
  call.check.function(func);
  call.check.buffer("sendbuf", sendbuf, count);
  call.check.buffer("recvbuf", recvbuf, count);
  call.spec = {.scenario = abi::kAllreduce, .count = count, .comm_address = c.address,
               .function = static_cast<uint32_t>(func), .op0 = memory_operand(sendbuf), .op1 = memory_operand(recvbuf),
               .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, count, from_fpga);
  call.outputs[0] = output(recvbuf, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::reduce_scatter(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, reduceFunction func,
                                communicatorId comm, bool from_fpga, bool to_fpga, dataType compress_dtype,
                                bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kReduceScatter);
  const auto& c = call.check.comm(comm);
  call.check.function(func);
  const uint64_t all = uint64_t{count} * c.size;
  call.check.buffer("sendbuf", sendbuf, all, "count x communicator size");
  call.check.buffer("recvbuf", recvbuf, count);
  call.spec = {.scenario = abi::kReduceScatter, .count = count, .comm_address = c.address,
               .function = static_cast<uint32_t>(func), .op0 = memory_operand(sendbuf),
               .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, all, from_fpga);
  call.outputs[0] = output(recvbuf, count, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::alltoall(BaseBuffer& sendbuf, BaseBuffer& recvbuf, unsigned int count, communicatorId comm,
                          bool from_fpga, bool to_fpga, dataType compress_dtype, bool run_async,
                          const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kAlltoall);
  const auto& c = call.check.comm(comm);
  call.check.capability(abi::kCapAlltoall, "alltoall");
  const uint64_t all = uint64_t{count} * c.size;
  call.check.buffer("sendbuf", sendbuf, all, "count x communicator size");
  call.check.buffer("recvbuf", recvbuf, all, "count x communicator size");
  call.spec = {.scenario = abi::kAlltoall, .count = count, .comm_address = c.address, .op0 = memory_operand(sendbuf),
               .op1 = memory_operand(recvbuf), .result = memory_operand(recvbuf), .compress_dtype = compress_dtype};
  call.inputs[0] = input(sendbuf, all, from_fpga);
  call.outputs[0] = output(recvbuf, all, to_fpga);
  return call.issue(waitfor, run_async);
}

RequestPtr ACCL::barrier(communicatorId comm, bool run_async, const std::vector<RequestPtr>& waitfor) {
  Call call(*impl_, kBarrier);
  const auto& c = call.check.comm(comm);
  call.check.capability(abi::kCapBarrier, "barrier");
  call.spec = {.scenario = abi::kBarrier, .comm_address = c.address};
  return call.issue_always(waitfor, run_async);
}

}  // namespace accl
