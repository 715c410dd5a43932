// SPDX-License-Identifier: Apache-2.0
//
// Reading and checking the tuning file (format in accl_pmpi/tuning.hpp and
// pmpi/README.md). Every mistake is a start-up error that names the file and
// the line (JSON syntax) or the field (rules[2].bytes): a table that half
// loaded would decide differently from what its author meant.
#include <accl_pmpi/settings.hpp>
#include <accl_pmpi/tuning.hpp>

#include <accl/config.hpp>

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

namespace accl::pmpi::tuning {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "accl-tuning-1";
constexpr const char* kAllowed =
    "a JSON tuning file of format accl-tuning-1 (pmpi/README.md, \"Offload policy and tuning file\"; "
    "tools/accl-tune writes one), or empty for the shipped default";

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw config::SettingError("ACCL_TUNING_FILE", path, problem, kAllowed);
}

// "line L, column C: what" from a JSON syntax error at byte `byte` (1-based).
std::string where_in_text(const std::string& text, size_t byte, const std::string& what) {
  const size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  // nlohmann's message repeats the position before its own text: keep the text.
  std::string detail = what;
  if (const size_t col = detail.find("column "); col != std::string::npos)
    if (const size_t colon = detail.find(": ", col); colon != std::string::npos) detail = detail.substr(colon + 2);
  return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + detail;
}

void only_fields(const std::string& path, const json& obj, const std::string& where,
                 std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : obj.items()) {
    (void)value;
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (const auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    fail(path, where + "'" + key + "': no such field (known: " + list + ")");
  }
}

bool decision(const std::string& path, const json& v, const std::string& field) {
  if (v.is_string() && v.get<std::string>() == "offload") return true;
  if (v.is_string() && v.get<std::string>() == "native") return false;
  fail(path, field + ": " + v.dump() + " is neither \"offload\" nor \"native\"");
}

// An inclusive window [min, max]; max null = no upper limit.
void window(const std::string& path, const json& v, const std::string& field, uint64_t* lo, uint64_t* hi) {
  const bool ok = v.is_array() && v.size() == 2 && v[0].is_number_unsigned() &&
                  (v[1].is_number_unsigned() || v[1].is_null());
  if (!ok) fail(path, field + ": " + v.dump() + " is no window [min, max] of non-negative integers (max null: none)");
  *lo = v[0].get<uint64_t>();
  *hi = v[1].is_null() ? UINT64_MAX : v[1].get<uint64_t>();
  if (*lo > *hi) fail(path, field + ": " + v.dump() + " has min above max");
}

Rule read_rule(const std::string& path, const json& r, size_t index) {
  const std::string at = "rules[" + std::to_string(index) + "]";
  if (!r.is_object()) fail(path, at + ": a rule is an object {\"call\": ..., \"use\": ...}");
  only_fields(path, r, at + ": ", {"call", "ranks", "bytes", "use", "comment"});
  Rule rule;
  rule.calls.assign(settings::call_count(), false);
  if (!r.contains("call")) fail(path, at + ": no \"call\"");
  const json& call = r["call"];
  const json names = call.is_string() ? json::array({call}) : call;
  if (!names.is_array() || names.empty())
    fail(path, at + ".call: a call or group name, or a non-empty list of them");
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string field = at + ".call" + (call.is_string() ? "" : "[" + std::to_string(i) + "]");
    if (!names[i].is_string()) fail(path, field + ": " + names[i].dump() + " is no name");
    const std::vector<bool> sel = settings::calls_named(names[i].get<std::string>());
    if (sel.empty()) fail(path, field + ": '" + names[i].get<std::string>() + "' is no MPI call or group");
    for (size_t c = 0; c < sel.size(); ++c)
      if (sel[c]) rule.calls[c] = true;
  }
  if (r.contains("ranks")) window(path, r["ranks"], at + ".ranks", &rule.min_ranks, &rule.max_ranks);
  if (r.contains("bytes")) {
    for (size_t c = 0; c < rule.calls.size(); ++c)
      if (rule.calls[c] && settings::is_p2p(c))
        fail(path, at + ".bytes: the rule selects point-to-point calls, which are decided per communicator, not "
                        "per message size (give them a rule without \"bytes\")");
    window(path, r["bytes"], at + ".bytes", &rule.min_bytes, &rule.max_bytes);
  }
  if (!r.contains("use")) fail(path, at + ": no \"use\" (\"offload\" or \"native\")");
  rule.offload = decision(path, r["use"], at + ".use");
  return rule;
}

}  // namespace

