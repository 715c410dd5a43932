// SPDX-License-Identifier: Apache-2.0
//
// Buffers: a device allocation with a host mirror (our aligned memory or the
// user's pointer), or host-only memory the CCLO reaches directly. Slices share
// the storage of their parent and address it in elements.
#include <accl/accl.hpp>
#include <accl/buffer.hpp>
#include <accl/error.hpp>
#include <accl/log.hpp>

#include "internal.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace accl {
namespace {

// Device DMA engines and XRT user-pointer buffers want page-aligned host memory.
constexpr size_t kHostAlignment = 4096;
// Linux never maps the first page (vm.mmap_min_addr is larger still), so no
// user buffer starts below it.
constexpr uintptr_t kFirstPageEnd = 4096;

void* allocate_host_mirror(size_t bytes) {
  const size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* p = std::aligned_alloc(kHostAlignment, rounded);
  if (p == nullptr) throw std::bad_alloc();
  // Zeroed so a buffer read back before anything was written is deterministic.
  std::memset(p, 0, rounded);
  return p;
}

}  // namespace

namespace detail {

void require_user_memory(const ACCL& owner, const char* call, const void* ptr, size_t length) {
  if (length == 0 || reinterpret_cast<uintptr_t>(ptr) >= kFirstPageEnd) return;
  const int rank = owner.local_rank();
  char where[32];
  std::snprintf(where, sizeof where, "%p", ptr);
  throw ArgumentError(call, rank,
                      "call '" + std::string(call) + "' on rank " + std::to_string(rank) + ": host pointer " +
                          (ptr == nullptr ? std::string("NULL") : std::string(where)) + " for " +
                          std::to_string(length) + " elements is not memory (null or inside the first page)");
}

BufferStorage::~BufferStorage() {
  if (allocation.bytes != 0 && context) {
    try {
      context->device->free(allocation);
    } catch (const std::exception& e) {
      ACCL_LOG_WARN("freeing a buffer of {} bytes failed: {}", allocation.bytes, e.what());
    }
  }
  std::free(owned_host);
}

void SyncRange::copy_to_device() const { storage->context->device->copy_to_device(address, host, bytes); }

void SyncRange::copy_from_device() const { storage->context->device->copy_from_device(address, host, bytes); }

SyncRange BufferAccess::range(const BaseBuffer& buffer, uint64_t elements) {
  SyncRange r;
  if (buffer.is_host_only() || elements == 0) return r;
  r.storage = buffer.storage_;
  r.host = buffer.host_;
  r.address = buffer.address_;
  r.bytes = static_cast<size_t>(std::min<uint64_t>(elements * buffer.elem_bytes_, buffer.bytes_));
  return r;
}

}  // namespace detail

BaseBuffer::~BaseBuffer() = default;

BaseBuffer::BaseBuffer(ACCL& owner, size_t length, abi::DataType type, BufferPlacement placement, void* user_ptr,
                       unsigned bank)
    : owner_(&owner), type_(type), placement_(placement) {
  const uint32_t elem_bytes = abi::data_type_bytes(type);
  if (elem_bytes == 0)
    throw ArgumentError("create_buffer", owner.local_rank(),
                        "call 'create_buffer' on rank " + std::to_string(owner.local_rank()) +
                            ": buffers need a data type (accl::dataType: an integer, float or pair type)");
  elem_bytes_ = elem_bytes;
  bytes_ = length * elem_bytes;

  auto storage = std::make_shared<detail::BufferStorage>();
  storage->context = owner.impl_->context;
  Device& device = *storage->context->device;
  if (bytes_ != 0) {
    if (placement == BufferPlacement::device) {
      host_ = user_ptr != nullptr ? user_ptr : (storage->owned_host = allocate_host_mirror(bytes_));
      storage->allocation = device.allocate(bytes_, MemoryKind::device, bank);
    } else if (user_ptr != nullptr) {
      storage->allocation = device.map_host(user_ptr, bytes_);
      storage->mapped_user_memory = true;
      host_ = user_ptr;
    } else {
      storage->allocation = device.allocate(bytes_, MemoryKind::host_only, 0);
      host_ = storage->allocation.host_ptr;
    }
    address_ = storage->allocation.address;
  } else {
    host_ = user_ptr;  // nothing to allocate: a 0-element buffer never moves data
  }
  storage_ = std::move(storage);
}

BaseBuffer::BaseBuffer(const BaseBuffer& parent, size_t start, size_t end)
    : owner_(parent.owner_),
      storage_(parent.storage_),
      elem_bytes_(parent.elem_bytes_),
      type_(parent.type_),
      placement_(parent.placement_) {
  // The element offset is converted to bytes: public ACCL's SimBuffer adds the
  // element index to the byte address, which is wrong for elements > 1 byte.
  host_ = parent.host_ != nullptr ? static_cast<char*>(parent.host_) + start * elem_bytes_ : nullptr;
  address_ = parent.address_ + start * elem_bytes_;
  bytes_ = (end - start) * elem_bytes_;
}

void BaseBuffer::sync_to_device() {
  if (is_host_only() || bytes_ == 0) return;
  storage_->context->device->copy_to_device(address_, host_, bytes_);
}

void BaseBuffer::sync_from_device() {
  if (is_host_only() || bytes_ == 0) return;
  storage_->context->device->copy_from_device(address_, host_, bytes_);
}

// The concrete type behind slice(): a view with no element type of its own.
class SliceBuffer final : public BaseBuffer {
 public:
  SliceBuffer(const BaseBuffer& parent, size_t start, size_t end) : BaseBuffer(parent, start, end) {}
};

std::unique_ptr<BaseBuffer> BaseBuffer::slice(size_t start, size_t end) {
  if (start > end || end > length()) {
    const int rank = owner_->local_rank();
    throw ArgumentError("slice", rank,
                        "call 'slice' on rank " + std::to_string(rank) + ": range [" + std::to_string(start) + ", " +
                            std::to_string(end) + ") is outside the buffer of " + std::to_string(length()) +
                            " elements");
  }
  return std::make_unique<SliceBuffer>(*this, start, end);
}

}  // namespace accl
