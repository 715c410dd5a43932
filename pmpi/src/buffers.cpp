// SPDX-License-Identifier: Apache-2.0
//
// Host memory of the offload path: ACCL host buffers over user memory
// (cached so steady-state calls allocate nothing), pooled staging memory,
// and the host-side copies around device calls.
#include "buffers.hpp"

#include "state.hpp"

#include <cstdlib>
#include <cstring>

namespace accl::pmpi {

namespace {

// --- host buffer cache ------------------------------------------------------
// Applications reuse the same buffers call after call; wrapping a pointer is
// a few heap allocations in the driver, so the last N wrappers are kept.
// Entries only refer to memory, never own it: a freed and reused address is
// fine for the emulator (it addresses host memory directly). The XRT backend
// pins user memory per wrapper, see docs in pmpi/README.md.
struct CacheEntry {
  const void* ptr = nullptr;
  uint64_t elems = 0;
  dataType dtype = dataType::none;
  uint64_t stamp = 0;
  std::shared_ptr<BaseBuffer> buf;
};
std::vector<CacheEntry> g_cache;
uint64_t g_cache_clock = 0;

// --- staging pool -------------------------------------------------------------
constexpr int kMinClassLog = 12;  // 4 KiB
constexpr int kMaxClassLog = 40;
constexpr size_t kKeepBytes = size_t{16} << 20;  // blocks above this go back to the OS
Staging* g_free[kMaxClassLog + 1] = {};
size_t g_limited_in_use = 0;

int size_class(size_t bytes) {
  int c = kMinClassLog;
  while (c < kMaxClassLog && (size_t{1} << c) < bytes) ++c;
  return c;
}

}  // namespace

std::shared_ptr<BaseBuffer> host_buffer(const void* ptr, uint64_t elems, dataType dtype) {
  State& st = state();
  for (auto& e : g_cache) {
    if (e.ptr == ptr && e.elems == elems && e.dtype == dtype && e.buf) {
      e.stamp = ++g_cache_clock;
      return e.buf;
    }
  }
  std::shared_ptr<BaseBuffer> buf(
      st.accl->create_buffer_host<uint8_t>(static_cast<uint8_t*>(const_cast<void*>(ptr)), elems, dtype));
  if (st.s.buffer_cache == 0) return buf;
  if (g_cache.size() < st.s.buffer_cache) {
    g_cache.push_back({ptr, elems, dtype, ++g_cache_clock, buf});
    return buf;
  }
  CacheEntry* lru = &g_cache[0];
  for (auto& e : g_cache)
    if (e.stamp < lru->stamp) lru = &e;
  *lru = CacheEntry{ptr, elems, dtype, ++g_cache_clock, buf};
  return buf;
}

Staging* staging_get(size_t bytes, bool limited) {
  State& st = state();
  const int c = size_class(bytes == 0 ? 1 : bytes);
  const size_t block = size_t{1} << c;
  if (limited) {
    if (g_limited_in_use + block > st.s.staging_limit) return nullptr;
    g_limited_in_use += block;
  }
  Staging* s = g_free[c];
  if (s != nullptr) {
    g_free[c] = s->next;
  } else {
    s = new Staging;
    s->ptr = std::aligned_alloc(4096, block);
    if (s->ptr == nullptr) throw std::bad_alloc();
    s->bytes = block;
    s->size_class = c;
  }
  s->next = nullptr;
  s->limited = limited;
  return s;
}

void staging_put(Staging* s) {
  if (s == nullptr) return;
  if (s->limited) g_limited_in_use -= s->bytes;
  s->limited = false;
  // Drop cached wrappers of this block before the memory can go away.
  for (auto& e : g_cache) {
    if (e.buf && static_cast<const char*>(e.ptr) >= static_cast<char*>(s->ptr) &&
        static_cast<const char*>(e.ptr) < static_cast<char*>(s->ptr) + s->bytes && s->bytes > kKeepBytes)
      e = CacheEntry{};
  }
  if (s->bytes > kKeepBytes) {
    std::free(s->ptr);
    delete s;
    return;
  }
  s->next = g_free[s->size_class];
  g_free[s->size_class] = s;
}

BaseBuffer& Held::wrap(const void* ptr, uint64_t elems, dataType dtype) {
  for (auto& slot : b) {
    if (!slot) {
      slot = host_buffer(ptr, elems, dtype);
      return *slot;
    }
  }
  throw std::logic_error("accl-pmpi: more than three buffers in one call");
}

void* Held::stage(size_t bytes) {
  for (auto& slot : s) {
    if (slot == nullptr) {
      slot = staging_get(bytes);
      return slot->ptr;
    }
  }
  throw std::logic_error("accl-pmpi: more than two staging blocks in one call");
}

void* Held::take_stage(Held& from) {
  Staging* block = from.s[0];
  for (auto& slot : s) {
    if (slot == nullptr) {
      slot = block;
      from.s[0] = from.s[1];
      from.s[1] = nullptr;
      return block->ptr;
    }
  }
  throw std::logic_error("accl-pmpi: more than two staging blocks in one call");
}

void Held::release() {
  // Runs twice per request (completion and free), nearly always with nothing
  // held: test before touching each slot.
  for (auto& slot : b)
    if (slot) slot.reset();
  for (auto& slot : s) {
    if (slot == nullptr) continue;
    staging_put(slot);
    slot = nullptr;
  }
}

void pack_to(void* dst, uint64_t bytes, const void* src, int count, MPI_Datatype type) {
  int pos = 0;
  PMPI_Pack(src, count, type, dst, static_cast<int>(bytes), &pos, MPI_COMM_SELF);
}

void unpack_from(const void* src, uint64_t bytes, void* dst, int count, MPI_Datatype type) {
  int pos = 0;
  PMPI_Unpack(src, static_cast<int>(bytes), &pos, dst, count, type, MPI_COMM_SELF);
}

void run_post_copy(const PostCopy& p) {
  switch (p.kind) {
    case PostCopy::unpack: unpack_elements(p.src, p.bytes, p.dst, p.count, p.type, p.layout.get()); break;
    case PostCopy::memcpy_: std::memcpy(p.dst, p.src, p.bytes); break;
    case PostCopy::none: break;
  }
}

void buffers_teardown() {
  g_cache.clear();
  for (auto& head : g_free) {
    while (head != nullptr) {
      Staging* s = head;
      head = s->next;
      std::free(s->ptr);
      delete s;
    }
  }
  g_limited_in_use = 0;
}

}  // namespace accl::pmpi
