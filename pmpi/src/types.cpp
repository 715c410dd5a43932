// SPDX-License-Identifier: Apache-2.0
//
// MPI datatypes and ops -> device types and reduce functions.
//
// Predefined types are mapped by class and size, not by handle, so C and
// Fortran names of the same thing (MPI_INT, MPI_INT32_T, MPI_INTEGER) behave
// alike. Derived types are flattened through PMPI_Type_get_envelope/contents:
// a type whose basic elements all have one class and size and whose layout
// has no gaps (lb == true lb == 0, extent == true extent == size) is
// "n elements of that basic type". The result for a derived type is cached
// in a datatype attribute, which MPI deletes with the type.
#include "types.hpp"

#include "decision_memo.hpp"
#include "progress.hpp"
#include "state.hpp"

#include <atomic>
#include <climits>
#include <type_traits>

namespace accl::pmpi {

namespace {

struct Predef {
  MPI_Datatype type;
  ElemClass cls;
  dataType pair_type = dataType::none;  // cls == pair
};
std::vector<std::pair<MPI_Datatype, TypeInfo>> g_predef;

TypeInfo layout(MPI_Datatype type) {
  TypeInfo t;
  int size = 0;
  MPI_Count lb = 0, extent = 0, tlb = 0, textent = 0;
  if (PMPI_Type_size(type, &size) != MPI_SUCCESS) return t;
  PMPI_Type_get_extent_x(type, &lb, &extent);
  PMPI_Type_get_true_extent_x(type, &tlb, &textent);
  t.size = size;
  t.extent = extent;
  t.contiguous = size > 0 && lb == 0 && tlb == 0 && extent == size && textent == size;
  return t;
}

// Index of the last predefined type found: programs move one or two types
// at a time, and every offloaded call looks its type up at least once.
std::atomic<size_t> g_last_predef{0};

const TypeInfo* find_predef(MPI_Datatype type) {
  const size_t last = g_last_predef.load(std::memory_order_relaxed);
  if (last < g_predef.size() && g_predef[last].first == type) return &g_predef[last].second;
  for (size_t i = 0; i < g_predef.size(); ++i) {
    if (g_predef[i].first != type) continue;
    g_last_predef.store(i, std::memory_order_relaxed);
    return &g_predef[i].second;
  }
  return nullptr;
}

// Class and element size of the basic elements of `type`; false when they
// are mixed or unknown.
bool flatten(MPI_Datatype type, ElemClass* cls, int* esize, int depth) {
  if (depth > 16) return false;
  if (const TypeInfo* p = find_predef(type)) {
    // MPI reduces pairs only as the predefined types themselves.
    if (p->cls == ElemClass::none || p->cls == ElemClass::pair) return false;
    *cls = p->cls;
    *esize = p->elem_size;
    return true;
  }
  int ni = 0, na = 0, nd = 0, combiner = 0;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return false;
  if (combiner == MPI_COMBINER_NAMED) return false;  // a named type missing from the table
  if (nd < 1) return false;
  std::vector<int> ints(static_cast<size_t>(ni));
  std::vector<MPI_Aint> addrs(static_cast<size_t>(na));
  std::vector<MPI_Datatype> types(static_cast<size_t>(nd));
  if (PMPI_Type_get_contents(type, ni, na, nd, ints.data(), addrs.data(), types.data()) != MPI_SUCCESS)
    return false;
  bool ok = true;
  bool first = true;
  for (MPI_Datatype child : types) {
    ElemClass c = ElemClass::none;
    int e = 0;
    if (ok) {
      if (!flatten(child, &c, &e, depth + 1)) {
        ok = false;
      } else if (first) {
        *cls = c;
        *esize = e;
        first = false;
      } else if (c != *cls || e != *esize) {
        ok = false;
      }
    }
    // get_contents hands out new references to derived children.
    int cni = 0, cna = 0, cnd = 0, ccomb = 0;
    PMPI_Type_get_envelope(child, &cni, &cna, &cnd, &ccomb);
    if (ccomb != MPI_COMBINER_NAMED) PMPI_Type_free(&child);
  }
  return ok && !first;
}

int type_delete_fn(MPI_Datatype, int, void* attr, void*) {
  forget_decisions();  // the handle may come back for another type
  delete static_cast<TypeInfo*>(attr);
  return MPI_SUCCESS;
}

}  // namespace

void types_init() {
  g_predef.clear();
  const Predef table[] = {
      // most used first: the table is scanned linearly
      {MPI_FLOAT, ElemClass::flt},
      {MPI_DOUBLE, ElemClass::flt},
      {MPI_INT, ElemClass::sint},
      {MPI_LONG, ElemClass::sint},
      {MPI_BYTE, ElemClass::other},
      // C char: OSU's reduction benchmarks reduce MPI_CHAR, which Open MPI
      // treats as the platform's char.
      {MPI_CHAR, std::is_signed_v<char> ? ElemClass::sint : ElemClass::uint},
      {MPI_UNSIGNED, ElemClass::uint},
      {MPI_UNSIGNED_LONG, ElemClass::uint},
      {MPI_LONG_LONG_INT, ElemClass::sint},
      {MPI_LONG_LONG, ElemClass::sint},
      {MPI_UNSIGNED_LONG_LONG, ElemClass::uint},
      {MPI_SHORT, ElemClass::sint},
      {MPI_UNSIGNED_SHORT, ElemClass::uint},
      {MPI_SIGNED_CHAR, ElemClass::sint},
      {MPI_UNSIGNED_CHAR, ElemClass::uint},
      {MPI_INT8_T, ElemClass::sint},
      {MPI_INT16_T, ElemClass::sint},
      {MPI_INT32_T, ElemClass::sint},
      {MPI_INT64_T, ElemClass::sint},
      {MPI_UINT8_T, ElemClass::uint},
      {MPI_UINT16_T, ElemClass::uint},
      {MPI_UINT32_T, ElemClass::uint},
      {MPI_UINT64_T, ElemClass::uint},
      {MPI_AINT, ElemClass::sint},
      {MPI_OFFSET, ElemClass::sint},
      {MPI_COUNT, ElemClass::sint},
      {MPI_LONG_DOUBLE, ElemClass::flt},
      {MPI_C_FLOAT_COMPLEX, ElemClass::cplx},
      {MPI_C_DOUBLE_COMPLEX, ElemClass::cplx},
      {MPI_C_LONG_DOUBLE_COMPLEX, ElemClass::cplx},
      {MPI_C_BOOL, ElemClass::other},
      {MPI_WCHAR, ElemClass::other},
      {MPI_PACKED, ElemClass::other},
      // Fortran
      {MPI_INTEGER, ElemClass::sint},
      {MPI_REAL, ElemClass::flt},
      {MPI_DOUBLE_PRECISION, ElemClass::flt},
      {MPI_COMPLEX, ElemClass::cplx},
      {MPI_DOUBLE_COMPLEX, ElemClass::cplx},
      {MPI_LOGICAL, ElemClass::other},
      {MPI_CHARACTER, ElemClass::other},
#ifdef MPI_INTEGER1
      {MPI_INTEGER1, ElemClass::sint},
#endif
#ifdef MPI_INTEGER2
      {MPI_INTEGER2, ElemClass::sint},
#endif
#ifdef MPI_INTEGER4
      {MPI_INTEGER4, ElemClass::sint},
#endif
#ifdef MPI_INTEGER8
      {MPI_INTEGER8, ElemClass::sint},
#endif
#ifdef MPI_REAL4
      {MPI_REAL4, ElemClass::flt},
#endif
#ifdef MPI_REAL8
      {MPI_REAL8, ElemClass::flt},
#endif
#ifdef MPI_COMPLEX8
      {MPI_COMPLEX8, ElemClass::cplx},
#endif
#ifdef MPI_COMPLEX16
      {MPI_COMPLEX16, ElemClass::cplx},
#endif
      // pair types: MINLOC/MAXLOC on the device's packed pairs (checked
      // below against the type's size: value and index must be these)
      {MPI_2INT, ElemClass::pair, dataType::int32_int},
      {MPI_FLOAT_INT, ElemClass::pair, dataType::float32_int},
      {MPI_DOUBLE_INT, ElemClass::pair, dataType::float64_int},
      {MPI_LONG_INT, ElemClass::pair, sizeof(long) == 8 ? dataType::int64_int : dataType::none},
      {MPI_SHORT_INT, ElemClass::pair, dataType::int16_int},
      {MPI_LONG_DOUBLE_INT, ElemClass::none},
      {MPI_2REAL, ElemClass::pair, dataType::float32_float32},
      {MPI_2DOUBLE_PRECISION, ElemClass::pair, dataType::float64_float64},
      {MPI_2INTEGER, ElemClass::pair, dataType::int32_int},
  };
  for (const Predef& p : table) {
    if (p.type == MPI_DATATYPE_NULL) continue;
    TypeInfo t = layout(p.type);
    if (t.size <= 0) continue;  // a Fortran type this build of Open MPI lacks
    t.cls = p.cls;
    t.elem_size = static_cast<uint8_t>(t.size);
    if (p.cls == ElemClass::pair) {
      // A Fortran pair of another kind size (REAL*8 as REAL) is not ours.
      t.pair_type = abi::data_type_bytes(p.pair_type) == t.size ? p.pair_type : dataType::none;
      if (t.pair_type == dataType::none) t.cls = ElemClass::none;
    }
    g_predef.emplace_back(p.type, t);
  }
  State& st = state();
  if (st.type_keyval == MPI_KEYVAL_INVALID)
    PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_delete_fn, &st.type_keyval, nullptr);
}

