// SPDX-License-Identifier: Apache-2.0
//
// The soak engine (see soak.hpp). One call description is drawn per sequence
// position; the ranks involved build their buffers, issue the call (sync, or
// async in a batch of up to three independent calls) and compare every
// output element, plus a few sentinel elements past the end of every buffer
// that no call may touch.
//
// Data is chosen so that the reference is exact wherever the operation is
// exact: integer-valued floats small enough that every partial sum or
// product is representable (so the reduction order does not matter), 64-bit
// integers above 2^32 (catches truncation), 32-bit floats with 24 significant
// bits. Only fp16 wire compression is compared with a tolerance.
#include "soak.hpp"

#include <accl/abi.hpp>
#include <accl/buffer.hpp>
#include <accl/error.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <type_traits>

namespace soak {
namespace {

using accl::ACCL;
using accl::BaseBuffer;
using accl::dataType;
using accl::float16_t;
using accl::reduceFunction;
using accl::RequestPtr;
using Clock = std::chrono::steady_clock;

constexpr size_t kPad = 3;             // sentinel elements after every buffer
constexpr uint64_t kCheckpointEvery = 16;
constexpr size_t kMaxMessages = 12;    // problems kept per rank

// ---------------------------------------------------------------------------
// Deterministic randomness: the same on every rank and in every process.
// ---------------------------------------------------------------------------
uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(splitmix(seed ^ 0x5A5A5A5A5A5A5A5Aull)) {}
  uint64_t next() { return s_ = splitmix(s_); }
  // Uniform-enough in [0, n) for the small n used here.
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  uint64_t range(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); }
  bool chance(unsigned percent) { return below(100) < percent; }

 private:
  uint64_t s_;
};

// ---------------------------------------------------------------------------
// Call descriptions
// ---------------------------------------------------------------------------
enum class Kind {
  sendrecv, ring, bcast, scatter, gather, allgather, reduce, allreduce, reduce_scatter, alltoall, barrier, copy,
  combine,
};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::sendrecv: return "sendrecv";
    case Kind::ring: return "ring";
    case Kind::bcast: return "bcast";
    case Kind::scatter: return "scatter";
    case Kind::gather: return "gather";
    case Kind::allgather: return "allgather";
    case Kind::reduce: return "reduce";
    case Kind::allreduce: return "allreduce";
    case Kind::reduce_scatter: return "reduce_scatter";
    case Kind::alltoall: return "alltoall";
    case Kind::barrier: return "barrier";
    case Kind::copy: return "copy";
    case Kind::combine: return "combine";
  }
  return "?";
}

bool is_reduction(Kind k) {
  return k == Kind::reduce || k == Kind::allreduce || k == Kind::reduce_scatter || k == Kind::combine;
}
bool is_local(Kind k) { return k == Kind::copy || k == Kind::combine; }
bool supports_compression(Kind k) { return !is_local(k) && k != Kind::barrier; }
// Calls whose count is per rank, with P chunks in one of the buffers.
bool is_chunked(Kind k) {
  return k == Kind::scatter || k == Kind::gather || k == Kind::allgather || k == Kind::reduce_scatter ||
         k == Kind::alltoall;
}

const char* type_name(dataType t) {
  switch (t) {
    case dataType::float16: return "f16";
    case dataType::float32: return "f32";
    case dataType::float64: return "f64";
    case dataType::int32: return "i32";
    case dataType::int64: return "i64";
    default: return "?";
  }
}

const char* op_name(reduceFunction f) {
  switch (f) {
    case reduceFunction::SUM: return "SUM";
    case reduceFunction::MAX: return "MAX";
    case reduceFunction::MIN: return "MIN";
    case reduceFunction::PROD: return "PROD";
    default: break;
  }
  return "?";
}

enum class Place : uint8_t { device = 0, host = 1, mixed = 2 };  // mixed: inputs device, outputs host-only

struct CommDef {
  std::string name;
  std::vector<int> members;  // comm rank i = global rank members[i]
  uint32_t context_id = 0;
};

struct CallDesc {
  uint64_t index = 0;
  Kind kind = Kind::barrier;
  unsigned comm = 0;           // index into the communicator table
  dataType type = dataType::float32;
  dataType copy_dst = dataType::none;  // copy only: destination type (conversion when different)
  reduceFunction op = reduceFunction::SUM;
  size_t count = 0;
  unsigned root = 0;           // comm rank (rooted calls; sendrecv: destination)
  unsigned src = 0;            // comm rank (sendrecv)
  uint32_t tag = 0;
  bool any_src = false, any_tag = false;
  bool compressed = false;     // float32 buffers, float16 on the wire
  bool in_place = false;       // allreduce / reduce / alltoall with one buffer
  bool async = false;
  std::vector<Place> place;    // per global rank
};

std::string describe(const CallDesc& c, const std::vector<CommDef>& comms) {
  std::ostringstream os;
  os << "#" << c.index << " " << kind_name(c.kind) << " " << type_name(c.type);
  if (c.kind == Kind::copy && c.copy_dst != c.type) os << "->" << type_name(c.copy_dst);
  if (is_reduction(c.kind)) os << " " << op_name(c.op);
  os << " count=" << c.count << " comm=" << comms[c.comm].name;
  if (c.kind == Kind::bcast || c.kind == Kind::scatter || c.kind == Kind::gather || c.kind == Kind::reduce)
    os << " root=" << c.root;
  if (c.kind == Kind::sendrecv) {
    os << " " << c.src << "->" << c.root << " tag=" << c.tag;
    if (c.any_src) os << " recv(RANK_ANY)";
    if (c.any_tag) os << " recv(TAG_ANY)";
  }
  if (c.compressed) os << " fp16-wire";
  if (c.in_place) os << " in-place";
  os << (c.async ? " async" : " sync") << " place=";
  for (Place p : c.place) os << "dhm"[static_cast<int>(p)];
  return os.str();
}

