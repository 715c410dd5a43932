// SPDX-License-Identifier: Apache-2.0
//
// Shared-memory transport, direct writes: a receiver that offers a window
// with its grant gets the payload of that window's data message written
// straight into it by the sender (process_vm_writev), and the ring carries
// the header alone. Anything else (no grant, another size, a payload that
// is not a plain copy, a grant voided by the receiver's fence, a small
// window) goes through the ring as before.
#include "transport_test_util.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <thread>

namespace accl::emu::test {
namespace {

class ShmDirect : public ::testing::TestWithParam<bool> {};

constexpr uint32_t kWindowBytes = 3u << 20;  // more than one process_vm_writev piece
constexpr uint32_t kCtx = 0x2B;
constexpr uint32_t kRid = 77;
constexpr uint64_t kVaddr = 0x5000;

// A receiver with one rendezvous window (the ReceiveSink's part in miniature):
// it offers the window for grants that name it, hands it to the matching
// data message once, and records everything that arrives.
class WindowSink final : public Sink {
 public:
  explicit WindowSink(size_t bytes) : window(bytes) {}

  std::byte* direct_window(const NetAddress&, const abi::WireHeader& grant, size_t& bytes) override {
    if (!offer || grant.rid != kRid || grant.vaddr != kVaddr) return nullptr;
    offered++;
    bytes = window.size();
    return window.data();
  }
  std::byte* begin_message(const NetAddress&, const abi::WireHeader& h, ReceiveTicket& t) override {
    if (h.msg_type != abi::kMsgRendezvousData) return h.count == 0 ? window.data() : nullptr;
    // One window, one transfer; a closed window takes nothing. Like a user
    // buffer, the window is ours only while its lease holds.
    if (!open.exchange(false) || h.count != window.size()) return nullptr;
    t.lease = lease;
    return window.data();
  }
  // The receive failed (close_window): the window is closed and its lease
  // revoked, then direct writes are fenced.
  void take_back(Transport& receiver) {
    open = false;
    ASSERT_TRUE(lease->revoke(std::chrono::steady_clock::now() + 5s));
    ASSERT_TRUE(receiver.fence_direct_writes());
  }
  // Drops what was recorded so far.
  void forget() {
    std::lock_guard lock(mutex_);
    headers_.clear();
    statuses_.clear();
  }
  // The next receive's window.
  void reopen() {
    lease->rearm();
    open = true;
  }
  void end_message(const NetAddress&, const abi::WireHeader& h, ReceiveTicket&, uint32_t status) override {
    std::lock_guard lock(mutex_);
    headers_.push_back(h);
    statuses_.push_back(status);
    cv_.notify_all();
  }
  void link_failed(const NetAddress&, uint32_t) override {}

  bool wait_messages(size_t n) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, 5s, [&] { return headers_.size() >= n; });
  }
  abi::WireHeader header(size_t i) {
    std::lock_guard lock(mutex_);
    return headers_.at(i);
  }
  uint32_t status(size_t i) {
    std::lock_guard lock(mutex_);
    return statuses_.at(i);
  }

  std::vector<std::byte> window;
  std::atomic<bool> offer{true};
  std::atomic<bool> open{true};
  std::atomic<int> offered{0};
  const std::shared_ptr<WriteLease> lease = std::make_shared<WriteLease>();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<abi::WireHeader> headers_;
  std::vector<uint32_t> statuses_;
};

// A plain copy of a buffer of this process (what the data plane's plain
// moves are), counting the bytes a transport had it produce itself.
class BufferWriter final : public PayloadWriter {
 public:
  BufferWriter(uint32_t seed, size_t bytes, bool contiguous) : data_(bytes), contiguous_(contiguous) {
    fill_pattern(data_.data(), seed, 0, bytes);
  }
  uint32_t write(std::byte* dst, size_t offset, size_t bytes) override {
    produced += bytes;
    std::memcpy(dst, data_.data() + offset, bytes);
    return 0;
  }
  const std::byte* contiguous_source(size_t bytes) const override {
    return contiguous_ && bytes == data_.size() ? data_.data() : nullptr;
  }
  size_t produced = 0;

