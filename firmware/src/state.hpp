// SPDX-License-Identifier: Apache-2.0
//
// All state of one control program, kept in the fixed-size object the host
// allocates (ControlProgram::state_bytes()). Everything is plain data that is
// valid when zero-filled; init_state() then sets the non-zero defaults. There
// are no mutable globals: several CCLOs run in one process.
#pragma once

#include <accl/abi.hpp>
#include <accl_fw/dataplane.hpp>
#include <stddef.h>
#include <stdint.h>

namespace accl::fw::impl {

inline constexpr uint32_t kMaxCalls = 64;        // pending (started, unfinished) calls
inline constexpr uint32_t kMaxArrivals = 1024;   // arrivals not yet consumed
// Slots of the arrival table that only arrivals a waiting call asked for may
// take (see fetch_arrival_for): when the rest is full of messages for later
// calls, the message a call needs now is still taken past them.
inline constexpr uint32_t kArrivalsForWaitingCalls = 64;
// Communicators whose context id is known. 128: the PMPI layer gives an MPI
// communicator two (collectives, point-to-point), and a live entry evicted
// forgets its collective count.
inline constexpr uint32_t kMaxComms = 128;
inline constexpr uint32_t kMaxFailedLinks = 32;  // links reported broken since the last reset
inline constexpr uint32_t kMaxOps = 16;          // concurrent peer operations of one call

inline constexpr uint64_t kDefaultTimeoutNs = 10ull * 1000 * 1000 * 1000;  // 10 s
inline constexpr uint32_t kDefaultMaxEagerBytes = 1024;
inline constexpr uint32_t kDefaultMaxRendezvousBytes = 32 * 1024;
// Smallest accepted nonzero max rendezvous size: one datapath word, so every
// spare buffer holds at least one element of any type.
inline constexpr uint32_t kMinRendezvousBytes = 64;
inline constexpr uint32_t kNoIndex = 0xFFFFFFFFu;

// Rendezvous transfer ids: chosen by the sender for RTS transfers, by the
// receiver for pre-granted ones (high bit set), so the two never collide in
// the receiver's window table (keyed by peer, ctx, rid).
inline constexpr uint32_t kReceiverRidBit = 0x80000000u;
// Header word reserved[1] of an address message (msg_type 2) says what it is:
//  0                    a grant (answer to an RTS, or a later piece)
//  kPreGrantMarker      first grant of a pre-granted transfer (no RTS)
//  kPreGrantAwaitReady  first message of a pre-granted transfer the receiver
//                       must stage: it grants nothing yet and waits for the
//                       sender's ready notice before it takes spare buffer 3
//  kReadyNotice         sender -> receiver: "my send is waiting for grants"
//  kAbortNotice         (header only, to every other member) "collective
//                       reserved[2] failed here because ranks called it with
//                       different arguments": its members fail it at once
//                       with INVALID_ARGUMENT instead of timing out
inline constexpr uint32_t kPreGrantMarker = 1;
inline constexpr uint32_t kPreGrantAwaitReady = 2;
inline constexpr uint32_t kReadyNotice = 3;
inline constexpr uint32_t kAbortNotice = 4;
inline constexpr uint32_t kHdrWordKind = 1;
// reserved[2] of a pre-grant: the receiver's collective number on the
// communicator (see CommEntry::collectives_started), so a pre-grant left
// over from an abandoned collective is never used by a later one.
inline constexpr uint32_t kHdrWordCollective = 2;
// reserved[3] of every collective message: the signature of the sender's
// collective (kind, count, reduce function and data type, root, element sizes,
// wire compression), nonzero. A receiver whose own collective has another
// signature fails with INVALID_ARGUMENT: the ranks called it with different
// arguments (see collective_signature()).
inline constexpr uint32_t kHdrWordSignature = 3;

// Where the data of one operand lives. Offsets are counted in elements of
// this operand's own representation (compressed or not).
struct Buf {
  uint64_t addr;
  uint32_t elem_bytes;
  uint32_t stream_id;  // kernel stream id when `stream` (result side only)
  bool host;
  bool compressed;
  bool stream;  // kernel stream: op0 pulls from it, a result pushes to it
  bool none;    // no data (zero-byte messages)
};

enum class OpKind : uint8_t { none = 0, send, recv, local };

// Progress of one peer operation. The numbering is the order of a normal run.
enum class OpState : uint8_t {
  start = 0,
  wait_grant,  // send, rendezvous: RTS sent, waiting for the next address message
  eager_rest,  // recv, eager: first segment consumed, waiting for continuations
  grant,       // recv, rendezvous: next piece must be granted
  wait_done,   // recv, rendezvous: piece granted, waiting for rendezvous_done
  wait_ready,  // recv, pre-granted and staged: waiting for the sender's ready notice
  done,
};

// One resumable point-to-point step inside a call: a send to a peer, a receive
// from a peer (optionally reducing with a local operand on the way), or a
// local move. A call owns up to kMaxOps of them at a time.
struct PeerOp {
  OpKind kind;
  OpState state;
  bool fused;       // send: a (+) b; recv: dst = a (+) incoming; local: dst = a (+) b
  bool p2p;         // user send/recv: eager-only size limit applies
  bool wire_compressed;
  bool truncated;
  bool window_open;
  bool staged;      // recv rendezvous: pieces land in spare 3, then a local move
  bool pregranted;  // collective rendezvous without RTS: the receiver grants first
  uint32_t peer;    // rank in the communicator, or kRankAny (recv)
  uint32_t tag;
  uint32_t strm;    // send: header strm (stream_put); 0 = matched message
  uint32_t count;   // elements
  uint32_t ctx;     // header ctx word
  uint32_t error;   // error bits; nonzero ends the op (and the call)
  Buf a, b, dst;
  // progress
  uint32_t rid;
  uint32_t src;         // recv: sender's rank once matched
  uint32_t next_seqn;   // recv eager: seqn of the next continuation segment
  uint32_t msg_bytes;   // wire bytes of the whole message
  uint32_t wire_elem_bytes;
  uint64_t done_bytes;  // wire bytes sent / received / granted and completed
  uint64_t piece_bytes; // recv rendezvous: bytes of the piece currently granted
  uint64_t shared_payload;  // send: key shared with the round's other sends of the same bytes (0: none)
  Window window;
};

// Call words decoded once at start.
struct Decoded {
  uint32_t scenario;
  uint32_t count;
  uint32_t comm;
  uint32_t root_src_dst;
  uint32_t function;
  uint32_t tag;
  uint32_t arcfg;
  uint32_t compression;
  uint32_t stream_flags;
  uint32_t host_flags;
  uint64_t addr[3];
  // communicator (when the scenario uses one)
  uint32_t comm_size;
  uint32_t local_rank;
  uint32_t context_id;
  // arithmetic configuration
  uint32_t uncompressed_bytes;
  uint32_t compressed_bytes;
};

// Arguments of a collective after stream staging; algorithms read only this.
struct CollArgs {
  uint32_t P;
  uint32_t rank;
  uint32_t root;
  uint32_t count;
  uint32_t func;
  Buf src;
  Buf dst;
  Buf spare[3];          // scratch buffers (max rendezvous size bytes each)
  uint32_t spare_bytes;  // 0 when rendezvous is disabled (no scratch)
  uint32_t max_eager_bytes;
  bool wire_compressed;
  // tuning registers
  uint32_t gather_flat_max_fanin;
  uint32_t gather_flat_max_bytes;
  uint32_t bcast_flat_max_ranks;
  uint32_t reduce_flat_max_ranks;
  uint32_t reduce_flat_max_bytes;
};

enum class CallPhase : uint8_t { start = 0, running, staging_out, finished };

struct CallSlot {
  bool used;
  bool collective;
  bool round_open;
  CallPhase phase;
  uint64_t id;
  uint64_t issue_order;
  uint64_t start_ns;
  uint64_t deadline_ns;
  Decoded d;
  uint32_t status;  // accumulated error bits
  uint32_t algorithm;
  uint32_t round;
  uint32_t nops;
  PeerOp ops[kMaxOps];
  // From here on: state of collectives only. Other calls never read it (every
  // reader checks `collective`, the collective bit of an op's ctx, which only
  // collectives' ops carry, or `!op.p2p`, which point-to-point ops never
  // are), so start_call zeroes it for collectives alone.
  CollArgs args;
  Buf stage_out_from;  // RES_STREAM collectives: staged result to push at the end
  Buf stage_out_to;
  uint32_t stage_out_count;
  uint32_t collective_number;  // collectives: index among the collectives started on this communicator
  uint32_t signature;          // collectives: see kHdrWordSignature
  bool signature_mismatch;     // a peer's message had another signature: notify all members
};

enum class SeqState : uint8_t { unchecked = 0, ok, error };

struct ArrivalSlot {
  bool used;
  SeqState seq;
  uint32_t comm;   // communicator offset once the ctx is known
  uint32_t error;  // error bits for SeqState::error
  uint64_t order;  // arrival order (oldest first matching)
  Arrival a;
};

struct CommEntry {
  bool used;
  uint32_t offset;
  uint32_t context_id;
  uint32_t size;
  // Collectives started on this communicator since it was registered. All
  // members start the same collectives in the same order, so the k-th
  // collective has number k on every rank (carried by pre-grants).
  uint32_t collectives_started;
  // A member's link failed and no receive from RANK_ANY on this communicator
  // has reported it yet: the next one that starts fails with it (one that
  // waits when the link fails fails at once). A RANK_ANY receiver thus
  // learns of every failure once, and can then go on receiving from the
  // members that are left (it asks which one failed with kGetLinkStatus).
  bool link_failure_unreported;
  // The last collective that ended here, for messages of it that arrive
  // after it ended: one with another signature means the ranks called it
  // with different arguments although it succeeded here (a root that only
  // sends never sees the other ranks' messages while it runs). The next
  // collective on this communicator then fails with INVALID_ARGUMENT
  // (earlier_mismatch), the only place left to report it.
  uint32_t last_number;
  uint32_t last_signature;
  bool last_succeeded;
  bool earlier_mismatch;
  uint32_t earlier_mismatch_number;
  uint32_t earlier_mismatch_rank;
};

struct FailedLink {
  bool used;
  uint32_t ip;
  uint32_t port;
  uint32_t status;
};

}  // namespace accl::fw::impl