std::vector<CommDef> make_comms(unsigned P) {
  std::vector<CommDef> v;
  auto add = [&](const std::string& name, std::vector<int> m) {
    if (m.empty()) return;
    v.push_back(CommDef{name, std::move(m), 0});
  };
  std::vector<int> all, evens, odds, reversed, first, rotated;
  for (unsigned r = 0; r < P; ++r) {
    all.push_back(static_cast<int>(r));
    (r % 2 == 0 ? evens : odds).push_back(static_cast<int>(r));
    reversed.insert(reversed.begin(), static_cast<int>(r));
    if (r + 1 < P) first.push_back(static_cast<int>(r));
    rotated.push_back(static_cast<int>((r + 1) % P));
  }
  add("global", all);
  if (P >= 2) {
    add("evens", evens);
    add("odds", odds);
    add("reversed", reversed);
    add("rotated", rotated);
  }
  if (P >= 3) add("first" + std::to_string(P - 1), first);
  // Context ids: explicit and equal on every member (the driver default would
  // also match, but explicit ids keep this independent of creation order).
  for (size_t i = 1; i < v.size(); ++i) v[i].context_id = static_cast<uint32_t>(100 + i);
  return v;
}

// Element counts around every protocol boundary of the default InitOptions
// (16 x 1 KiB RX buffers, eager <= 1 KiB, 32 KiB rendezvous scratch), in
// elements of the wire type.
size_t draw_count(Rng& g, uint32_t wire_bytes, Kind kind, unsigned comm_size) {
  const size_t eager = 1024 / wire_bytes, spare = 32768 / wire_bytes;
  // Keep the largest buffer of a call around 1 MiB so thousands of calls fit
  // the CI budget.
  const size_t cap = std::max<size_t>(4, ((size_t{1} << 20) / wire_bytes) / (is_chunked(kind) ? comm_size : 1));
  const uint64_t r = g.below(100);
  size_t n;
  if (r < 4) n = 0;
  else if (r < 12) n = 1;
  else if (r < 26) n = 2 * g.range(1, 31) + 1;        // small odd
  else if (r < 40) n = g.range(2, 1500);
  else if (r < 58) n = eager - 1 + g.below(3);         // eager limit, RX buffer size
  else if (r < 72) n = spare - 1 + g.below(3);         // rendezvous scratch size (staging pieces)
  else if (r < 80) n = 2 * spare + 1 + 2 * g.below(8);  // several staged pieces, odd
  else if (r < 92) n = g.range(1500, 20000);
  else n = g.range(20000, cap);
  return std::min(n, cap);
}

CallDesc draw_call(Rng& g, uint64_t index, unsigned P, const std::vector<CommDef>& comms) {
  static constexpr std::array<std::pair<Kind, unsigned>, 13> kWeights = {{
      {Kind::sendrecv, 14}, {Kind::ring, 6}, {Kind::bcast, 9}, {Kind::scatter, 6}, {Kind::gather, 6},
      {Kind::allgather, 7}, {Kind::reduce, 9}, {Kind::allreduce, 14}, {Kind::reduce_scatter, 7},
      {Kind::alltoall, 7}, {Kind::barrier, 4}, {Kind::copy, 5}, {Kind::combine, 6},
  }};
  unsigned total = 0;
  for (auto& [k, w] : kWeights) total += w;
  uint64_t pick = g.below(total);
  CallDesc c;
  c.index = index;
  for (auto& [k, w] : kWeights) {
    if (pick < w) {
      c.kind = k;
      break;
    }
    pick -= w;
  }
  // Half the calls on the global communicator, the rest spread over splits.
  c.comm = (is_local(c.kind) || comms.size() == 1 || g.chance(50))
               ? 0
               : static_cast<unsigned>(1 + g.below(comms.size() - 1));
  const unsigned cs = static_cast<unsigned>(comms[c.comm].members.size());
  static constexpr std::array<dataType, 5> kTypes = {dataType::float16, dataType::float32, dataType::float64,
                                                     dataType::int32, dataType::int64};
  c.type = kTypes[g.below(kTypes.size())];
  c.op = static_cast<reduceFunction>(g.below(4));
  c.compressed = supports_compression(c.kind) && c.type == dataType::float32 && g.chance(35);
  c.copy_dst = c.type;
  if (c.kind == Kind::copy && g.chance(40)) {
    // Conversions the arithmetic configurations provide: f32 <-> f16.
    if (c.type == dataType::float32) c.copy_dst = dataType::float16;
    else if (c.type == dataType::float16) c.copy_dst = dataType::float32;
  }
  c.root = static_cast<unsigned>(g.below(cs));
  c.src = static_cast<unsigned>(g.below(cs));  // may equal root: send to self
  // Unique per call, never TAG_ANY: wildcard receives (one wildcard at a
  // time) can then only match their own message even when ranks drift apart.
  c.tag = static_cast<uint32_t>(index % 1000000 + 1);
  c.any_src = g.chance(12);
  c.any_tag = !c.any_src && g.chance(12);
  c.in_place = (c.kind == Kind::allreduce || c.kind == Kind::reduce || c.kind == Kind::alltoall) && g.chance(25);
  const uint32_t wire_bytes = c.compressed ? 2 : accl::abi::data_type_bytes(c.type);
  c.count = c.kind == Kind::barrier ? 0 : draw_count(g, wire_bytes, c.kind, cs);
  c.place.resize(P);
  for (unsigned r = 0; r < P; ++r) {
    const uint64_t p = g.below(10);
    c.place[r] = p < 6 ? Place::device : p < 8 ? Place::host : Place::mixed;
  }
  return c;
}

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------
enum class Pat {
  move,         // data movement and MIN/MAX: exact in the type, widest range that stays exact
  sum,          // sums of P values exact in the type
  prod,         // products of P values exact in the type
  comp_move,    // float32 not representable in fp16 (wire compression of moved data)
  comp_reduce,  // float32 in [1, 2) (compressed reductions, compared with a tolerance)
};

