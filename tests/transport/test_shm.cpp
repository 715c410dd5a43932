// SPDX-License-Identifier: Apache-2.0
//
// Shared-memory transport: the shared conformance suite plus ring streaming,
// name cleanup, reachability, and peer-process death (this binary re-runs
// itself as the peer process: see main()).
#include "conformance.hpp"

#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <set>

extern char** environ;

namespace accl::emu::test {
namespace {

using namespace transport_detail;

ACCL_TRANSPORT_CONFORMANCE(Shm, "shm", [](const TransportOptions& o) { return make_shm_transport(o); });

// Same suite over a tiny ring: every large payload wraps and streams. Its
// size is no power of two (rings are whole pages; ShmPoll covers 64 KiB).
ACCL_TRANSPORT_CONFORMANCE(ShmTinyRing, "shm", [](const TransportOptions& o) {
  ShmTuning tuning;
  tuning.ring_bytes = 68 << 10;
  tuning.max_piece_bytes = 16 << 10;
  return make_shm_transport(o, tuning);
});

// Our process's segment names (accl-<hash>-<ip>-<port>-<port>-<pid>-<n>):
// other test binaries running at the same time create and unlink their own.
std::set<std::string> accl_shm_names() {
  std::set<std::string> names;
  const std::string ours = "-" + std::to_string(::getpid()) + "-";
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      const size_t pid_at = name.rfind('-', name.rfind('-') - 1);  // npos-safe: names have several dashes
      if (name.rfind("accl-", 0) == 0 && pid_at != std::string::npos && name.compare(pid_at, ours.size(), ours) == 0)
        names.insert(name);
    }
    ::closedir(d);
  }
  return names;
}

TEST(Shm, NoSegmentNamesAreLeftBehind) {
  const auto before = accl_shm_names();
  {
    auto p = std::make_unique<Pair>();
    p->a = make_shm_transport(options());
    p->b = make_shm_transport(options());
    p->a->start(p->sink_a);
    p->b->start(p->sink_b);
    auto link = p->a->connect(p->b->local_address(), in(5000ms));
    ASSERT_NE(link, nullptr);
    // Unlinked as soon as both sides mapped it.
    EXPECT_EQ(accl_shm_names(), before);
    PatternWriter w(0, 1000);
    ASSERT_EQ(link->send(make_header(1000, 0), w, in(5000ms)), 0u);
    ASSERT_TRUE(p->sink_b.wait_messages(1, 5000ms));
  }
  EXPECT_EQ(accl_shm_names(), before);
}

TEST(Shm, OtherHostsAreNotReachableAtOnce) {
  RecordingSink sink;
  auto t = make_shm_transport(options());
  t->start(sink);
  auto t0 = Clock::now();
  EXPECT_EQ(t->connect(NetAddress{0xC0000201u, 5000}, in(5000ms)), nullptr);  // 192.0.2.1 (TEST-NET-1)
  EXPECT_LT(Clock::now() - t0, 100ms);
}

TEST(Shm, LocalPeerWithoutEndpointIsUnreachableAfterTheGrace) {
  RecordingSink sink;
  ShmTuning tuning;
  tuning.local_connect_grace = 200ms;
  auto t = make_shm_transport(options(), tuning);
  t->start(sink);
  auto t0 = Clock::now();
  EXPECT_EQ(t->connect(loopback(free_port()), in(5000ms)), nullptr);
  auto took = Clock::now() - t0;
  EXPECT_GE(took, 190ms);
  EXPECT_LT(took, 1500ms);
}

// Counts messages and discards their payload: no allocation per message,
// so the only memory a stream of messages touches is the ring's.
class CountingSink final : public Sink {
 public:
  std::byte* begin_message(const NetAddress&, const abi::WireHeader& header, ReceiveTicket&) override {
    return header.count == 0 ? scratch_ : nullptr;
  }
  void end_message(const NetAddress&, const abi::WireHeader&, ReceiveTicket&, uint32_t) override {
    ended.fetch_add(1, std::memory_order_release);
  }
  void link_failed(const NetAddress&, uint32_t) override {}
  bool wait_for(uint64_t n, std::chrono::milliseconds limit) const {
    const auto end = Clock::now() + limit;
    while (ended.load(std::memory_order_acquire) < n) {
      if (Clock::now() >= end) return false;
      std::this_thread::sleep_for(100us);
    }
    return true;
  }
  std::atomic<uint64_t> ended{0};

 private:
  std::byte scratch_[64]{};
};

// Both sides map and touch the whole ring when the link opens: a stream of
// small messages then takes no page fault on its way through fresh pages of
// the ring (before, one every 4 KiB of ring on each side: every 32nd round
// trip of an 8-byte ping-pong, tens of microseconds each on a VM).
TEST(Shm, RingPagesAreMappedWhenTheLinkOpens) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  // Their shadow memory (and ASan's fake stacks) fault in pages of their own.
  GTEST_SKIP() << "sanitizer shadow memory takes page faults of its own";
