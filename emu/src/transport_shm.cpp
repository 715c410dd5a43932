// SPDX-License-Identifier: Apache-2.0
//
// Shared-memory transport: the fast path between processes on one host.
//
// Per directed pair, the sender creates a POSIX shm segment
//   /accl-<secret hash>-<receiver ip>-<receiver port>-<sender port>-<pid>-<n>
// (shm_segments.hpp; a new transport removes those of dead processes)
// (mode 0600): one 4 KiB control page plus a data ring of whole pages. It
// announces the segment over the receiver's control socket, a Unix
// SOCK_SEQPACKET socket at the abstract address "accl-emu-shm-v1/<ip>:<port>"
// of the receiver's NetAddress:
//   sender   -> receiver  ShmHello (identity + credential, ring size, name)
//   receiver -> sender    HelloReply
// The receiver checks the peer's uid (SO_PEERCRED) and credential, maps the
// segment and starts a reader thread for it; the sender then unlinks the
// name (both sides hold the mapping), so nothing is left in /dev/shm even if
// a process dies later. The control socket stays open for the life of the
// link: its hang-up is how each side learns that the other process died.
//
// Ring: single producer, single consumer, monotonically increasing 64-bit
// byte positions (head: published by the sender, tail: released by the
// reader). A message is a 64-byte WireHeader followed by the payload padded
// to 64 bytes. The sender publishes the header together with the first
// payload piece and then piece by piece (at most max_piece_bytes), so
// payloads larger than the ring stream through it while the reader copies
// out of it into the sink's memory. Waiting spins for ACCL_EMU_SPIN_US, then
// sleeps on a shared futex word with a bounded timeout. Host threads that wait for a call may consume messages
// themselves, also ones still streaming in (Transport::poll; see InboundRing and PollActivity below).
// A payload that several sends repeat goes through the sender's outbox instead of every ring (see Outbox).
// A rendezvous payload for one peer is written by the sender straight into the receiver's window (see DirectGate).
#include "aligned_buffer.hpp"
#include "hello_protocol.hpp"
#include "job_secret.hpp"
#include "peer_links.hpp"
#include "shm_segments.hpp"
#include "socket_address.hpp"
#include "socket_io.hpp"
#include "thread_name.hpp"
#include "timed_mutex.hpp"
#include "transport_tuning.hpp"

#include <accl/spin.hpp>

#include <fcntl.h>
#include <signal.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>

#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

namespace accl::emu {
namespace {

using namespace transport_detail;

constexpr uint32_t kRingMagic = 0x474E4952;  // "RING"
constexpr uint32_t kRingVersion = 3;
constexpr size_t kControlBytes = 4096;
constexpr size_t kPageBytes = 4096;  // rings are whole pages (so every 64-byte slot is whole too)
constexpr size_t kMinRingBytes = size_t{64} << 10;
constexpr size_t kMaxRingBytes = size_t{1} << 30;
// Longest single futex sleep: a safety net only, every state change wakes
// the sleeper explicitly.
constexpr auto kSleepSlice = std::chrono::milliseconds(100);
// How often a sender looks at the control socket for a dead receiver.
constexpr auto kLivenessCheck = std::chrono::milliseconds(1);

// CLOCK_MONOTONIC_COARSE, in ns: a quarter of the cost of steady_clock on
// every send, and its few milliseconds of granularity suit the liveness
// check's interval.
int64_t coarse_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}
// How long a reader thread that sends sleeps between polls of its own
// process's inbound rings while it waits for room (ShmLink::wait_space).
constexpr auto kReaderSendSlice = std::chrono::microseconds(100);

// Set on the inbound rings' reader threads.
thread_local bool t_shm_reader_thread = false;

enum ProducerState : uint32_t { kProducerOpen = 0, kProducerClosed = 1, kProducerAborted = 2 };
enum ConsumerState : uint32_t { kConsumerOpen = 0, kConsumerClosed = 1 };
// consumer_sleeping: awake (0), asleep until the next publish (1), or parked
// while host threads poll (2): wake it only if their poll lease is over.
enum ConsumerSleeping : uint32_t { kConsumerAwake = 0, kConsumerAsleep = 1, kConsumerParked = 2 };
constexpr int64_t kLeaseNone = 0;  // a fresh (zeroed) segment has no lease
constexpr int64_t kLeaseHeld = INT64_MAX;
// A lease end that is a time (neither none nor held).
constexpr bool lease_timed(int64_t end) { return end != kLeaseNone && end != kLeaseHeld; }

// The clock of poll leases, in ns: the receiver's PollActivity and the
// senders that read its lease end from the ring use the same one.
int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// The control page at the start of each segment. Producer and consumer
// words live on separate cache lines.
struct RingControl {
  uint32_t magic;
  uint32_t version;
  uint64_t ring_bytes;
  uint32_t sender_pid;  // diagnostics (ipcs-style inspection of a live segment)
  uint32_t reserved;

  alignas(64) std::atomic<uint64_t> head;  // bytes published by the producer
  std::atomic<uint32_t> data_futex;        // bumped to wake the consumer
  std::atomic<uint32_t> consumer_sleeping;
  std::atomic<uint32_t> producer_state;    // ProducerState

  alignas(64) std::atomic<uint64_t> tail;  // bytes released by the consumer
  std::atomic<uint32_t> space_futex;       // bumped to wake the producer
  std::atomic<uint32_t> producer_sleeping;

  // Apart from tail: the producer reads it on every send, and the line stays
  // shared in both caches because it changes only when the consumer closes.
  // (On tail's line each read would pull the line from the consumer's core.)
  alignas(64) std::atomic<uint32_t> consumer_state;  // ConsumerState

  // The receiving process's poll lease (PollActivity), for a producer that
  // finds the reader parked (consumer_sleeping == kConsumerParked): when the
  // lease ends (steady-clock ns, the same clock in every process of a host),
  // kLeaseNone (no lease) or kLeaseHeld (a driving loop holds it). Written
  // by the receiving process a few times per lease at most, on a line of its
  // own (ShmTransport::publish_lease). It may say the lease ends up to an
  // eighth of a lease earlier than it does (a reader woken early parks
  // again), never later. Processes in different time namespaces would not
  // share the clock: the emulator's processes of one job share a host and
  // namespace.
  alignas(64) std::atomic<int64_t> consumer_lease_end;
};
static_assert(sizeof(RingControl) <= kControlBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "ring words are shared between processes: they must be lock-free");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex words are 32-bit");

// ---- futex (shared, not FUTEX_PRIVATE: the words live in a shared mapping)

void futex_wait(std::atomic<uint32_t>& word, uint32_t expected, std::chrono::microseconds timeout) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
  ts.tv_nsec = static_cast<long>((timeout.count() % 1000000) * 1000);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Unconditional wake: for rare events (close, abort, stop).
void wake(std::atomic<uint32_t>& word) {
  word.fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(word);
}

// Wake after publishing progress; costs a syscall only when the other side
// sleeps. Dekker-style handshake on `sleeping` with read-modify-writes (not
// fences, which ThreadSanitizer cannot follow): both RMWs are ordered in the
// word's modification order, so either ours reads the sleeper's 1 and wakes
// it, or its exchange reads our write and thereby sees our progress.
void notify(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleeping) {
  if (sleeping.fetch_add(0, std::memory_order_acq_rel) != 0) wake(word);
}

// notify() for the consumer of a ring, after publishing: a reader parked
// under the receiving process's poll lease is left to the pollers while the
// lease runs and woken once it is over, so a message that comes after the
// polls stopped is taken at once (same handshake as notify()).
void notify_consumer(RingControl& ctl) {
  const uint32_t sleeping = ctl.consumer_sleeping.fetch_add(0, std::memory_order_acq_rel);
  if (sleeping == kConsumerAwake) return;
  if (sleeping == kConsumerParked) {
    const int64_t end = ctl.consumer_lease_end.load(std::memory_order_acquire);
    if (end == kLeaseHeld || (lease_timed(end) && steady_now_ns() < end)) return;
  }
  wake(ctl.data_futex);
}

template <class Ready>
void sleep_until(std::atomic<uint32_t>& word, std::atomic<uint32_t>& sleeping, Ready ready,
                 std::chrono::microseconds timeout) {
  sleeping.exchange(1, std::memory_order_acq_rel);
  // A wake between here and futex_wait changes `word`: the wait returns.
  const uint32_t seen = word.load(std::memory_order_acquire);
  if (!ready() && timeout.count() > 0) futex_wait(word, seen, timeout);
  sleeping.store(0, std::memory_order_relaxed);
}

// Polls `ready` for up to `budget` (ACCL_EMU_SPIN_US) before the caller goes
// to sleep: a message that follows within microseconds is taken without a
// futex round trip. Yields now and then so that, with more threads than
// cores, the thread we wait for can run on this core. (Not the adaptive
// SpinBudget of accl/spin.hpp: streaming a payload through the ring, reader and
// sender wait for each other piece by piece, and a budget that shrinks after
// late pieces sent them to the futex: 4 MiB osu_bw lost a third.)
template <class Ready>
bool spin_until(Ready ready, std::chrono::microseconds budget) {
  // Usually ready at once (a small message finds room in the ring): no
  // clock read then.
  if (ready()) return true;
  if (budget.count() <= 0) return false;
  const auto end = Clock::now() + budget;
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (Clock::now() >= end) return ready();
    std::this_thread::yield();
  }
}

std::chrono::microseconds until(Clock::time_point deadline, std::chrono::microseconds cap) {
  auto rest = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
  return std::clamp(rest, std::chrono::microseconds(0), cap);
}

// ---- mappings -------------------------------------------------------------

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
void prefault_segment(void* base, size_t bytes, bool creator, bool writable = true) {
#if defined(MADV_POPULATE_WRITE) && defined(MADV_POPULATE_READ)
  (void)::madvise(base, bytes, writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);  // best effort: Linux 5.14+
#else
  (void)writable;
#endif
  auto* p = static_cast<volatile std::byte*>(base);
  for (size_t off = 0; off < bytes; off += kPageBytes) {
    if (creator) p[off] = std::byte{0};
    else (void)p[off];
  }
}

// Allocates the pages of a new segment of `bytes`; false (errno set) when
// there is no memory for them (file system full, memory limit). A file
// system without fallocate leaves them to the first touch, as before. tmpfs
// gives up on a pending signal (EINTR) rather than restarting.
bool reserve_pages(int fd, size_t bytes) {
  int r = 0;
  do r = ::fallocate(fd, 0, 0, static_cast<off_t>(bytes));
  while (r != 0 && errno == EINTR);
  return r == 0 || errno == EOPNOTSUPP;
}

// One mapped segment. Mappings are shared through a per-process registry so
// that a sender and a receiver in the same process use the same address: the
// ring's acquire/release pairs then also order the accesses for tools like
// ThreadSanitizer, which track memory by virtual address.
class Mapping {
 public:
  Mapping(std::string name, void* base, size_t bytes) : name_(std::move(name)), base_(base), bytes_(bytes) {}
  ~Mapping() {
    ::munmap(base_, bytes_);
    std::lock_guard lock(registry_mutex());
    auto it = registry().find(name_);
    if (it != registry().end() && it->second.expired()) registry().erase(it);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  RingControl& control() const { return *static_cast<RingControl*>(base_); }
  std::byte* data() const { return static_cast<std::byte*>(base_) + kControlBytes; }
  size_t ring_bytes() const { return bytes_ - kControlBytes; }
  const std::string& name() const { return name_; }

  // Creates a new segment (never an existing one) with an initialized
  // control page.
  static std::shared_ptr<Mapping> create(const std::string& name, size_t ring_bytes) {
    UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) return nullptr;
    const size_t bytes = kControlBytes + ring_bytes;
    void* base = MAP_FAILED;
    // The pages are reserved now (prefault_segment touches them all): with
    // /dev/shm full the link is refused here, with an error, instead of the
    // touch dying of SIGBUS.
    if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) == 0 && reserve_pages(fd.get(), bytes))
      base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (base == MAP_FAILED) {
      int saved = errno;
      ::shm_unlink(name.c_str());
      errno = saved;
      return nullptr;
    }
    prefault_segment(base, bytes, /*creator=*/true);
    auto* ctl = new (base) RingControl{};
    ctl->magic = kRingMagic;
    ctl->version = kRingVersion;
    ctl->ring_bytes = ring_bytes;
    ctl->sender_pid = static_cast<uint32_t>(::getpid());
    auto mapping = std::make_shared<Mapping>(name, base, bytes);
    std::lock_guard lock(registry_mutex());
    registry()[name] = mapping;
    return mapping;
  }

  // Maps a segment a sender announced; validates its size and control page.
  static std::shared_ptr<Mapping> open(const std::string& name, size_t ring_bytes, std::string& error) {
    {
      std::lock_guard lock(registry_mutex());
      auto it = registry().find(name);
      if (it != registry().end())
        if (auto existing = it->second.lock()) return validate(existing, ring_bytes, error) ? existing : nullptr;
    }
    UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
    if (!fd) {
      error = std::string("shm_open: ") + std::strerror(errno);
      return nullptr;
    }
    struct stat st {};
    const size_t bytes = kControlBytes + ring_bytes;
    if (::fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) != bytes || st.st_uid != ::geteuid()) {
      error = "segment size or owner does not match";
      return nullptr;
    }
    void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (base == MAP_FAILED) {
      error = std::string("mmap: ") + std::strerror(errno);
      return nullptr;
    }
    auto mapping = std::make_shared<Mapping>(name, base, bytes);
    if (!validate(mapping, ring_bytes, error)) return nullptr;
    prefault_segment(base, bytes, /*creator=*/false);
    return mapping;
  }

 private:
  static bool validate(const std::shared_ptr<Mapping>& m, size_t ring_bytes, std::string& error) {
    const RingControl& ctl = m->control();
    if (ctl.magic != kRingMagic || ctl.version != kRingVersion || ctl.ring_bytes != ring_bytes ||
        m->ring_bytes() != ring_bytes) {
      error = "control page does not match the handshake";
      return false;
    }
    return true;
  }

  static std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
  }
  static std::map<std::string, std::weak_ptr<Mapping>>& registry() {
    static std::map<std::string, std::weak_ptr<Mapping>> r;
    return r;
  }

  std::string name_;
  void* base_;
  size_t bytes_;
};

