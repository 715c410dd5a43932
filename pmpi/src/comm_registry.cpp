// SPDX-License-Identifier: Apache-2.0
//
// MPI communicator -> ACCL communicator.
//
// * State is cached on the communicator with a keyval (no copy on dup: a dup
//   gets a fresh ACCL communicator of its own); the delete callback releases
//   it on MPI_Comm_free. MPI_COMM_WORLD's state lives in State::world.
// * Comms created through our wrappers (dup, split, split_type, create,
//   create_group) get their ACCL communicator right there, collectively on the
//   new comm; only those (and world) may carry offloaded point-to-point,
//   because p2p routing must be known before the first message and a send is
//   not collective. Other intra-comms (cart, graph, idup, merge...) get one
//   lazily at the first offloaded collective; their p2p stays native.
// * Offloaded p2p runs on a second ACCL communicator with the next context
//   id (world: kWorldP2pContext), never on the collectives' one: on one
//   context the device keeps one sequence stream per peer, so it must take a
//   peer's messages in arrival order, and a full arrival table then held a
//   point-to-point envelope behind broadcasts for later calls, or a broadcast
//   behind unreceived envelopes (issue 37: xCbtest hung 1 run in 6).
// * Context ids are agreed with PMPI_Allreduce(MAX) of each member's next
//   free id, so no two live comms sharing a member ever share an id.
// * If any member fails to create its ACCL communicator (exchange memory
//   full), all members agree (PMPI_Allreduce MIN) and latch the comm native;
//   if only the p2p one fails somewhere, the comm's p2p stays native.
// * Every state is also on a registry list, so teardown frees the ACCL
//   communicators of comms the application never freed.
#include "decision_memo.hpp"
#include "comms.hpp"
#include "state.hpp"

#include <accl/log.hpp>

