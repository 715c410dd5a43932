// SPDX-License-Identifier: Apache-2.0
//
// Shared-memory transport: host threads that poll (Transport::poll) consume
// inbound messages themselves, next to the reader threads. A message must be
// taken on the polling thread while the reader stays out of the way, the
// reader must take over when the polls end, and the two consumers must never
// deliver a message twice, lose one or reorder a link.
#include "transport_test_util.hpp"

#include "scoped_env.hpp"
#include "thread_switches.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace accl::emu::test {
namespace {

using accl::test::ScopedEnv;
using accl::test::voluntary_switches;

struct Delivery {
  uint32_t seed;
  std::thread::id thread;
};

// A receiving transport with a sink that records which thread began each
// message.
struct PolledPair {
  explicit PolledPair(const ShmTuning& tuning)
      : PolledPair(make_shm_transport(options(), tuning), make_shm_transport(options(), tuning)) {}
  // Transports made like the emulated CCLO makes them (tuning from the environment).
  explicit PolledPair(const TransportOptions& o) : PolledPair(make_shm_transport(o), make_shm_transport(o)) {}
  PolledPair(std::unique_ptr<Transport> receiving, std::unique_ptr<Transport> sending)
      : receiver(std::move(receiving)), sender(std::move(sending)) {
    sink.begin_hook = [this](const abi::WireHeader& h) {
      std::lock_guard lock(mutex);
      deliveries.push_back(Delivery{h.tag, std::this_thread::get_id()});
    };
    receiver->start(sink);
    sender->start(sender_sink);
    link = sender->connect(receiver->local_address(), in(5000ms));
  }
  ~PolledPair() {
    link.reset();
    sender->stop();
    receiver->stop();
  }
  uint32_t send(uint32_t seed, uint32_t bytes) {
    PatternWriter w(seed, bytes);
    return link->send(make_header(bytes, seed), w, in(5000ms));
  }
  std::vector<Delivery> taken() {
    std::lock_guard lock(mutex);
    return deliveries;
  }