TypeInfo type_info(MPI_Datatype type) {
  if (const TypeInfo* p = find_predef(type)) return *p;
  if (type == MPI_DATATYPE_NULL) return {};
  State& st = state();
  void* cached = nullptr;
  int flag = 0;
  if (st.type_keyval != MPI_KEYVAL_INVALID &&
      PMPI_Type_get_attr(type, st.type_keyval, &cached, &flag) == MPI_SUCCESS && flag)
    return *static_cast<TypeInfo*>(cached);
  TypeInfo t = layout(type);
  ElemClass cls = ElemClass::none;
  int esize = 0;
  if (flatten(type, &cls, &esize, 0)) {
    t.cls = cls;
    t.elem_size = static_cast<uint8_t>(esize);
  }
  if (st.type_keyval != MPI_KEYVAL_INVALID) {
    auto* copy = new TypeInfo(t);
    if (PMPI_Type_set_attr(type, st.type_keyval, copy) != MPI_SUCCESS) delete copy;
  }
  return t;
}

bool track_type(MPI_Datatype type) {
  if (find_predef(type) != nullptr) return true;
  State& st = state();
  if (type == MPI_DATATYPE_NULL || st.type_keyval == MPI_KEYVAL_INVALID) return false;
  type_info(type);  // sets the attribute unless it is there
  void* cached = nullptr;
  int flag = 0;
  return PMPI_Type_get_attr(type, st.type_keyval, &cached, &flag) == MPI_SUCCESS && flag;
}

