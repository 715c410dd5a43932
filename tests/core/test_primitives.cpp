// SPDX-License-Identifier: Apache-2.0
//
// core-primitives: local calls on a single-rank world in detail: copy and
// combine over every type, count and buffer placement (device <-> host-only
// in all four directions), from_fpga/to_fpga, slices, user memory, memory
// banks, nop, device facts and the configuration the driver wrote.
#include "common/types.hpp"
#include "common/world.hpp"

#include <accl/accl.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <tuple>
#include <vector>

namespace acclt {
namespace {

using accl::ACCL;

World& world1() { return World::get(1); }

std::string dir_name(bool src_host, bool dst_host) {
  return std::string(src_host ? "h" : "d") + "2" + (dst_host ? "h" : "d");
}

// ---------------------------------------------------------------------------
// copy: type x count x source placement x destination placement

using CopyParam = std::tuple<dataType, CountKind, bool /*src host*/, bool /*dst host*/>;
class CopyMatrix : public ::testing::TestWithParam<CopyParam> {};

TEST_P(CopyMatrix, Copy) {
  const auto [type, count, src_host, dst_host] = GetParam();
  World& w = world1();
  dispatch_type(type, [&, type = type, count = count, src_host = src_host, dst_host = dst_host]<typename T>() {
    const size_t n = count_of(count, type, w.rx_buffer_bytes());
    w.run([&](unsigned, ACCL& a) {
      auto val = [&](size_t i) { return roundtrip<T>(pattern_value(Pattern::unique, type, 3, i, 5)); };
      auto src = make_buffer<T>(a, n + 2, src_host);
      fill_sentinel(*src);
      fill(*src, 0, n, val);
      auto dst = make_buffer<T>(a, n + 2, dst_host);
      fill_sentinel(*dst);
      if (!dst_host) dst->sync_to_device();
      EXPECT_EQ(src->is_host_only(), src_host);
      EXPECT_EQ(dst->is_host_only(), dst_host);
      auto req = a.copy(*src, *dst, static_cast<unsigned>(n));
      ASSERT_TRUE(req);
      EXPECT_EQ(req->retcode(), 0u);
      EXPECT_TRUE(check_range(*dst, 0, n, val, "copy dst"));
      EXPECT_TRUE(check_sentinel(*dst, n, "copy dst tail"));
      EXPECT_TRUE(check_range(*src, 0, n, val, "copy src unchanged"));
    });
  });
}

INSTANTIATE_TEST_SUITE_P(
    P1, CopyMatrix,
    ::testing::Combine(::testing::ValuesIn(all_types()),
                       ::testing::Values(CountKind::one, CountKind::c17, CountKind::rxbuf, CountKind::rxbuf_plus1,
                                         CountKind::mib),
                       ::testing::Bool(), ::testing::Bool()),
    [](const ::testing::TestParamInfo<CopyParam>& pi) {
      return type_name(std::get<0>(pi.param)) + "_" + count_name(std::get<1>(pi.param)) + "_" +
             dir_name(std::get<2>(pi.param), std::get<3>(pi.param));
    });

// ---------------------------------------------------------------------------
// combine: type x function x count x placement

using CombineParam = std::tuple<dataType, reduceFunction, CountKind, Placement>;
class CombineMatrix : public ::testing::TestWithParam<CombineParam> {};

TEST_P(CombineMatrix, Combine) {
  const auto [type, op, count, place] = GetParam();
  World& w = world1();
  dispatch_type(type, [&, type = type, op = op, count = count, place = place]<typename T>() {
    const size_t n = count_of(count, type, w.rx_buffer_bytes());
    w.run([&](unsigned, ACCL& a) {
      const Pattern pat = pattern_for(op);
      auto v1 = [&](size_t i) { return roundtrip<T>(pattern_value(pat, type, 1, i, 7)); };
      auto v2 = [&](size_t i) { return roundtrip<T>(pattern_value(pat, type, 6, i, 9)); };
      const bool h1 = place != Placement::device;  // mixed: val1 host, val2 device, result host
      const bool h2 = place == Placement::host;
      const bool hr = place != Placement::device;
      auto a1 = make_buffer<T>(a, n, h1);
      auto a2 = make_buffer<T>(a, n, h2);
      auto res = make_buffer<T>(a, n + 2, hr);
      fill(*a1, 0, n, v1);
      fill(*a2, 0, n, v2);
      fill_sentinel(*res);
      if (!hr) res->sync_to_device();
      a.combine(static_cast<unsigned>(n), op, *a1, *a2, *res);
      EXPECT_TRUE(check_range(*res, 0, n, [&](size_t i) { return roundtrip<T>(reduce_ref(op, v1(i), v2(i))); },
                              "combine " + op_name(op) + " result"));
      EXPECT_TRUE(check_sentinel(*res, n, "combine result tail"));
      EXPECT_TRUE(check_range(*a1, 0, n, v1, "val1 unchanged"));
      EXPECT_TRUE(check_range(*a2, 0, n, v2, "val2 unchanged"));
    });
  });
}

INSTANTIATE_TEST_SUITE_P(
    P1, CombineMatrix,
    ::testing::Combine(::testing::ValuesIn(all_types()), ::testing::ValuesIn(all_ops()),
                       ::testing::Values(CountKind::one, CountKind::c17, CountKind::rxbuf_plus1, CountKind::mib),
                       ::testing::Values(Placement::device, Placement::host, Placement::mixed)),
    [](const ::testing::TestParamInfo<CombineParam>& pi) {
      return type_name(std::get<0>(pi.param)) + "_" + op_name(std::get<1>(pi.param)) + "_" +
             count_name(std::get<2>(pi.param)) + "_" + placement_name(std::get<3>(pi.param));
    });

// Combine's operands differ (public ACCL's test used identical operands, so
// MAX(x, x) could not tell the operands apart): here each operand wins on
// half of the elements, in both orders.
TEST(Combine, OperandOrderAndSelection) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    const size_t n = 64;
    auto x = a.create_buffer<int32_t>(n), y = a.create_buffer<int32_t>(n), res = a.create_buffer<int32_t>(n);
    for (size_t i = 0; i < n; ++i) {
      (*x)[i] = (i % 2) ? static_cast<int32_t>(i) : -static_cast<int32_t>(i);
      (*y)[i] = (i % 2) ? -3 : 3;
    }
    a.combine(n, reduceFunction::MAX, *x, *y, *res);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ((*res)[i], std::max((*x)[i], (*y)[i])) << "MAX [" << i << "]";
    a.combine(n, reduceFunction::MIN, *y, *x, *res);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ((*res)[i], std::min((*x)[i], (*y)[i])) << "MIN [" << i << "]";
    a.combine(n, reduceFunction::SUM, *x, *y, *res);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ((*res)[i], (*x)[i] + (*y)[i]) << "SUM [" << i << "]";
    a.combine(n, reduceFunction::PROD, *x, *y, *res);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ((*res)[i], (*x)[i] * (*y)[i]) << "PROD [" << i << "]";
  });
}