// ---- memfds shared with peers ---------------------------------------------

// A new memfd of `bytes` (whole pages), mapped read-write at `base`; invalid
// (and `base` null) when it cannot be made.
UniqueFd create_shared_memfd(const char* name, size_t bytes, void*& base) {
  base = nullptr;
  UniqueFd fd(static_cast<int>(::syscall(SYS_memfd_create, name, MFD_CLOEXEC)));
  if (!fd || ::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) return UniqueFd();
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return UniqueFd();
  base = p;
  return fd;
}

// Maps a peer's memfd (passed with its hello) after checking its size and
// owner; nullptr with `error` set otherwise.
void* map_peer_memfd(int fd, size_t bytes, int prot, const char* what, std::string& error) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes || st.st_uid != ::geteuid()) {
    error = std::string(what) + " size or owner does not match";
    return nullptr;
  }
  void* base = ::mmap(nullptr, bytes, prot, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    error = std::string("mmap ") + what + ": " + std::strerror(errno);
    return nullptr;
  }
  return base;
}

// ---- shared payloads: the outbox ------------------------------------------
//
// A payload that several sends repeat (fw::Move::shared_payload: the direct
// allgather, the flat bcast and the allgather round of the 3- and 4-rank
// allreduce send one buffer to each peer) is copied once
// into the sending transport's outbox, a memfd that every peer maps read-only
// when its link is set up (the descriptor travels with ShmHello, SCM_RIGHTS).
// The rings then carry only the header, marked with abi::kHdrTransportFrame
// in the ring's copy, and a 64-byte SharedDescriptor. The receiver copies the
// payload from the outbox straight into the sink's memory and releases the
// descriptor only then. Sender copies per payload: 1 instead of one per peer
// (4 ranks, 1 MiB allgather: 5 instead of 7 MiB copied per rank and call).
//
// A slot of the outbox is written once and reused only after every ring that
// carries a descriptor for it released that descriptor or closed its
// consumer: nobody can be reading it then. When the outbox has no room the
// send copies the payload into the ring as usual, so a receiver that stalls
// (or dies) costs the sharing, never a wait or a wrong byte.

constexpr uint32_t kSharedMagic = 0x44524853;  // "SHRD"
// Smaller payloads go through the rings: the copy is cheap and in cache.
constexpr size_t kMinSharedBytes = size_t{64} << 10;

struct SharedDescriptor {
  uint32_t magic;
  uint32_t reserved;
  uint64_t offset;  // the payload is outbox bytes [offset, offset + header.count)
  uint64_t key;     // fw::Move::shared_payload (diagnostics)
  uint8_t pad[40];
};
static_assert(sizeof(SharedDescriptor) == 64, "one ring slot");

// The peer's outbox as a receiver maps it (read-only).
class PeerOutbox {
 public:
  PeerOutbox(const void* base, size_t bytes) : base_(static_cast<const std::byte*>(base)), bytes_(bytes) {}
  ~PeerOutbox() { ::munmap(const_cast<std::byte*>(base_), bytes_); }
  PeerOutbox(const PeerOutbox&) = delete;
  PeerOutbox& operator=(const PeerOutbox&) = delete;

  // The payload a descriptor names, or nullptr if it lies outside the outbox.
  // The first one maps and reads every page of the outbox (see
  // Outbox::pages_ready). Called by the ring's one consumer at a time; the
  // once_flag keeps that an assumption nothing depends on.
  const std::byte* payload(const SharedDescriptor& d, size_t count) {
    if (d.magic != kSharedMagic || d.offset > bytes_ || count > bytes_ - d.offset) return nullptr;
    std::call_once(mapped_, [this] {
      prefault_segment(const_cast<std::byte*>(base_), bytes_, /*creator=*/false, /*writable=*/false);
    });
    return base_ + d.offset;
  }

  static std::shared_ptr<PeerOutbox> map(int fd, size_t bytes, std::string& error) {
    void* base = map_peer_memfd(fd, bytes, PROT_READ, "outbox", error);
    return base != nullptr ? std::make_shared<PeerOutbox>(base, bytes) : nullptr;
  }

 private:
  const std::byte* base_;
  size_t bytes_;
  std::once_flag mapped_;
};

class Outbox {
 public:
  // nullptr when the memfd cannot be made: every send then uses the rings.
  static std::shared_ptr<Outbox> create(size_t bytes) {
    bytes = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
    void* base = nullptr;
    UniqueFd fd = create_shared_memfd("accl-shm-outbox", bytes, base);
    if (!fd) return nullptr;
    return std::make_shared<Outbox>(std::move(fd), static_cast<std::byte*>(base), bytes);
  }

  Outbox(UniqueFd fd, std::byte* base, size_t bytes) : fd_(std::move(fd)), base_(base), bytes_(bytes) {}
  ~Outbox() { ::munmap(base_, bytes_); }
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  int fd() const { return fd_.get(); }
  size_t bytes() const { return bytes_; }
  // Larger payloads go through the rings (two slots in flight at least).
  size_t max_payload() const { return bytes_ / 2; }

  // A ring that carries a descriptor for a slot.
  struct Reader {
    std::shared_ptr<Mapping> ring;
    uint64_t pos;  // ring position just past the descriptor
  };

  // The offset of the slot holding payload `key` (`count` bytes), filled by
  // `payload` if it is new; `reader` is registered before this returns, so
  // the slot stays until that ring releases it. nullopt: no room (err 0,
  // the caller sends through its ring) or the writer failed (err != 0).
  std::optional<uint64_t> acquire(uint64_t key, size_t count, PayloadWriter& payload, Reader reader,
                                  uint32_t& err) {
    err = 0;
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < used_; ++i) {
      Slot& s = slot(i);
      if (s.key != key || s.bytes != count) continue;
      if (s.readers_used == kMaxReaders) return std::nullopt;
      s.readers[s.readers_used++] = std::move(reader);
      return s.begin % bytes_;
    }
    while (used_ > 0 && released(slot(0))) {
      slot(0) = Slot{};  // drops its references to the rings
      first_ = (first_ + 1) % kMaxSlots;
      --used_;
    }
    if (used_ == kMaxSlots || !pages_ready()) return std::nullopt;
    const size_t need = round_up64(count);
    uint64_t begin = head_;
    if (begin % bytes_ + need > bytes_) begin += bytes_ - begin % bytes_;  // a slot never wraps
    const uint64_t oldest = used_ == 0 ? begin : slot(0).begin;
    if (begin + need - oldest > bytes_) return std::nullopt;
    err = payload.write(base_ + begin % bytes_, 0, count);
    if (err != 0) return std::nullopt;
    head_ = begin + need;
    Slot& s = slot(used_++);
    s.begin = begin;
    s.bytes = count;
    s.key = key;
    s.readers[0] = std::move(reader);
    s.readers_used = 1;
    return begin % bytes_;
  }

  // Transport stop: no more sends.
  void clear() {
    std::lock_guard lock(mutex_);
    for (Slot& s : slots_) s = Slot{};
    used_ = 0;
  }

 private:
  // Fixed tables: a send allocates nothing. More slots than payloads of
  // kMinSharedBytes fit a default outbox; a payload shared by more peers than
  // kMaxReaders goes to the rest of them through the rings.
  static constexpr size_t kMaxSlots = 64;
  static constexpr size_t kMaxReaders = 15;

  struct Slot {
    uint64_t begin = 0;  // monotonically increasing position; offset = begin % bytes_
    size_t bytes = 0;
    uint64_t key = 0;
    size_t readers_used = 0;
    std::array<Reader, kMaxReaders> readers{};
  };

  Slot& slot(size_t i) { return slots_[(first_ + i) % kMaxSlots]; }

  // The first shared payload allocates and touches every page of the outbox
  // (and each peer's first one maps and reads them all, PeerOutbox::payload):
  // left to their first use, the writer and every reader faulted a fresh
  // page in each 4 KiB of payload until the outbox had wrapped once, which a
  // 64 KiB bcast on 4 ranks does after 64 calls; 10-15 % of its calls took
  // 200-400 us instead of 30. Not when the outbox is made: a rank whose
  // collectives never share a payload (point-to-point only, or 8 ranks)
  // would keep its own and every peer's outbox resident for nothing. False
  // from then on (every shared send goes through the rings) when there is no
  // memory for the pages (a memory limit), where a touch would have died of
  // SIGBUS.
  bool pages_ready() {
    if (pages_ == Pages::untouched) {
      if (reserve_pages(fd_.get(), bytes_)) {
        prefault_segment(base_, bytes_, /*creator=*/true);
        pages_ = Pages::ready;
      } else {
        const int err = errno;
        ACCL_LOG_INFO("shm: no memory for the outbox ({}); shared payloads go through the rings", std::strerror(err));
        pages_ = Pages::unavailable;
      }
    }
    return pages_ == Pages::ready;
  }

  // Every reader's consumer released the descriptor (its tail passed it) or
  // closed for good. (A consumer whose process died keeps its slot: the
  // outbox then fills up and sends use the rings.)
  static bool released(const Slot& s) {
    for (size_t i = 0; i < s.readers_used; ++i) {
      const Reader& r = s.readers[i];
      const RingControl& ctl = r.ring->control();
      if (ctl.tail.load(std::memory_order_acquire) < r.pos &&
          ctl.consumer_state.load(std::memory_order_acquire) == kConsumerOpen)
        return false;
    }
    return true;
  }

  UniqueFd fd_;
  std::byte* const base_;
  const size_t bytes_;
  std::mutex mutex_;
  std::array<Slot, kMaxSlots> slots_{};  // slots [first_, first_ + used_) in allocation order
  size_t first_ = 0;
  size_t used_ = 0;
  uint64_t head_ = 0;  // where the next slot starts
  enum class Pages { untouched, ready, unavailable } pages_ = Pages::untouched;  // under mutex_
};

// ---- direct writes: the kernel-assisted single copy -----------------------
//
// A rendezvous payload for one peer would be copied twice through a ring
// (sender into it, receiver out of it). Instead, the receiver offers its
// window with the grant and the sender writes the payload there itself with
// process_vm_writev (cross-memory attach, as Open MPI's vader BTL does with
// CMA): one copy, made by the sender, which never waits for a receiver that
// has no core.
//   1. The receiving link frames a grant (kMsgRendezvousAddr) whose window
//      the sink offers (Sink::direct_window) with a DirectGrantDescriptor:
//      the window's address in the receiving process, its size, and the
//      epoch of the receiving transport's gate, read before the sink looked.
//   2. The sender's reader records it (DirectGrants) before the firmware
//      hears of the grant.
//   3. The sender's data message for exactly that window (same ctx, rid,
//      address, size) is written into it in pieces, each under the gate, and
//      the ring carries only the header and a DirectDataDescriptor.
// The gate is a page (a memfd the receiving transport passes to every peer
// with ShmHello) holding an epoch and, per writing peer, a count of pieces
// being written. A writer enters only while the epoch is that of its grant.
// When the sink takes an offered window back before its data arrived (a
// failed receive, a reset), fence() bumps the epoch and waits until no
// writer is in: no grant issued so far lets anybody write any more, and
// those transfers go through the ring like before (and are dropped like any
// late data). A fence is rare, so one epoch per transport is enough; the
// counts are per peer so that a peer that died mid-piece holds up no fence.

constexpr uint32_t kGrantMagic = 0x544E5247;   // "GRNT"
constexpr uint32_t kDirectMagic = 0x54434944;  // "DICT"

struct DirectGrantDescriptor {
  uint32_t magic;
  uint32_t reserved;
  uint64_t epoch;    // of the receiver's gate when the window was offered
  uint64_t address;  // the window in the receiving process
  uint64_t bytes;    // its size: the data message must carry exactly this
  uint8_t pad[32];
};
static_assert(sizeof(DirectGrantDescriptor) == 64, "one ring slot");

