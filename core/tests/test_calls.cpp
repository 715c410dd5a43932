// SPDX-License-Identifier: Apache-2.0
//
// Every call through the driver: the words it starts, which buffers it syncs,
// argument validation before the device is touched, errors, chaining.
#include "rig.hpp"

#include <accl/accl.hpp>

#include <gtest/gtest.h>

#include <thread>

// Beside the rig (rig.hpp), whose names then need no qualification.
namespace accl::testing {

namespace {

constexpr unsigned kP = 4;     // communicator size of the rig
constexpr unsigned kRank = 2;  // local rank of the rig

uint32_t flags_word(uint32_t host, uint32_t stream) { return (host << 8) | stream; }

// Checks the words every call shares.
void expect_call(const CallWords& w, abi::Scenario scenario, uint32_t count, uint32_t comm, uint32_t root_src_dst,
                 uint32_t function, uint32_t tag, uint32_t arith, uint32_t compression, uint32_t flags,
                 uint64_t a0, uint64_t a1, uint64_t a2) {
  EXPECT_EQ(w[abi::kWordScenario], scenario);
  EXPECT_EQ(w[abi::kWordCount], count);
  EXPECT_EQ(w[abi::kWordComm], comm);
  EXPECT_EQ(w[abi::kWordRootSrcDst], root_src_dst);
  EXPECT_EQ(w[abi::kWordFunction], function);
  EXPECT_EQ(w[abi::kWordTag], tag);
  EXPECT_EQ(w[abi::kWordArithConfig], arith);
  EXPECT_EQ(w[abi::kWordCompressionFlags], compression);
  EXPECT_EQ(w[abi::kWordStreamFlags], flags);
  EXPECT_EQ(w.addr(0), a0);
  EXPECT_EQ(w.addr(1), a1);
  EXPECT_EQ(w.addr(2), a2);
}

class Calls : public ::testing::Test {
 protected:
  Calls() : rig(kP, kRank, abi::kCapValid | abi::kCapReduceMin | abi::kCapAlltoall | abi::kCapBarrier) {
    comm = rig.accl->get_communicator_addr(GLOBAL_COMM);
    f32 = rig.arith(dataType::float32, dataType::float32);
    f32_f16 = rig.arith(dataType::float32, dataType::float16);
    send = rig.accl->create_buffer<float>(64);
    recv = rig.accl->create_buffer<float>(64);
    for (size_t i = 0; i < 64; ++i) (*send)[i] = static_cast<float>(i);
    rig.clear_log();
  }
  // Bytes synced to / from the device since the last clear, per address.
  std::vector<FakeDevice::Copy> to_device() { return rig.state->to_device; }
  std::vector<FakeDevice::Copy> from_device() { return rig.state->from_device; }