namespace accl::pmpi {

namespace {

CommState* g_all = nullptr;

void link_all(CommState* cs) {
  cs->next_all = g_all;
  if (g_all) g_all->prev_all = cs;
  g_all = cs;
}

void unlink_all(CommState* cs) {
  if (cs->prev_all) cs->prev_all->next_all = cs->next_all;
  else if (g_all == cs) g_all = cs->next_all;
  if (cs->next_all) cs->next_all->prev_all = cs->prev_all;
  cs->prev_all = cs->next_all = nullptr;
}

// mu held (also by destroy)
void free_accl_comm(communicatorId id) {
  try {
    state().accl->free_communicator(id);
  } catch (const std::exception& e) {
    ACCL_LOG_WARN("freeing ACCL communicator {} failed: {}", id, e.what());
  }
}

void destroy(CommState* cs) {
  State& st = state();
  if (cs->accl && !cs->is_world && st.accl) free_accl_comm(cs->id);
  if (cs->p2p && st.accl) free_accl_comm(cs->p2p_id);
  unlink_all(cs);
  delete cs;
}

int comm_delete_fn(MPI_Comm, int, void* attr, void*) {
  forget_decisions();  // the handle may come back for another communicator
  State& st = state();
  if (st.torn_down || attr == nullptr) return MPI_SUCCESS;  // teardown already freed everything
  std::lock_guard lock(st.mu);
  auto* cs = static_cast<CommState*>(attr);
  cs->freed = true;
  cs->comm = MPI_COMM_NULL;
  comm_release(cs);
  return MPI_SUCCESS;
}

CommState* new_state(MPI_Comm comm, Reason native_reason) {
  auto* cs = new CommState;
  cs->comm = comm;
  PMPI_Comm_rank(comm, &cs->rank);
  PMPI_Comm_size(comm, &cs->size);
  cs->native_reason = native_reason;
  return cs;
}

void attach(MPI_Comm comm, CommState* cs) {
  State& st = state();
  {
    std::lock_guard lock(st.mu);
    link_all(cs);
  }
  PMPI_Comm_set_attr(comm, st.comm_keyval, cs);
}

}  // namespace

CommState* comm_lookup(MPI_Comm comm) {
  State& st = state();
  if (comm == MPI_COMM_WORLD) return st.world;
  if (comm == MPI_COMM_NULL || st.comm_keyval == MPI_KEYVAL_INVALID) return nullptr;
  void* attr = nullptr;
  int flag = 0;
  if (PMPI_Comm_get_attr(comm, st.comm_keyval, &attr, &flag) != MPI_SUCCESS || !flag) return nullptr;
  return static_cast<CommState*>(attr);
}

namespace {
CommState* lookup(MPI_Comm comm) { return comm_lookup(comm); }

// Collective over `comm`: agree on a context id, create the ACCL
// communicator (and with `p2p` the one of the point-to-point traffic, on the
// next context id), agree that every member succeeded. Must run without mu.
bool create_accl_comm(MPI_Comm comm, CommState* cs, bool p2p) {
  State& st = state();
  // Without a context id in the record, two communicators sharing ranks
  // could take each other's messages (the driver refuses an explicit id).
  // Agreed at bring-up, so every member decides alike without a word.
  if (st.public_firmware) {
    cs->native_reason = Reason::PublicComm;
    return false;
  }
  // Members in comm order, as world ranks (local calls).
  MPI_Group group = MPI_GROUP_NULL, world_group = MPI_GROUP_NULL;
  PMPI_Comm_group(comm, &group);
  PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> local(static_cast<size_t>(cs->size)), world(static_cast<size_t>(cs->size));
  for (int i = 0; i < cs->size; ++i) local[static_cast<size_t>(i)] = i;
  PMPI_Group_translate_ranks(group, cs->size, local.data(), world_group, world.data());
  PMPI_Group_free(&group);
  PMPI_Group_free(&world_group);
  std::vector<rank_t> ranks;
  bool members_ok = true;
  for (int w : world) {
    if (w == MPI_UNDEFINED || w < 0 || static_cast<size_t>(w) >= st.world_ranks.size()) {
      members_ok = false;  // a process outside MPI_COMM_WORLD (spawned/connected)
      break;
    }
    ranks.push_back(st.world_ranks[static_cast<size_t>(w)]);
  }

  for (int attempt = 0; attempt < 64; ++attempt) {
    uint32_t proposal = st.next_ctx.load();
    uint32_t agreed = 0;
    PMPI_Allreduce(&proposal, &agreed, 1, MPI_UINT32_T, MPI_MAX, comm);
    // [0] ids claimed here, [1] ACCL communicator created here, [2] the p2p one
    int ok[3] = {0, 0, 0};
    {
      std::lock_guard lock(st.mu);
      // Claim: no id >= next_ctx is in use on this rank. Fails only when
      // another thread created a comm between our proposal and now.
      if (agreed >= st.next_ctx.load()) {
        st.next_ctx.store(agreed + 2);
        ok[0] = 1;
      }
      if (ok[0] && members_ok) {
        try {
          cs->id = st.accl->create_communicator(ranks, cs->rank, agreed);
          ok[1] = 1;
          if (p2p) {
            cs->p2p_id = st.accl->create_communicator(ranks, cs->rank, agreed + 1);
            ok[2] = 1;
          }
        } catch (const std::exception& e) {
          ACCL_LOG_WARN("no ACCL communicator for {} of a communicator of {} ranks, it stays native: {}",
                        ok[1] ? "the point-to-point traffic" : "the collectives", cs->size, e.what());
        }
      }
    }
    int all[3] = {0, 0, 0};
    PMPI_Allreduce(ok, all, 3, MPI_INT, MPI_MIN, comm);
    if (all[0] && all[1]) {
      cs->accl = true;
      cs->ctx = agreed;
      cs->p2p = p2p && all[2];
      if (cs->p2p) g_p2p_straight.store(false, std::memory_order_relaxed);  // before the comm is returned
      if (ok[2] && !cs->p2p) {
        std::lock_guard lock(st.mu);
        free_accl_comm(cs->p2p_id);
      }
      return true;
    }
    if (ok[1] || ok[2]) {
      std::lock_guard lock(st.mu);
      if (ok[1]) free_accl_comm(cs->id);
      if (ok[2]) free_accl_comm(cs->p2p_id);
    }
    if (all[0]) return false;  // some member could not create it: latch native
  }
  return false;
}

}  // namespace

void comm_release(CommState* cs) {
  if (--cs->refs == 0) destroy(cs);
}

void comm_registry_init() {
  State& st = state();
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete_fn, &st.comm_keyval, nullptr);
  if (!st.active) return;
  auto* cs = new CommState;
  cs->comm = MPI_COMM_WORLD;
  cs->rank = st.world_rank;
  cs->size = st.world_size;
  cs->is_world = true;
  cs->accl = st.world_size >= 2;
  cs->native_reason = st.world_size >= 2 ? Reason::CommNative : Reason::CommSize1;
  cs->id = GLOBAL_COMM;
  cs->ctx = 0;
  if (cs->accl) {
    // The world's p2p communicator, on a fixed context id below the agreed
    // ones; offloaded only where every rank wants it and made it, and the
    // offload policy (agreed in MPI_Init) takes it for this size.
    int ok = 0, all = 0;
    if (st.s.p2p && st.can_p2p && policy_p2p(static_cast<uint64_t>(cs->size))) {
      try {
        cs->p2p_id = st.accl->create_communicator(st.world_ranks, st.world_rank, kWorldP2pContext);
        ok = 1;
      } catch (const std::exception& e) {
        ACCL_LOG_WARN("no ACCL communicator for the point-to-point traffic of MPI_COMM_WORLD, it stays native: {}",
                      e.what());
      }
    }
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, st.private_comm);
    cs->p2p = all != 0;
    if (ok && !cs->p2p) free_accl_comm(cs->p2p_id);
  }
  cs->send_seq.assign(static_cast<size_t>(cs->size), 0);
  cs->recv_expect.assign(static_cast<size_t>(cs->size), 0);
  std::lock_guard lock(st.mu);
  link_all(cs);
  st.world = cs;
}