 private:
  std::vector<std::byte> data_;
  bool contiguous_;
};

abi::WireHeader rendezvous(uint8_t type, uint32_t count, uint32_t msg_bytes) {
  abi::WireHeader h{};
  h.msg_type = type;
  h.count = count;
  h.msg_bytes = msg_bytes;
  h.ctx = kCtx;
  h.rid = kRid;
  h.vaddr = kVaddr;
  h.host = 1;
  h.seqn = 1;
  return h;
}

// The data sender and the receiver, each with the links of one direction.
// `shared`: whether the receiver helps copy (ACCL_EMU_SHM_SHARED_COPY).
struct Pair {
  // `receiver_direct_min`: the receiver's threshold when it differs from the sender's.
  explicit Pair(bool shared, size_t direct_min = 64 << 10, size_t window = kWindowBytes,
                std::optional<size_t> receiver_direct_min = std::nullopt)
      : receiver_sink(window) {
    ShmTuning tuning;
    tuning.share_copies = shared;
    tuning.direct_min_bytes = direct_min;
    sender = make_shm_transport(options(), tuning);
    tuning.direct_min_bytes = receiver_direct_min.value_or(direct_min);
    receiver = make_shm_transport(options(), tuning);
    sender->start(sender_sink);
    receiver->start(receiver_sink);
    data_link = sender->connect(receiver->local_address(), in(5000ms));
    grant_link = receiver->connect(sender->local_address(), in(5000ms));
    // A link shares copies once a plain direct write to that peer worked:
    // one transfer first, then the test starts from a clean window.
    if (shared && window >= direct_min && receiver_direct_min.value_or(direct_min) != 0 && direct_min != 0) {
      grant(static_cast<uint32_t>(window));
      send_data(1, static_cast<uint32_t>(window));
      std::fill(receiver_sink.window.begin(), receiver_sink.window.end(), std::byte{0});
      receiver_sink.forget();
      receiver_sink.reopen();
      receiver_sink.offered = 0;
      data = 0;
    }
  }
  ~Pair() {
    data_link.reset();
    grant_link.reset();
    sender->stop();
    receiver->stop();
  }
  // The receiver grants its window; the sender has recorded the grant once
  // it was delivered.
  void grant(uint32_t msg_bytes = kWindowBytes) {
    PatternWriter none(0, 0);
    ASSERT_EQ(grant_link->send(rendezvous(abi::kMsgRendezvousAddr, 0, msg_bytes), none, in(5000ms)), 0u);
    ASSERT_TRUE(sender_sink.wait_messages(++grants, 5000ms));
    const Received g = sender_sink.messages().back();
    EXPECT_EQ(g.header.msg_type, abi::kMsgRendezvousAddr);
    EXPECT_EQ(g.header.flags, 0u) << "the grant arrives as sent (the frame marker cleared)";
  }
  // Sends the data message; returns the bytes the sender produced itself.
  size_t send_data(uint32_t seed, uint32_t count, bool contiguous = true) {
    BufferWriter w(seed, count, contiguous);
    return send_data(w, count);
  }
  size_t send_data(BufferWriter& w, uint32_t count) {
    EXPECT_EQ(data_link->send(rendezvous(abi::kMsgRendezvousData, count, count), w, in(5000ms)), 0u);
    EXPECT_TRUE(receiver_sink.wait_messages(++data));
    return w.produced;
  }

  RecordingSink sender_sink;
  WindowSink receiver_sink;
  std::unique_ptr<Transport> sender, receiver;
  std::shared_ptr<Link> data_link, grant_link;
  size_t grants = 0, data = 0;
};

bool window_holds(const std::vector<std::byte>& window, uint32_t seed) {
  return check_pattern(window, seed) == std::string::npos;
}

