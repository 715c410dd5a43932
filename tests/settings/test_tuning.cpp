// SPDX-License-Identifier: Apache-2.0
//
// The tuning file of ACCL_POLICY=auto (pmpi/src/tuning.cpp): the shipped
// default parses, the first rule that holds decides (call x communicator
// size x bytes), and every malformed file is a start-up error that names the
// file and the line or field. The MPI-level half (a file obeyed by a job, a
// bad one stopping MPI_Init) is in tests/pmpi (pmpi_policy_*).
#include <accl/config.hpp>
#include <accl_pmpi/settings.hpp>
#include <accl_pmpi/tuning.hpp>

#include "scoped_env.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace {

using accl::test::ScopedEnv;
namespace tuning = accl::pmpi::tuning;

const std::string kDir = ACCL_TEST_TUNING_DIR;

size_t call(const char* name) {
  const std::vector<bool> sel = accl::pmpi::settings::calls_named(name);
  for (size_t c = 0; c < sel.size(); ++c)
    if (sel[c]) return c;
  ADD_FAILURE() << name << " is no call";
  return 0;
}

// The message load() throws for `path`, or "" when it loads.
std::string load_error(const std::string& path) {
  try {
    (void)tuning::load(path);
  } catch (const accl::config::SettingError& e) {
    return e.what();
  }
  return "";
}

// A file with `text`, removed with the object.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/accl-tuning-test-XXXXXX";
    const int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    path = name;
    std::ofstream(path) << text;
    if (fd >= 0) close(fd);
  }
  ~TempFile() { std::remove(path.c_str()); }
};

TEST(TuningFile, TheShippedDefaultIsFoundInTheBuildTreeAndParses) {
  // This test runs from the build tree: the sources' copy is the default.
  const std::string path = tuning::default_path();
  EXPECT_NE(path.find("/pmpi/tuning/default.json"), std::string::npos) << path;
  EXPECT_EQ(load_error(path), "");
  ScopedEnv unset("ACCL_TUNING_FILE", "");
  EXPECT_EQ(tuning::selected_path(), path);
}

TEST(TuningFile, ThePolicyIsAutoUnlessSet) {
  {
    ScopedEnv unset("ACCL_POLICY", "");  // empty = unset
    EXPECT_EQ(tuning::policy(), tuning::Policy::automatic);
  }
  ScopedEnv native("ACCL_POLICY", "native");
  EXPECT_EQ(tuning::policy(), tuning::Policy::native);
  ScopedEnv offload("ACCL_POLICY", "offload");
  EXPECT_EQ(tuning::policy(), tuning::Policy::offload);
}

TEST(TuningFile, TheFirstRuleThatHoldsDecides) {
  const tuning::Table t = tuning::load(kDir + "/policy.json");
  // allreduce native by its own rule, although a later rule offloads it
  EXPECT_FALSE(t.offloads(call("allreduce"), 2, 1 << 20));
  // bcast and ibcast from 1 KiB on, on any communicator size
  EXPECT_FALSE(t.offloads(call("bcast"), 2, 1023));
  EXPECT_TRUE(t.offloads(call("bcast"), 2, 1024));
  EXPECT_TRUE(t.offloads(call("MPI_Ibcast"), 7, uint64_t{1} << 40));
  // reduce on 3 to 64 ranks only
  EXPECT_FALSE(t.offloads(call("reduce"), 2, 4096));
  EXPECT_TRUE(t.offloads(call("reduce"), 3, 4));
  EXPECT_FALSE(t.offloads(call("reduce"), 65, 4096));
  EXPECT_TRUE(t.offloads(call("barrier"), 4, 0));
  // p2p (a group) on 2 ranks
  EXPECT_TRUE(t.offloads(call("send"), 2, 0));
  EXPECT_TRUE(t.offloads(call("irecv"), 2, 0));
  EXPECT_FALSE(t.offloads(call("send"), 3, 0));
  // no rule: the default
  EXPECT_FALSE(t.offloads(call("alltoall"), 2, 1 << 20));
  // every size (calls whose bytes no rank knows): only where no size is native
  EXPECT_TRUE(t.offloads_every_size(call("barrier"), 2));
  EXPECT_TRUE(t.offloads_every_size(call("reduce"), 3));
  EXPECT_FALSE(t.offloads_every_size(call("bcast"), 2));  // native below 1 KiB
  EXPECT_FALSE(t.offloads_every_size(call("allreduce"), 2));
  EXPECT_FALSE(t.offloads_every_size(call("alltoall"), 2));
  // at some size on some communicator (else the wrapper may skip the decision)
  EXPECT_TRUE(t.may_offload(call("barrier")));
  EXPECT_TRUE(t.may_offload(call("send")));   // on 2 ranks only
  EXPECT_TRUE(t.may_offload(call("bcast")));  // from 1 KiB
  EXPECT_FALSE(t.may_offload(call("alltoall")));  // no rule, default native
  EXPECT_NE(t.digest(), tuning::Table{}.digest());
}

