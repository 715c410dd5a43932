// SPDX-License-Identifier: Apache-2.0
//
// Offloaded point-to-point with members whose link failed.
//
// A RANK_ANY pull that ends with LINK_ERROR names nobody; the device then
// says which members' links failed (ACCL::link_status), and only what waits
// on them fails: receives from them, sends waiting for their reply, and the
// MPI_ANY_SOURCE receives pending at that moment (they may have waited for
// the failed member's message; like ULFM's MPI_ERR_PROC_FAILED_PENDING, the
// error is the acknowledgement: MPI_ANY_SOURCE receives posted afterwards
// match messages from the members left and fail only when no other member
// is left). Receives from the others go on. A failed member stays failed on
// this communicator (a process killed does not come back).
#include "p2p_fault.hpp"

#include "p2p_match.hpp"
#include "p2p_proto.hpp"
#include "requests.hpp"
#include "state.hpp"

#include <accl/log.hpp>

#include <cstring>

namespace accl::pmpi {

namespace {

std::string failed_link_text(const CommState* cs, int peer) {
  return "device error: the link to rank " + std::to_string(peer) +
         " of the communicator failed (its process died or is unreachable): " +
         error_code_to_string(cs->failed_link[static_cast<size_t>(peer)]);
}

}  // namespace

uint32_t p2p_peer_unreachable(const CommState* cs, int peer) {
  if (cs->failed_link.empty()) return 0;
  if (peer != MPI_ANY_SOURCE) return peer == cs->rank ? 0 : cs->failed_link[static_cast<size_t>(peer)];
  uint32_t bits = 0;
  for (int r = 0; r < cs->size; ++r) {
    if (r == cs->rank) continue;
    const uint32_t b = cs->failed_link[static_cast<size_t>(r)];
    if (b == 0) return 0;
    bits |= b;
  }
  return bits;
}

std::string p2p_peer_unreachable_text(const CommState* cs, int peer) {
  if (peer != MPI_ANY_SOURCE) return failed_link_text(cs, peer);
  return "device error: MPI_ANY_SOURCE receive with no member left to send: the links to all " +
         std::to_string(cs->size - 1) + " other ranks of the communicator failed (LINK_ERROR)";
}

void p2p_recv_fail_unreachable(ShadowReq* r) {
  fail_request(r, state().err_device, p2p_peer_unreachable_text(r->cs, r->peer));
  r->rstate = RecvState::done;
  r->complete = true;
}

namespace {

// Asks the device which members' links failed. False when it cannot tell
// (public firmware): then the caller fails everything that waits, as before.
bool learn_failed_links(CommState* cs) {
  ACCL& accl = *state().accl;
  try {
    if ((accl.get_capabilities() & abi::kCapLinkStatus) == 0) return false;
    if (cs->failed_link.empty()) cs->failed_link.assign(static_cast<size_t>(cs->size), 0);
    for (int r = 0; r < cs->size; ++r) {
      uint32_t& known = cs->failed_link[static_cast<size_t>(r)];
      if (r == cs->rank || known != 0) continue;
      const uint32_t bits = accl.link_status(static_cast<unsigned>(r), cs->p2p_id);
      if ((bits & abi::kLinkError) == 0) continue;
      known = bits;
      ACCL_LOG_WARN("accl-pmpi rank {}: {}; point-to-point with it on this communicator fails from now on",
                    state().world_rank, failed_link_text(cs, r).substr(std::strlen("device error: ")));
    }
  } catch (const std::exception& e) {
    ACCL_LOG_ERROR("accl-pmpi rank {}: cannot read the link status of the device: {}", state().world_rank, e.what());
    return false;
  }
  return true;
}

// Fails what waits on a failed member (and, with `any_source_too`, every
// pending MPI_ANY_SOURCE receive: `newly_failed` names the members).
void fail_waits_on_failed_links(CommState* cs, bool any_source_too, const std::string& newly_failed) {
  const int code = state().err_device;
  ShadowReq* prev = nullptr;
  for (ShadowReq* r = cs->posted_head; r != nullptr;) {
    ShadowReq* next = r->next_posted;
    const bool any = r->peer == MPI_ANY_SOURCE;
    const uint32_t gone = p2p_peer_unreachable(cs, r->peer);
    if (gone == 0 && !(any && any_source_too)) {
      prev = r;
      r = next;
      continue;
    }
    posted_unlink(cs, prev, r);
    const std::string text =
        gone != 0
            ? p2p_peer_unreachable_text(cs, r->peer)
            : "device error: the link to rank " + newly_failed +
                  " of the communicator failed while this MPI_ANY_SOURCE receive waited (LINK_ERROR); "
                  "receives posted from now on match messages from the other ranks";
    fail_request(r, code, text);
    r->rstate = RecvState::done;
    complete_now(r);
    r = next;
  }
  for (size_t i = 0; i < cs->awaiting.size();) {
    ShadowReq* r = cs->awaiting[i];
    if (p2p_peer_unreachable(cs, r->peer) == 0) {
      ++i;
      continue;
    }
    stop_awaiting(cs, cs->awaiting.begin() + static_cast<std::ptrdiff_t>(i));
    fail_request(r, code, failed_link_text(cs, r->peer));
  }
}

}  // namespace

bool p2p_link_failure_handle(CommState* cs) {
  std::vector<uint32_t> before = cs->failed_link;
  if (!learn_failed_links(cs)) return false;
  std::string newly;
  for (int r = 0; r < cs->size; ++r) {
    const bool was = !before.empty() && before[static_cast<size_t>(r)] != 0;
    if (cs->failed_link[static_cast<size_t>(r)] == 0 || was) continue;
    newly += (newly.empty() ? "" : ", ") + std::to_string(r);
  }
  // Nobody new: the failed link carried traffic again before we asked, or a
  // member already known; receives pending from anyone may go on.
  fail_waits_on_failed_links(cs, !newly.empty(), newly);
  return true;
}

}  // namespace accl::pmpi
