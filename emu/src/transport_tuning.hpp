// SPDX-License-Identifier: Apache-2.0
//
// The tuning knobs and test hooks of the socket-based transports (TCP, UDP,
// shared memory) and the factories that take them. The public factories in
// transport.hpp use the defaults; tests (and a future configuration setting)
// use these overloads.
#pragma once

#include "transport.hpp"

#include <accl/config.hpp>
#include <accl/log.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace accl::emu {

struct TcpTuning {
  // Staging chunk the PayloadWriter fills before each large write: big enough
  // that one write() per chunk keeps loopback above 1.5 GB/s, small enough to
  // stay in L2/L3.
  size_t staging_bytes = size_t{512} << 10;
  // An inbound connection must complete its handshake within this time.
  std::chrono::milliseconds handshake_timeout{5000};
};

struct ShmTuning {
  // Data bytes of each ring (at least 64 KiB, rounded up to whole pages).
  // Every rank maps one ring per peer and direction, so this times 2(P-1) is
  // resident per rank: about 1 MiB keeps 8 ranks at +15 MiB (8 MiB cost
  // +112 MiB) while four 256 KiB pieces in flight still stream at memory
  // speed. The extra 64 KiB let a whole 1 MiB message and its header (plus
  // the small control messages around it) fit: its sender then never waits
  // for a receiver that is not running, which on an oversubscribed host
  // means a time slice. 4 ranks on 2 cores, 1 MiB blocks, best of 16 runs
  // with -c, against 1 MiB rings: alltoall 2643 -> 2225 us, allgather
  // 2420 -> 1948 us, allreduce 4 MiB (1 MiB ring steps) 4620 -> 3895 us.
  // 2 MiB rings also hold it but double the cache footprint: the 2 MiB
  // allreduce lost (1578 -> 2091 us).
  size_t ring_bytes = (size_t{1} << 20) + (size_t{64} << 10);
  // Largest piece published at once, so the receiver copies out of the ring
  // while the sender still fills it.
  size_t max_piece_bytes = size_t{256} << 10;
  // connect() to a peer on a local address retries this long (bounded by the
  // deadline) for the peer's endpoint to appear before answering "not
  // reachable" (nullptr), so a device can still fall back to TCP in time.
  std::chrono::milliseconds local_connect_grace{2000};
  std::chrono::milliseconds handshake_timeout{5000};
  // How long after a host thread's last Transport::poll() the reader threads
  // leave delivery to the pollers (see PollActivity in shm/poll_activity.hpp);
  // a message sent later wakes a parked reader. make_shm_transport(options)
  // takes it from shm_poll_lease().
  std::chrono::microseconds poll_lease{1000};
  // While the lease runs, the control thread looks at it this often (or at
  // its end, if later) instead of at every end: a sender wakes a parked
  // reader itself once the lease is over, so this check only serves a
  // message that arrived while the lease ran and was left there when the
  // polls stopped without end_polling(); such a message waits up to this
  // long. With a 1 ms lease the control thread used to wake every
  // millisecond while a host thread polled, preempting a spinning rank:
  // 2-rank 8 B ping-pong, 100,000 round trips, one in a hundred took 8-20 us
  // instead of 1.5-3.
  std::chrono::microseconds lease_backstop{10000};
  // Bytes of the outbox (rounded up to whole pages) that holds payloads sent
  // to several peers, copied once for all of them (see Outbox in
  // shm/outbox.hpp); payloads of up to half of it use it. Its pages are
  // allocated and touched at the first such payload. 0: no outbox.
  size_t outbox_bytes = size_t{4} << 20;
  // Smallest rendezvous payload for one peer that the sender writes straight
  // into the receiver's window with process_vm_writev (see DirectGate in
  // shm/direct_writes.hpp): one copy instead of two. 0: never. Both sides must
  // allow it. (make_shm_transport takes it from ACCL_EMU_SHM_DIRECT_BYTES or,
  // unset, from the host's measured copy costs: shm_direct_min_bytes.)
  size_t direct_min_bytes = 0;
  // Whether the receiver of a direct write copies part of it itself (see
  // shm/shared_copy.hpp); ACCL_EMU_SHM_SHARED_COPY.
  bool share_copies = true;
};

