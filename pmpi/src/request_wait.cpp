// SPDX-License-Identifier: Apache-2.0
//
// The Wait/Test family and the other calls that take requests (MPI_Start,
// MPI_Cancel, MPI_Request_free, ...), for arrays that may mix shadow
// requests (request_pool.cpp) and native ones. Arrays mixing both are served
// by polling both sides (the native ones through PMPI_Test*), which keeps
// MPI's rules for null and inactive persistent requests intact. Waiting runs
// the one progress engine (progress.hpp).
#include "requests.hpp"

#include "comms.hpp"
#include "errors.hpp"
#include "p2p_match.hpp"
#include "p2p_proto.hpp"
#include "progress.hpp"

#include <string>
#include <vector>

namespace accl::pmpi {

namespace {

struct Outcome {
  int error = MPI_SUCCESS;
  std::string text;
  MPI_Comm comm = MPI_COMM_NULL;
  Call call = Call::Send;
};

// mu held. Copies the status out and frees (or deactivates) the request.
Outcome take(ShadowReq* r, MPI_Status* status) {
  Outcome o{r->error, {}, r->comm, r->call};
  if (r->error != MPI_SUCCESS) o.text = r->error_text;  // nearly always empty: no copy
  if (r->kind == ReqKind::recv || r->cancelled) copy_status(status, r->status);
  else set_empty_status(status);
  if (r->persistent) {
    r->active = false;
    r->complete = false;
    r->cancelled = false;
    r->error = MPI_SUCCESS;
    r->error_text.clear();
  } else {
    p2p_request_free(r);
  }
  return o;
}

// Reports an outcome through the comm's error handler.
int report(const Outcome& o) {
  if (o.error == MPI_SUCCESS) return MPI_SUCCESS;
  if (o.error == MPI_ERR_TRUNCATE) {
    MPI_Comm comm = o.comm == MPI_COMM_NULL ? MPI_COMM_WORLD : o.comm;
    PMPI_Comm_call_errhandler(comm, MPI_ERR_TRUNCATE);
    return MPI_ERR_TRUNCATE;
  }
  return raise_error(o.comm, o.call, o.error, o.text);
}

bool ready(const ShadowReq* r) { return !r->active || r->complete; }

bool any_shadow(int n, const MPI_Request* reqs) {
  for (int i = 0; i < n; ++i)
    if (is_shadow(reqs[i])) return true;
  return false;
}

// The native requests of a mixed array, compacted for PMPI_Test*.
struct NativePart {
  std::vector<int> where;
  std::vector<MPI_Request> reqs;
  std::vector<MPI_Status> statuses;
  NativePart(int n, const MPI_Request* all) {
    for (int i = 0; i < n; ++i)
      if (!is_shadow(all[i])) {
        where.push_back(i);
        reqs.push_back(all[i]);
      }
    statuses.resize(reqs.size());
  }
  int size() const { return static_cast<int>(reqs.size()); }
  void write_back(MPI_Request* all) const {
    for (size_t k = 0; k < where.size(); ++k) all[where[k]] = reqs[k];
  }
};

}  // namespace

int request_finish(ShadowReq* r, MPI_Status* status) {
  Outcome o;
  {
    std::lock_guard lock(state().mu);
    o = take(r, status);
  }
  return report(o);
}

namespace {

[[gnu::noinline]] int wait_one(MPI_Request* req, MPI_Status* status) {
  ShadowReq* r = as_shadow(*req);
  if (!r->active) {
    set_empty_status(status);
    return MPI_SUCCESS;
  }
  wait_until([&] { return r->complete; });
  const bool persistent = r->persistent;
  const int rc = request_finish(r, status);
  if (!persistent) *req = MPI_REQUEST_NULL;
  return rc;
}

[[gnu::noinline]] int test_one(MPI_Request* req, int* flag, MPI_Status* status) {
  ShadowReq* r = as_shadow(*req);
  bool done;
  {
    std::lock_guard lock(state().mu);
    progress_locked();
    done = ready(r);
  }
  if (!done) {
    *flag = 0;
    native_progress();
    return MPI_SUCCESS;
  }
  *flag = 1;
  if (!r->active) {
    set_empty_status(status);
    return MPI_SUCCESS;
  }
  const bool persistent = r->persistent;
  const int rc = request_finish(r, status);
  if (!persistent) *req = MPI_REQUEST_NULL;
  return rc;
}

// What a multiple-completion call (Waitall, Testall, Waitsome, Testsome)
// reports: the first failed shadow request (for the error handler), the
// native part's return code, and, once anything failed, the code of every
// status slot it fills. MPI writes the statuses' MPI_ERROR fields if and
// only if the call returns MPI_ERR_IN_STATUS (MPI 3.1 3.2.5, 3.7.5), so the
// codes are collected while requests complete and written at the end.
struct ArrayOutcome {
  explicit ArrayOutcome(int n) : slots(n) {}
  Outcome first;
  int native_rc = MPI_SUCCESS;
  int slots;
  std::vector<int> codes;  // allocated at the first failure only
  void note(int slot, int code) {
    if (code == MPI_SUCCESS) return;
    if (codes.empty()) codes.assign(static_cast<size_t>(slots), MPI_SUCCESS);
    codes[static_cast<size_t>(slot)] = code;
  }
};

// Finishes shadow request i of an array into `status` (mu held); returns
// its error and remembers the first one.
int take_into(MPI_Request* reqs, int i, MPI_Status* status, Outcome* first) {
  ShadowReq* r = as_shadow(reqs[i]);
  if (!r->active) {
    set_empty_status(status);
    return MPI_SUCCESS;
  }
  const bool persistent = r->persistent;
  Outcome o = take(r, status);
  if (!persistent) reqs[i] = MPI_REQUEST_NULL;
  if (o.error != MPI_SUCCESS && first->error == MPI_SUCCESS) *first = o;
  return o.error;
}

MPI_Status* status_at(MPI_Status* statuses, int i) {
  return statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
}

// Native statuses k (slots `slot_of(k)`) out to the caller, their codes
// noted when the native part failed.
template <typename SlotOf>
void natives_out(const NativePart& nat, int count, int native_rc, MPI_Status* statuses, ArrayOutcome* a,
                 SlotOf&& slot_of) {
  a->native_rc = native_rc;
  for (int k = 0; k < count; ++k) {
    const int slot = slot_of(k);
    copy_status(status_at(statuses, slot), nat.statuses[static_cast<size_t>(k)]);
    if (native_rc == MPI_ERR_IN_STATUS) a->note(slot, nat.statuses[static_cast<size_t>(k)].MPI_ERROR);
    else a->note(slot, native_rc);
  }
}

int array_result(const ArrayOutcome& a, MPI_Status* statuses) {
  if (a.codes.empty()) return a.native_rc;
  if (a.first.error != MPI_SUCCESS) report(a.first);
  if (statuses == MPI_STATUSES_IGNORE) return a.first.error != MPI_SUCCESS ? a.first.error : a.native_rc;
  for (int i = 0; i < a.slots; ++i) statuses[i].MPI_ERROR = a.codes[static_cast<size_t>(i)];
  return MPI_ERR_IN_STATUS;
}

// Makes progress, then: whether every shadow request among the n is ready.
bool progress_and_check_shadows(State& st, int n, const MPI_Request* reqs) {
  std::lock_guard lock(st.mu);
  progress_locked();
  for (int i = 0; i < n; ++i)
    if (is_shadow(reqs[i]) && !ready(as_shadow(reqs[i]))) return false;
  return true;
}

[[gnu::noinline]] int waitall_mixed(int n, MPI_Request* reqs, MPI_Status* statuses) {
  NativePart nat(n, reqs);
  bool natives_done = nat.size() == 0;
  int native_rc = MPI_SUCCESS;
  PollPacer pacer;
  State& st = state();
  for (;;) {
    const bool shadows_done = progress_and_check_shadows(st, n, reqs);
    if (!natives_done) {
      int flag = 0;
      native_rc = PMPI_Testall(nat.size(), nat.reqs.data(), &flag, nat.statuses.data());
      natives_done = flag || native_rc != MPI_SUCCESS;
    } else if (!shadows_done && pacer.native_progress_due()) {
      native_progress();  // a peer's native send to us may have to finish before it sends what we wait for
    }
    if (natives_done && shadows_done) break;
    pacer.pause();
  }
  nat.write_back(reqs);
  ArrayOutcome a(n);
  natives_out(nat, nat.size(), native_rc, statuses, &a, [&](int k) { return nat.where[static_cast<size_t>(k)]; });
  {
    std::lock_guard lock(st.mu);
    for (int i = 0; i < n; ++i)
      if (is_shadow(reqs[i])) a.note(i, take_into(reqs, i, status_at(statuses, i), &a.first));
  }
  return array_result(a, statuses);
}

[[gnu::noinline]] int testall_mixed(int n, MPI_Request* reqs, int* flag, MPI_Status* statuses) {
  State& st = state();
  if (!progress_and_check_shadows(st, n, reqs)) {
    // MPI: when the answer is "not all", no request may be touched.
    *flag = 0;
    native_progress();
    return MPI_SUCCESS;
  }
  NativePart nat(n, reqs);
  ArrayOutcome a(n);
  if (nat.size() > 0) {
    int nflag = 0;
    const int native_rc = PMPI_Testall(nat.size(), nat.reqs.data(), &nflag, nat.statuses.data());
    if (!nflag && native_rc == MPI_SUCCESS) {
      *flag = 0;
      return MPI_SUCCESS;
    }
    nat.write_back(reqs);
    natives_out(nat, nat.size(), native_rc, statuses, &a, [&](int k) { return nat.where[static_cast<size_t>(k)]; });
  }
  *flag = 1;
  {
    std::lock_guard lock(st.mu);
    for (int i = 0; i < n; ++i)
      if (is_shadow(reqs[i])) a.note(i, take_into(reqs, i, status_at(statuses, i), &a.first));
  }
  return array_result(a, statuses);
}

// Calls visit(i, r) for each active shadow request r = reqs[i] among the n
// (st.mu held); returns how many there are.
template <typename Visit>
int for_active_shadows(int n, const MPI_Request* reqs, Visit&& visit) {
  int active = 0;
  for (int i = 0; i < n; ++i) {
    if (!is_shadow(reqs[i])) continue;
    const ShadowReq* r = as_shadow(reqs[i]);
    if (!r->active) continue;
    ++active;
    visit(i, r);
  }
  return active;
}

// One pass of Waitany/Testany. Returns true when it has an answer.
bool any_pass(int n, MPI_Request* reqs, int* index, MPI_Status* status, int* rc) {
  State& st = state();
  int found = -1;
  int active_shadows = 0;
  Outcome first;
  {
    std::lock_guard lock(st.mu);
    progress_locked();
    active_shadows = for_active_shadows(n, reqs, [&](int i, const ShadowReq* r) {
      if (found < 0 && r->complete) found = i;
    });
    if (found >= 0) take_into(reqs, found, status, &first);
  }
  if (found >= 0) {
    *index = found;
    *rc = report(first);
    return true;
  }
  NativePart nat(n, reqs);
  bool natives_idle = true;
  if (nat.size() > 0) {
    int flag = 0, idx = MPI_UNDEFINED;
    MPI_Status s;
    const int nrc = PMPI_Testany(nat.size(), nat.reqs.data(), &idx, &flag, &s);
    if (flag && idx != MPI_UNDEFINED) {
      nat.write_back(reqs);
      *index = nat.where[static_cast<size_t>(idx)];
      copy_status(status, s);  // Waitany/Testany return the error, never write MPI_ERROR
      *rc = nrc;
      return true;
    }
    natives_idle = flag != 0;  // every native one is null or inactive
  }
  if (natives_idle && active_shadows == 0) {
    *index = MPI_UNDEFINED;
    set_empty_status(status);
    *rc = MPI_SUCCESS;
    return true;
  }
  return false;
}

// One pass of Waitsome/Testsome.
bool some_pass(int n, MPI_Request* reqs, int* outcount, int* indices, MPI_Status* statuses, int* rc) {
  State& st = state();
  NativePart nat(n, reqs);
  int nout = 0;
  std::vector<int> nind(static_cast<size_t>(nat.size()));
  int native_rc = MPI_SUCCESS;
  if (nat.size() > 0)
    native_rc = PMPI_Testsome(nat.size(), nat.reqs.data(), &nout, nind.data(), nat.statuses.data());
  const bool natives_idle = nat.size() == 0 || nout == MPI_UNDEFINED;
  int count = 0;
  ArrayOutcome a(n);
  if (nout != MPI_UNDEFINED) {
    nat.write_back(reqs);
    for (int k = 0; k < nout; ++k) indices[k] = nat.where[static_cast<size_t>(nind[static_cast<size_t>(k)])];
    natives_out(nat, nout, native_rc, statuses, &a, [](int k) { return k; });
    count = nout;
  } else {
    a.native_rc = native_rc;
  }
  int active_shadows = 0;
  {
    std::lock_guard lock(st.mu);
    progress_locked();
    active_shadows = for_active_shadows(n, reqs, [&](int i, const ShadowReq* r) {
      if (!r->complete) return;
      indices[count] = i;
      a.note(count, take_into(reqs, i, status_at(statuses, count), &a.first));
      ++count;
    });
  }
  if (count > 0) {
    *outcount = count;
    a.slots = count;  // statuses past the completed ones stay as they were
    if (!a.codes.empty()) a.codes.resize(static_cast<size_t>(count));
    *rc = array_result(a, statuses);
    return true;
  }
  if (natives_idle && active_shadows == 0) {
    *outcount = MPI_UNDEFINED;
    *rc = native_rc;
    return true;
  }
  return false;
}

// The any/some forms over arrays holding shadow requests. Each wrapper's
// layered path is a function of its own (noinline), so the wrappers' native
// path sets up no stack frame (see p2p_entry.cpp, p2p_straight).
[[gnu::noinline]] int waitany_mixed(int n, MPI_Request* reqs, int* index, MPI_Status* status) {
  PollPacer pacer;
  int rc = MPI_SUCCESS;
  while (!any_pass(n, reqs, index, status, &rc)) {
    if (pacer.native_progress_due()) native_progress();  // see waitall_mixed
    pacer.pause();
  }
  return rc;
}

[[gnu::noinline]] int testany_mixed(int n, MPI_Request* reqs, int* index, int* flag, MPI_Status* status) {
  int rc = MPI_SUCCESS;
  if (any_pass(n, reqs, index, status, &rc)) {
    *flag = 1;
  } else {
    *flag = 0;
    *index = MPI_UNDEFINED;
  }
  return rc;
}

[[gnu::noinline]] int waitsome_mixed(int n, MPI_Request* reqs, int* outcount, int* indices, MPI_Status* statuses) {
  PollPacer pacer;
  int rc = MPI_SUCCESS;
  while (!some_pass(n, reqs, outcount, indices, statuses, &rc)) {
    if (pacer.native_progress_due()) native_progress();  // see waitall_mixed
    pacer.pause();
  }
  return rc;
}

[[gnu::noinline]] int testsome_mixed(int n, MPI_Request* reqs, int* outcount, int* indices, MPI_Status* statuses) {
  int rc = MPI_SUCCESS;
  if (!some_pass(n, reqs, outcount, indices, statuses, &rc)) *outcount = 0;
  return rc;
}

}  // namespace

}  // namespace accl::pmpi