struct DirectDataDescriptor {
  uint32_t magic;
  uint32_t reserved;
  uint64_t address;  // where the payload was written (the granted window)
  uint8_t pad[48];
};
static_assert(sizeof(DirectDataDescriptor) == 64, "one ring slot");

class DirectGate {
 public:
  static constexpr size_t kBytes = kPageBytes;
  // Writing peers one gate serves (one slot each, handed out when we dial
  // the peer); links beyond get no gate and copy through their rings.
  static constexpr uint32_t kSlots = kBytes / 64 - 1;

  // Ours: nullptr when the memfd cannot be made (no window is then offered).
  static std::shared_ptr<DirectGate> create() {
    void* base = nullptr;
    UniqueFd fd = create_shared_memfd("accl-shm-gate", kBytes, base);
    if (!fd) return nullptr;
    new (base) Page{};
    return std::make_shared<DirectGate>(std::move(fd), base);
  }
  // A peer's, passed with its hello.
  static std::shared_ptr<DirectGate> map(int fd, std::string& error) {
    void* base = map_peer_memfd(fd, kBytes, PROT_READ | PROT_WRITE, "gate", error);
    return base != nullptr ? std::make_shared<DirectGate>(UniqueFd(), base) : nullptr;
  }

  DirectGate(UniqueFd fd, void* base) : fd_(std::move(fd)), base_(base), page_(*static_cast<Page*>(base)) {}
  ~DirectGate() { ::munmap(base_, kBytes); }
  DirectGate(const DirectGate&) = delete;
  DirectGate& operator=(const DirectGate&) = delete;

  int fd() const { return fd_.get(); }
  uint64_t epoch() const { return page_.epoch.load(std::memory_order_seq_cst); }

  // Ours: a slot for the writing process `pid` (the peer we dial), or
  // nullopt when all are taken.
  std::optional<uint32_t> assign_slot(pid_t pid) {
    const uint32_t slot = slots_used_.load(std::memory_order_relaxed);
    if (slot >= kSlots) return std::nullopt;
    page_.slots[slot].pid.store(pid, std::memory_order_relaxed);
    slots_used_.store(slot + 1, std::memory_order_release);
    return slot;
  }

  // Writer side, in its slot: true if the grant of `epoch` still holds; then
  // end() after the piece. (seq_cst with fence(): either this sees the new
  // epoch, or the fence sees this writer.)
  bool begin(uint32_t slot, uint64_t epoch) {
    std::atomic<uint32_t>& writers = page_.slots[slot].writers;
    writers.fetch_add(1, std::memory_order_seq_cst);
    if (page_.epoch.load(std::memory_order_seq_cst) == epoch) return true;
    writers.fetch_sub(1, std::memory_order_seq_cst);
    return false;
  }
  void end(uint32_t slot) { page_.slots[slot].writers.fetch_sub(1, std::memory_order_seq_cst); }

  // Receiver side: whether a peer is writing a piece into one of our
  // windows right now (one whose process died mid-piece does not count).
  bool writer_in() const {
    const uint32_t used = slots_used_.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < used; ++i) {
      const Slot& s = page_.slots[i];
      if (s.writers.load(std::memory_order_acquire) != 0 && alive(s.pid.load(std::memory_order_relaxed))) return true;
    }
    return false;
  }

  // Receiver side: voids every grant issued so far and waits, until
  // `deadline`, for the writers still in. A piece is one bounded
  // process_vm_writev, so this normally takes microseconds. A slot whose
  // process is gone (it died mid-piece, leaving its count up) writes no
  // more: it is not waited for.
  bool fence(Clock::time_point deadline) {
    page_.epoch.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t used = slots_used_.load(std::memory_order_acquire);
    for (uint32_t i = 0; i < used; ++i) {
      const Slot& s = page_.slots[i];
      for (int spins = 0; s.writers.load(std::memory_order_seq_cst) != 0; ++spins) {
        if (!alive(s.pid.load(std::memory_order_relaxed))) break;
        if (Clock::now() >= deadline) return false;
        if (spins < 64) std::this_thread::yield();
        else std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    return true;
  }

 private:
  struct Slot {
    alignas(64) std::atomic<uint32_t> writers{0};  // pieces being written by the slot's process
    std::atomic<int32_t> pid{0};                   // that process (set by the gate's owner)
  };
  struct Page {
    alignas(64) std::atomic<uint64_t> epoch{1};
    Slot slots[kSlots];
  };
  static_assert(sizeof(Page) <= kBytes);

  static bool alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH); }

  UniqueFd fd_;  // ours only (passed to peers)
  void* base_;
  Page& page_;
  std::atomic<uint32_t> slots_used_{0};  // ours only
};

// Grants that peers offered this process's sends (recorded by the reader of
// the ring they came on, taken by the link that sends the data). A fixed
// table: recording allocates nothing; when full, the oldest grant is
// forgotten (its transfer then goes through the ring).
class DirectGrants {
 public:
  struct Grant {
    NetAddress peer;  // the receiver (its listening address)
    pid_t pid = 0;
    uint32_t slot = 0;  // ours in the receiver's gate
    uint32_t ctx = 0, rid = 0;
    uint64_t vaddr = 0;
    uint8_t host = 0;
    uint64_t address = 0, bytes = 0, epoch = 0;
    std::shared_ptr<DirectGate> gate;  // null: free entry
    uint64_t stamp = 0;
  };

  void record(Grant g) {
    std::lock_guard lock(mutex_);
    // Where it goes: over a grant for the same transfer and address (a staged
    // receive grants one scratch window piece after piece), else into a free
    // entry, else over the oldest grant.
    Grant* same = nullptr;
    Grant* free = nullptr;
    Grant* oldest = nullptr;
    for (Grant& e : grants_) {
      if (!e.gate) {
        if (free == nullptr) free = &e;
      } else if (same_transfer(e, g.peer, g.ctx, g.rid, g.vaddr, g.host)) {
        same = &e;
      } else if (oldest == nullptr || e.stamp < oldest->stamp) {
        oldest = &e;
      }
    }
    g.stamp = ++stamp_;
    *(same != nullptr ? same : free != nullptr ? free : oldest) = std::move(g);
  }

  // The grant for data message `h` to `peer`, removed from the table.
  std::optional<Grant> take(const NetAddress& peer, const abi::WireHeader& h) {
    std::lock_guard lock(mutex_);
    for (Grant& e : grants_) {
      if (e.gate && same_transfer(e, peer, h.ctx, h.rid, h.vaddr, h.host)) {
        std::optional<Grant> g(std::move(e));
        e = Grant{};
        if (g->bytes != h.count) return std::nullopt;  // not the whole window: the sink decides
        return g;
      }
    }
    return std::nullopt;
  }

  void clear() {
    std::lock_guard lock(mutex_);
    for (Grant& e : grants_) e = Grant{};
  }

 private:
  static bool same_transfer(const Grant& e, const NetAddress& peer, uint32_t ctx, uint32_t rid, uint64_t vaddr,
                            uint8_t host) {
    return e.peer == peer && e.ctx == ctx && e.rid == rid && e.vaddr == vaddr && e.host == host;
  }

  std::mutex mutex_;
  std::array<Grant, 64> grants_{};
  uint64_t stamp_ = 0;
};

// What links and readers of one transport share for direct writes.
struct DirectWrites {
  size_t min_bytes = 0;                   // smallest payload written directly; 0: off
  std::shared_ptr<DirectGate> own_gate;   // null: we offer no windows
  Sink* sink = nullptr;                   // set by start()
  DirectGrants grants;
  std::atomic<bool> kernel_refuses{false};  // process_vm_writev is not allowed here

  // Writes `bytes` from `src` into the granted window, piece by piece under
  // the receiver's gate. false: the grant was voided or the kernel refused
  // (nothing is wrong with the window then; the caller sends through the
  // ring).
  bool write(const DirectGrants::Grant& g, const std::byte* src, size_t bytes) {
    for (size_t done = 0; done < bytes;) {
      const size_t n = std::min(bytes - done, WriteLease::kMaxPieceBytes);
      if (!g.gate->begin(g.slot, g.epoch)) return false;
      iovec local{const_cast<std::byte*>(src + done), n};
      iovec remote{reinterpret_cast<void*>(g.address + done), n};
      const ssize_t wrote = ::process_vm_writev(g.pid, &local, 1, &remote, 1, 0);
      const int err = errno;
      g.gate->end(g.slot);
      if (wrote != static_cast<ssize_t>(n)) {
        if (wrote < 0 && (err == EPERM || err == ENOSYS || err == EACCES) && !kernel_refuses.exchange(true))
          ACCL_LOG_INFO("shm: process_vm_writev is not allowed ({}); payloads go through the rings",
                        std::strerror(err));
        else if (wrote < 0 && err != ESRCH)
          ACCL_LOG_WARN("shm: direct write of {} bytes to pid {} failed: {}", n, g.pid, std::strerror(err));
        return false;
      }
      done += n;
    }
    return true;
  }
};

// ---- control socket -------------------------------------------------------

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
                    const std::atomic<bool>* cancel) {
  iovec iov{const_cast<ShmHello*>(&hello), sizeof hello};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  int fds[2];
  size_t count = 0;
  for (int f : pass_fds)
    if (f >= 0) fds[count++] = f;
  if (count > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(count * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(count * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, count * sizeof(int));
  }
  for (;;) {
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(sizeof hello)) return IoStatus::ok;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (wait_fd(fd, POLLOUT, deadline, cancel) == 0)
        return (cancel != nullptr && cancel->load()) ? IoStatus::closed : IoStatus::timeout;
      continue;
    }
    return IoStatus::closed;
  }
}

// Receives one hello record and the descriptors that may come with it
// (`passed`, in order; the rest stay invalid). Returns the record's length
// (MSG_TRUNC: its real size), or -1 with errno.
ssize_t receive_hello(int fd, ShmHello& hello, std::array<UniqueFd, 2>& passed) {
  iovec iov{&hello, sizeof hello};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(fd, &msg, MSG_TRUNC | MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  size_t taken = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t fds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < fds; ++i) {
      int got = -1;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (taken < passed.size()) passed[taken++].reset(got);
      else ::close(got);  // more than the protocol sends
    }
  }
  return n;
}

sockaddr_un control_address(const NetAddress& a, socklen_t& len) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  // Abstract namespace (leading NUL): no file to clean up, vanishes with
  // the process. Anyone in the network namespace may connect, which is why
  // the handshake checks uid and job credential.
  std::string name = "accl-emu-shm-v1/" + format_address(a);
  std::memcpy(sa.sun_path + 1, name.data(), name.size());
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return sa;
}

bool valid_shm_name(const char* name, size_t capacity) {
  size_t len = ::strnlen(name, capacity);
  if (len == capacity || len < 7 || std::strncmp(name, "/accl-", 6) != 0) return false;
  for (size_t i = 1; i < len; ++i)
    if (name[i] == '/' || name[i] < 0x21 || name[i] > 0x7E) return false;
  return true;
}

// ---- sending side ---------------------------------------------------------

// What a sender waiting for ring space does for its own process's inbound
// rings (the transport implements it; it outlives every send, see stop()).
class InboundProgress {
 public:
  virtual ~InboundProgress() = default;
  // Consumes what has arrived, like Transport::poll() but without renewing
  // the pollers' lease: the sending thread may be a firmware thread that
  // never says when it stops polling.
  virtual bool poll_inbound() = 0;
  // The waiting sender blocks: reader threads must deliver from now on.
  virtual void stop_polling_inbound() = 0;
};

class ShmLink final : public Link {
 public:
  // `outbox`: ours, if the receiver mapped it (null: no shared payloads).
  ShmLink(std::shared_ptr<Mapping> mapping, UniqueFd control_fd, NetAddress peer, const ShmTuning& tuning,
          std::chrono::microseconds spin, InboundProgress& inbound, std::shared_ptr<Outbox> outbox,
          DirectWrites& direct)
      : inbound_(inbound),
        outbox_(std::move(outbox)),
        direct_(direct),
        mapping_(std::move(mapping)),
        ctl_(mapping_->control()),
        data_(mapping_->data()),
        ring_bytes_(mapping_->ring_bytes()),
        max_piece_(std::max<size_t>(round_up64(tuning.max_piece_bytes), 4096)),
        control_fd_(std::move(control_fd)),
        peer_(peer),
        spin_(spin) {}

  ~ShmLink() override { close(); }

  uint32_t send(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point deadline) override {
    std::unique_lock lock(send_mutex_, std::defer_lock);
    if (!lock.try_lock_until(deadline)) return abi::kLinkError;
    if (uint32_t err = check_usable()) return err;
    if (direct_.min_bytes != 0 && header.strm == 0 && (header.flags & abi::kHdrTransportFrame) == 0) {
      if (header.msg_type == abi::kMsgRendezvousAddr) return send_grant_locked(header, payload, deadline);
      if (header.msg_type == abi::kMsgRendezvousData) {
        if (auto done = send_direct_locked(header, payload, deadline)) return *done;
      }
    }
    return send_locked(header, payload, deadline);
  }

