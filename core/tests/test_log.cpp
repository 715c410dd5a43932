// SPDX-License-Identifier: Apache-2.0
//
// The logging facility (accl/log.hpp): silent by default, level from
// ACCL_LOG_LEVEL, the thread's rank in front of every line, arguments of a
// disabled level never evaluated.
#include <accl/log.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

using accl::log::Level;

class Log : public ::testing::Test {
 protected:
  void TearDown() override {
    unsetenv("ACCL_LOG_LEVEL");
    accl::log::reload_level();
  }
  static void set_level(const char* name) {
    setenv("ACCL_LOG_LEVEL", name, 1);
    accl::log::reload_level();
  }
};

TEST_F(Log, OnlyErrorsByDefault) {
  unsetenv("ACCL_LOG_LEVEL");
  accl::log::reload_level();
  EXPECT_TRUE(accl::log::enabled(Level::error));
  EXPECT_FALSE(accl::log::enabled(Level::warn));
  EXPECT_FALSE(accl::log::enabled(Level::info));
  EXPECT_FALSE(accl::log::enabled(Level::off));
  ::testing::internal::CaptureStderr();
  ACCL_LOG_WARN("not shown {}", 1);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST_F(Log, LinesCarryTheRankAndTheLevel) {
  set_level("info");
  ::testing::internal::CaptureStderr();
  {
    accl::log::ScopedRank rank(3);
    ACCL_LOG_INFO("value {} of {}", 42, std::string("x"));
  }
  ACCL_LOG_WARN("no rank: {:.2f}", 2.5);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "[accl rank 3 info] value 42 of x\n[accl - warning] no rank: 2.50\n");
  EXPECT_EQ(accl::log::thread_rank(), -1);  // ScopedRank restored it
}

TEST_F(Log, ArgumentsOfADisabledLevelAreNotEvaluated) {
  set_level("warn");
  int evaluated = 0;
  auto count = [&] { return ++evaluated; };
  ::testing::internal::CaptureStderr();
  ACCL_LOG_DEBUG("debug {}", count());
  ACCL_LOG_INFO("info {}", count());
  ACCL_LOG_ERROR("error {}", count());
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "[accl - error] error 1\n");
  EXPECT_EQ(evaluated, 1);
}

TEST_F(Log, LevelNamesAreTheSettingsWords) {
  set_level("trace");
  EXPECT_TRUE(accl::log::enabled(Level::trace));
  set_level("debug");
  EXPECT_FALSE(accl::log::enabled(Level::trace));
  EXPECT_TRUE(accl::log::enabled(Level::debug));
  set_level(" WARN ");  // case and blanks do not matter
  EXPECT_FALSE(accl::log::enabled(Level::info));
  EXPECT_TRUE(accl::log::enabled(Level::warn));
  set_level("error");
  EXPECT_FALSE(accl::log::enabled(Level::warn));
  EXPECT_TRUE(accl::log::enabled(Level::error));
  set_level("off");
  EXPECT_FALSE(accl::log::enabled(Level::error));
  // A word outside the list (spdlog's "warning", a typo) keeps the default,
  // error: the log level is read when the library loads, and the start-up
  // validation rejects such a value with its name (tests/settings).
  set_level("warning");
  EXPECT_FALSE(accl::log::enabled(Level::warn));
  EXPECT_TRUE(accl::log::enabled(Level::error));
  set_level("loud");
  EXPECT_TRUE(accl::log::enabled(Level::error));
}

TEST_F(Log, AFormatThatFailsAtRunTimeStillLogsALine) {
  set_level("info");
  ::testing::internal::CaptureStderr();
  ACCL_LOG_INFO("width {:{}}", 1, -2);  // a negative dynamic width passes the compile-time check
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.rfind("[accl - info] (unformattable log line 'width {:{}}': ", 0), 0u) << out;
}

}  // namespace