  std::unique_ptr<Transport> receiver;
  std::unique_ptr<Transport> sender;
  RecordingSink sink;
  RecordingSink sender_sink;
  std::shared_ptr<Link> link;
  std::mutex mutex;
  std::vector<Delivery> deliveries;
};

// Polls a few times in a row: hot polling starts the readers' lease.
void start_polling(PolledPair& p) {
  for (int i = 0; i < 3; ++i) p.receiver->poll();
}

// Polls until the sink holds `n` messages or `timeout` passes.
bool poll_until(PolledPair& p, size_t n, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  while (p.sink.message_count() < n) {
    if (Clock::now() >= end) return false;
    p.receiver->poll();
  }
  return true;
}

// The default tuning but for a poll lease of `lease`.
ShmTuning with_lease(std::chrono::microseconds lease) {
  ShmTuning tuning;
  tuning.poll_lease = lease;
  return tuning;
}

// A ring of 64 KiB in pieces of 16 KiB (larger messages wrap and stream)
// and a poll lease of `lease`.
ShmTuning small_ring(std::chrono::microseconds lease) {
  ShmTuning tuning = with_lease(lease);
  tuning.ring_bytes = 64 << 10;
  tuning.max_piece_bytes = 16 << 10;
  return tuning;
}

// Starts polling and polls until a first message is delivered, then gives
// the reader `park` to park. The first message may still go to the reader
// (it may be asleep with a wake-up requested from before the polls began).
void poll_first_message(PolledPair& p, std::chrono::milliseconds park) {
  start_polling(p);
  ASSERT_EQ(p.send(0, 8), 0u);
  ASSERT_TRUE(poll_until(p, 1, 5000ms));
  std::this_thread::sleep_for(park);
}

// Ends a polling thread when the test leaves, however it leaves: clears
// `polling`, which the thread's loop checks, and joins it.
struct StopPoller {
  std::atomic<bool>& polling;
  std::thread& poller;
  ~StopPoller() {
    polling = false;
    poller.join();
  }
};

// Sends message `seed` of `bytes` while nobody polls: the reader thread
// must take it, as the sink's message number `count`, within 5 s.
void reader_takes(PolledPair& p, uint32_t seed, uint32_t bytes, size_t count, const char* failure) {
  ASSERT_EQ(p.send(seed, bytes), 0u);
  ASSERT_TRUE(p.sink.wait_messages(count, 5000ms)) << failure;
  EXPECT_NE(p.taken().back().thread, std::this_thread::get_id());
}

TEST(ShmPoll, PollingThreadConsumesWhileTheReaderIsParked) {
  PolledPair p(with_lease(std::chrono::seconds(60)));  // the reader never takes over by itself
  ASSERT_NE(p.link, nullptr);
  // Nothing arrived: nothing to deliver.
  EXPECT_FALSE(p.receiver->poll());
  ASSERT_NO_FATAL_FAILURE(poll_first_message(p, 200ms));
  constexpr uint32_t kMessages = 50;
  for (uint32_t i = 1; i <= kMessages; ++i) {
    // Sizes from header-only to several KiB: all complete in the ring.
    ASSERT_EQ(p.send(i, (i * 397) % 9000), 0u);
    ASSERT_TRUE(poll_until(p, i + 1, 5000ms)) << "message " << i << " was not delivered";
  }
  const auto taken = p.taken();
  ASSERT_EQ(taken.size(), kMessages + 1);
  for (uint32_t i = 1; i <= kMessages; ++i) {
    EXPECT_EQ(taken[i].seed, i);
    EXPECT_EQ(taken[i].thread, std::this_thread::get_id()) << "message " << i << " was taken by the reader thread";
  }
  const auto messages = p.sink.messages();
  for (const auto& m : messages) {
    EXPECT_EQ(m.status, 0u);
    EXPECT_EQ(check_pattern(m.data, m.header.tag), std::string::npos) << "message " << m.header.tag;
  }

  // The polls end: the reader delivers again, without any poll.
  p.receiver->end_polling();
  ASSERT_NO_FATAL_FAILURE(
      reader_takes(p, kMessages + 1, 100, kMessages + 2, "the reader did not take over after end_polling()"));
}

// The lease follows the host's processes per core (see shm_poll_lease):
// oversubscribed, a polling thread is preempted for whole scheduler slices
// and a 1 ms lease would lapse at each of them.
TEST(ShmPoll, LeaseIsLongerWhenTheHostHasMoreProcessesThanCores) {
  using std::chrono::microseconds;
  EXPECT_EQ(shm_poll_lease(0, 0, 2), microseconds(1000)) << "unknown process count";
  EXPECT_EQ(shm_poll_lease(0, 1, 2), microseconds(1000));
  EXPECT_EQ(shm_poll_lease(0, 2, 2), microseconds(1000));
  EXPECT_EQ(shm_poll_lease(0, 3, 2), microseconds(10000));
  EXPECT_EQ(shm_poll_lease(0, 8, 2), microseconds(10000));
  EXPECT_EQ(shm_poll_lease(-5, 8, 2), microseconds(10000)) << "a negative setting means automatic";
  EXPECT_EQ(shm_poll_lease(250, 8, 2), microseconds(250)) << "a configured lease wins";
  EXPECT_EQ(shm_poll_lease(250, 1, 2), microseconds(250));
}

// ACCL_EMU_POLL_LEASE_US reaches a transport made like the emulated CCLO
// makes it: with a 60 s lease a parked reader leaves an unpolled message
// alone (with the default 1 ms it takes it within milliseconds), until the
// polls end.
TEST(ShmPoll, ConfiguredLeaseKeepsTheReaderParked) {
  ScopedEnv lease("ACCL_EMU_POLL_LEASE_US", "60000000");
  TransportOptions o = options();
  o.host_processes = 1;
  PolledPair p(o);
  ASSERT_NE(p.link, nullptr);
  start_polling(p);
  ASSERT_EQ(p.send(0, 8), 0u);  // may still go to the reader (see the first test)
  ASSERT_TRUE(poll_until(p, 1, 5000ms));
  std::this_thread::sleep_for(200ms);
  ASSERT_EQ(p.send(1, 64), 0u);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(p.sink.message_count(), 1u) << "the reader took over before the configured lease ran out";
  p.receiver->end_polling();
  ASSERT_TRUE(p.sink.wait_messages(2, 5000ms)) << "the reader did not take over after end_polling()";
  EXPECT_NE(p.taken().back().thread, std::this_thread::get_id());
}

TEST(ShmPoll, ReaderTakesOverWhenThePollsStop) {
  PolledPair p(with_lease(std::chrono::microseconds(2000)));
  ASSERT_NE(p.link, nullptr);
  start_polling(p);  // a lease that nobody renews (and no end_polling)
  ASSERT_NO_FATAL_FAILURE(reader_takes(p, 1, 64, 1, "a parked reader did not resume after the lease"));
}

// A driving loop (EmuDevice::drive_until) keeps the readers parked however
// long its thread is off its core between polls: oversubscribed it yields,
// often for longer than a lease, and a reader taking over meanwhile would
// only compete with it for a core. Once it leaves, the lease runs out as
// after any poll; end_polling() hands over at once, driver or not.
TEST(ShmPoll, ReadersStayParkedWhileADriverIsOffItsCore) {
  PolledPair p(with_lease(std::chrono::microseconds(1000)));
  ASSERT_NE(p.link, nullptr);
  p.receiver->driver_enters();
  start_polling(p);
  ASSERT_EQ(p.send(0, 8), 0u);  // may still go to the reader (see above)
  ASSERT_TRUE(poll_until(p, 1, 5000ms));
  std::this_thread::sleep_for(50ms);  // fifty leases without a poll
  ASSERT_EQ(p.send(1, 100), 0u);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(p.sink.message_count(), 1u) << "a reader took over from a driver that was only off its core";
  ASSERT_TRUE(poll_until(p, 2, 5000ms));
  EXPECT_EQ(p.taken().back().thread, std::this_thread::get_id());

  p.receiver->driver_leaves();
  ASSERT_NO_FATAL_FAILURE(reader_takes(p, 2, 100, 3, "the reader did not take over after the driver left"));

  p.receiver->driver_enters();
  start_polling(p);
  std::this_thread::sleep_for(20ms);
  p.receiver->end_polling();  // the driver blocks
  ASSERT_NO_FATAL_FAILURE(reader_takes(p, 3, 100, 4, "the reader did not take over after end_polling()"));
  p.receiver->driver_leaves();
  for (const auto& m : p.sink.messages()) EXPECT_EQ(check_pattern(m.data, m.header.tag), std::string::npos);
}

// Parked readers leave the end of the lease to the transport's control
// thread: while the lease runs they sleep through, instead of each waking
// once per lease to look at the clock (1 ms here: about 300 wake-ups in
// the window below before).
TEST(ShmPoll, ParkedReadersSleepThroughARunningLease) {
  PolledPair p(with_lease(std::chrono::microseconds(1000)));
  ASSERT_NE(p.link, nullptr);
  p.receiver->driver_enters();  // the lease cannot lapse, however slow this thread is
  ASSERT_NO_FATAL_FAILURE(poll_first_message(p, 20ms));
  const long before = voluntary_switches("accl-shm-rx");
  ASSERT_GE(before, 0);
  const auto end = Clock::now() + 300ms;
  while (Clock::now() < end) {
    p.receiver->poll();
    std::this_thread::sleep_for(200us);
  }
  const long sleeps = voluntary_switches("accl-shm-rx") - before;
  EXPECT_LE(sleeps, 10) << "parked readers woke up while the lease ran";
  p.receiver->driver_leaves();
  // The lease still ends: the reader takes over.
  ASSERT_NO_FATAL_FAILURE(reader_takes(p, 1, 100, 2, "a parked reader did not resume after the lease"));
}

// A reader parked under a lease that lapsed (nobody polls any more, nobody
// called end_polling) is woken by the next send, not by the control
// thread's backstop check (a minute here; its thread still looks every
// 100 ms, kWaitSlice, which the send below comes well before).
TEST(ShmPoll, SendWakesAParkedReaderOnceTheLeaseLapsed) {
  ShmTuning tuning;
  tuning.poll_lease = std::chrono::microseconds(1000);
  tuning.lease_backstop = std::chrono::microseconds(std::chrono::seconds(60));
  PolledPair p(tuning);
  ASSERT_NE(p.link, nullptr);
  start_polling(p);
  ASSERT_EQ(p.send(0, 8), 0u);  // may still go to the reader (see the first test)
  ASSERT_TRUE(poll_until(p, 1, 5000ms));
  // The reader parks (its park wakes the control thread, which then sleeps
  // its 100 ms slice) and the lease lapses.
  const auto parked_at = Clock::now();
  for (int i = 0; i < 100; ++i) p.receiver->poll();
  std::this_thread::sleep_for(5ms);
  ASSERT_EQ(p.send(1, 64), 0u);
  const bool taken = p.sink.wait_messages(2, 5000ms);
  const auto waited = Clock::now() - parked_at;
  ASSERT_TRUE(taken) << "the parked reader did not take the message";
  EXPECT_NE(p.taken().back().thread, std::this_thread::get_id());
  // Without the send's wake-up the message waits for the control thread's
  // next look, 100 ms after the reader parked.
  EXPECT_LT(waited, 60ms) << "the send did not wake the parked reader after the lease";
}

// While a host thread polls, the control thread checks the lease every
// backstop interval, not at every end of the lease: with a 1 ms lease it
// woke about once per millisecond (300 times in the window below) and
// preempted a spinning rank each time. The backstop still catches a message
// that came while the lease ran and found the polls stopped.
TEST(ShmPoll, ControlThreadSleepsWhileThePollsGoOn) {
  ShmTuning tuning;
  tuning.poll_lease = std::chrono::microseconds(1000);
  tuning.lease_backstop = std::chrono::microseconds(50000);
  PolledPair p(tuning);
  ASSERT_NE(p.link, nullptr);
  start_polling(p);
  ASSERT_EQ(p.send(0, 8), 0u);
  ASSERT_TRUE(poll_until(p, 1, 5000ms));
  const long before = voluntary_switches("accl-shm-ctl");
  ASSERT_GE(before, 0);
  const auto end = Clock::now() + 300ms;
  while (Clock::now() < end) p.receiver->poll();  // hot polls: the lease never lapses
  const long wakeups = voluntary_switches("accl-shm-ctl") - before;
  // Two transports' control threads (both named accl-shm-ctl): about 6
  // backstop checks each, the sender's idle and the first park's notice.
  EXPECT_LE(wakeups, 40) << "the control thread woke at every end of the lease";
  // Sent while the lease runs, then nobody polls: the backstop hands it to
  // the reader.
  ASSERT_NO_FATAL_FAILURE(reader_takes(p, 1, 64, 2, "the backstop did not hand the message to the reader"));
}

TEST(ShmPoll, ReaderBracketsTheMessagesItEndsAndPollsDoNot) {
  // The reader thread tells the sink before and after each message it ends
  // (the emulator runs its firmware passes in the second call instead of
  // waking the firmware thread); a message a host thread's poll takes needs
  // no such call, the poller is the one that goes on with it.
  PolledPair p(with_lease(std::chrono::seconds(60)));
  ASSERT_NE(p.link, nullptr);
  constexpr uint32_t kByReader = 20;
  for (uint32_t i = 0; i < kByReader; ++i) {
    // Header-only, in the ring, and larger than the ring (streamed).
    const uint32_t bytes = i % 3 == 0 ? 0 : i % 3 == 1 ? 3000 : 3u << 20;
    ASSERT_EQ(p.send(i, bytes), 0u);
  }
  ASSERT_TRUE(p.sink.wait_messages(kByReader, 10000ms));
  // The bracket closes after end_message: wait for the last one.
  for (int i = 0; i < 5000 && p.sink.reader_brackets() < kByReader; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(p.sink.reader_brackets(), kByReader);
  EXPECT_EQ(p.sink.ended_by_reader(), kByReader);
  EXPECT_EQ(p.sink.reader_violations.load(), 0);

  // Now a host thread polls; once the reader parked, polls take everything.
  start_polling(p);
  ASSERT_EQ(p.send(kByReader, 8), 0u);
  ASSERT_TRUE(poll_until(p, kByReader + 1, 5000ms));
  std::this_thread::sleep_for(200ms);
  const size_t brackets = p.sink.reader_brackets();
  constexpr uint32_t kByPolls = 20;
  for (uint32_t i = 1; i <= kByPolls; ++i) {
    ASSERT_EQ(p.send(kByReader + i, (i * 397) % 9000), 0u);
    ASSERT_TRUE(poll_until(p, kByReader + 1 + i, 5000ms));
  }
  EXPECT_EQ(p.sink.reader_brackets(), brackets) << "polled messages were bracketed as the reader's";
  EXPECT_EQ(p.sink.ended_by_reader(), brackets);
  EXPECT_EQ(p.sink.reader_violations.load(), 0);
  for (const auto& m : p.sink.messages()) {
    EXPECT_EQ(m.status, 0u);
    EXPECT_EQ(check_pattern(m.data, m.header.tag), std::string::npos) << "message " << m.header.tag;
  }
}

TEST(ShmPoll, ReadersThatSendLargerThanTheRingToEachOtherBothFinish) {
  // Each side's reader, right after it delivered a small message, sends a
  // message larger than the ring back (what the emulator's firmware pass on
  // the reader does in an exchange). Nobody else consumes: both readers wait
  // for room in a ring only the other one drains. Each must go on consuming
  // its own ring while it waits (even without a spin phase), or both wait
  // until their deadline.
  constexpr uint32_t kBig = 3u << 20;
  RecordingSink sink_a, sink_b;
  std::atomic<uint32_t> rc_a{0xFFFFFFFFu}, rc_b{0xFFFFFFFFu};
  std::shared_ptr<Link> a_to_b, b_to_a;
  std::mutex mutex;  // guards the links and in_hooks
  std::condition_variable cv;
  int in_hooks = 0;
  auto reply = [&](std::shared_ptr<Link>& link, std::atomic<uint32_t>& rc, uint32_t seed) {
    return [&, seed] {
      if (rc.load() != 0xFFFFFFFFu) return;  // only after the first message
      std::shared_ptr<Link> l;
      {
        // Both readers in their hooks before either sends: otherwise one
        // reader could take the other's whole message before it sends
        // itself. Bounded: a reader that never comes fails the test below.
        std::unique_lock lock(mutex);
        l = link;
        ++in_hooks;
        cv.notify_all();
        cv.wait_for(lock, 5000ms, [&] { return in_hooks == 2; });
      }
      PatternWriter w(seed, kBig);
      rc.store(l->send(make_header(kBig, seed), w, in(20000ms)));
    };
  };
  sink_a.reader_delivered_hook = reply(a_to_b, rc_a, 101);
  sink_b.reader_delivered_hook = reply(b_to_a, rc_b, 102);
  std::unique_ptr<Transport> a, b;
  {
    ScopedEnv no_spin("ACCL_EMU_SPIN_US", "0");  // the transports and links read it when they are made
    a = make_shm_transport(options());
    b = make_shm_transport(options());
    a->start(sink_a);
    b->start(sink_b);
    std::lock_guard lock(mutex);
    a_to_b = a->connect(b->local_address(), in(5000ms));
    b_to_a = b->connect(a->local_address(), in(5000ms));
  }
  ASSERT_NE(a_to_b, nullptr);
  ASSERT_NE(b_to_a, nullptr);
  const auto begin = Clock::now();
  PatternWriter small_a(1, 64), small_b(2, 64);
  std::thread other([&] { EXPECT_EQ(b_to_a->send(make_header(64, 2), small_b, in(5000ms)), 0u); });
  EXPECT_EQ(a_to_b->send(make_header(64, 1), small_a, in(5000ms)), 0u);
  other.join();
  ASSERT_TRUE(sink_a.wait_messages(2, 15000ms));
  ASSERT_TRUE(sink_b.wait_messages(2, 15000ms));
  EXPECT_LT(Clock::now() - begin, 2000ms) << "the readers stalled each other";
  for (int i = 0; i < 1000 && (rc_a.load() == 0xFFFFFFFFu || rc_b.load() == 0xFFFFFFFFu); ++i)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(rc_a.load(), 0u);
  EXPECT_EQ(rc_b.load(), 0u);
  for (auto* sink : {&sink_a, &sink_b})
    for (const auto& m : sink->messages()) {
      EXPECT_EQ(m.status, 0u);
      EXPECT_EQ(check_pattern(m.data, m.header.tag), std::string::npos) << "message " << m.header.tag;
    }
  a_to_b.reset();
  b_to_a.reset();
  a->stop();
  b->stop();
}

// A sender that stops after the piece reaching `pause_at` bytes until
// released, so a test can act while a message is half in the ring.
struct PausingSend {
  PausingSend(PolledPair& p, uint32_t seed, size_t bytes, size_t pause_at) : writer(seed, bytes) {
    writer.after_piece = [this, pause_at](size_t offset, size_t n) {
      if (offset + n < pause_at || paused_at != 0) return;
      std::unique_lock lock(m);
      paused_at = offset + n;
      cv.notify_all();
      cv.wait_for(lock, 20s, [&] { return resume; });
    };
    thread = std::thread([this, &p, seed, bytes] {
      rc = p.link->send(make_header(static_cast<uint32_t>(bytes), seed), writer, in(60000ms));
    });
  }
  ~PausingSend() { finish(); }
  // Lets the sender go on and waits for its send to return.
  void finish() {
    release();
    if (thread.joinable()) thread.join();
  }
  bool wait_paused() {
    std::unique_lock lock(m);
    return cv.wait_for(lock, 20s, [&] { return paused_at != 0; });
  }
  void release() {
    std::lock_guard lock(m);
    resume = true;
    cv.notify_all();
  }

  PatternWriter writer;
  std::mutex m;
  std::condition_variable cv;
  size_t paused_at = 0;  // guarded by m
  bool resume = false;   // guarded by m
  uint32_t rc = 0xFFFFFFFFu;
  std::thread thread;
};

TEST(ShmPoll, PollingThreadConsumesAStreamingMessage) {
  // Larger than the ring: never complete in it. The polling thread takes it
  // anyway, copying piece by piece as the sender publishes, while the
  // reader stays parked (no thread hand-off on the receiving side).
  PolledPair p(small_ring(std::chrono::seconds(60)));
  ASSERT_NE(p.link, nullptr);
  ASSERT_NO_FATAL_FAILURE(poll_first_message(p, 100ms));
  std::thread big([&] { EXPECT_EQ(p.send(1, 1 << 20), 0u); });
  EXPECT_TRUE(poll_until(p, 2, 10000ms));
  big.join();
  const auto messages = p.sink.messages();
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[1].status, 0u);
  EXPECT_EQ(check_pattern(messages[1].data, 1), std::string::npos);
  EXPECT_EQ(p.taken().back().thread, std::this_thread::get_id()) << "the reader thread took the streaming message";
}

TEST(ShmPoll, ReaderCarriesOnAMessageThePollerLeftHalfDone) {
  // The sender stalls mid-message: the poller stops waiting for it and
  // returns; once the polls end, the reader thread consumes the rest of the
  // same message (one delivery, intact), and the link stays in order.
  PolledPair p(small_ring(std::chrono::seconds(60)));
  ASSERT_NE(p.link, nullptr);
  ASSERT_NO_FATAL_FAILURE(poll_first_message(p, 100ms));
  constexpr size_t kBytes = 300000;
  {
    PausingSend send(p, 1, kBytes, 32 << 10);  // within the ring: nobody consumes before the pause
    ASSERT_TRUE(send.wait_paused());
    // Take what was published; the poll returns although the message is
    // incomplete (the sender is stuck).
    const auto begun = Clock::now();
    for (int i = 0; i < 20; ++i) p.receiver->poll();
    EXPECT_LT(Clock::now() - begun, 2s) << "poll() waited for a stalled sender";
    ASSERT_EQ(p.taken().size(), 2u) << "the poller did not begin the streaming message";
    EXPECT_EQ(p.sink.message_count(), 1u);
    p.receiver->end_polling();  // the reader takes over mid-message
    send.release();
  }
  ASSERT_TRUE(p.sink.wait_messages(2, 10000ms)) << "nobody finished the message the poller began";
  ASSERT_EQ(p.send(2, 5000), 0u);
  ASSERT_TRUE(p.sink.wait_messages(3, 10000ms));
  std::this_thread::sleep_for(50ms);  // a duplicate would show up now
  const auto messages = p.sink.messages();
  ASSERT_EQ(messages.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(messages[i].header.tag, i);
    EXPECT_EQ(messages[i].status, 0u);
    EXPECT_EQ(check_pattern(messages[i].data, i), std::string::npos) << "message " << i;
  }
  EXPECT_EQ(p.taken()[1].thread, std::this_thread::get_id());
  EXPECT_EQ(p.sink.overlap_violations.load(), 0);
  EXPECT_EQ(p.sink.ticket_violations.load(), 0);
}

TEST(ShmPoll, RevokedWhileThePollerStreamsLeavesTheDestinationUnchanged) {
  // A receive that fails (its window revoked) while the polling thread is
  // streaming its message in: nothing may be stored after revoke()
  // returned, the rest is consumed and dropped, the link stays usable.
  PolledPair p(small_ring(std::chrono::seconds(60)));
  ASSERT_NE(p.link, nullptr);
  p.sink.lease_messages = true;  // read by begin_message only, which has not run yet
  std::atomic<bool> polling{true};
  std::atomic<uint64_t> polls{0};
  std::thread poller([&] {
    while (polling.load()) {
      p.receiver->poll();
      polls.fetch_add(1, std::memory_order_relaxed);
    }
  });
  StopPoller stop_poller{polling, poller};
  // The lease must be running (and the reader parked) before the message
  // comes, or on a loaded machine the reader may take it first.
  const auto poll_deadline = Clock::now() + 20s;
  while (polls.load(std::memory_order_relaxed) < 1000 && Clock::now() < poll_deadline) std::this_thread::yield();
  std::this_thread::sleep_for(10ms);
  constexpr size_t kBytes = 1 << 20;
  std::vector<std::byte> at_revoke;
  size_t paused_at = 0;
  {
    PausingSend send(p, 1, kBytes, 256 << 10);
    ASSERT_TRUE(send.wait_paused());
    RecordingSink::Leased leased;
    ASSERT_TRUE(p.sink.wait_leased(1, 20000ms, leased));
    ASSERT_EQ(leased.bytes, kBytes);
    EXPECT_TRUE(leased.lease->revoke(Clock::now() + 5s));
    at_revoke.assign(leased.dst, leased.dst + kBytes);
    {
      std::lock_guard lock(send.m);
      paused_at = send.paused_at;
    }
    send.finish();
    EXPECT_EQ(send.rc, 0u);
  }
  ASSERT_TRUE(p.sink.wait_messages(1, 20000ms));
  ASSERT_EQ(p.send(2, 100000), 0u);
  ASSERT_TRUE(p.sink.wait_messages(2, 20000ms));
  const auto got = p.sink.messages();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].data == at_revoke) << "the destination changed after revoke()";
  const size_t late = static_cast<size_t>(
      std::count(got[0].data.begin() + static_cast<std::ptrdiff_t>(paused_at), got[0].data.end(), std::byte{0}));
  EXPECT_EQ(late, kBytes - paused_at) << "bytes sent after the revocation were stored";
  EXPECT_EQ(got[1].status, 0u);
  EXPECT_EQ(check_pattern(got[1].data, 2), std::string::npos);
  const auto taken = p.taken();
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].thread, poller.get_id()) << "the test meant the poller to stream the message";
}

