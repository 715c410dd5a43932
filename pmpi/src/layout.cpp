// SPDX-License-Identifier: Apache-2.0
//
// Datatype layouts and unpacking by basic elements.
//
// A message may end inside an item of the receive type: 3 ints received as
// 2 items of vector(2,1,2,int) must fill the first 3 basic elements and
// leave the 4th alone. PMPI_Unpack refuses input shorter than whole items,
// so the whole items go through it and the trailing partial item is placed
// here from the type's layout: which bytes of an item live where, in pack
// order.
//
// A layout is decoded once per type (PMPI_Type_get_envelope/contents),
// cached in a datatype attribute, into a tree as large as the type's
// description (a vector of a million blocks is one node, not a million
// runs), and placing the first n bytes walks only as much of it as those
// bytes cover. It is taken at the entry points (the application's thread)
// and held by the operation, so completion places data without any MPI call
// (completion may run on a progress thread) and without the type handle
// (the application may free the type while the receive is pending).
#include "buffers.hpp"
#include "types.hpp"

#include <accl/log.hpp>

#include <algorithm>
#include <cstring>

namespace accl::pmpi {

namespace {

constexpr int kMaxDepth = 32;
// Types with no decodable description (darray, non-contiguous named pair
// types) are measured by packing probe patterns, which needs scratch memory
// of the type's true extent: beyond this, they get no layout.
constexpr MPI_Count kMaxProbedExtent = MPI_Count{64} << 20;

struct Extent {
  int64_t size = 0;
  int64_t extent = 0;
};

Extent extent_of(MPI_Datatype type) {
  int size = 0;
  MPI_Count lb = 0, extent = 0;
  PMPI_Type_size(type, &size);
  PMPI_Type_get_extent_x(type, &lb, &extent);
  return {size, static_cast<int64_t>(extent)};
}

using LayoutPtr = std::shared_ptr<const TypeLayout>;

LayoutPtr decode(MPI_Datatype type, int depth);

// Derived types handed out by PMPI_Type_get_contents are new references.
void release_child(MPI_Datatype t) {
  int ni = 0, na = 0, nd = 0, combiner = 0;
  PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner);
  if (combiner != MPI_COMBINER_NAMED) PMPI_Type_free(&t);
}

std::shared_ptr<TypeLayout> node(TypeLayout::Kind kind, const Extent& e) {
  auto n = std::make_shared<TypeLayout>();
  n->kind = kind;
  n->size = e.size;
  n->extent = e.extent;
  return n;
}

// Measures where each packed byte of one item comes from: pass k packs a
// scratch item whose bytes hold byte k of their own offset.
LayoutPtr probe(MPI_Datatype type, const Extent& e) {
  MPI_Count tlb = 0, textent = 0;
  PMPI_Type_get_true_extent_x(type, &tlb, &textent);
  if (textent <= 0 || textent > kMaxProbedExtent || e.size <= 0) return nullptr;
  std::vector<unsigned char> scratch(static_cast<size_t>(textent));
  std::vector<unsigned char> packed(static_cast<size_t>(e.size));
  std::vector<uint32_t> from(static_cast<size_t>(e.size), 0);
  // The buffer pointer whose item starts (true lb) at scratch[0].
  const auto origin = reinterpret_cast<uintptr_t>(scratch.data()) - static_cast<uintptr_t>(tlb);
  int passes = 1;  // bytes of an offset below the true extent (at most 4: see kMaxProbedExtent)
  while (passes < 4 && (textent - 1) >> (8 * passes) != 0) ++passes;
  for (int k = 0; k < passes; ++k) {
    for (size_t o = 0; o < scratch.size(); ++o) scratch[o] = static_cast<unsigned char>(o >> (8 * k));
    int pos = 0;
    if (PMPI_Pack(reinterpret_cast<void*>(origin), 1, type, packed.data(), static_cast<int>(packed.size()), &pos,
                  MPI_COMM_SELF) != MPI_SUCCESS || pos != e.size)
      return nullptr;
    for (size_t i = 0; i < packed.size(); ++i) from[i] |= static_cast<uint32_t>(packed[i]) << (8 * k);
  }
  auto n = node(TypeLayout::runs, e);
  for (size_t i = 0; i < from.size(); ++i) {
    const int64_t off = static_cast<int64_t>(tlb) + from[i];
    if (!n->run_list.empty() && n->run_list.back().offset + n->run_list.back().length == off)
      ++n->run_list.back().length;
    else
      n->run_list.push_back({off, 1});
  }
  return n;
}

// count blocks of `blocklen` children, block i at i * stride bytes.
LayoutPtr strided(const Extent& e, int64_t count, int64_t blocklen, int64_t stride, LayoutPtr child) {
  auto n = node(TypeLayout::strided, e);
  n->count = count;
  n->blocklen = blocklen;
  n->stride = stride;
  n->children.push_back(std::move(child));
  return n;
}

// MPI_Type_create_subarray as nested strided nodes, fastest dimension
// innermost, under one block at the offset of the starts.
LayoutPtr subarray(const Extent& e, const std::vector<int>& ints, LayoutPtr old) {
  const int ndims = ints[0];
  const int* sizes = &ints[1];
  const int* subsizes = &ints[1 + ndims];
  const int* starts = &ints[1 + 2 * ndims];
  const bool c_order = ints[1 + 3 * ndims] == MPI_ORDER_C;
  std::vector<int> dims(static_cast<size_t>(ndims));  // fastest first
  for (int i = 0; i < ndims; ++i) dims[static_cast<size_t>(i)] = c_order ? ndims - 1 - i : i;
  int64_t step = old->extent;  // bytes between neighbours along dims[k]
  int64_t start = 0;
  LayoutPtr inner = old;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int d = dims[k];
    start += starts[d] * step;
    const Extent ek{inner->size * subsizes[d], step * sizes[d]};
    inner = k == 0 ? strided(ek, 1, subsizes[d], 0, inner) : strided(ek, subsizes[d], 1, step, inner);
    step *= sizes[d];
  }
  auto n = node(TypeLayout::indexed, e);
  n->blocks.push_back({start, 1, 0});
  n->children.push_back(std::move(inner));
  return n;
}