using namespace accl::pmpi;

ACCL_PMPI_EXPORT int MPI_Wait(MPI_Request* req, MPI_Status* status) {
  if (ACCL_LIKELY(g_native_only) || !is_shadow(*req)) return PMPI_Wait(req, status);
  return wait_one(req, status);
}

ACCL_PMPI_EXPORT int MPI_Test(MPI_Request* req, int* flag, MPI_Status* status) {
  if (ACCL_LIKELY(g_native_only) || !is_shadow(*req)) return PMPI_Test(req, flag, status);
  return test_one(req, flag, status);
}

ACCL_PMPI_EXPORT int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[]) {
  if (ACCL_LIKELY(g_native_only) || !any_shadow(n, reqs)) return PMPI_Waitall(n, reqs, statuses);
  return waitall_mixed(n, reqs, statuses);
}

ACCL_PMPI_EXPORT int MPI_Testall(int n, MPI_Request reqs[], int* flag, MPI_Status statuses[]) {
  if (ACCL_LIKELY(g_native_only) || !any_shadow(n, reqs)) return PMPI_Testall(n, reqs, flag, statuses);
  return testall_mixed(n, reqs, flag, statuses);
}

ACCL_PMPI_EXPORT int MPI_Waitany(int n, MPI_Request reqs[], int* index, MPI_Status* status) {
  if (ACCL_LIKELY(g_native_only) || !any_shadow(n, reqs)) return PMPI_Waitany(n, reqs, index, status);
  return waitany_mixed(n, reqs, index, status);
}