Pat pattern_for(const CallDesc& c) {
  if (c.compressed) return is_reduction(c.kind) ? Pat::comp_reduce : Pat::comp_move;
  if (!is_reduction(c.kind)) return Pat::move;
  switch (c.op) {
    case reduceFunction::SUM: return Pat::sum;
    case reduceFunction::PROD: return Pat::prod;
    default: return Pat::move;
  }
}

template <typename T>
T sentinel() {
  if constexpr (std::is_same_v<T, float16_t>) return accl::float_to_half(65504.0f);  // data stays below 2048
  else if constexpr (std::is_floating_point_v<T>) return static_cast<T>(1e30);
  else return std::numeric_limits<T>::min() + 7;  // integer data never reaches the extremes
}

template <typename T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, float16_t>) return accl::half_to_float(v);
  else return static_cast<double>(v);
}

template <typename T>
bool same(T a, T b) {
  if constexpr (std::is_same_v<T, float16_t>) return accl::half_to_float(a) == accl::half_to_float(b);
  else return a == b;
}

double fp16_roundtrip(double d) { return accl::half_to_float(accl::float_to_half(static_cast<float>(d))); }

// The value of element i of the input with `salt` of global rank `grank` in call `index`.
template <typename T>
T value(Pat p, uint64_t seed, uint64_t index, unsigned grank, size_t i, uint32_t salt = 0) {
  const uint64_t h = splitmix(seed ^ splitmix(index * 0x1000193ull + salt) ^ splitmix((uint64_t{grank} << 40) + i));
  const auto centered = [&](uint64_t range) { return static_cast<int64_t>(h % (2 * range + 1)) - static_cast<int64_t>(range); };
  switch (p) {
    case Pat::comp_move:  // only drawn for float32
      if constexpr (std::is_same_v<T, float>) return static_cast<float>(centered(1 << 20)) / 1024.0f + 0.000123f;
      break;
    case Pat::comp_reduce:  // only drawn for float32
      if constexpr (std::is_same_v<T, float>) return 1.0f + static_cast<float>(h % (1u << 20)) / static_cast<float>(1u << 20);
      break;
    case Pat::prod: {
      static constexpr int kFactors[5] = {1, 2, -1, -2, 3};  // |product| <= 3^P: exact for P <= 6 everywhere
      const int f = kFactors[h % 5];
      if constexpr (std::is_same_v<T, float16_t>) return accl::float_to_half(static_cast<float>(f));
      else return static_cast<T>(f);
    }
    case Pat::sum:
      if constexpr (std::is_same_v<T, float16_t>) return accl::float_to_half(static_cast<float>(centered(200)));
      else if constexpr (std::is_same_v<T, float>) return static_cast<float>(centered(1 << 20));
      else if constexpr (std::is_same_v<T, double>) return static_cast<double>(centered(int64_t{1} << 40));
      else if constexpr (std::is_same_v<T, int32_t>) return static_cast<int32_t>(centered(100000000));
      else return static_cast<int64_t>(centered(int64_t{1} << 58));
    case Pat::move:
      break;
  }
  if constexpr (std::is_same_v<T, float16_t>) return accl::float_to_half(static_cast<float>(centered(1000)) / 2.0f);
  else if constexpr (std::is_same_v<T, float>) return static_cast<float>(centered(1 << 23)) / 256.0f;
  else if constexpr (std::is_same_v<T, double>) return static_cast<double>(centered(int64_t{1} << 51)) / 1024.0;
  else if constexpr (std::is_same_v<T, int32_t>) return static_cast<int32_t>(centered(int64_t{1} << 30));
  else return static_cast<int64_t>(centered(int64_t{1} << 61));
}

template <typename T>
T reduce2(reduceFunction f, T a, T b) {
  if constexpr (std::is_same_v<T, float16_t>) {
    return accl::float_to_half(
        static_cast<float>(reduce2<double>(f, accl::half_to_float(a), accl::half_to_float(b))));
  } else {
    switch (f) {
      case reduceFunction::SUM: return static_cast<T>(a + b);
      case reduceFunction::MAX: return a > b ? a : b;
      case reduceFunction::MIN: return a < b ? a : b;
      case reduceFunction::PROD: return static_cast<T>(a * b);
      default: break;  // the soak draws SUM, MAX, MIN and PROD only
    }
    return a;
  }
}

// Relative tolerance of fp16 wire compression with fp16 arithmetic: each
// rounding adds at most 2^-11 relative error (data is positive).
double comp_tolerance(unsigned P) { return (2.0 * P + 3) * std::ldexp(1.0, -11); }

// ---------------------------------------------------------------------------
// One rank's execution
// ---------------------------------------------------------------------------
class Runner {
 public:
  Runner(ACCL& a, unsigned rank, unsigned size, const Options& o)
      : a_(a), rank_(rank), P_(size), opt_(o), comms_(make_comms(size)) {
    report_.rank = rank;
  }