struct UdpTuning {
  // Payload bytes of one datagram (a multiple of 64, at most ~63 KiB).
  size_t datagram_payload = 61440;
  // Datagrams a link may have unacknowledged (at most 64; capped by the
  // receiver's advertised window, which follows its socket buffer).
  uint32_t max_window = 48;
  // Retransmission: initial timeout, backoff cap, and how many timeouts in a
  // row without progress break the link.
  std::chrono::milliseconds initial_rto{20};
  std::chrono::milliseconds max_rto{400};
  uint32_t max_retries = 12;
  // false = detect-and-report: any loss, duplicate or corruption breaks the
  // link (link_failed) instead of being repaired.
  bool retransmit = true;
  // Liveness: a link sends a keepalive after this much silence, and a peer
  // silent for liveness_timeout is declared dead.
  std::chrono::milliseconds keepalive_interval{500};
  std::chrono::milliseconds liveness_timeout{10000};
  std::chrono::milliseconds handshake_interval{50};
  // Test-only fault injection on outgoing data datagrams (0 = off): drop,
  // corrupt one byte after checksumming, send twice, or hold back and send
  // after the next one (reorder), each for about one datagram in N (chosen
  // pseudo-randomly, reproducibly).
  uint32_t drop_every = 0;
  uint32_t corrupt_every = 0;
  uint32_t duplicate_every = 0;
  uint32_t reorder_every = 0;
};

std::unique_ptr<Transport> make_tcp_transport(const TransportOptions& options, const TcpTuning& tuning);
std::unique_ptr<Transport> make_udp_transport(const TransportOptions& options, const UdpTuning& tuning);
std::unique_ptr<Transport> make_shm_transport(const TransportOptions& options, const ShmTuning& tuning);

// The CPUs the host's ACCL processes may use: `host_cores` (EmuOptions; the
// PMPI layer counts the union of its ranks' affinity masks) when known, else
// std::thread::hardware_concurrency() (all the host's; ignores cgroup limits).
unsigned host_cpu_count(unsigned host_cores);

// The shm poll lease for a host running `host_processes` ACCL processes (0:
// unknown) on `cores` cores (host_cpu_count()): `configured`
// (ACCL_EMU_POLL_LEASE_US) when set and positive, else 1 ms, or 10 ms when
// there are more processes than cores. Oversubscribed, a polling host thread waits
// for a core whole scheduler slices at a time (milliseconds with two
// runnable threads per core), so a 1 ms lease lapsed at most of those
// preemptions: the control thread woke the parked readers, which found no
// free core either and took time slices from the ranks with work
// (docs/architecture.md has the measurements). With a core per process a
// lapse means the host really stopped polling, and a reader then has a
// core to take over on.
std::chrono::microseconds shm_poll_lease(int64_t configured_us, unsigned host_processes, unsigned cores);

// Direct writes (ShmTuning::direct_min_bytes) pay where the kernel copies
// between processes nearly as fast as memcpy: then one copy beats a ring's
// two. Where it is much slower, the ring wins, its two copies running at
// once on the sender's and the receiver's cores. Measured, best of 3
// alternating runs: on the Firecracker VM of 2026-11-27 (1 MiB
// process_vm_readv, the kernel copy measured then, 46-68 us; memcpy
// 30-43 us) direct writes made 1 MiB allgather and alltoall on 2 ranks 25 %
// faster; on the VM of 2026-11-28 (process_vm_writev 57-67 us, memcpy
// 23 us) the rings were faster almost everywhere: osu_bw 4 MiB 1.56x
// against 1.07x native, osu_latency 4 MiB 282 against 468 us, allgather
// 2 ranks 1 MiB 105 against 136 us.
constexpr double kShmDirectMaxSlowdown = 2.0;
constexpr size_t kShmDirectDefaultMinBytes = size_t{256} << 10;
// The threshold from the best times to copy 1 MiB with process_vm_writev and
// with memcpy: kShmDirectDefaultMinBytes if the kernel copy takes at most
// kShmDirectMaxSlowdown times as long, else 0 (also when either is not a
// positive finite time: the copy failed).
size_t shm_direct_min_for(double kernel_copy_ns, double memcpy_ns);
// ACCL_EMU_SHM_DIRECT_BYTES: `configured` as set; unset (nullopt): measured
// once per process with shm_direct_min_for.
size_t shm_direct_min_bytes(std::optional<size_t> configured);

namespace transport_detail {

inline std::chrono::microseconds spin_duration() {
  try {
    return std::chrono::microseconds(std::clamp<int64_t>(config::get_int("ACCL_EMU_SPIN_US"), 0, 100000));
  } catch (const std::exception& e) {
    ACCL_LOG_WARN("transport: ignoring ACCL_EMU_SPIN_US: {}", e.what());
    return std::chrono::microseconds(50);
  }
}

}  // namespace transport_detail

}  // namespace accl::emu