TEST_P(ShmDirect, AGrantedWindowGetsThePayloadWithoutTheRing) {
  Pair p(GetParam());
  p.grant();
  EXPECT_EQ(p.receiver_sink.offered.load(), 1);
  EXPECT_EQ(p.send_data(5, kWindowBytes), 0u) << "the sender wrote the window itself, not through its ring";
  const abi::WireHeader h = p.receiver_sink.header(0);
  EXPECT_EQ(h.msg_type, abi::kMsgRendezvousData);
  EXPECT_EQ(h.count, kWindowBytes);
  EXPECT_EQ(h.flags, 0u) << "the header arrives as sent";
  EXPECT_EQ(p.receiver_sink.status(0), 0u);
  EXPECT_TRUE(window_holds(p.receiver_sink.window, 5));

  // The grant was used up: the next data message for that window goes
  // through the ring (and the sink, whose window is closed, drops it).
  EXPECT_EQ(p.send_data(6, kWindowBytes), kWindowBytes);
  EXPECT_TRUE(window_holds(p.receiver_sink.window, 5)) << "nothing landed in the closed window";
}

TEST_P(ShmDirect, AFenceVoidsTheGrantsIssuedBeforeIt) {
  Pair p(GetParam());
  p.grant();
  // The receive failed: the sink takes the window back, fencing.
  p.receiver_sink.take_back(*p.receiver);
  // Alone, the sender sends a voided grant's payload through the ring; with
  // the receiver copying, it hands its chunks to the receiver, whose sink
  // takes nothing for a closed window. Either way the sink drops it.
  EXPECT_EQ(p.send_data(5, kWindowBytes), GetParam() ? 0u : kWindowBytes);
  EXPECT_EQ(std::count(p.receiver_sink.window.begin(), p.receiver_sink.window.end(), std::byte{0}),
            static_cast<std::ptrdiff_t>(kWindowBytes))
      << "no byte landed in the window taken back";
  // Grants after the fence hold again.
  p.receiver_sink.reopen();
  p.grant();
  EXPECT_EQ(p.send_data(9, kWindowBytes), 0u);
  EXPECT_TRUE(window_holds(p.receiver_sink.window, 9));
}

// A fence for another window voids the grant of a window that is still
// open: its payload must still arrive whole (through the ring when the
// sender copies alone, read by the receiver when it helps).
TEST_P(ShmDirect, AFenceForAnotherWindowLosesNothing) {
  Pair p(GetParam());
  p.grant();
  ASSERT_TRUE(p.receiver->fence_direct_writes());
  EXPECT_EQ(p.send_data(5, kWindowBytes), GetParam() ? 0u : kWindowBytes);
  EXPECT_EQ(p.receiver_sink.status(0), 0u);
  EXPECT_TRUE(window_holds(p.receiver_sink.window, 5));
}

// The race the gate and the lease exist for: the receive fails (the sink
// closes the window, revokes its lease, then fences) while the payload is
// being copied into it. Whatever the window holds once that returned must
// stay: no piece may land afterwards, whether the copy had ended, was cut
// off between pieces, or had not begun.
TEST_P(ShmDirect, NothingLandsAfterTheFenceReturned) {
  Pair p(GetParam());
  std::minstd_rand random(7);
  int cut_short = 0;
  for (uint32_t round = 0; round < 60; ++round) {
    std::fill(p.receiver_sink.window.begin(), p.receiver_sink.window.end(), std::byte{0});
    p.receiver_sink.reopen();
    p.grant();
    const auto delay = std::chrono::microseconds(random() % 300);
    BufferWriter payload(100 + round, kWindowBytes, true);  // made before the race starts
    std::vector<std::byte> after_fence;
    std::thread receiver([&] {
      std::this_thread::sleep_for(delay);
      p.receiver_sink.take_back(*p.receiver);
      after_fence = p.receiver_sink.window;
    });
    const size_t produced = p.send_data(payload, kWindowBytes);
    receiver.join();
    if (produced != 0 || !window_holds(after_fence, 100 + round)) ++cut_short;
    ASSERT_EQ(after_fence, p.receiver_sink.window) << "round " << round << ": bytes landed after the fence";
  }
  // Not asserted (timing), but worth seeing when the test is changed.
  std::printf("copies cut short by the fence: %d of 60\n", cut_short);
}

