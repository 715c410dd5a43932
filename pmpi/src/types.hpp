// SPDX-License-Identifier: Apache-2.0
//
// Datatypes and ops of the PMPI layer: flattening (types.cpp), layouts and
// unpacking by basic elements (layout.cpp), byte sizes of (count, type).
#pragma once

#include "calls.hpp"

#include <memory>
#include <vector>

namespace accl::pmpi {

// pair: a predefined MINLOC/MAXLOC pair type (TypeInfo::pair_type says which).
enum class ElemClass : uint8_t { none, sint, uint, flt, cplx, other, pair };

// A datatype flattened to "n basic elements of one class and size".
struct TypeInfo {
  ElemClass cls = ElemClass::none;  // none: heterogeneous or unknown
  uint8_t elem_size = 0;            // bytes of one basic element (complex: whole pair)
  bool contiguous = false;          // lb == true_lb == 0, extent == true extent == size
  int64_t size = 0;                 // bytes of one item of the type (PMPI_Type_size)
  int64_t extent = 0;
  dataType pair_type = dataType::none;  // cls == pair: the device's packed pair type
};
// Never fails: unknown types come back with cls == none.
TypeInfo type_info(MPI_Datatype type);
// Whether `type` is predefined or carries the layer's attribute, which it
// gets here if it has none (type_info() sets it): its delete callback tells
// the decision memo that the handle may be reused.
bool track_type(MPI_Datatype type);
// A reference to `type` that survives the application's MPI_Type_free
// (MPI allows freeing a type while a pending operation uses it): a
// duplicate of a derived type, MPI_DATATYPE_NULL for a predefined one
// (never freed: use it as it is). Application thread only.
MPI_Datatype type_hold(MPI_Datatype type);
// Drops a type_hold() reference (mu held). On the progress thread, which
// calls no MPI function, the free waits for the next application thread's
// progress round (type_release_deferred).
void type_release(MPI_Datatype held);
void type_release_deferred();  // mu held, application thread
void types_init();  // builds the table of predefined types

// Device type + element count for pure data movement of `bytes` bytes
// (bytes are bytes: int32/int64 words so any payload travels unchanged).
struct Movement {
  dataType dtype = dataType::none;
  uint64_t elems = 0;
};
Movement movement(uint64_t bytes);

// Device type for a reduction over `info` items (count in device elements);
// reason != Offloaded when it cannot run on the device.
struct ReductionType {
  Reason reason = Reason::Offloaded;
  dataType dtype = dataType::none;
  reduceFunction func = reduceFunction::SUM;
  uint64_t elems_per_item = 0;
  // The items go to the device packed (MPI_Pack) and come back unpacked: a
  // pair type with padding (MPI_DOUBLE_INT: 12 bytes in a 16-byte extent),
  // whose padding MPI leaves alone.
  bool packed = false;
};
ReductionType reduction_type(const TypeInfo& info, MPI_Op op);

// Where the bytes of one item of a datatype live, in pack order
// (layout.cpp): a tree as large as the type's description.
struct TypeLayout {
  enum Kind : uint8_t { bytes, runs, strided, indexed, structure } kind = bytes;
  int64_t size = 0;    // data bytes of one item
  int64_t extent = 0;  // distance between consecutive items
  struct Run {
    int64_t offset;
    int64_t length;
  };
  struct Block {
    int64_t displ;
    int64_t len;  // children in a row, each one child extent further
    int child;    // index into children
  };
  // bytes: `size` bytes at offset 0; runs: run_list; strided: `count` blocks
  // of `blocklen` children[0], block i at i * stride; indexed / structure:
  // `blocks`.
  int64_t count = 0, blocklen = 0, stride = 0;
  std::vector<Run> run_list;
  std::vector<Block> blocks;
  std::vector<std::shared_ptr<const TypeLayout>> children;
};
// The layout of `type`, decoded once and cached on the type; null when it
// cannot be described. Application thread (makes MPI calls).
std::shared_ptr<const TypeLayout> type_layout(MPI_Datatype type);
// Copies the first `bytes` (at most one item) of packed `src` to where they
// belong in the item at `item`; no MPI call.
void place_leading_bytes(const TypeLayout& layout, void* item, const void* src, uint64_t bytes);
// Unpacks `bytes` of packed data into up to `count` items of `type` at `dst`
// by basic elements: the whole items through PMPI_Unpack, a trailing partial
// item through `layout`, touching nothing past the received bytes. Without
// a layout, `bytes` must be `count` whole items.
void unpack_elements(const void* src, uint64_t bytes, void* dst, int count, MPI_Datatype type,
                     const TypeLayout* layout);

// Bytes of `count` items of `type` (0 for bad types). MPI_DATATYPE_NULL is
// not handed to PMPI_Type_size: Open MPI raises that on MPI_COMM_WORLD, whose
// handler is fatal by default, although the user's call may be on a
// communicator that returns errors (found by fuzz_mpi_args).
inline uint64_t bytes_of(int count, MPI_Datatype type) {
  int size = 0;
  if (count <= 0 || type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS || size < 0) return 0;
  return static_cast<uint64_t>(count) * static_cast<uint64_t>(size);
}

// bytes_of() and whether (count, type) describes a buffer at all, with one
// type lookup: point-to-point entry points need both on every call.
struct BufferBytes {
  uint64_t bytes = 0;
  bool valid = false;
};
inline BufferBytes buffer_bytes(int count, MPI_Datatype type) {
  int size = 0;
  if (count < 0 || type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS) return {};
  return {count == 0 || size < 0 ? 0 : static_cast<uint64_t>(count) * static_cast<uint64_t>(size), true};
}

}  // namespace accl::pmpi
