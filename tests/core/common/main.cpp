// SPDX-License-Identifier: Apache-2.0
//
// main() of the in-process test executables: strips --world-size=N,
// --transport=NAME and --quick before GoogleTest sees the command line
// (parameter generators read them lazily, during InitGoogleTest).
#include "types.hpp"
#include "world.hpp"

#include <gtest/gtest.h>

int main(int argc, char** argv) {
  acclt::parse_options(&argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  acclt::World::discard_all();
  return rc;
}
