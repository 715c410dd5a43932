// SPDX-License-Identifier: Apache-2.0
//
// Shared-memory transport, shared payloads (Link::send_shared): a payload
// that several sends repeat is produced once into the sender's outbox and
// every receiver copies it from there. Each receiver must get exactly the
// bytes and header it would have got through its ring, and a slot of the
// outbox must never be overwritten while a receiver has yet to copy it.
#include "transport_test_util.hpp"

#include <condition_variable>
#include <mutex>

namespace accl::emu::test {
namespace {

constexpr uint32_t kMiB = 1u << 20;

// Counts the payload bytes the transport asked for.
class CountingWriter final : public PayloadWriter {
 public:
  CountingWriter(uint32_t seed, size_t count) : inner_(seed, count) {}
  uint32_t write(std::byte* dst, size_t offset, size_t bytes) override {
    produced += bytes;
    return inner_.write(dst, offset, bytes);
  }
  size_t produced = 0;

 private:
  PatternWriter inner_;
};

// One sending transport and `n` receiving ones, each with its own sink.
struct Fanout {
  explicit Fanout(size_t n, const ShmTuning& tuning = {}) : sinks(n) {
    sender = make_shm_transport(options(), tuning);
    sender->start(sender_sink);
    for (size_t i = 0; i < n; ++i) {
      receivers.push_back(make_shm_transport(options(), tuning));
      receivers.back()->start(sinks[i]);
      links.push_back(sender->connect(receivers.back()->local_address(), in(5000ms)));
    }
  }
  ~Fanout() {
    links.clear();
    sender->stop();
    for (auto& r : receivers) r->stop();
  }
  // Sends the pattern of `seed` as shared payload `key` over link `i`;
  // returns the bytes the transport had the writer produce.
  size_t send_shared(size_t i, uint64_t key, uint32_t seed, uint32_t bytes) {
    CountingWriter w(seed, bytes);
    EXPECT_EQ(links[i]->send_shared(make_header(bytes, seed), w, key, in(5000ms)), 0u) << "link " << i;
    return w.produced;
  }

  RecordingSink sender_sink;
  std::vector<RecordingSink> sinks;
  std::unique_ptr<Transport> sender;
  std::vector<std::unique_ptr<Transport>> receivers;
  std::vector<std::shared_ptr<Link>> links;
};

void expect_delivered(RecordingSink& sink, size_t index, uint32_t seed, uint32_t bytes) {
  const auto messages = sink.messages();
  ASSERT_GT(messages.size(), index);
  const Received& m = messages[index];
  EXPECT_EQ(m.status, 0u);
  const abi::WireHeader sent = make_header(bytes, seed);
  EXPECT_EQ(std::memcmp(&m.header, &sent, sizeof m.header), 0)
      << "the header arrives as sent (the outbox marker cleared)";
  ASSERT_EQ(m.data.size(), bytes);
  EXPECT_EQ(check_pattern(m.data, seed), std::string::npos) << "seed " << seed;
  EXPECT_EQ(sink.ticket_violations.load(), 0);
}

TEST(ShmShared, OnePayloadCopyServesEveryReceiver) {
  Fanout f(3);
  size_t produced = 0;
  for (size_t i = 0; i < 3; ++i) produced += f.send_shared(i, 41, 7, kMiB);
  EXPECT_EQ(produced, kMiB) << "the payload was produced once for the three links";
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(f.sinks[i].wait_messages(1, 5000ms)) << "receiver " << i;
    expect_delivered(f.sinks[i], 0, 7, kMiB);
  }
  // Another key is other bytes: produced again.
  for (size_t i = 0; i < 3; ++i) produced += f.send_shared(i, 42, 8, kMiB + 100);
  EXPECT_EQ(produced, 2 * kMiB + 100);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(f.sinks[i].wait_messages(2, 5000ms)) << "receiver " << i;
    expect_delivered(f.sinks[i], 1, 8, kMiB + 100);
  }
}