  // Through the outbox (see Outbox): the ring gets the header and a
  // descriptor, the payload is copied into the outbox once for all peers.
  uint32_t send_shared(const abi::WireHeader& header, PayloadWriter& payload, uint64_t shared_key,
                       Clock::time_point deadline) override {
    if (!outbox_ || header.strm != 0 || header.count < kMinSharedBytes || header.count > outbox_->max_payload() ||
        (header.flags & abi::kHdrTransportFrame) != 0)
      return send(header, payload, deadline);
    std::unique_lock lock(send_mutex_, std::defer_lock);
    if (!lock.try_lock_until(deadline)) return abi::kLinkError;
    if (uint32_t err = check_usable()) return err;
    // Shared payloads keep the outbox (one copy by us, one by each receiver,
    // measured as fast as writing every window ourselves); a grant the
    // receiver offered for this window is used up all the same.
    if (direct_.min_bytes != 0 && header.msg_type == abi::kMsgRendezvousData) direct_.grants.take(peer_, header);
    const uint64_t pos = head_;
    const Wait w = wait_space(pos, kFrameBytes, deadline);
    if (w != Wait::ready) return unpublished_failure(w);
    uint32_t err = 0;
    const auto offset =
        outbox_->acquire(shared_key, header.count, payload, Outbox::Reader{mapping_, pos + kFrameBytes}, err);
    if (!offset) return err != 0 ? err : send_locked(header, payload, deadline);
    SharedDescriptor d{};
    d.magic = kSharedMagic;
    d.offset = *offset;
    d.key = shared_key;
    publish_frame(pos, header, &d);
    return 0;
  }

  bool broken() const { return broken_.load(std::memory_order_acquire) || closing_.load(std::memory_order_acquire); }

  // Graceful close (transport stop or last reference gone): the receiver
  // drains what was published, then reports the link closed.
  void close() {
    if (closing_.exchange(true)) return;
    wake(ctl_.space_futex);  // a send sleeping for space sees closing_ at once
    std::lock_guard lock(send_mutex_);  // waits for a send in progress to bail out
    uint32_t open = kProducerOpen;
    ctl_.producer_state.compare_exchange_strong(open, kProducerClosed, std::memory_order_acq_rel);
    wake(ctl_.data_futex);
    ::shutdown(control_fd_.get(), SHUT_RDWR);
  }

 private:
  enum class Wait { ready, timeout, closed };

  uint32_t check_usable() {
    if (broken_.load(std::memory_order_acquire) || closing_.load(std::memory_order_acquire)) return abi::kLinkError;
    if (receiver_gone()) {
      break_link("receiver closed the link");
      return abi::kLinkError;
    }
    return 0;
  }

  // send() once the send lock is held and the link is usable.
  uint32_t send_locked(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point deadline) {
    const size_t count = header.count;
    uint64_t pos = head_;
    Wait w = wait_space(pos, sizeof header, deadline);
    if (w != Wait::ready) return unpublished_failure(w);
    std::memcpy(data_ + pos % ring_bytes_, &header, sizeof header);
    pos += sizeof header;
    if (count == 0) {
      publish(pos);
      return 0;
    }
    bool published = false;  // once true, a failure tears the message: abort the link
    for (size_t offset = 0; offset < count;) {
      w = wait_space(pos, 64, deadline);
      if (w != Wait::ready) {
        if (!published) return unpublished_failure(w);
        if (w == Wait::timeout) {
          // Says why the receiver made no room (issue 37, defect 6: under
          // load a 4 MiB rendezvous send found its ring full for the whole
          // ACCL_TIMEOUT_MS with the receiver's reader marked asleep).
          abort_link(("send timed out mid-message (" + ring_state(pos) + ")").c_str());
        } else {
          abort_link("link closed mid-message");
        }
        return abi::kLinkError;
      }
      const size_t contiguous = ring_bytes_ - pos % ring_bytes_;
      const size_t want = std::min({contiguous, count - offset, max_piece_});
      const size_t piece = std::min(free_space(pos, want), want);
      if (uint32_t err = payload.write(data_ + pos % ring_bytes_, offset, piece)) {
        if (!published) return err;  // the header was never published
        abort_link("payload writer failed mid-message");
        return err | abi::kLinkError;
      }
      pos += round_up64(piece);
      offset += piece;
      publish(pos);
      published = true;
    }
    return 0;
  }

  // A frame: the header, marked as one, and a 64-byte descriptor, both
  // whole slots of the ring (positions are multiples of 64).
  static constexpr size_t kFrameBytes = sizeof(abi::WireHeader) + 64;
  void publish_frame(uint64_t pos, const abi::WireHeader& header, const void* descriptor) {
    abi::WireHeader framed = header;
    framed.flags |= abi::kHdrTransportFrame;
    std::memcpy(data_ + pos % ring_bytes_, &framed, sizeof framed);
    std::memcpy(data_ + (pos + sizeof framed) % ring_bytes_, descriptor, 64);
    publish(pos + kFrameBytes);
  }

  // A grant: offers its window for direct writes if the sink allows (see
  // DirectGate).
  uint32_t send_grant_locked(const abi::WireHeader& header, PayloadWriter& payload, Clock::time_point deadline) {
    if (!direct_.own_gate || direct_.sink == nullptr || header.count != 0 || header.msg_bytes < direct_.min_bytes)
      return send_locked(header, payload, deadline);
    // The epoch is read before the sink looks: a fence after this read voids
    // the grant, and one before it closed the window, so the sink refuses.
    const uint64_t epoch = direct_.own_gate->epoch();
    size_t bytes = 0;
    std::byte* window = direct_.sink->direct_window(peer_, header, bytes);
    if (window == nullptr) return send_locked(header, payload, deadline);
    const uint64_t pos = head_;
    const Wait w = wait_space(pos, kFrameBytes, deadline);
    if (w != Wait::ready) return unpublished_failure(w);
    DirectGrantDescriptor d{};
    d.magic = kGrantMagic;
    d.epoch = epoch;
    d.address = reinterpret_cast<uintptr_t>(window);
    d.bytes = bytes;
    publish_frame(pos, header, &d);
    return 0;
  }

  // Rendezvous data for a window the receiver granted for direct writes: the
  // payload goes straight into it, the ring carries the header. nullopt: no
  // such grant, a payload that is not a plain copy, or the write was refused
  // (the caller sends through the ring).
  std::optional<uint32_t> send_direct_locked(const abi::WireHeader& header, PayloadWriter& payload,
                                             Clock::time_point deadline) {
    // The grant is used up whatever happens: one window, one transfer. (Only
    // windows of at least min_bytes were offered, and take() checks the size.)
    const auto grant = direct_.grants.take(peer_, header);
    if (!grant || direct_.kernel_refuses.load(std::memory_order_relaxed)) return std::nullopt;
    const std::byte* src = payload.contiguous_source(header.count);
    if (src == nullptr || !direct_.write(*grant, src, header.count)) return std::nullopt;
    const uint64_t pos = head_;
    const Wait w = wait_space(pos, kFrameBytes, deadline);
    if (w != Wait::ready) return unpublished_failure(w);
    DirectDataDescriptor d{};
    d.magic = kDirectMagic;
    d.address = grant->address;
    publish_frame(pos, header, &d);
    return 0;
  }

  uint32_t unpublished_failure(Wait w) {
    // Nothing of this message is visible to the receiver: only a closed
    // link is broken, a timeout leaves it usable.
    if (w == Wait::closed) break_link("receiver closed the link");
    return abi::kLinkError;
  }

  bool receiver_gone() {
    if (ctl_.consumer_state.load(std::memory_order_acquire) != kConsumerOpen) return true;
    const int64_t now = coarse_now_ns();
    if (now - last_liveness_check_ns_ < std::chrono::nanoseconds(kLivenessCheck).count()) return false;
    last_liveness_check_ns_ = now;
    return peer_hung_up(control_fd_.get());
  }

  // Bytes free from `pos` on. The consumer's tail is read only when the
  // last value seen leaves too little room: with a roomy ring most sends
  // never touch the tail's cache line, which the consumer keeps writing.
  size_t free_space(uint64_t pos, size_t need) {
    size_t free = ring_bytes_ - (pos - seen_tail_);
    if (free < need) {
      seen_tail_ = ctl_.tail.load(std::memory_order_acquire);
      free = ring_bytes_ - (pos - seen_tail_);
    }
    return free;
  }

  // The common case, room at once, inline; the waiting out of line.
  Wait wait_space(uint64_t pos, size_t need, Clock::time_point deadline) {
    if (free_space(pos, need) >= need) return Wait::ready;
    return wait_for_space(pos, need, deadline);
  }

  // Called when wait_space() found no room; every loop below looks again
  // before it waits.
  [[gnu::noinline]] Wait wait_for_space(uint64_t pos, size_t need, Clock::time_point deadline) {
    auto ready = [&] { return free_space(pos, need) >= need; };
    // The receiver may be a host thread sending to us just the same (the
    // exchanges of an allreduce): consuming its messages meanwhile frees its
    // ring while it frees ours, with no reader thread woken on either side.
    if (spin_.count() > 0) {
      const auto spin_end = Clock::now() + spin_;
      for (;;) {
        const bool consumed = inbound_.poll_inbound();
        if (ready()) return Wait::ready;
        if (Clock::now() >= spin_end) break;
        if (!consumed) {
          for (int i = 0; i < 32 && !ready(); ++i) cpu_relax();
          std::this_thread::yield();
        }
      }
    }
    // Sleeping now: our readers must not stay parked for a poll lease.
    inbound_.stop_polling_inbound();
    // A reader thread that sends (it runs the firmware passes its arrival
    // enabled) is the one that would drain its own ring: the receiver may
    // be a reader sending to us just the same, and both would wait for room
    // until their deadline. It keeps consuming its process's inbound rings
    // between short sleeps instead.
    const bool drains_rings = t_shm_reader_thread;
    for (;;) {
      if (ready()) return Wait::ready;
      if (closing_.load(std::memory_order_acquire) || broken_.load(std::memory_order_acquire)) return Wait::closed;
      if (receiver_gone()) return Wait::closed;
      if (Clock::now() >= deadline) return Wait::timeout;
      if (drains_rings && inbound_.poll_inbound()) continue;
      auto stop_or_ready = [&] { return ready() || closing_.load(std::memory_order_acquire) ||
                                        ctl_.consumer_state.load(std::memory_order_acquire) != kConsumerOpen; };
      // The ring is full: if its reader is parked and the receiving
      // process's polls stopped, only the reader can make room, and no
      // publish of ours will wake it. Wake it if the lease is over, and
      // look again when the lease ends.
      notify_consumer(ctl_);
      auto slice = drains_rings ? kReaderSendSlice : std::chrono::microseconds(20000);
      if (ctl_.consumer_sleeping.load(std::memory_order_acquire) == kConsumerParked) {
        const int64_t end = ctl_.consumer_lease_end.load(std::memory_order_acquire);
        if (lease_timed(end))
          slice = std::clamp(std::chrono::microseconds((end - steady_now_ns()) / 1000 + 1),
                             std::chrono::microseconds(1), slice);
      }
      // Short slices: a receiver that dies without closing is only seen on
      // the control socket.
      sleep_until(ctl_.space_futex, ctl_.producer_sleeping, stop_or_ready, until(deadline, slice));
    }
  }

  // The receiving side of the ring as this producer sees it, for errors.
  std::string ring_state(uint64_t pos) const {
    static constexpr const char* kSleeping[] = {"awake", "asleep", "parked"};
    const uint32_t sleeping = ctl_.consumer_sleeping.load(std::memory_order_acquire);
    const int64_t lease = ctl_.consumer_lease_end.load(std::memory_order_acquire);
    std::string lease_text = lease == kLeaseNone   ? "no poll lease"
                             : lease == kLeaseHeld ? "poll lease held by a driving loop"
                                                   : "poll lease ends in " +
                                                         std::to_string((lease - steady_now_ns()) / 1000000) + " ms";
    return std::to_string(pos - ctl_.tail.load(std::memory_order_acquire)) + " of " + std::to_string(ring_bytes_) +
           " ring bytes unread, reader " + (sleeping < 3 ? kSleeping[sleeping] : "?") + ", " + lease_text;
  }

  void publish(uint64_t pos) {
    head_ = pos;
    ctl_.head.store(pos, std::memory_order_release);
    notify_consumer(ctl_);
  }

  void break_link(const char* why) {
    if (!broken_.exchange(true)) ACCL_LOG_WARN("shm: link to {} is down: {}", format_address(peer_), why);
  }

  // The message being written is torn: tell the reader not to deliver it.
  void abort_link(const char* why) {
    break_link(why);
    ctl_.producer_state.store(kProducerAborted, std::memory_order_release);
    wake(ctl_.data_futex);
  }

  TimedMutex send_mutex_;
  InboundProgress& inbound_;
  const std::shared_ptr<Outbox> outbox_;
  DirectWrites& direct_;
  const std::shared_ptr<Mapping> mapping_;
  RingControl& ctl_;
  std::byte* const data_;
  const size_t ring_bytes_;
  const size_t max_piece_;
  UniqueFd control_fd_;
  const NetAddress peer_;
  const std::chrono::microseconds spin_;
  uint64_t head_ = 0;  // guarded by send_mutex_
  uint64_t seen_tail_ = 0;  // guarded by send_mutex_; the consumer's tail as last read (free_space)
  int64_t last_liveness_check_ns_ = 0;  // guarded by send_mutex_; coarse_now_ns()
  std::atomic<bool> broken_{false};
  std::atomic<bool> closing_{false};
};