  RankReport run() {
    const auto start = Clock::now();
    create_communicators();
    Rng g(opt_.seed);
    bool failed = false;
    uint64_t index = 0;
    while (index < opt_.calls) {
      // A batch of 1-3 calls: alone (sync or async + wait), or issued
      // together and waited for together.
      const uint64_t r = g.below(100);
      const uint64_t batch = r < 75 ? 1 : r < 92 ? 2 : 3;
      std::vector<CallDesc> calls;
      for (uint64_t b = 0; b < batch && index < opt_.calls; ++b, ++index) {
        calls.push_back(draw_call(g, index, P_, comms_));
        calls.back().async = batch > 1 || g.chance(30);
      }
      report_.calls_drawn = index;
      if (opt_.progress != nullptr) opt_.progress->store(index, std::memory_order_relaxed);
      if (!failed && index > opt_.skip_until) failed = !run_batch(calls);
      // Checkpoint at every multiple of kCheckpointEvery passed by this batch.
      const uint64_t before = index - calls.size();
      if (index / kCheckpointEvery != before / kCheckpointEvery || index >= opt_.calls) {
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        int stop = 0;
        if (!checkpoint(elapsed >= opt_.seconds, failed, stop)) {
          failed = true;
          break;
        }
        if (stop) break;
      }
    }
    report_.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    free_communicators();
    return report_;
  }

 private:
  struct Op {
    CallDesc desc;
    std::vector<std::unique_ptr<BaseBuffer>> keep;  // buffers the requests use
    std::vector<std::function<RequestPtr(bool async)>> issue;  // in issue order on this rank
    std::function<void(const Op&)> verify;  // gets the Op: Ops move after prepare()
    std::vector<RequestPtr> requests;
  };

  void problem(const std::string& what) {
    if (report_.messages.size() < kMaxMessages) report_.messages.push_back("rank " + std::to_string(rank_) + ": " + what);
  }

  void create_communicators() {
    ids_.assign(comms_.size(), std::nullopt);
    ids_[0] = accl::GLOBAL_COMM;
    for (size_t k = 1; k < comms_.size(); ++k) {
      const auto& m = comms_[k].members;
      if (std::find(m.begin(), m.end(), static_cast<int>(rank_)) == m.end()) continue;
      ids_[k] = a_.split_communicator(m, comms_[k].context_id);
    }
  }

  void free_communicators() {
    for (size_t k = 1; k < ids_.size(); ++k) {
      if (!ids_[k]) continue;
      try {
        a_.free_communicator(*ids_[k]);
      } catch (const std::exception& e) {
        ++report_.errors;
        problem(std::string("free_communicator: ") + e.what());
      }
    }
  }

  // All ranks: MAX over {time is up, failed}. false if the allreduce itself failed.
  bool checkpoint(bool time_up, bool failed, int& stop) {
    try {
      auto s = a_.create_buffer<int32_t>(2), d = a_.create_buffer<int32_t>(2);
      (*s)[0] = time_up ? 1 : 0;
      (*s)[1] = failed ? 1 : 0;
      a_.allreduce(*s, *d, 2, reduceFunction::MAX);
      if ((*d)[1] != 0 && !failed) problem("stopping: another rank failed (see its messages)");
      stop = ((*d)[0] | (*d)[1]) != 0;
      return true;
    } catch (const std::exception& e) {
      ++report_.errors;
      problem(std::string("checkpoint allreduce after call ") + std::to_string(report_.calls_drawn) + ": " + e.what());
      return false;
    }
  }

  // false when an error occurred (this rank then skips to the next checkpoint).
  bool run_batch(const std::vector<CallDesc>& calls) {
    std::vector<Op> ops;
    bool ok = true;
    for (const CallDesc& c : calls) {
      Op op;
      op.desc = c;
      try {
        if (!prepare(op)) continue;  // not involved
      } catch (const std::exception& e) {
        ++report_.errors;
        problem(describe(c, comms_) + ": preparing: " + e.what());
        ok = false;
        break;
      }
      ++report_.calls_involved;
      ++report_.per_kind[kind_name(c.kind)];
      if (opt_.verbose && rank_ == 0) std::printf("%s\n", describe(c, comms_).c_str());
      ops.push_back(std::move(op));
    }
    // Issue everything, then wait for everything (also after an error, so no
    // request outlives the buffers it writes).
    for (Op& op : ops) {
      for (auto& issue : op.issue) {
        if (!ok) break;
        try {
          op.requests.push_back(issue(op.desc.async));
        } catch (const std::exception& e) {
          ++report_.errors;
          problem(describe(op.desc, comms_) + ": " + e.what());
          ok = false;
        }
      }
    }
    for (Op& op : ops) {
      for (auto& q : op.requests) {
        try {
          if (q) q->wait();
        } catch (const std::exception& e) {
          ++report_.errors;
          problem(describe(op.desc, comms_) + ": " + e.what());
          ok = false;
        }
      }
    }
    if (!ok) return false;
    for (Op& op : ops) {
      const bool inject = opt_.inject_mismatch >= 0 && rank_ == 0 && !injected_ &&
                          op.desc.index >= static_cast<uint64_t>(opt_.inject_mismatch) && corrupt_output(op);
      const uint64_t before = report_.mismatches;
      if (op.verify) op.verify(op);
      // Armed until a corruption is caught: an output this rank does not
      // check (a non-root's reduce result) is tried again on the next call.
      if (inject && report_.mismatches != before) injected_ = true;
      if (report_.mismatches != before && opt_.verbose) std::printf("rank %u: mismatch in %s\n", rank_, describe(op.desc, comms_).c_str());
    }
    return true;
  }