TEST(ShmShared, SmallAndOversizedPayloadsGoThroughTheRings) {
  ShmTuning tuning;
  tuning.outbox_bytes = 2 * kMiB;  // shares payloads of up to 1 MiB
  Fanout f(2, tuning);
  size_t produced = 0;
  for (size_t i = 0; i < 2; ++i) produced += f.send_shared(i, 1, 3, 4096);
  for (size_t i = 0; i < 2; ++i) produced += f.send_shared(i, 2, 4, kMiB + 64);
  EXPECT_EQ(produced, 2 * 4096 + 2 * (kMiB + 64)) << "each send produced its own payload";
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(f.sinks[i].wait_messages(2, 5000ms));
    expect_delivered(f.sinks[i], 0, 3, 4096);
    expect_delivered(f.sinks[i], 1, 4, kMiB + 64);
  }
}

// Receiver 0 holds its first shared message (its reader waits inside
// begin_message, before copying) while receiver 1 is sent more shared
// payloads than the outbox holds: the pinned slot must keep its bytes, and
// the sends that find no room must go through the ring instead of waiting.
TEST(ShmShared, ASlotIsNotReusedBeforeEveryReceiverCopiedIt) {
  std::mutex mutex;
  std::condition_variable cv;
  bool holding = false;
  bool release = false;
  ShmTuning tuning;
  tuning.outbox_bytes = 4 * kMiB;
  Fanout f(2, tuning);
  f.sinks[0].begin_hook = [&](const abi::WireHeader&) {
    std::unique_lock lock(mutex);
    holding = true;
    cv.notify_all();
    cv.wait_for(lock, 20s, [&] { return release; });
  };
  EXPECT_EQ(f.send_shared(0, 100, 100, kMiB), kMiB);
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return holding; }));
  }
  constexpr uint32_t kOthers = 12;  // 12 MiB through a 4 MiB outbox
  for (uint32_t k = 0; k < kOthers; ++k) {
    EXPECT_EQ(f.send_shared(1, 200 + k, 200 + k, kMiB), kMiB);
    ASSERT_TRUE(f.sinks[1].wait_messages(k + 1, 5000ms)) << "message " << k;
  }
  for (uint32_t k = 0; k < kOthers; ++k) expect_delivered(f.sinks[1], k, 200 + k, kMiB);
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(f.sinks[0].wait_messages(1, 5000ms));
  expect_delivered(f.sinks[0], 0, 100, kMiB);
}

// A receiver whose window is revoked while the shared payload would land
// keeps its memory unchanged; the others still get theirs.
TEST(ShmShared, DiscardedByOneReceiverDeliveredToTheOthers) {
  Fanout f(2);
  f.sinks[0].discard = [](const abi::WireHeader&) { return true; };
  for (size_t i = 0; i < 2; ++i) f.send_shared(i, 9, 9, kMiB);
  ASSERT_TRUE(f.sinks[0].wait_messages(1, 5000ms));
  ASSERT_TRUE(f.sinks[1].wait_messages(1, 5000ms));
  EXPECT_TRUE(f.sinks[0].messages()[0].discarded);
  expect_delivered(f.sinks[1], 0, 9, kMiB);
}

// Copies every payload into one buffer it touched up front and counts
// deliveries: receiving allocates and faults in nothing itself.
class ReusingSink final : public Sink {
 public:
  explicit ReusingSink(size_t bytes) : buffer_(bytes, std::byte{1}) {}
  std::byte* begin_message(const NetAddress&, const abi::WireHeader& header, ReceiveTicket&) override {
    return header.count <= buffer_.size() ? buffer_.data() : nullptr;
  }
  void end_message(const NetAddress&, const abi::WireHeader&, ReceiveTicket&, uint32_t status) override {
    (status == 0 ? delivered : failed).fetch_add(1, std::memory_order_release);
  }
  void link_failed(const NetAddress&, uint32_t) override {}
  bool wait_for(uint64_t n, std::chrono::milliseconds limit) const {
    const auto end = Clock::now() + limit;
    while (delivered.load(std::memory_order_acquire) + failed.load(std::memory_order_acquire) < n) {
      if (Clock::now() >= end) return false;
      std::this_thread::sleep_for(50us);
    }
    return true;
  }
  const std::vector<std::byte>& last_payload() const { return buffer_; }
  std::atomic<uint64_t> delivered{0};
  std::atomic<uint64_t> failed{0};