#else
  CountingSink sink_a, sink_b;
  auto a = make_shm_transport(options());
  auto b = make_shm_transport(options());
  a->start(sink_a);
  b->start(sink_b);
  auto link = a->connect(b->local_address(), in(5000ms));
  ASSERT_NE(link, nullptr);
  PatternWriter first(0, 64);
  ASSERT_EQ(link->send(make_header(64, 0), first, in(5000ms)), 0u);
  ASSERT_TRUE(sink_b.wait_for(1, 5000ms));
  // 2,000 messages of a 64-byte header and 64 bytes of payload: 250 KiB of
  // ring, 62 pages that neither side has written or read since the link opened.
  constexpr uint64_t kMessages = 2000;
  const long before = minor_faults();
  for (uint64_t i = 1; i <= kMessages; ++i) {
    PatternWriter w(static_cast<uint32_t>(i), 64);
    ASSERT_EQ(link->send(make_header(64, static_cast<uint32_t>(i)), w, in(5000ms)), 0u);
  }
  ASSERT_TRUE(sink_b.wait_for(kMessages + 1, 5000ms));
  EXPECT_LT(minor_faults() - before, 16);
#endif
}

TEST(Shm, SecondTransportOnTheSameAddressIsRejected) {
  auto t = make_shm_transport(options());
  EXPECT_THROW(make_shm_transport(options("test-secret", t->local_address().port)), std::system_error);
}

// ---- peer processes ---------------------------------------------------------

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;  // the child's stdout

  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (out != nullptr) ::fclose(out);
  }
  int wait() {
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return status;
  }
};

std::unique_ptr<Child> spawn_self(const std::vector<std::string>& args) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return nullptr;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::vector<std::string> all = {"/proc/self/exe"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  auto child = std::make_unique<Child>();
  int rc = ::posix_spawn(&child->pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  child->out = ::fdopen(pipe_fds[0], "r");
  if (rc != 0) child->pid = -1;
  return child;
}

// The child connects to us, sends three whole messages, and dies in the
// middle of the fourth.
TEST(ShmPeerProcess, SenderDeathMidMessageIsReported) {
  RecordingSink sink;
  auto t = make_shm_transport(options("proc-secret"));
  t->start(sink);
  auto child = spawn_self({"--child-send-and-die", std::to_string(t->local_address().port)});
  ASSERT_NE(child, nullptr);
  ASSERT_GT(child->pid, 0);
  ASSERT_TRUE(sink.wait_failure(20000ms));
  child->wait();
  ASSERT_TRUE(sink.wait_messages(4, 5000ms));
  auto got = sink.messages();
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].status, 0u);
    EXPECT_EQ(check_pattern(got[i].data, got[i].header.tag), std::string::npos);
  }
  EXPECT_EQ(got[3].status, abi::kLinkError);
  EXPECT_EQ(sink.failures()[0].second, abi::kLinkError);
}

// The child receives but its sink stalls; we fill the ring, then kill it.
TEST(ShmPeerProcess, ReceiverDeathReleasesABlockedSender) {
  RecordingSink sink;
  auto t = make_shm_transport(options("proc-secret"));
  t->start(sink);
  auto child = spawn_self({"--child-stall"});
  ASSERT_NE(child, nullptr);
  ASSERT_GT(child->pid, 0);
  unsigned port = 0;
  ASSERT_EQ(std::fscanf(child->out, "PORT %u", &port), 1);
  auto link = t->connect(loopback(static_cast<uint16_t>(port)), in(10000ms));
  ASSERT_NE(link, nullptr);
  std::atomic<bool> blocked{false};
  auto sender = std::async(std::launch::async, [&] {
    uint32_t rc = 0;
    for (uint32_t i = 0; rc == 0 && i < 100; ++i) {
      PatternWriter w(i, 4 << 20);
      // Rings are at most 8 MiB, so with the receiver stalled the sender
      // blocks in message 0 or 1 at the latest.
      blocked = true;
      rc = link->send(make_header(4 << 20, i), w, in(30000ms));
    }
    return rc;
  });
  for (int i = 0; i < 1000 && !blocked; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(blocked);
  std::this_thread::sleep_for(200ms);
  const auto killed_at = Clock::now();
  ::kill(child->pid, SIGKILL);
  ASSERT_EQ(sender.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(sender.get(), abi::kLinkError);
  EXPECT_LT(Clock::now() - killed_at, 3s);
}

int child_send_and_die(uint16_t port) {
  RecordingSink sink;
  auto t = make_shm_transport(options("proc-secret"));
  t->start(sink);
  auto link = t->connect(loopback(port), in(10000ms));
  if (!link) return 2;
  for (uint32_t i = 0; i < 3; ++i) {
    PatternWriter w(i, 100000);
    if (link->send(make_header(100000, i), w, in(10000ms)) != 0) return 3;
  }
  PatternWriter dying(3, 4 << 20);
  dying.after_piece = [](size_t offset, size_t) {
    if (offset >= (1 << 20)) ::_exit(0);
  };
  link->send(make_header(4 << 20, 3), dying, in(10000ms));
  return 4;
}

int child_stall() {
  RecordingSink sink;
  sink.begin_hook = [](const abi::WireHeader&) { std::this_thread::sleep_for(60s); };
  auto t = make_shm_transport(options("proc-secret"));
  t->start(sink);
  std::printf("PORT %u\n", unsigned{t->local_address().port});
  std::fflush(stdout);
  std::this_thread::sleep_for(60s);
  ::_exit(0);  // never reached in the test: the parent kills us
}

}  // namespace
}  // namespace accl::emu::test

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "--child-send-and-die")
    return accl::emu::test::child_send_and_die(static_cast<uint16_t>(std::stoi(argv[2])));
  if (argc >= 2 && std::string(argv[1]) == "--child-stall") return accl::emu::test::child_stall();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
