// SPDX-License-Identifier: Apache-2.0
//
// Buffers and slices, fp16 conversion, error names, the exchange allocator.
#include "../src/exchange_allocator.hpp"
#include "rig.hpp"

#include <accl/accl.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

// Beside the rig (rig.hpp), whose names then need no qualification.
namespace accl::testing {

namespace {

TEST(Buffers, DeviceBufferHasAMirrorAndSyncsBothWays) {
  Rig rig(2, 0);
  auto buf = rig.accl->create_buffer<int32_t>(100);
  EXPECT_EQ(buf->length(), 100u);
  EXPECT_EQ(buf->size(), 400u);
  EXPECT_EQ(buf->type(), dataType::int32);
  EXPECT_FALSE(buf->is_host_only());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->buffer()) % 4096, 0u) << "page-aligned host mirror";
  EXPECT_EQ(&buf->owner(), rig.accl.get());
  for (int i = 0; i < 100; ++i) (*buf)[i] = i * 3;
  buf->sync_to_device();
  const auto& mem = rig.state->memory.at(buf->address());
  int32_t v;
  std::memcpy(&v, mem.data() + 4 * 7, 4);
  EXPECT_EQ(v, 21);
  std::fill(buf->begin(), buf->end(), 0);
  buf->sync_from_device();
  EXPECT_EQ((*buf)[99], 297);
}

TEST(Buffers, UserPointerBecomesTheMirror) {
  Rig rig(2, 0);
  std::vector<double> user(10, 1.5);
  auto buf = rig.accl->create_buffer<double>(user.data(), user.size());
  EXPECT_EQ(buf->buffer(), user.data());
  buf->sync_to_device();
  user.assign(10, 0.0);
  buf->sync_from_device();
  EXPECT_EQ(user[9], 1.5);
}

TEST(Buffers, HostOnlyBuffersNeverSync) {
  Rig rig(2, 0);
  rig.clear_log();
  auto buf = rig.accl->create_buffer_host<float>(32);
  EXPECT_TRUE(buf->is_host_only());
  EXPECT_EQ(buf->address(), reinterpret_cast<uint64_t>(buf->buffer())) << "fake maps host memory 1:1";
  buf->sync_to_device();
  buf->sync_from_device();
  EXPECT_TRUE(rig.state->to_device.empty());
  EXPECT_TRUE(rig.state->from_device.empty());
  std::vector<float> user(8);
  auto mapped = rig.accl->create_buffer_host<float>(user.data(), user.size());
  EXPECT_EQ(mapped->buffer(), user.data());
  EXPECT_EQ(mapped->placement(), BufferPlacement::host_only);
}

TEST(Buffers, SlicesShareStorageAndAddressInBytes) {
  Rig rig(2, 0);
  auto buf = rig.accl->create_buffer<float>(64);
  auto slice = buf->slice(10, 20);
  EXPECT_EQ(slice->length(), 10u);
  EXPECT_EQ(slice->size(), 40u);
  EXPECT_EQ(slice->type(), dataType::float32);
  // Element 10 of a float buffer is 40 bytes in (public ACCL's SimBuffer adds 10).
  EXPECT_EQ(slice->address(), buf->address() + 40);
  EXPECT_EQ(slice->byte_array(), static_cast<void*>(buf->buffer() + 10));
  auto nested = slice->slice(2, 4);
  EXPECT_EQ(nested->address(), buf->address() + 48);
  // Syncing a slice moves only its bytes.
  (*buf)[12] = 7.0f;
  rig.clear_log();
  nested->sync_to_device();
  ASSERT_EQ(rig.state->to_device.size(), 1u);
  EXPECT_EQ(rig.state->to_device[0].address, buf->address() + 48);
  EXPECT_EQ(rig.state->to_device[0].bytes, 8u);
  // The slice keeps the memory alive after its parent is gone.
  const uint64_t addr = buf->address();
  buf.reset();
  EXPECT_TRUE(rig.state->memory.count(addr));
  slice.reset();
  EXPECT_TRUE(rig.state->memory.count(addr));
  nested.reset();
  EXPECT_FALSE(rig.state->memory.count(addr));
  auto whole = rig.accl->create_buffer<float>(4);
  EXPECT_THROW(whole->slice(3, 2), ArgumentError);
  EXPECT_THROW(whole->slice(0, 5), ArgumentError);
  EXPECT_EQ(whole->slice(4, 4)->length(), 0u);
}

