// SPDX-License-Identifier: Apache-2.0
//
// initialize()/deinit() and communicators: the exact exchange-memory layout,
// the configuration call sequence, the communicator allocator.
#include "rig.hpp"

#include <accl/accl.hpp>

#include <gtest/gtest.h>

#include <algorithm>

// Beside the rig (rig.hpp), whose names then need no qualification.
namespace accl::testing {

namespace {

// accl-reference §2.4a adapted to our layout: P = 2, 16 RX buffers of 3 KiB,
// max segment 1024, 48 KiB rendezvous scratch. Differences from public ACCL:
// the communicator record has one more word (context id), so the arithmetic
// configurations start at 0x204, and each lists four functions (SUM, MAX,
// MIN, PROD), so each is 11 words.
TEST(Configuration, InitializeWritesTheWorkedExampleLayout) {
  Rig rig(2, 1, kOurFirmware, false);
  InitOptions opts;
  opts.rx_buffer_count = 16;
  opts.rx_buffer_size = 3072;
  opts.max_eager_size = 3072;
  opts.max_rendezvous_size = 48 * 1024;
  opts.timeout = std::chrono::microseconds(2'000'000);
  rig.accl->initialize(make_ranks(2, 1024), 1, opts);
  auto& st = *rig.state;

  EXPECT_EQ(st.word(0x0000), 16u);
  EXPECT_EQ(st.word(0x0004), 3072u);
  std::set<uint64_t> rx_addresses;
  for (uint32_t i = 0; i < 16; ++i) {
    const uint32_t rec = 0x8 + 28 * i;
    EXPECT_EQ(st.word(rec + 0), 0u) << "status of buffer " << i;
    const uint64_t addr = st.word(rec + 4) | (uint64_t{st.word(rec + 8)} << 32);
    EXPECT_NE(addr >> 32, 0u) << "high word written";
    rx_addresses.insert(addr);
    for (uint32_t w = 3; w < 7; ++w) EXPECT_EQ(st.word(rec + 4 * w), 0u);
    // Zeroed on the device.
    const auto& mem = st.memory.at(addr);
    EXPECT_EQ(mem.size(), 3072u);
    EXPECT_TRUE(std::all_of(mem.begin(), mem.end(), [](uint8_t b) { return b == 0; }));
  }
  EXPECT_EQ(rx_addresses.size(), 16u);

  // Communicator 0 right after the RX table.
  EXPECT_EQ(rig.accl->get_communicator_addr(GLOBAL_COMM), 0x1C8u);
  EXPECT_EQ(st.word(0x1C8), 2u);
  EXPECT_EQ(st.word(0x1CC), 1u);
  const uint32_t expected_rank_words[2][6] = {{0x0A0A0A01, 5500, 0, 0, 0, 1024}, {0x0A0A0A02, 5501, 0, 0, 1, 1024}};
  for (uint32_t r = 0; r < 2; ++r)
    for (uint32_t w = 0; w < 6; ++w)
      EXPECT_EQ(st.word(0x1D0 + 24 * r + 4 * w), expected_rank_words[r][w]) << "rank " << r << " word " << w;
  EXPECT_EQ(st.word(0x200), 0u) << "context id of the global communicator";

  // Arithmetic configurations in std::map order.
  struct Expected {
    std::pair<dataType, dataType> key;
    uint32_t address;
    std::vector<uint32_t> words;
  };
  const std::vector<Expected> arith = {
      {{dataType::float16, dataType::float16}, 0x204, {2, 2, 0, 0, 0, 4, 0, 4, 9, 14, 19}},
      {{dataType::float32, dataType::float16}, 0x230, {4, 2, 0, 0, 1, 4, 1, 4, 9, 14, 19}},
      {{dataType::float32, dataType::float32}, 0x25C, {4, 4, 0, 0, 0, 4, 0, 0, 5, 10, 15}},
      {{dataType::float64, dataType::float64}, 0x288, {8, 8, 0, 0, 0, 4, 0, 1, 6, 11, 16}},
      {{dataType::int32, dataType::int32}, 0x2B4, {4, 4, 0, 0, 0, 4, 0, 2, 7, 12, 17}},
      {{dataType::int64, dataType::int64}, 0x2E0, {8, 8, 0, 0, 0, 4, 0, 3, 8, 13, 18}},
  };
  for (const auto& e : arith) {
    EXPECT_EQ(rig.accl->get_arithmetic_config_addr(e.key), e.address);
    for (uint32_t w = 0; w < e.words.size(); ++w)
      EXPECT_EQ(st.word(e.address + 4 * w), e.words[w]) << "arith record at " << e.address << " word " << w;
  }

  // Tuning registers, spare buffers, CFGRDY.
  EXPECT_EQ(st.word(0x1FC4), 2u);
  EXPECT_EQ(st.word(0x1FC8), 32768u);
  EXPECT_EQ(st.word(0x1FCC), 3u);
  EXPECT_EQ(st.word(0x1FD0), 4u);
  EXPECT_EQ(st.word(0x1FD4), 12288u);
  for (uint32_t off : {0x1FD8u, 0x1FE0u, 0x1FE8u}) {
    const uint64_t addr = st.word(off) | (uint64_t{st.word(off + 4)} << 32);
    ASSERT_TRUE(st.memory.count(addr)) << "spare buffer at " << off;
    EXPECT_EQ(st.memory.at(addr).size(), 48u * 1024u);
  }
  EXPECT_EQ(st.word(0x1FF4), 1u);

  // The RX count is the last RX-table word written, after every record and the size.
  size_t count_write = 0, last_record_write = 0, size_write = 0;
  for (size_t i = 0; i < st.writes.size(); ++i) {
    const uint32_t off = st.writes[i].first;
    if (off == 0x0) count_write = i;
    if (off == 0x4) size_write = i;
    if (off >= 0x8 && off < 0x8 + 28 * 16) last_record_write = i;
  }
  EXPECT_GT(count_write, last_record_write);
  EXPECT_GT(count_write, size_write);

  // Config calls: reset first, then timeout (us), eager, rendezvous, enable packets.
  auto config = st.calls_of(abi::kConfig);
  ASSERT_EQ(config.size(), 5u);
  const uint32_t expected_calls[5][2] = {{abi::kResetPeripherals, 0},
                                         {abi::kSetTimeout, 2'000'000},
                                         {abi::kSetMaxEagerSize, 3072},
                                         {abi::kSetMaxRendezvousSize, 48 * 1024},
                                         {abi::kEnablePackets, 0}};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(config[i].words[abi::kWordFunction], expected_calls[i][0]) << "config call " << i;
    EXPECT_EQ(config[i].words[abi::kWordCount], expected_calls[i][1]) << "config call " << i;
  }
  // The reset precedes every exchange-memory write: check the first write
  // happened after the reset call was recorded (writes were empty then).
  EXPECT_EQ(rig.accl->timeout(), std::chrono::microseconds(2'000'000));
  EXPECT_TRUE(rig.accl->initialized());