  Rig rig;
  uint32_t comm = 0, f32 = 0, f32_f16 = 0;
  std::unique_ptr<Buffer<float>> send, recv;
};

TEST_F(Calls, Copy) {
  rig.accl->copy(*send, *recv, 10);
  expect_call(rig.last_call(), abi::kCopy, 10, comm, 0, 0, abi::kTagAny, f32, 0, 0, send->address(), 0,
              recv->address());
  ASSERT_EQ(to_device().size(), 1u);
  EXPECT_EQ(to_device()[0].address, send->address());
  EXPECT_EQ(to_device()[0].bytes, 40u);
  ASSERT_EQ(from_device().size(), 1u);
  EXPECT_EQ(from_device()[0].bytes, 40u);
  // The fake really copies: data went host -> device -> device -> host.
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ((*recv)[i], static_cast<float>(i));
  EXPECT_EQ((*recv)[10], 0.0f);
}

TEST_F(Calls, FromAndToFpgaSkipTheSyncs) {
  rig.accl->copy(*send, *recv, 10, true, true);
  EXPECT_TRUE(to_device().empty());
  EXPECT_TRUE(from_device().empty());
}

TEST_F(Calls, HostOnlyBuffersNeverSyncAndSetHostFlags) {
  auto hsrc = rig.accl->create_buffer_host<float>(16);
  std::vector<float> user(16, 0.0f);
  auto hdst = rig.accl->create_buffer_host<float>(user.data(), 16);
  for (size_t i = 0; i < 16; ++i) (*hsrc)[i] = 2.0f * static_cast<float>(i);
  rig.accl->copy(*hsrc, *hdst, 16);
  expect_call(rig.last_call(), abi::kCopy, 16, comm, 0, 0, abi::kTagAny, f32, 0,
              flags_word(abi::kOp0Host | abi::kResHost, 0), hsrc->address(), 0, hdst->address());
  EXPECT_TRUE(to_device().empty());
  EXPECT_TRUE(from_device().empty());
  EXPECT_EQ(user[15], 30.0f);
  // Mixed: device source, host-only destination.
  rig.accl->copy(*send, *hdst, 4);
  EXPECT_EQ(rig.last_call()[abi::kWordStreamFlags], flags_word(abi::kResHost, 0));
  EXPECT_EQ(to_device().size(), 1u);
}

TEST_F(Calls, CopyStreams) {
  rig.accl->copy_to_stream(*send, 8);
  expect_call(rig.last_call(), abi::kCopy, 8, comm, 0, 0, abi::kTagAny, f32, 0, flags_word(0, abi::kResStream),
              send->address(), 0, 0);
  EXPECT_EQ(to_device().size(), 1u);
  rig.accl->copy_from_stream(*recv, 8);
  expect_call(rig.last_call(), abi::kCopy, 8, comm, 0, 0, abi::kTagAny, f32, 0, flags_word(0, abi::kOp0Stream), 0, 0,
              recv->address());
  EXPECT_EQ(from_device().size(), 1u);
}

TEST_F(Calls, Combine) {
  auto other = rig.accl->create_buffer<float>(64);
  rig.accl->combine(12, reduceFunction::MAX, *send, *other, *recv, false, true);
  expect_call(rig.last_call(), abi::kCombine, 12, comm, 0, abi::kMax, abi::kTagAny, f32, 0, 0, send->address(),
              other->address(), recv->address());
  ASSERT_EQ(to_device().size(), 1u) << "val2_from_fpga skips only val2";
  EXPECT_EQ(to_device()[0].address, send->address());
}

TEST_F(Calls, SendAndRecv) {
  rig.accl->send(*send, 16, 3, 77, GLOBAL_COMM);
  expect_call(rig.last_call(), abi::kSend, 16, comm, 3, 0, 77, f32, 0, 0, send->address(), 0, 0);
  EXPECT_EQ(to_device().size(), 1u);
  EXPECT_TRUE(from_device().empty());
  rig.accl->recv(*recv, 16, 1, 78);
  expect_call(rig.last_call(), abi::kRecv, 16, comm, 1, 0, 78, f32, 0, 0, 0, 0, recv->address());
  EXPECT_EQ(from_device().size(), 1u);
  rig.accl->recv(*recv, 16, RANK_ANY, TAG_ANY);
  EXPECT_EQ(rig.last_call()[abi::kWordRootSrcDst], RANK_ANY);
  EXPECT_EQ(rig.last_call()[abi::kWordTag], TAG_ANY);
}

TEST_F(Calls, CompressedSendUsesTheCompressedConfig) {
  rig.accl->send(*send, 16, 3, 5, GLOBAL_COMM, false, dataType::float16);
  expect_call(rig.last_call(), abi::kSend, 16, comm, 3, 0, 5, f32_f16, abi::kEthCompressed, 0, send->address(), 0,
              0);
}

TEST_F(Calls, StreamVariants) {
  rig.accl->send(dataType::float32, 32, 1, 9);
  expect_call(rig.last_call(), abi::kSend, 32, comm, 1, 0, 9, f32, 0, flags_word(0, abi::kOp0Stream), 0, 0, 0);
  rig.accl->recv(dataType::int32, 32, 1, 9);
  expect_call(rig.last_call(), abi::kRecv, 32, comm, 1, 0, 9, rig.arith(dataType::int32, dataType::int32), 0,
              flags_word(0, abi::kResStream), 0, 0, 0);
  rig.accl->stream_put(*send, 32, 0, 246);
  expect_call(rig.last_call(), abi::kSend, 32, comm, 0, 0, 246, f32, 0, flags_word(0, abi::kResStream),
              send->address(), 0, 0);
  auto msg = message_of<ArgumentError>([&] { rig.accl->stream_put(*send, 32, 0, 247); });
  EXPECT_NE(msg.find("stream id 247"), std::string::npos) << msg;
  EXPECT_THROW(rig.accl->send(dataType::none, 4, 1), ArgumentError);
}

TEST_F(Calls, BcastSyncsOnlyTheRootsInputAndTheOthersOutput) {
  rig.accl->bcast(*send, 20, kRank);
  expect_call(rig.last_call(), abi::kBcast, 20, comm, kRank, 0, abi::kTagAny, f32, 0, 0, send->address(), 0,
              send->address());
  EXPECT_EQ(to_device().size(), 1u);
  EXPECT_TRUE(from_device().empty());
  rig.clear_log();
  rig.accl->bcast(*send, 20, 0);
  EXPECT_TRUE(to_device().empty());
  ASSERT_EQ(from_device().size(), 1u);
  EXPECT_EQ(from_device()[0].bytes, 80u);
}

TEST_F(Calls, ScatterCountsPerRank) {
  rig.accl->scatter(*send, *recv, 10, kRank);
  expect_call(rig.last_call(), abi::kScatter, 10, comm, kRank, 0, abi::kTagAny, f32, 0, 0, send->address(), 0,
              recv->address());
  ASSERT_EQ(to_device().size(), 1u);
  EXPECT_EQ(to_device()[0].bytes, 10u * kP * 4);
  ASSERT_EQ(from_device().size(), 1u);
  EXPECT_EQ(from_device()[0].bytes, 40u);
  // The root needs count*P elements; the others need none in sendbuf.
  auto small = rig.accl->create_buffer<float>(10);
  auto msg = message_of<ArgumentError>([&] { rig.accl->scatter(*small, *recv, 10, kRank); });
  EXPECT_NE(msg.find("sendbuf holds 10 elements but the call needs 40"), std::string::npos) << msg;
  EXPECT_NE(msg.find("on rank 2"), std::string::npos) << msg;
  rig.clear_log();
  rig.accl->scatter(*small, *recv, 10, 0);
  EXPECT_TRUE(to_device().empty()) << "non-root does not sync sendbuf";
}

TEST_F(Calls, GatherAndAllgather) {
  rig.accl->gather(*send, *recv, 16, kRank);
  expect_call(rig.last_call(), abi::kGather, 16, comm, kRank, 0, abi::kTagAny, f32, 0, 0, send->address(), 0,
              recv->address());
  EXPECT_EQ(to_device().at(0).bytes, 64u);
  EXPECT_EQ(from_device().at(0).bytes, 256u);
  rig.clear_log();
  rig.accl->gather(*send, *recv, 16, 1);
  EXPECT_TRUE(from_device().empty()) << "only the root receives";
  EXPECT_THROW(rig.accl->gather(*send, *recv, 17, kRank), ArgumentError);
  rig.accl->gather(*send, *recv, 17, 1);  // fine on a non-root

  rig.clear_log();
  rig.accl->allgather(*send, *recv, 16);
  expect_call(rig.last_call(), abi::kAllgather, 16, comm, 0, 0, abi::kTagAny, f32, 0, 0, send->address(),
              recv->address(), recv->address());
  EXPECT_EQ(from_device().at(0).bytes, 256u);
  EXPECT_THROW(rig.accl->allgather(*send, *recv, 17), ArgumentError);
}

TEST_F(Calls, Reductions) {
  rig.accl->reduce(*send, *recv, 30, 0, reduceFunction::SUM);
  expect_call(rig.last_call(), abi::kReduce, 30, comm, 0, abi::kSum, abi::kTagAny, f32, 0, 0, send->address(), 0,
              recv->address());
  EXPECT_TRUE(from_device().empty()) << "non-root reduce has no result";
  rig.clear_log();
  rig.accl->reduce(*send, *recv, 30, kRank, reduceFunction::MIN);
  EXPECT_EQ(rig.last_call()[abi::kWordFunction], abi::kMin);
  EXPECT_EQ(from_device().size(), 1u);

  rig.accl->allreduce(*send, *recv, 64, reduceFunction::MAX);
  expect_call(rig.last_call(), abi::kAllreduce, 64, comm, 0, abi::kMax, abi::kTagAny, f32, 0, 0, send->address(),
              recv->address(), recv->address());

  rig.accl->reduce_scatter(*send, *recv, 16, reduceFunction::SUM);
  expect_call(rig.last_call(), abi::kReduceScatter, 16, comm, 0, abi::kSum, abi::kTagAny, f32, 0, 0,
              send->address(), 0, recv->address());
  EXPECT_THROW(rig.accl->reduce_scatter(*send, *recv, 17, reduceFunction::SUM), ArgumentError);

  // PROD is not advertised by this CCLO.
  auto msg = message_of<ArgumentError>([&] { rig.accl->allreduce(*send, *recv, 4, reduceFunction::PROD); });
  EXPECT_NE(msg.find("PROD is not supported"), std::string::npos) << msg;
  EXPECT_THROW(rig.accl->allreduce(*send, *recv, 4, static_cast<reduceFunction>(7)), ArgumentError);
}

TEST_F(Calls, AllreduceWithMixedTypesCompressesTheSmallerOperand) {
  auto half = rig.accl->create_buffer<float16_t>(64);
  rig.accl->allreduce(*send, *half, 64, reduceFunction::SUM);
  expect_call(rig.last_call(), abi::kAllreduce, 64, comm, 0, abi::kSum, abi::kTagAny, f32_f16,
              abi::kOp1Compressed | abi::kResCompressed, 0, send->address(), half->address(), half->address());
  rig.accl->allreduce(*send, *recv, 64, reduceFunction::SUM, GLOBAL_COMM, false, false, dataType::float16);
  EXPECT_EQ(rig.last_call()[abi::kWordCompressionFlags], abi::kEthCompressed);
  EXPECT_EQ(rig.last_call()[abi::kWordArithConfig], f32_f16);
  auto ints = rig.accl->create_buffer<int32_t>(64);
  auto msg = message_of<ArgumentError>([&] { rig.accl->allreduce(*send, *ints, 4, reduceFunction::SUM); });
  EXPECT_NE(msg.find("unsupported data type combination"), std::string::npos) << msg;
  msg = message_of<ArgumentError>(
      [&] { rig.accl->allreduce(*ints, *ints, 4, reduceFunction::SUM, GLOBAL_COMM, false, false, dataType::float16); });
  EXPECT_NE(msg.find("no arithmetic configuration for data types (int32, float16)"), std::string::npos) << msg;
}

TEST_F(Calls, AlltoallAndBarrier) {
  rig.accl->alltoall(*send, *recv, 16);
  expect_call(rig.last_call(), abi::kAlltoall, 16, comm, 0, 0, abi::kTagAny, f32, 0, 0, send->address(),
              recv->address(), recv->address());
  EXPECT_EQ(to_device().at(0).bytes, 256u);
  EXPECT_EQ(from_device().at(0).bytes, 256u);
  rig.accl->barrier();
  // Barrier moves no data but carries a valid arithmetic configuration (the first).
  expect_call(rig.last_call(), abi::kBarrier, 0, comm, 0, 0, abi::kTagAny,
              rig.arith(dataType::float16, dataType::float16), 0, 0, 0, 0, 0);
  rig.accl->nop();
  expect_call(rig.last_call(), abi::kNop, 0, comm, 0, 0, abi::kTagAny, 0, 0, 0, 0, 0, 0);
}

TEST_F(Calls, CapabilitiesGateAlltoallAndBarrier) {
  Rig plain(2, 0, abi::kCapValid);  // a firmware that knows the word but lacks both
  auto b = plain.accl->create_buffer<float>(8);
  EXPECT_THROW(plain.accl->alltoall(*b, *b, 4), ArgumentError);
  EXPECT_THROW(plain.accl->barrier(), ArgumentError);
  Rig legacy(2, 0, 0);  // public hardware: no capability word, trusted with barrier (alltoall: test_public_rules)
  auto c = legacy.accl->create_buffer<float>(8);
  legacy.accl->barrier();
  EXPECT_THROW(legacy.accl->allreduce(*c, *c, 4, reduceFunction::MIN), ArgumentError);
}

TEST_F(Calls, CallsOnASubCommunicatorUseItsAddress) {
  auto sub = rig.accl->split_communicator({0, 2});
  const uint32_t sub_addr = rig.accl->get_communicator_addr(sub);
  rig.accl->allreduce(*send, *recv, 8, reduceFunction::SUM, sub);
  EXPECT_EQ(rig.last_call()[abi::kWordComm], sub_addr);
  EXPECT_THROW(rig.accl->bcast(*send, 8, 2, sub), ArgumentError) << "root 2 is outside a 2-rank communicator";
  EXPECT_THROW(rig.accl->send(*send, 8, 2, 0, sub), ArgumentError);
}

TEST_F(Calls, ValidationFailuresNeverTouchTheDevice) {
  auto other = std::make_unique<ACCL>(std::make_unique<FakeDevice>());
  auto foreign = other->create_buffer<float>(64);
  auto ints = rig.accl->create_buffer<int8_t>(64);
  std::vector<std::function<void()>> bad = {
      [&] { rig.accl->send(*send, 65, 1); },
      [&] { rig.accl->send(*send, 4, kP); },
      [&] { rig.accl->recv(*recv, 4, kP); },
      [&] { rig.accl->send(*send, 4, 1, 0, 7); },
      [&] { rig.accl->bcast(*send, 4, kP); },
      [&] { rig.accl->reduce(*send, *recv, 4, kP, reduceFunction::SUM); },
      [&] { rig.accl->copy(*foreign, *recv, 4); },
      [&] { rig.accl->copy(*ints, *ints, 4); },  // no (int8, int8) arithmetic configuration
      [&] { rig.accl->alltoall(*send, *recv, 17); },
      [&] { rig.accl->combine(4, reduceFunction::PROD, *send, *send, *recv); },
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_THROW(bad[i](), ArgumentError) << "case " << i;
    EXPECT_EQ(rig.data_call_count(), 0u) << "case " << i;
    EXPECT_TRUE(to_device().empty()) << "case " << i;
  }
  auto msg = message_of<ArgumentError>([&] { rig.accl->copy(*foreign, *recv, 4); });
  EXPECT_NE(msg.find("another ACCL instance"), std::string::npos) << msg;
  msg = message_of<ArgumentError>([&] { rig.accl->bcast(*send, 4, kP); });
  EXPECT_EQ(msg, "call 'bcast' on rank 2: root 4 is outside the communicator of 4 ranks");
}

TEST_F(Calls, CountZeroCompletesWithoutTheDevice) {
  auto r = rig.accl->allreduce(*send, *recv, 0, reduceFunction::SUM, GLOBAL_COMM, false, false, dataType::none, true);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->test());
  EXPECT_EQ(r->id(), 0u);
  EXPECT_EQ(r->call_name(), "allreduce");
  EXPECT_EQ(rig.data_call_count(), 0u);
  EXPECT_TRUE(to_device().empty());
  // Still validated.
  EXPECT_THROW(rig.accl->bcast(*send, 0, kP), ArgumentError);
  // With waitfor it becomes a nop that keeps the chain ordered.
  rig.state->auto_complete = false;
  auto first = rig.accl->send(*send, 4, 1, 0, GLOBAL_COMM, false, dataType::none, true);
  auto empty = rig.accl->recv(*recv, 0, 1, 0, GLOBAL_COMM, false, dataType::none, true, {first});
  auto calls = rig.state->data_calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].words[abi::kWordScenario], abi::kNop);
  EXPECT_EQ(calls[1].waitfor, std::vector<CallId>{first->id()});
  rig.device->complete(first->id());
  rig.device->complete(empty->id());
  empty->wait();
  first->wait();
}