TEST(ShmPoll, HostsSendingMessagesLargerThanTheRingToEachOtherAtOnce) {
  // Two host threads, each polling its own transport (so its readers park)
  // and then sending the other a message four times the ring, as the
  // exchange of an allreduce does; afterwards each polls until the other's
  // message arrived, then ends its polls. Nobody polls while both are inside
  // send(): each sender must free the other's ring while it waits for room
  // in its own, or hand its rings to its readers before it sleeps, instead
  // of both waiting out the lease (which here outlasts the send deadline).
  const ShmTuning tuning = small_ring(std::chrono::seconds(60));
  RecordingSink sink_a, sink_b;
  auto a = make_shm_transport(options(), tuning);
  auto b = make_shm_transport(options(), tuning);
  a->start(sink_a);
  b->start(sink_b);
  auto a_to_b = a->connect(b->local_address(), in(5000ms));
  auto b_to_a = b->connect(a->local_address(), in(5000ms));
  ASSERT_NE(a_to_b, nullptr);
  ASSERT_NE(b_to_a, nullptr);
  constexpr uint32_t kBytes = 256 << 10;
  std::atomic<int> ready{0};
  auto host = [&](Transport& self, RecordingSink& own_sink, Link& out, uint32_t seed, uint32_t& rc, bool& got) {
    for (int i = 0; i < 3; ++i) self.poll();  // hot polls: our readers park
    ready.fetch_add(1);
    while (ready.load() < 2) self.poll();
    std::this_thread::sleep_for(20ms);  // both readers are parked by now
    PatternWriter w(seed, kBytes);
    rc = out.send(make_header(kBytes, seed), w, in(15000ms));
    const auto until = Clock::now() + 15s;
    while (own_sink.message_count() < 1 && Clock::now() < until) self.poll();
    got = own_sink.message_count() == 1;
    self.end_polling();
  };
  uint32_t rc_a = 0xFFFFFFFFu, rc_b = 0xFFFFFFFFu;
  bool got_a = false, got_b = false;
  std::thread ta([&] { host(*a, sink_a, *a_to_b, 1, rc_a, got_a); });
  std::thread tb([&] { host(*b, sink_b, *b_to_a, 2, rc_b, got_b); });
  ta.join();
  tb.join();
  EXPECT_EQ(rc_a, 0u);
  EXPECT_EQ(rc_b, 0u);
  EXPECT_TRUE(got_a);
  EXPECT_TRUE(got_b);
  ASSERT_TRUE(sink_a.wait_messages(1, 10000ms));
  ASSERT_TRUE(sink_b.wait_messages(1, 10000ms));
  const auto from_b = sink_a.messages();
  const auto from_a = sink_b.messages();
  EXPECT_EQ(from_a[0].status, 0u);
  EXPECT_EQ(from_b[0].status, 0u);
  EXPECT_EQ(check_pattern(from_a[0].data, 1), std::string::npos);
  EXPECT_EQ(check_pattern(from_b[0].data, 2), std::string::npos);
  a_to_b.reset();
  b_to_a.reset();
  a->stop();
  b->stop();
}