  // The next communicator lands right after the arithmetic configurations.
  auto comm = rig.accl->create_communicator(make_ranks(2), 0);
  EXPECT_EQ(rig.accl->get_communicator_addr(comm), 0x30Cu);
  EXPECT_EQ(st.word(0x30C + 4 * abi::comm_context_word(2)), 1u) << "default context id = creation index";
}

TEST(Configuration, MaxSegmentDefaultsToAndIsCappedAtTheRxBufferSize) {
  Rig rig(2, 0, kOurFirmware, false);
  auto ranks = make_ranks(2);
  ranks[1].max_segment_size = 1 << 20;
  ranks[0].session_id = -1;
  rig.accl->initialize(ranks, 0, 16, 2048);
  const uint32_t comm = rig.accl->get_communicator_addr(GLOBAL_COMM);
  EXPECT_EQ(rig.state->word(comm + 4 * (2 + abi::kRankMaxSegment)), 2048u);
  EXPECT_EQ(rig.state->word(comm + 4 * (8 + abi::kRankMaxSegment)), 2048u);
  EXPECT_EQ(rig.state->word(comm + 4 * (2 + abi::kRankSession)), 0xFFFFFFFFu);
  auto group = rig.accl->get_comm_group();
  ASSERT_EQ(group.size(), 2u);
  EXPECT_EQ(group[0].ip, "10.10.10.1");
  EXPECT_EQ(group[0].session_id, -1);
  EXPECT_EQ(group[1].port, 5501);
  EXPECT_EQ(group[1].session_id, 1);
  EXPECT_EQ(group[1].max_segment_size, 2048u);
}

TEST(Configuration, NoSpareBuffersWhenRendezvousIsOff) {
  Rig rig(2, 0, kOurFirmware, false);
  rig.accl->initialize(make_ranks(2), 0, 4, 1024, 1024, 0);
  for (uint32_t off : {0x1FD8u, 0x1FDCu, 0x1FE0u, 0x1FE4u, 0x1FE8u, 0x1FECu}) EXPECT_EQ(rig.state->word(off), 0u);
  EXPECT_EQ(rig.state->live_allocations, 4);
}

TEST(Configuration, TimeoutDefaultsToTheEnvironment) {
  setenv("ACCL_TIMEOUT_MS", "1234", 1);
  Rig rig(2, 0);
  unsetenv("ACCL_TIMEOUT_MS");
  EXPECT_EQ(rig.accl->timeout(), std::chrono::microseconds(1'234'000));
  EXPECT_EQ(rig.state->calls_of(abi::kConfig)[1].words[abi::kWordCount], 1'234'000u);
}

TEST(Configuration, FailedConfigCallThrowsDeviceErrorAndLeavesNothingAllocated) {
  Rig rig(2, 0, kOurFirmware, false);
  rig.state->retcode = [](const CallWords& w) {
    return w[abi::kWordScenario] == abi::kConfig && w[abi::kWordFunction] == abi::kSetMaxEagerSize
               ? uint32_t{abi::kEagerThresholdInvalid}
               : 0u;
  };
  auto msg = message_of<DeviceError>([&] { rig.accl->initialize(make_ranks(2), 0); });
  EXPECT_NE(msg.find("set_max_eager_msg_size"), std::string::npos) << msg;
  EXPECT_NE(msg.find("EAGER_THRESHOLD_INVALID"), std::string::npos) << msg;
  EXPECT_FALSE(rig.accl->initialized());
  EXPECT_EQ(rig.state->live_allocations, 0);
}

TEST(Configuration, InitializeRejectsBadArgumentsBeforeTouchingTheDevice) {
  Rig rig(2, 0, kOurFirmware, false);
  EXPECT_THROW(rig.accl->initialize({}, 0), ArgumentError);
  EXPECT_THROW(rig.accl->initialize(make_ranks(2), 2), ArgumentError);
  EXPECT_THROW(rig.accl->initialize(make_ranks(2), 0, 0), ArgumentError);
  auto bad_ip = make_ranks(2);
  bad_ip[1].ip = "host.example";
  auto msg = message_of<ArgumentError>([&] { rig.accl->initialize(bad_ip, 0); });
  EXPECT_NE(msg.find("not IPv4"), std::string::npos) << msg;
  // 300 RX records alone need 8400 bytes: more than the 8 KiB exchange memory.
  msg = message_of<ArgumentError>([&] { rig.accl->initialize(make_ranks(2), 0, 300); });
  EXPECT_NE(msg.find("exchange memory"), std::string::npos) << msg;
  EXPECT_EQ(rig.state->calls.size(), 0u);
  EXPECT_EQ(rig.state->writes.size(), 0u);
  EXPECT_EQ(rig.state->live_allocations, 0);
}

TEST(Configuration, DeinitResetsFreesAndForgets) {
  Rig rig(4, 2);
  const int allocations = rig.state->live_allocations;
  EXPECT_EQ(allocations, 16 + 3);
  rig.clear_log();
  rig.accl->deinit();
  auto config = rig.state->calls_of(abi::kConfig);
  ASSERT_EQ(config.size(), 1u);
  EXPECT_EQ(config[0].words[abi::kWordFunction], abi::kResetPeripherals);
  EXPECT_EQ(rig.state->live_allocations, 0);
  EXPECT_FALSE(rig.accl->initialized());
  auto buf = rig.accl->create_buffer<float>(8);  // buffers do not need a configured CCLO
  auto msg = message_of<ArgumentError>([&] { rig.accl->allreduce(*buf, *buf, 8, reduceFunction::SUM); });
  EXPECT_NE(msg.find("'allreduce'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not initialized"), std::string::npos) << msg;
  EXPECT_THROW(rig.accl->get_comm_size(), ArgumentError);
  rig.accl->deinit();  // idempotent
  // Initialize again works and lays out the same way.
  rig.accl->initialize(make_ranks(4), 2);
  EXPECT_EQ(rig.accl->get_communicator_addr(GLOBAL_COMM), 0x1C8u);
  buf.reset();
}

TEST(Configuration, CallsBeforeInitializeNameTheCall) {
  Rig rig(2, 0, kOurFirmware, false);
  auto buf = rig.accl->create_buffer<int32_t>(4);
  auto msg = message_of<ArgumentError>([&] { rig.accl->send(*buf, 4, 1); });
  EXPECT_NE(msg.find("'send'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not initialized"), std::string::npos) << msg;
  EXPECT_THROW(rig.accl->barrier(), ArgumentError);
  EXPECT_THROW(rig.accl->nop(), ArgumentError);
  EXPECT_THROW(rig.accl->set_timeout(std::chrono::microseconds(5)), ArgumentError);
  EXPECT_THROW(rig.accl->create_communicator(make_ranks(2), 0), ArgumentError);
  EXPECT_EQ(rig.state->calls.size(), 0u);
}

TEST(Configuration, DestructorDeinitializes) {
  auto state = std::make_shared<FakeDevice::State>();
  {
    ACCL accl(std::make_unique<FakeDevice>(state));
    accl.initialize(make_ranks(2), 0);
    EXPECT_GT(state->live_allocations, 0);
  }
  EXPECT_EQ(state->live_allocations, 0);
  EXPECT_EQ(state->calls.back().words[abi::kWordFunction], abi::kResetPeripherals);
}

TEST(Configuration, SetTimeoutAndThresholdsAreConfigCalls) {
  Rig rig(2, 0);
  rig.clear_log();
  rig.accl->set_timeout(std::chrono::microseconds(777));
  rig.accl->set_max_eager_msg_size(4096);
  rig.accl->set_max_rendezvous_msg_size(1 << 20);
  auto config = rig.state->calls_of(abi::kConfig);
  ASSERT_EQ(config.size(), 3u);
  EXPECT_EQ(config[0].words[abi::kWordFunction], abi::kSetTimeout);
  EXPECT_EQ(config[0].words[abi::kWordCount], 777u);
  EXPECT_EQ(config[1].words[abi::kWordFunction], abi::kSetMaxEagerSize);
  EXPECT_EQ(config[1].words[abi::kWordCount], 4096u);
  EXPECT_EQ(config[2].words[abi::kWordFunction], abi::kSetMaxRendezvousSize);
  EXPECT_EQ(config[2].words[abi::kWordCount], 1u << 20);
  EXPECT_EQ(rig.accl->timeout(), std::chrono::microseconds(777));
  rig.state->retcode = [](const CallWords&) { return uint32_t{abi::kRendezvousThresholdInvalid}; };
  EXPECT_THROW(rig.accl->set_max_rendezvous_msg_size(10), DeviceError);
}

TEST(Communicators, FreedSpaceIsReusedAndFullMemoryIsAnError) {
  Rig rig(4, 2);
  auto ranks = make_ranks(8);
  const uint32_t record_bytes = abi::comm_record_words(8) * 4;  // 204
  auto a = rig.accl->create_communicator(ranks, 3);
  auto b = rig.accl->create_communicator(ranks, 3);
  const uint32_t addr_a = rig.accl->get_communicator_addr(a);
  const uint32_t addr_b = rig.accl->get_communicator_addr(b);
  EXPECT_EQ(addr_b, addr_a + record_bytes);
  EXPECT_EQ(rig.accl->get_comm_size(a), 8u);
  EXPECT_EQ(rig.accl->get_comm_rank(a), 3u);

  rig.accl->free_communicator(a);
  EXPECT_EQ(rig.state->word(addr_a), 0u) << "record cleared";
  EXPECT_THROW(rig.accl->get_comm_size(a), ArgumentError);
  auto buf = rig.accl->create_buffer<float>(4);
  auto msg = message_of<ArgumentError>([&] { rig.accl->bcast(*buf, 4, 0, a); });
  EXPECT_NE(msg.find("communicator " + std::to_string(a) + " does not exist"), std::string::npos) << msg;
  auto c = rig.accl->create_communicator(ranks, 3);
  EXPECT_NE(c, a) << "ids are never reused";
  EXPECT_EQ(rig.accl->get_communicator_addr(c), addr_a) << "space is";

  // Fill the rest: every allocation succeeds until the area below 0x1FC0 is exhausted.
  std::vector<communicatorId> filled;
  for (;;) {
    try {
      filled.push_back(rig.accl->create_communicator(ranks, 0));
    } catch (const ArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("exchange memory is full"), std::string::npos) << e.what();
      break;
    }
    ASSERT_LT(filled.size(), 100u);
  }
  for (auto id : filled) EXPECT_LE(rig.accl->get_communicator_addr(id) + record_bytes, abi::kConfigAreaEnd);
  // Freeing two neighbours makes room for one larger communicator.
  ASSERT_GE(filled.size(), 2u);
  rig.accl->free_communicator(filled[0]);
  rig.accl->free_communicator(filled[1]);
  auto big = rig.accl->create_communicator(make_ranks(16), 0);
  EXPECT_EQ(rig.accl->get_communicator_addr(big), rig.accl->get_communicator_addr(b) + record_bytes);
  EXPECT_THROW(rig.accl->free_communicator(GLOBAL_COMM), ArgumentError);
  EXPECT_THROW(rig.accl->free_communicator(9999), ArgumentError);
}

