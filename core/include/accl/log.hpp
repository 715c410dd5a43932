// SPDX-License-Identifier: Apache-2.0
//
// The one logging facility of the project (spdlog underneath). Level from
// ACCL_LOG_LEVEL (off, error, warn, info, debug, trace; default error, so a
// healthy run prints nothing). Every line carries the rank of the thread that
// logs it: threads acting for a CCLO set it with log::ScopedRank.
//
// Use the level-checked macros: arguments are not evaluated when the level
// is disabled.
#pragma once

#include <spdlog/spdlog.h>

namespace accl::log {

spdlog::logger& logger();
bool enabled(spdlog::level::level_enum level);
// Re-reads ACCL_LOG_LEVEL (tests use it after setenv).
void reload_level();

// Rank shown in front of this thread's log lines (-1: none).
void set_thread_rank(int rank);
int thread_rank();

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

#define ACCL_LOG_AT(lvl, ...)                                   \
  do {                                                          \
    if (::accl::log::enabled(lvl)) ::accl::log::logger().log(lvl, __VA_ARGS__); \
  } while (0)
#define ACCL_LOG_TRACE(...) ACCL_LOG_AT(::spdlog::level::trace, __VA_ARGS__)
#define ACCL_LOG_DEBUG(...) ACCL_LOG_AT(::spdlog::level::debug, __VA_ARGS__)
#define ACCL_LOG_INFO(...) ACCL_LOG_AT(::spdlog::level::info, __VA_ARGS__)
#define ACCL_LOG_WARN(...) ACCL_LOG_AT(::spdlog::level::warn, __VA_ARGS__)
#define ACCL_LOG_ERROR(...) ACCL_LOG_AT(::spdlog::level::err, __VA_ARGS__)