// While a peer writes a payload straight into one of our windows, the
// receiving transport says so (Transport::peer_writing): a host thread
// waiting for that payload counts it as progress instead of blocking
// (EmuDevice::drive_until). Before and after the write it says no.
TEST_P(ShmDirect, TheReceiverSeesAPeerWritingIntoItsWindow) {
  constexpr uint32_t kLarge = 64u << 20;  // 64 pieces: milliseconds of writing
  Pair p(GetParam(), 64 << 10, kLarge);
  EXPECT_FALSE(p.receiver->peer_writing());
  bool seen = false;
  // A watcher on another thread may miss one write on a loaded machine; five
  // in a row it does not.
  for (uint32_t round = 0; round < 5 && !seen; ++round) {
    p.receiver_sink.reopen();
    p.grant(kLarge);
    BufferWriter payload(40 + round, kLarge, true);
    std::atomic<bool> sent{false};
    std::thread watcher([&] {
      while (!sent.load(std::memory_order_acquire) && !seen) seen = p.receiver->peer_writing();
    });
    EXPECT_EQ(p.send_data(payload, kLarge), 0u) << "the payload went through the ring";
    sent.store(true, std::memory_order_release);
    watcher.join();
    EXPECT_TRUE(window_holds(p.receiver_sink.window, 40 + round));
  }
  EXPECT_TRUE(seen) << "no direct write was seen under way";
  EXPECT_FALSE(p.receiver->peer_writing()) << "the write is over";
}

TEST_P(ShmDirect, OtherPayloadsGoThroughTheRing) {
  {
    Pair p(GetParam());  // not a plain copy of one buffer (arithmetic or conversion)
    p.grant();
    EXPECT_EQ(p.send_data(5, kWindowBytes, /*contiguous=*/false), kWindowBytes);
    EXPECT_TRUE(window_holds(p.receiver_sink.window, 5));
  }
  {
    Pair p(GetParam());  // not the size granted: the sink, not the sender, decides what fits
    p.grant();
    EXPECT_EQ(p.send_data(5, kWindowBytes - 4096), kWindowBytes - 4096);
    EXPECT_EQ(std::count(p.receiver_sink.window.begin(), p.receiver_sink.window.end(), std::byte{0}),
              static_cast<std::ptrdiff_t>(kWindowBytes));
  }
  {
    Pair p(GetParam(), /*direct_min=*/kWindowBytes + 1);  // a window below the threshold is not even offered
    p.grant();
    EXPECT_EQ(p.receiver_sink.offered.load(), 0);
    EXPECT_EQ(p.send_data(5, kWindowBytes), kWindowBytes);
    EXPECT_TRUE(window_holds(p.receiver_sink.window, 5));
  }
  {
    Pair p(GetParam());  // the sink does not offer the window (e.g. it reduces on landing)
    p.receiver_sink.offer = false;
    p.grant();
    EXPECT_EQ(p.send_data(5, kWindowBytes), kWindowBytes);
    EXPECT_TRUE(window_holds(p.receiver_sink.window, 5));
  }
  {
    Pair p(GetParam(), /*direct_min=*/0);  // direct writes off
    p.grant();
    EXPECT_EQ(p.receiver_sink.offered.load(), 0);
    EXPECT_EQ(p.send_data(5, kWindowBytes), kWindowBytes);
    EXPECT_TRUE(window_holds(p.receiver_sink.window, 5));
  }
}

// Each process decides on direct writes for itself (the default measures
// this host's copies), so two peers may differ: a payload then goes through
// the ring, whichever side declined, and arrives intact.
TEST_P(ShmDirect, PeersThatDisagreeUseTheRing) {
  {
    Pair p(GetParam(), /*direct_min=*/0, kWindowBytes, /*receiver_direct_min=*/64 << 10);  // the sender declines
    p.grant();
    EXPECT_EQ(p.receiver_sink.offered.load(), 1) << "the receiver offered its window";
    EXPECT_EQ(p.send_data(5, kWindowBytes), kWindowBytes);
    EXPECT_TRUE(window_holds(p.receiver_sink.window, 5));
    p.receiver_sink.reopen();  // the next receive's window
    p.grant();
    EXPECT_EQ(p.send_data(6, kWindowBytes), kWindowBytes) << "and again for the next grant";
    EXPECT_TRUE(window_holds(p.receiver_sink.window, 6));
  }
  {
    Pair p(GetParam(), /*direct_min=*/64 << 10, kWindowBytes, /*receiver_direct_min=*/0);  // the receiver offers nothing
    p.grant();
    EXPECT_EQ(p.receiver_sink.offered.load(), 0);
    EXPECT_EQ(p.send_data(5, kWindowBytes), kWindowBytes);
    EXPECT_TRUE(window_holds(p.receiver_sink.window, 5));
  }
}

