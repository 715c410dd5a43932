// SPDX-License-Identifier: Apache-2.0
//
// Buffers: device memory with a host mirror, host-only memory, and slices.
#pragma once

#include <accl/abi.hpp>
#include <accl/device.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace accl {

class ACCL;
namespace detail {
struct BufferStorage;  // memory shared by a buffer and its slices
struct BufferAccess;   // the driver's view of a buffer's internals
// Throws ArgumentError naming `call` when user memory of `length` elements
// starts at a null pointer or inside the first page (MPI_IN_PLACE is
// (void*)1): no process maps it, and the CCLO must never treat host address
// 0 as memory.
void require_user_memory(const ACCL& owner, const char* call, const void* ptr, size_t length);
}  // namespace detail

// IEEE 754 binary16 storage type for float16 buffers.
struct float16_t {
  uint16_t bits = 0;
};
float half_to_float(float16_t h);
float16_t float_to_half(float f);

template <typename T>
constexpr abi::DataType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return abi::DataType::float32;
  else if constexpr (std::is_same_v<T, double>) return abi::DataType::float64;
  else if constexpr (std::is_same_v<T, float16_t>) return abi::DataType::float16;
  else if constexpr (std::is_same_v<T, int32_t>) return abi::DataType::int32;
  else if constexpr (std::is_same_v<T, int64_t>) return abi::DataType::int64;
  else if constexpr (std::is_same_v<T, int8_t> || std::is_same_v<T, uint8_t>) return abi::DataType::int8;
  else if constexpr (std::is_same_v<T, int16_t>) return abi::DataType::int16;
  else if constexpr (std::is_same_v<T, uint16_t>) return abi::DataType::uint16;
  else if constexpr (std::is_same_v<T, uint32_t>) return abi::DataType::uint32;
  else if constexpr (std::is_same_v<T, uint64_t>) return abi::DataType::uint64;
  else return abi::DataType::none;
}

enum class BufferPlacement { device, host_only };

// Type-erased buffer as the calls see it.
class BaseBuffer {
 public:
  virtual ~BaseBuffer();
  BaseBuffer(const BaseBuffer&) = delete;
  BaseBuffer& operator=(const BaseBuffer&) = delete;

  void sync_to_device();    // host mirror -> device (no-op for host-only)
  void sync_from_device();  // device -> host mirror (no-op for host-only)
  // Elements [start, end) of this buffer; shares memory with it.
  std::unique_ptr<BaseBuffer> slice(size_t start, size_t end);

  void* byte_array() const { return host_; }
  size_t size() const { return bytes_; }                  // bytes
  size_t length() const { return bytes_ / elem_bytes_; }  // elements
  abi::DataType type() const { return type_; }
  uint64_t address() const { return address_; }           // address the CCLO uses
  bool is_host_only() const { return placement_ == BufferPlacement::host_only; }
  BufferPlacement placement() const { return placement_; }
  ACCL& owner() const { return *owner_; }

 protected:
  // Allocates (or wraps `user_ptr` as) a buffer of `length` elements.
  BaseBuffer(ACCL& owner, size_t length, abi::DataType type, BufferPlacement placement,
             void* user_ptr, unsigned bank);
  // A view into `parent` (slice).
  BaseBuffer(const BaseBuffer& parent, size_t start, size_t end);

 private:
  ACCL* owner_;
  std::shared_ptr<detail::BufferStorage> storage_;
  void* host_ = nullptr;
  uint64_t address_ = 0;
  size_t bytes_ = 0;
  uint32_t elem_bytes_ = 1;
  abi::DataType type_;
  BufferPlacement placement_;

  template <typename T> friend class Buffer;
  friend class SliceBuffer;
  friend struct detail::BufferAccess;
};

template <typename T>
class Buffer : public BaseBuffer {
 public:
  Buffer(ACCL& owner, size_t length, abi::DataType type, BufferPlacement placement, T* user_ptr, unsigned bank)
      : BaseBuffer(owner, length, type, placement, user_ptr, bank) {}
  T* buffer() const { return static_cast<T*>(byte_array()); }
  T& operator[](size_t i) { return buffer()[i]; }
  const T& operator[](size_t i) const { return buffer()[i]; }
  T* begin() const { return buffer(); }
  T* end() const { return buffer() + length(); }
};

}  // namespace accl