  // Self-test: flips a bit in the top byte (sign/exponent) of element 0 of
  // the last buffer the call created, its output for most kinds.
  bool corrupt_output(Op& op) {
    if (op.desc.count == 0 || op.keep.empty() || op.desc.kind == Kind::barrier) return false;
    BaseBuffer& out = *op.keep.back();
    const size_t elem = out.size() / out.length();
    static_cast<unsigned char*>(out.byte_array())[elem - 1] ^= 0x40;
    return true;
  }

  // --- buffers --------------------------------------------------------------
  template <typename T>
  accl::Buffer<T>& buffer(Op& op, size_t n, bool output, dataType type = accl::dtype_of<T>()) {
    const Place p = op.desc.place[rank_];
    const bool host = p == Place::host || (p == Place::mixed && output);
    std::unique_ptr<accl::Buffer<T>> b = host ? a_.create_buffer_host<T>(n + kPad, type) : a_.create_buffer<T>(n + kPad, type);
    T* data = b->buffer();
    for (size_t i = 0; i < n + kPad; ++i) data[i] = sentinel<T>();
    accl::Buffer<T>& ref = *b;
    op.keep.push_back(std::move(b));
    return ref;
  }

  template <typename T, typename Gen>
  static void fill(accl::Buffer<T>& b, size_t start, size_t n, Gen&& gen) {
    for (size_t i = 0; i < n; ++i) b[start + i] = gen(i);
  }

  // Compares [start, start + n) with expected(i) (exact), then the sentinels.
  template <typename T, typename Exp>
  void check(const Op& op, const accl::Buffer<T>& b, size_t start, size_t n, Exp&& expected, const char* what) {
    size_t bad = 0;
    std::ostringstream os;
    for (size_t i = 0; i < n; ++i) {
      const T e = expected(i);
      if (!same(b[start + i], e)) {
        if (bad < 3) os << " [" << start + i << "] got " << as_double(b[start + i]) << " want " << as_double(e);
        ++bad;
      }
    }
    report_.checked_elements += n;
    if (bad) {
      report_.mismatches += bad;
      problem(describe(op.desc, comms_) + ": " + what + ": " + std::to_string(bad) + " of " + std::to_string(n) +
              " elements wrong:" + os.str());
    }
  }

  // As check(), with a predicate on the value (tolerances, "either of").
  template <typename T, typename Ok>
  void check_pred(const Op& op, const accl::Buffer<T>& b, size_t start, size_t n, Ok&& ok, const char* what) {
    size_t bad = 0;
    std::ostringstream os;
    os.precision(9);
    for (size_t i = 0; i < n; ++i) {
      const double got = as_double(b[start + i]);
      double want = 0;
      if (!ok(i, got, want)) {
        if (bad < 3) os << " [" << start + i << "] got " << got << " want " << want;
        ++bad;
      }
    }
    report_.checked_elements += n;
    if (bad) {
      report_.mismatches += bad;
      problem(describe(op.desc, comms_) + ": " + what + ": " + std::to_string(bad) + " of " + std::to_string(n) +
              " elements out of tolerance:" + os.str());
    }
  }

  template <typename T>
  void check_pad(const Op& op, const accl::Buffer<T>& b, size_t used, const char* what) {
    size_t bad = 0;
    for (size_t i = used; i < b.length(); ++i) bad += same(b[i], sentinel<T>()) ? 0 : 1;
    if (bad) {
      report_.mismatches += bad;
      problem(describe(op.desc, comms_) + ": " + what + ": " + std::to_string(bad) +
              " element(s) written past the end of the call's range");
    }
  }

  // --- calls ----------------------------------------------------------------
  // Fills op.issue / op.verify for this rank; false when not involved.
  bool prepare(Op& op) {
    const CallDesc& c = op.desc;
    if (c.kind == Kind::copy) return prepare_copy(op);
    const auto& members = comms_[c.comm].members;
    const auto it = std::find(members.begin(), members.end(), static_cast<int>(rank_));
    if (it == members.end()) return false;
    const unsigned me = static_cast<unsigned>(it - members.begin());
    const dataType t = c.type;
    switch (t) {
      case dataType::float16: return prepare_typed<float16_t>(op, me);
      case dataType::float32: return prepare_typed<float>(op, me);
      case dataType::float64: return prepare_typed<double>(op, me);
      case dataType::int32: return prepare_typed<int32_t>(op, me);
      case dataType::int64: return prepare_typed<int64_t>(op, me);
      default: return false;
    }
  }

  bool prepare_copy(Op& op) {
    const CallDesc& c = op.desc;
    if (c.type == dataType::float32 && c.copy_dst == dataType::float16) return prepare_copy_typed<float, float16_t>(op);
    if (c.type == dataType::float16 && c.copy_dst == dataType::float32) return prepare_copy_typed<float16_t, float>(op);
    switch (c.type) {
      case dataType::float16: return prepare_copy_typed<float16_t, float16_t>(op);
      case dataType::float32: return prepare_copy_typed<float, float>(op);
      case dataType::float64: return prepare_copy_typed<double, double>(op);
      case dataType::int32: return prepare_copy_typed<int32_t, int32_t>(op);
      case dataType::int64: return prepare_copy_typed<int64_t, int64_t>(op);
      default: return false;
    }
  }

