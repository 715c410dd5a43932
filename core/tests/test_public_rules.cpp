// SPDX-License-Identifier: Apache-2.0
//
// The public firmware's rules, applied by the driver on a device without a
// capability word (core/src/public_firmware.hpp): every request the public
// firmware would refuse mid-run, or could not finish, is refused before the
// device sees it, with a message naming the call, the rank and the rule.
// The stand-in is the fake device reporting capability 0 and an HWID whose
// network stack bits say UDP (0x12345678 & 3 = 0) unless a test sets RDMA.
#include "rig.hpp"

#include <accl/accl.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace accl::testing {
namespace {

constexpr uint32_t kPublic = 0;  // no capability word
constexpr uint32_t kRdmaHwid = (0x12345678u & ~3u) | 2u;

// A public device on 2 ranks, initialized with `options`.
struct PublicRig : Rig {
  explicit PublicRig(unsigned size = 2, uint32_t hwid = 0x12345678u) : Rig(size, 0, kPublic, false) {
    std::lock_guard lock(state->mutex);
    state->exchange[abi::kHwIdOffset / 4] = hwid;
  }
  size_t device_calls() { return state->calls.size(); }
};

InitOptions public_options() {
  return {.rx_buffer_count = 4, .rx_buffer_size = 1024, .max_eager_size = 1024, .max_rendezvous_size = 4096};
}

TEST(PublicRules, EagerSizeBelowTheRxBufferSizeIsRefusedAtInitialize) {
  PublicRig rig;
  InitOptions o = public_options();
  o.max_eager_size = 512;
  const std::string msg = message_of<ArgumentError>([&] { rig.accl->initialize(make_ranks(2), 0, o); });
  EXPECT_EQ(msg, "call 'initialize' on rank 0: max_eager_size 512 is below the RX buffer size 1024; the public "
                 "firmware (no capability word) requires at least that");
  EXPECT_FALSE(rig.accl->initialized());
  EXPECT_EQ(rig.state->live_allocations, 0);
  // Only the reset that reads the capability word reached the device.
  EXPECT_EQ(rig.state->calls_of(abi::kConfig).size(), 1u);
  // The same request is fine on this project's firmware (eager is capped by the RX buffers there).
  Rig ours(2, 0, kOurFirmware, false);
  ours.accl->initialize(make_ranks(2), 0, o);
  EXPECT_TRUE(ours.accl->initialized());
}

TEST(PublicRules, RendezvousSizeMustBeAboveTheEagerSizeAndNeverZero) {
  for (size_t rendezvous : {size_t{0}, size_t{1024}}) {
    PublicRig rig;
    InitOptions o = public_options();
    o.max_rendezvous_size = rendezvous;
    const std::string msg = message_of<ArgumentError>([&] { rig.accl->initialize(make_ranks(2), 0, o); });
    EXPECT_NE(msg.find("max_rendezvous_size " + std::to_string(rendezvous) + " is not above max_eager_size 1024"),
              std::string::npos)
        << msg;
    EXPECT_EQ(msg.find("eager only") != std::string::npos, rendezvous == 0) << msg;
    EXPECT_EQ(rig.state->live_allocations, 0);
  }
}

TEST(PublicRules, ThresholdSettersKeepTheRules) {
  PublicRig rig;
  rig.accl->initialize(make_ranks(2), 0, public_options());
  rig.clear_log();
  auto msg = message_of<ArgumentError>([&] { rig.accl->set_max_eager_msg_size(512); });
  EXPECT_NE(msg.find("call 'set_max_eager_msg_size' on rank 0: max_eager_size 512 is below the RX buffer size 1024"),
            std::string::npos)
      << msg;
  // Raising eager to the rendezvous size would leave rendezvous <= eager.
  msg = message_of<ArgumentError>([&] { rig.accl->set_max_eager_msg_size(4096); });
  EXPECT_NE(msg.find("max_rendezvous_size 4096 is not above max_eager_size 4096"), std::string::npos) << msg;
  msg = message_of<ArgumentError>([&] { rig.accl->set_max_rendezvous_msg_size(0); });
  EXPECT_NE(msg.find("call 'set_max_rendezvous_msg_size' on rank 0: max_rendezvous_size 0"), std::string::npos)
      << msg;
  EXPECT_EQ(rig.device_calls(), 0u) << "refused before the device";
  rig.accl->set_max_eager_msg_size(2048);
  rig.accl->set_max_rendezvous_msg_size(8192);
  EXPECT_EQ(rig.device_calls(), 2u);
}

TEST(PublicRules, SetTimeoutSendsTheRawCounterInWholeMilliseconds) {
  PublicRig rig;
  InitOptions o = public_options();
  o.timeout = std::chrono::microseconds(2'500'001);
  rig.accl->initialize(make_ranks(2), 0, o);
  auto config = rig.state->calls_of(abi::kConfig);
  ASSERT_GE(config.size(), 2u);
  EXPECT_EQ(config[1].words[abi::kWordFunction], abi::kSetTimeout);
  EXPECT_EQ(config[1].words[abi::kWordCount], 2501u) << "milliseconds, rounded up";
  rig.clear_log();
  rig.accl->set_timeout(std::chrono::microseconds(10));
  config = rig.state->calls_of(abi::kConfig);
  ASSERT_EQ(config.size(), 1u);
  EXPECT_EQ(config[0].words[abi::kWordCount], 1u) << "never 0";
  // The driver still bounds its own waits with the exact duration.
  EXPECT_EQ(rig.accl->timeout(), std::chrono::microseconds(10));
  // This project's firmware takes microseconds.
  Rig ours(2, 0, kOurFirmware, false);
  ours.accl->initialize(make_ranks(2), 0, o);
  EXPECT_EQ(ours.state->calls_of(abi::kConfig)[1].words[abi::kWordCount], 2'500'001u);
}

TEST(PublicRules, MessagesAboveTheEagerSizeAreRefusedWithoutRdma) {
  PublicRig rig;
  rig.accl->initialize(make_ranks(2), 0, public_options());
  auto buf = rig.accl->create_buffer<float>(1024);
  rig.clear_log();
  // 256 floats = 1024 bytes: eager. 257 floats: rendezvous on the public firmware.
  rig.accl->allreduce(*buf, *buf, 256, reduceFunction::SUM);
  rig.accl->send(*buf, 256, 1, 5);
  EXPECT_EQ(rig.data_call_count(), 2u);
  const std::vector<std::pair<std::string, std::function<void()>>> rendezvous = {
      {"allreduce", [&] { rig.accl->allreduce(*buf, *buf, 257, reduceFunction::SUM); }},
      {"send", [&] { rig.accl->send(*buf, 257, 1, 5); }},
      {"recv", [&] { rig.accl->recv(*buf, 300, 1, 5); }},
      {"bcast", [&] { rig.accl->bcast(*buf, 512, 1); }},
      {"reduce", [&] { rig.accl->reduce(*buf, *buf, 257, 0, reduceFunction::MAX); }},
      {"allgather", [&] { rig.accl->allgather(*buf, *buf, 257); }},
      {"gather", [&] { rig.accl->gather(*buf, *buf, 257, 1); }},
      {"scatter", [&] { rig.accl->scatter(*buf, *buf, 257, 1); }},
      {"reduce_scatter", [&] { rig.accl->reduce_scatter(*buf, *buf, 257, reduceFunction::SUM); }},
  };
  for (const auto& [name, call] : rendezvous) {
    const std::string msg = message_of<ArgumentError>(call);
    EXPECT_EQ(msg.rfind("call '" + name + "' on rank 0: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("bytes per message is above max_eager_size 1024"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rendezvous, which needs the RDMA network stack"), std::string::npos) << msg;
  }
  EXPECT_EQ(rig.data_call_count(), 2u) << "refused before the device";
  // Compressed messages stay eager on the public firmware, whatever their size.
  rig.accl->allreduce(*buf, *buf, 512, reduceFunction::SUM, GLOBAL_COMM, false, false, dataType::float16);
  EXPECT_EQ(rig.data_call_count(), 3u);
}

TEST(PublicRules, RendezvousIsTheFirmwaresBusinessOnAnRdmaStack) {
  PublicRig rig(2, kRdmaHwid);
  rig.accl->initialize(make_ranks(2), 0, public_options());
  auto buf = rig.accl->create_buffer<float>(512);
  rig.accl->allreduce(*buf, *buf, 512, reduceFunction::SUM);
  rig.accl->alltoall(*buf, *buf, 256);
  EXPECT_EQ(rig.data_call_count(), 2u);
}

TEST(PublicRules, AlltoallIsAlwaysRendezvousAndCompressedAlltoallDoesNotExist) {
  PublicRig rig;
  rig.accl->initialize(make_ranks(2), 0, public_options());
  auto buf = rig.accl->create_buffer<float>(8);
  auto msg = message_of<ArgumentError>([&] { rig.accl->alltoall(*buf, *buf, 1); });
  EXPECT_EQ(msg, "call 'alltoall' on rank 0: alltoall: the public firmware (no capability word) sends it by "
                 "rendezvous, which needs the RDMA network stack; this CCLO's HWID names UDP or TCP");
  PublicRig rdma(2, kRdmaHwid);
  rdma.accl->initialize(make_ranks(2), 0, public_options());
  auto b = rdma.accl->create_buffer<float>(8);
  msg = message_of<ArgumentError>(
      [&] { rdma.accl->alltoall(*b, *b, 4, GLOBAL_COMM, false, false, dataType::float16); });
  EXPECT_NE(msg.find("alltoall with compression or streams is not implemented by the public firmware"),
            std::string::npos)
      << msg;
  EXPECT_EQ(rig.data_call_count() + rdma.data_call_count(), 0u);
}

TEST(PublicRules, NoRankAnyReceive) {
  PublicRig rig;
  rig.accl->initialize(make_ranks(2), 0, public_options());
  auto buf = rig.accl->create_buffer<int32_t>(4);
  const auto msg = message_of<ArgumentError>([&] { rig.accl->recv(*buf, 4, RANK_ANY, 3); });
  EXPECT_EQ(msg, "call 'recv' on rank 0: source RANK_ANY: the public firmware (no capability word) matches receives "
                 "by source rank only");
  rig.accl->recv(*buf, 4, 1, 3);  // explicit source and tag
  EXPECT_EQ(rig.data_call_count(), 1u);
}

TEST(PublicRules, OnlySumAndMax) {
  PublicRig rig;
  rig.accl->initialize(make_ranks(2), 0, public_options());
  auto buf = rig.accl->create_buffer<float>(4);
  for (reduceFunction f : {reduceFunction::MIN, reduceFunction::PROD}) {
    const auto msg = message_of<ArgumentError>([&] { rig.accl->allreduce(*buf, *buf, 4, f); });
    EXPECT_NE(msg.find("is not supported by this CCLO (the public firmware, no capability word: SUM and MAX only)"),
              std::string::npos)
        << msg;
  }
  EXPECT_FALSE(rig.accl->supports(reduceFunction::MIN));
  rig.accl->allreduce(*buf, *buf, 4, reduceFunction::SUM);
  rig.accl->allreduce(*buf, *buf, 4, reduceFunction::MAX);
  EXPECT_EQ(rig.data_call_count(), 2u);
}

TEST(PublicRules, CommunicatorRecordsHaveNoContextWord) {
  PublicRig rig;
  rig.accl->initialize(make_ranks(2), 0, public_options());
  // As public ACCL lays it out: 4 RX records, then the communicator (2 + 6 x 2
  // words), then the first arithmetic configuration right after it.
  const uint32_t comm = rig.accl->get_communicator_addr(GLOBAL_COMM);
  EXPECT_EQ(comm, 0x8u + 28u * 4u);
  EXPECT_EQ(rig.arith(dataType::float16, dataType::float16), comm + 4u * (2u + 6u * 2u));
  EXPECT_NE(rig.accl->dump_communicator().find("context none"), std::string::npos);
  const auto msg = message_of<ArgumentError>([&] { rig.accl->split_communicator({0, 1}, 7u); });
  EXPECT_EQ(msg, "call 'split_communicator' on rank 0: context id 7 given, but the public firmware (no capability "
                 "word) has no context-id word");
  // Without an explicit id a communicator is created, without the word.
  const auto sub = rig.accl->split_communicator({1, 0});
  EXPECT_EQ(rig.accl->get_comm_rank(sub), 1u);
}

}  // namespace
}  // namespace accl::testing
