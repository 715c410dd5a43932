// SPDX-License-Identifier: Apache-2.0
//
// The simulator-session device against a stand-in session written here from
// the protocol's description (REP socket, JSON requests 0-6): no public ACCL
// build needed. It checks what cclo_emu cannot show cheaply: the addresses the
// device picks (from 0 in 4 KiB steps, freed ranges reused), byte arrays with
// cclo_emu's signed bytes and beyond one 64 KiB request, host-only buffers
// pushed before and pulled after a call, and a session that stops answering.
// It also opens the device through the factory (ACCL_DEVICE=sim), as the PMPI
// layer and pyaccl do, and checks where peers are told to find it.
// The stand-in's "firmware" finishes every call on the second wait request;
// a copy call (scenario 1) copies count x 4 bytes from operand 0 to the result.
#include "scoped_env.hpp"

#include <accl/accl.hpp>
#include <accl_devices/devices.hpp>
#include <accl_hw/sim.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

namespace {

namespace hw = accl::hw;
using json = nlohmann::json;
using namespace std::chrono_literals;

class FakeSession {
 public:
  FakeSession() : socket_(context_, zmq::socket_type::rep) {
    socket_.set(zmq::sockopt::rcvtimeo, 20);
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:*");
    address_ = socket_.get(zmq::sockopt::last_endpoint);
    server_ = std::thread([this] { serve(); });
  }
  ~FakeSession() {
    stop_ = true;
    server_.join();
  }
  const std::string& address() const { return address_; }
  void mute() { mute_ = true; }  // requests are received and never answered
  std::vector<json> allocations() {
    std::lock_guard lk(mu_);
    return allocations_;
  }

 private:
  std::vector<uint8_t>& space(bool host) { return host ? host_mem_ : device_mem_; }

  json handle(const json& rq) {
    std::lock_guard lk(mu_);
    json reply = {{"status", 0}};
    const auto addr = rq.value("addr", uint64_t{0});
    switch (rq.at("type").get<int>()) {
      case 0: reply["rdata"] = regs_[static_cast<uint32_t>(addr)]; break;
      case 1: regs_[static_cast<uint32_t>(addr)] = rq.at("wdata").get<uint32_t>(); break;
      case 2: {
        auto& mem = space(rq.at("host").get<bool>());
        const auto len = rq.at("len").get<size_t>();
        if (addr + len > mem.size()) return {{"status", 1}};
        json bytes = json::array();
        // As cclo_emu: bytes leave as signed chars.
        for (size_t i = 0; i < len; ++i) bytes.push_back(static_cast<int8_t>(mem[addr + i]));
        reply["rdata"] = std::move(bytes);
        break;
      }
      case 3: {
        auto& mem = space(rq.at("host").get<bool>());
        const auto& data = rq.at("wdata");
        if (addr + data.size() > mem.size()) mem.resize(addr + data.size());
        for (size_t i = 0; i < data.size(); ++i) mem[addr + i] = data[i].get<uint8_t>();
        break;
      }
      case 4: {
        auto& mem = space(rq.at("host").get<bool>());
        mem.resize(std::max<size_t>(mem.size(), addr + rq.at("len").get<size_t>()));
        allocations_.push_back(rq);
        break;
      }
      case 5: {
        polls_left_ = 2;
        if (rq.at("scenario").get<int>() == accl::abi::kCopy) {
          const uint32_t host = rq.at("stream_flags").get<uint32_t>() >> 8;
          auto& src = space(host & accl::abi::kOp0Host);
          auto& dst = space(host & accl::abi::kResHost);
          const auto from = rq.at("addr_0").get<uint64_t>(), to = rq.at("addr_2").get<uint64_t>();
          for (uint64_t i = 0; i < rq.at("count").get<uint64_t>() * 4; ++i) dst.at(to + i) = src.at(from + i);
        }
        regs_[accl::abi::kRetcodeOffset] = 0;
        break;
      }
      case 6: reply["status"] = --polls_left_ > 0 ? 1 : 0; break;
      default: reply["status"] = -1;
    }
    return reply;
  }