// ---- receiving side -------------------------------------------------------

// When a host thread last polled the rings (Transport::poll). While it polls,
// the reader threads keep out of the way: they neither spin nor ask senders
// for every message (consumer_sleeping says parked: a send while the lease
// runs costs no futex wake and the receiving process no thread switch).
// They park instead and take over when the polls stop: a send that finds
// the lease over wakes the reader (notify_consumer), and a message that came
// while the lease ran and was left there waits at most until the control
// thread's next look (below).
// A host thread that stops polling to block (EmuDevice::wait) ends the lease
// at once (end_polling). Only hot polling (polls less than kHotPollGap
// apart) renews the lease: a poller that only looks now and then (the PMPI
// wait loop of a rank that waits long sleeps between polls) saves no
// hand-off worth a parked reader's periodic wake-ups; its readers go back to
// sleeping until a sender wakes them. While the lease runs, only every
// kPollsPerClockRead-th poll reads the clock (a clock read costs as much as
// the rest of an empty poll); the gap then counts as the average over the
// polls since the last read, and the lease starts at most that many polls
// late (far below its length).
// The end of a lease that lapses (nobody renewed it) is not watched by each
// parked reader (4 ranks on 2 cores, 1 MiB allreduce: 12 reader wake-ups per
// millisecond, each taking a core from a rank with work): senders see it in
// the ring (RingControl::consumer_lease_end), and for what came before it
// the transport's control thread, while any reader is parked, looks every
// ShmTuning::lease_backstop, or when the lease would end if that is later,
// and wakes them if it lapsed.
class PollActivity {
 public:
  explicit PollActivity(std::chrono::microseconds lease) : lease_ns_(std::chrono::nanoseconds(lease).count()) {}
  // A poll; true if it renewed the lease.
  bool touch() {
    // Relaxed loads and stores, no read-modify-write: racing pollers only
    // blur the count.
    const uint32_t untimed = untimed_polls_.load(std::memory_order_relaxed);
    if (untimed + 1 < kPollsPerClockRead && last_ns_.load(std::memory_order_relaxed) != kNever) {
      untimed_polls_.store(untimed + 1, std::memory_order_relaxed);
      return false;
    }
    untimed_polls_.store(0, std::memory_order_relaxed);
    const int64_t now = steady_now_ns();
    const int64_t previous = last_poll_ns_.load(std::memory_order_relaxed);
    last_poll_ns_.store(now, std::memory_order_relaxed);  // racing pollers: either time will do
    if (now - previous > kHotPollGapNs * (int64_t{untimed} + 1)) return false;
    last_ns_.store(now, std::memory_order_relaxed);
    return true;
  }
  // When the lease ends, as the rings tell it to senders (RingControl::
  // consumer_lease_end).
  int64_t lease_end_ns() const {
    if (drivers_.load(std::memory_order_seq_cst) > 0) return kLeaseHeld;
    const int64_t last = last_ns_.load(std::memory_order_seq_cst);
    return last == kNever ? kLeaseNone : last + lease_ns_;
  }
  // Whether the rings should be told `end`: it changed in kind, or moved by
  // an eighth of a lease (so a hot poller writes the rings' lease line a few
  // times per lease, not on every renewal; what the rings say then ends at
  // most that much early, which only costs a parked reader an early look).
  // A cheap check before the publisher's lock (ShmTransport::publish_lease).
  bool should_publish(int64_t end) const {
    const int64_t published = published_end_.load(std::memory_order_relaxed);
    const bool both_timed = lease_timed(end) && lease_timed(published);
    return end != published && !(both_timed && end > published && end - published < lease_ns_ / 8);
  }
  // Under the publisher's lock: the end the rings are told now.
  void set_published(int64_t end) { published_end_.store(end, std::memory_order_relaxed); }
  // seq_cst: pairs with a parking reader (parked_ store, then remaining()).
  void end() { last_ns_.store(kNever, std::memory_order_seq_cst); }
  // A reader parks / unparks. The first to park tells the control thread
  // (`watcher_fd`, an eventfd it polls), which may be asleep for a long slice
  // and must now watch the lease. seq_cst: the watcher that sees no parked
  // reader has not missed one that already checked the lease.
  void reader_parks() {
    if (parked_readers_.fetch_add(1, std::memory_order_seq_cst) == 0 && watcher_fd_ >= 0) {
      const uint64_t one = 1;
      [[maybe_unused]] const ssize_t ignored = ::write(watcher_fd_, &one, sizeof one);
    }
  }
  void reader_unparks() { parked_readers_.fetch_sub(1, std::memory_order_seq_cst); }
  bool readers_parked() const { return parked_readers_.load(std::memory_order_seq_cst) > 0; }
  void set_watcher(int fd) { watcher_fd_ = fd; }
  // A driving loop (Transport::driver_enters) keeps a running lease from
  // lapsing; its end renews the lease like a hot poll, unless the polls
  // were ended (the driver blocks).
  void driver_enters() { drivers_.fetch_add(1, std::memory_order_seq_cst); }
  void driver_leaves() {
    // Not over an end() that raced with us: that thread blocks.
    int64_t last = last_ns_.load(std::memory_order_relaxed);
    if (last != kNever) last_ns_.compare_exchange_strong(last, steady_now_ns(), std::memory_order_relaxed);
    drivers_.fetch_sub(1, std::memory_order_seq_cst);
  }
  // Rest of the lease (zero: nobody polls).
  std::chrono::microseconds remaining() const {
    const int64_t last = last_ns_.load(std::memory_order_seq_cst);
    if (last == kNever) return std::chrono::microseconds(0);
    if (drivers_.load(std::memory_order_seq_cst) > 0) return std::chrono::microseconds(lease_ns_ / 1000);
    const int64_t rest = last + lease_ns_ - steady_now_ns();
    return rest <= 0 ? std::chrono::microseconds(0) : std::chrono::microseconds(rest / 1000 + 1);
  }

 private:
  static constexpr int64_t kNever = INT64_MIN;
  static constexpr int64_t kHotPollGapNs = 50'000;
  static constexpr uint32_t kPollsPerClockRead = 8;
  const int64_t lease_ns_;
  std::atomic<int64_t> last_ns_{kNever};  // lease start; relaxed: a hint, parked readers also wake on every event
  std::atomic<int64_t> last_poll_ns_{kNever / 2};  // any poll (kNever / 2: no overflow in now - previous)
  std::atomic<uint32_t> untimed_polls_{0};  // polls since the last clock read
  std::atomic<uint32_t> parked_readers_{0};
  std::atomic<uint32_t> drivers_{0};  // driving loops running (driver_enters)
  std::atomic<int64_t> published_end_{kLeaseNone};  // what the rings were last told
  int watcher_fd_ = -1;  // set before any reader starts
};

// One inbound ring, consumed by its reader thread or by a host thread's
// poll(), whichever holds consumer_mutex_: messages are consumed in ring
// order, and the message being consumed (current_) lives here, not on the
// consumer's stack, so whoever holds the lock next carries it on where the
// last one stopped. The sink thus sees every link's messages once and in
// order. poll() never waits for long: it takes complete messages, and a
// message still streaming in as long as its pieces keep arriving within the
// spin budget (a fused reduce+send or a large copy produces them back to
// back); when the sender falls behind, the poll returns and the next poll
// carries on, or the reader thread once the polls end. Kernel-stream
// messages (they may wait for room) and the end of the link are the
// reader's.
class InboundRing {
 public:
  // Where the grants this ring brings for direct writes go (none if the
  // sender has no gate or we write no payload directly).
  struct PeerDirect {
    DirectGrants* grants = nullptr;
    std::shared_ptr<DirectGate> gate;  // the sender's
    pid_t pid = 0;                     // the sender's process
    uint32_t slot = 0;                 // ours in its gate
  };

  // `outbox`: the sender's (null if it has none).
  // `parked_slice`: the longest a parked reader sleeps before it looks at
  // the lease itself (a safety net behind the control thread's check).
  InboundRing(std::shared_ptr<Mapping> mapping, UniqueFd control, NetAddress from, Sink& sink,
              std::chrono::microseconds spin, std::chrono::microseconds parked_slice, size_t max_piece,
              PollActivity& polls, std::shared_ptr<PeerOutbox> outbox, PeerDirect direct)
      : control_fd(std::move(control)),
        outbox_(std::move(outbox)),
        direct_(std::move(direct)),
        mapping_(std::move(mapping)),
        ctl_(mapping_->control()),
        data_(mapping_->data()),
        ring_bytes_(mapping_->ring_bytes()),
        max_piece_(max_piece),
        from_(from),
        sink_(sink),
        spin_(spin),
        parked_slice_(parked_slice),
        polls_(polls) {}

  ~InboundRing() { join(); }

  void start() { thread_ = std::thread([this] { run(); }); }

  // Our transport stops: the reader leaves at its next wait.
  void request_stop() {
    stop_.store(true, std::memory_order_release);
    wake(ctl_.data_futex);
  }
  // The control socket hung up: the sender closed or died.
  void peer_gone() {
    peer_gone_.store(true, std::memory_order_release);
    wake(ctl_.data_futex);
  }
  // The polls stopped (the lease is over): a parked reader resumes at once.
  void polls_ended() {
    if (parked_.load(std::memory_order_seq_cst)) wake(ctl_.data_futex);
  }
  // The poll lease's end, for senders that find the reader parked.
  void publish_lease(int64_t end) { ctl_.consumer_lease_end.store(end, std::memory_order_release); }
  // A poll found a message it must leave to the reader.
  void unpark() {
    takeover_.store(true, std::memory_order_seq_cst);
    if (parked_.load(std::memory_order_seq_cst)) wake(ctl_.data_futex);
  }
  bool finished() const { return finished_.load(std::memory_order_acquire); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }

  // Delivers up to kMaxPollMessages messages; see the class comment. True
  // when it delivered one. `leased`: a poll lease runs (the caller or
  // another poller polls again, or the polls end, or the lease lapses and
  // the reader takes over); otherwise (a sender waiting for room while
  // no lease runs) a message it leaves half consumed goes to the reader at
  // once.
  bool poll(bool leased = true) {
    // Most polls find the ring empty: say so without the lock. A message
    // published right after this check is taken by the next poll (or by the
    // reader once the polls stop). An unleased poll still looks, so that it
    // can hand a half-consumed message to the reader.
    const uint64_t first = ctl_.tail.load(std::memory_order_acquire);
    const uint64_t published = ctl_.head.load(std::memory_order_acquire) - first;
    if (leased && published == 0) return false;
    return consume(leased, first, published);
  }

  UniqueFd control_fd;  // owned here, watched by the control thread

 private:
  // poll() once it found something published (or was not leased): out of
  // line, so that the empty poll stays a few loads.
  [[gnu::noinline]] bool consume(bool leased, uint64_t first, uint64_t published) {
    // When something is published, fetch the header's slot and, if it is
    // published too, the next one (a small message's payload) from the
    // sender's cache together. Read one after the other, they were two
    // cross-core transfers in sequence on every small message's way. Slots
    // not yet published are left alone: they are the sender's next writes.
    if (published >= sizeof(abi::WireHeader)) __builtin_prefetch(data_ + first % ring_bytes_);
    if (published > sizeof(abi::WireHeader)) __builtin_prefetch(data_ + (first + sizeof(abi::WireHeader)) % ring_bytes_);
    std::unique_lock lock(consumer_mutex_, std::try_to_lock);
    if (!lock.owns_lock() || ended_) return false;
    bool delivered = false;
    uint64_t tail = ctl_.tail.load(std::memory_order_relaxed);  // only the lock holder moves it
    for (int n = 0; n < kMaxPollMessages; ++n) {
      if (!current_.active) {
        abi::WireHeader header{};
        if (ctl_.head.load(std::memory_order_acquire) - tail < sizeof header) break;
        std::memcpy(&header, data_ + tail % ring_bytes_, sizeof header);
        if (header.strm != 0) {
          lock.unlock();
          unpark();
          break;
        }
        begin_current(tail);
      }
      copy_published(tail);
      // Streaming in: keep copying while the sender keeps publishing.
      while (!current_complete() && spin_until([&] { return published_beyond(tail); }, spin_))
        copy_published(tail);
      if (!current_complete()) {
        // The sender fell behind: the next poll carries on from here, or
        // the reader thread once the polls stop (end_polling or the end of
        // their lease).
        if (!leased) {
          lock.unlock();
          unpark();
        }
        break;
      }
      end_current(0);
      delivered = true;
    }
    return delivered;
  }

  const std::shared_ptr<PeerOutbox> outbox_;
  const PeerDirect direct_;
  enum class Wait { ready, stopped, closed, aborted };
  // Bounds the time one poll() spends in one ring.
  static constexpr int kMaxPollMessages = 16;

