// SPDX-License-Identifier: Apache-2.0
//
// Shared memory a transport maps: the ring segments (POSIX shm, named) and
// the memfds passed to peers (outbox, direct-write gate).
#pragma once

#include "ring_control.hpp"
#include "socket_io.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {

// Maps every page of a ring segment now, on both sides, and touches it.
// Left to first use, the sender faults in a fresh shared page (allocated and
// zeroed) and the receiver maps it again every 4 KiB of traffic: with a
// small message taking 128 bytes of ring, one ping-pong round trip in 32 paid
// a fault on each side, 40-60 us on this kind of VM, until the ring had
// wrapped once (8,000+ messages, more than an OSU run of one size sends).
// Populating the page tables alone halved that: the first access through
// them still cost a few microseconds (the hypervisor's own mapping), so
// each page is also touched here, written by the creator (the segment is
// new and all zero) and read by the side that opens it.
// `writable`: the mapping allows writes (a peer's outbox is mapped read-only,
// so its page tables are populated for reading).
void prefault_segment(void* base, size_t bytes, bool creator, bool writable = true);

// Allocates the pages of a new segment of `bytes`; false (errno set) when
// there is no memory for them (file system full, memory limit). A file
// system without fallocate leaves them to the first touch, as before. tmpfs
// gives up on a pending signal (EINTR) rather than restarting.
bool reserve_pages(int fd, size_t bytes);

// One mapped segment. Mappings are shared through a per-process registry so
// that a sender and a receiver in the same process use the same address: the
// ring's acquire/release pairs then also order the accesses for tools like
// ThreadSanitizer, which track memory by virtual address.
class Mapping {
 public:
  Mapping(std::string name, void* base, size_t bytes) : name_(std::move(name)), base_(base), bytes_(bytes) {}
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  RingControl& control() const { return *static_cast<RingControl*>(base_); }
  std::byte* data() const { return static_cast<std::byte*>(base_) + kControlBytes; }
  size_t ring_bytes() const { return bytes_ - kControlBytes; }
  const std::string& name() const { return name_; }

  // Creates a new segment (never an existing one) with an initialized
  // control page.
  static std::shared_ptr<Mapping> create(const std::string& name, size_t ring_bytes);

  // Maps a segment a sender announced; validates its size and control page.
  static std::shared_ptr<Mapping> open(const std::string& name, size_t ring_bytes, std::string& error);

 private:
  static bool validate(const std::shared_ptr<Mapping>& m, size_t ring_bytes, std::string& error);

  std::string name_;
  void* base_;
  size_t bytes_;
};

// A new memfd of `bytes` (whole pages), mapped read-write at `base`; invalid
// (and `base` null) when it cannot be made.
UniqueFd create_shared_memfd(const char* name, size_t bytes, void*& base);

// Maps a peer's memfd (passed with its hello) after checking its size and
// owner; nullptr with `error` set otherwise.
void* map_peer_memfd(int fd, size_t bytes, int prot, const char* what, std::string& error);

}  // namespace shm
}  // namespace accl::emu::transport_detail
