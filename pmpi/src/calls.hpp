// SPDX-License-Identifier: Apache-2.0
//
// The base of every header of the PMPI interposition layer (libaccl_pmpi):
// MPI and ACCL includes, the export and branch-hint macros, and the lists of
// intercepted calls and fallback reasons (calls.def, reasons.def; names and
// texts in policy.cpp).
#pragma once

// The C API of MPI only: pmpi/meson.build defines both for every file of the
// layer (the OSU benchmarks, plain MPI programs, keep their own guard).
#if !defined(OMPI_SKIP_MPICXX) || !defined(MPICH_SKIP_MPICXX)
#error "libaccl_pmpi is built with OMPI_SKIP_MPICXX and MPICH_SKIP_MPICXX defined (pmpi/meson.build)"
#endif
#include <mpi.h>

#include <accl/accl.hpp>

#include <cstddef>
#include <cstdint>

#define ACCL_PMPI_EXPORT extern "C" __attribute__((visibility("default")))
// On the declaration of a variable that several files of the layer share:
// the compiler then addresses it directly, as a file's own static, instead of
// loading its address from the GOT first (-fvisibility=hidden covers only
// definitions).
#define ACCL_PMPI_LOCAL __attribute__((visibility("hidden")))
#define ACCL_LIKELY(x) __builtin_expect(!!(x), 1)
#define ACCL_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace accl::pmpi {

enum class Group : uint8_t { p2p, coll, icoll };

enum class Call : uint8_t {
#define CALL(e, mpi, setting, group) e,
#include "calls.def"
#undef CALL
};
inline constexpr size_t kNumCalls = 0
#define CALL(e, mpi, setting, group) +1
#include "calls.def"
#undef CALL
    ;

enum class Reason : uint8_t {
#define REASON(e, text, benign) e,
#include "reasons.def"
#undef REASON
};
inline constexpr size_t kNumReasons = 0
#define REASON(e, text, benign) +1
#include "reasons.def"
#undef REASON
    ;

const char* call_name(Call c);     // "MPI_Allreduce"
const char* call_setting(Call c);  // "allreduce"
Group call_group(Call c);
const char* reason_text(Reason r);
bool reason_benign(Reason r);

// Decides the settings part of the policy (policy.cpp): call list,
// ACCL_POLICY with its tuning table, byte thresholds. `ranks` is the
// communicator's size.
Reason policy_call(Call call, uint64_t ranks, uint64_t bytes);
// The same for a call whose bytes no rank knows for all (gatherv, scatterv,
// alltoallv): thresholds cannot apply, and the table must offload it at every
// size for it to be offloaded.
Reason policy_unsized(Call call, uint64_t ranks);
// Whether point-to-point on a communicator of `ranks` members may be
// offloaded by ACCL_POLICY (decided once, when the communicator is made).
bool policy_p2p(uint64_t ranks);
// True when the settings run `call` natively on every communicator at every
// size (excluded, ACCL_POLICY=native, or a table that never offloads it).
bool policy_never_offloads(Call call);
// A digest of every input of those decisions: equal on ranks that decide alike.
uint64_t policy_digest();
// Why a call runs natively when the layer has no device: ACCL_OFFLOAD=off,
// ACCL_POLICY=native (which starts none), or no device.
Reason inactive_reason();

}  // namespace accl::pmpi
