// SPDX-License-Identifier: Apache-2.0
//
// Every ACCL_ setting, checked the way the layers check them at start-up
// (core, emu, hw, pmpi: the same functions MPI_Init and accl-info run):
// every documented variable gets a non-number, a negative, zero, a huge
// value and an unknown word; each answer is written down below by hand, and a
// rejection must be "ACCL_X=value: ..." naming the variable.
#include <accl/accl.hpp>
#include <accl/config.hpp>
#include <accl_emu/emulator.hpp>
#include <accl_hw/hw.hpp>
#include <accl_pmpi/settings.hpp>
#include <accl_pmpi/tuning.hpp>

#include "scoped_env.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace {

using accl::test::ScopedEnv;
namespace config = accl::config;

// The start-up validation of every layer; the first problem's message, or "".
std::string validate_all_layers(int world_size = 2) {
  try {
    config::validate(config::Layer::core);
    accl::emu::validate_settings();
    accl::hw::validate_settings();
    accl::pmpi::settings::validate(world_size);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The probes, in the order of the expectation strings below.
const char* const kProbes[] = {"abc", "-5", "0", "99999999999999999999", "loud"};

// Per setting, for each probe: A = accepted, R = rejected (naming the setting).
const std::map<std::string, std::string> kExpected = {
    //                              abc -5  0  huge loud
    {"ACCL_LOG_LEVEL", "RRRRR"},
    {"ACCL_TIMEOUT_MS", "RRRRR"},
    {"ACCL_DEVICE", "RRRRR"},
    {"ACCL_RX_BUFFER_COUNT", "RRRRR"},
    {"ACCL_RX_BUFFER_SIZE", "RRRRR"},
    {"ACCL_MAX_EAGER_SIZE", "RRRRR"},
    {"ACCL_MAX_RENDEZVOUS_SIZE", "RRARR"},  // 0 = eager only
    {"ACCL_CONTENDED_SPIN_US", "RRARR"},    // 0 = never
    {"ACCL_EMU_TRANSPORT", "RRRRR"},
    {"ACCL_EMU_BIND_ADDRESS", "RRRRR"},
    {"ACCL_EMU_OVERFLOW_BYTES", "RRARR"},    // 0 = no overflow store
    {"ACCL_EMU_SHM_DIRECT_BYTES", "RRARR"},  // 0 = never
    {"ACCL_EMU_SHM_SHARED_COPY", "RRARR"},   // a boolean: 0 = off
    {"ACCL_EMU_POLL_LEASE_US", "RRRRR"},
    {"ACCL_EMU_SPIN_US", "RRARR"},
    {"ACCL_EMU_DRIVE_SPIN_US", "RRARR"},
    {"ACCL_EMU_YIELD_US", "RRARR"},
    {"ACCL_EMU_FAULTS", "RRRRR"},
    {"ACCL_JOB_SECRET", "AAAAA"},  // any text is a secret
    {"ACCL_XCLBIN", "AAAAA"},      // a path: checked when a card is opened
    {"ACCL_DEVICE_INDEX", "RRARR"},  // card 0
    {"ACCL_CCLO_KERNEL", "AAAAA"},   // kernel names: checked against the xclbin
    {"ACCL_HOSTCTRL_KERNEL", "AAAAA"},
    {"ACCL_XRT_MEMORY_GROUPS", "RRARR"},  // group 0
    {"ACCL_CCLO_CLOCK_MHZ", "RRRRR"},
    {"ACCL_SIM_ADDRESS", "RRRRR"},  // tcp://host:port only
    {"ACCL_SIM_REPLY_TIMEOUT_MS", "RRRRR"},
    {"ACCL_HW_NETWORK", "RRRRR"},  // none, udp, tcp
    {"ACCL_HW_RSFEC", "RRARR"},    // 0 = off
    {"ACCL_HW_NETWORK_TIMEOUT_MS", "RRRRR"},
    {"ACCL_OFFLOAD", "RRARR"},  // 0 = off
    {"ACCL_OFFLOAD_CALLS", "RRRRR"},
    {"ACCL_FALLBACK", "RRRRR"},
    {"ACCL_TRACE", "RRARR"},
    {"ACCL_STATS", "RRARR"},
    {"ACCL_MIN_BYTES", "RRARR"},
    {"ACCL_MAX_BYTES", "RRARR"},  // 0 = no limit
    {"ACCL_P2P_STAGING_BYTES", "RRARR"},
    {"ACCL_PMPI_TIMEOUT_MS", "RRRRR"},
    {"ACCL_BUFFER_CACHE", "RRARR"},  // 0 = wrap every call
    {"ACCL_POLICY", "RRRRR"},        // auto, offload, native
    {"ACCL_TUNING_FILE", "RRRRR"},   // no such files
};

TEST(Settings, TheTestKnowsEveryDocumentedSetting) {
  // README.md's table is generated from config::settings() (docs-settings-table).
  std::map<std::string, std::string> seen;
  for (const auto& s : config::settings()) {
    EXPECT_TRUE(kExpected.count(s.name)) << s.name << ": add its expected answers to kExpected";
    seen[s.name] = "";
  }
  for (const auto& [name, expect] : kExpected) EXPECT_TRUE(seen.count(name)) << name << " is no setting";
}

TEST(Settings, EveryDocumentedSettingGetsEveryProbe) {
  for (const auto& s : config::settings()) {
    const auto it = kExpected.find(s.name);
    if (it == kExpected.end()) continue;
    for (size_t i = 0; i < std::size(kProbes); ++i) {
      ScopedEnv env(s.name, kProbes[i]);
      const std::string error = validate_all_layers();
      const std::string where = std::string(s.name) + "=" + kProbes[i];
      if (it->second[i] == 'A') {
        EXPECT_EQ(error, "") << where << " should be accepted";
      } else {
        // The message leads with the variable and its value.
        EXPECT_EQ(error.rfind(where + ": ", 0), 0u) << where << " gave: '" << error << "'";
        if (s.kind != config::Kind::text) {
          EXPECT_NE(error.find("; allowed: "), std::string::npos) << error;
        }
      }
    }
  }
}

TEST(Settings, EveryIntegerSettingTakesItsRangeAndNothingBeyond) {
  for (const auto& s : config::settings()) {
    if (s.kind != config::Kind::integer) continue;
    // The largest eager size needs RX buffers that hold it (checked below).
    ScopedEnv count("ACCL_RX_BUFFER_COUNT", "256");
    ScopedEnv size("ACCL_RX_BUFFER_SIZE", "1073741824");
    for (int64_t ok : {s.min, s.max}) {
      ScopedEnv env(s.name, std::to_string(ok).c_str());
      EXPECT_EQ(validate_all_layers(), "") << s.name << "=" << ok;
      EXPECT_EQ(config::get_int(s.name), ok);
    }
    const std::string over = std::to_string(s.max + 1);
    ScopedEnv env(s.name, over.c_str());
    EXPECT_EQ(validate_all_layers(), std::string(s.name) + "=" + over + ": too large; allowed: " + config::allowed(s));
    EXPECT_THROW(config::get_int(s.name), config::SettingError);
  }
}

// The exact messages of the cases the issue found (issue 38, defect 3).
TEST(Settings, ExactMessages) {
  const std::map<std::string, std::string> cases = {
      {"ACCL_LOG_LEVEL=loud", "ACCL_LOG_LEVEL=loud: unknown word; allowed: off, error, warn, info, debug, trace"},
      {"ACCL_RX_BUFFER_SIZE=0", "ACCL_RX_BUFFER_SIZE=0: too small; allowed: an integer from 64 to 1073741824 bytes"},
      {"ACCL_RX_BUFFER_SIZE=7", "ACCL_RX_BUFFER_SIZE=7: too small; allowed: an integer from 64 to 1073741824 bytes"},
      {"ACCL_RX_BUFFER_COUNT=-3", "ACCL_RX_BUFFER_COUNT=-3: negative; allowed: an integer from 1 to 256"},
      {"ACCL_MAX_EAGER_SIZE=3", "ACCL_MAX_EAGER_SIZE=3: too small; allowed: an integer from 64 to 4294967295 bytes"},
      {"ACCL_MAX_EAGER_SIZE=5000000000",
       "ACCL_MAX_EAGER_SIZE=5000000000: too large; allowed: an integer from 64 to 4294967295 bytes"},
      {"ACCL_MAX_RENDEZVOUS_SIZE=10",
       "ACCL_MAX_RENDEZVOUS_SIZE=10: too small; allowed: 0 (off) or an integer from 64 to 4294967295 bytes"},
      {"ACCL_EMU_OVERFLOW_BYTES=-1",
       "ACCL_EMU_OVERFLOW_BYTES=-1: negative; allowed: an integer from 0 to 68719476736 bytes"},
      {"ACCL_EMU_POLL_LEASE_US=-5", "ACCL_EMU_POLL_LEASE_US=-5: negative; allowed: an integer from 1 to 3600000000 us"},
      {"ACCL_EMU_DRIVE_SPIN_US=-1", "ACCL_EMU_DRIVE_SPIN_US=-1: negative; allowed: an integer from 0 to 100000 us"},
      {"ACCL_MIN_BYTES=-1", "ACCL_MIN_BYTES=-1: negative; allowed: an integer from 0 to 1099511627776 bytes"},
      {"ACCL_ALLREDUCE_MIN_BYTES=-1",
       "ACCL_ALLREDUCE_MIN_BYTES=-1: negative; allowed: an integer from 0 to 1099511627776 bytes"},
      {"ACCL_BCAST_MAX_BYTES=lots",
       "ACCL_BCAST_MAX_BYTES=lots: not an integer; allowed: an integer from 0 to 1099511627776 bytes"},
      {"ACCL_CCLO_CLOCK_MHZ=0", "ACCL_CCLO_CLOCK_MHZ=0: too small; allowed: a number from 1 to 100000 MHz"},
      {"ACCL_TIMEOUT_MS=0", "ACCL_TIMEOUT_MS=0: too small; allowed: an integer from 1 to 4294967 ms"},
      {"ACCL_TIMEOUT_MS=-1", "ACCL_TIMEOUT_MS=-1: negative; allowed: an integer from 1 to 4294967 ms"},
      {"ACCL_PMPI_TIMEOUT_MS=0", "ACCL_PMPI_TIMEOUT_MS=0: too small; allowed: an integer from 1 to 4294967 ms"},
      {"ACCL_FALLBACK=print", "ACCL_FALLBACK=print: unknown word; allowed: silent, warn, error"},
      {"ACCL_STATS=maybe", "ACCL_STATS=maybe: not a boolean; allowed: 1/0, on/off, yes/no, true/false"},
      {"ACCL_EMU_BIND_ADDRESS=localhost",
       "ACCL_EMU_BIND_ADDRESS=localhost: not an IPv4 address; allowed: a dotted quad of this host, e.g. 127.0.0.1 "
       "or 0.0.0.0"},
      {"ACCL_OFFLOAD_CALLS=^",
       "ACCL_OFFLOAD_CALLS=^: names no call; allowed: a comma list of MPI calls (send, allreduce or MPI_Allreduce, "
       "...) and groups (p2p, coll, icoll, all), optionally led by ^ to negate it"},
      {"ACCL_OFFLOAD_CALLS=allreduce,fft",
       "ACCL_OFFLOAD_CALLS=allreduce,fft: 'fft' is no MPI call or group; allowed: a comma list of MPI calls (send, "
       "allreduce or MPI_Allreduce, ...) and groups (p2p, coll, icoll, all), optionally led by ^ to negate it"},
      {"ACCL_EMU_TRANSPORT=inproc",
       "ACCL_EMU_TRANSPORT=inproc: the in-process transport reaches only this process, and this MPI job has 2 "
       "ranks; allowed: auto, shm, tcp, udp"},
  };
  for (const auto& [assignment, message] : cases) {
    const auto eq = assignment.find('=');
    const std::string name = assignment.substr(0, eq), value = assignment.substr(eq + 1);
    ScopedEnv env(name.c_str(), value.c_str());
    EXPECT_EQ(validate_all_layers(), message);
  }
}

TEST(Settings, EagerSizeMustFitTheRxBuffers) {
  ScopedEnv count("ACCL_RX_BUFFER_COUNT", "4");
  ScopedEnv size("ACCL_RX_BUFFER_SIZE", "2048");
  {
    ScopedEnv eager("ACCL_MAX_EAGER_SIZE", "8192");
    EXPECT_EQ(validate_all_layers(), "");
  }
  ScopedEnv eager("ACCL_MAX_EAGER_SIZE", "8193");
  EXPECT_EQ(validate_all_layers(),
            "ACCL_MAX_EAGER_SIZE=8193: larger than the RX buffers hold together (ACCL_RX_BUFFER_COUNT x "
            "ACCL_RX_BUFFER_SIZE = 8192 bytes); allowed: an integer from 64 to 8192 bytes");
}

TEST(Settings, InprocIsFineForOneProcess) {
  ScopedEnv env("ACCL_EMU_TRANSPORT", "inproc");
  EXPECT_EQ(validate_all_layers(1), "");
  ScopedEnv none("ACCL_DEVICE", "none");
  EXPECT_EQ(validate_all_layers(4), "");  // no emulator started
}

TEST(Settings, ValuesAreReadAsWritten) {
  {
    ScopedEnv env("ACCL_BUFFER_CACHE", "010");  // decimal, not octal
    EXPECT_EQ(config::get_int("ACCL_BUFFER_CACHE"), 10);
  }
  {
    ScopedEnv env("ACCL_RX_BUFFER_SIZE", " 0x1000 ");
    EXPECT_EQ(validate_all_layers(), "");
    EXPECT_EQ(config::get_int("ACCL_RX_BUFFER_SIZE"), 4096);
  }
  {
    ScopedEnv env("ACCL_LOG_LEVEL", "DEBUG");
    EXPECT_EQ(validate_all_layers(), "");
    EXPECT_EQ(config::get_choice("ACCL_LOG_LEVEL"), "debug");
  }
  {
    ScopedEnv env("ACCL_TIMEOUT_MS", "");  // empty = unset
    EXPECT_EQ(validate_all_layers(), "");
    EXPECT_EQ(config::get_int("ACCL_TIMEOUT_MS"), 10000);
  }
  {
    ScopedEnv env("ACCL_CCLO_CLOCK_MHZ", "322.265625");
    EXPECT_EQ(validate_all_layers(), "");
    EXPECT_DOUBLE_EQ(config::get_real("ACCL_CCLO_CLOCK_MHZ"), 322.265625);
  }
}

TEST(Settings, OffloadCallsSelectsCallsAndGroups) {
  const auto words = accl::pmpi::settings::call_words();
  auto index = [&words](const std::string& w) {
    for (size_t i = 0; i < words.size(); ++i)
      if (words[i] == w) return i;
    ADD_FAILURE() << w;
    return size_t{0};
  };
  auto all_but_bcast = accl::pmpi::settings::offload_calls("^bcast");
  EXPECT_FALSE(all_but_bcast[index("BCAST")]);
  EXPECT_TRUE(all_but_bcast[index("ALLREDUCE")]);
  auto only = accl::pmpi::settings::offload_calls("MPI_Allreduce, send");
  EXPECT_TRUE(only[index("ALLREDUCE")]);
  EXPECT_TRUE(only[index("SEND")]);
  EXPECT_FALSE(only[index("RECV")]);
  auto no_p2p = accl::pmpi::settings::offload_calls("^p2p");
  EXPECT_FALSE(no_p2p[index("SEND")]);
  EXPECT_TRUE(no_p2p[index("REDUCE")]);
  for (bool on : accl::pmpi::settings::offload_calls("")) EXPECT_TRUE(on);
}

TEST(Settings, UnknownNamesGetTheClosestKnownName) {
  ScopedEnv typo("ACCL_TIMOUT_MS", "5");
  ScopedEnv family_typo("ACCL_ALREDUCE_MIN_BYTES", "5");
  ScopedEnv unknown_call("ACCL_FOO_MIN_BYTES", "5");
  ScopedEnv known_call("ACCL_ALLREDUCE_MIN_BYTES", "5");
  const auto warnings = accl::pmpi::settings::unknown_setting_warnings();
  const std::vector<std::string> expected = {
      "ACCL_ALREDUCE_MIN_BYTES is not a setting (did you mean ACCL_ALLREDUCE_MIN_BYTES?); ignored",
      "ACCL_FOO_MIN_BYTES is not a setting (did you mean ACCL_MIN_BYTES?); ignored",
      "ACCL_TIMOUT_MS is not a setting (did you mean ACCL_TIMEOUT_MS?); ignored",
  };
  EXPECT_EQ(warnings, expected);
  EXPECT_EQ(validate_all_layers(), "");  // warnings, not errors
}

TEST(Settings, DriverStartUpStopsOnABadCoreSetting) {
  // The device is made first, under good settings; the driver's own start-up
  // check (ACCL's constructor) must still catch the core setting.
  accl::emu::EmuOptions o;
  o.transport = accl::emu::TransportKind::inproc;
  auto device = accl::emu::create_device(o);
  ScopedEnv env("ACCL_LOG_LEVEL", "loud");
  try {
    accl::ACCL driver(std::move(device));
    FAIL() << "ACCL_LOG_LEVEL=loud accepted";
  } catch (const config::SettingError& e) {
    EXPECT_STREQ(e.what(), "ACCL_LOG_LEVEL=loud: unknown word; allowed: off, error, warn, info, debug, trace");
  }
}

}  // namespace
