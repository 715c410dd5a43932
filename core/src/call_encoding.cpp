// SPDX-License-Identifier: Apache-2.0
#include <accl/call_encoding.hpp>

#include <array>

namespace accl::encoding {

using abi::DataType;

const char* data_type_name(DataType type) {
  switch (type) {
    case DataType::none: return "none";
    case DataType::int8: return "int8";
    case DataType::float16: return "float16";
    case DataType::float32: return "float32";
    case DataType::float64: return "float64";
    case DataType::int32: return "int32";
    case DataType::int64: return "int64";
    case DataType::int16: return "int16";
    case DataType::uint8: return "uint8";
    case DataType::uint16: return "uint16";
    case DataType::uint32: return "uint32";
    case DataType::uint64: return "uint64";
    case DataType::int32_int: return "int32_int";
    case DataType::float32_int: return "float32_int";
    case DataType::float64_int: return "float64_int";
    case DataType::int64_int: return "int64_int";
    case DataType::int16_int: return "int16_int";
    case DataType::float32_float32: return "float32_float32";
    case DataType::float64_float64: return "float64_float64";
  }
  return "unknown";
}

bool is_reducing(abi::Scenario scenario) {
  return scenario == abi::kCombine || scenario == abi::kReduce || scenario == abi::kAllreduce ||
         scenario == abi::kReduceScatter;
}

namespace {

std::string pair_name(DataType uncompressed, DataType compressed) {
  return std::string("(") + data_type_name(uncompressed) + ", " + data_type_name(compressed) + ")";
}

// The arith config and compression flags for the operand types of a call.
struct ArithChoice {
  bool has_config = false;
  DataType uncompressed = DataType::none;
  DataType compressed = DataType::none;
  uint32_t flags = abi::kNoCompression;
};

// Fills in `choice`, or says why it cannot in `error` and returns false. The
// text is built only on failure: every call passes here, and returning an
// empty string by value cost each one a string move and destructor. Inlined
// (its one caller): as a call of its own it cost more than that saved.
[[gnu::always_inline]] inline bool choose_arith(const CallSpec& spec, const ArithSlots& arith, ArithChoice& choice, std::string& error) {
  const std::array<const Operand*, 3> operands{&spec.op0, &spec.op1, &spec.result};
  const std::array<uint32_t, 3> compressed_flag{abi::kOp0Compressed, abi::kOp1Compressed, abi::kResCompressed};

  // Distinct operand types, in operand order.
  std::array<DataType, 3> types{};
  size_t ntypes = 0;
  for (const Operand* op : operands) {
    if (op->type == DataType::none) continue;
    bool seen = false;
    for (size_t i = 0; i < ntypes; ++i) seen = seen || types[i] == op->type;
    if (!seen) types[ntypes++] = op->type;
  }

  if (spec.scenario == abi::kBarrier) {
    // Public ACCL hands barrier the first configuration: the firmware needs a
    // valid element size even though no data moves.
    if (arith.empty()) {
      error = "no arithmetic configuration is loaded";
      return false;
    }
    choice.has_config = true;
    choice.uncompressed = arith.begin()->first.first;
    choice.compressed = arith.begin()->first.second;
    return true;
  }
  if (ntypes == 0) return true;  // config and nop: arith config 0
  if (ntypes > 2) {
    error = "operands of three different data types cannot be combined";
    return false;
  }

  const DataType wire = spec.compress_dtype;
  if (ntypes == 1) {
    choice.has_config = true;
    choice.uncompressed = types[0];
    if (wire == DataType::none || wire == types[0]) {
      choice.compressed = types[0];
    } else {
      choice.compressed = wire;
      choice.flags = abi::kEthCompressed;
    }
    return true;
  }

  // Two types: one of them is the compressed representation of the other.
  DataType compressed;
  if (wire != DataType::none) {
    if (types[0] != wire && types[1] != wire) {
      error = "unsupported data type combination: " + pair_name(types[0], types[1]) + " with compress_dtype " +
              data_type_name(wire);
      return false;
    }
    compressed = wire;
    choice.flags = abi::kEthCompressed;
  } else {
    const uint32_t b0 = abi::data_type_bytes(types[0]);
    const uint32_t b1 = abi::data_type_bytes(types[1]);
    if (b0 == b1) {
      error = "unsupported data type combination: " + pair_name(types[0], types[1]) +
              " (same element size, neither is a compressed form of the other)";
      return false;
    }
    compressed = b0 < b1 ? types[0] : types[1];
  }
  choice.has_config = true;
  choice.compressed = compressed;
  choice.uncompressed = types[0] == compressed ? types[1] : types[0];
  for (size_t i = 0; i < operands.size(); ++i)
    if (operands[i]->type == compressed) choice.flags |= compressed_flag[i];
  return true;
}

}  // namespace

Encoded encode_call(const CallSpec& spec, const ArithSlots& arith) {
  Encoded out;
  ArithChoice choice;
  if (!choose_arith(spec, arith, choice, out.error)) return out;

  uint32_t arith_address = 0;
  if (choice.has_config) {
    auto it = arith.find({choice.uncompressed, choice.compressed});
    if (it == arith.end()) {
      out.error = "no arithmetic configuration for data types " + pair_name(choice.uncompressed, choice.compressed);
      return out;
    }
    if (is_reducing(spec.scenario) && spec.function >= it->second.num_functions) {
      out.error = "reduce function " + std::to_string(spec.function) + " is not in the arithmetic configuration " +
                  pair_name(choice.uncompressed, choice.compressed) + " (it lists " +
                  std::to_string(it->second.num_functions) + " functions)";
      return out;
    }
    const bool undefined = spec.function < 32 && (it->second.undefined_functions >> spec.function & 1u) != 0;
    if (is_reducing(spec.scenario) && undefined) {
      out.error = "reduce function " + std::to_string(spec.function) + " is not defined for the data types " +
                  pair_name(choice.uncompressed, choice.compressed);
      return out;
    }
    arith_address = it->second.address;
  }

  uint32_t stream_flags = abi::kNoStream;
  if (spec.op0.stream) stream_flags |= abi::kOp0Stream;
  if (spec.result.stream) stream_flags |= abi::kResStream;
  uint32_t host_flags = abi::kNoHost;
  if (spec.op0.host_only && !spec.op0.stream) host_flags |= abi::kOp0Host;
  if (spec.op1.host_only) host_flags |= abi::kOp1Host;
  if (spec.result.host_only && !spec.result.stream) host_flags |= abi::kResHost;

  CallWords& w = out.words;
  w[abi::kWordScenario] = spec.scenario;
  w[abi::kWordCount] = spec.count;
  w[abi::kWordComm] = spec.comm_address;
  w[abi::kWordRootSrcDst] = spec.root_src_dst;
  w[abi::kWordFunction] = spec.function;
  w[abi::kWordTag] = spec.tag;
  w[abi::kWordArithConfig] = arith_address;
  w[abi::kWordCompressionFlags] = choice.flags;
  w[abi::kWordStreamFlags] = (host_flags << 8) | stream_flags;
  w.set_addr(0, spec.op0.stream ? 0 : spec.op0.address);
  w.set_addr(1, spec.op1.address);
  w.set_addr(2, spec.result.stream ? 0 : spec.result.address);
  return out;
}

}  // namespace accl::encoding