  // The message being consumed; guarded by consumer_mutex_.
  struct Current {
    bool active = false;
    abi::WireHeader header{};
    ReceiveTicket ticket;
    std::byte* dst = nullptr;  // nullptr: discard (the sink refused it or revoked its window)
    size_t got = 0;            // payload bytes consumed so far
    uint32_t status = 0;       // error bits to end the message with (a bad descriptor)
  };

  // Takes the header at `tail` (published) and asks the sink where the
  // payload goes.
  void begin_current(uint64_t& tail) {
    current_ = Current{};
    current_.active = true;
    std::memcpy(&current_.header, data_ + tail % ring_bytes_, sizeof current_.header);
    tail += sizeof current_.header;
    if ((current_.header.flags & abi::kHdrTransportFrame) != 0) {
      take_frame(tail);
      return;
    }
    release(tail);
    current_.dst = sink_.begin_message(from_, current_.header, current_.ticket);
  }

  // A frame: the header is followed by a descriptor (published together)
  // that says where the payload is, or, for a grant, what it offers.
  void take_frame(uint64_t& tail) {
    current_.header.flags &= ~uint32_t{abi::kHdrTransportFrame};
    uint32_t magic = 0;
    std::memcpy(&magic, data_ + tail % ring_bytes_, sizeof magic);
    if (magic == kSharedMagic) {
      take_shared(tail);  // copies out of the outbox before it releases the descriptor
      return;
    }
    const abi::WireHeader& h = current_.header;
    DirectDataDescriptor direct{};
    if (magic == kGrantMagic) {
      DirectGrantDescriptor d{};
      std::memcpy(&d, data_ + tail % ring_bytes_, sizeof d);
      // Recorded before the firmware hears of the grant, so its data finds it.
      if (direct_.grants != nullptr && h.count == 0)
        direct_.grants->record({from_, direct_.pid, direct_.slot, h.ctx, h.rid, h.vaddr, h.host, d.address, d.bytes,
                                d.epoch, direct_.gate, 0});
    } else if (magic == kDirectMagic) {
      std::memcpy(&direct, data_ + tail % ring_bytes_, sizeof direct);
    } else {
      ACCL_LOG_ERROR("shm: link from {} sent a frame of unknown kind 0x{:x}", format_address(from_), magic);
      current_.status = abi::kLinkError;
    }
    tail += 64;
    release(tail);
    current_.dst = sink_.begin_message(from_, h, current_.ticket);
    // No payload follows in the ring: a direct write put it in the window
    // already, a grant has none, and anything else is malformed.
    current_.got = h.count;
    if (magic == kDirectMagic) {
      if (current_.dst != nullptr && reinterpret_cast<uintptr_t>(current_.dst) != direct.address) {
        ACCL_LOG_ERROR("shm: link from {} wrote a payload of {} bytes directly at 0x{:x}, but its window is at {}",
                       format_address(from_), h.count, direct.address, static_cast<void*>(current_.dst));
        current_.status = abi::kLinkError;
      }
    } else if (h.count != 0) {
      current_.status = abi::kLinkError;
    }
  }

  // The payload of the current message is in the sender's outbox, named by
  // the descriptor at `tail` (published together with the header). Copies it
  // and only then releases the descriptor: from then on the sender may reuse
  // the slot.
  void take_shared(uint64_t& tail) {
    SharedDescriptor d{};
    std::memcpy(&d, data_ + tail % ring_bytes_, sizeof d);
    current_.dst = sink_.begin_message(from_, current_.header, current_.ticket);
    const size_t count = current_.header.count;
    const std::byte* src = outbox_ ? outbox_->payload(d, count) : nullptr;
    if (src == nullptr) {
      ACCL_LOG_ERROR("shm: link from {} sent a bad shared-payload descriptor (offset {}, {} bytes)",
                     format_address(from_), d.offset, count);
      current_.status = abi::kLinkError;
    } else if (current_.dst != nullptr && !store_payload(current_.ticket, current_.dst, 0, src, count)) {
      current_.dst = nullptr;  // the window was revoked
    }
    current_.got = count;
    tail += sizeof d;
    release(tail);
  }

  bool current_complete() const { return current_.got == current_.header.count; }
  bool published_beyond(uint64_t tail) const { return ctl_.head.load(std::memory_order_acquire) != tail; }

  // Copies what is published of the current message's payload, piece by
  // piece (each released at once, so the sender can refill the ring while
  // we copy). Pieces are 64-byte multiples except the last, whose padding
  // the producer published with it.
  void copy_published(uint64_t& tail) {
    while (!current_complete()) {
      const size_t avail = ctl_.head.load(std::memory_order_acquire) - tail;
      if (avail == 0) return;
      const size_t contiguous = ring_bytes_ - tail % ring_bytes_;
      const size_t n = std::min({avail, contiguous, size_t{current_.header.count} - current_.got, max_piece_});
      if (current_.dst != nullptr &&
          !store_payload(current_.ticket, current_.dst, current_.got, data_ + tail % ring_bytes_, n))
        current_.dst = nullptr;
      current_.got += n;
      tail += round_up64(n);
      release(tail);
    }
  }

  void end_current(uint32_t status) {
    current_.active = false;
    sink_.end_message(from_, current_.header, current_.ticket, status | current_.status);
  }

  void run() {
    name_this_thread("accl-shm-rx");
    t_shm_reader_thread = true;
    Wait w = Wait::ready;
    std::unique_lock lock(consumer_mutex_, std::defer_lock);
    for (;;) {
      // Between messages (or when a poller left a message half consumed)
      // the lock is free, so host threads may poll. Any published data is
      // at least 64 bytes: a header or a padded piece.
      w = wait_data(sizeof(abi::WireHeader), /*may_park=*/true);
      lock.lock();
      uint64_t tail = ctl_.tail.load(std::memory_order_relaxed);
      if (!current_.active) {
        const bool header_ready = ctl_.head.load(std::memory_order_acquire) - tail >= sizeof(abi::WireHeader);
        if (w != Wait::ready && !header_ready) break;  // what was published has been delivered
        if (!header_ready) {  // a poll took it
          lock.unlock();
          continue;
        }
        begin_current(tail);
      }
      w = Wait::ready;  // the link may have ended, but after this message
      while (!current_complete()) {
        w = wait_data(1, /*may_park=*/false);
        if (w != Wait::ready) break;
        copy_published(tail);
      }
      if (w != Wait::ready) break;
      sink_.reader_delivers();
      end_current(0);
      lock.unlock();
      sink_.reader_delivered();  // no lock held: the work it runs may send and wait for ring space
    }
    // Still holding the lock: no poll() delivers anything after this.
    ended_ = true;
    const bool in_message = current_.active;
    if (in_message) {
      if (w != Wait::stopped)
        ACCL_LOG_WARN("shm: link from {} broke mid-message", format_address(from_));
      end_current(abi::kLinkError);
    }
    if (w != Wait::stopped) {
      if (!in_message) ACCL_LOG_INFO("shm: link from {} closed", format_address(from_));
      sink_.link_failed(from_, abi::kLinkError);
    }
    lock.unlock();
    // A sender still writing must fail instead of waiting for space.
    ctl_.consumer_state.store(kConsumerClosed, std::memory_order_release);
    wake(ctl_.space_futex);
    finished_.store(true, std::memory_order_release);
  }

  void release(uint64_t tail) {
    ctl_.tail.store(tail, std::memory_order_release);
    notify(ctl_.space_futex, ctl_.producer_sleeping);
  }

  // Waits until `need` bytes past the released tail are published.
  // `may_park`: between messages, where a host thread's poll() may consume
  // instead of us (see PollActivity).
  Wait wait_data(size_t need, bool may_park) {
    auto ready = [&] {
      return ctl_.head.load(std::memory_order_acquire) - ctl_.tail.load(std::memory_order_acquire) >= need;
    };
    auto event = [&] {
      return stop_.load(std::memory_order_acquire) || peer_gone_.load(std::memory_order_acquire) ||
             ctl_.producer_state.load(std::memory_order_acquire) != kProducerOpen;
    };
    // A poll left us a message it must not take (unpark): we deliver it
    // even while the polls go on.
    bool must_take = false;
    auto leave_to_pollers = [&] {
      if (!may_park) return false;
      if (takeover_.exchange(false, std::memory_order_seq_cst)) must_take = true;
      return !must_take && polls_.remaining().count() > 0;
    };
    bool spun = false;
    for (;;) {
      if (!event() && leave_to_pollers()) {
        // Parked: the pollers consume, even what is in the ring right now.
        // Senders wake us only once the lease is over (consumer_sleeping
        // says parked; notify_consumer); every other event (stop, hang-up,
        // close, abort, unpark, end of the polls) bumps the word. We take
        // over when a send finds the lease over, when a poll asks us to, or
        // when the control thread finds it lapsed (ShmTransport::watch_lease).
        parked_.store(true, std::memory_order_seq_cst);
        polls_.reader_parks();
        ctl_.consumer_sleeping.exchange(kConsumerParked, std::memory_order_acq_rel);
        const uint32_t seen = ctl_.data_futex.load(std::memory_order_acquire);
        if (!event() && !takeover_.load(std::memory_order_seq_cst) && polls_.remaining().count() > 0)
          futex_wait(ctl_.data_futex, seen, parked_slice_);
        ctl_.consumer_sleeping.store(kConsumerAwake, std::memory_order_relaxed);
        polls_.reader_unparks();
        parked_.store(false, std::memory_order_relaxed);
        continue;
      }
      if (ready()) return Wait::ready;
      if (stop_.load(std::memory_order_acquire)) return Wait::stopped;
      // Published data stays valid after the producer closed or died:
      // deliver it first (ready() above), then report the end.
      uint32_t state = ctl_.producer_state.load(std::memory_order_acquire);
      if (state == kProducerAborted) return Wait::aborted;
      if (state == kProducerClosed || peer_gone_.load(std::memory_order_acquire)) {
        return ready() ? Wait::ready : Wait::closed;
      }
      if (!spun) {
        // Spin once per wait; stop spinning as soon as a host or firmware
        // thread polls again (it takes the message without a wake-up).
        spun = true;
        if (spin_until([&] { return ready() || event() || leave_to_pollers(); }, spin_)) continue;
      }
      sleep_until(ctl_.data_futex, ctl_.consumer_sleeping,
                  [&] { return ready() || event() || takeover_.load(std::memory_order_seq_cst); },
                  std::chrono::duration_cast<std::chrono::microseconds>(kSleepSlice));
    }
  }

  const std::shared_ptr<Mapping> mapping_;
  RingControl& ctl_;
  std::byte* const data_;
  const size_t ring_bytes_;
  const size_t max_piece_;
  const NetAddress from_;
  Sink& sink_;
  const std::chrono::microseconds spin_;
  const std::chrono::microseconds parked_slice_;
  PollActivity& polls_;  // the transport's; readers count themselves in while parked
  std::mutex consumer_mutex_;  // held by whoever consumes: the reader thread or a poll()
  bool ended_ = false;         // guarded by consumer_mutex_: the reader reported the link's end
  Current current_;            // guarded by consumer_mutex_
  std::atomic<bool> stop_{false};
  std::atomic<bool> peer_gone_{false};
  std::atomic<bool> parked_{false};
  std::atomic<bool> takeover_{false};  // a poll left a message to us (unpark)
  std::atomic<bool> finished_{false};
  std::thread thread_;
};

// The rings host threads poll. The control thread adds and removes rings
// now and then; host threads read the list on every poll, so they read a
// published snapshot without taking a lock. A replaced snapshot is freed once
// no poll that may have loaded it still runs: each poll counts itself in one
// of two counters, chosen by the phase it reads first. A writer publishes the
// new snapshot and then, for each counter in turn, flips the phase away from
// it and waits until it drains. A poll holding the old snapshot counted
// itself before the publication, hence before either wait; polls that start
// meanwhile count in the other counter, so the waits end even while polls
// keep overlapping.
class PollableRings {
 public:
  using List = std::vector<std::shared_ptr<InboundRing>>;

  PollableRings() : current_(new List) {}
  ~PollableRings() { delete current_.load(std::memory_order_acquire); }
  PollableRings(const PollableRings&) = delete;
  PollableRings& operator=(const PollableRings&) = delete;

  template <class F>
  void for_each(F&& f) {
    const unsigned phase = phase_.load(std::memory_order_seq_cst) & 1;
    readers_[phase].fetch_add(1, std::memory_order_seq_cst);
    const List* list = current_.load(std::memory_order_seq_cst);
    for (const auto& ring : *list) f(*ring);
    readers_[phase].fetch_sub(1, std::memory_order_release);
  }

  void add(std::shared_ptr<InboundRing> ring) {
    std::lock_guard lock(writer_mutex_);
    auto next = std::make_unique<List>(*current_.load(std::memory_order_relaxed));
    next->push_back(std::move(ring));
    replace(std::move(next));
  }
  void remove(const InboundRing* ring) {
    std::lock_guard lock(writer_mutex_);
    auto next = std::make_unique<List>(*current_.load(std::memory_order_relaxed));
    std::erase_if(*next, [ring](const std::shared_ptr<InboundRing>& r) { return r.get() == ring; });
    replace(std::move(next));
  }
  void clear() {
    std::lock_guard lock(writer_mutex_);
    replace(std::make_unique<List>());
  }

