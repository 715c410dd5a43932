// SPDX-License-Identifier: Apache-2.0
//
// Default arithmetic configurations: public ACCL's six keys, each listing the
// function ids for SUM, MAX, MIN, PROD in reduceFunction index order (the
// firmware indexes arith_tdest with the call's function word).
#include <accl/accl.hpp>

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
    m[{dataType::int32, dataType::int32}] = plain(4, {kFnSumI32, kFnMaxI32, kFnMinI32, kFnProdI32});
    m[{dataType::int64, dataType::int64}] = plain(8, {kFnSumI64, kFnMaxI64, kFnMinI64, kFnProdI64});
    return m;
  }();
  return table;
}

}  // namespace accl