TEST_F(Calls, DeviceErrorListsEveryBitTheCallAndTheRank) {
  rig.state->retcode = [](const CallWords& w) {
    return w[abi::kWordScenario] == abi::kAllreduce ? uint32_t{abi::kReceiveTimeoutError | abi::kLinkError} : 0u;
  };
  try {
    rig.accl->allreduce(*send, *recv, 8, reduceFunction::SUM);
    FAIL() << "no DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_EQ(e.call(), "allreduce");
    EXPECT_EQ(e.rank(), 2);
    EXPECT_EQ(e.retcode(), abi::kReceiveTimeoutError | abi::kLinkError);
    EXPECT_EQ(std::string(e.what()),
              "call 'allreduce' on rank 2 failed on the device: RECEIVE_TIMEOUT_ERROR | LINK_ERROR (retcode 0x20000800)");
  }
  EXPECT_TRUE(from_device().empty()) << "a failed call does not overwrite host data";
  // Async: the error comes from wait()/test(), every time.
  auto r = rig.accl->allreduce(*send, *recv, 8, reduceFunction::SUM, GLOBAL_COMM, false, false, dataType::none, true);
  EXPECT_THROW(r->wait(), DeviceError);
  EXPECT_THROW(r->test(), DeviceError);
  EXPECT_THROW(rig.accl->wait(r), DeviceError);
  EXPECT_EQ(r->retcode(), abi::kReceiveTimeoutError | abi::kLinkError);
}

