// SPDX-License-Identifier: Apache-2.0
//
// Exchanges of per-peer blocks (neighbourhood collectives, MPI_Alltoallw) as
// device sends and receives on the communicator's ACCL communicator.
//
// * Every block travels as whole 32-bit words (the device's data-movement
//   type): a block that is not contiguous or not a multiple of 4 bytes is
//   packed into staging on the sending side and received into staging and
//   unpacked on completion on the receiving side; the padding of the last
//   word is never copied out. So every datatype signature can be offloaded
//   and all members take the same path whatever their local layouts.
// * Zero-byte blocks move nothing on either side (both sides know the size).
// * Blocks from this rank to itself are copied on the host at the call.
// * All receives are issued before the sends, and the call's device requests
//   are joined by one nop chained on them (the device completes it when all
//   are done), so blocking and non-blocking forms wait on one request like
//   the other collectives, and progress on the device alone.
#include "neighbor.hpp"

#include "buffers.hpp"
#include "comms.hpp"
#include "errors.hpp"
#include "progress.hpp"
#include "requests.hpp"
#include "state.hpp"

#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

namespace accl::pmpi {

namespace {

// Memory, wrappers and type references an exchange keeps until it
// completes, and the unpacks it runs then. Destroyed with mu held.
class ExchangeWork final : public PostWork {
 public:
  ExchangeWork() = default;
  ExchangeWork(const ExchangeWork&) = delete;
  ExchangeWork& operator=(const ExchangeWork&) = delete;
  ~ExchangeWork() override {
    for (MPI_Datatype t : held_types_) type_release(t);
  }

  void run() override {
    for (const Unpack& u : unpacks_) {
      if (u.contiguous) std::memcpy(u.dst, u.src, u.bytes);
      else unpack_elements(u.src, u.bytes, u.dst, u.count, u.type, nullptr);
    }
  }

  void* stage(uint64_t bytes) {
    stages_.push_back(std::make_unique_for_overwrite<unsigned char[]>(bytes));
    return stages_.back().get();
  }
  BaseBuffer& wrap(const void* ptr, unsigned words) {
    wrappers_.push_back(host_buffer(ptr, words, dataType::int32));
    return *wrappers_.back();
  }
  // `t` lands in `staged` and is copied to its place on completion; `hold`:
  // the application may free the type before that (non-blocking call).
  void unpack_later(const Transfer& t, const void* staged, bool contiguous, bool hold) {
    MPI_Datatype type = t.type;
    if (!contiguous && hold) {
      const MPI_Datatype ref = type_hold(t.type);
      if (ref != MPI_DATATYPE_NULL) {
        held_types_.push_back(ref);
        type = ref;
      }
    }
    unpacks_.push_back({t.buf, staged, t.bytes, t.count, type, contiguous});
  }

