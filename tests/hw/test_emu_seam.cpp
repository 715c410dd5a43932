// SPDX-License-Identifier: Apache-2.0
//
// The hardware backend over an emulated CCLO: the seam (RegisterPort /
// BufferPort) implemented on emu::create_device's read/write/start and
// memory calls, with the hostctrl register path of models.hpp in between.
// The whole driver then runs on CcloDevice exactly as it would on a card:
// its calls are encoded into hostctrl arguments, decoded by the register
// model into the 15 words the emulated firmware executes, and results come
// back through RETCODE (0x1FFC) and PERFCNT (0x1FF0), never through the
// emulator's own result().
#include "models.hpp"

#include <accl/accl.hpp>
#include <accl_emu/emulator.hpp>
#include <accl_hw/cclo_device.hpp>
#include <accl_hw/hostctrl.hpp>

#include <gtest/gtest.h>

#include <barrier>
#include <exception>
#include <thread>

using namespace std::chrono_literals;
namespace hw = accl::hw;

// Inside hwtest: its `abi` alias (accl::abi) hides the global `abi` of <cxxabi.h>.
namespace hwtest {

namespace {

class EmuRegisterPort : public hw::RegisterPort {
 public:
  explicit EmuRegisterPort(std::shared_ptr<accl::Device> emu) : emu_(std::move(emu)) {}
  uint32_t read32(uint32_t offset) override { return emu_->read(offset); }
  void write32(uint32_t offset, uint32_t value) override { emu_->write(offset, value); }
  void start_kernel(const hw::HostCtrlArgs& args) override {
    std::lock_guard lk(mu_);
    last_words_ = hwtest::hostctrl_stream(args, regs_);
    id_ = emu_->start(last_words_, {});
  }
  hw::RunStatus wait_kernel(std::chrono::milliseconds timeout) override {
    if (!emu_->wait(id_, timeout)) return {hw::RunState::pending, ""};
    std::lock_guard lk(mu_);
    // Kept only so tests can compare it with what came back through the registers.
    emu_results_.push_back(emu_->result(id_));
    emu_->release(id_);
    return {hw::RunState::done, ""};
  }
  std::vector<accl::CallResult> emu_results() {
    std::lock_guard lk(mu_);
    return emu_results_;
  }

 private:
  std::shared_ptr<accl::Device> emu_;
  std::mutex mu_;
  std::map<uint32_t, uint32_t> regs_;
  accl::CallWords last_words_;
  accl::CallId id_ = 0;
  std::vector<accl::CallResult> emu_results_;
};

class EmuBufferPort : public hw::BufferPort {
 public:
  explicit EmuBufferPort(std::shared_ptr<accl::Device> emu) : emu_(std::move(emu)) {}
  hw::PortBuffer allocate(size_t bytes, accl::MemoryKind kind, unsigned bank) override {
    return keep(emu_->allocate(bytes, kind, bank));
  }
  hw::PortBuffer map_user(void* ptr, size_t bytes) override { return keep(emu_->map_host(ptr, bytes)); }
  void release(uint64_t handle) override {
    std::lock_guard lk(mu_);
    emu_->free(allocs_.at(handle));
    allocs_.erase(handle);
  }
  void write(uint64_t handle, size_t offset, const void* src, size_t bytes) override {
    emu_->copy_to_device(address(handle) + offset, src, bytes);
  }
  void read(uint64_t handle, size_t offset, void* dst, size_t bytes) override {
    emu_->copy_from_device(address(handle) + offset, dst, bytes);
  }

 private:
  hw::PortBuffer keep(const accl::DeviceAllocation& a) {
    std::lock_guard lk(mu_);
    hw::PortBuffer pb{next_++, a.address, a.host_ptr, a.bytes};
    allocs_.emplace(pb.handle, a);
    return pb;
  }
  uint64_t address(uint64_t handle) {
    std::lock_guard lk(mu_);
    return allocs_.at(handle).address;
  }
  std::shared_ptr<accl::Device> emu_;
  std::mutex mu_;
  std::map<uint64_t, accl::DeviceAllocation> allocs_;
  uint64_t next_ = 1;
};

struct EmuCard {
  std::shared_ptr<accl::Device> emu;
  EmuRegisterPort* regs = nullptr;
  std::unique_ptr<accl::Device> dev;  // CcloDevice: the hardware backend

