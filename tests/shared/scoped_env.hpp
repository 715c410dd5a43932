// SPDX-License-Identifier: Apache-2.0
//
// Sets an environment variable for the life of the object and puts back what
// was there before (tests/emu, tests/transport: settings the code under test
// reads when it is made).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace accl::test {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace accl::test