namespace accl::fw {

class ControlProgramState {
 public:
  // configuration
  uint64_t timeout_ns;
  uint32_t max_eager_bytes;
  uint32_t max_rendezvous_bytes;  // also the size of each spare buffer; 0 = eager only
  bool packets_enabled;  // HOUSEKEEP_PKTEN seen (informational: the data plane needs no action)

  // counters
  uint64_t next_issue_order;
  uint64_t next_arrival_order;
  uint32_t next_rid;
  uint64_t work_counter;  // bumped by every action; "no change" means idle
  uint64_t last_payload_key;  // last fw::Move::shared_payload handed out (keys are never reused)
  // Passes since the last deadline check (expire_calls), and the nearest
  // deadline that check found (lowered by calls started since).
  uint32_t passes_unchecked;
  uint64_t nearest_deadline_ns;
  bool arrivals_full_reported;  // the "arrival table full" line is logged once per episode
  bool reserve_full_reported;   // likewise the warning that the reserve for waiting calls is used up

  // pending calls in issue order: order[0..ncalls) index into calls
  uint32_t ncalls;
  uint32_t order[impl::kMaxCalls];
  impl::CallSlot calls[impl::kMaxCalls];

  // arrivals; slots below arrival_hwm may be used
  uint32_t narrivals;
  uint32_t arrival_hwm;
  uint32_t unchecked_arrivals;
  impl::ArrivalSlot arrivals[impl::kMaxArrivals];
  // Where one_pass pops an arrival into: a local Arrival would be
  // initialised on every pass, and idle passes pop nothing.
  Arrival incoming;

  // Spare buffer ownership (0 = free). Spares 1 and 2 belong to one collective
  // for its whole run (algorithm scratch, kernel-stream staging); spare 3 is
  // lent to one receive op for one rendezvous piece at a time.
  uint64_t spare12_owner;
  uint64_t spare3_owner;

  impl::CommEntry comms[impl::kMaxComms];
  impl::FailedLink failed_links[impl::kMaxFailedLinks];
  uint32_t failed_link_count;  // entries of failed_links in use
};

}  // namespace accl::fw