TEST(Buffers, SlicesAreValidCallOperands) {
  Rig rig(2, 0);
  auto a = rig.accl->create_buffer<float>(64);
  auto b = rig.accl->create_buffer<float>(64);
  for (size_t i = 0; i < 64; ++i) (*a)[i] = static_cast<float>(i);
  auto src = a->slice(32, 64);
  auto dst = b->slice(8, 40);
  rig.accl->copy(*src, *dst, 32);
  EXPECT_EQ((*b)[8], 32.0f);
  EXPECT_EQ((*b)[39], 63.0f);
  EXPECT_EQ((*b)[40], 0.0f);
  EXPECT_THROW(rig.accl->copy(*src, *dst, 33), ArgumentError);
}

TEST(Buffers, FreedWithTheirLastReferenceEvenAfterTheDriver) {
  auto state = std::make_shared<FakeDevice::State>();
  std::unique_ptr<BaseBuffer> survivor;
  {
    ACCL accl(std::make_unique<FakeDevice>(state));
    survivor = accl.create_buffer<float>(16);
    EXPECT_EQ(state->live_allocations, 1);
  }
  EXPECT_EQ(state->live_allocations, 1);
  survivor.reset();
  EXPECT_EQ(state->live_allocations, 0);
}

TEST(Buffers, NeedADataType) {
  Rig rig(2, 0);
  auto msg = message_of<ArgumentError>([&] { rig.accl->create_buffer<char16_t>(4); });  // no dataType for char16_t
  EXPECT_NE(msg.find("data type"), std::string::npos) << msg;
  auto empty = rig.accl->create_buffer<float>(0);
  EXPECT_EQ(empty->size(), 0u);
  empty->sync_to_device();
}

// Host address 0 is never memory: before, a null user pointer silently meant
// "allocate", so data written "to NULL" landed in a fresh buffer that a later
// call reading "from NULL" got back (issue 38).
TEST(Buffers, NullOrFirstPageUserPointerIsRejected) {
  Rig rig(2, 0);
  const int live_before = rig.state->live_allocations;
  int32_t* null_ptr = nullptr;
  auto msg = message_of<ArgumentError>([&] { rig.accl->create_buffer_host<int32_t>(null_ptr, 64); });
  EXPECT_NE(msg.find("create_buffer_host"), std::string::npos) << msg;
  EXPECT_NE(msg.find("host pointer NULL for 64 elements"), std::string::npos) << msg;
  msg = message_of<ArgumentError>([&] { rig.accl->create_buffer<int32_t>(null_ptr, 8); });
  EXPECT_NE(msg.find("create_buffer"), std::string::npos) << msg;
  // MPI_IN_PLACE is (void*)1 in Open MPI.
  auto* in_place = reinterpret_cast<uint8_t*>(uintptr_t{1});
  msg = message_of<ArgumentError>([&] { rig.accl->create_buffer_host<uint8_t>(in_place, 16, dataType::int8); });
  EXPECT_NE(msg.find("first page"), std::string::npos) << msg;
  EXPECT_EQ(rig.state->live_allocations, live_before) << "nothing allocated for a rejected pointer";
  // Zero elements at NULL describe no memory and stay valid.
  auto empty = rig.accl->create_buffer_host<int32_t>(null_ptr, 0);
  EXPECT_EQ(empty->size(), 0u);
  // The allocating overloads are unaffected.
  auto owned = rig.accl->create_buffer_host<int32_t>(64);
  EXPECT_NE(owned->buffer(), nullptr);
}

