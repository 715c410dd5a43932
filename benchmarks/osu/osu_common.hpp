// SPDX-License-Identifier: Apache-2.0
//
// Shared harness of the OSU-style MPI micro-benchmarks in this directory.
// Written from scratch for this project; only the command-line options and the
// output columns follow the OSU micro-benchmarks so tools that parse OSU
// output (and users' habits) work unchanged.
//
// Plain MPI only: no ACCL header is included, so every program runs natively
// and under LD_PRELOAD=libaccl_pmpi.so alike.
//
// Options (same letters as OSU):
//   -m [MIN:]MAX   message sizes in bytes (K/M/G suffixes accepted)
//   -i ITER        timed iterations per size (small and large messages)
//   -x WARMUP      untimed warm-up iterations per size
//   -c             validate every result; non-zero exit status on a mismatch
//   -f             full statistics (min/max over ranks, iterations)
//   -W WINDOW      window size of bw/bibw (default 64)
//   -T TYPE        mpi_char, mpi_int or mpi_float
//   -h, -v         help, version
#pragma once

// The C API only (no MPI C++ bindings, no libmpi_cxx).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <getopt.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace bosu {

inline constexpr const char* kVersion = "accl-mpi benchmarks 0.1";
inline constexpr size_t kLargeMessage = 8192;  // OSU's small/large iteration split

enum class Kind { latency, bandwidth, collective, barrier };

enum class Type { mpi_char, mpi_int, mpi_float };

inline const char* type_name(Type t) {
  switch (t) {
    case Type::mpi_char: return "MPI_CHAR";
    case Type::mpi_int: return "MPI_INT";
    case Type::mpi_float: return "MPI_FLOAT";
  }
  return "?";
}

inline MPI_Datatype mpi_type(Type t) {
  switch (t) {
    case Type::mpi_char: return MPI_CHAR;
    case Type::mpi_int: return MPI_INT;
    case Type::mpi_float: return MPI_FLOAT;
  }
  return MPI_CHAR;
}

inline size_t type_size(Type t) { return t == Type::mpi_char ? 1 : 4; }

struct Options {
  size_t min_size = 0;
  size_t max_size = 0;
  int iterations = 0;
  int iterations_large = 0;
  int warmup = 0;
  int warmup_large = 0;
  bool validate = false;
  bool full = false;
  int window = 64;
  Type type = Type::mpi_char;

  int iters(size_t size) const { return size > kLargeMessage ? iterations_large : iterations; }
  int skip(size_t size) const { return size > kLargeMessage ? warmup_large : warmup; }
};

struct Context {
  int rank = 0;
  int size = 1;
  const char* program = "";
  long errors = 0;  // validation mismatches seen by this rank
};

inline Context& ctx() {
  static Context c;
  return c;
}

// Prints only on rank 0.
template <typename... Args>
void say(const char* fmt, Args... args) {
  if (ctx().rank == 0) std::printf(fmt, args...);
}
inline void say(const char* text) {
  if (ctx().rank == 0) std::fputs(text, stdout);
}

inline bool parse_size(const char* text, size_t& out) {
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text) return false;
  unsigned long long mult = 1;
  if (*end == 'k' || *end == 'K') mult = 1ull << 10, ++end;
  else if (*end == 'm' || *end == 'M') mult = 1ull << 20, ++end;
  else if (*end == 'g' || *end == 'G') mult = 1ull << 30, ++end;
  if (*end != '\0') return false;
  out = static_cast<size_t>(v * mult);
  return true;
}

inline bool parse_int(const char* text, int& out, int min_value) {
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min_value || v > 1000000000L) return false;
  out = static_cast<int>(v);
  return true;
}

inline void usage(Kind kind, const Options& d) {
  say("Usage: %s [options]\n", ctx().program);
  say("  -m [MIN:]MAX  message sizes in bytes, powers of two from MIN (default %zu:%zu; K/M/G suffixes)\n",
      d.min_size, d.max_size);
  say("  -i ITER       timed iterations per size (default %d, %d above %zu bytes)\n", d.iterations,
      d.iterations_large, kLargeMessage);
  say("  -x WARMUP     warm-up iterations per size (default %d, %d above %zu bytes)\n", d.warmup,
      d.warmup_large, kLargeMessage);
  say("  -c            validate every result; exit status 1 on any mismatch\n");
  say("  -f            full statistics: min and max over ranks, iterations\n");
  if (kind == Kind::bandwidth) say("  -W WINDOW     messages in flight per iteration (default %d)\n", d.window);
  say("  -T TYPE       mpi_char, mpi_int or mpi_float (default %s)\n", type_name(d.type));
  say("  -h            this help\n  -v            version\n");
}