  template <typename S, typename D>
  bool prepare_copy_typed(Op& op) {
    const CallDesc& c = op.desc;
    const size_t n = c.count;
    auto& src = buffer<S>(op, n, false);
    auto& dst = buffer<D>(op, n, true);
    auto in = [this, c](size_t i) { return value<S>(Pat::move, opt_.seed, c.index, rank_, i); };
    fill(src, 0, n, in);
    op.issue.push_back([this, &src, &dst, n](bool async) {
      return a_.copy(src, dst, static_cast<unsigned>(n), false, false, async);
    });
    op.verify = [this, &src, &dst, n, in](const Op& v) {
      if constexpr (std::is_same_v<S, D>) {
        check(v, dst, 0, n, in, "copy");
      } else {
        // f16 -> f32 is exact; f32 -> f16 rounds to nearest.
        check_pred(v, dst, 0, n, [&](size_t i, double got, double& want) {
          want = fp16_roundtrip(as_double(in(i)));
          return got == want;
        }, "converting copy");
      }
      check_pad(v, dst, n, "copy destination");
      check_pad(v, src, n, "copy source");
    };
    return true;
  }

  template <typename T>
  bool prepare_typed(Op& op, unsigned me) {
    const CallDesc& c = op.desc;
    const auto& members = comms_[c.comm].members;
    const unsigned cs = static_cast<unsigned>(members.size());
    const accl::communicatorId comm = *ids_[c.comm];
    const size_t n = c.count;
    const unsigned count = static_cast<unsigned>(n);
    const dataType wire = c.compressed ? dataType::float16 : dataType::none;
    const Pat pat = pattern_for(c);
    const uint64_t seed = opt_.seed, index = c.index;
    auto grank = [members](unsigned q) { return static_cast<unsigned>(members[q]); };
    // Input element i of comm rank q (salt picks one of several inputs).
    auto in = [=](unsigned q, size_t i, uint32_t salt = 0) {
      return value<T>(pat, seed, index, grank(q), i, salt);
    };
    // Reduction over all comm ranks of element i of their inputs.
    auto reduced = [=](size_t i) {
      T acc = in(0, i);
      for (unsigned q = 1; q < cs; ++q) acc = reduce2<T>(c.op, acc, in(q, i));
      return acc;
    };
    // Moved data with fp16 on the wire may arrive rounded (through the wire)
    // or exact (a rank's own contribution copied locally).
    auto moved_ok = [c](double got, double exact, double& want) {
      want = exact;
      return got == exact || (c.compressed && got == fp16_roundtrip(exact));
    };
    const double tol = comp_tolerance(cs);
    auto reduced_ok = [=](size_t i, double got, double& want) {
      double acc = as_double(in(0, i));
      for (unsigned q = 1; q < cs; ++q) acc = reduce2<double>(c.op, acc, as_double(in(q, i)));
      want = acc;
      return std::fabs(got - acc) <= tol * std::fabs(acc) + 1e-6;
    };

    switch (c.kind) {
      case Kind::sendrecv: {
        const bool sender = me == c.src, receiver = me == c.root;
        if (!sender && !receiver) return false;
        if (receiver) {
          auto& d = buffer<T>(op, n, true);
          const unsigned src = c.any_src ? accl::RANK_ANY : c.src;
          const unsigned tag = c.any_tag ? accl::TAG_ANY : c.tag;
          // The receive is issued first and async when this rank also sends
          // (to itself), so the send can find it.
          const bool self = sender;
          op.issue.push_back([=, this, &d](bool async) {
            return a_.recv(d, count, src, tag, comm, false, wire, async || self);
          });
          op.verify = [=, this, &d](const Op& v) {
            if (c.compressed)
              check_pred(v, d, 0, n, [&](size_t i, double got, double& want) { return moved_ok(got, as_double(in(c.src, i)), want); }, "recv");
            else
              check(v, d, 0, n, [&](size_t i) { return in(c.src, i); }, "recv");
            check_pad(v, d, n, "recv buffer");
          };
        }
        if (sender) {
          auto& s = buffer<T>(op, n, false);
          fill(s, 0, n, [&](size_t i) { return in(me, i); });
          op.issue.push_back([=, this, &s](bool async) {
            return a_.send(s, count, c.root, c.tag, comm, false, wire, async);
          });
          if (!receiver) op.verify = [=, this, &s](const Op& v) { check_pad(v, s, n, "send buffer"); };
        }
        return true;
      }
      case Kind::ring: {
        const unsigned next = (me + 1) % cs, prev = (me + cs - 1) % cs;
        auto& s = buffer<T>(op, n, false);
        auto& d = buffer<T>(op, n, true);
        fill(s, 0, n, [&](size_t i) { return in(me, i); });
        const uint32_t tag = c.tag;
        op.issue.push_back([=, this, &d](bool) { return a_.recv(d, count, prev, tag, comm, false, wire, true); });
        op.issue.push_back([=, this, &s](bool) { return a_.send(s, count, next, tag, comm, false, wire, true); });
        op.verify = [=, this, &d](const Op& v) {
          check_pred(v, d, 0, n, [&](size_t i, double got, double& want) { return moved_ok(got, as_double(in(prev, i)), want); }, "ring recv");
          check_pad(v, d, n, "ring recv buffer");
        };
        return true;
      }
      case Kind::bcast: {
        auto& b = buffer<T>(op, n, true);
        if (me == c.root) fill(b, 0, n, [&](size_t i) { return in(c.root, i); });
        op.issue.push_back([=, this, &b](bool async) { return a_.bcast(b, count, c.root, comm, false, false, wire, async); });
        op.verify = [=, this, &b](const Op& v) {
          check_pred(v, b, 0, n, [&](size_t i, double got, double& want) {
            // The root's own buffer is its input, untouched.
            return me == c.root ? (want = as_double(in(c.root, i)), got == want) : moved_ok(got, as_double(in(c.root, i)), want);
          }, "bcast");
          check_pad(v, b, n, "bcast buffer");
        };
        return true;
      }
      case Kind::scatter: {
        auto& s = buffer<T>(op, n * cs, false);
        auto& d = buffer<T>(op, n, true);
        if (me == c.root) fill(s, 0, n * cs, [&](size_t i) { return in(c.root, i); });
        op.issue.push_back([=, this, &s, &d](bool async) { return a_.scatter(s, d, count, c.root, comm, false, false, wire, async); });
        op.verify = [=, this, &d, &s](const Op& v) {
          check_pred(v, d, 0, n, [&](size_t i, double got, double& want) { return moved_ok(got, as_double(in(c.root, me * n + i)), want); }, "scatter");
          check_pad(v, d, n, "scatter result");
          check_pad(v, s, n * cs, "scatter source");
        };
        return true;
      }
      case Kind::gather: {
        auto& s = buffer<T>(op, n, false);
        auto& d = buffer<T>(op, n * cs, true);
        fill(s, 0, n, [&](size_t i) { return in(me, i); });
        op.issue.push_back([=, this, &s, &d](bool async) { return a_.gather(s, d, count, c.root, comm, false, false, wire, async); });
        op.verify = [=, this, &d](const Op& v) {
          if (me == c.root) {
            check_pred(v, d, 0, n * cs, [&](size_t j, double got, double& want) { return moved_ok(got, as_double(in(static_cast<unsigned>(j / std::max<size_t>(n, 1)), j % std::max<size_t>(n, 1))), want); }, "gather");
            check_pad(v, d, n * cs, "gather result");
          }
        };
        return true;
      }
      case Kind::allgather: {
        auto& s = buffer<T>(op, n, false);
        auto& d = buffer<T>(op, n * cs, true);
        fill(s, 0, n, [&](size_t i) { return in(me, i); });
        op.issue.push_back([=, this, &s, &d](bool async) { return a_.allgather(s, d, count, comm, false, false, wire, async); });
        op.verify = [=, this, &d](const Op& v) {
          check_pred(v, d, 0, n * cs, [&](size_t j, double got, double& want) { return moved_ok(got, as_double(in(static_cast<unsigned>(j / std::max<size_t>(n, 1)), j % std::max<size_t>(n, 1))), want); }, "allgather");
          check_pad(v, d, n * cs, "allgather result");
        };
        return true;
      }
      case Kind::reduce:
      case Kind::allreduce: {
        const bool all = c.kind == Kind::allreduce;
        auto& s = buffer<T>(op, n, c.in_place);
        fill(s, 0, n, [&](size_t i) { return in(me, i); });
        accl::Buffer<T>& d = c.in_place ? s : buffer<T>(op, n, true);
        const reduceFunction f = c.op;
        op.issue.push_back([=, this, &s, &d](bool async) {
          return all ? a_.allreduce(s, d, count, f, comm, false, false, wire, async)
                     : a_.reduce(s, d, count, c.root, f, comm, false, false, wire, async);
        });
        op.verify = [=, this, &d, &s](const Op& v) {
          if (all || me == c.root) {
            if (c.compressed) check_pred(v, d, 0, n, reduced_ok, all ? "allreduce" : "reduce");
            else check(v, d, 0, n, reduced, all ? "allreduce" : "reduce");
            check_pad(v, d, n, "result");
          } else if (!c.in_place) {
            check(v, s, 0, n, [&](size_t i) { return in(me, i); }, "reduce source (must stay unchanged)");
          }
          check_pad(v, s, n, "source");
        };
        return true;
      }
      case Kind::reduce_scatter: {
        auto& s = buffer<T>(op, n * cs, false);
        auto& d = buffer<T>(op, n, true);
        fill(s, 0, n * cs, [&](size_t i) { return in(me, i); });
        const reduceFunction f = c.op;
        op.issue.push_back([=, this, &s, &d](bool async) { return a_.reduce_scatter(s, d, count, f, comm, false, false, wire, async); });
        op.verify = [=, this, &d](const Op& v) {
          if (c.compressed) check_pred(v, d, 0, n, [&](size_t i, double got, double& want) { return reduced_ok(me * n + i, got, want); }, "reduce_scatter");
          else check(v, d, 0, n, [&](size_t i) { return reduced(me * n + i); }, "reduce_scatter");
          check_pad(v, d, n, "reduce_scatter result");
        };
        return true;
      }
      case Kind::alltoall: {
        auto& s = buffer<T>(op, n * cs, c.in_place);
        fill(s, 0, n * cs, [&](size_t i) { return in(me, i); });
        accl::Buffer<T>& d = c.in_place ? s : buffer<T>(op, n * cs, true);
        op.issue.push_back([=, this, &s, &d](bool async) { return a_.alltoall(s, d, count, comm, false, false, wire, async); });
        op.verify = [=, this, &d](const Op& v) {
          // Chunk q of the result is chunk `me` of rank q's input.
          check_pred(v, d, 0, n * cs, [&](size_t j, double got, double& want) {
            const size_t nn = std::max<size_t>(n, 1);
            return moved_ok(got, as_double(in(static_cast<unsigned>(j / nn), me * n + j % nn)), want);
          }, "alltoall");
          check_pad(v, d, n * cs, "alltoall result");
        };
        return true;
      }
      case Kind::barrier:
        op.issue.push_back([=, this](bool async) { return a_.barrier(comm, async); });
        op.verify = [](const Op&) {};
        return true;
      case Kind::combine: {
        auto& x = buffer<T>(op, n, false);
        auto& y = buffer<T>(op, n, false);
        auto& r = buffer<T>(op, n, true);
        fill(x, 0, n, [&](size_t i) { return in(me, i, 1); });
        fill(y, 0, n, [&](size_t i) { return in(me, i, 2); });
        const reduceFunction f = c.op;
        op.issue.push_back([=, this, &x, &y, &r](bool async) { return a_.combine(count, f, x, y, r, false, false, false, async); });
        op.verify = [=, this, &r](const Op& v) {
          check(v, r, 0, n, [&](size_t i) { return reduce2<T>(f, in(me, i, 1), in(me, i, 2)); }, "combine");
          check_pad(v, r, n, "combine result");
        };
        return true;
      }
      case Kind::copy:
        break;
    }
    return false;
  }

