// SPDX-License-Identifier: Apache-2.0
//
// Host memory of offloaded calls (buffers.cpp): ACCL wrappers of user
// buffers (cached), pooled staging memory, and the host-side copies around a
// device call (pack, unpack, post copy).
#pragma once

#include "types.hpp"

#include <memory>

namespace accl::pmpi {

// ACCL host-only buffer over user memory (cached; mu held).
std::shared_ptr<BaseBuffer> host_buffer(const void* ptr, uint64_t elems, dataType dtype);
struct Staging {
  void* ptr = nullptr;
  size_t bytes = 0;
  int size_class = 0;
  bool limited = false;  // counted against ACCL_P2P_STAGING_BYTES
  Staging* next = nullptr;
};
// Pooled staging memory (mu held). Null when `limited` and the pool's budget is spent.
Staging* staging_get(size_t bytes, bool limited = false);
void staging_put(Staging* s);
void buffers_teardown();

// What an offloaded call must keep alive until it completes: the ACCL
// wrappers of its buffers (the XRT backend pins user memory per wrapper) and
// staging blocks.
struct Held {
  std::shared_ptr<BaseBuffer> b[3];
  Staging* s[2] = {nullptr, nullptr};
  BaseBuffer& wrap(const void* ptr, uint64_t elems, dataType dtype);
  void* stage(size_t bytes);
  void* take_stage(Held& from);  // moves `from`'s first staging block here
  void release();  // mu held
};

// A host-side copy step run when an offloaded operation completes: `bytes`
// of staged data to the user's buffer (unpack: up to `count` items of
// `type`, a trailing partial item through `layout`).
struct PostCopy {
  enum Kind : uint8_t { none, unpack, memcpy_ } kind = none;
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  std::shared_ptr<const TypeLayout> layout;
};

// Local (de)serialisation of non-contiguous layouts; `bytes` = signature size
// (count x type size). Open MPI's native pack format is the raw data.
void pack_to(void* dst, uint64_t bytes, const void* src, int count, MPI_Datatype type);
void unpack_from(const void* src, uint64_t bytes, void* dst, int count, MPI_Datatype type);
void run_post_copy(const PostCopy& p);

}  // namespace accl::pmpi