// Float specifics: fp16 sums that round, negative zero, large float64.
TEST(Combine, FloatRounding) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    // float16 (round to nearest even): 2048 + 1 -> 2048, 1024 + 0.5 -> 1024 (tie, even),
    // 1025 + 0.5 -> 1026 (tie, even), 512 + 0.5 -> 512.5 (exact), -3.25 + 1.5 -> -1.75.
    const float xs[] = {2048.f, 1024.f, 1025.f, 512.f, -3.25f};
    const float ys[] = {1.f, 0.5f, 0.5f, 0.5f, 1.5f};
    const float want[] = {2048.f, 1024.f, 1026.f, 512.5f, -1.75f};
    auto x = a.create_buffer<float16_t>(5), y = a.create_buffer<float16_t>(5), r = a.create_buffer<float16_t>(5);
    for (int i = 0; i < 5; ++i) {
      (*x)[i] = accl::float_to_half(xs[i]);
      (*y)[i] = accl::float_to_half(ys[i]);
    }
    a.combine(5, reduceFunction::SUM, *x, *y, *r);
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(accl::half_to_float((*r)[i]), want[i]) << xs[i] << " + " << ys[i] << " in float16";
    auto d1 = a.create_buffer<double>(2), d2 = a.create_buffer<double>(2), dr = a.create_buffer<double>(2);
    (*d1)[0] = 1e300; (*d2)[0] = 1e-300;
    (*d1)[1] = 3.0e15 + 1; (*d2)[1] = 2.0;
    a.combine(2, reduceFunction::PROD, *d1, *d2, *dr);
    EXPECT_EQ((*dr)[0], 1e300 * 1e-300);
    EXPECT_EQ((*dr)[1], (3.0e15 + 1) * 2.0);
    auto i1 = a.create_buffer<int64_t>(1), i2 = a.create_buffer<int64_t>(1), ir = a.create_buffer<int64_t>(1);
    (*i1)[0] = int64_t{1} << 40; (*i2)[0] = 3;
    a.combine(1, reduceFunction::SUM, *i1, *i2, *ir);
    EXPECT_EQ((*ir)[0], (int64_t{1} << 40) + 3) << "int64 must not be truncated to 32 bits";
  });
}