TEST_F(Calls, TimeoutErrorNamesCallRankAndTimeout) {
  rig.accl->set_timeout(std::chrono::milliseconds(20));
  rig.state->auto_complete = false;
  const auto start = std::chrono::steady_clock::now();
  auto msg = message_of<TimeoutError>([&] { rig.accl->allreduce(*send, *recv, 8, reduceFunction::SUM); });
  EXPECT_EQ(msg, "call 'allreduce' on rank 2 did not complete within 20 ms");
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
  // The call completes later: the next wait collects it.
  auto calls = rig.state->data_calls();
  rig.device->complete(calls.back().id);
}

TEST_F(Calls, RunAsyncReturnsAtOnceAndWaitSyncsTheResult) {
  rig.state->auto_complete = false;
  auto r = rig.accl->copy(*send, *recv, 16, false, false, true);
  EXPECT_FALSE(r->test());
  EXPECT_FALSE(r->wait(std::chrono::milliseconds(1)));
  EXPECT_FALSE(rig.accl->test(r));
  EXPECT_TRUE(from_device().empty());
  std::thread completer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    rig.device->complete(r->id());
  });
  r->wait();
  completer.join();
  EXPECT_EQ((*recv)[15], 15.0f);
  EXPECT_EQ(r->retcode(), 0u);
  EXPECT_EQ(r->duration_ns(), 1000u);
  r->wait();  // idempotent
  EXPECT_EQ(from_device().size(), 1u) << "synced once";
}

