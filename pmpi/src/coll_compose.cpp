// SPDX-License-Identifier: Apache-2.0
//
// Composed collectives: the device calls of one call, what they hold, and
// how the call runs (blocking or as a shadow request). See coll_compose.hpp.
#include "coll_compose.hpp"

#include "collectives.hpp"
#include "errors.hpp"
#include "progress.hpp"
#include "requests.hpp"
#include "state.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

namespace accl::pmpi {

namespace {

uint64_t words_of(uint64_t bytes) { return (bytes + 3) / 4; }

}  // namespace

unsigned Composed::device_words(uint64_t bytes) {
  // The device counts in 32-bit words of 32-bit counts: 16 GiB per block.
  const uint64_t words = words_of(bytes);
  if (words > UINT_MAX)
    throw std::length_error("a block of " + std::to_string(bytes) +
                            " bytes is beyond the device's 32-bit count of words");
  return static_cast<unsigned>(words);
}

BaseBuffer& Composed::wrap(const void* ptr, uint64_t elems, dataType dtype) {
  bufs.push_back(host_buffer(ptr, elems, dtype));
  return *bufs.back();
}

void* Composed::stage(size_t bytes) {
  stages.push_back(nullptr);  // the slot first, so a failed allocation leaks nothing
  stages.back() = staging_get(bytes);
  return stages.back()->ptr;
}

const void* Composed::outgoing(const void* buf, int count, MPI_Datatype type, uint64_t bytes) {
  if (bytes % 4 == 0 && type_info(type).contiguous) return buf;
  return outgoing_copy(buf, count, type, bytes);
}

const void* Composed::outgoing_copy(const void* buf, int count, MPI_Datatype type, uint64_t bytes) {
  if (bytes == 0) return buf;
  const uint64_t padded = words_of(bytes) * 4;
  char* copy = static_cast<char*>(stage(padded));
  if (type_info(type).contiguous) std::memcpy(copy, buf, bytes);
  else pack_to(copy, bytes, buf, count, type);
  std::memset(copy + bytes, 0, padded - bytes);
  return copy;
}

void Composed::send_block(const void* words, uint64_t bytes, int peer, uint32_t block_tag) {
  if (bytes == 0) return;
  const unsigned n = device_words(bytes);
  BaseBuffer& b = wrap(words, n, dataType::int32);
  calls.push_back(state().accl->send(b, n, static_cast<unsigned>(peer), block_tag, cs->id, false, dataType::none,
                                     true));
}

void Composed::recv_typed(void* buf, int count, MPI_Datatype type, uint64_t bytes, int peer, uint32_t block_tag) {
  if (bytes == 0) return;
  const unsigned n = device_words(bytes);
  void* land = buf;
  if (bytes % 4 != 0 || !type_info(type).contiguous) {
    land = stage(uint64_t{n} * 4);
    if (type_info(type).contiguous) {
      posts.push_back(PostCopy{PostCopy::memcpy_, buf, land, bytes, 0, MPI_DATATYPE_NULL, nullptr});
    } else {
      // Unpacked at completion: hold the type, the application may free it before.
      const MPI_Datatype held = type_hold(type);
      if (held != MPI_DATATYPE_NULL) type_refs.push_back(held);
      posts.push_back(PostCopy{PostCopy::unpack, buf, land, bytes, count,
                               held != MPI_DATATYPE_NULL ? held : type, type_layout(type)});
      unpacks = true;
    }
  }
  BaseBuffer& b = wrap(land, n, dataType::int32);
  calls.push_back(state().accl->recv(b, n, static_cast<unsigned>(peer), block_tag, cs->id, false, dataType::none,
                                     true));
}

void Composed::copy_typed(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                          MPI_Datatype rtype, uint64_t bytes) {
  if (bytes == 0 || sbuf == rbuf) return;
  const bool s_contig = type_info(stype).contiguous;
  const bool r_contig = type_info(rtype).contiguous;
  if (s_contig && r_contig) {
    std::memmove(rbuf, sbuf, bytes);
    return;
  }
  if (s_contig) return unpack_from(sbuf, bytes, rbuf, rcount, rtype);
  Staging* s = staging_get(bytes);
  pack_to(s->ptr, bytes, sbuf, scount, stype);
  if (r_contig) std::memcpy(rbuf, s->ptr, bytes);
  else unpack_from(s->ptr, bytes, rbuf, rcount, rtype);
  staging_put(s);
}

void Composed::copy_own(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount, MPI_Datatype rtype,
                        uint64_t bytes) {
  if (bytes == 0 || sbuf == rbuf) return;
  if (type_info(stype).contiguous && type_info(rtype).contiguous) {
    own_blocks.push_back(OwnBlock{sbuf, rbuf, bytes});
    return;
  }
  copy_typed(sbuf, scount, stype, rbuf, rcount, rtype, bytes);
}

void Composed::copy_own_blocks(Request* progress) {
  // A slice takes a few microseconds: the device is polled that often, and a
  // poll that finds nothing costs far less than the slice.
  constexpr uint64_t kSlice = 64 * 1024;
  for (const OwnBlock& b : own_blocks) {
    const auto* from = static_cast<const char*>(b.from);
    auto* to = static_cast<char*>(b.to);
    for (uint64_t done = 0; done < b.bytes;) {
      const uint64_t n = std::min(kSlice, b.bytes - done);
      std::memmove(to + done, from + done, n);
      done += n;
      if (progress != nullptr) progress->test();
    }
  }
  own_blocks.clear();
}

RequestPtr Composed::after_all() {
  if (calls.empty()) return nullptr;  // a shadow request without device work completes in the next progress round
  if (calls.size() == 1) return calls.front();
  return state().accl->nop(true, calls);
}

void Composed::finish() {
  for (const PostCopy& p : posts) run_post_copy(p);
  posts.clear();
}

void Composed::release() {
  calls.clear();
  bufs.clear();
  for (Staging*& s : stages) staging_put(s);
  stages.clear();
  posts.clear();
  for (MPI_Datatype t : type_refs) type_release(t);
  type_refs.clear();
}

Reason composed_pre(MPI_Comm comm, CommState** cs, int* rank, int* size) {
  State& st = state();
  *cs = nullptr;
  if (!st.active) return inactive_reason();
  const Reason r = comm_check(comm, cs);
  if (r != Reason::Offloaded) return r;
  if (*cs != nullptr) {
    *rank = (*cs)->rank;
    *size = (*cs)->size;
  } else {
    PMPI_Comm_rank(comm, rank);
    PMPI_Comm_size(comm, size);
  }
  return Reason::Offloaded;
}

Reason composed_device_reason() {
  return state().public_firmware ? Reason::PublicComposed : Reason::Offloaded;
}

Reason composed_finish(Reason why, Call call, MPI_Comm comm, bool sized, uint64_t bytes, CommState** cs) {
  if (why != Reason::Offloaded) return why;
  why = composed_device_reason();
  if (why != Reason::Offloaded) return why;
  int ranks = 0;
  if (*cs != nullptr) ranks = (*cs)->size;
  else PMPI_Comm_size(comm, &ranks);
  why = sized ? policy_call(call, static_cast<uint64_t>(ranks), bytes)
              : policy_unsized(call, static_cast<uint64_t>(ranks));
  if (why != Reason::Offloaded) return why;
  if (*cs == nullptr) *cs = comm_materialize(comm);
  return (*cs)->accl ? Reason::Offloaded : (*cs)->native_reason;
}

int composed_run(Call call, MPI_Comm comm, CommState* cs, MPI_Request* req,
                 const std::function<void(Composed&)>& issue) {
  State& st = state();
  auto c = std::make_shared<Composed>();
  c->cs = cs;
  RequestPtr done;
  std::string text;
  int code = MPI_SUCCESS;
  {
    std::lock_guard lock(st.mu);
    try {
      // Every member counts the call, whatever it sends: the tags stay in step.
      c->tag = kComposedTagBase | (cs->composed_seq++ & kComposedTagMask);
      issue(*c);
      done = c->after_all();
      c->copy_own_blocks(done.get());
      if (req != nullptr) {
        ShadowReq* r = collective_request(call, comm, cs, std::move(done));
        r->composed = std::move(c);
        start_collective_request(r, req);
        return MPI_SUCCESS;
      }
    } catch (...) {
      code = error_code_from_current_exception(call, &text);
    }
  }
  if (code != MPI_SUCCESS) {
    // Calls already on the device may still use the staging: let them end
    // (each is bounded by the device timeout) before it goes back.
    for (const RequestPtr& issued : c->calls) {
      try {
        issued->wait();
      } catch (...) {
      }
    }
    std::lock_guard lock(st.mu);
    c->release();
    return raise_error(comm, call, code, text);
  }
  try {
    if (done) wait_collective(*done);
  } catch (...) {
    code = error_code_from_current_exception(call, &text);
  }
  {
    std::lock_guard lock(st.mu);
    if (code == MPI_SUCCESS) c->finish();
    c->release();
  }
  if (code != MPI_SUCCESS) return raise_error(comm, call, code, text);
  return MPI_SUCCESS;
}

}  // namespace accl::pmpi