  void serve() {
    while (!stop_) {
      zmq::message_t message;
      if (!socket_.recv(message, zmq::recv_flags::none)) continue;
      if (mute_) {
        while (!stop_) std::this_thread::sleep_for(5ms);
        return;
      }
      const std::string reply = handle(json::parse(message.to_string())).dump();
      socket_.send(zmq::buffer(reply), zmq::send_flags::none);
    }
  }

  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string address_;
  std::thread server_;
  std::atomic<bool> stop_{false}, mute_{false};
  std::mutex mu_;
  std::map<uint32_t, uint32_t> regs_;
  std::vector<uint8_t> device_mem_, host_mem_;
  std::vector<json> allocations_;
  int polls_left_ = 0;
};

std::unique_ptr<accl::Device> connect(const FakeSession& fake, std::chrono::milliseconds timeout = 5s) {
  hw::SimOptions o;
  o.address = fake.address();
  o.reply_timeout = timeout;
  return hw::make_sim_device(o);
}

TEST(SimProtocol, DeviceAddressesStartAtZeroInPagesAndFreedRangesAreReused) {
  FakeSession fake;
  auto dev = connect(fake);
  const auto a = dev->allocate(100, accl::MemoryKind::device, 0);
  const auto b = dev->allocate(5000, accl::MemoryKind::device, 0);
  const auto c = dev->allocate(10, accl::MemoryKind::device, 0);
  EXPECT_EQ(a.address, 0u);
  EXPECT_EQ(b.address, 4096u);
  EXPECT_EQ(c.address, 3u * 4096);
  dev->free(b);
  EXPECT_EQ(dev->allocate(4096, accl::MemoryKind::device, 0).address, 4096u);
  EXPECT_EQ(dev->allocate(1, accl::MemoryKind::device, 0).address, 2u * 4096);
  const auto allocs = fake.allocations();
  ASSERT_EQ(allocs.size(), 5u);
  EXPECT_EQ(allocs[1], json({{"type", 4}, {"addr", 4096}, {"len", 5000}, {"host", false}}));
  EXPECT_THROW(dev->allocate(64, accl::MemoryKind::device, 1), hw::SimError);
}

TEST(SimProtocol, BytesRoundTripBeyondOneRequestWithSignedBytes) {
  FakeSession fake;
  auto dev = connect(fake);
  std::vector<uint8_t> out(150 * 1024), in(out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 37 + 11);
  const auto buf = dev->allocate(out.size(), accl::MemoryKind::device, 0);
  dev->copy_to_device(buf.address, out.data(), out.size());
  dev->copy_from_device(buf.address, in.data(), in.size());
  EXPECT_EQ(in, out);
}

TEST(SimProtocol, HostOnlyBuffersArePushedBeforeAndPulledAfterACall) {
  FakeSession fake;
  accl::ACCL accl(connect(fake));
  accl.initialize({{"127.0.0.1", 5500, 0, 0}}, 0, 2, 1024, 1024, 4096);
  std::vector<int32_t> user(64, -1);
  auto src = accl.create_buffer_host<int32_t>(64);
  auto dst = accl.create_buffer_host<int32_t>(user.data(), 64);
  auto dev_dst = accl.create_buffer<int32_t>(64);
  for (int i = 0; i < 64; ++i) (*src)[i] = i * 1000 - 7;
  accl.copy(*src, *dst, 64);
  accl.copy(*src, *dev_dst, 64);
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(user[i], i * 1000 - 7) << i;
    EXPECT_EQ((*dev_dst)[i], i * 1000 - 7) << i;
  }
}

TEST(SimProtocol, ASessionThatStopsAnsweringFailsEveryRequestByName) {
  FakeSession fake;
  auto dev = connect(fake, 300ms);
  EXPECT_EQ(dev->read(accl::abi::kHwIdOffset), 0u);
  fake.mute();
  const auto start = std::chrono::steady_clock::now();
  try {
    dev->write(0x4, 1);
    FAIL() << "no error";
  } catch (const hw::SimError& e) {
    EXPECT_EQ(std::string(e.what()), "simulator session at " + fake.address() +
                                         ": no reply to an MMIO write of 0x1 to 0x4 within 300 ms "
                                         "(ACCL_SIM_REPLY_TIMEOUT_MS)");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  try {
    dev->read(0x0);
    FAIL() << "no error";
  } catch (const hw::SimError& e) {
    EXPECT_NE(std::string(e.what()).find("stopped answering earlier"), std::string::npos) << e.what();
  }
}

TEST(SimProtocol, TheFactoryOpensASessionInstanceAsPublicAcclAddressesIt) {
  FakeSession fake;
  accl::test::ScopedEnv kind("ACCL_DEVICE", "sim");
  accl::test::ScopedEnv address("ACCL_SIM_ADDRESS", fake.address().c_str());
  ASSERT_EQ(accl::devices::selected(), accl::devices::Kind::sim);
  EXPECT_STREQ(accl::devices::to_string(accl::devices::Kind::sim), "sim");
  accl::devices::Request request;
  request.kind = accl::devices::selected();
  request.rank = 0;
  request.size = 2;
  accl::devices::Opened opened = accl::devices::open(request);
  ASSERT_NE(opened.device, nullptr);
  EXPECT_EQ(opened.device->name(), "sim");
  // Rank r: 127.0.0.1, port P+r, session id r (public ACCL's generate_ranks
  // in sim mode).
  const hw::SimAddress rank0 = hw::parse_sim_address(fake.address());
  EXPECT_EQ(opened.ip, "127.0.0.1");
  EXPECT_EQ(opened.port, static_cast<int>(rank0.port));
  EXPECT_EQ(opened.session_ids, (std::vector<int>{0, 1}));

  // Rank 1's instance is not there: a named error, and the request's
  // address wins over ACCL_SIM_ADDRESS.
  request.rank = 1;
  request.sim_address = fake.address();
  try {
    accl::devices::open(request);
    FAIL() << "no error";
  } catch (const hw::SimError& e) {
    const std::string rank1 = "tcp://127.0.0.1:" + std::to_string(rank0.port + 1);
    EXPECT_EQ(std::string(e.what()).find("no simulator session at " + rank1 + ": "), 0u) << e.what();
  }
}

}  // namespace
