// SPDX-License-Identifier: Apache-2.0
//
// The one logging facility of the project (spdlog underneath). Level from
// ACCL_LOG_LEVEL (off, error, warn, info, debug, trace; default error, so a
// healthy run prints nothing). Every line carries the rank of the thread that
// logs it: threads acting for a CCLO set it with log::ScopedRank.
//
// Use the level-checked macros: arguments are not evaluated when the level
// is disabled.
//
// The format string is checked at compile time (fmt::format_string), but the
// formatting itself happens in log.cpp on type-erased arguments: spdlog's
// templated log() instantiated fmt's formatting code at every call site,
// which made each translation unit with a few log lines ~4 s slower to
// compile (emu/src/memory.cpp: 7.0 -> 2.1 s at -O2). The first argument is always a
// format string: write ACCL_LOG_INFO("{}", text), not ACCL_LOG_INFO(text).
#pragma once

#include <fmt/core.h>

#include <atomic>

namespace accl::log {

// Severities, most verbose first (the order of spdlog's levels).
enum class Level : int { trace = 0, debug, info, warn, error, off };

namespace detail {
// Defined in log.cpp. Inline readers below: every log site checks the level
// and every driver call sets the thread's rank, a few times per small
// message, where out-of-line calls (and the general-dynamic TLS lookup a
// shared library otherwise uses) cost more than the checks themselves.
// ACCL_LOG_LEVEL is read when libaccl is loaded, before any ACCL call.
extern std::atomic<int> g_level;
// Initial-exec: libaccl is loaded with the program (or by a dlopen that fits
// this int into glibc's static TLS reserve). constinit: no TLS wrapper call.
extern constinit thread_local int t_rank __attribute__((tls_model("initial-exec")));
}  // namespace detail

inline bool enabled(Level level) {
  return level != Level::off && static_cast<int>(level) >= detail::g_level.load(std::memory_order_relaxed);
}
// Re-reads ACCL_LOG_LEVEL (tests use it after setenv).
void reload_level();

// Rank shown in front of this thread's log lines (-1: none).
inline void set_thread_rank(int rank) { detail::t_rank = rank; }
inline int thread_rank() { return detail::t_rank; }

// Formats one line and writes it to the log's sink (stderr), whatever the
// level: callers check enabled() first (the macros do). Never throws.
void write(Level level, fmt::string_view format, fmt::format_args args) noexcept;

template <typename... Args>
void write_checked(Level level, fmt::format_string<Args...> format, Args&&... args) {
  write(level, format, fmt::make_format_args(args...));
}

class ScopedRank {
 public:
  explicit ScopedRank(int rank) : previous_(thread_rank()) { set_thread_rank(rank); }
  ~ScopedRank() { set_thread_rank(previous_); }
  ScopedRank(const ScopedRank&) = delete;
  ScopedRank& operator=(const ScopedRank&) = delete;

 private:
  int previous_;
};

}  // namespace accl::log

#define ACCL_LOG_AT(lvl, ...)                                                      \
  do {                                                                             \
    if (::accl::log::enabled(lvl)) ::accl::log::write_checked(lvl, __VA_ARGS__); \
  } while (0)
#define ACCL_LOG_TRACE(...) ACCL_LOG_AT(::accl::log::Level::trace, __VA_ARGS__)
#define ACCL_LOG_DEBUG(...) ACCL_LOG_AT(::accl::log::Level::debug, __VA_ARGS__)
#define ACCL_LOG_INFO(...) ACCL_LOG_AT(::accl::log::Level::info, __VA_ARGS__)
#define ACCL_LOG_WARN(...) ACCL_LOG_AT(::accl::log::Level::warn, __VA_ARGS__)
#define ACCL_LOG_ERROR(...) ACCL_LOG_AT(::accl::log::Level::error, __VA_ARGS__)
