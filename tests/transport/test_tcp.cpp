// SPDX-License-Identifier: Apache-2.0
//
// TCP transport: the shared conformance suite plus wire-level tests with raw
// sockets (strangers, torn streams, bind address).
#include "conformance.hpp"

#include <netinet/tcp.h>

namespace accl::emu::test {
namespace {

using namespace transport_detail;

ACCL_TRANSPORT_CONFORMANCE(Tcp, "tcp", [](const TransportOptions& o) { return make_tcp_transport(o); });

// A TCP transport started into `sink` (which outlives it), for raw sockets
// to talk to.
std::unique_ptr<Transport> started_tcp(RecordingSink& sink, const TransportOptions& o, const TcpTuning& tuning = {}) {
  auto t = make_tcp_transport(o, tuning);
  t->start(sink);
  return t;
}

// A raw client socket connected to `to`.
UniqueFd raw_connect(const NetAddress& to) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa = to_sockaddr(to);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) fd.reset();
  timeval tv{5, 0};
  if (fd) ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Reads until the peer closes; true if it did within the receive timeout.
bool closed_by_peer(int fd) {
  char buf[256];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

TEST(TcpWire, GarbageHandshakeIsRefused) {
  RecordingSink sink;
  auto t = started_tcp(sink, options());
  UniqueFd fd = raw_connect(t->local_address());
  ASSERT_TRUE(fd);
  char garbage[sizeof(HelloIdentity)];
  std::memset(garbage, 0x5A, sizeof garbage);
  ASSERT_EQ(::send(fd.get(), garbage, sizeof garbage, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof garbage));
  HelloReply reply{};
  ASSERT_EQ(::recv(fd.get(), &reply, sizeof reply, MSG_WAITALL), static_cast<ssize_t>(sizeof reply));
  EXPECT_EQ(reply.status, kHelloMalformed);
  EXPECT_TRUE(closed_by_peer(fd.get()));
  EXPECT_EQ(sink.calls, 0u);
}

TEST(TcpWire, ForgedCredentialIsRefusedBeforeAnyMessage) {
  RecordingSink sink;
  auto t = started_tcp(sink, options("the secret"));
  UniqueFd fd = raw_connect(t->local_address());
  ASSERT_TRUE(fd);
  HelloIdentity id = make_identity(kHelloTcp, loopback(4242), make_credential("a guess"));
  abi::WireHeader h = make_header(16, 1);
  char payload[16] = {};
  // Pipelined: header and payload right behind the handshake must not leak.
  ::send(fd.get(), &id, sizeof id, MSG_NOSIGNAL);
  ::send(fd.get(), &h, sizeof h, MSG_NOSIGNAL);
  ::send(fd.get(), payload, sizeof payload, MSG_NOSIGNAL);
  HelloReply reply{};
  ASSERT_EQ(::recv(fd.get(), &reply, sizeof reply, MSG_WAITALL), static_cast<ssize_t>(sizeof reply));
  EXPECT_EQ(reply.status, kHelloBadSecret);
  EXPECT_TRUE(closed_by_peer(fd.get()));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(sink.calls, 0u);
}

TEST(TcpWire, SilentStrangerIsDroppedAfterTheHandshakeTimeout) {
  RecordingSink sink;
  TcpTuning tuning;
  tuning.handshake_timeout = 200ms;
  auto t = started_tcp(sink, options(), tuning);
  UniqueFd fd = raw_connect(t->local_address());
  ASSERT_TRUE(fd);
  auto t0 = Clock::now();
  EXPECT_TRUE(closed_by_peer(fd.get()));
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_EQ(sink.calls, 0u);
}

// Performs a valid handshake by hand, then tears the stream.
TEST(TcpWire, PeerCloseOrResetMidMessageIsReported) {
  for (bool reset : {false, true}) {
    SCOPED_TRACE(reset ? "reset" : "close");
    RecordingSink sink;
    auto t = started_tcp(sink, options("s"));
    UniqueFd fd = raw_connect(t->local_address());
    ASSERT_TRUE(fd);
    HelloIdentity id = make_identity(kHelloTcp, loopback(5555), make_credential("s"));
    ::send(fd.get(), &id, sizeof id, MSG_NOSIGNAL);
    HelloReply reply{};
    ASSERT_EQ(::recv(fd.get(), &reply, sizeof reply, MSG_WAITALL), static_cast<ssize_t>(sizeof reply));
    ASSERT_EQ(reply.status, kHelloAccepted);
    // One whole message, then a header promising 1 MiB and 1000 bytes of it.
    abi::WireHeader h0 = make_header(100, 0);
    std::vector<std::byte> p0(100);
    fill_pattern(p0.data(), 0, 0, p0.size());
    ::send(fd.get(), &h0, sizeof h0, MSG_NOSIGNAL);
    ::send(fd.get(), p0.data(), p0.size(), MSG_NOSIGNAL);
    abi::WireHeader h1 = make_header(1 << 20, 1);
    std::vector<std::byte> p1(1000);
    ::send(fd.get(), &h1, sizeof h1, MSG_NOSIGNAL);
    ::send(fd.get(), p1.data(), p1.size(), MSG_NOSIGNAL);
    ASSERT_TRUE(sink.wait_messages(1, 5000ms));
    if (reset) {
      linger lg{1, 0};  // close() sends RST
      ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    fd.reset();
    ASSERT_TRUE(sink.wait_failure(5000ms));
    ASSERT_TRUE(sink.wait_messages(2, 5000ms));
    auto got = sink.messages();
    EXPECT_EQ(got[0].status, 0u);
    EXPECT_TRUE(got[0].from == loopback(5555));
    EXPECT_EQ(check_pattern(got[0].data, 0), std::string::npos);
    EXPECT_EQ(got[1].status, abi::kLinkError);
    auto failures = sink.failures();
    EXPECT_TRUE(failures[0].first == loopback(5555));
    EXPECT_EQ(failures[0].second, abi::kLinkError);
  }
}

TEST(TcpWire, ListensOnlyOnTheBindAddress) {
  RecordingSink sink;
  auto t = started_tcp(sink, options());
  // 127.0.0.2 is this host too, but we bound 127.0.0.1 only.
  UniqueFd fd = raw_connect(NetAddress{0x7F000002u, t->local_address().port});
  EXPECT_FALSE(fd);
}

}  // namespace
}  // namespace accl::emu::test