namespace {
// Type references dropped on the progress thread, freed by the next
// application thread's progress round (mu held either way).
std::vector<MPI_Datatype> g_release_later;
}  // namespace

MPI_Datatype type_hold(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL || find_predef(type) != nullptr) return MPI_DATATYPE_NULL;
  MPI_Datatype dup = MPI_DATATYPE_NULL;
  if (PMPI_Type_dup(type, &dup) != MPI_SUCCESS) return MPI_DATATYPE_NULL;
  return dup;
}

void type_release(MPI_Datatype held) {
  if (held == MPI_DATATYPE_NULL) return;
  if (on_progress_thread()) {
    g_release_later.push_back(held);
    return;
  }
  PMPI_Type_free(&held);
}

void type_release_deferred() {
  if (ACCL_LIKELY(g_release_later.empty())) return;
  for (MPI_Datatype t : g_release_later) PMPI_Type_free(&t);
  g_release_later.clear();
}

Movement movement(uint64_t bytes) {
  Movement m;
  // Data movement is type-blind: any payload travels as 32-bit words. The
  // default arithmetic configurations have no int8 entry, so byte counts
  // that are not a multiple of 4 cannot be described to the device.
  if (bytes % 4 == 0 && bytes / 4 <= UINT_MAX) {
    m.dtype = dataType::int32;
    m.elems = bytes / 4;
  } else if (bytes % 8 == 0 && bytes / 8 <= UINT_MAX) {
    m.dtype = dataType::int64;
    m.elems = bytes / 8;
  }
  return m;
}

