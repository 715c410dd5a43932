// SPDX-License-Identifier: Apache-2.0
//
// One UDP socket of the transport, with the test-only fault injection.
#pragma once

#include "packet.hpp"

#include "socket_io.hpp"
#include "transport_tuning.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstring>
#include <mutex>
#include <vector>

namespace accl::emu::transport_detail {
namespace udp __attribute__((visibility("hidden"))) {

// One UDP socket. The send socket is shared with the links, so a link
// outliving its transport never touches a closed descriptor; it also
// applies the test-only fault injection to data datagrams.
class UdpSocket {
 public:
  UdpSocket(UniqueFd fd, const UdpTuning& tuning) : fd_(std::move(fd)), faults_(tuning) {}
  int fd() const { return fd_.get(); }

  void send_control(const sockaddr_in& to, PacketHeader h, const void* body = nullptr, size_t bytes = 0) {
    std::byte buf[sizeof(PacketHeader) + 64];
    h.length = static_cast<uint32_t>(bytes);
    std::memcpy(buf, &h, sizeof h);
    if (bytes > 0) std::memcpy(buf + sizeof h, body, bytes);
    seal(buf, sizeof h + bytes);
    transmit(to, buf, sizeof h + bytes);
  }

  void send_data(const sockaddr_in& to, const std::byte* datagram, size_t bytes) {
    const uint64_t n = ++data_sent_;
    // "1 in k" chosen by a hash of the datagram count, not every k-th:
    // a strict period lines up with retransmission rounds of the same size
    // and would hit the same datagram forever.
    auto every = [n](uint32_t k, uint64_t salt) { return k != 0 && mix64(n * 4 + salt) % k == 0; };
    if (every(faults_.drop_every, 0)) return;
    if (every(faults_.corrupt_every, 1)) {
      std::vector<std::byte> bad(datagram, datagram + bytes);
      bad[bytes / 2] ^= std::byte{0x10};  // after sealing: the CRC no longer matches
      transmit(to, bad.data(), bytes);
    } else if (every(faults_.reorder_every, 2)) {
      std::lock_guard lock(held_mutex_);
      held_.assign(datagram, datagram + bytes);  // goes out after the next one
      held_to_ = to;
      return;
    } else {
      transmit(to, datagram, bytes);
      if (every(faults_.duplicate_every, 3)) transmit(to, datagram, bytes);
    }
    if (faults_.reorder_every != 0) {
      std::lock_guard lock(held_mutex_);
      if (!held_.empty()) {
        transmit(held_to_, held_.data(), held_.size());
        held_.clear();
      }
    }
  }

 private:
  // A full socket buffer waits briefly; anything else counts as a lost
  // datagram, which the reliability layer repairs or reports.
  void transmit(const sockaddr_in& to, const std::byte* data, size_t bytes) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      ssize_t n = ::sendto(fd_.get(), data, bytes, MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&to), sizeof to);
      if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ENOBUFS)) return;
      pollfd p{fd_.get(), POLLOUT, 0};
      ::poll(&p, 1, 1);
    }
  }

  UniqueFd fd_;
  const UdpTuning faults_;
  std::atomic<uint64_t> data_sent_{0};
  std::mutex held_mutex_;
  std::vector<std::byte> held_;
  sockaddr_in held_to_{};
};

}  // namespace udp
}  // namespace accl::emu::transport_detail