// Parses the command line. Returns -1 to continue, else an exit status.
inline int parse(int argc, char** argv, Kind kind, Options& o) {
  Options defaults = o;
  bool iters_set = false, warmup_set = false;
  auto bad_value = [](int option) {
    say("%s: bad -%c '%s'\n", ctx().program, option, optarg);
    return 2;
  };
  opterr = 0;
  int c;
  while ((c = getopt(argc, argv, "+m:i:x:cfW:T:hv")) != -1) {
    switch (c) {
      case 'm': {
        std::string arg(optarg);
        auto colon = arg.find(':');
        size_t lo = o.min_size, hi = 0;
        bool ok = true;
        if (colon == std::string::npos) {
          ok = parse_size(arg.c_str(), hi);
        } else {
          if (colon > 0) ok = parse_size(arg.substr(0, colon).c_str(), lo);
          if (ok) ok = parse_size(arg.substr(colon + 1).c_str(), hi);
        }
        if (!ok || hi < lo) {
          say("%s: bad -m '%s' (want [MIN:]MAX)\n", ctx().program, optarg);
          return 2;
        }
        o.min_size = lo;
        o.max_size = hi;
        break;
      }
      case 'i':
        if (!parse_int(optarg, o.iterations, 1)) return bad_value(c);
        iters_set = true;
        break;
      case 'x':
        if (!parse_int(optarg, o.warmup, 0)) return bad_value(c);
        warmup_set = true;
        break;
      case 'c': o.validate = true; break;
      case 'f': o.full = true; break;
      case 'W':
        if (!parse_int(optarg, o.window, 1)) return bad_value(c);
        break;
      case 'T': {
        std::string t(optarg);
        for (auto& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (t == "mpi_char" || t == "char") o.type = Type::mpi_char;
        else if (t == "mpi_int" || t == "int") o.type = Type::mpi_int;
        else if (t == "mpi_float" || t == "float") o.type = Type::mpi_float;
        else {
          say("%s: bad -T '%s' (mpi_char, mpi_int, mpi_float)\n", ctx().program, optarg);
          return 2;
        }
        break;
      }
      case 'h': usage(kind, defaults); return 0;
      case 'v': say("# %s\n", kVersion); return 0;
      default:
        say("%s: unknown option or missing argument '-%c'\n", ctx().program, optopt);
        usage(kind, defaults);
        return 2;
    }
  }
  if (optind < argc) {
    say("%s: unexpected argument '%s'\n", ctx().program, argv[optind]);
    return 2;
  }
  if (iters_set) o.iterations_large = o.iterations;
  if (warmup_set) o.warmup_large = o.warmup;
  return -1;
}

// Message sizes: MIN, then powers of two above it, up to MAX. Sizes that are
// not a whole number of elements (or fewer than `min_elems`) are skipped.
inline std::vector<size_t> sizes(const Options& o, size_t elem, size_t min_elems) {
  std::vector<size_t> out;
  size_t s = o.min_size;
  while (s <= o.max_size) {
    if (s % elem == 0 && s / elem >= min_elems) out.push_back(s);
    size_t next = 1;
    while (next <= s) next <<= 1;
    s = next;
  }
  return out;
}

// Page-aligned, zeroed and touched, freed at exit.
class Bytes {
 public:
  explicit Bytes(size_t n) : n_(n) {
    size_t alloc = std::max<size_t>(4096, (n + 4095) / 4096 * 4096);
    p_ = static_cast<unsigned char*>(std::aligned_alloc(4096, alloc));
    if (p_ == nullptr) {
      std::fprintf(stderr, "%s: out of memory (%zu bytes)\n", ctx().program, n);
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    std::memset(p_, 0, alloc);
  }
  ~Bytes() { std::free(p_); }
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  unsigned char* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  unsigned char* p_ = nullptr;
  size_t n_ = 0;
};

// --- data patterns for validation ---
// Element `i` of a block identified by (a, b) in iteration `iter`. Small
// integers so float sums over many ranks stay exact.
inline int pattern(int a, int b, size_t i, int iter) {
  return static_cast<int>((static_cast<size_t>(a) * 31 + static_cast<size_t>(b) * 7 + i * 3 +
                           static_cast<size_t>(iter) * 11) % 97) + 1;
}

inline void store(Type t, void* base, size_t i, int v) {
  switch (t) {
    case Type::mpi_char: static_cast<char*>(base)[i] = static_cast<char>(v); break;
    case Type::mpi_int: static_cast<int32_t*>(base)[i] = v; break;
    case Type::mpi_float: static_cast<float*>(base)[i] = static_cast<float>(v); break;
  }
}

inline bool equals(Type t, const void* base, size_t i, long v) {
  switch (t) {
    case Type::mpi_char: return static_cast<const char*>(base)[i] == static_cast<char>(v);
    case Type::mpi_int: return static_cast<const int32_t*>(base)[i] == static_cast<int32_t>(v);
    case Type::mpi_float: return static_cast<const float*>(base)[i] == static_cast<float>(v);
  }
  return false;
}

// pattern() depends on i only through 3 i mod 97, and 3 is coprime to 97, so
// the data repeat every 97 elements. fill() and check() build one block of
// whole periods and copy / compare it block by block at memory speed. With a
// division per element they took milliseconds per megabyte and rank, longer
// than the collectives they validate (4 ranks on 2 cores, 1 MiB allreduce
// with -c: 45 % of all CPU time), and made the ranks enter the timed call
// far apart.
inline constexpr size_t kPatternPeriod = 97;
inline constexpr size_t kPatternBlock = 16 * kPatternPeriod;  // elements per copy / compare

// block[j] = pattern(a, b, j, iter) * scale for j < n, without a division
// per element (small messages fill only what they use).
template <typename T>
void pattern_block(T* block, size_t n, int a, int b, int iter, long scale) {
  size_t k = static_cast<size_t>(pattern(a, b, 0, iter) - 1);  // (3 j + offset) mod 97 at j = 0
  for (size_t j = 0; j < n; ++j) {
    block[j] = static_cast<T>(static_cast<long>(k + 1) * scale);
    k += 3;
    if (k >= kPatternPeriod) k -= kPatternPeriod;
  }
}

template <typename T>
void fill_blocks(void* base, size_t count, int a, int b, int iter, int scale) {
  T block[kPatternBlock];
  pattern_block(block, std::min(count, kPatternBlock), a, b, iter, scale);
  auto* out = static_cast<unsigned char*>(base);
  for (size_t i = 0; i < count; i += kPatternBlock)
    std::memcpy(out + i * sizeof(T), block, std::min(kPatternBlock, count - i) * sizeof(T));
}

inline void fill(Type t, void* base, size_t count, int a, int b, int iter, int scale = 1) {
  switch (t) {
    case Type::mpi_char: fill_blocks<char>(base, count, a, b, iter, scale); break;
    case Type::mpi_int: fill_blocks<int32_t>(base, count, a, b, iter, scale); break;
    case Type::mpi_float: fill_blocks<float>(base, count, a, b, iter, scale); break;
  }
}

// Compares elements [first, last) one by one: adds the mismatches to `bad`
// and reports the first one of the check.
inline void check_elements(Type t, const void* base, size_t first, size_t last, int a, int b, int iter, long scale,
                           const char* what, long& bad) {
  for (size_t i = first; i < last; ++i) {
    long want = static_cast<long>(pattern(a, b, i, iter)) * scale;
    if (!equals(t, base, i, want)) {
      if (bad == 0 && ctx().errors < 5) {
        double got = 0;
        if (t == Type::mpi_char) got = static_cast<const char*>(base)[i];
        else if (t == Type::mpi_int) got = static_cast<const int32_t*>(base)[i];
        else got = static_cast<const float*>(base)[i];
        std::fprintf(stderr, "[rank %d] %s: %s mismatch at element %zu (iteration %d): got %g, want %ld\n",
                     ctx().rank, ctx().program, what, i, iter, got, t == Type::mpi_char ? static_cast<long>(static_cast<char>(want)) : want);
      }
      ++bad;
    }
  }
}

// Identical bytes mean equal values (the pattern holds no NaN); a block that
// differs is compared element by element with the type's own equality.
template <typename T>
long check_blocks(Type t, const void* base, size_t count, int a, int b, int iter, long scale, const char* what) {
  T block[kPatternBlock];
  pattern_block(block, std::min(count, kPatternBlock), a, b, iter, scale);
  const auto* in = static_cast<const unsigned char*>(base);
  long bad = 0;
  for (size_t i = 0; i < count; i += kPatternBlock) {
    const size_t n = std::min(kPatternBlock, count - i);
    if (std::memcmp(in + i * sizeof(T), block, n * sizeof(T)) != 0)
      check_elements(t, base, i, i + n, a, b, iter, scale, what, bad);
  }
  return bad;
}

// Counts elements that differ from pattern(a, b, ., iter) * scale; reports the first.
inline long check(Type t, const void* base, size_t count, int a, int b, int iter, long scale, const char* what) {
  long bad = 0;
  switch (t) {
    case Type::mpi_char: bad = check_blocks<char>(t, base, count, a, b, iter, scale, what); break;
    case Type::mpi_int: bad = check_blocks<int32_t>(t, base, count, a, b, iter, scale, what); break;
    case Type::mpi_float: bad = check_blocks<float>(t, base, count, a, b, iter, scale, what); break;
  }
  ctx().errors += bad;
  return bad;
}

inline void clear(void* base, size_t bytes) { std::memset(base, 0, bytes); }

// --- output ---
inline void header(const char* title, const Options& o, bool has_type_line, const char* op) {
  say("# OSU MPI %s Test (%s)\n", title, kVersion);
  if (has_type_line) {
    if (op != nullptr) say("# Datatype: %s, Op: %s.\n", type_name(o.type), op);
    else say("# Datatype: %s.\n", type_name(o.type));
  }
  say("# Ranks: %d%s\n", ctx().size, o.validate ? ", validation on (timings exclude data set-up and checks)" : "");
}

// Column titles of a latency table; `sized`: rows start with the message size.
inline void latency_columns(const Options& o, bool sized) {
  say(sized ? "# Size       Avg Latency(us)" : "# Avg Latency(us)");
  if (o.full) say("   Min Latency(us)   Max Latency(us)  Iterations");
  if (o.validate) say("  Validation");
  say("\n");
}

// Ends a table row (rank 0 only): the validation column with -c, the newline.
inline void end_row(const Options& o, bool failed) {
  if (o.validate) std::printf("%12s", failed ? "Fail" : "Pass");
  std::printf("\n");
  std::fflush(stdout);
}

// Per-rank average latency `local_us` -> avg / min / max over ranks, printed by rank 0.
inline void latency_row(long size, double local_us, int iters, const Options& o, long size_errors) {
  double in[3] = {local_us, -local_us, static_cast<double>(size_errors)};
  double mx[3] = {0, 0, 0};
  double sum = 0;
  MPI_Allreduce(in, mx, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Reduce(&local_us, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (ctx().rank != 0) return;
  if (size >= 0) std::printf("%-10ld", size);
  std::printf("%18.2f", sum / ctx().size);
  if (o.full) std::printf("%18.2f%18.2f%12d", -mx[1], mx[0], iters);
  end_row(o, mx[2] > 0);
}

// Whether any rank counted a mismatch since its count stood at `before`
// (collective over MPI_COMM_WORLD).
inline bool any_rank_failed(long before) {
  double errs = static_cast<double>(ctx().errors - before), all_errs = 0;
  MPI_Allreduce(&errs, &all_errs, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return all_errs > 0;
}

// Peak resident memory of this process in KiB (VmHWM), -1 when unknown.
inline long peak_rss_kib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, "VmHWM:", 6) == 0) kib = std::strtol(line + 6, nullptr, 10);
  std::fclose(f);
  return kib;
}

// Collective epilogue: peak RSS line, the validation verdict, MPI_Finalize.
// Returns the exit status.
inline int finish(const Options& o) {
  double rss = static_cast<double>(peak_rss_kib());
  double in[2] = {rss, static_cast<double>(ctx().errors)};
  double mx[2] = {0, 0};
  double sum = 0;
  MPI_Allreduce(in, mx, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Reduce(&rss, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  say("# Peak RSS per rank (KiB): avg %.0f max %.0f\n", sum / ctx().size, mx[0]);
  int status = 0;
  if (o.validate) {
    // Sum the error counts too (max only says "some rank failed").
    double total = 0;
    double mine = static_cast<double>(ctx().errors);
    MPI_Allreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (total > 0) {
      say("# Validation: FAILED (%.0f mismatching elements)\n", total);
      status = 1;
    } else {
      say("# Validation: Passed\n");
    }
  }
  std::fflush(stdout);
  MPI_Finalize();
  return status;
}

// Common start: MPI_Init, rank/size, option parsing. Returns -1 to continue,
// else the exit status (MPI already finalized).
inline int start(int& argc, char**& argv, Kind kind, Options& o, int min_ranks) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &ctx().rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ctx().size);
  const char* slash = std::strrchr(argv[0], '/');
  ctx().program = slash ? slash + 1 : argv[0];
  int status = parse(argc, argv, kind, o);
  if (status < 0 && ctx().size < min_ranks) {
    say("%s: needs at least %d ranks (have %d)\n", ctx().program, min_ranks, ctx().size);
    status = 1;
  }
  if (status >= 0) {
    std::fflush(stdout);
    MPI_Finalize();
  }
  return status;
}

// Defaults OSU uses for each kind of test.
inline Options defaults(Kind kind, Type type) {
  Options o;
  o.type = type;
  switch (kind) {
    case Kind::latency:
      o.min_size = 0, o.max_size = 4u << 20;
      o.iterations = 10000, o.iterations_large = 1000, o.warmup = 100, o.warmup_large = 10;
      break;
    case Kind::bandwidth:
      o.min_size = 1, o.max_size = 4u << 20;
      o.iterations = 100, o.iterations_large = 20, o.warmup = 10, o.warmup_large = 2;
      break;
    case Kind::collective:
      o.min_size = 1, o.max_size = 1u << 20;
      o.iterations = 1000, o.iterations_large = 100, o.warmup = 200, o.warmup_large = 10;
      break;
    case Kind::barrier:
      o.min_size = 0, o.max_size = 0;
      o.iterations = 1000, o.iterations_large = 1000, o.warmup = 200, o.warmup_large = 200;
      break;
  }
  return o;
}

}  // namespace bosu

namespace bosu {

// One collective benchmark: the call, and how to set up and (for -c) check data.
struct Collective {
  size_t count = 0;  // element count of the current size argument (set by run_sized)
  // Per size, optional: sets up what depends on `count` beyond the data.
  std::function<void()> prepare;
  std::function<void()> call;
  // Data for iteration `iter`: with -c before every iteration, else once per
  // size (iteration 0).
  std::function<void(int iter)> fill;
  std::function<void(int iter)> check;  // -c: verify iteration `iter` (adds to ctx().errors)
};

// The timing loop every collective shares: per iteration, time one call, then
// a barrier so iterations do not overlap (OSU's method). Data set-up and checks
// (-c) happen outside the timed region.
inline double time_collective(const Collective& c, const Options& o, size_t size) {
  const int skip = o.skip(size), iters = o.iters(size);
  double total = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < skip + iters; ++i) {
    if (o.validate && c.fill) c.fill(i);
    double t0 = MPI_Wtime();
    c.call();
    double t1 = MPI_Wtime();
    if (o.validate && c.check) c.check(i);
    if (i >= skip) total += t1 - t0;
    MPI_Barrier(MPI_COMM_WORLD);
  }
  return total * 1e6 / iters;
}

// Runs a sized collective over all sizes of `o` and prints the OSU table.
// `min_elems`: smallest element count that makes sense (reduce_scatter: ranks).
inline void run_sized(Collective& c, const Options& o, size_t min_elems) {
  latency_columns(o, true);
  for (size_t size : sizes(o, type_size(o.type), min_elems)) {
    c.count = size / type_size(o.type);
    if (c.prepare) c.prepare();
    if (c.fill) c.fill(0);
    long before = ctx().errors;
    double us = time_collective(c, o, size);
    latency_row(static_cast<long>(size), us, o.iters(size), o, ctx().errors - before);
  }
}

// Reductions accept only types whose sums stay exact.
inline bool require_arith_type(const Options& o) {
  if (o.type == Type::mpi_char) {
    say("%s: -T mpi_char is not supported for reductions (use mpi_int or mpi_float)\n", ctx().program);
    return false;
  }
  return true;
}

// Start of a collective benchmark: OSU's defaults, MPI_Init, options, header.
// Reductions (`op` names the operation) default to MPI_FLOAT from 4 bytes and
// refuse mpi_char. Returns -1 to continue, else the exit status (MPI already
// finalized).
inline int start_collective(int& argc, char**& argv, Options& o, const char* title, const char* op) {
  o = defaults(Kind::collective, op != nullptr ? Type::mpi_float : Type::mpi_char);
  if (op != nullptr) o.min_size = 4;
  if (int st = start(argc, argv, Kind::collective, o, 1); st >= 0) return st;
  if (op != nullptr && !require_arith_type(o)) return MPI_Finalize(), 2;
  header(title, o, true, op);
  return -1;
}

}  // namespace bosu
