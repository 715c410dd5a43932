// SPDX-License-Identifier: Apache-2.0
//
// Reading and validating ACCL_ settings from the table in config_table.cpp.
#include <accl/config.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

extern char** environ;

namespace accl::config {

const char* to_string(Layer layer) {
  switch (layer) {
    case Layer::core: return "core";
    case Layer::emu: return "emu";
    case Layer::hw: return "hw";
    case Layer::pmpi: return "pmpi";
  }
  return "?";
}

SettingError::SettingError(std::string_view name, std::string_view value, const std::string& problem,
                           const std::string& allowed_values)
    : std::invalid_argument(std::string(name) + "=" + std::string(value) + ": " + problem +
                            (allowed_values.empty() ? "" : "; allowed: " + allowed_values)) {}

namespace {

std::string lower(std::string_view v) {
  std::string out(v);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trim(std::string_view v) {
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
  return v;
}

std::vector<std::string> split_words(const char* list) {
  std::vector<std::string> out;
  std::string_view rest(list);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    out.emplace_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

// Decimal, or hex with 0x. A leading 0 is decimal, not octal: "010" is ten.
std::optional<int64_t> parse_integer(std::string_view text, bool* overflow) {
  std::string v(trim(text));
  *overflow = false;
  if (v.empty()) return std::nullopt;
  size_t digits = (v[0] == '-' || v[0] == '+') ? 1 : 0;
  int base = 10;
  if (v.size() > digits + 2 && v[digits] == '0' && (v[digits + 1] == 'x' || v[digits + 1] == 'X')) base = 16;
  if (digits >= v.size() || !std::isxdigit(static_cast<unsigned char>(v[digits + (base == 16 ? 2 : 0)])))
    return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long out = std::strtoll(v.c_str(), &end, base);
  if (*end != '\0') return std::nullopt;
  if (errno == ERANGE) {
    *overflow = true;
    return std::nullopt;
  }
  return static_cast<int64_t>(out);
}

std::optional<double> parse_real(std::string_view text) {
  std::string v(trim(text));
  if (v.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double out = std::strtod(v.c_str(), &end);
  if (*end != '\0' || errno == ERANGE || !std::isfinite(out)) return std::nullopt;
  // strtod also reads hex floats and "inf"/"nan": a clock is plain decimal.
  if (v.find_first_not_of("0123456789.+-eE") != std::string::npos) return std::nullopt;
  return out;
}

bool is_true_word(const std::string& v) { return v == "1" || v == "on" || v == "yes" || v == "true"; }
bool is_false_word(const std::string& v) { return v == "0" || v == "off" || v == "no" || v == "false"; }

// Levenshtein distance: how many single-letter edits turn a into b.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The <CALL> of ACCL_<CALL>_MIN_BYTES / _MAX_BYTES, or empty.
std::string_view family_word(std::string_view name) {
  for (std::string_view suffix : {"_MIN_BYTES", "_MAX_BYTES"}) {
    if (name.starts_with("ACCL_") && name.ends_with(suffix) && name.size() > 5 + suffix.size())
      return name.substr(5, name.size() - 5 - suffix.size());
  }
  return {};
}

const Setting& row(const char* name) {
  static thread_local Setting family;
  if (auto s = find(name)) {
    family = *s;
    return family;
  }
  throw std::invalid_argument(std::string("unknown ACCL setting ") + name);
}

}  // namespace

std::optional<Setting> find(std::string_view name) {
  for (const auto& s : settings())
    if (name == s.name) return s;
  // Per-call PMPI thresholds are a family: ACCL_<CALL>_MIN_BYTES / _MAX_BYTES.
  // The PMPI layer checks <CALL> against its calls; the value is checked here.
  if (!family_word(name).empty()) {
    auto base = find(name.ends_with("_MIN_BYTES") ? "ACCL_MIN_BYTES" : "ACCL_MAX_BYTES");
    base->name = nullptr;  // the caller's name; a table row has no storage for it
    return base;
  }
  return std::nullopt;
}

std::string allowed(const Setting& s) {
  const std::string unit = *s.unit ? std::string(" ") + s.unit : "";
  switch (s.kind) {
    case Kind::text: return "";
    case Kind::boolean: return "1/0, on/off, yes/no, true/false";
    case Kind::choice: {
      std::string out;
      for (const auto& w : split_words(s.choices)) out += (out.empty() ? "" : ", ") + w;
      return out;
    }
    case Kind::integer:
      return (s.zero_allowed ? "0 (off) or " : "") + std::string("an integer from ") + std::to_string(s.min) + " to " +
             std::to_string(s.max) + unit;
    case Kind::real: return "a number from " + std::to_string(s.min) + " to " + std::to_string(s.max) + unit;
  }
  return "";
}

void check(const Setting& s, std::string_view value) {
  if (trim(value).empty()) return;
  const std::string_view name = s.name;
  switch (s.kind) {
    case Kind::text: return;
    case Kind::boolean: {
      const std::string v = lower(trim(value));
      if (!is_true_word(v) && !is_false_word(v)) throw SettingError(name, value, "not a boolean", allowed(s));
      return;
    }
    case Kind::choice: {
      const std::string v = lower(trim(value));
      for (const auto& w : split_words(s.choices))
        if (v == w) return;
      throw SettingError(name, value, "unknown word", allowed(s));
    }
    case Kind::integer: {
      bool overflow = false;
      const auto v = parse_integer(value, &overflow);
      if (!v) throw SettingError(name, value, overflow ? "too large" : "not an integer", allowed(s));
      if (*v == 0 && s.zero_allowed) return;
      if (*v < 0 && s.min >= 0) throw SettingError(name, value, "negative", allowed(s));
      if (*v < s.min) throw SettingError(name, value, "too small", allowed(s));
      if (*v > s.max) throw SettingError(name, value, "too large", allowed(s));
      return;
    }
    case Kind::real: {
      const auto v = parse_real(value);
      if (!v) throw SettingError(name, value, "not a decimal number", allowed(s));
      if (*v < 0 && s.min >= 0) throw SettingError(name, value, "negative", allowed(s));
      if (*v < static_cast<double>(s.min)) throw SettingError(name, value, "too small", allowed(s));
      if (*v > static_cast<double>(s.max)) throw SettingError(name, value, "too large", allowed(s));
      return;
    }
  }
}

void validate(Layer layer) {
  for (const auto& s : settings()) {
    if (s.layer != layer) continue;
    if (const char* v = std::getenv(s.name)) check(s, v);
  }
  if (layer == Layer::core) {
    // The firmware refuses an eager limit its RX buffers cannot hold at once.
    if (auto eager = get("ACCL_MAX_EAGER_SIZE")) {
      const uint64_t capacity = static_cast<uint64_t>(get_int("ACCL_RX_BUFFER_COUNT")) *
                                static_cast<uint64_t>(get_int("ACCL_RX_BUFFER_SIZE"));
      if (static_cast<uint64_t>(get_int("ACCL_MAX_EAGER_SIZE")) > capacity)
        throw SettingError("ACCL_MAX_EAGER_SIZE", *eager,
                           "larger than the RX buffers hold together (ACCL_RX_BUFFER_COUNT x ACCL_RX_BUFFER_SIZE = " +
                               std::to_string(capacity) + " bytes)",
                           "an integer from " + std::to_string(find("ACCL_MAX_EAGER_SIZE")->min) + " to " +
                               std::to_string(capacity) + " bytes");
    }
  }
  if (layer != Layer::pmpi) return;
  // The per-call family belongs to the PMPI layer: its values are checked
  // here, its <CALL> words by the PMPI layer (unknown_settings).
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const std::string_view name = kv.substr(0, kv.find('='));
    if (family_word(name).empty() || kv.size() <= name.size()) continue;
    Setting s = *find(name);
    const std::string owned(name);
    s.name = owned.c_str();
    check(s, kv.substr(name.size() + 1));
  }
}

std::vector<UnknownSetting> unknown_settings(const std::vector<std::string>& family_words) {
  std::vector<std::string> known;
  for (const auto& s : settings()) known.emplace_back(s.name);
  for (const auto& w : family_words) {
    known.push_back("ACCL_" + w + "_MIN_BYTES");
    known.push_back("ACCL_" + w + "_MAX_BYTES");
  }
  std::vector<UnknownSetting> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const std::string name(kv.substr(0, kv.find('=')));
    if (!name.starts_with("ACCL_") || std::find(known.begin(), known.end(), name) != known.end()) continue;
    if (family_words.empty() && !family_word(name).empty()) continue;  // any <CALL> goes
    UnknownSetting u{name, ""};
    size_t best = std::numeric_limits<size_t>::max();
    for (const auto& k : known) {
      const size_t d = edit_distance(name, k);
      if (d < best) {
        best = d;
        u.closest = k;
      }
    }
    out.push_back(std::move(u));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

std::string describe(const UnknownSetting& u) {
  return u.name + " is not a setting (did you mean " + u.closest + "?); ignored";
}

std::optional<std::string> get(const char* name) {
  (void)row(name);
  const char* v = std::getenv(name);
  if (v == nullptr || trim(v).empty()) return std::nullopt;
  return std::string(v);
}

std::string get_string(const char* name) {
  auto v = get(name);
  return v ? *v : std::string(row(name).default_value);
}

int64_t get_int(const char* name) {
  Setting s = row(name);
  s.name = name;
  const std::string v = get_string(name);
  if (trim(v).empty()) return 0;
  check(s, v);
  bool overflow = false;
  return *parse_integer(v, &overflow);
}

double get_real(const char* name) {
  Setting s = row(name);
  s.name = name;
  const std::string v = get_string(name);
  if (trim(v).empty()) return 0;
  check(s, v);
  return *parse_real(v);
}

bool get_bool(const char* name) {
  Setting s = row(name);
  s.name = name;
  const std::string v = get_string(name);
  check(s, v);
  return is_true_word(lower(trim(v)));
}

std::string get_choice(const char* name) {
  Setting s = row(name);
  s.name = name;
  const std::string v = get_string(name);
  check(s, v);
  return lower(trim(v));
}

std::chrono::milliseconds get_ms(const char* name) { return std::chrono::milliseconds(get_int(name)); }

uint64_t max_eager_size(uint64_t rx_buffer_count, uint64_t rx_buffer_size) {
  const int64_t value = get_int("ACCL_MAX_EAGER_SIZE");
  if (get("ACCL_MAX_EAGER_SIZE")) return static_cast<uint64_t>(value);  // checked against the RX buffers by the caller
  // The firmware refuses an eager size its RX buffers cannot hold at once;
  // smaller buffers than the defaults must not turn the default into an error.
  return std::min(static_cast<uint64_t>(value), rx_buffer_count * rx_buffer_size);
}

}  // namespace accl::config