TEST(Communicators, SplitTakesGlobalRanksInTheGivenOrder) {
  Rig rig(4, 2);
  auto sub = rig.accl->split_communicator({1, 2});
  EXPECT_EQ(rig.accl->get_comm_size(sub), 2u);
  EXPECT_EQ(rig.accl->get_comm_rank(sub), 1u);
  auto group = rig.accl->get_comm_group(sub);
  ASSERT_EQ(group.size(), 2u);
  EXPECT_EQ(group[0].ip, "10.10.10.2");
  EXPECT_EQ(group[1].ip, "10.10.10.3");
  const uint32_t addr = rig.accl->get_communicator_addr(sub);
  EXPECT_EQ(rig.state->word(addr + 4 * abi::comm_context_word(2)), 1u);

  auto explicit_ctx = rig.accl->split_communicator({3, 2, 0}, 42);
  EXPECT_EQ(rig.accl->get_comm_rank(explicit_ctx), 1u);
  EXPECT_EQ(rig.state->word(rig.accl->get_communicator_addr(explicit_ctx) + 4 * abi::comm_context_word(3)), 42u);

  auto msg = message_of<ArgumentError>([&] { rig.accl->split_communicator({0, 1}); });
  EXPECT_NE(msg.find("not a member"), std::string::npos) << msg;
  EXPECT_THROW(rig.accl->split_communicator({2, 2}), ArgumentError);
  EXPECT_THROW(rig.accl->split_communicator({2, 4}), ArgumentError);
  EXPECT_THROW(rig.accl->split_communicator({}), ArgumentError);
}