TEST(Half, RoundTripsAndRounding) {
  EXPECT_EQ(float_to_half(1.0f).bits, 0x3C00);
  EXPECT_EQ(float_to_half(-2.0f).bits, 0xC000);
  EXPECT_EQ(float_to_half(65504.0f).bits, 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f).bits, 0x7C00) << "rounds up to infinity";
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()).bits, 0x7C00);
  EXPECT_EQ(float_to_half(-0.0f).bits, 0x8000);
  EXPECT_EQ(float_to_half(5.960464477539063e-8f).bits, 0x0001) << "smallest subnormal";
  EXPECT_EQ(float_to_half(2.98023223876953125e-8f).bits, 0x0000) << "tie rounds to even (zero)";
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048).bits, 0x3C00) << "tie rounds to even";
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048).bits, 0x3C02) << "tie rounds to even (up)";
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  EXPECT_EQ(half_to_float({0x3555}), 0.333251953125f);
  EXPECT_EQ(half_to_float({0x0001}), 5.960464477539063e-8f);
  EXPECT_EQ(half_to_float({0x03FF}), 6.097555160522461e-5f);
  EXPECT_EQ(half_to_float({0xFC00}), -std::numeric_limits<float>::infinity());
  // Every finite half survives a round trip.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float16_t h{static_cast<uint16_t>(bits)};
    if ((bits & 0x7C00) == 0x7C00) continue;
    EXPECT_EQ(float_to_half(half_to_float(h)).bits, h.bits) << std::hex << bits;
  }
}

TEST(Errors, BitNamesCoverEveryBit) {
  EXPECT_EQ(error_code_to_string(0), "OK");
  EXPECT_EQ(error_code_to_string(abi::kDmaMismatchError | abi::kDmaTagMismatchError),
            "DMA_MISMATCH_ERROR | DMA_TAG_MISMATCH_ERROR");
  EXPECT_EQ(error_bit_names(abi::kReceiveTimeoutError), std::vector<std::string>{"RECEIVE_TIMEOUT_ERROR"});
  EXPECT_EQ(error_bit_names(abi::kInvalidArgument | abi::kNotConfigured | abi::kLinkError | abi::kTruncationError |
                            abi::kNotReady),
            (std::vector<std::string>{"INVALID_ARGUMENT", "NOT_CONFIGURED", "LINK_ERROR", "TRUNCATION_ERROR",
                                      "NOT_READY_ERROR"}));
  EXPECT_EQ(error_bit_names(0xFFFFFFFFu).size(), 32u);
  DeviceError e("gather", 3, abi::kSegmenterExpectedBttError);
  EXPECT_EQ(std::string(e.what()),
            "call 'gather' on rank 3 failed on the device: SEGMENTER_EXPECTED_BTT_ERROR (retcode 0x02000000)");
}

TEST(ExchangeAllocator, FirstFitWithMerging) {
  detail::ExchangeAllocator a;
  a.reset(0x100, 0x200);
  EXPECT_EQ(a.allocate(0x10), 0x100u);
  EXPECT_EQ(a.allocate(0x22), 0x110u) << "sizes round up to words";
  EXPECT_EQ(a.allocate(0x10), 0x134u);
  EXPECT_EQ(a.bytes_free(), 0x100u - 0x44u);
  a.release(0x110, 0x22);
  EXPECT_EQ(a.allocate(0x8), 0x110u) << "first fit reuses the hole";
  a.release(0x100, 0x10);
  a.release(0x110, 0x8);
  EXPECT_EQ(a.bytes_free(), 0x34u + 0xBCu) << "holes merged: 0x100..0x134 and 0x144..0x200";
  EXPECT_EQ(a.allocate(0x34), 0x100u) << "the merged hole fits exactly";
  a.release(0x100, 0x34);
  a.release(0x134, 0x10);
  EXPECT_EQ(a.largest_free_block(), 0x100u) << "everything merged back";
  EXPECT_FALSE(a.allocate(0x104).has_value());
  EXPECT_EQ(a.allocate(0x100), 0x100u);
  EXPECT_FALSE(a.allocate(4).has_value());
}

}  // namespace
}  // namespace accl::testing