// Integer arithmetic wraps like the hardware's two's-complement adders and
// multipliers; float16 overflows to infinity (IEEE).
TEST(Combine, IntegerWrapAndHalfOverflow) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    auto x = a.create_buffer<int32_t>(2), y = a.create_buffer<int32_t>(2), r = a.create_buffer<int32_t>(2);
    (*x)[0] = INT32_MAX; (*y)[0] = 1;
    (*x)[1] = INT32_MIN; (*y)[1] = -1;
    a.combine(2, reduceFunction::SUM, *x, *y, *r);
    EXPECT_EQ((*r)[0], INT32_MIN);
    EXPECT_EQ((*r)[1], INT32_MAX);
    (*x)[0] = 1 << 20; (*y)[0] = 1 << 12;  // 2^32 wraps to 0
    (*x)[1] = 65537;   (*y)[1] = 65537;    // 2^32 + 2^17 + 1 wraps to 2^17 + 1
    a.combine(2, reduceFunction::PROD, *x, *y, *r);
    EXPECT_EQ((*r)[0], 0);
    EXPECT_EQ((*r)[1], (1 << 17) + 1);
    auto x64 = a.create_buffer<int64_t>(1), y64 = a.create_buffer<int64_t>(1), r64 = a.create_buffer<int64_t>(1);
    (*x64)[0] = INT64_MAX; (*y64)[0] = 2;
    a.combine(1, reduceFunction::SUM, *x64, *y64, *r64);
    EXPECT_EQ((*r64)[0], INT64_MIN + 1);
    auto h = a.create_buffer<float16_t>(2), hr = a.create_buffer<float16_t>(2);
    (*h)[0] = accl::float_to_half(60000.f);
    (*h)[1] = accl::float_to_half(-60000.f);
    a.combine(2, reduceFunction::SUM, *h, *h, *hr);
    EXPECT_EQ(accl::half_to_float((*hr)[0]), std::numeric_limits<float>::infinity());
    EXPECT_EQ(accl::half_to_float((*hr)[1]), -std::numeric_limits<float>::infinity());
  });
}

// ---------------------------------------------------------------------------
// mixed precision: float32 <-> float16 through the (float32, float16)
// arithmetic configuration (public ACCL's per-operand compression flags).

TEST(MixedPrecision, CopyBetweenFloat32AndFloat16) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    for (size_t n : {size_t{1}, size_t{17}, size_t{513}, size_t{100000}}) {
      auto f = a.create_buffer<float>(n), f2 = a.create_buffer<float>(n);
      auto h = a.create_buffer<float16_t>(n);
      auto x = [](size_t i) { return pattern_value(Pattern::compressed, dataType::float32, 2, i, 3); };
      fill(*f, 0, n, x);
      a.copy(*f, *h, n);
      EXPECT_TRUE(check_range(*h, 0, n, [&](size_t i) { return fp16_roundtrip(x(i)); }, "float32 -> float16 copy"));
      a.copy(*h, *f2, n);
      EXPECT_TRUE(check_range(*f2, 0, n, [&](size_t i) { return fp16_roundtrip(x(i)); }, "float16 -> float32 copy"));
    }
  });
}

TEST(MixedPrecision, CombineFloat32WithFloat16) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    const size_t n = 1000;
    auto f = a.create_buffer<float>(n), res = a.create_buffer<float>(n);
    auto h = a.create_buffer<float16_t>(n), hres = a.create_buffer<float16_t>(n);
    auto x = [](size_t i) { return pattern_value(Pattern::compressed, dataType::float32, 1, i, 5); };
    auto y = [](size_t i) { return fp16_roundtrip(pattern_value(Pattern::compressed, dataType::float32, 4, i, 6)); };
    fill(*f, 0, n, x);
    fill(*h, 0, n, y);
    for (reduceFunction op : all_ops()) {
      a.combine(n, op, *f, *h, *res);
      EXPECT_TRUE(check_range(*res, 0, n, [&](size_t i) { return reduce_ref(op, x(i), y(i)); },
                              "combine(float32, float16) -> float32 " + op_name(op), fp16_tolerance(2)));
      a.combine(n, op, *f, *h, *hres);
      EXPECT_TRUE(check_range(*hres, 0, n, [&](size_t i) { return reduce_ref(op, x(i), y(i)); },
                              "combine(float32, float16) -> float16 " + op_name(op), fp16_tolerance(2)));
    }
  });
}

