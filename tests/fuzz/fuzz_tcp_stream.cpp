// SPDX-License-Identifier: Apache-2.0
//
// fuzz_tcp_stream: arbitrary bytes into the TCP transport's handshake and
// framing parser, through a real socket. One emulated CCLO (TCP transport,
// no firmware thread: the harness plays the firmware) lives for the whole
// fuzzing session; every input opens one connection to it, sends
//   [a valid HelloIdentity, or the input's first 48 bytes] + the rest,
// in pieces of an input-chosen size, half-closes, and waits until the
// transport closes its end. By then the transport has made every Sink call
// for that connection, so the harness can inspect what arrived.
//
// Invariants (a violation aborts with "FUZZ INVARIANT VIOLATED"):
//   T1 the transport closes the connection after our half-close (no hang,
//      no connection kept half-parsed), within 10 s;
//   T2 a malformed or refused handshake gets a reply with a non-zero status
//      and no message of that connection reaches the sink;
//   T3 every arrival's payload is readable memory for header.count bytes;
//      rendezvous data is accepted only into the window the harness opened,
//      and only when the header matches it exactly;
//   T4 after releasing everything the overflow store is empty and every RX
//      buffer idle;
//   plus AddressSanitizer / UBSan in the transport thread and the sink.
#include "fuzz_common.hpp"

#include "emu_device.hpp"
#include "hello_protocol.hpp"

#include <accl/log.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <vector>

namespace {

using namespace accl;
using namespace accl::emu;
using accl::fuzz::Input;

constexpr uint32_t kRxCount = 8;
constexpr uint32_t kRxSize = 1024;
constexpr size_t kWindowBytes = 4096;
constexpr uint32_t kLoopback = 0x7F000001;

struct World {
  std::unique_ptr<EmuDevice> dev;
  std::vector<DeviceAllocation> rx;
  DeviceAllocation window_buf;
  uint16_t port = 0;
};

World& world() {
  static World* w = [] {
    auto* x = new World;
    EmuOptions o;
    o.transport = TransportKind::tcp;
    o.bind_address = "127.0.0.1";
    o.port = 0;
    o.bank_bytes = size_t{64} << 20;
    o.banks = 1;
    DeviceSettings s;
    s.start_firmware = false;
    s.io_timeout = std::chrono::seconds(2);
    s.overflow_bytes = 256 << 10;
    x->dev = std::make_unique<EmuDevice>(o, s);
    x->port = x->dev->address().port;
    for (uint32_t i = 0; i < kRxCount; ++i) x->rx.push_back(x->dev->allocate(kRxSize, MemoryKind::device, 0));
    x->window_buf = x->dev->allocate(kWindowBytes, MemoryKind::device, 0);
    return x;
  }();
  return *w;
}

void write_rx_table(World& w) {
  auto& x = w.dev->exchange_memory();
  x.write(abi::kRxBufferCountOffset, 0);
  x.write(abi::kRxBufferSizeOffset, kRxSize);
  for (uint32_t i = 0; i < kRxCount; ++i) {
    const uint32_t rec = abi::kRxBufferTableOffset + i * abi::kRxBufferRecordBytes;
    x.write(rec + 4 * abi::kRxStatus, abi::kRxIdle);
    x.write(rec + 4 * abi::kRxAddrLow, static_cast<uint32_t>(w.rx[i].address));
    x.write(rec + 4 * abi::kRxAddrHigh, static_cast<uint32_t>(w.rx[i].address >> 32));
  }
  x.write(abi::kRxBufferCountOffset, kRxCount);
}

// libFuzzer's -timeout watchdog is a SIGALRM without SA_RESTART: any
// blocking call of the harness may return EINTR, which says nothing about the
// transport, so each one below is retried.

// poll() that restarts after a signal (with the time left).
int poll_restarting(pollfd* p, int wait_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    const int rc = ::poll(p, 1, wait_ms);
    if (rc >= 0 || errno != EINTR) return rc;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    wait_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
  }
}

// A connect() interrupted by a signal goes on in the background: wait for
// it to finish and take its result instead of calling connect() again.
void connect_restarting(int fd, const sockaddr_in& sa) {
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0) return;
  FUZZ_CHECK(errno == EINTR, "connect: %s", std::strerror(errno));
  pollfd p{fd, POLLOUT, 0};
  FUZZ_CHECK(poll_restarting(&p, 10000) == 1, "connect: not established within 10 s after a signal");
  int error = 0;
  socklen_t len = sizeof error;
  FUZZ_CHECK(::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0, "connect: %s",
             std::strerror(error));
}

