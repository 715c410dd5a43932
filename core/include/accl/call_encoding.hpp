// SPDX-License-Identifier: Apache-2.0
//
// Encoding of one call into the 15 words the host controller hands to the
// CCLO. This is a pure function of its inputs (no device, no driver state) so
// that every backend and its tests can check the exact words a call produces.
//
// The arithmetic-configuration and compression rules mirror public ACCL's
// prepare_call (accl-reference §1.4):
//  * no operand types (config, nop)          -> arith config 0, no compression
//  * barrier                                 -> the first arith config (any valid one)
//  * one type T, no compress_dtype            -> config (T, T)
//  * two types, no compress_dtype             -> the smaller one is the compressed
//                                                type C: config (U, C) and the
//                                                OPx/RES_COMPRESSED flag of every
//                                                operand of type C
//  * compress_dtype D (D != T)                -> ETH_COMPRESSED; one type T: config
//                                                (T, D); two types: they must be
//                                                {U, D}, per-operand flags as above
// Deliberate difference: compress_dtype equal to the only operand type means
// "nothing to compress" and encodes like compress_dtype == none (public ACCL
// would set ETH_COMPRESSED with a (T, T) config, asking for a no-op lane).
#pragma once

#include <accl/abi.hpp>
#include <accl/device.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace accl::encoding {

// One of the three operands of a call (op0, op1, result).
struct Operand {
  abi::DataType type = abi::DataType::none;  // none: the call has no such operand
  uint64_t address = 0;                      // ignored for stream operands
  bool host_only = false;                    // CCLO reaches host memory directly
  bool stream = false;                       // op0: pulled from / result: pushed to the kernel stream
};

struct CallSpec {
  abi::Scenario scenario = abi::kNop;
  uint32_t count = 0;          // elements (per rank where the call says so)
  uint32_t comm_address = 0;   // exchange-memory address of the communicator
  uint32_t root_src_dst = 0;
  uint32_t function = 0;       // ConfigFunction for kConfig, ReduceFunction for reducing calls
  uint32_t tag = abi::kTagAny;
  Operand op0;
  Operand op1;
  Operand result;
  abi::DataType compress_dtype = abi::DataType::none;
};

// Where one arithmetic configuration lives and how many reduce functions it
// lists (a reducing call's function must index into arith_tdest).
struct ArithSlot {
  uint32_t address = 0;
  uint32_t num_functions = 0;
  uint32_t undefined_functions = 0;  // bit f: arith_tdest[f] is abi::kFnNone (the type has no such function)
};
using ArithSlots = std::map<std::pair<abi::DataType, abi::DataType>, ArithSlot>;

struct Encoded {
  CallWords words;
  std::string error;  // empty on success; otherwise why the call cannot be encoded
  bool ok() const { return error.empty(); }
};

// True for the scenarios whose `function` word selects a reduce function.
bool is_reducing(abi::Scenario scenario);

Encoded encode_call(const CallSpec& spec, const ArithSlots& arith);

// "float32", "int64", ... for messages.
const char* data_type_name(abi::DataType type);

}  // namespace accl::encoding
