// SPDX-License-Identifier: Apache-2.0
//
// Members whose link failed (p2p_fault.cpp): what fails with them, and what
// goes on.
#pragma once

#include "comms.hpp"
#include "requests.hpp"

#include <string>

namespace accl::pmpi {

// Error bits that end a receive from `peer` (MPI_ANY_SOURCE: only when every
// other member failed) or a send to it; 0 while it may wait.
uint32_t p2p_peer_unreachable(const CommState* cs, int peer);
std::string p2p_peer_unreachable_text(const CommState* cs, int peer);
// Fails receive `r` from a peer that p2p_peer_unreachable() reports: nothing
// came from it before it failed, nothing will.
void p2p_recv_fail_unreachable(ShadowReq* r);

// After a pull ended with LINK_ERROR: true when the failed members are known
// and what waited on them failed, so that the pull goes on for the others.
bool p2p_link_failure_handle(CommState* cs);

}  // namespace accl::pmpi
