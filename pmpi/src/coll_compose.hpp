// SPDX-License-Identifier: Apache-2.0
//
// Composed collectives (coll_compose.cpp): collectives the device has no
// algorithm for (the v-collectives, scans, reduce_scatter with unequal
// counts), built in the layer from asynchronous device sends, receives,
// combines and copies on the collective's ACCL communicator, all ended by one
// device nop that waits for every one of them. The device runs them
// concurrently (point-to-point calls are not serialised per communicator as
// collectives are), so no rank waits for a peer's host.
//
// Messages of a composed call carry a device tag of their own, kComposedTagBase
// plus the communicator's count of composed calls: MPI orders collectives on a
// communicator the same on every member, so every rank computes the same tag,
// two such calls in flight (non-blocking forms) never take each other's
// messages, and they never match the point-to-point engine's tags (below
// kEnvTag, p2p_wire.hpp).
//
// Every payload travels as int32 words: a block of b bytes is ceil(b / 4)
// words, padded in staging when b is no multiple of 4, and receives that do
// not land whole words in the user's buffer (odd sizes, derived datatypes) go
// to staging and are copied out when the call completes.
#pragma once

#include "buffers.hpp"
#include "comms.hpp"
#include "stats.hpp"

#include <functional>
#include <memory>
#include <vector>

namespace accl::pmpi {

constexpr uint32_t kComposedTagBase = 0x90000000u;
constexpr uint32_t kComposedTagMask = 0x0FFFFFFFu;
static_assert(kComposedTagBase > kEnvTag && (kComposedTagBase | kComposedTagMask) < 0xFFFFFFFFu,
              "composed-call tags stay clear of the point-to-point tags and of TAG_ANY");

// What one composed call holds until it completes, and the host copies that
// finish it. Kept by the shadow request of a non-blocking form.
struct Composed {
  CommState* cs = nullptr;
  uint32_t tag = 0;
  std::vector<std::shared_ptr<BaseBuffer>> bufs;
  std::vector<Staging*> stages;
  std::vector<PostCopy> posts;
  std::vector<MPI_Datatype> type_refs;  // type_hold() references of unpack steps
  std::vector<RequestPtr> calls;
  struct OwnBlock {
    const void* from;
    void* to;
    uint64_t bytes;
  };
  std::vector<OwnBlock> own_blocks;  // copy_own(), until copy_own_blocks()
  bool unpacks = false;  // a post step unpacks a derived type (an MPI call)

  // --- building (mu held, application thread) ---
  BaseBuffer& wrap(const void* ptr, uint64_t elems, dataType dtype);
  void* stage(size_t bytes);
  // A block of `count` items of `type` (any layout; `bytes` = count x type
  // size) as the words a send reads: the user's memory when it is
  // contiguous and whole words, else a padded staging copy.
  const void* outgoing(const void* buf, int count, MPI_Datatype type, uint64_t bytes);
  // The same, always a copy (an in-place input that receives will overwrite).
  const void* outgoing_copy(const void* buf, int count, MPI_Datatype type, uint64_t bytes);
  // Sends a block prepared by outgoing() to rank `peer` on this call's tag
  // (or on `block_tag`: exchanges tell their blocks apart by tag).
  void send_block(const void* words, uint64_t bytes, int peer) { send_block(words, bytes, peer, tag); }
  void send_block(const void* words, uint64_t bytes, int peer, uint32_t block_tag);
  // Receives `count` items of `type` from `peer` (staged and copied out at
  // completion unless the words land in place).
  void recv_typed(void* buf, int count, MPI_Datatype type, uint64_t bytes, int peer) {
    recv_typed(buf, count, type, bytes, peer, tag);
  }
  void recv_typed(void* buf, int count, MPI_Datatype type, uint64_t bytes, int peer, uint32_t block_tag);
  // The block a rank sends itself, copied at once on the host (MPI allows it:
  // the receive buffer is the call's until it completes).
  static void copy_typed(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                         MPI_Datatype rtype, uint64_t bytes);
  // The same, but a contiguous block is only noted here and copied by
  // copy_own_blocks() once every device call is out: copied at once, it
  // held up the device for the whole copy, and the peers waited for this
  // rank's answers to their rendezvous requests (2-rank Alltoallv of 1 MiB:
  // ~70 us of copy before any grant left). Other layouts are copied at once.
  void copy_own(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                uint64_t bytes);
  // Copies the noted blocks in slices, testing `progress` (the call's
  // completion, null: none) between slices so the device answers peers
  // meanwhile.
  void copy_own_blocks(Request* progress);
  // Completes after every device call issued so far; returns it (null when
  // none was: the call completes at once).
  RequestPtr after_all();
  // The device's count of words of a block of `bytes` (throws beyond its
  // 32-bit counts): a check before any device call goes out.
  static unsigned device_words(uint64_t bytes);

  // --- completion ---
  void finish();   // the post copies (application thread when `unpacks`)
  void release();  // mu held
};

// The offload decision common to composed calls, in two steps around the
// call's own checks (all rank-uniform). composed_pre: device up,
// intracommunicator of size >= 2; sets *rank and *size when it says
// Offloaded. composed_finish (when `why` is still Offloaded): the device
// (composed_device_reason), call enabled and, when `sized` (the byte count
// is the same on every rank), within the byte thresholds; then the ACCL
// communicator, created collectively on first use. *cs is usable when it
// returns Reason::Offloaded.
Reason composed_pre(MPI_Comm comm, CommState** cs, int* rank, int* size);
Reason composed_finish(Reason why, Call call, MPI_Comm comm, bool sized, uint64_t bytes, CommState** cs);

// The device's part of that decision, shared with the neighbourhood
// collectives and Alltoallw (neighbor.cpp), which are composed the same way:
// Reason::PublicComposed on the public firmware, else Offloaded. Their
// blocks' sizes are not agreed by all ranks, so a block above the public
// firmware's eager size (which it would move by a rendezvous it lacks) could
// not be sent native by its rank alone.
Reason composed_device_reason();

// Builds the call with `issue(Composed&)` under mu and runs it: blocking
// (req == nullptr) waits for it, otherwise *req becomes a shadow request
// completed by the progress engine. Errors go through the comm's handler.
int composed_run(Call call, MPI_Comm comm, CommState* cs, MPI_Request* req,
                 const std::function<void(Composed&)>& issue);

}  // namespace accl::pmpi