ACCL_PMPI_EXPORT int MPI_Testany(int n, MPI_Request reqs[], int* index, int* flag, MPI_Status* status) {
  if (ACCL_LIKELY(g_native_only) || !any_shadow(n, reqs)) return PMPI_Testany(n, reqs, index, flag, status);
  return testany_mixed(n, reqs, index, flag, status);
}

ACCL_PMPI_EXPORT int MPI_Waitsome(int n, MPI_Request reqs[], int* outcount, int indices[], MPI_Status statuses[]) {
  if (ACCL_LIKELY(g_native_only) || !any_shadow(n, reqs))
    return PMPI_Waitsome(n, reqs, outcount, indices, statuses);
  return waitsome_mixed(n, reqs, outcount, indices, statuses);
}

ACCL_PMPI_EXPORT int MPI_Testsome(int n, MPI_Request reqs[], int* outcount, int indices[], MPI_Status statuses[]) {
  if (ACCL_LIKELY(g_native_only) || !any_shadow(n, reqs))
    return PMPI_Testsome(n, reqs, outcount, indices, statuses);
  return testsome_mixed(n, reqs, outcount, indices, statuses);
}

ACCL_PMPI_EXPORT int MPI_Request_get_status(MPI_Request req, int* flag, MPI_Status* status) {
  if (ACCL_LIKELY(g_native_only) || !is_shadow(req)) return PMPI_Request_get_status(req, flag, status);
  ShadowReq* r = as_shadow(req);
  std::lock_guard lock(state().mu);
  progress_locked();
  if (!r->active) {
    *flag = 1;
    set_empty_status(status);
  } else if (r->complete) {
    *flag = 1;
    if (status != MPI_STATUS_IGNORE) {
      if (r->kind == ReqKind::recv || r->cancelled) copy_status(status, r->status);
      else set_empty_status(status);
    }
  } else {
    *flag = 0;
  }
  return MPI_SUCCESS;
}