 private:
  // writer_mutex_ held.
  void replace(std::unique_ptr<List> next) {
    std::unique_ptr<List> old(current_.exchange(next.release(), std::memory_order_seq_cst));
    for (int flip = 0; flip < 2; ++flip) {
      const unsigned drained = phase_.fetch_add(1, std::memory_order_seq_cst) & 1;
      // Polls are short (a bounded number of messages per ring).
      while (readers_[drained].load(std::memory_order_acquire) != 0) std::this_thread::yield();
    }
  }

  std::mutex writer_mutex_;  // serializes add / remove / clear
  std::atomic<List*> current_;
  std::atomic<unsigned> phase_{0};
  std::atomic<int> readers_[2] = {0, 0};
};

// ---- transport ------------------------------------------------------------

class ShmTransport final : public Transport, private InboundProgress {
 public:
  ShmTransport(const TransportOptions& options, const ShmTuning& tuning)
      : tuning_(tuning),
        credential_(make_credential(options.job_secret)),
        check_secret_(!options.job_secret.empty()),
        spin_(spin_duration()) {
    const size_t ring = std::clamp(tuning_.ring_bytes, kMinRingBytes, kMaxRingBytes);
    tuning_.ring_bytes = (ring + kPageBytes - 1) / kPageBytes * kPageBytes;
    tuning_.max_piece_bytes = std::clamp(round_up64(tuning_.max_piece_bytes), size_t{4096}, tuning_.ring_bytes / 2);
    job_hash_ = shm_name_hash(options.job_secret);
    // Segments of killed jobs would hold /dev/shm memory until reboot.
    remove_stale_shm_segments();

    local_ = options.bind;
    if (local_.port == 0) {
      // The shm endpoint is named by ip:port like the network transports;
      // hold a bound (not listening) TCP socket so no other process on this
      // host gets the same name.
      port_reservation_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      sockaddr_in sa = to_sockaddr(options.bind);
      if (!port_reservation_ || ::bind(port_reservation_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
        throw_errno("shm: reserve a port on " + format_address(options.bind));
      local_ = bound_address(port_reservation_.get());
    }
    // Named (control socket, ring names, handshakes) by its identity: the
    // address peers dial, also when bound to the wildcard.
    local_ = identity_address(local_);

    listen_fd_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!listen_fd_) throw_errno("shm: socket");
    socklen_t len = 0;
    sockaddr_un sa = control_address(local_, len);
    if (::bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0)
      throw_errno("shm: bind control socket for " + format_address(local_));
    if (::listen(listen_fd_.get(), 128) != 0) throw_errno("shm: listen");
    epoll_fd_.reset(::epoll_create1(EPOLL_CLOEXEC));
    wake_fd_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!epoll_fd_ || !wake_fd_) throw_errno("shm: epoll/eventfd");
    polls_.set_watcher(wake_fd_.get());
    watch(listen_fd_.get(), EPOLLIN);
    watch(wake_fd_.get(), EPOLLIN);
    if (tuning_.outbox_bytes != 0) {
      outbox_ = Outbox::create(std::min(tuning_.outbox_bytes, kMaxRingBytes));
      if (!outbox_) ACCL_LOG_INFO("shm: no outbox ({}); every payload goes through the rings", std::strerror(errno));
    }
    direct_.min_bytes = tuning_.direct_min_bytes;
    if (direct_.min_bytes != 0) {
      direct_.own_gate = DirectGate::create();
      if (!direct_.own_gate)
        ACCL_LOG_INFO("shm: no direct-write gate ({}); peers copy payloads through the rings", std::strerror(errno));
    }
  }

  ~ShmTransport() override { stop(); }

  std::string name() const override { return "shm"; }
  NetAddress local_address() const override { return local_; }

  void start(Sink& sink) override {
    std::lock_guard lock(state_mutex_);
    if (started_ || stopped_) throw std::logic_error("shm transport: start() called twice or after stop()");
    started_ = true;
    sink_ = &sink;
    direct_.sink = &sink;
    control_thread_ = std::thread([this] { control_loop(); });
  }

  std::shared_ptr<Link> connect(const NetAddress& peer, Clock::time_point deadline) override {
    // Shared memory only reaches this host: answer "not reachable" at once
    // for other addresses so the caller falls back to a network transport.
    if (!is_local_ipv4(peer.ip)) return nullptr;
    return peers_.connect(peer, deadline, [this](const NetAddress& p, Clock::time_point d) { return dial(p, d); });
  }

  bool polls() const override { return true; }
  bool poll() override {
    if (polls_.touch()) publish_lease();
    bool delivered = false;
    pollable_.for_each([&](InboundRing& ring) { delivered = ring.poll() || delivered; });
    return delivered;
  }

  void driver_enters() override {
    polls_.driver_enters();
    publish_lease(/*always=*/true);
  }
  void driver_leaves() override {
    polls_.driver_leaves();
    publish_lease(/*always=*/true);
  }

  void end_polling() override {
    polls_.end();
    publish_lease(/*always=*/true);
    pollable_.for_each([](InboundRing& ring) { ring.polls_ended(); });
  }

  void stop() override {
    {
      std::lock_guard lock(state_mutex_);
      if (stopped_) return;
      stopped_ = true;
    }
    stopping_.store(true, std::memory_order_release);
    uint64_t one = 1;
    [[maybe_unused]] ssize_t ignored = ::write(wake_fd_.get(), &one, sizeof one);
    if (control_thread_.joinable()) control_thread_.join();
    // The control thread is gone: the rings are ours now. No poll() (nor a
    // sender's poll_inbound()) may reach the sink once stop() returns; a
    // send still waiting for room is ended by close_all() below, which waits
    // for it to leave, so no link uses this transport after stop().
    pollable_.clear();
    for (auto& [fd, ring] : rings_) ring->request_stop();
    for (auto& [fd, ring] : rings_) ring->join();
    rings_.clear();  // closes control sockets: senders see the hang-up
    listen_fd_.reset();
    std::lock_guard lock(state_mutex_);
    peers_.close_all();
    if (outbox_) outbox_->clear();
    direct_.grants.clear();
    port_reservation_.reset();
  }

  bool peer_writing() const override { return direct_.own_gate && direct_.own_gate->writer_in(); }

  bool fence_direct_writes() override {
    constexpr auto kMaxWait = std::chrono::seconds(2);
    return !direct_.own_gate || direct_.own_gate->fence(Clock::now() + kMaxWait);
  }

 private:
  bool poll_inbound() override {
    bool delivered = false;
    // While the poll lease runs (a host or firmware thread polls this
    // transport, often the caller itself: a host thread whose firmware pass
    // sends), a message this poll leaves half consumed stays with the polls,
    // as a host poll's does: the next poll carries it on, here or in the
    // caller's loop, or the reader once the lease has lapsed and the control
    // thread (or a later publish) wakes it. A reader thread that sends (its
    // delivery enabled a firmware pass) polls no further once it has room:
    // its leftovers go to the reader at once, as before. Handing every
    // leftover to the reader at once made two ranks that exchange messages
    // larger than a ring wake their reader threads piece by piece:
    // alternating runs, 2-rank allreduce
    // 4 MiB 494-588 -> 356-367 us, 8 MiB 1248-1334 -> 845-863 us, 4-rank
    // alltoall 1 MiB 579-718 -> 447-451 us. (Only while a driving loop runs:
    // 4 MiB 478-547 us; hosts that poll with test() hold a timed lease.)
    const bool leased = !t_shm_reader_thread && polls_.remaining().count() > 0;
    pollable_.for_each([&](InboundRing& ring) { delivered = ring.poll(leased) || delivered; });
    return delivered;
  }

  void stop_polling_inbound() override { end_polling(); }

  // Tells the inbound rings' senders when our poll lease ends (see
  // RingControl::consumer_lease_end): after a poll renewed it, when that
  // moved it enough to matter; `always` after a change of kind (a driver
  // came or left, the polls ended) and for a new ring. Publishers recompute
  // the end under one lock, and whoever changed the lease's kind publishes
  // after the change, so the rings never keep an end older than the last
  // change (a racing poller's Held after the driver left, say); a skipped
  // renewal only leaves them an end that comes early.
  void publish_lease(bool always = false) {
    if (!always && !polls_.should_publish(polls_.lease_end_ns())) return;
    std::lock_guard lock(lease_publish_mutex_);
    const int64_t end = polls_.lease_end_ns();
    polls_.set_published(end);
    pollable_.for_each([end](InboundRing& ring) { ring.publish_lease(end); });
  }

  void watch(int fd, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno("shm: epoll_ctl");
  }

