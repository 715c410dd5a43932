// SPDX-License-Identifier: Apache-2.0
//
// The handshake on a receiver's control socket: the record a sender
// announces its ring with (and the memfds that come with it), and the
// socket's address.
#pragma once

#include "hello_protocol.hpp"
#include "socket_io.hpp"
#include "transport.hpp"

#include <sys/socket.h>
#include <sys/un.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

struct ShmHello {
  HelloIdentity id;
  uint64_t ring_bytes = 0;
  uint32_t sender_pid = 0;  // diagnostics; the receiver trusts SO_PEERCRED, not this
  uint32_t gate_slot = 0;   // the receiver's writer slot in the sender's gate (with gate_bytes)
  char shm_name[96] = {};
  // Bytes of the sender's outbox, whose memfd comes with this message
  // (SCM_RIGHTS, first); 0: none.
  uint64_t outbox_bytes = 0;
  // Bytes of the sender's direct-write gate (DirectGate::kBytes), whose
  // memfd comes next; 0: none (the sender offers no windows).
  uint64_t gate_bytes = 0;
};

// Sends the hello as one record, with the descriptors in `pass_fds` (up to
// two; -1 entries are skipped) attached.
IoStatus send_hello(int fd, const ShmHello& hello, std::array<int, 2> pass_fds, Clock::time_point deadline,
                    const std::atomic<bool>* cancel);

// Receives one hello record and the descriptors that may come with it
// (`passed`, in order; the rest stay invalid). Returns the record's length
// (MSG_TRUNC: its real size), or -1 with errno.
ssize_t receive_hello(int fd, ShmHello& hello, std::array<UniqueFd, 2>& passed);

// The memfds that came with `hello` (receive_hello's `passed`): -1 where
// the hello announces none.
struct HelloMemfds {
  int outbox = -1;
  int gate = -1;
};
HelloMemfds hello_memfds(const ShmHello& hello, const std::array<UniqueFd, 2>& passed);

// Whether a receiver takes `hello` (`bytes`: the record's length, as
// receive_hello returned it) from a process of its own user: kHelloAccepted,
// or the status to refuse it with and `why`. `expected` is our credential;
// `check_secret` false (our secret is empty) accepts any.
HelloStatus check_hello(const ShmHello& hello, ssize_t bytes, const std::array<UniqueFd, 2>& passed,
                        const Credential& expected, bool check_secret, std::string& why);

// The control socket of the transport known as `a`, in the abstract
// namespace; `len` is the address's length.
sockaddr_un control_address(const NetAddress& a, socklen_t& len);

// A segment name a sender may announce: "/accl-" and printable characters,
// no further slash, NUL-terminated within `capacity`.
bool valid_shm_name(const char* name, size_t capacity);

}  // namespace shm
}  // namespace accl::emu::transport_detail