TEST(TuningFile, ASyntaxErrorNamesFileLineAndColumn) {
  const std::string path = kDir + "/bad_syntax.json";
  EXPECT_EQ(load_error(path).rfind("ACCL_TUNING_FILE=" + path + ": line 5, column 42: syntax error", 0), 0u)
      << load_error(path);
}

TEST(TuningFile, AWrongFieldIsNamed) {
  const std::string path = kDir + "/bad_field.json";
  EXPECT_EQ(load_error(path).rfind("ACCL_TUNING_FILE=" + path + ": rules[1].call[1]: 'allreduc' is no MPI call", 0), 0u)
      << load_error(path);
  const std::pair<const char*, const char*> cases[] = {
      {R"({"format": "accl-tuning-1", "rules": [{"call": "p2p", "bytes": [0, 8], "use": "offload"}]})",
       "rules[0].bytes: the rule selects point-to-point calls"},
      {R"({"format": "accl-tuning-1", "rules": [{"call": "all", "bytes": [0, 8], "use": "offload"}]})",
       "rules[0].bytes: the rule selects point-to-point calls"},
      {R"({"format": "accl-tuning-1", "rules": [{"call": "bcast", "ranks": [4, 2], "use": "native"}]})",
       "rules[0].ranks: [4,2] has min above max"},
      {R"({"format": "accl-tuning-1", "rules": [{"call": "bcast", "bytes": [-1, 2], "use": "native"}]})",
       "rules[0].bytes: [-1,2] is no window"},
      {R"({"format": "accl-tuning-1", "rules": [{"call": "bcast", "use": "maybe"}]})",
       "rules[0].use: \"maybe\" is neither \"offload\" nor \"native\""},
      {R"({"format": "accl-tuning-1", "rules": [{"call": "bcast"}]})", "rules[0]: no \"use\""},
      {R"({"format": "accl-tuning-1", "rules": [{"cal": "bcast", "use": "native"}]})",
       "rules[0]: 'cal': no such field"},
      {R"({"format": "accl-tuning-1", "defualt": "native"})", "'defualt': no such field"},
      {R"({"format": "accl-tuning-2"})", "format: \"accl-tuning-2\", want \"accl-tuning-1\""},
      {R"({"format": "accl-tuning-1", "default": "sometimes"})", "default: \"sometimes\" is neither"},
      {R"([1, 2])", "the top level is no JSON object"},
      {"", "line 1, column 1: "},
  };
  for (const auto& [text, problem] : cases) {
    TempFile f(text);
    const std::string error = load_error(f.path);
    EXPECT_EQ(error.rfind("ACCL_TUNING_FILE=" + f.path + ": " + problem, 0), 0u) << text << " gave: " << error;
  }
}

TEST(TuningFile, TheStartUpCheckReadsTheFileWhenItIsUsedOrNamed) {
  ScopedEnv bad("ACCL_TUNING_FILE", (kDir + "/bad_field.json").c_str());
  {
    ScopedEnv policy("ACCL_POLICY", "auto");
    EXPECT_THROW(accl::pmpi::settings::validate(2), accl::config::SettingError);
  }
  ScopedEnv policy("ACCL_POLICY", "offload");  // unused, but named: still checked
  EXPECT_THROW(accl::pmpi::settings::validate(2), accl::config::SettingError);
  ScopedEnv good("ACCL_TUNING_FILE", (kDir + "/policy.json").c_str());
  EXPECT_NO_THROW(accl::pmpi::settings::validate(2));
}

}  // namespace