 private:
  std::vector<std::byte> buffer_;
};

// The first shared payload has the sender allocate and touch its whole
// outbox, and each receiver map and read all of it: the payloads after it
// take no page fault on their way through fresh outbox pages. Before, the
// writer and each reader faulted a page in every 4 KiB until the outbox had
// wrapped once (64 calls of a 64 KiB bcast on 4 ranks, 200-400 us each on a
// VM): 1,260 faults here.
TEST(ShmShared, OutboxPagesAreMappedAtTheFirstSharedPayload) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "sanitizer shadow memory takes page faults of its own";
#else
  constexpr uint32_t kBytes = 64u << 10;  // the smallest shared payload
  constexpr uint32_t kReceivers = 2;
  ShmTuning tuning;
  tuning.outbox_bytes = 4 * kMiB;
  RecordingSink sender_sink;
  std::vector<std::unique_ptr<ReusingSink>> sinks;
  auto sender = make_shm_transport(options(), tuning);
  sender->start(sender_sink);
  std::vector<std::unique_ptr<Transport>> receivers;
  std::vector<std::shared_ptr<Link>> links;
  for (uint32_t i = 0; i < kReceivers; ++i) {
    sinks.push_back(std::make_unique<ReusingSink>(kBytes));
    receivers.push_back(make_shm_transport(options(), tuning));
    receivers.back()->start(*sinks.back());
    links.push_back(sender->connect(receivers.back()->local_address(), in(5000ms)));
    ASSERT_NE(links.back(), nullptr);
  }
  // Key k goes to every receiver, which takes it before key k + 1 is sent
  // (its slot is then free again): 64 keys of 64 KiB cover the whole outbox.
  size_t produced = 0;
  auto send_key = [&](uint32_t key) {
    for (uint32_t i = 0; i < kReceivers; ++i) {
      CountingWriter w(key, kBytes);
      ASSERT_EQ(links[i]->send_shared(make_header(kBytes, key), w, key, in(5000ms)), 0u);
      produced += w.produced;
    }
    for (uint32_t i = 0; i < kReceivers; ++i) ASSERT_TRUE(sinks[i]->wait_for(key, 5000ms)) << "key " << key;
  };
  ASSERT_NO_FATAL_FAILURE(send_key(1));  // the first shared payload, on both links
  constexpr uint32_t kKeys = 64;
  const long before = minor_faults();
  for (uint32_t key = 2; key <= kKeys + 1; ++key) ASSERT_NO_FATAL_FAILURE(send_key(key));
  const long faults = minor_faults() - before;
  EXPECT_EQ(produced, size_t{kKeys + 1} * kBytes) << "each payload was written to the outbox once, for both links";
  for (uint32_t i = 0; i < kReceivers; ++i) {
    EXPECT_EQ(sinks[i]->failed.load(), 0u);
    EXPECT_EQ(check_pattern(sinks[i]->last_payload(), kKeys + 1), std::string::npos) << "receiver " << i;
  }
  // 1,024 pages on the sender and on each receiver went unfaulted; a handful
  // of faults elsewhere in the process (stacks, allocator) remain.
  EXPECT_LT(faults, 32);
  links.clear();
  sender->stop();
  for (auto& r : receivers) r->stop();
#endif
}

}  // namespace
}  // namespace accl::emu::test