void Table::index(size_t calls) {
  by_call.assign(calls, {});
  for (uint32_t i = 0; i < rules.size(); ++i)
    for (size_t c = 0; c < calls && c < rules[i].calls.size(); ++c)
      if (rules[i].calls[c]) by_call[c].push_back(i);
}

bool Table::offloads(size_t call, uint64_t ranks, uint64_t bytes) const {
  auto holds = [&](const Rule& r) {
    return call < r.calls.size() && r.calls[call] && ranks >= r.min_ranks && ranks <= r.max_ranks &&
           bytes >= r.min_bytes && bytes <= r.max_bytes;
  };
  if (call < by_call.size()) {
    for (const uint32_t i : by_call[call])
      if (holds(rules[i])) return rules[i].offload;
    return default_offload;
  }
  for (const Rule& r : rules)
    if (holds(r)) return r.offload;
  return default_offload;
}

bool Table::offloads_every_size(size_t call, uint64_t ranks) const {
  for (const Rule& r : rules) {
    if (call >= r.calls.size() || !r.calls[call] || ranks < r.min_ranks || ranks > r.max_ranks) continue;
    if (!r.offload) return false;  // native at some size
    if (r.min_bytes == 0 && r.max_bytes == UINT64_MAX) return true;  // every size left
  }
  return default_offload;
}

bool Table::may_offload(size_t call) const {
  for (const Rule& r : rules)
    if (r.offload && call < r.calls.size() && r.calls[call]) return true;
  return default_offload;
}

uint64_t Table::digest() const {
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 1099511628211ull;
    }
  };
  mix(default_offload);
  for (const Rule& r : rules) {
    for (const bool c : r.calls) mix(c);
    mix(r.min_ranks);
    mix(r.max_ranks);
    mix(r.min_bytes);
    mix(r.max_bytes);
    mix(r.offload);
  }
  return h;
}

Policy policy() {
  const std::string p = config::get_choice("ACCL_POLICY");
  return p == "offload" ? Policy::offload : p == "native" ? Policy::native : Policy::automatic;
}

std::string default_path() {
  // Loaded from the build tree (tests, accl-tune, a developer's run): the
  // sources' copy, which is the one being edited. Installed: the package's.
  Dl_info info{};
  char here[PATH_MAX] = {}, root[PATH_MAX] = {};
  if (dladdr(reinterpret_cast<void*>(&default_path), &info) != 0 && info.dli_fname != nullptr &&
      realpath(info.dli_fname, here) != nullptr && realpath(ACCL_TUNING_BUILD_ROOT, root) != nullptr) {
    const std::string_view object(here), build(root);
    if (object.size() > build.size() && object.starts_with(build) && object[build.size()] == '/')
      return ACCL_TUNING_SOURCE_FILE;
  }
  return ACCL_TUNING_INSTALLED_FILE;
}

std::string selected_path() {
  const std::string set = config::get_string("ACCL_TUNING_FILE");
  return set.empty() ? default_path() : set;
}

Table load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot be read (no such file, or no permission)");
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    fail(path, where_in_text(text, e.byte, e.what()));
  }
  if (!doc.is_object()) fail(path, "the top level is no JSON object");
  only_fields(path, doc, "", {"format", "comment", "measured", "default", "rules"});
  if (!doc.contains("format") || doc["format"] != kFormat)
    fail(path, std::string("format: ") + (doc.contains("format") ? doc["format"].dump() : "missing") + ", want \"" +
                   kFormat + "\"");
  Table t;
  t.path = path;
  if (doc.contains("default")) t.default_offload = decision(path, doc["default"], "default");
  if (doc.contains("rules")) {
    const json& rules = doc["rules"];
    if (!rules.is_array()) fail(path, "rules: a list of rules");
    for (size_t i = 0; i < rules.size(); ++i) t.rules.push_back(read_rule(path, rules[i], i));
  }
  t.index(settings::call_count());
  return t;
}

}  // namespace accl::pmpi::tuning