namespace {

// The device's reduce function for a predefined op; false for the others
// (user-defined, MPI_REPLACE, MPI_NO_OP).
bool device_function(MPI_Op op, reduceFunction* f) {
  static const std::pair<MPI_Op, reduceFunction> kOps[] = {
      {MPI_SUM, reduceFunction::SUM},       {MPI_MAX, reduceFunction::MAX},       {MPI_MIN, reduceFunction::MIN},
      {MPI_PROD, reduceFunction::PROD},     {MPI_BAND, reduceFunction::BAND},     {MPI_BOR, reduceFunction::BOR},
      {MPI_BXOR, reduceFunction::BXOR},     {MPI_LAND, reduceFunction::LAND},     {MPI_LOR, reduceFunction::LOR},
      {MPI_LXOR, reduceFunction::LXOR},     {MPI_MINLOC, reduceFunction::MINLOC}, {MPI_MAXLOC, reduceFunction::MAXLOC},
  };
  for (const auto& [mpi, device] : kOps) {
    if (op != mpi) continue;
    *f = device;
    return true;
  }
  return false;
}

// Device type of integers of `bytes`; unsigned ones only where the op
// orders them (sums, products, bitwise and logical ops are the same bits
// either way, and the signed types are on every device).
dataType integer_type(int bytes, bool is_unsigned) {
  switch (bytes) {
    case 1: return is_unsigned ? dataType::uint8 : dataType::int8;
    case 2: return is_unsigned ? dataType::uint16 : dataType::int16;
    case 4: return is_unsigned ? dataType::uint32 : dataType::int32;
    case 8: return is_unsigned ? dataType::uint64 : dataType::int64;
    default: return dataType::none;
  }
}

// The device type for `info` under `func`, or the reason there is none.
Reason device_type(const TypeInfo& info, reduceFunction func, dataType* dtype) {
  const bool loc = func == reduceFunction::MINLOC || func == reduceFunction::MAXLOC;
  const bool integer_only = func >= reduceFunction::BAND && func <= reduceFunction::LXOR;
  const bool ordered = func == reduceFunction::MAX || func == reduceFunction::MIN;
  if (info.cls == ElemClass::pair) {
    *dtype = info.pair_type;
    return loc ? Reason::Offloaded : Reason::TypeOp;  // MPI defines only MINLOC/MAXLOC on pairs
  }
  if (info.cls == ElemClass::none || info.cls == ElemClass::other || info.size <= 0) return Reason::Datatype;
  if (loc) return Reason::TypeOp;
  if (!info.contiguous) return Reason::NonContiguous;
  switch (info.cls) {
    case ElemClass::sint:
    case ElemClass::uint:
      *dtype = integer_type(info.elem_size, info.cls == ElemClass::uint && ordered);
      break;
    case ElemClass::flt:
      if (integer_only) return Reason::TypeOp;
      if (info.elem_size == 4) *dtype = dataType::float32;
      else if (info.elem_size == 8) *dtype = dataType::float64;
      break;
    case ElemClass::cplx:
      // A complex sum is two independent real sums; nothing else is.
      if (func != reduceFunction::SUM) return Reason::TypeOp;
      if (info.elem_size == 8) *dtype = dataType::float32;
      else if (info.elem_size == 16) *dtype = dataType::float64;
      break;
    default:
      break;
  }
  return *dtype == dataType::none ? Reason::Datatype : Reason::Offloaded;
}

}  // namespace

ReductionType reduction_type(const TypeInfo& info, MPI_Op op) {
  State& st = state();
  ReductionType r;
  if (!device_function(op, &r.func)) {
    r.reason = Reason::Op;
    return r;
  }
  const auto f = static_cast<uint32_t>(r.func);
  if ((st.device_ops >> f & 1u) == 0) {
    r.reason = Reason::OpDevice;
    return r;
  }
  r.reason = device_type(info, r.func, &r.dtype);
  if (r.reason != Reason::Offloaded) return r;
  if ((st.device_type_ops[static_cast<uint32_t>(r.dtype)] >> f & 1u) == 0) {
    r.reason = Reason::TypeDevice;
    return r;
  }
  r.packed = info.cls == ElemClass::pair && !info.contiguous;
  r.elems_per_item = static_cast<uint64_t>(info.size) / abi::data_type_bytes(r.dtype);
  return r;
}

}  // namespace accl::pmpi
