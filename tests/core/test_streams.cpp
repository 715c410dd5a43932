// SPDX-License-Identifier: Apache-2.0
//
// core-streams: kernel-stream variants against the emulator's loopback
// kernel (what the CCLO pushes to its kernel stream comes back on the
// kernel's input): copy_to_stream / copy_from_stream, recv into the stream,
// send from the stream, stream_put to a remote stream.
#include "common/types.hpp"
#include "common/world.hpp"

#include <accl/accl.hpp>

#include <gtest/gtest.h>

#include <tuple>

namespace acclt {
namespace {

using accl::ACCL;
using accl::GLOBAL_COMM;

using StreamParam = std::tuple<dataType, CountKind>;
class Streams : public ::testing::TestWithParam<StreamParam> {
 protected:
  template <typename T>
  auto val(unsigned rank, uint32_t seed) {
    const dataType t = std::get<0>(GetParam());
    return [=](size_t i) { return roundtrip<T>(pattern_value(Pattern::unique, t, rank, i, seed)); };
  }
};

TEST_P(Streams, CopyThroughLoopback) {
  const auto [type, count] = GetParam();
  World& w = World::get(1);
  dispatch_type(type, [&, type = type, count = count]<typename T>() {
    const size_t n = count_of(count, type, w.rx_buffer_bytes());
    w.run([&](unsigned r, ACCL& a) {
      auto v = this->val<T>(r, 1);
      auto src = make_buffer<T>(a, n, false);
      fill(*src, 0, n, v);
      auto dst = make_buffer<T>(a, n + 2, false);
      fill_sentinel(*dst);
      dst->sync_to_device();
      if (count == CountKind::mib) {
        // Large: let the pull run while the push is still going.
        auto push = a.copy_to_stream(*src, n, false, true);
        a.copy_from_stream(*dst, n);
        push->wait();
      } else {
        a.copy_to_stream(*src, n);
        a.copy_from_stream(*dst, n);
      }
      EXPECT_TRUE(check_range(*dst, 0, n, v, "copy_from_stream"));
      EXPECT_TRUE(check_sentinel(*dst, n, "copy_from_stream tail"));
    });
  });
}

// Ring: memory -> recv into the stream -> send from the stream -> memory.
TEST_P(Streams, RecvToStreamSendFromStream) {
  const auto [type, count] = GetParam();
  for (unsigned P : {2u, 3u}) {
    World& w = World::get(P);
    dispatch_type(type, [&, type = type, count = count]<typename T>() {
      const size_t n = count_of(count, type, w.rx_buffer_bytes());
      w.run([&](unsigned r, ACCL& a) {
        const unsigned next = (r + 1) % P, prev = (r + P - 1) % P;
        auto v = [&](unsigned rank) { return this->val<T>(rank, 2); };
        auto src = make_buffer<T>(a, n, false);
        fill(*src, 0, n, v(r));
        auto dst = make_buffer<T>(a, n + 2, false);
        fill_sentinel(*dst);
        dst->sync_to_device();
        // 1. my data to next; receive prev's data into my kernel stream.
        auto rs = a.recv(type, n, prev, 11, GLOBAL_COMM, dataType::none, true);
        a.send(*src, n, next, 11);
        rs->wait();
        // 2. forward what the loopback kernel gives back to prev, straight from the stream.
        auto rm = a.recv(*dst, n, next, 12, GLOBAL_COMM, false, dataType::none, true);
        a.send(type, n, prev, 12);
        rm->wait();
        // I got back my own data (it went to next's stream and back).
        EXPECT_TRUE(check_range(*dst, 0, n, v(r), "rank " + std::to_string(r) + " round trip via next's stream"));
        EXPECT_TRUE(check_sentinel(*dst, n, "tail"));
      });
    });
  }
}

// stream_put: no receive on the target; the data shows up on its kernel
// stream and is pulled with copy_from_stream.
TEST_P(Streams, StreamPutToRemoteKernel) {
  const auto [type, count] = GetParam();
  World& w = World::get(2);
  dispatch_type(type, [&, type = type, count = count]<typename T>() {
    const size_t n = count_of(count, type, w.rx_buffer_bytes());
    for (unsigned stream_id : {9u, 0u, 246u}) {
      w.run([&](unsigned r, ACCL& a) {
        auto v = this->val<T>(0, stream_id);
        if (r == 0) {
          auto src = make_buffer<T>(a, n, false);
          fill(*src, 0, n, v);
          a.stream_put(*src, n, 1, stream_id);
        } else {
          auto dst = make_buffer<T>(a, n + 2, false);
          fill_sentinel(*dst);
          dst->sync_to_device();
          a.copy_from_stream(*dst, n);
          EXPECT_TRUE(check_range(*dst, 0, n, v, "stream " + std::to_string(stream_id) + " data on rank 1"));
          EXPECT_TRUE(check_sentinel(*dst, n, "tail"));
        }
      });
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Loopback, Streams,
    ::testing::Combine(::testing::ValuesIn(all_types()),
                       ::testing::Values(CountKind::one, CountKind::c17, CountKind::rxbuf_plus1, CountKind::mib)),
    [](const ::testing::TestParamInfo<StreamParam>& pi) {
      return type_name(std::get<0>(pi.param)) + "_" + count_name(std::get<1>(pi.param));
    });

// Host-only buffers on both ends of the stream.
TEST(StreamsHost, CopyThroughLoopbackHostBuffers) {
  World& w = World::get(1);
  w.run([&](unsigned, ACCL& a) {
    auto src = a.create_buffer_host<int32_t>(300), dst = a.create_buffer_host<int32_t>(300);
    for (int i = 0; i < 300; ++i) (*src)[i] = 7 * i - 1000;
    a.copy_to_stream(*src, 300);
    a.copy_from_stream(*dst, 300);
    for (int i = 0; i < 300; ++i) ASSERT_EQ((*dst)[i], 7 * i - 1000) << i;
  });
}

// Several pushes then several pulls: the stream keeps order.
TEST(StreamsHost, LoopbackKeepsOrder) {
  World& w = World::get(1);
  w.run([&](unsigned, ACCL& a) {
    auto b = a.create_buffer<float>(40), out = a.create_buffer<float>(40);
    for (int k = 0; k < 4; ++k) {
      for (int i = 0; i < 10; ++i) (*b)[i] = static_cast<float>(k * 10 + i);
      a.copy_to_stream(*b, 10);
    }
    a.copy_from_stream(*out, 40);
    for (int i = 0; i < 40; ++i) ASSERT_EQ((*out)[i], static_cast<float>(i)) << i;
  });
}

}  // namespace
}  // namespace acclt