// The default timeout comes from ACCL_TIMEOUT_MS.
TEST(Device, TimeoutFromEnvironment) {
  const char* env = std::getenv("ACCL_TIMEOUT_MS");
  if (env == nullptr || *env == '\0') GTEST_SKIP() << "ACCL_TIMEOUT_MS not set";
  World& w = world1();
  EXPECT_EQ(w.at(0).timeout(), std::chrono::microseconds(std::atoll(env) * 1000));
}

// ---------------------------------------------------------------------------
// from_fpga / to_fpga: the driver skips exactly the syncs it is told to skip.

TEST(SyncFlags, FromFpgaUsesDeviceContentToFpgaLeavesHostMirror) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    const size_t n = 33;
    auto src = a.create_buffer<int32_t>(n), dst = a.create_buffer<int32_t>(n);
    for (size_t i = 0; i < n; ++i) (*src)[i] = static_cast<int32_t>(100 + i);
    src->sync_to_device();
    for (size_t i = 0; i < n; ++i) (*src)[i] = -1;  // host mirror changed, device not
    for (size_t i = 0; i < n; ++i) (*dst)[i] = -7;
    dst->sync_to_device();
    a.copy(*src, *dst, n, /*from_fpga=*/true, /*to_fpga=*/true);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ((*dst)[i], -7) << "to_fpga=true must not sync the result to host";
    dst->sync_from_device();
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ((*dst)[i], static_cast<int32_t>(100 + i)) << "from_fpga=true must use the device content";
    // Without the flags: the host mirror is synced both ways.
    for (size_t i = 0; i < n; ++i) (*src)[i] = static_cast<int32_t>(7 * i);
    a.copy(*src, *dst, n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ((*dst)[i], static_cast<int32_t>(7 * i));
  });
}

TEST(SyncFlags, ChainOnDeviceWithoutHostTrips) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    const size_t n = 300;
    auto b0 = a.create_buffer<float>(n), b1 = a.create_buffer<float>(n), b2 = a.create_buffer<float>(n);
    for (size_t i = 0; i < n; ++i) (*b0)[i] = static_cast<float>(i);
    a.copy(*b0, *b1, n, false, true);                                   // b1 = b0 (device only)
    a.combine(n, reduceFunction::SUM, *b0, *b1, *b2, true, true, true);  // b2 = 2 b0 (device only)
    a.combine(n, reduceFunction::SUM, *b2, *b1, *b2, true, true, false); // b2 = 3 b0, synced back
    for (size_t i = 0; i < n; ++i) ASSERT_EQ((*b2)[i], 3.0f * i) << i;
  });
}

// ---------------------------------------------------------------------------
// slices, user memory, banks

TEST(Buffers, SlicesCopyOnlyTheirRange) {
  World& w = world1();
  for (bool host : {false, true}) {
    w.run([&](unsigned, ACCL& a) {
      const size_t n = 100;
      auto src = make_buffer<int64_t>(a, n, host), dst = make_buffer<int64_t>(a, n, host);
      for (size_t i = 0; i < n; ++i) {
        (*src)[i] = static_cast<int64_t>(i) * 1000003;
        (*dst)[i] = -5;
      }
      if (!host) dst->sync_to_device();
      auto s = src->slice(10, 30);
      auto d = dst->slice(50, 70);
      ASSERT_EQ(s->length(), 20u);
      ASSERT_EQ(d->size(), 20 * sizeof(int64_t));
      EXPECT_EQ(s->address(), src->address() + 10 * sizeof(int64_t)) << "slice address is in bytes";
      a.copy(*s, *d, 20);
      if (!host) dst->sync_from_device();
      for (size_t i = 0; i < n; ++i) {
        const int64_t exp = (i >= 50 && i < 70) ? static_cast<int64_t>(i - 40) * 1000003 : -5;
        ASSERT_EQ((*dst)[i], exp) << (host ? "host" : "device") << " buffer, element " << i;
      }
    });
  }
}

