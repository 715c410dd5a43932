// SPDX-License-Identifier: Apache-2.0
//
// Default arithmetic configurations: public ACCL's six keys, each listing the
// function ids for SUM, MAX, MIN, PROD in reduceFunction index order (the
// firmware indexes arith_tdest with the call's function word), integer types
// also BAND..LXOR; then the extension types (8/16-bit, unsigned, pairs).
#include <accl/accl.hpp>

#include <iterator>

namespace accl {
namespace {

ArithConfig plain(uint32_t elem_bytes, std::vector<uint32_t> functions) {
  ArithConfig c;
  c.uncompressed_elem_bytes = elem_bytes;
  c.compressed_elem_bytes = elem_bytes;
  c.elem_ratio_log = 0;
  c.compressor_tdest = 0;
  c.decompressor_tdest = 0;
  c.arith_is_compressed = false;
  c.arith_tdest = std::move(functions);
  return c;
}

using abi::ArithElem;
using abi::ArithOp;

// The ten integer functions on `elem`, public ids first where they exist.
std::vector<uint32_t> integer_functions(ArithElem elem, std::vector<uint32_t> public_ids = {}) {
  static constexpr ArithOp kOps[] = {ArithOp::sum,  ArithOp::max, ArithOp::min,  ArithOp::prod, ArithOp::band,
                                     ArithOp::bor,  ArithOp::bxor, ArithOp::land, ArithOp::lor,  ArithOp::lxor};
  std::vector<uint32_t> ids = std::move(public_ids);
  for (size_t i = ids.size(); i < std::size(kOps); ++i) ids.push_back(abi::extended_function(kOps[i], elem));
  return ids;
}

// A pair type has MINLOC and MAXLOC only.
std::vector<uint32_t> loc_functions(ArithElem elem) {
  std::vector<uint32_t> ids(abi::kMinLoc, abi::kFnNone);
  ids.push_back(abi::extended_function(ArithOp::minloc, elem));
  ids.push_back(abi::extended_function(ArithOp::maxloc, elem));
  return ids;
}

}  // namespace

const arithConfigMap& default_arith_config() {
  using namespace abi;
  static const arithConfigMap table = [] {
    arithConfigMap m;
    m[{dataType::float16, dataType::float16}] = plain(2, {kFnSumF16, kFnMaxF16, kFnMinF16, kFnProdF16});
    // float32 on the host, float16 on the wire: compress with lane 0, decompress
    // with lane 1, and reduce on the compressed (fp16) values as public ACCL does.
    ArithConfig compressed = plain(4, {kFnSumF16, kFnMaxF16, kFnMinF16, kFnProdF16});
    compressed.compressed_elem_bytes = 2;
    compressed.compressor_tdest = kLaneF32ToF16;
    compressed.decompressor_tdest = kLaneF16ToF32;
    compressed.arith_is_compressed = true;
    m[{dataType::float32, dataType::float16}] = compressed;
    m[{dataType::float32, dataType::float32}] = plain(4, {kFnSumF32, kFnMaxF32, kFnMinF32, kFnProdF32});
    m[{dataType::float64, dataType::float64}] = plain(8, {kFnSumF64, kFnMaxF64, kFnMinF64, kFnProdF64});
    m[{dataType::int32, dataType::int32}] =
        plain(4, integer_functions(ArithElem::i32, {kFnSumI32, kFnMaxI32, kFnMinI32, kFnProdI32}));
    m[{dataType::int64, dataType::int64}] =
        plain(8, integer_functions(ArithElem::i64, {kFnSumI64, kFnMaxI64, kFnMinI64, kFnProdI64}));
    const std::pair<dataType, ArithElem> integers[] = {
        {dataType::int8, ArithElem::i8},     {dataType::uint8, ArithElem::u8},   {dataType::int16, ArithElem::i16},
        {dataType::uint16, ArithElem::u16},  {dataType::uint32, ArithElem::u32}, {dataType::uint64, ArithElem::u64}};
    for (const auto& [type, elem] : integers) m[{type, type}] = plain(data_type_bytes(type), integer_functions(elem));
    const std::pair<dataType, ArithElem> pairs[] = {
        {dataType::int32_int, ArithElem::i32_i32},   {dataType::float32_int, ArithElem::f32_i32},
        {dataType::float64_int, ArithElem::f64_i32}, {dataType::int64_int, ArithElem::i64_i32},
        {dataType::int16_int, ArithElem::i16_i32},   {dataType::float32_float32, ArithElem::f32_f32},
        {dataType::float64_float64, ArithElem::f64_f64}};
    for (const auto& [type, elem] : pairs) m[{type, type}] = plain(data_type_bytes(type), loc_functions(elem));
    return m;
  }();
  return table;
}

}  // namespace accl
