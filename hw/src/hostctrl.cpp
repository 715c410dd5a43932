// SPDX-License-Identifier: Apache-2.0
#include <accl_hw/hostctrl.hpp>

#include <cstdio>

namespace accl::hw {

HostCtrlArgs encode_call(const CallWords& call) {
  HostCtrlArgs args;
  // The nine 32-bit arguments are the first nine call words, in order.
  for (int i = 0; i < kArgAddr0; ++i) args.value[i] = call.words[i];
  for (int op = 0; op < 3; ++op) args.value[kArgAddr0 + op] = call.addr(op);
  return args;
}

std::string scenario_name(uint32_t scenario) {
  switch (scenario) {
    case abi::kConfig: return "config";
    case abi::kCopy: return "copy";
    case abi::kCombine: return "combine";
    case abi::kSend: return "send";
    case abi::kRecv: return "recv";
    case abi::kBcast: return "bcast";
    case abi::kScatter: return "scatter";
    case abi::kGather: return "gather";
    case abi::kReduce: return "reduce";
    case abi::kAllgather: return "allgather";
    case abi::kAllreduce: return "allreduce";
    case abi::kReduceScatter: return "reduce_scatter";
    case abi::kBarrier: return "barrier";
    case abi::kAlltoall: return "alltoall";
    case abi::kNop: return "nop";
    default: return "scenario " + std::to_string(scenario);
  }
}

std::string describe_call(const CallWords& call) {
  char buf[320];
  std::snprintf(buf, sizeof(buf),
                "%s count=%u comm=0x%x root_src_dst=%u function=%u tag=0x%x arithcfg=0x%x compression=0x%x "
                "stream=0x%x addr0=0x%llx addr1=0x%llx addr2=0x%llx",
                scenario_name(call[abi::kWordScenario]).c_str(), call[abi::kWordCount], call[abi::kWordComm],
                call[abi::kWordRootSrcDst], call[abi::kWordFunction], call[abi::kWordTag],
                call[abi::kWordArithConfig], call[abi::kWordCompressionFlags], call[abi::kWordStreamFlags],
                static_cast<unsigned long long>(call.addr(0)), static_cast<unsigned long long>(call.addr(1)),
                static_cast<unsigned long long>(call.addr(2)));
  return buf;
}

}  // namespace accl::hw