TEST(Buffers, UserMemoryHostOnlyIsZeroCopy) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    std::vector<float> in(257), out(257, -1.f);
    std::iota(in.begin(), in.end(), 0.5f);
    auto src = a.create_buffer_host<float>(in.data(), in.size());
    auto dst = a.create_buffer_host<float>(out.data(), out.size());
    EXPECT_EQ(src->buffer(), in.data());
    a.copy(*src, *dst, 257);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], in[i]) << i;
  });
}

TEST(Buffers, UserMemoryDeviceMirror) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    std::vector<int32_t> in(100), out(100, 0);
    std::iota(in.begin(), in.end(), -50);
    auto src = a.create_buffer<int32_t>(in.data(), in.size());
    auto dst = a.create_buffer<int32_t>(out.data(), out.size());
    EXPECT_FALSE(src->is_host_only());
    a.copy(*src, *dst, 100);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], in[i]) << "user memory is the host mirror, " << i;
  });
}

TEST(Buffers, CopyAcrossMemoryBanks) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    auto b0 = a.create_buffer<double>(1000, dataType::float64, 0);
    auto b1 = a.create_buffer<double>(1000, dataType::float64, 1);
    for (size_t i = 0; i < 1000; ++i) (*b0)[i] = 0.25 * i;
    a.copy(*b0, *b1, 1000);
    for (size_t i = 0; i < 1000; ++i) ASSERT_EQ((*b1)[i], 0.25 * i);
    EXPECT_NE(b0->address(), b1->address());
  });
}

TEST(Buffers, ManyAllocationsAndFrees) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    for (int round = 0; round < 200; ++round) {
      auto b = a.create_buffer<int32_t>(4096 + round);
      auto c = a.create_buffer_host<int32_t>(17);
      (*b)[0] = round;
      a.copy(*b, *c, 1);
      ASSERT_EQ((*c)[0], round);
    }
  });
}

// ---------------------------------------------------------------------------
// nop, device facts, configuration

TEST(Nop, CompletesWithDuration) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    for (int i = 0; i < 50; ++i) {
      auto req = a.nop();
      ASSERT_TRUE(req);
      ASSERT_EQ(req->retcode(), 0u);
      ASSERT_LT(req->duration_ns(), 1'000'000'000u) << "device-measured nop duration";
    }
  });
}

TEST(Device, AdvertisesExtensions) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    const uint32_t caps = a.get_capabilities();
    EXPECT_TRUE(caps & accl::abi::kCapValid) << std::hex << caps;
    EXPECT_TRUE(caps & accl::abi::kCapReduceMin);
    EXPECT_TRUE(caps & accl::abi::kCapReduceProd);
    EXPECT_TRUE(caps & accl::abi::kCapRendezvous);
    EXPECT_TRUE(caps & accl::abi::kCapChaining);
    EXPECT_TRUE(a.supports(reduceFunction::SUM));
    EXPECT_TRUE(a.supports(reduceFunction::MAX));
    EXPECT_TRUE(a.supports(reduceFunction::MIN));
    EXPECT_TRUE(a.supports(reduceFunction::PROD));
    const uint32_t hwid = a.get_hwid();
    EXPECT_TRUE(hwid & accl::abi::kHwIdArith) << std::hex << hwid;
    EXPECT_TRUE(hwid & accl::abi::kHwIdCompression) << std::hex << hwid;
    EXPECT_TRUE(hwid & accl::abi::kHwIdKernelStreams) << std::hex << hwid;
  });
}

TEST(Device, ConfigurationWrittenToExchangeMemory) {
  World& w = world1();
  w.run([&](unsigned, ACCL& a) {
    accl::Device& d = a.device();
    EXPECT_EQ(d.read(accl::abi::kRxBufferCountOffset), 16u);
    EXPECT_EQ(d.read(accl::abi::kRxBufferSizeOffset), 1024u);
    EXPECT_EQ(d.read(accl::abi::kConfigReadyOffset), 1u);
    EXPECT_TRUE(a.initialized());
    EXPECT_EQ(a.get_comm_size(), 1u);
    EXPECT_EQ(a.get_comm_rank(), 0u);
    EXPECT_EQ(a.local_rank(), 0);
    EXPECT_EQ(a.get_comm_group().size(), 1u);
    EXPECT_FALSE(a.dump_exchange_memory().empty());
    EXPECT_FALSE(a.dump_rx_buffers().empty());
    EXPECT_FALSE(a.dump_communicator().empty());
  });
}

}  // namespace
}  // namespace acclt