ACCL_PMPI_EXPORT int MPI_Request_free(MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only) || !is_shadow(*req)) return PMPI_Request_free(req);
  ShadowReq* r = as_shadow(*req);
  {
    std::lock_guard lock(state().mu);
    if (!r->active || r->complete) p2p_request_free(r);
    else r->user_freed = true;  // freed by progress once the operation completes
  }
  *req = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

ACCL_PMPI_EXPORT int MPI_Cancel(MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only) || !is_shadow(*req)) return PMPI_Cancel(req);
  std::lock_guard lock(state().mu);
  // Only a receive that has not matched yet can be cancelled; sends and
  // matched receives complete normally (MPI allows a cancel to fail).
  p2p_recv_cancel(as_shadow(*req));
  return MPI_SUCCESS;
}

ACCL_PMPI_EXPORT int MPI_Start(MPI_Request* req) {
  if (ACCL_LIKELY(g_native_only) || !is_shadow(*req)) return PMPI_Start(req);
  ShadowReq* r = as_shadow(*req);
  std::string text;
  int code = MPI_SUCCESS;
  {
    std::lock_guard lock(state().mu);
    try {
      if (r->kind == ReqKind::send) p2p_send_start(r);
      else p2p_recv_start(r);
    } catch (...) {
      code = error_code_from_current_exception(r->call, &text);
      flight_remove(r);
      r->active = false;
    }
  }
  if (code != MPI_SUCCESS) return raise_error(r->comm, r->call, code, text);
  return MPI_SUCCESS;
}

ACCL_PMPI_EXPORT int MPI_Startall(int n, MPI_Request reqs[]) {
  if (ACCL_LIKELY(g_native_only) || !any_shadow(n, reqs)) return PMPI_Startall(n, reqs);
  for (int i = 0; i < n; ++i) {
    const int rc = MPI_Start(&reqs[i]);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

ACCL_PMPI_EXPORT MPI_Fint MPI_Request_c2f(MPI_Request req) {
  if (is_shadow(req)) return shadow_c2f(as_shadow(req));
  return PMPI_Request_c2f(req);
}

ACCL_PMPI_EXPORT MPI_Request MPI_Request_f2c(MPI_Fint f) {
  if (ShadowReq* r = shadow_f2c(f)) return as_request(r);
  return PMPI_Request_f2c(f);
}
