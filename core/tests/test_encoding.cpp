// SPDX-License-Identifier: Apache-2.0
//
// The pure call encoder: arithmetic-configuration selection, compression,
// host and stream flags, word placement.
#include <accl/call_encoding.hpp>

#include <gtest/gtest.h>

namespace accl {
using namespace encoding;
using abi::DataType;

namespace {

const ArithSlots kSlots = {
    {{DataType::float16, DataType::float16}, {0x100, 4}},
    {{DataType::float32, DataType::float16}, {0x200, 4}},
    {{DataType::float32, DataType::float32}, {0x300, 4}},
    {{DataType::float64, DataType::float64}, {0x400, 2}},  // SUM and MAX only
    {{DataType::int32, DataType::int32}, {0x500, 4}},
};

Operand mem(DataType t, uint64_t address, bool host = false) {
  return Operand{.type = t, .address = address, .host_only = host};
}
Operand stream(DataType t) { return Operand{.type = t, .stream = true}; }

TEST(Encoding, WordsLandWhereTheAbiSays) {
  CallSpec spec;
  spec.scenario = abi::kReduce;
  spec.count = 1000;
  spec.comm_address = 0x1C8;
  spec.root_src_dst = 3;
  spec.function = abi::kMax;
  spec.tag = 42;
  spec.op0 = mem(DataType::float32, 0x1'2345'6780ull);
  spec.result = mem(DataType::float32, 0xAB'0000'0040ull, true);
  auto e = encode_call(spec, kSlots);
  ASSERT_TRUE(e.ok()) << e.error;
  const std::array<uint32_t, 15> expected = {abi::kReduce, 1000, 0x1C8, 3, abi::kMax, 42, 0x300, 0,
                                             abi::kResHost << 8, 0x23456780, 0x1, 0, 0, 0x40, 0xAB};
  EXPECT_EQ(e.words.words, expected);
}

TEST(Encoding, NoOperandsMeansNoArithConfig) {
  CallSpec spec;
  spec.scenario = abi::kConfig;
  spec.function = abi::kSetTimeout;
  spec.count = 5;
  auto e = encode_call(spec, kSlots);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.words[abi::kWordArithConfig], 0u);
  EXPECT_EQ(e.words[abi::kWordCompressionFlags], 0u);
  EXPECT_EQ(e.words[abi::kWordFunction], abi::kSetTimeout);
}

TEST(Encoding, BarrierTakesTheFirstConfig) {
  CallSpec spec;
  spec.scenario = abi::kBarrier;
  auto e = encode_call(spec, kSlots);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.words[abi::kWordArithConfig], 0x100u);
  EXPECT_FALSE(encode_call(spec, {}).ok());
}

TEST(Encoding, OneTypeWithAndWithoutCompression) {
  CallSpec spec;
  spec.scenario = abi::kSend;
  spec.op0 = mem(DataType::float32, 0x1000);
  auto e = encode_call(spec, kSlots);
  EXPECT_EQ(e.words[abi::kWordArithConfig], 0x300u);
  EXPECT_EQ(e.words[abi::kWordCompressionFlags], 0u);

  spec.compress_dtype = DataType::float16;
  e = encode_call(spec, kSlots);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.words[abi::kWordArithConfig], 0x200u);
  EXPECT_EQ(e.words[abi::kWordCompressionFlags], abi::kEthCompressed);

  // Compressing to the type the data already has is no compression.
  spec.op0 = mem(DataType::float16, 0x1000);
  e = encode_call(spec, kSlots);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.words[abi::kWordArithConfig], 0x100u);
  EXPECT_EQ(e.words[abi::kWordCompressionFlags], 0u);

  // No (float64, float16) configuration.
  spec.op0 = mem(DataType::float64, 0x1000);
  e = encode_call(spec, kSlots);
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.error, "no arithmetic configuration for data types (float64, float16)");
}

TEST(Encoding, TwoTypesMarkTheCompressedOperands) {
  CallSpec spec;
  spec.scenario = abi::kCombine;
  spec.op0 = mem(DataType::float16, 0x1000);
  spec.op1 = mem(DataType::float32, 0x2000);
  spec.result = mem(DataType::float16, 0x3000);
  auto e = encode_call(spec, kSlots);
  ASSERT_TRUE(e.ok()) << e.error;
  EXPECT_EQ(e.words[abi::kWordArithConfig], 0x200u);
  EXPECT_EQ(e.words[abi::kWordCompressionFlags], abi::kOp0Compressed | abi::kResCompressed);

  // With compress_dtype the wire is compressed too.
  spec.compress_dtype = DataType::float16;
  e = encode_call(spec, kSlots);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.words[abi::kWordCompressionFlags], abi::kOp0Compressed | abi::kResCompressed | abi::kEthCompressed);

  // compress_dtype must be one of the two types.
  spec.compress_dtype = DataType::int32;
  e = encode_call(spec, kSlots);
  EXPECT_FALSE(e.ok());
  EXPECT_NE(e.error.find("unsupported data type combination"), std::string::npos) << e.error;

  // Equal sizes: neither is a compressed form of the other.
  spec.compress_dtype = DataType::none;
  spec.op0 = mem(DataType::int32, 0x1000);
  spec.result = mem(DataType::int32, 0x3000);
  EXPECT_FALSE(encode_call(spec, kSlots).ok());

  // Three types.
  spec.op0 = mem(DataType::float16, 0x1000);
  spec.result = mem(DataType::float64, 0x3000);
  EXPECT_FALSE(encode_call(spec, kSlots).ok());
}

TEST(Encoding, ReduceFunctionMustBeInTheConfig) {
  CallSpec spec;
  spec.scenario = abi::kAllreduce;
  spec.op0 = mem(DataType::float64, 0x1000);
  spec.result = mem(DataType::float64, 0x2000);
  spec.function = abi::kMax;
  EXPECT_TRUE(encode_call(spec, kSlots).ok());
  spec.function = abi::kMin;
  auto e = encode_call(spec, kSlots);
  EXPECT_FALSE(e.ok());
  EXPECT_NE(e.error.find("lists 2 functions"), std::string::npos) << e.error;
  // Non-reducing calls do not care about the function word.
  spec.scenario = abi::kCopy;
  EXPECT_TRUE(encode_call(spec, kSlots).ok());
}

TEST(Encoding, StreamAndHostFlags) {
  CallSpec spec;
  spec.scenario = abi::kSend;
  spec.op0 = stream(DataType::int32);
  spec.op0.address = 0x999;  // ignored for a stream operand
  spec.result = stream(DataType::int32);
  auto e = encode_call(spec, kSlots);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.words[abi::kWordStreamFlags], abi::kOp0Stream | abi::kResStream);
  EXPECT_EQ(e.words[abi::kWordArithConfig], 0x500u);
  EXPECT_EQ(e.words.addr(0), 0u);

  spec.op0 = mem(DataType::int32, 0x1000, true);
  spec.op1 = mem(DataType::int32, 0x2000, true);
  spec.result = mem(DataType::int32, 0x3000, true);
  e = encode_call(spec, kSlots);
  EXPECT_EQ(e.words[abi::kWordStreamFlags], (abi::kOp0Host | abi::kOp1Host | abi::kResHost) << 8);
}

TEST(Encoding, Names) {
  EXPECT_STREQ(data_type_name(DataType::float16), "float16");
  EXPECT_TRUE(is_reducing(abi::kReduceScatter));
  EXPECT_FALSE(is_reducing(abi::kGather));
}

}  // namespace
}  // namespace accl