  ACCL& a_;
  const unsigned rank_, P_;
  const Options opt_;
  const std::vector<CommDef> comms_;
  std::vector<std::optional<accl::communicatorId>> ids_;
  RankReport report_;
  bool injected_ = false;
};

}  // namespace

std::string usage(const char* argv0) {
  return std::string("usage: ") + argv0 +
         " [--calls N] [--seconds S] [--seed X] [--ranks P] [--transport inproc|shm|tcp|udp] [--verbose]\n"
         "       [--skip-until K]  (draw but skip the calls before K: bisecting a failure)\n"
         "       [--inject-mismatch K]  (self-test: corrupt an output of call K on rank 0; the run must fail)\n"
         "  Runs N seeded random ACCL calls (stopping early at a checkpoint after S seconds), each result\n"
         "  checked against a host reference. Exit 0 only with zero mismatches and zero errors.\n";
}

std::string parse_options(int argc, char** argv, Options& out) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    const bool flag = arg == "--verbose" || arg == "-v";
    if (flag) {
      out.verbose = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") return "help";
    const auto eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return "missing value for " + arg;
    }
    try {
      size_t used = 0;
      if (arg == "--calls") out.calls = std::stoull(value, &used, 0);
      else if (arg == "--seconds") out.seconds = std::stod(value, &used);
      else if (arg == "--seed") out.seed = std::stoull(value, &used, 0);
      else if (arg == "--ranks") out.ranks = static_cast<unsigned>(std::stoul(value, &used, 0));
      else if (arg == "--transport") out.transport = value, used = value.size();
      else if (arg == "--inject-mismatch") out.inject_mismatch = std::stoll(value, &used, 0);
      else if (arg == "--skip-until") out.skip_until = std::stoull(value, &used, 0);
      else return "unknown option " + arg;
      if (used != value.size()) return "bad value '" + value + "' for " + arg;
    } catch (const std::exception&) {
      return "bad value '" + value + "' for " + arg;
    }
  }
  if (out.ranks == 0 || out.ranks > 64) return "--ranks must be 1..64";
  if (!(out.seconds > 0)) return "--seconds must be positive";
  return {};
}