LayoutPtr decode_derived(MPI_Datatype type, const Extent& e, int combiner, int ni, int na, int nd, int depth) {
  std::vector<int> ints(static_cast<size_t>(ni));
  std::vector<MPI_Aint> addrs(static_cast<size_t>(na));
  std::vector<MPI_Datatype> types(static_cast<size_t>(nd));
  if (PMPI_Type_get_contents(type, ni, na, nd, ints.data(), addrs.data(), types.data()) != MPI_SUCCESS)
    return nullptr;
  std::vector<LayoutPtr> kids;
  bool ok = true;
  for (MPI_Datatype t : types) {
    if (ok) kids.push_back(decode(t, depth + 1));
    if (ok && !kids.back()) ok = false;
    release_child(t);
  }
  if (!ok) return nullptr;
  const int64_t ext0 = kids.empty() ? 0 : kids[0]->extent;
  auto blocks = [&](bool bytes_displ, bool one_len, bool per_block_type) {
    auto n = node(per_block_type ? TypeLayout::structure : TypeLayout::indexed, e);
    const int count = ints[0];
    for (int i = 0; i < count; ++i) {
      const int64_t len = one_len ? ints[1] : ints[static_cast<size_t>(1 + i)];
      int64_t displ;
      if (bytes_displ) displ = addrs[static_cast<size_t>(i)];
      else displ = ints[static_cast<size_t>((one_len ? 2 : 1 + count) + i)] * ext0;
      n->blocks.push_back({displ, len, per_block_type ? i : 0});
    }
    n->children = per_block_type ? kids : std::vector<LayoutPtr>{kids[0]};
    return LayoutPtr(n);
  };
  switch (combiner) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED: {
      auto n = node(TypeLayout::indexed, e);  // the child at offset 0; only lb/extent differ
      n->blocks.push_back({0, 1, 0});
      n->children.push_back(kids[0]);
      return n;
    }
    case MPI_COMBINER_CONTIGUOUS: return strided(e, 1, ints[0], 0, kids[0]);
    case MPI_COMBINER_VECTOR: return strided(e, ints[0], ints[1], ints[2] * ext0, kids[0]);
    case MPI_COMBINER_HVECTOR: return strided(e, ints[0], ints[1], addrs[0], kids[0]);
    case MPI_COMBINER_INDEXED: return blocks(false, false, false);
    case MPI_COMBINER_INDEXED_BLOCK: return blocks(false, true, false);
    case MPI_COMBINER_HINDEXED: return blocks(true, false, false);
    case MPI_COMBINER_HINDEXED_BLOCK: return blocks(true, true, false);
    case MPI_COMBINER_STRUCT: return blocks(true, false, true);
    case MPI_COMBINER_SUBARRAY: return subarray(e, ints, kids[0]);
    default: return probe(type, e);  // darray and anything newer
  }
}

