// SPDX-License-Identifier: Apache-2.0
#include <accl_pmpi/settings.hpp>
#include <accl_pmpi/tuning.hpp>

#include <accl/config.hpp>
#include <accl_devices/devices.hpp>

#include <algorithm>
#include <cctype>
#include <string_view>

namespace accl::pmpi::settings {
namespace {

struct CallRow {
  const char* setting;  // "allreduce"
  std::string_view group;
};
constexpr CallRow kCalls[] = {
#define CALL(e, mpi, setting, group) {setting, #group},
#include "calls.def"
#undef CALL
};

std::string lower(std::string v) {
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v;
}

const char* kCallsAllowed =
    "a comma list of MPI calls (send, allreduce or MPI_Allreduce, ...) and groups (p2p, coll, icoll, all), "
    "optionally led by ^ to negate it";

// Does list item `name` (lower case, no MPI_ prefix) select `row`?
bool selects(const std::string& name, const CallRow& row) {
  return name == row.setting || name == "all" || (name == "p2p" && row.group == "p2p") ||
         (name == "coll" && row.group == "coll") ||
         ((name == "icoll" || name == "nonblocking") && row.group == "icoll");
}

}  // namespace

std::vector<bool> calls_named(const std::string& item) {
  std::string name = lower(item);
  std::erase_if(name, [](unsigned char c) { return std::isspace(c); });
  if (name.starts_with("mpi_")) name.erase(0, 4);
  std::vector<bool> out(std::size(kCalls), false);
  bool any = false;
  for (size_t c = 0; c < std::size(kCalls); ++c)
    if (!name.empty() && selects(name, kCalls[c])) out[c] = any = true;
  if (!any) out.clear();
  return out;
}

bool is_p2p(size_t call) { return call < std::size(kCalls) && kCalls[call].group == "p2p"; }

size_t call_count() { return std::size(kCalls); }

std::vector<std::string> call_words() {
  std::vector<std::string> out;
  for (const auto& c : kCalls) {
    std::string w = c.setting;
    std::transform(w.begin(), w.end(), w.begin(), [](unsigned char ch) { return std::toupper(ch); });
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<bool> offload_calls(const std::string& text) {
  constexpr size_t kNumCalls = std::size(kCalls);
  std::string list = text;
  bool negate = false;
  const auto first = list.find_first_not_of(" \t");
  if (first == std::string::npos) return std::vector<bool>(kNumCalls, true);  // unset: all
  if (list[first] == '^') {
    negate = true;
    list.erase(0, first + 1);
  }
  std::vector<bool> enabled(kNumCalls, negate);
  size_t named = 0;
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    std::string name = lower(list.substr(pos, end - pos));
    pos = end + 1;
    std::erase_if(name, [](unsigned char c) { return std::isspace(c); });
    if (name.starts_with("^")) name.erase(0, 1);  // "^send,^recv" negates as "^send,recv" does
    if (name.starts_with("mpi_")) name.erase(0, 4);
    if (name.empty()) continue;
    const std::vector<bool> named_calls = calls_named(name);
    if (named_calls.empty())
      throw config::SettingError("ACCL_OFFLOAD_CALLS", text, "'" + name + "' is no MPI call or group", kCallsAllowed);
    for (size_t c = 0; c < kNumCalls; ++c)
      if (named_calls[c]) enabled[c] = !negate;
    ++named;
  }
  if (named == 0) throw config::SettingError("ACCL_OFFLOAD_CALLS", text, "names no call", kCallsAllowed);
  return enabled;
}

void validate(int world_size) {
  config::validate(config::Layer::pmpi);
  (void)offload_calls(config::get_string("ACCL_OFFLOAD_CALLS"));
  // The table decides only under ACCL_POLICY=auto, but a file named explicitly is checked whatever the
  // policy: a mistake in it is reported, never silently ignored.
  if (tuning::policy() == tuning::Policy::automatic || !config::get_string("ACCL_TUNING_FILE").empty())
    (void)tuning::load(tuning::selected_path());
  devices::check_job(world_size);
}

std::vector<std::string> unknown_setting_warnings() {
  std::vector<std::string> out;
  for (const auto& u : config::unknown_settings(call_words())) out.push_back(config::describe(u));
  return out;
}

}  // namespace accl::pmpi::settings