TEST(DeviceFacts, HwidCapabilitiesAndDumps) {
  Rig rig(2, 1, abi::kCapValid | abi::kCapReduceMin);
  EXPECT_EQ(rig.accl->get_hwid(), 0x12345678u);
  EXPECT_EQ(rig.accl->get_capabilities(), abi::kCapValid | abi::kCapReduceMin);
  EXPECT_TRUE(rig.accl->supports(reduceFunction::SUM));
  EXPECT_TRUE(rig.accl->supports(reduceFunction::MIN));
  EXPECT_FALSE(rig.accl->supports(reduceFunction::PROD));
  EXPECT_FALSE(rig.accl->is_simulated());
  EXPECT_EQ(rig.accl->local_rank(), 1);

  auto exchange = rig.accl->dump_exchange_memory();
  EXPECT_NE(exchange.find("0x0000: 00000010 00000400"), std::string::npos) << exchange;
  EXPECT_NE(exchange.find("*\n"), std::string::npos);
  auto rx = rig.accl->dump_rx_buffers();
  EXPECT_NE(rx.find("RX buffers: 16 of 1024 bytes"), std::string::npos) << rx;
  EXPECT_NE(rx.find(" 15 idle"), std::string::npos) << rx;
  auto comm = rig.accl->dump_communicator();
  EXPECT_NE(comm.find("2 ranks, local rank 1, context 0"), std::string::npos) << comm;
  EXPECT_NE(comm.find("ip 10.10.10.2 port 5501"), std::string::npos) << comm;
}