TEST_F(Calls, ChainingPassesWaitforIdsAndReportsFailedDependencies) {
  rig.state->auto_complete = false;
  auto a = rig.accl->allreduce(*send, *recv, 8, reduceFunction::SUM, GLOBAL_COMM, false, true, dataType::none, true);
  auto b = rig.accl->allgather(*recv, *send, 8, GLOBAL_COMM, true, false, dataType::none, true, {a});
  auto c = rig.accl->nop(true, {a, b});
  auto calls = rig.state->data_calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_TRUE(calls[0].waitfor.empty());
  EXPECT_EQ(calls[1].waitfor, std::vector<CallId>{a->id()});
  EXPECT_EQ(calls[2].waitfor, (std::vector<CallId>{a->id(), b->id()}));
  EXPECT_EQ(to_device().size(), 1u) << "b is from_fpga";

  rig.device->complete(a->id(), abi::kDmaSizeError);
  rig.device->complete(b->id());
  rig.device->complete(c->id());
  // c itself succeeded, but the chain it waited for did not: its wait says so.
  auto msg = message_of<DeviceError>([&] { c->wait(); });
  EXPECT_NE(msg.find("call 'allreduce'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("DMA_SIZE_ERROR"), std::string::npos) << msg;
  EXPECT_THROW(a->wait(), DeviceError);

  // The same collected by polling: test() reports the failed dependency too.
  auto a2 = rig.accl->allreduce(*send, *recv, 8, reduceFunction::SUM, GLOBAL_COMM, false, true, dataType::none, true);
  auto c2 = rig.accl->nop(true, {a2});
  EXPECT_FALSE(c2->test());
  rig.device->complete(a2->id(), abi::kDmaSizeError);
  rig.device->complete(c2->id());
  msg = message_of<DeviceError>([&] { c2->test(); });
  EXPECT_NE(msg.find("call 'allreduce'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("DMA_SIZE_ERROR"), std::string::npos) << msg;
  EXPECT_THROW(a2->test(), DeviceError);

  // A polled call without dependencies that failed says so, with its name.
  auto d = rig.accl->allreduce(*send, *recv, 8, reduceFunction::SUM, GLOBAL_COMM, false, true, dataType::none, true);
  EXPECT_FALSE(d->test());
  rig.device->complete(d->id(), abi::kDmaSizeError);
  msg = message_of<DeviceError>([&] { d->test(); });
  EXPECT_NE(msg.find("call 'allreduce'"), std::string::npos) << msg;

  // A request of another driver cannot be waited for.
  Rig other(2, 0);
  auto foreign = other.accl->nop(true);
  EXPECT_THROW(rig.accl->nop(true, {foreign}), ArgumentError);
  EXPECT_THROW(rig.accl->nop(true, {RequestPtr{}}), ArgumentError);
}

TEST_F(Calls, DroppedRequestsAreReleasedOnceComplete) {
  rig.state->auto_complete = false;
  CallId id;
  {
    auto r = rig.accl->nop(true);
    id = r->id();
  }
  EXPECT_EQ(rig.state->released.count(id), 0u);
  rig.device->complete(id);
  rig.accl->nop(true);  // the next call sweeps completed orphans
  EXPECT_EQ(rig.state->released.count(id), 1u);
  // A waited request is released when the last reference goes.
  rig.state->auto_complete = true;
  CallId waited;
  {
    auto r = rig.accl->nop();
    waited = r->id();
    EXPECT_EQ(rig.state->released.count(waited), 0u) << "still named by a live RequestPtr";
  }
  EXPECT_EQ(rig.state->released.count(waited), 1u);
}

TEST_F(Calls, ConcurrentCallsFromTwoThreads) {
  // A blocking call in one thread must not block calls from another thread.
  rig.state->auto_complete = false;
  std::thread blocked([&] { rig.accl->recv(*recv, 4, 1); });
  // Wait until the recv is on the device.
  while (rig.data_call_count() == 0) std::this_thread::yield();
  rig.state->auto_complete = true;
  rig.accl->nop();
  rig.device->complete(rig.state->data_calls().front().id);
  blocked.join();
}

}  // namespace
}  // namespace accl::testing