 private:
  struct Unpack {
    void* dst;
    const void* src;
    uint64_t bytes;
    int count;
    MPI_Datatype type;
    bool contiguous;
  };
  std::vector<std::unique_ptr<unsigned char[]>> stages_;
  std::vector<std::shared_ptr<BaseBuffer>> wrappers_;
  std::vector<Unpack> unpacks_;
  std::vector<MPI_Datatype> held_types_;
};

unsigned device_words(uint64_t bytes) {
  const uint64_t words = (bytes + 3) / 4;
  if (words > UINT_MAX)
    throw std::length_error("a block of " + std::to_string(bytes) + " bytes exceeds the device's 32-bit count");
  return static_cast<unsigned>(words);
}

bool plain(const Transfer& t) { return type_info(t.type).contiguous; }

// The bytes of send block `t` at `dst` (packed if its layout needs it).
void pack_block(void* dst, const Transfer& t) {
  if (plain(t)) std::memcpy(dst, t.buf, t.bytes);
  else pack_to(dst, t.bytes, t.buf, t.count, t.type);
}

// Copies the blocks this rank sends itself: the i-th receive from itself
// with a tag takes the i-th send to itself with that tag, as between peers.
void copy_self_blocks(const Exchange& x, int rank, ExchangeWork& w) {
  std::vector<bool> used(x.sends.size(), false);
  for (const Transfer& r : x.recvs) {
    if (r.peer != rank) continue;
    size_t j = 0;
    while (j < x.sends.size() && (used[j] || x.sends[j].peer != rank || x.sends[j].tag != r.tag)) ++j;
    if (j == x.sends.size()) throw std::invalid_argument("a block from this rank to itself has no matching send");
    used[j] = true;
    const Transfer& s = x.sends[j];
    if (s.bytes != r.bytes)
      throw std::invalid_argument("a block from this rank to itself has " + std::to_string(s.bytes) +
                                  " bytes sent and " + std::to_string(r.bytes) + " expected");
    if (r.bytes == 0 || x.in_place) continue;  // in place: the block already is where it belongs
    if (plain(s) && plain(r)) {
      std::memcpy(r.buf, s.buf, r.bytes);
    } else {
      void* tmp = w.stage(r.bytes);
      pack_block(tmp, s);
      unpack_from(tmp, r.bytes, r.buf, r.count, r.type);
    }
  }
}

// Issues the device calls of `x` (mu held); null when nothing goes to the
// device.
RequestPtr issue(const Exchange& x, CommState* cs, ExchangeWork& w, bool nonblocking) {
  ACCL& accl = *state().accl;
  const int rank = cs->rank;
  auto remote = [rank](const Transfer& t) { return t.bytes != 0 && t.peer != MPI_PROC_NULL && t.peer != rank; };

  // Sizes first: nothing may fail once device calls are out.
  for (const Transfer& t : x.sends) device_words(t.bytes);
  for (const Transfer& t : x.recvs) device_words(t.bytes);
  // Send sources next: in place, receives may overwrite them.
  std::vector<const void*> sources(x.sends.size(), nullptr);
  for (size_t j = 0; j < x.sends.size(); ++j) {
    const Transfer& t = x.sends[j];
    if (!remote(t)) continue;
    if (!x.in_place && plain(t) && t.bytes % 4 == 0) {
      sources[j] = t.buf;
    } else {
      void* s = w.stage(uint64_t{device_words(t.bytes)} * 4);
      pack_block(s, t);
      sources[j] = s;
    }
  }
  copy_self_blocks(x, rank, w);

  std::vector<RequestPtr> calls;
  for (const Transfer& t : x.recvs) {
    if (!remote(t)) continue;
    const unsigned words = device_words(t.bytes);
    void* land = t.buf;
    const bool contiguous = plain(t);
    if (!contiguous || t.bytes % 4 != 0) {
      land = w.stage(uint64_t{words} * 4);
      w.unpack_later(t, land, contiguous, nonblocking);
    }
    calls.push_back(accl.recv(w.wrap(land, words), words, static_cast<unsigned>(t.peer), t.tag, cs->id, false,
                              dataType::none, true));
  }
  for (size_t j = 0; j < x.sends.size(); ++j) {
    const Transfer& t = x.sends[j];
    if (!remote(t)) continue;
    const unsigned words = device_words(t.bytes);
    calls.push_back(accl.send(w.wrap(sources[j], words), words, static_cast<unsigned>(t.peer), t.tag, cs->id,
                              false, dataType::none, true));
  }
  if (calls.empty()) return nullptr;
  if (calls.size() == 1) return std::move(calls.front());
  return accl.nop(true, calls);
}

// Waits for a blocking exchange in the device, in slices, with progress
// passes of the point-to-point engine and of Open MPI between slices (as the
// blocking collectives do). Bounded: the device ends every call by its
// timeout.
void wait_exchange(Request& dev) {
  State& st = state();
  for (;;) {
    {
      std::lock_guard lock(st.mu);
      progress_locked();
      if (dev.test()) return;
    }
    native_progress();
    if (dev.wait(std::chrono::milliseconds(1))) return;
  }
}

}  // namespace

uint64_t Exchange::send_bytes() const {
  uint64_t total = 0;
  for (const Transfer& t : sends)
    if (t.peer != MPI_PROC_NULL) total += t.bytes;
  return total;
}

int exchange_run(Call call, MPI_Comm comm, CommState* cs, const Exchange& x, MPI_Request* req) {
  State& st = state();
  auto work = std::make_shared<ExchangeWork>();
  RequestPtr dev;
  std::string text;
  int code = MPI_SUCCESS;
  {
    std::lock_guard lock(st.mu);
    try {
      dev = issue(x, cs, *work, req != nullptr);
      if (req != nullptr) {
        ShadowReq* r = shadow_alloc(ReqKind::coll, call);
        r->cs = cs;
        ++cs->refs;
        r->comm = comm;
        r->r[0] = std::move(dev);
        r->post.kind = PostCopy::run_work;
        r->post.work = std::move(work);
        r->active = true;
        flight_add(r);  // completes in the next progress round, device work or not
        *req = as_request(r);
        return MPI_SUCCESS;
      }
    } catch (...) {
      code = error_code_from_current_exception(call, &text);
      work.reset();
    }
  }
  if (code != MPI_SUCCESS) return raise_error(comm, call, code, text);
  try {
    if (dev) wait_exchange(*dev);
  } catch (...) {
    code = error_code_from_current_exception(call, &text);
  }
  {
    std::lock_guard lock(st.mu);
    if (code == MPI_SUCCESS) work->run();
    work.reset();
  }
  if (code != MPI_SUCCESS) return raise_error(comm, call, code, text);
  return MPI_SUCCESS;
}

}  // namespace accl::pmpi
