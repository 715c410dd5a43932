// SPDX-License-Identifier: Apache-2.0
//
// Configuration from the environment. Every setting has the ACCL_ prefix and
// is declared in one table (core/src/config.cpp), which the README table and
// `accl-info` are generated from / checked against.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace accl::config {

struct Setting {
  const char* name;           // e.g. "ACCL_TIMEOUT_MS"
  const char* default_value;  // as text
  const char* meaning;        // one line for README / accl-info
};

// Every ACCL_ setting any layer reads (core, emu, hw, pmpi).
const std::vector<Setting>& settings();

// Raw value, or nullopt when unset or empty. Throws std::invalid_argument for
// names missing from the table (catches typos at the call site).
std::optional<std::string> get(const char* name);
std::string get_string(const char* name);   // value or the table default
int64_t get_int(const char* name);          // value or default; throws on garbage
bool get_bool(const char* name);            // 1/0, on/off, yes/no, true/false
std::chrono::milliseconds get_ms(const char* name);

// ACCL_MAX_EAGER_SIZE as set, or when unset its default capped at what the
// RX buffers hold together (count x size).
uint64_t max_eager_size(uint64_t rx_buffer_count, uint64_t rx_buffer_size);

}  // namespace accl::config