RankReport run_rank(ACCL& accl, unsigned rank, unsigned size, const Options& options) {
  return Runner(accl, rank, size, options).run();
}

int summarize(const std::vector<RankReport>& reports, const Options& o, const std::string& runner) {
  uint64_t mismatches = 0, errors = 0, checked = 0, involved = 0;
  uint64_t drawn_min = UINT64_MAX, drawn_max = 0;
  double seconds = 0;
  std::map<std::string, uint64_t> kinds;
  for (const auto& r : reports) {
    mismatches += r.mismatches;
    errors += r.errors;
    checked += r.checked_elements;
    involved += r.calls_involved;
    drawn_min = std::min(drawn_min, r.calls_drawn);
    drawn_max = std::max(drawn_max, r.calls_drawn);
    seconds = std::max(seconds, r.seconds);
    for (const auto& [k, v] : r.per_kind) kinds[k] += v;
  }
  std::printf("soak (%s): %zu ranks, seed %llu: %llu calls in %.1f s (rank-calls %llu, elements checked %llu)\n",
              runner.c_str(), reports.size(), static_cast<unsigned long long>(o.seed),
              static_cast<unsigned long long>(drawn_max), seconds, static_cast<unsigned long long>(involved),
              static_cast<unsigned long long>(checked));
  std::printf("  rank-calls by kind:");
  for (const auto& [k, v] : kinds) std::printf(" %s=%llu", k.c_str(), static_cast<unsigned long long>(v));
  std::printf("\n  mismatches: %llu, errors: %llu\n", static_cast<unsigned long long>(mismatches),
              static_cast<unsigned long long>(errors));
  for (const auto& r : reports)
    for (const auto& m : r.messages) std::printf("  %s\n", m.c_str());
  const bool ok = mismatches == 0 && errors == 0 && drawn_min == drawn_max && drawn_max > 0;
  if (drawn_min != drawn_max)
    std::printf("  ranks stopped at different calls (%llu..%llu)\n", static_cast<unsigned long long>(drawn_min),
                static_cast<unsigned long long>(drawn_max));
  if (!ok)
    std::printf("  reproduce: --seed %llu --calls %llu\n", static_cast<unsigned long long>(o.seed),
                static_cast<unsigned long long>(drawn_max));
  std::printf("soak: %s\n", ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  return ok ? 0 : 1;
}

}  // namespace soak