TEST(ShmPoll, PollerAndReaderNeverDuplicateLoseOrReorder) {
  // A poller that keeps stopping (end_polling, then a pause in which the
  // reader takes over) and resuming (the reader parks again): reader and
  // poller hand the ring back and forth all the time. A tiny ring makes the
  // larger messages wrap and stream.
  PolledPair p(small_ring(std::chrono::microseconds(300)));
  ASSERT_NE(p.link, nullptr);
  constexpr uint32_t kMessages = 3000;
  std::atomic<bool> polling{true};
  std::atomic<unsigned> rounds{0};
  std::thread poller([&] {
    unsigned round = 0;
    while (polling.load()) {
      p.receiver->poll();
      rounds.store(++round);
      if (round % 997 == 0) {
        p.receiver->end_polling();
        std::this_thread::sleep_for(std::chrono::microseconds(100 + round % 400));
      }
    }
  });
  const std::thread::id poller_id = poller.get_id();
  StopPoller stop_poller{polling, poller};
  // Both consumers must get their chances on a loaded machine too: start
  // once the poller runs, and pause now and then.
  const auto started = Clock::now();
  while (rounds.load() < 10 && Clock::now() - started < 5s) std::this_thread::sleep_for(1ms);
  for (uint32_t i = 0; i < kMessages; ++i) {
    const uint32_t bytes = i % 50 == 0 ? 100000 : (i * 131) % 5000;
    ASSERT_EQ(p.send(i, bytes), 0u) << "message " << i;
    if (i % 10 == 9) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_TRUE(p.sink.wait_messages(kMessages, 20000ms));
  std::this_thread::sleep_for(50ms);  // a duplicate would show up now
  const auto messages = p.sink.messages();
  ASSERT_EQ(messages.size(), size_t{kMessages});
  size_t by_poller = 0;
  for (const auto& d : p.taken()) by_poller += d.thread == poller_id ? 1 : 0;
  for (uint32_t i = 0; i < kMessages; ++i) {
    ASSERT_EQ(messages[i].header.tag, i) << "link order broken at " << i;
    EXPECT_EQ(messages[i].status, 0u);
    ASSERT_EQ(check_pattern(messages[i].data, i), std::string::npos) << "message " << i;
  }
  EXPECT_EQ(p.sink.overlap_violations.load(), 0);
  EXPECT_EQ(p.sink.ticket_violations.load(), 0);
  // Both consumers took part (otherwise the test proves nothing).
  EXPECT_GT(by_poller, 0u);
  EXPECT_LT(by_poller, size_t{kMessages});
}

TEST(ShmPoll, LinkEndIsReportedOnceAfterPolledMessages) {
  PolledPair p(with_lease(std::chrono::seconds(60)));
  ASSERT_NE(p.link, nullptr);
  start_polling(p);
  ASSERT_EQ(p.send(0, 8), 0u);
  ASSERT_TRUE(poll_until(p, 1, 5000ms));
  for (uint32_t i = 1; i <= 5; ++i) ASSERT_EQ(p.send(i, 200), 0u);
  // The sender closes: the parked reader wakes for it, delivers whatever
  // the polls left and reports the end once, after the messages.
  p.link.reset();
  p.sender->stop();
  p.receiver->poll();
  ASSERT_TRUE(p.sink.wait_failure(5000ms));
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(p.receiver->poll());
  EXPECT_EQ(p.sink.message_count(), 6u);
  EXPECT_EQ(p.sink.failures().size(), 1u);
}

TEST(ShmPoll, PollsRaceWithRingsComingAndGoing) {
  // Host threads read the list of polled rings without a lock while the
  // control thread adds a ring per new link and removes it once the link
  // ended. Links come and go under continuous polls from two threads: every
  // message arrives once, every link end is reported once, and (under the
  // sanitizers) no poll touches a list or ring that was freed.
  ShmTuning tuning;
  tuning.poll_lease = std::chrono::microseconds(500);
  RecordingSink sink;
  auto receiver = make_shm_transport(options(), tuning);
  receiver->start(sink);
  std::atomic<bool> polling{true};
  std::atomic<unsigned> polls{0};
  auto poll_loop = [&](unsigned pause_every) {
    unsigned n = 0;
    while (polling.load()) {
      receiver->poll();
      polls.fetch_add(1);
      if (++n % pause_every == 0) {
        receiver->end_polling();
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  };
  std::thread poller_a(poll_loop, 499u);
  std::thread poller_b(poll_loop, 1499u);
  struct StopPollers {
    std::atomic<bool>& polling;
    std::thread& a;
    std::thread& b;
    ~StopPollers() {
      polling = false;
      a.join();
      b.join();
    }
  } stop_pollers{polling, poller_a, poller_b};

  constexpr uint32_t kLinks = 12;
  constexpr uint32_t kMessagesPerLink = 20;
  for (uint32_t l = 0; l < kLinks; ++l) {
    RecordingSink sender_sink;
    auto sender = make_shm_transport(options(), tuning);
    sender->start(sender_sink);
    auto link = sender->connect(receiver->local_address(), in(5000ms));
    ASSERT_NE(link, nullptr) << "link " << l;
    for (uint32_t i = 0; i < kMessagesPerLink; ++i) {
      const uint32_t seed = l * 1000 + i;
      PatternWriter w(seed, (seed * 37) % 3000);
      ASSERT_EQ(link->send(make_header((seed * 37) % 3000, seed), w, in(5000ms)), 0u) << "message " << seed;
    }
    // Ends the link: its reader finishes and the control thread drops the
    // ring from the polled list while the pollers keep going.
    link.reset();
    sender->stop();
    ASSERT_TRUE(sink.wait_messages(size_t{(l + 1) * kMessagesPerLink}, 5000ms)) << "link " << l;
  }
  const auto end = Clock::now() + 10s;
  while (sink.failures().size() < kLinks && Clock::now() < end) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(100ms);  // the control thread sweeps the ended rings; a duplicate would show up
  EXPECT_GT(polls.load(), 0u);
  EXPECT_EQ(sink.failures().size(), size_t{kLinks});
  const auto messages = sink.messages();
  ASSERT_EQ(messages.size(), size_t{kLinks * kMessagesPerLink});
  std::vector<int> seen(kLinks * 1000, 0);
  for (const auto& m : messages) {
    ASSERT_LT(m.header.tag, kLinks * 1000);
    ++seen[m.header.tag];
    EXPECT_EQ(m.status, 0u);
    EXPECT_EQ(check_pattern(m.data, m.header.tag), std::string::npos) << "message " << m.header.tag;
  }
  for (uint32_t l = 0; l < kLinks; ++l)
    for (uint32_t i = 0; i < kMessagesPerLink; ++i) EXPECT_EQ(seen[l * 1000 + i], 1) << "message " << l * 1000 + i;
  polling = false;
  receiver->stop();
}

}  // namespace
}  // namespace accl::emu::test
