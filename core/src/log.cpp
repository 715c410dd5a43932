// SPDX-License-Identifier: Apache-2.0
#include <accl/config.hpp>
#include <accl/log.hpp>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace accl::log {
namespace {

thread_local int t_rank = -1;
std::atomic<int> g_level{spdlog::level::err};

// Renders "rank N" (or "-" when the thread acts for no rank).
class RankFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    std::string text = t_rank >= 0 ? "rank " + std::to_string(t_rank) : std::string("-");
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<RankFlag>(); }
};

spdlog::level::level_enum level_from_env() {
  const char* v = std::getenv("ACCL_LOG_LEVEL");
  if (v == nullptr || *v == '\0') return spdlog::level::err;
  auto lvl = spdlog::level::from_str(v);  // unknown names map to off
  return lvl;
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

}  // namespace

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    reload_level();
    return make_logger();
  }();
  return *instance;
}

bool enabled(spdlog::level::level_enum level) {
  static const bool loaded = (reload_level(), true);
  (void)loaded;
  return level >= g_level.load(std::memory_order_relaxed) && level != spdlog::level::off;
}

void reload_level() { g_level.store(level_from_env(), std::memory_order_relaxed); }

void set_thread_rank(int rank) { t_rank = rank; }
int thread_rank() { return t_rank; }

}  // namespace accl::log