Reason comm_check(MPI_Comm comm, CommState** out) {
  *out = nullptr;
  if (comm == MPI_COMM_NULL) return Reason::CommNative;
  CommState* cs = lookup(comm);
  if (cs != nullptr) {
    *out = cs;
    return cs->accl ? Reason::Offloaded : cs->native_reason;
  }
  // Unknown comm: cache the cheap local verdicts right away.
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter) {
    cs = new_state(comm, Reason::Intercomm);
    attach(comm, cs);
    *out = cs;
    return Reason::Intercomm;
  }
  int size = 0;
  PMPI_Comm_size(comm, &size);
  if (size < 2) {
    cs = new_state(comm, Reason::CommSize1);
    attach(comm, cs);
    *out = cs;
    return Reason::CommSize1;
  }
  return Reason::Offloaded;  // eligible, created by comm_materialize()
}

CommState* comm_materialize(MPI_Comm comm) {
  CommState* cs = lookup(comm);
  if (cs != nullptr) return cs;
  cs = new_state(comm, Reason::CommNative);
  create_accl_comm(comm, cs, false);
  attach(comm, cs);
  return cs;
}

CommState* comm_for_p2p(MPI_Comm comm) {
  if (comm == MPI_COMM_WORLD) {
    CommState* w = state().world;
    return w != nullptr && w->p2p ? w : nullptr;
  }
  if (comm == MPI_COMM_NULL || comm == MPI_COMM_SELF) return nullptr;
  CommState* cs = lookup(comm);
  return cs != nullptr && cs->p2p ? cs : nullptr;
}

void comm_created(MPI_Comm newcomm) {
  State& st = state();
  if (!st.active || newcomm == MPI_COMM_NULL) return;
  int inter = 0, size = 0;
  PMPI_Comm_test_inter(newcomm, &inter);
  PMPI_Comm_size(newcomm, &size);
  if (inter || size < 2) {
    attach(newcomm, new_state(newcomm, inter ? Reason::Intercomm : Reason::CommSize1));
    return;
  }
  CommState* cs = new_state(newcomm, Reason::CommNative);
  if (create_accl_comm(newcomm, cs, st.s.p2p && st.can_p2p && policy_p2p(static_cast<uint64_t>(size)))) {
    cs->send_seq.assign(static_cast<size_t>(cs->size), 0);
    cs->recv_expect.assign(static_cast<size_t>(cs->size), 0);
  }
  attach(newcomm, cs);
}

void comm_registry_teardown() {
  State& st = state();
  std::lock_guard lock(st.mu);
  while (g_all != nullptr) {
    CommState* cs = g_all;
    cs->pull.reset();
    destroy(cs);
  }
  st.world = nullptr;
}

}  // namespace accl::pmpi