  EmuCard() {
    accl::emu::EmuOptions o;
    o.transport = accl::emu::TransportKind::inproc;
    emu = accl::emu::create_device(o);
    auto r = std::make_unique<EmuRegisterPort>(emu);
    regs = r.get();
    hw::CcloDeviceOptions co;
    co.description = "emulated CCLO behind the hostctrl register model";
    co.poll_slice = 10ms;
    dev = hw::make_cclo_device(std::move(r), std::make_unique<EmuBufferPort>(emu), co);
  }
  accl::rank_t rank(int i) const {
    auto ep = accl::emu::endpoint(*emu);
    accl::rank_t r;
    r.ip = ep.ip;
    r.port = ep.port;
    r.session_id = i;
    return r;
  }
};

}  // namespace

TEST(HwEmuSeam, RetcodeAndDurationComeThroughTheRegisters) {
  EmuCard card;
  accl::CallWords nop;
  nop[abi::kWordScenario] = abi::kNop;
  auto id = card.dev->start(nop, {});
  ASSERT_TRUE(card.dev->wait(id, 10s));
  auto r = card.dev->result(id);
  card.dev->release(id);
  auto emu = card.regs->emu_results();
  ASSERT_EQ(emu.size(), 1u);
  EXPECT_EQ(r.retcode, emu[0].retcode);
  EXPECT_EQ(r.retcode, 0u);
  // PERFCNT holds 250 MHz cycles: the duration survives within one cycle.
  EXPECT_LE(r.duration_ns, emu[0].duration_ns);
  EXPECT_LT(emu[0].duration_ns - r.duration_ns, 4u);

  // A call the firmware rejects: its error bits arrive through RETCODE.
  accl::CallWords bad;
  bad[abi::kWordScenario] = 77;
  id = card.dev->start(bad, {});
  ASSERT_TRUE(card.dev->wait(id, 10s));
  r = card.dev->result(id);
  emu = card.regs->emu_results();
  ASSERT_EQ(emu.size(), 2u);
  EXPECT_NE(r.retcode, 0u);
  EXPECT_EQ(r.retcode, emu[1].retcode);
}

TEST(HwEmuSeam, DriverRunsOnTheHardwareBackend) {
  constexpr int kRanks = 2;
  std::vector<std::unique_ptr<EmuCard>> cards;
  std::vector<accl::rank_t> ranks;
  for (int i = 0; i < kRanks; ++i) {
    cards.push_back(std::make_unique<EmuCard>());
    ranks.push_back(cards.back()->rank(i));
  }
  std::vector<std::unique_ptr<accl::ACCL>> world;
  for (auto& c : cards) world.push_back(std::make_unique<accl::ACCL>(std::move(c->dev)));

  constexpr unsigned kCount = 3000;  // several RX buffers' worth: segmentation and rendezvous both run
  std::vector<std::exception_ptr> errors(kRanks);
  std::vector<std::thread> threads;
  // As in any ACCL job (MPI programs barrier after initialize): a rank that
  // sends before its peer's initialize has soft-reset the peer's CCLO loses
  // those messages to the reset, and the peer's allreduce then fails on the
  // sequence gap.
  std::barrier initialized(kRanks);
  for (int i = 0; i < kRanks; ++i) {
    threads.emplace_back([&, i] {
      try {
        accl::ACCL& a = *world[i];
        try {
          a.initialize(ranks, i, 16, 1024, 1024, 32 * 1024);
        } catch (...) {
          initialized.arrive_and_drop();
          throw;
        }
        initialized.arrive_and_wait();
        EXPECT_FALSE(a.is_simulated()) << "the driver sees the xrt backend";
        auto src = a.create_buffer<float>(kCount);
        auto dst = a.create_buffer<float>(kCount);
        for (unsigned k = 0; k < kCount; ++k) (*src)[k] = static_cast<float>(k + i);
        a.allreduce(*src, *dst, kCount, accl::reduceFunction::SUM);
        for (unsigned k = 0; k < kCount; ++k) ASSERT_EQ((*dst)[k], static_cast<float>(2 * k + 1)) << "element " << k;
        // Chaining through the backend: B waits for A host-side.
        auto one = a.create_buffer<float>(16);
        auto two = a.create_buffer<float>(16);
        for (unsigned k = 0; k < 16; ++k) (*one)[k] = static_cast<float>(k);
        auto ra = a.copy(*one, *two, 16, false, true, true);  // one is synced to the device at issue
        for (unsigned k = 0; k < 16; ++k) (*one)[k] = 0;        // so this only changes the host copy
        auto rb = a.copy(*two, *one, 16, true, false, true, {ra});
        a.wait(rb);
        for (unsigned k = 0; k < 16; ++k) EXPECT_EQ((*one)[k], static_cast<float>(k));
        // Firmware errors are raised: a receive nobody sends ends in a timeout.
        a.set_timeout(std::chrono::milliseconds(200));
        auto lost = a.create_buffer<float>(4);
        EXPECT_THROW(a.recv(*lost, 4, 1 - i, 4242), accl::Error);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  world.clear();
}

}  // namespace hwtest