// Shared copies split the payload in 128 KiB chunks, the sender's runs of
// them from the front, the receiver's from the back: every size arrives
// whole, whether it is one chunk or less, a whole number of them or not.
TEST_P(ShmDirect, PayloadsOfEverySizeArriveWhole) {
  for (const uint32_t bytes : {64u << 10, 128u << 10, (128u << 10) + 64, (1u << 20) - 4, 1u << 20, (5u << 20) + 100}) {
    Pair p(GetParam(), 64 << 10, bytes);
    for (uint32_t round = 0; round < 4; ++round) {
      p.receiver_sink.reopen();
      p.grant(bytes);
      EXPECT_EQ(p.send_data(7 * round + bytes, bytes), 0u) << bytes << " bytes: the payload took the ring";
      EXPECT_EQ(p.receiver_sink.status(round), 0u);
      EXPECT_TRUE(window_holds(p.receiver_sink.window, 7 * round + bytes)) << bytes << " bytes, round " << round;
    }
  }
}

// Several pairs copying at once (each sender's claims live in its own gate):
// no transfer's chunks land in another's window.
TEST_P(ShmDirect, ConcurrentPairsKeepTheirChunksApart) {
  constexpr int kSenders = 3;
  std::vector<std::unique_ptr<Pair>> pairs;
  for (int i = 0; i < kSenders; ++i) pairs.push_back(std::make_unique<Pair>(GetParam(), 64 << 10, 1u << 20));
  for (uint32_t round = 0; round < 10; ++round) {
    std::vector<std::thread> senders;
    for (int i = 0; i < kSenders; ++i) {
      pairs[i]->receiver_sink.reopen();
      pairs[i]->grant(1u << 20);
    }
    for (int i = 0; i < kSenders; ++i)
      senders.emplace_back([&, i] { pairs[i]->send_data(1000 * i + round, 1u << 20); });
    for (auto& t : senders) t.join();
    for (int i = 0; i < kSenders; ++i)
      EXPECT_TRUE(window_holds(pairs[i]->receiver_sink.window, 1000 * i + round)) << "sender " << i << ", round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(Copies, ShmDirect, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& copies) {
                           return copies.param ? "SharedWithReceiver" : "SenderAlone";
                         });

// Unset, the threshold follows how fast this host's kernel copies between
// processes compared with memcpy (transport_tuning.hpp says why).
TEST(ShmDirectTuning, TheDefaultThresholdFollowsTheHostsCopyCosts) {
  EXPECT_EQ(shm_direct_min_for(57'000, 30'000), kShmDirectDefaultMinBytes) << "kernel copy 1.9x memcpy";
  EXPECT_EQ(shm_direct_min_for(46'000, 23'000), kShmDirectDefaultMinBytes) << "exactly 2x";
  EXPECT_EQ(shm_direct_min_for(57'000, 23'000), 0u) << "kernel copy 2.5x memcpy: the rings";
  EXPECT_EQ(shm_direct_min_for(0, 23'000), 0u) << "the kernel copy failed";
  EXPECT_EQ(shm_direct_min_for(57'000, 0), 0u) << "no clock";
  EXPECT_EQ(shm_direct_min_for(std::numeric_limits<double>::infinity(), 23'000), 0u);
  EXPECT_EQ(shm_direct_min_for(57'000, std::numeric_limits<double>::infinity()), 0u);
  EXPECT_EQ(shm_direct_min_for(std::numeric_limits<double>::quiet_NaN(), 23'000), 0u);
  EXPECT_EQ(shm_direct_min_bytes(0), 0u) << "set to 0: never";
  EXPECT_EQ(shm_direct_min_bytes(12345), 12345u) << "a set value is used as it is";
}

}  // namespace
}  // namespace accl::emu::test