  // Finds the peer's control socket (retrying briefly: it may still be
  // starting), announces a fresh segment and waits for the reply.
  std::shared_ptr<ShmLink> dial(const NetAddress& peer, Clock::time_point deadline) {
    const auto find_deadline = std::min(deadline, Clock::now() + tuning_.local_connect_grace);
    auto backoff = std::chrono::milliseconds(1);
    UniqueFd fd;
    for (;;) {
      fd = try_connect_control(peer);  // a peer bound to 0.0.0.0 is named by its identity too
      if (fd) break;
      if (stopping_.load(std::memory_order_acquire) || Clock::now() >= find_deadline) {
        ACCL_LOG_DEBUG("shm: no shared-memory endpoint for {} on this host", format_address(peer));
        return nullptr;
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(backoff, find_deadline - Clock::now()));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
    }

    std::shared_ptr<Mapping> mapping;
    std::string name;
    for (int attempt = 0; !mapping && attempt < 16; ++attempt) {
      name = "/" + format_shm_segment_name({job_hash_, peer.ip, peer.port, local_.port, static_cast<int>(::getpid()),
                                            name_counter_.fetch_add(1)});
      mapping = Mapping::create(name, tuning_.ring_bytes);
      if (!mapping && errno != EEXIST) break;
    }
    if (!mapping) {
      ACCL_LOG_ERROR("shm: cannot create a ring for {}: {}", format_address(peer), std::strerror(errno));
      return nullptr;
    }
    ShmHello hello;
    hello.id = make_identity(kHelloShm, local_, credential_);
    hello.ring_bytes = tuning_.ring_bytes;
    hello.sender_pid = static_cast<uint32_t>(::getpid());
    std::memcpy(hello.shm_name, name.c_str(), std::min(name.size() + 1, sizeof hello.shm_name));
    hello.outbox_bytes = outbox_ ? outbox_->bytes() : 0;
    // The peer writes into our windows through its own slot of our gate; the
    // kernel names the peer's process (SO_PEERCRED of the socket we dialled).
    std::optional<uint32_t> gate_slot;
    ucred peer_cred{};
    socklen_t cred_len = sizeof peer_cred;
    if (direct_.own_gate && ::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &peer_cred, &cred_len) == 0)
      gate_slot = direct_.own_gate->assign_slot(peer_cred.pid);
    hello.gate_bytes = gate_slot ? DirectGate::kBytes : 0;
    hello.gate_slot = gate_slot.value_or(0);
    HelloReply reply;
    IoStatus io = send_hello(fd.get(), hello, {outbox_ ? outbox_->fd() : -1, gate_slot ? direct_.own_gate->fd() : -1},
                             deadline, &stopping_);
    if (io == IoStatus::ok) io = read_exact(fd.get(), &reply, sizeof reply, deadline, &stopping_, true);
    // Mapped on both sides (or given up): the name is no longer needed.
    ::shm_unlink(name.c_str());
    if (io != IoStatus::ok) {
      ACCL_LOG_INFO("shm: handshake with {} failed: {}", format_address(peer),
                    io == IoStatus::timeout ? "timed out" : "closed");
      return nullptr;
    }
    if (reply.magic != kHelloMagic || reply.status != kHelloAccepted) {
      ACCL_LOG_ERROR("shm: {} refused our connection: {}", format_address(peer),
                     describe(reply.magic == kHelloMagic ? static_cast<HelloStatus>(reply.status) : kHelloMalformed));
      return nullptr;
    }
    ACCL_LOG_DEBUG("shm: connected {} -> {} ({})", format_address(local_), format_address(peer), name);
    return std::make_shared<ShmLink>(std::move(mapping), std::move(fd), peer, tuning_, spin_,
                                     static_cast<InboundProgress&>(*this), outbox_, direct_);
  }

  static UniqueFd try_connect_control(const NetAddress& a) {
    UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return fd;
    socklen_t len = 0;
    sockaddr_un sa = control_address(a, len);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) fd.reset();
    return fd;
  }

  // ---- control thread ----------------------------------------------------

  struct Pending {
    UniqueFd fd;
    Clock::time_point accepted_at;
  };

  void control_loop() {
    name_this_thread("accl-shm-ctl");
    std::vector<epoll_event> events(32);
    while (!stopping_.load(std::memory_order_acquire)) {
      const int n = wait_events(events, watch_lease());
      if (n < 0 && errno != EINTR) {
        ACCL_LOG_ERROR("shm: epoll_wait: {}", std::strerror(errno));
        break;
      }
      for (int i = 0; i < n && !stopping_.load(std::memory_order_acquire); ++i) {
        const int fd = events[i].data.fd;
        if (fd == wake_fd_.get()) {  // stop(), or the first reader parked (watch_lease)
          uint64_t count = 0;
          [[maybe_unused]] const ssize_t ignored = ::read(wake_fd_.get(), &count, sizeof count);
          continue;
        }
        if (fd == listen_fd_.get()) {
          accept_all();
        } else if (auto p = pending_.find(fd); p != pending_.end()) {
          handle_hello(p);
        } else if (auto r = rings_.find(fd); r != rings_.end()) {
          watch_established(*r->second);
        }
      }
      sweep();
    }
    pending_.clear();
  }

  // epoll_wait to the microsecond (a lease is about a millisecond); kernels
  // before 5.11 lack epoll_pwait2: there, whole milliseconds, rounded up.
  int wait_events(std::vector<epoll_event>& events, std::chrono::microseconds timeout) {
    const int max = static_cast<int>(events.size());
    if (!epoll_pwait2_missing_) {
      timespec ts{};
      ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000);
      ts.tv_nsec = static_cast<long>((timeout.count() % 1000000) * 1000);
      const int n = ::epoll_pwait2(epoll_fd_.get(), events.data(), max, &ts, nullptr);
      if (n >= 0 || errno != ENOSYS) return n;
      epoll_pwait2_missing_ = true;
    }
    return ::epoll_wait(epoll_fd_.get(), events.data(), max, static_cast<int>((timeout.count() + 999) / 1000));
  }

  // The lapse of the poll lease, for the parked readers (see PollActivity):
  // wakes them if it lapsed, and returns how long the control thread may
  // sleep. Woken readers that have not run yet by the next check (a busy
  // core) are woken again one lease later, not in a loop. While the lease
  // runs the next check is a backstop (ShmTuning::lease_backstop) rather
  // than the lease's end: senders wake a parked reader themselves once the
  // lease is over, so the check only serves a message that came while the
  // lease ran and found the polls stopped before they took it.
  std::chrono::microseconds watch_lease() {
    constexpr auto kIdleSlice = std::chrono::duration_cast<std::chrono::microseconds>(kWaitSlice);
    if (!polls_.readers_parked()) return kIdleSlice;
    if (const auto rest = polls_.remaining(); rest.count() > 0)
      return std::min(std::max(rest, tuning_.lease_backstop), kIdleSlice);
    for (auto& [fd, ring] : rings_) ring->polls_ended();
    return std::clamp(tuning_.poll_lease, std::chrono::microseconds(1), kIdleSlice);
  }

  void accept_all() {
    for (;;) {
      int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          ACCL_LOG_ERROR("shm: accept: {}", std::strerror(errno));
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return;
      }
      Pending p{UniqueFd(fd), Clock::now()};
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.fd = fd;
      if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) continue;
      pending_.emplace(fd, std::move(p));
    }
  }

  void handle_hello(std::map<int, Pending>::iterator it) {
    const int fd = it->first;
    ShmHello hello;
    std::array<UniqueFd, 2> passed;
    ssize_t n = receive_hello(fd, hello, passed);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    UniqueFd conn = std::move(it->second.fd);
    pending_.erase(it);
    if (n == 0) return;  // gave up before sending anything
    HelloReply reply;
    std::string why;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::geteuid()) {
      reply.status = kHelloRefused;
      why = "process of another user";
    } else if (n != static_cast<ssize_t>(sizeof hello)) {
      reply.status = kHelloMalformed;
      why = "malformed handshake";
    } else if ((reply.status = check_identity(hello.id, kHelloShm, credential_, check_secret_)) != kHelloAccepted) {
      why = describe(static_cast<HelloStatus>(reply.status));
    } else if (!valid_shm_name(hello.shm_name, sizeof hello.shm_name) || hello.ring_bytes < kMinRingBytes ||
               hello.ring_bytes > kMaxRingBytes || hello.ring_bytes % kPageBytes != 0) {
      reply.status = kHelloMalformed;
      why = "bad segment name or size";
    }
    // The descriptors come in order: the outbox's, then the gate's.
    const int outbox_fd = hello.outbox_bytes != 0 ? passed[0].get() : -1;
    const int gate_fd = hello.gate_bytes != 0 ? passed[hello.outbox_bytes != 0 ? 1 : 0].get() : -1;
    const size_t fds_expected = (hello.outbox_bytes != 0 ? 1 : 0) + (hello.gate_bytes != 0 ? 1 : 0);
    const size_t fds_passed = (passed[0] ? 1 : 0) + (passed[1] ? 1 : 0);
    if (reply.status == kHelloAccepted &&
        (hello.outbox_bytes > kMaxRingBytes ||
         (hello.gate_bytes != 0 && (hello.gate_bytes != DirectGate::kBytes || hello.gate_slot >= DirectGate::kSlots)) ||
         fds_passed != fds_expected)) {
      reply.status = kHelloMalformed;
      why = "bad outbox or gate";
    }
    std::shared_ptr<Mapping> mapping;
    std::shared_ptr<PeerOutbox> outbox;
    std::shared_ptr<DirectGate> gate;
    if (reply.status == kHelloAccepted) {
      mapping = Mapping::open(hello.shm_name, hello.ring_bytes, why);
      if (mapping && outbox_fd >= 0) outbox = PeerOutbox::map(outbox_fd, hello.outbox_bytes, why);
      if (mapping && gate_fd >= 0) gate = DirectGate::map(gate_fd, why);
      if (!mapping || (outbox_fd >= 0 && !outbox) || (gate_fd >= 0 && !gate)) reply.status = kHelloRefused;
    }
    if (reply.status != kHelloAccepted) {
      ACCL_LOG_WARN("shm: refusing connection from pid {}: {}", cred.pid, why);
      [[maybe_unused]] ssize_t sent = ::send(fd, &reply, sizeof reply, MSG_NOSIGNAL);
      return;  // closes the connection
    }
    NetAddress from{hello.id.listen_ip, hello.id.listen_port};
    // Grants from this peer let our sends write into its windows when both
    // sides allow direct writes (the gate is the peer's, its pid the
    // kernel's word for it).
    InboundRing::PeerDirect peer_direct;
    if (gate && direct_.min_bytes != 0) peer_direct = {&direct_.grants, std::move(gate), cred.pid, hello.gate_slot};
    const auto parked_slice =
        std::max(std::chrono::duration_cast<std::chrono::microseconds>(kSleepSlice), tuning_.lease_backstop);
    auto ring = std::make_shared<InboundRing>(std::move(mapping), std::move(conn), from, *sink_, spin_,
                                              parked_slice, tuning_.max_piece_bytes, polls_, std::move(outbox),
                                              std::move(peer_direct));
    // Start reading before accepting: the sender may publish right after
    // the reply.
    ring->start();
    if (::send(fd, &reply, sizeof reply, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof reply)) {
      ring->peer_gone();
    }
    ACCL_LOG_DEBUG("shm: accepted link {} -> {}", format_address(from), format_address(local_));
    pollable_.add(ring);
    publish_lease(/*always=*/true);
    rings_.emplace(fd, std::move(ring));
  }

  // An established control socket became readable: hang-up (the sender
  // closed or died) or stray bytes, which the protocol does not allow.
  void watch_established(InboundRing& ring) {
    char scratch[64];
    ssize_t n = ::recv(ring.control_fd.get(), scratch, sizeof scratch, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, ring.control_fd.get(), nullptr);
    ring.peer_gone();
  }

  void sweep() {
    const auto now = Clock::now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (now - it->second.accepted_at > tuning_.handshake_timeout) {
        ACCL_LOG_WARN("shm: closing a control connection without handshake");
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    // Reap readers whose link ended, so reconnecting peers do not pile up
    // threads.
    for (auto it = rings_.begin(); it != rings_.end();) {
      if (it->second->finished()) {
        ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, it->first, nullptr);
        pollable_.remove(it->second.get());
        it = rings_.erase(it);
      } else {
        ++it;
      }
    }
  }

  ShmTuning tuning_;
  const Credential credential_;
  const bool check_secret_;
  const std::chrono::microseconds spin_;
  std::string job_hash_;  // names this job's ring segments (shm_segments.hpp)
  NetAddress local_;
  UniqueFd port_reservation_;
  UniqueFd listen_fd_;
  UniqueFd epoll_fd_;
  UniqueFd wake_fd_;
  std::atomic<uint64_t> name_counter_{0};
  std::shared_ptr<Outbox> outbox_;  // null: none (every payload through the rings)
  DirectWrites direct_;              // links and readers refer to it: declared before them

  std::mutex state_mutex_;
  bool started_ = false;
  bool stopped_ = false;
  PeerLinks<ShmLink> peers_{state_mutex_, stopped_};
  Sink* sink_ = nullptr;
  std::thread control_thread_;
  std::atomic<bool> stopping_{false};
  PollActivity polls_{tuning_.poll_lease};  // read by the reader threads: declared before the rings
  std::mutex lease_publish_mutex_;           // see publish_lease()

  // Control thread only (stop() takes them over after joining it).
  std::map<int, Pending> pending_;
  std::map<int, std::shared_ptr<InboundRing>> rings_;
  bool epoll_pwait2_missing_ = false;

  // The rings host threads poll (the control thread adds and removes them).
  PollableRings pollable_;
};

}  // namespace

std::unique_ptr<Transport> make_shm_transport(const TransportOptions& options, const ShmTuning& tuning) {
  return std::make_unique<ShmTransport>(options, tuning);
}

std::chrono::microseconds shm_poll_lease(int64_t configured_us, unsigned host_processes, unsigned cores) {
  if (configured_us > 0) return std::chrono::microseconds(configured_us);
  const bool oversubscribed = host_processes > 0 && !core_per_process(host_processes, cores);
  return oversubscribed ? std::chrono::microseconds(10'000) : std::chrono::microseconds(1'000);
}

size_t shm_direct_min_for(double kernel_copy_ns, double memcpy_ns) {
  // The kernel copy failed, or no usable clock (NaN and infinities included).
  if (!(kernel_copy_ns > 0) || !(memcpy_ns > 0) || !std::isfinite(kernel_copy_ns) || !std::isfinite(memcpy_ns))
    return 0;
  return kernel_copy_ns <= kShmDirectMaxSlowdown * memcpy_ns ? kShmDirectDefaultMinBytes : 0;
}

namespace {

// Copies 1 MiB within this process with memcpy and with process_vm_writev,
// alternating, 8 times each, and decides on the fastest of each (about a
// millisecond, once per process).
size_t measure_direct_min_bytes() {
  constexpr size_t kBytes = size_t{1} << 20;
  std::vector<std::byte> src(kBytes, std::byte{1});
  std::vector<std::byte> dst(kBytes, std::byte{2});
  iovec local{src.data(), kBytes};
  iovec remote{dst.data(), kBytes};
  using Ns = std::chrono::duration<double, std::nano>;
  double best_memcpy = std::numeric_limits<double>::infinity();
  double best_kernel = best_memcpy;
  for (int round = 0; round < 8; ++round) {
    const auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), kBytes);
    const auto t1 = Clock::now();
    // dst escapes into the system call, so the memcpy before it stays.
    const ssize_t copied = ::process_vm_writev(::getpid(), &local, 1, &remote, 1, 0);
    const int err = errno;
    const auto t2 = Clock::now();
    if (copied != static_cast<ssize_t>(kBytes)) {
      ACCL_LOG_INFO("shm: direct writes off (process_vm_writev: {})", copied < 0 ? std::strerror(err) : "short copy");
      return 0;
    }
    best_memcpy = std::min(best_memcpy, Ns(t1 - t0).count());
    best_kernel = std::min(best_kernel, Ns(t2 - t1).count());
  }
  const size_t min_bytes = shm_direct_min_for(best_kernel, best_memcpy);
  ACCL_LOG_INFO("shm: direct writes {} (1 MiB: process_vm_writev {:.1f} us, memcpy {:.1f} us)",
                min_bytes != 0 ? "from " + std::to_string(min_bytes) + " bytes" : std::string("off"),
                best_kernel / 1000, best_memcpy / 1000);
  return min_bytes;
}

}  // namespace

size_t shm_direct_min_bytes(std::optional<size_t> configured) {
  if (configured) return *configured;
  static const size_t measured = measure_direct_min_bytes();
  return measured;
}

std::unique_ptr<Transport> make_shm_transport(const TransportOptions& options) {
  ShmTuning tuning;
  std::optional<size_t> direct_bytes;  // unset: measured
  if (config::get("ACCL_EMU_SHM_DIRECT_BYTES"))
    direct_bytes = static_cast<size_t>(std::max<int64_t>(0, config::get_int("ACCL_EMU_SHM_DIRECT_BYTES")));
  tuning.direct_min_bytes = shm_direct_min_bytes(direct_bytes);
  tuning.poll_lease = shm_poll_lease(config::get_int("ACCL_EMU_POLL_LEASE_US"), options.host_processes,
                                     std::thread::hardware_concurrency());
  return make_shm_transport(options, tuning);
}

}  // namespace accl::emu