TEST(DeviceFacts, CapabilityWordWithoutValidBitMeansPublicHardware) {
  Rig rig(2, 1, abi::kCapReduceMin | abi::kCapReduceProd);  // no kCapValid
  EXPECT_EQ(rig.accl->get_capabilities(), 0u);
  EXPECT_FALSE(rig.accl->supports(reduceFunction::MIN));
}

// The extension types (issue 40): loaded after public ACCL's six only on a
// device that reports them, with their full function tables.
TEST(ArithExtensions, PublicHardwareGetsPublicRecordsOnly) {
  Rig rig(2, 1, 0);
  EXPECT_FALSE(rig.accl->supports(reduceFunction::BAND));
  EXPECT_FALSE(rig.accl->supports(reduceFunction::MINLOC));
  EXPECT_FALSE(rig.accl->supports(reduceFunction::SUM, dataType::int8));
  EXPECT_FALSE(rig.accl->supports(reduceFunction::MAX, dataType::uint32));
  EXPECT_TRUE(rig.accl->supports(reduceFunction::SUM, dataType::int32));
  EXPECT_THROW(rig.accl->get_arithmetic_config_addr({dataType::int16, dataType::int16}), ArgumentError);
  // int32 keeps public ACCL's four functions.
  const uint32_t int32 = rig.accl->get_arithmetic_config_addr({dataType::int32, dataType::int32});
  EXPECT_EQ(rig.state->word(int32 + 4 * abi::kArithNumFunctions), 4u);
}

