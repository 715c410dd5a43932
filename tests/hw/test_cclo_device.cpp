// SPDX-License-Identifier: Apache-2.0
//
// The hardware backend (CcloDevice: encoding, exchange memory, retcode,
// perf counter, ordering, chaining, buffers) on a register-level model of a
// card. Same code as on a card; only the ports differ.
#include "models.hpp"

#include <accl/error.hpp>
#include <accl_hw/cclo_device.hpp>
#include <accl_hw/hostctrl.hpp>
#include <accl_hw/hw.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

using namespace std::chrono_literals;
using accl::CallWords;
using accl::DeviceAllocation;
using accl::MemoryKind;
namespace hw = accl::hw;

// Inside hwtest: its `abi` alias (accl::abi) hides the global `abi` of <cxxabi.h>.
namespace hwtest {

namespace {

struct Rig {
  std::shared_ptr<hwtest::RegisterModel> model = std::make_shared<hwtest::RegisterModel>();
  std::shared_ptr<hwtest::FakeBufferPort> bufs = std::make_shared<hwtest::FakeBufferPort>();
  std::unique_ptr<accl::Device> dev;

  explicit Rig(double clock_mhz = 250.0) {
    hw::CcloDeviceOptions o;
    o.name = "xrt";
    o.description = "register model";
    o.clock_mhz = clock_mhz;
    o.poll_slice = 5ms;
    dev = hw::make_cclo_device(std::make_unique<hwtest::SharedRegisterPort>(model),
                               std::make_unique<hwtest::SharedBufferPort>(bufs), o);
  }
  accl::CallId start(const CallWords& w, std::vector<accl::CallId> waitfor = {}) { return dev->start(w, waitfor); }
  accl::CallResult run(const CallWords& w) {
    auto id = start(w);
    EXPECT_TRUE(dev->wait(id, 5s));
    auto r = dev->result(id);
    dev->release(id);
    return r;
  }
};

// Every word distinct and every address using its high half.
CallWords distinct_call(uint32_t scenario) {
  CallWords w;
  for (uint32_t i = 0; i < abi::kCallWords; ++i) w.words[i] = 0x1000u * (i + 1) + i;
  w[abi::kWordScenario] = scenario;
  w.set_addr(0, 0x0000'0012'3456'7000ull);
  w.set_addr(1, 0x0000'00ab'cdef'0040ull);
  w.set_addr(2, 0xffff'fffe'0000'1000ull);
  return w;
}

CallWords nop() {
  CallWords w;
  w[abi::kWordScenario] = abi::kNop;
  return w;
}

}  // namespace

// --- encoding -------------------------------------------------------------

TEST(HwEncoding, ArgumentsAreTheCallWordsInOrder) {
  CallWords w = distinct_call(abi::kAllreduce);
  hw::HostCtrlArgs a = hw::encode_call(w);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(a.value[i], w.words[i]) << "argument " << i;
  EXPECT_EQ(a.value[hw::kArgAddr0], 0x0000'0012'3456'7000ull);
  EXPECT_EQ(a.value[hw::kArgAddr1], 0x0000'00ab'cdef'0040ull);
  EXPECT_EQ(a.value[hw::kArgAddr2], 0xffff'fffe'0000'1000ull);
}

TEST(HwEncoding, ArgumentTableMatchesPublicHostctrl) {
  // SCENARIO 0 .. ADDR_2 11: nine 32-bit words then three 64-bit addresses.
  for (int i = 0; i < 9; ++i) EXPECT_EQ(hw::kHostCtrlArgBytes[i], 4u);
  for (int i = 9; i < 12; ++i) EXPECT_EQ(hw::kHostCtrlArgBytes[i], 8u);
  EXPECT_EQ(hw::kHostCtrlArgOffset[hw::kArgScenario], 0x10u);
  EXPECT_EQ(hw::kHostCtrlArgOffset[hw::kArgCount], 0x18u);
  EXPECT_EQ(hw::kHostCtrlArgOffset[hw::kArgStreamFlags], 0x50u);
  EXPECT_EQ(hw::kHostCtrlArgOffset[hw::kArgAddr0], 0x58u);
  EXPECT_EQ(hw::kHostCtrlArgOffset[hw::kArgAddr2], 0x70u);
}

TEST(HwEncoding, DescribeNamesTheScenario) {
  EXPECT_EQ(hw::scenario_name(abi::kReduceScatter), "reduce_scatter");
  EXPECT_EQ(hw::scenario_name(77), "scenario 77");
  EXPECT_NE(hw::describe_call(distinct_call(abi::kSend)).find("send count="), std::string::npos);
}

// --- calls through the register model ---------------------------------------

TEST(HwDevice, EveryCallWordReachesTheCclo) {
  Rig rig;
  for (uint32_t scenario : {abi::kConfig, abi::kCopy, abi::kSend, abi::kAllreduce, abi::kAlltoall, abi::kNop}) {
    CallWords w = distinct_call(scenario);
    rig.run(w);
    ASSERT_FALSE(rig.model->received().empty());
    EXPECT_EQ(rig.model->received().back().words, w.words) << hw::scenario_name(scenario);
  }
  // The hostctrl registers hold the last call as public ACCL's map says.
  CallWords w = distinct_call(abi::kNop);
  EXPECT_EQ(rig.model->reg(abi::kHostCtrlScenario), abi::kNop);
  EXPECT_EQ(rig.model->reg(abi::kHostCtrlCount), w[abi::kWordCount]);
  EXPECT_EQ(rig.model->reg(abi::kHostCtrlTag), w[abi::kWordTag]);
  EXPECT_EQ(rig.model->reg(abi::kHostCtrlStreamFlags), w[abi::kWordStreamFlags]);
  EXPECT_EQ(rig.model->reg(abi::kHostCtrlAddr0), 0x3456'7000u);
  EXPECT_EQ(rig.model->reg(abi::kHostCtrlAddr0 + 4), 0x12u);
  EXPECT_EQ(rig.model->reg(abi::kHostCtrlAddr2 + 4), 0xffff'fffeu);
  EXPECT_EQ(rig.model->reg(abi::kHostCtrlApCtrl) & 0x2, 0x2u) << "AP_DONE after the call";
}

TEST(HwDevice, ConfigCallsCarryCount) {
  // Public ACCL's XRTDevice sets only scenario and function for config calls,
  // so set_timeout / set_max_*_size lose their value on a card.
  Rig rig;
  for (uint32_t fn : {abi::kSetTimeout, abi::kSetMaxEagerSize, abi::kSetMaxRendezvousSize}) {
    CallWords w;
    w[abi::kWordScenario] = abi::kConfig;
    w[abi::kWordFunction] = fn;
    w[abi::kWordCount] = 123456 + fn;
    rig.run(w);
    EXPECT_EQ(rig.model->reg(abi::kHostCtrlCount), 123456 + fn);
    EXPECT_EQ(rig.model->reg(abi::kHostCtrlFunction), fn);
    EXPECT_EQ(rig.model->received().back()[abi::kWordCount], 123456 + fn);
  }
}

TEST(HwDevice, ExchangeMemoryWritesReachTheCclo) {
  Rig rig;
  rig.dev->write(abi::kRxBufferSizeOffset, 4096);
  rig.dev->write(abi::kRxBufferTableOffset + 4, 0xdead'beef);
  rig.dev->write(abi::kRxBufferCountOffset, 16);
  EXPECT_EQ(rig.model->xmem(abi::kRxBufferSizeOffset), 4096u);
  EXPECT_EQ(rig.dev->read(abi::kRxBufferTableOffset + 4), 0xdead'beefu);
  auto log = rig.model->xmem_log();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[2], std::make_pair(abi::kRxBufferCountOffset, 16u)) << "writes reach the card in program order";
  // Outside the 8 KiB or unaligned: refused before the card sees it.
  EXPECT_THROW(rig.dev->write(abi::kExchangeMemorySize, 1), hw::HwError);
  EXPECT_THROW(rig.dev->read(0x6), hw::HwError);
  EXPECT_THROW(rig.dev->read(0xFFFF'FFFC), accl::Error);
  EXPECT_EQ(rig.model->xmem_log().size(), 3u);
}

TEST(HwDevice, RetcodeIsReadBackAndRaised) {
  Rig rig;
  const uint32_t bits = abi::kReceiveTimeoutError | abi::kDmaSizeError;
  rig.model->firmware = [&](const CallWords&) { return hwtest::RegisterModel::Outcome{bits, 10}; };
  EXPECT_EQ(rig.run(nop()).retcode, bits);
  // A firmware path that does not write RETCODE must not inherit the bits.
  rig.model->firmware = [](const CallWords&) { return hwtest::RegisterModel::Outcome{std::nullopt, 10}; };
  EXPECT_EQ(rig.run(nop()).retcode, 0u);
  // The clear happened before the start, as a write of 0 to RETCODE.
  auto log = rig.model->xmem_log();
  auto starts = rig.model->starts();
  ASSERT_EQ(starts.size(), 2u);
  ASSERT_GE(starts[1], 1u);
  EXPECT_EQ(log[starts[1] - 1], std::make_pair(abi::kRetcodeOffset, 0u));
}

TEST(HwDevice, PerfCounterBecomesNanoseconds) {
  {
    Rig rig;  // 250 MHz: 4 ns per cycle, as public ACCL
    rig.model->firmware = [](const CallWords&) { return hwtest::RegisterModel::Outcome{0, 250}; };
    EXPECT_EQ(rig.run(nop()).duration_ns, 1000u);
  }
  {
    Rig rig(100.0);
    rig.model->firmware = [](const CallWords&) { return hwtest::RegisterModel::Outcome{0, 250}; };
    EXPECT_EQ(rig.run(nop()).duration_ns, 2500u);
  }
}

TEST(HwDevice, WaitTimesOutWhileTheCallRuns) {
  Rig rig;
  rig.model->hold(true);
  auto id = rig.start(nop());
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(rig.dev->wait(id, 30ms));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
  EXPECT_FALSE(rig.dev->test(id));
  EXPECT_THROW(rig.dev->result(id), hw::HwError);  // not complete yet
  rig.model->release();
  EXPECT_TRUE(rig.dev->wait(id, 5s));
  EXPECT_TRUE(rig.dev->test(id));
  EXPECT_EQ(rig.dev->result(id).retcode, 0u);
  rig.dev->release(id);
  EXPECT_TRUE(rig.dev->wait(id, 1ms)) << "released, hence complete (as the emulator)";
  EXPECT_TRUE(rig.dev->test(id));
  EXPECT_THROW(rig.dev->wait(id + 100, 1ms), hw::HwError) << "never issued";
  EXPECT_THROW(rig.dev->test(0), hw::HwError);
}

TEST(HwDevice, CallsRunOneAtATimeInIssueOrder) {
  Rig rig;
  rig.model->hold(true);
  std::vector<accl::CallId> ids;
  for (uint32_t tag = 1; tag <= 3; ++tag) {
    CallWords w = nop();
    w[abi::kWordTag] = tag;
    ids.push_back(rig.start(w));
  }
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(rig.model->received().size(), 1u) << "one hostctrl execution at a time";
  for (size_t n = 1; n <= 3; ++n) {
    while (rig.model->received().size() < n) std::this_thread::sleep_for(1ms);
    rig.model->release();
  }
  for (auto id : ids) EXPECT_TRUE(rig.dev->wait(id, 5s));
  auto got = rig.model->received();
  ASSERT_EQ(got.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(got[i][abi::kWordTag], i + 1);
}

TEST(HwDevice, ChainingWaitsForDependenciesHostSide) {
  Rig rig;
  rig.model->hold(true);
  CallWords a = nop(), b = nop();
  a[abi::kWordTag] = 0xA;
  b[abi::kWordTag] = 0xB;
  auto ida = rig.start(a);
  auto idb = rig.start(b, {ida});
  std::this_thread::sleep_for(30ms);
  ASSERT_EQ(rig.model->received().size(), 1u) << "B must not start while A runs";
  EXPECT_FALSE(rig.dev->test(idb));
  rig.model->hold(false);
  rig.model->release();
  EXPECT_TRUE(rig.dev->wait(idb, 5s));
  EXPECT_TRUE(rig.dev->test(ida));
  auto got = rig.model->received();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0][abi::kWordTag], 0xAu);
  EXPECT_EQ(got[1][abi::kWordTag], 0xBu);
  // The words the CCLO sees carry no trace of the dependency.
  EXPECT_EQ(got[1].words, b.words);
}

TEST(HwDevice, FailedDependencyStillRunsTheDependent) {
  Rig rig;
  rig.model->firmware = [](const CallWords& w) {
    return hwtest::RegisterModel::Outcome{w[abi::kWordTag] == 1 ? uint32_t{abi::kLinkError} : 0u, 1};
  };
  CallWords a = nop(), b = nop();
  a[abi::kWordTag] = 1;
  auto ida = rig.start(a);
  auto idb = rig.start(b, {ida, 999999 /* unknown ids count as complete */});
  ASSERT_TRUE(rig.dev->wait(idb, 5s));
  EXPECT_EQ(rig.dev->result(ida).retcode, abi::kLinkError);
  EXPECT_EQ(rig.dev->result(idb).retcode, 0u);
}

TEST(HwDevice, RuntimeFailureIsRaised) {
  Rig rig;
  rig.model->fail_next("hostctrl execution ended in XRT state ABORT");
  auto id = rig.start(distinct_call(abi::kBcast));
  ASSERT_TRUE(rig.dev->wait(id, 5s));
  try {
    rig.dev->result(id);
    FAIL() << "result() of a failed execution must throw";
  } catch (const accl::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ABORT"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bcast"), std::string::npos) << e.what();
  }
  // The device keeps working.
  EXPECT_EQ(rig.run(nop()).retcode, 0u);
}

TEST(HwDevice, ReleaseBeforeCompletionAndCloseWhileRunning) {
  Rig rig;
  rig.model->hold(true);
  auto a = rig.start(nop());
  rig.dev->release(a);  // dropped once it ends
  auto b = rig.start(nop());
  while (rig.model->received().empty()) std::this_thread::sleep_for(1ms);  // a is running
  rig.model->release();
  while (rig.model->received().size() < 2) std::this_thread::sleep_for(1ms);
  EXPECT_FALSE(rig.dev->wait(b, 20ms));
  // Closing with a running and a queued call returns promptly.
  auto c = rig.start(nop());
  (void)c;
  auto t0 = std::chrono::steady_clock::now();
  rig.dev.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

// --- buffers ---------------------------------------------------------------

TEST(HwDevice, DeviceBuffersGoThroughTheRuntime) {
  Rig rig;
  DeviceAllocation a = rig.dev->allocate(1000, MemoryKind::device, 1);
  EXPECT_EQ(a.kind, MemoryKind::device);
  EXPECT_EQ(a.host_ptr, nullptr);
  EXPECT_EQ(a.bytes, 1000u);
  auto ops = rig.bufs->ops();
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].what, "allocate");
  EXPECT_EQ(ops[0].bank, 1u);

  std::vector<int> in(32), out(32);
  for (int i = 0; i < 32; ++i) in[i] = i * 7;
  rig.dev->copy_to_device(a.address + 16, in.data(), in.size() * sizeof(int));
  rig.dev->copy_from_device(a.address + 16, out.data(), out.size() * sizeof(int));
  EXPECT_EQ(in, out);
  ops = rig.bufs->ops();
  EXPECT_EQ(ops[1].what, "write");
  EXPECT_EQ(ops[1].offset, 16u);
  EXPECT_EQ(ops[1].bytes, 128u);
  EXPECT_EQ(ops[2].what, "read");

  // Past the end, or nowhere: refused, never a stray DMA.
  EXPECT_THROW(rig.dev->copy_to_device(a.address + 900, in.data(), 128), hw::HwError);
  EXPECT_THROW(rig.dev->copy_from_device(0x42, out.data(), 4), hw::HwError);
  rig.dev->free(a);
  EXPECT_EQ(rig.bufs->live(), 0u);
  EXPECT_THROW(rig.dev->copy_to_device(a.address, in.data(), 4), hw::HwError);
  rig.dev->free(a);  // unknown: warns, never throws (runs from destructors)
}

TEST(HwDevice, HostOnlyBuffersAreDirectHostMemory) {
  Rig rig;
  DeviceAllocation h = rig.dev->allocate(256, MemoryKind::host_only, 0);
  ASSERT_NE(h.host_ptr, nullptr);
  EXPECT_EQ(h.kind, MemoryKind::host_only);
  const char msg[] = "host only";
  rig.dev->copy_to_device(h.address + 8, msg, sizeof(msg));
  EXPECT_STREQ(static_cast<const char*>(h.host_ptr) + 8, msg);
  for (const auto& op : rig.bufs->ops()) EXPECT_NE(op.what, "write") << "host memory needs no runtime copy";
  rig.dev->free(h);
  EXPECT_EQ(rig.bufs->live(), 0u);
}

TEST(HwDevice, MapHostWidensToPagesAndKeepsTheOffset) {
  Rig rig;
  alignas(4096) static unsigned char user[3 * 4096];
  unsigned char* p = user + 100;
  DeviceAllocation m = rig.dev->allocate(0, MemoryKind::device, 0);  // zero bytes still get a buffer
  rig.dev->free(m);
  DeviceAllocation a = rig.dev->map_host(p, 5000);
  auto ops = rig.bufs->ops();
  const auto& map = ops.back();
  ASSERT_EQ(map.what, "map_user");
  EXPECT_EQ(map.ptr, user);
  EXPECT_EQ(map.bytes, 8192u) << "bytes 100..5100 span two pages";
  EXPECT_EQ(a.host_ptr, p);
  EXPECT_EQ(a.address, (reinterpret_cast<uintptr_t>(user) ^ (uint64_t{1} << 60)) + 100);
  // Copies through the mapping land in the user's memory.
  rig.dev->copy_to_device(a.address + 10, "xyz", 3);
  EXPECT_EQ(std::memcmp(p + 10, "xyz", 3), 0);
  // The same memory mapped twice: two mappings, each freed on its own.
  DeviceAllocation b = rig.dev->map_host(p, 5000);
  EXPECT_EQ(b.address, a.address);
  rig.dev->free(a);
  rig.dev->free(b);
  EXPECT_EQ(rig.bufs->live(), 0u);
}

}  // namespace hwtest
