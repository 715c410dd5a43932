// SPDX-License-Identifier: Apache-2.0
//
// Configuration from the environment. Every setting has the ACCL_ prefix and
// is declared once, with its type, allowed values, default and meaning, in
// one table (core/src/config_table.cpp); the README's table is generated from
// it (`accl-info --settings-markdown`, checked by the docs-settings-table test)
// and `accl-info` prints it.
//
// Each layer owns its rows (Setting::layer) and checks them in one place at
// its start-up: config::validate(layer) does the table-driven part (type,
// range, word), the layer adds what only it can judge (an IPv4 address, a
// list of MPI calls, settings that depend on each other). Every rejected
// value throws SettingError, whose text is "ACCL_X=value: what is wrong;
// allowed: what would be accepted".
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace accl::config {

enum class Layer : uint8_t { core, emu, hw, pmpi };
const char* to_string(Layer layer);

enum class Kind : uint8_t {
  text,     // any text; the owning layer checks its form
  integer,  // decimal (or 0x hex) integer in [min, max]; optionally 0 as well
  real,     // decimal number in [min, max] (min > 0 means "greater than zero")
  boolean,  // 1/0, on/off, yes/no, true/false
  choice,   // one word of `choices` (case-insensitive)
};

struct Setting {
  const char* name = "";           // e.g. "ACCL_TIMEOUT_MS"
  Layer layer = Layer::core;       // the layer that reads and validates it
  Kind kind = Kind::text;
  const char* default_value = "";  // as text; empty: the meaning says what happens
  int64_t min = 0;                 // integer / real: allowed range, inclusive
  int64_t max = 0;
  bool zero_allowed = false;       // integer: 0 (off) is allowed below min
  const char* choices = "";        // choice: comma list of the words
  const char* unit = "";           // shown with the range: "bytes", "ms", ...
  const char* meaning = "";        // one line for README / accl-info
};

// "ACCL_X=value: problem; allowed: what is". Derives from invalid_argument so
// callers that catch that keep working.
class SettingError : public std::invalid_argument {
 public:
  SettingError(std::string_view name, std::string_view value, const std::string& problem, const std::string& allowed);
};

// Every ACCL_ setting any layer reads (core, emu, hw, pmpi).
const std::vector<Setting>& settings();

// The row for `name`, also for the per-call PMPI family
// ACCL_<CALL>_MIN_BYTES / _MAX_BYTES (the row of ACCL_MIN_BYTES / ACCL_MAX_BYTES
// under the asked name); nullopt for names not in the table.
std::optional<Setting> find(std::string_view name);

// What `setting` accepts, in words: "an integer from 1 to 4294967 ms".
std::string allowed(const Setting& setting);

// Throws SettingError unless `value` is acceptable for `setting` (type,
// range, word). An empty value always is: it means "unset".
void check(const Setting& setting, std::string_view value);

// Checks every set variable of `layer` from the environment; throws the first
// SettingError. The table-driven part of a layer's start-up validation.
void validate(Layer layer);

// ACCL_ variables in the environment that no table row names, each with the
// closest known name. `family_words` are the <CALL> words of the per-call
// family the PMPI layer accepts (ACCL_ALLREDUCE_MIN_BYTES); empty: any word.
struct UnknownSetting {
  std::string name;
  std::string closest;
};
std::vector<UnknownSetting> unknown_settings(const std::vector<std::string>& family_words = {});
// "ACCL_TIMOUT_MS is not a setting (did you mean ACCL_TIMEOUT_MS?); ignored"
std::string describe(const UnknownSetting& unknown);

// Raw value, or nullopt when unset or empty. Throws std::invalid_argument for
// names missing from the table (catches typos at the call site).
std::optional<std::string> get(const char* name);
std::string get_string(const char* name);   // value or the table default
int64_t get_int(const char* name);          // value or default; throws SettingError unless in range
double get_real(const char* name);          // value or default; throws SettingError unless in range
bool get_bool(const char* name);            // 1/0, on/off, yes/no, true/false; throws SettingError
std::string get_choice(const char* name);   // one of the row's words, lower case; throws SettingError
std::chrono::milliseconds get_ms(const char* name);

// ACCL_MAX_EAGER_SIZE as set, or when unset its default capped at what the
// RX buffers hold together (count x size).
uint64_t max_eager_size(uint64_t rx_buffer_count, uint64_t rx_buffer_size);

}  // namespace accl::config