TEST(ArithExtensions, ReportedTypesAreLoadedWithTheirFunctions) {
  const uint32_t all = abi::kCapValid | abi::kCapReduceMin | abi::kCapReduceProd | abi::kCapInt8 | abi::kCapInt16 |
                       abi::kCapUnsigned | abi::kCapReduceBitwise | abi::kCapReduceLogical | abi::kCapReduceLoc;
  Rig rig(2, 1, all);
  EXPECT_TRUE(rig.accl->supports(reduceFunction::LXOR, dataType::int8));
  EXPECT_TRUE(rig.accl->supports(reduceFunction::MAX, dataType::uint64));
  EXPECT_TRUE(rig.accl->supports(reduceFunction::MAXLOC, dataType::float64_int));
  EXPECT_FALSE(rig.accl->supports(reduceFunction::SUM, dataType::float64_int)) << "kFnNone entry";
  EXPECT_FALSE(rig.accl->supports(reduceFunction::BAND, dataType::float32)) << "floats keep four functions";
  const uint32_t int16 = rig.accl->get_arithmetic_config_addr({dataType::int16, dataType::int16});
  EXPECT_EQ(rig.state->word(int16 + 4 * abi::kArithUncompressedBytes), 2u);
  EXPECT_EQ(rig.state->word(int16 + 4 * abi::kArithNumFunctions), 10u);
  EXPECT_EQ(rig.state->word(int16 + 4 * (abi::kArithFunctionIds + uint32_t{abi::kBxor})),
            abi::extended_function(abi::ArithOp::bxor, abi::ArithElem::i16));
  const uint32_t pair = rig.accl->get_arithmetic_config_addr({dataType::float64_int, dataType::float64_int});
  EXPECT_EQ(rig.state->word(pair + 4 * abi::kArithUncompressedBytes), 12u);
  EXPECT_EQ(rig.state->word(pair + 4 * abi::kArithNumFunctions), 12u);
  EXPECT_EQ(rig.state->word(pair + 4 * abi::kArithFunctionIds), abi::kFnNone);
  EXPECT_EQ(rig.state->word(pair + 4 * (abi::kArithFunctionIds + uint32_t{abi::kMinLoc})),
            abi::extended_function(abi::ArithOp::minloc, abi::ArithElem::f64_i32));
  // Public ACCL's records come first (int8 sorts before float16 but is an extension).
  EXPECT_LT(rig.accl->get_arithmetic_config_addr({dataType::float16, dataType::float16}),
            rig.accl->get_arithmetic_config_addr({dataType::int8, dataType::int8}));
  EXPECT_LT(rig.accl->get_arithmetic_config_addr({dataType::int64, dataType::int64}), int16);
}

