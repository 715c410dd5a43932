// SPDX-License-Identifier: Apache-2.0
//
// Algorithm selection as data. A tuning table is an ordered list of rules;
// a rule names a collective, a window of communicator sizes and a window of
// message sizes, and the algorithm to use there. select_algorithm() takes the
// first rule of the call's collective whose windows hold the call and whose
// algorithm can run it (the algorithm's own constraints, such as a power-of-
// two P or room in the spare buffers, stay with the algorithms in
// select.cpp). The table is kept apart from the algorithms, as UCC keeps its
// score maps apart, so that a tuning file can replace the defaults
// (tuning_table.cpp) without touching code.
//
// Freestanding: the rules are constexpr data, no allocation.
#pragma once

#include <stdint.h>

namespace accl::fw::impl {

// Where a rule's limit comes from: a constant of the table, or a value the
// call brings (protocol settings, tuning registers of exchange memory).
enum class LimitSource : uint8_t {
  kConstant,            // Limit::value
  kSpareBytes,          // bytes of one spare buffer (the max rendezvous size)
  kBcastFlatMaxRanks,   // register 0x1FCC
  kReduceFlatMaxRanks,  // register 0x1FD0
  kReduceFlatMaxBytes,  // register 0x1FD4
};

struct Limit {
  LimitSource source;
  uint64_t value;  // kConstant only
};
constexpr Limit constant(uint64_t value) { return Limit{LimitSource::kConstant, value}; }
constexpr Limit from(LimitSource source) { return Limit{source, 0}; }
inline constexpr Limit kUnlimited = constant(UINT64_MAX);

// What a rule's size window measures.
enum class SizeMeasure : uint8_t {
  kMessageBytes,     // count x element size, uncompressed: one rank's message
  kChunkBytes,       // ceil(count / P) x element size: one of P chunks
  kElementsPerRank,  // count / P, rounded down
};

// The protocol the measured size falls in, by the eager threshold.
enum class Protocol : uint8_t {
  kAny,
  kEager,       // measured size <= max eager size
  kRendezvous,  // measured size > max eager size
};

// Windows are inclusive: min <= value <= max.
struct TuningRule {
  uint32_t scenario;  // abi::Scenario
  uint32_t algorithm;
  uint32_t min_ranks = 0;
  Limit max_ranks = kUnlimited;
  SizeMeasure measure = SizeMeasure::kMessageBytes;
  Protocol protocol = Protocol::kAny;
  uint64_t min_size = 0;
  Limit max_size = kUnlimited;

  constexpr TuningRule ranks(uint32_t min, Limit max) const {
    TuningRule r = *this;
    r.min_ranks = min;
    r.max_ranks = max;
    return r;
  }
  constexpr TuningRule sizes(SizeMeasure m, uint64_t min, Limit max) const {
    TuningRule r = *this;
    r.measure = m;
    r.min_size = min;
    r.max_size = max;
    return r;
  }
  constexpr TuningRule only(Protocol p) const {
    TuningRule r = *this;
    r.protocol = p;
    return r;
  }
};

// A rule that holds for every size of the collective until narrowed.
constexpr TuningRule use(uint32_t scenario, uint32_t algorithm) { return TuningRule{scenario, algorithm}; }

struct TuningTable {
  const TuningRule* rules;
  uint32_t count;
};

// The measured defaults (tuning_table.cpp).
TuningTable default_tuning_table();

}  // namespace accl::fw::impl