LayoutPtr decode(MPI_Datatype type, int depth) {
  if (depth > kMaxDepth) return nullptr;
  const Extent e = extent_of(type);
  int ni = 0, na = 0, nd = 0, combiner = 0;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return nullptr;
  switch (combiner) {
    case MPI_COMBINER_NAMED:
#ifdef MPI_COMBINER_F90_REAL
    case MPI_COMBINER_F90_REAL:
    case MPI_COMBINER_F90_COMPLEX:
    case MPI_COMBINER_F90_INTEGER:
#endif
    {
      MPI_Count lb = 0, extent = 0, tlb = 0, textent = 0;
      PMPI_Type_get_extent_x(type, &lb, &extent);
      PMPI_Type_get_true_extent_x(type, &tlb, &textent);
      if (lb == 0 && tlb == 0 && extent == e.size && textent == e.size) return node(TypeLayout::bytes, e);
      return probe(type, e);  // MPI_DOUBLE_INT and other pairs with padding
    }
    default: return decode_derived(type, e, combiner, ni, na, nd, depth);
  }
}

int g_layout_keyval = MPI_KEYVAL_INVALID;

int layout_delete_fn(MPI_Datatype, int, void* attr, void*) {
  delete static_cast<LayoutPtr*>(attr);
  return MPI_SUCCESS;
}

// Places the first `left` bytes of `src` into one item of `t` at `base`.
void place(const TypeLayout& t, char* base, const char*& src, uint64_t& left) {
  auto take = [&](char* to, uint64_t len) {
    const uint64_t k = std::min(len, left);
    std::memcpy(to, src, k);
    src += k;
    left -= k;
  };
  switch (t.kind) {
    case TypeLayout::bytes: take(base, static_cast<uint64_t>(t.size)); return;
    case TypeLayout::runs:
      for (const TypeLayout::Run& r : t.run_list) {
        if (left == 0) return;
        take(base + r.offset, static_cast<uint64_t>(r.length));
      }
      return;
    case TypeLayout::strided: {
      const TypeLayout& c = *t.children[0];
      if (c.size <= 0) return;
      for (int64_t i = 0; i < t.count && left != 0; ++i)
        for (int64_t j = 0; j < t.blocklen && left != 0; ++j) place(c, base + i * t.stride + j * c.extent, src, left);
      return;
    }
    case TypeLayout::indexed:
    case TypeLayout::structure:
      for (const TypeLayout::Block& b : t.blocks) {
        const TypeLayout& c = *t.children[static_cast<size_t>(b.child)];
        if (c.size <= 0) continue;
        for (int64_t j = 0; j < b.len && left != 0; ++j) place(c, base + b.displ + j * c.extent, src, left);
        if (left == 0) return;
      }
      return;
  }
}

}  // namespace

std::shared_ptr<const TypeLayout> type_layout(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return nullptr;
  int flag = 0;
  void* cached = nullptr;
  if (g_layout_keyval == MPI_KEYVAL_INVALID)
    PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, layout_delete_fn, &g_layout_keyval, nullptr);
  // Predefined types take no attributes in some MPIs: those are decoded every time (only the padded pair types
  // among them reach here, the rest are contiguous).
  if (PMPI_Type_get_attr(type, g_layout_keyval, &cached, &flag) == MPI_SUCCESS && flag)
    return *static_cast<LayoutPtr*>(cached);
  LayoutPtr l = decode(type, 0);
  if (!l) {
    ACCL_LOG_WARN("accl-pmpi: cannot decode the layout of a receive datatype; a message ending inside one of "
                  "its items will fail with an argument error");
    return nullptr;
  }
  auto* holder = new LayoutPtr(l);
  if (PMPI_Type_set_attr(type, g_layout_keyval, holder) != MPI_SUCCESS) delete holder;
  return l;
}

void place_leading_bytes(const TypeLayout& layout, void* item, const void* src, uint64_t bytes) {
  const char* from = static_cast<const char*>(src);
  uint64_t left = std::min(bytes, static_cast<uint64_t>(std::max<int64_t>(layout.size, 0)));
  place(layout, static_cast<char*>(item), from, left);
}

void unpack_elements(const void* src, uint64_t bytes, void* dst, int count, MPI_Datatype type,
                     const TypeLayout* layout) {
  if (bytes == 0 || count <= 0) return;
  if (layout == nullptr) {  // whole items only (the caller's promise): no MPI call beyond the unpack
    unpack_from(src, bytes, dst, count, type);
    return;
  }
  const int64_t size = layout->size;
  if (size <= 0) return;
  const uint64_t whole = std::min<uint64_t>(static_cast<uint64_t>(count), bytes / static_cast<uint64_t>(size));
  if (whole != 0) unpack_from(src, whole * static_cast<uint64_t>(size), dst, static_cast<int>(whole), type);
  const uint64_t rest = bytes - whole * static_cast<uint64_t>(size);
  if (rest == 0 || whole == static_cast<uint64_t>(count)) return;
  place_leading_bytes(*layout, static_cast<char*>(dst) + static_cast<int64_t>(whole) * layout->extent,
                      static_cast<const char*>(src) + whole * static_cast<uint64_t>(size), rest);
}

}  // namespace accl::pmpi
