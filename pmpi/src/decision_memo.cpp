// SPDX-License-Identifier: Apache-2.0
//
// Which native decisions are remembered, and when all are forgotten. See
// decision_memo.hpp.
#include "decision_memo.hpp"

#include "comms.hpp"
#include "types.hpp"

namespace accl::pmpi {

namespace detail {
std::array<DecisionMemo, kNumCalls> g_decision_memos;
// Ways start at epoch 0, which no key carries.
std::atomic<uint64_t> g_decision_epoch{1};
}  // namespace detail

namespace {

// Reasons that are a function of the arguments and of state fixed between
// the frees that forget_decisions() follows, reached alike on every rank.
// Not remembered: Offloaded; BadArgs, BadBuffer and NoTopology (native MPI
// or the layer reports an error: no hot path); ProcNull (decided after an
// offloaded route, per message).
bool rememberable(Reason why) {
  switch (why) {
    case Reason::Offloaded:
    case Reason::BadArgs:
    case Reason::BadBuffer:
    case Reason::NoTopology:
    case Reason::ProcNull: return false;
    default: return true;
  }
}

// A communicator whose free the layer sees: MPI_COMM_WORLD, or one that
// carries the layer's attribute (comm_delete_fn forgets the decisions).
bool comm_tracked(MPI_Comm comm) { return comm == MPI_COMM_WORLD || comm_lookup(comm) != nullptr; }

}  // namespace

void remember_native(Call call, const DecisionKey& key, Reason why, uint64_t bytes) {
  if (!rememberable(why) || bytes >> 56 != 0) return;
  if (!comm_tracked(reinterpret_cast<MPI_Comm>(key.w[0]))) return;
  for (size_t i : {1, 2}) {
    const auto type = reinterpret_cast<MPI_Datatype>(key.w[i]);
    if (type != MPI_DATATYPE_NULL && !track_type(type)) return;
  }
  detail::g_decision_memos[static_cast<size_t>(call)].remember(
      key.w, detail::g_decision_epoch.load(std::memory_order_acquire), bytes << 8 | static_cast<uint64_t>(why));
}

void forget_decisions() { detail::g_decision_epoch.fetch_add(1, std::memory_order_acq_rel); }

}  // namespace accl::pmpi