// Sends everything, half-closes, reads until the peer closes. Returns the
// bytes the transport sent back (the handshake reply).
std::vector<uint8_t> converse(uint16_t port, const std::vector<uint8_t>& bytes, size_t piece) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  FUZZ_CHECK(fd >= 0, "socket: %s", std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(kLoopback);
  connect_restarting(fd, sa);
  std::vector<uint8_t> reply;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto drain = [&](int wait_ms) {
    pollfd p{fd, POLLIN, 0};
    while (poll_restarting(&p, wait_ms) > 0) {
      uint8_t buf[256];
      ssize_t n;
      do n = ::recv(fd, buf, sizeof buf, 0);
      while (n < 0 && errno == EINTR);
      if (n <= 0) return true;  // closed (or reset) by the transport
      reply.insert(reply.end(), buf, buf + n);
      wait_ms = 0;
    }
    return false;
  };
  bool closed = false;
  for (size_t off = 0; off < bytes.size() && !closed;) {
    const size_t n = std::min(piece, bytes.size() - off);
    ssize_t sent;
    do sent = ::send(fd, bytes.data() + off, n, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (sent <= 0) {
      closed = true;  // the transport refused us and closed: fine
      break;
    }
    off += static_cast<size_t>(sent);
    closed = drain(0);
  }
  ::shutdown(fd, SHUT_WR);
  while (!closed) {
    FUZZ_CHECK(std::chrono::steady_clock::now() < deadline,
               "T1: the TCP transport kept the connection open 10 s after the peer half-closed it");
    closed = drain(100);
  }
  ::close(fd);
  return reply;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("ACCL_LOG_LEVEL", "off", 1);
  accl::log::reload_level();
  world();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& w = world();
  ReceiveSink& sink = w.dev->sink();
  // The transport is idle between inputs: start each from a clean sink.
  sink.reset();
  w.dev->streams().clear();
  write_rx_table(w);

  Input in(data, size);
  const uint8_t flags = in.u8();
  const size_t piece = 1 + (in.u8() % 4 == 0 ? 4096 : in.u8() % 97);
  // Who we claim to be in the handshake: the sink sees messages as from this.
  NetAddress claimed{flags & 4 ? 0x0A000001u : kLoopback, static_cast<uint16_t>(40000 + (flags >> 4))};
  std::vector<uint8_t> bytes;
  const bool valid_hello = (flags & 1) != 0;
  if (valid_hello) {
    transport_detail::HelloIdentity id = transport_detail::make_identity(transport_detail::kHelloTcp, claimed, {});
    if (flags & 8) id.listen_ip = 0;  // "I listen on 0.0.0.0": the transport uses the socket's address
    bytes.resize(sizeof id);
    std::memcpy(bytes.data(), &id, sizeof id);
  }
  if (valid_hello && (flags & 8)) claimed.ip = kLoopback;

  // A window for rendezvous data from the claimed peer.
  fw::Window win;
  win.peer_ip = claimed.ip;
  win.peer_port = claimed.port;
  win.ctx = 2;
  win.rid = 7;
  win.addr = w.window_buf.address + 64 * (in.u8() % 8);
  win.host = false;
  win.bytes = in.u16() % (kWindowBytes - 512);
  FUZZ_CHECK(sink.open_window(win) == 0, "could not open the harness window");

  // The rest: raw stream bytes, or (flags & 2) a sequence of messages whose
  // headers come from the input and whose payload length matches the header.
  if (flags & 2) {
    while (!in.empty()) {
      abi::WireHeader h{};
      in.bytes(&h, sizeof h);
      if (h.msg_type % 3 == 1) {  // aim at the window, mutated by the low bits of the raw fields
        h.msg_type = abi::kMsgRendezvousData;
        h.ctx = win.ctx ^ (h.tag & 1);
        h.rid = win.rid ^ (h.tag & 2);
        h.vaddr = win.addr + (h.tag & 4 ? 64 : 0);
        h.host = 0;
        h.count = static_cast<uint32_t>(win.bytes) + (h.tag & 8 ? 64 : 0);
        h.strm = 0;
      } else {
        h.count %= 3000;
      }
      const size_t at = bytes.size();
      bytes.resize(at + sizeof h + h.count);
      std::memcpy(bytes.data() + at, &h, sizeof h);
      for (uint32_t i = 0; i < h.count; ++i) bytes[at + sizeof h + i] = static_cast<uint8_t>(i * 13 + h.seqn);
    }
  } else {
    size_t got = 0;
    const uint8_t* rest = in.take(in.left(), got);
    bytes.insert(bytes.end(), rest, rest + got);
  }

  const std::vector<uint8_t> reply = converse(w.port, bytes, piece);

  // T2: what the handshake said.
  bool accepted = false;
  if (bytes.size() >= sizeof(transport_detail::HelloIdentity)) {
    transport_detail::HelloIdentity id;
    std::memcpy(&id, bytes.data(), sizeof id);
    const auto expected = transport_detail::check_identity(id, transport_detail::kHelloTcp, {}, false);
    accepted = expected == transport_detail::kHelloAccepted;
    // A refused peer that sent more than the handshake may lose the reply:
    // the transport closes with unread bytes, so the kernel resets the
    // connection, which discards data not yet read on our side.
    const bool may_lose = !accepted && bytes.size() > sizeof id;
    FUZZ_CHECK(reply.size() == sizeof(transport_detail::HelloReply) || (may_lose && reply.empty()),
               "T2: handshake reply of %zu bytes (want 8)", reply.size());
    if (!reply.empty()) {
      transport_detail::HelloReply r;
      std::memcpy(&r, reply.data(), sizeof r);
      FUZZ_CHECK(r.magic == transport_detail::kHelloMagic, "T2: reply without magic");
      FUZZ_CHECK(r.status == expected, "T2: handshake answered %u, expected %u", r.status, expected);
    }
  } else {
    FUZZ_CHECK(reply.empty(), "T2: reply to an incomplete handshake");
  }

  // Firmware side: everything that arrived.
  fw::Arrival a;
  bool window_used = false;
  while (sink.pop_arrival(a)) {
    if (a.kind == fw::ArrivalKind::link_error) {
      FUZZ_CHECK(accepted, "T2: link_failed reported for a connection that never completed its handshake");
      continue;
    }
    FUZZ_CHECK(accepted, "T2: a message arrived over a connection whose handshake was refused");
    const abi::WireHeader& h = a.header;
    if (a.kind == fw::ArrivalKind::rendezvous_done && a.status == 0) {
      FUZZ_CHECK(!window_used, "T3: window written twice");
      FUZZ_CHECK(h.msg_type == abi::kMsgRendezvousData && a.peer_ip == win.peer_ip && a.peer_port == win.peer_port &&
                     h.ctx == win.ctx && h.rid == win.rid && h.vaddr == win.addr && h.host == 0 && h.count == win.bytes,
                 "T3: rendezvous data accepted that does not match the window (ctx %u rid %u vaddr 0x%llx count %u)",
                 h.ctx, h.rid, static_cast<unsigned long long>(h.vaddr), h.count);
      window_used = true;
    }
    if (a.kind == fw::ArrivalKind::message && a.status == 0 && h.count > 0) {
      const std::byte* p = nullptr;
      FUZZ_CHECK(w.dev->memory().resolve_source(a.payload_addr, a.payload_host, h.count, p) == 0,
                 "T3: payload of %u bytes at 0x%llx is not readable", h.count,
                 static_cast<unsigned long long>(a.payload_addr));
      volatile std::byte sink_read = p[h.count - 1];  // ASan: the whole payload is addressable
      (void)sink_read;
    }
    sink.release_payload(a);
  }
  if (!window_used) sink.close_window(win);

  // T4: nothing leaked.
  FUZZ_CHECK(w.dev->memory().overflow().used_bytes() == 0, "T4: %llu overflow bytes leaked",
             static_cast<unsigned long long>(w.dev->memory().overflow().used_bytes()));
  auto& x = w.dev->exchange_memory();
  for (uint32_t i = 0; i < kRxCount; ++i) {
    const uint32_t st = x.read(abi::kRxBufferTableOffset + i * abi::kRxBufferRecordBytes + 4 * abi::kRxStatus);
    FUZZ_CHECK(st == abi::kRxIdle, "T4: RX buffer %u left in status %u", i, st);
  }
  return 0;
}