TEST(ArithExtensions, ATypeThatDoesNotFitIsLeftOut) {
  // 260 RX records leave room for public ACCL's configurations but not all
  // the extension types: initialize works, and what was left out is reported
  // as unsupported instead of failing.
  const uint32_t all = abi::kCapValid | abi::kCapInt8 | abi::kCapInt16 | abi::kCapUnsigned |
                       abi::kCapReduceBitwise | abi::kCapReduceLogical | abi::kCapReduceLoc;
  Rig rig(2, 1, all, false);
  InitOptions options;
  options.rx_buffer_count = 260;
  rig.accl->initialize(make_ranks(2), 1, options);
  unsigned left_out = 0;
  for (dataType t : {dataType::int8, dataType::int16, dataType::uint8, dataType::uint16, dataType::uint32,
                     dataType::uint64, dataType::int32_int, dataType::float64_float64}) {
    const reduceFunction f = abi::data_type_capabilities(t) == abi::kCapReduceLoc ? reduceFunction::MINLOC
                                                                                    : reduceFunction::SUM;
    if (!rig.accl->supports(f, t)) ++left_out;
  }
  EXPECT_GT(left_out, 0u);
  EXPECT_LT(left_out, 8u) << "the first extension types fit";
  EXPECT_TRUE(rig.accl->supports(reduceFunction::SUM, dataType::int32));
}

}  // namespace
}  // namespace accl::testing
