// SPDX-License-Identifier: Apache-2.0
#include <accl/config.hpp>
#include <accl/log.hpp>

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <string>

namespace accl::log {

namespace detail {
constinit thread_local int t_rank __attribute__((tls_model("initial-exec"))) = -1;
std::atomic<int> g_level{static_cast<int>(Level::error)};
}  // namespace detail

namespace {

using detail::g_level;
using detail::t_rank;

// Our levels are spdlog's without "critical".
spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::trace: return spdlog::level::trace;
    case Level::debug: return spdlog::level::debug;
    case Level::info: return spdlog::level::info;
    case Level::warn: return spdlog::level::warn;
    case Level::error: return spdlog::level::err;
    case Level::off: break;
  }
  return spdlog::level::off;
}

// Renders "rank N" (or "-" when the thread acts for no rank).
class RankFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    std::string text = t_rank >= 0 ? "rank " + std::to_string(t_rank) : std::string("-");
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<RankFlag>(); }
};

Level level_from_env() {
  // Read when the library is loaded, before anyone can catch an exception: a
  // word outside the table's list (core/src/config_table.cpp) keeps the
  // default here, and the start-up validation (config::validate) rejects it
  // with its name.
  const char* v = std::getenv("ACCL_LOG_LEVEL");
  if (v == nullptr) return Level::error;
  std::string word(v);
  std::erase_if(word, [](unsigned char c) { return std::isspace(c); });
  std::transform(word.begin(), word.end(), word.begin(), [](unsigned char c) { return std::tolower(c); });
  if (word == "off") return Level::off;
  if (word == "warn") return Level::warn;
  if (word == "info") return Level::info;
  if (word == "debug") return Level::debug;
  if (word == "trace") return Level::trace;
  return Level::error;
}

std::shared_ptr<spdlog::logger> make_logger() {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("accl", sink);
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<RankFlag>('*').set_pattern("[accl %* %l] %v");
  logger->set_formatter(std::move(formatter));
  logger->set_level(spdlog::level::trace);  // filtering happens in enabled()
  return logger;
}

spdlog::logger& logger() {
  // The level was read when the library was loaded (g_level_loaded below);
  // re-reading it here would change it at the first line logged.
  static std::shared_ptr<spdlog::logger> instance = make_logger();
  return *instance;
}

}  // namespace

void write(Level level, fmt::string_view format, fmt::format_args args) noexcept {
  // Callers log from destructors, catch handlers and the firmware's callbacks
  // (built without exceptions): nothing may escape, not even bad_alloc.
  try {
    fmt::memory_buffer line;
    try {
      fmt::vformat_to(std::back_inserter(line), format, args);
    } catch (const fmt::format_error& e) {  // a format the compile-time check let through (runtime width...)
      line.clear();
      fmt::format_to(std::back_inserter(line), "(unformattable log line '{}': {})", format, e.what());
    }
    logger().log(to_spdlog(level), spdlog::string_view_t(line.data(), line.size()));
  } catch (...) {
    // The line is lost; the log is best effort.
  }
}

void reload_level() { g_level.store(static_cast<int>(level_from_env()), std::memory_order_relaxed); }

namespace {
// ACCL_LOG_LEVEL takes effect when libaccl is loaded.
const bool g_level_loaded = (reload_level(), true);
}  // namespace

}  // namespace accl::log
