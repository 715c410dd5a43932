// SPDX-License-Identifier: Apache-2.0
//
// Ring segment names and the sweep of dead processes' segments (see
// shm_segments.hpp).
#include "shm_segments.hpp"

#include <accl/log.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <vector>

namespace accl::emu {

namespace {

constexpr std::string_view kPrefix = "accl-";
constexpr size_t kJobHashDigits = 16;
constexpr size_t kIpDigits = 8;

bool is_hex(std::string_view s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return !s.empty();
}

// A whole field as an unsigned number in `base`, with no sign, no leading
// zero (except "0" itself) and nothing after it: so that parse(format(x))
// is x and each name has exactly one spelling.
template <typename T>
std::optional<T> whole_number(std::string_view s, int base) {
  if (s.empty() || (s.size() > 1 && s[0] == '0' && base == 10)) return std::nullopt;
  T value{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, base);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

// Whether the process `pid` is certainly gone. EPERM means it exists under
// another user; only ESRCH says no process has that id.
bool process_is_gone(int pid) { return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace

std::string format_shm_segment_name(const ShmSegmentName& name) {
  char ip[kIpDigits + 1];
  std::snprintf(ip, sizeof ip, "%08x", name.receiver_ip);
  return std::string(kPrefix) + name.job_hash + "-" + ip + "-" + std::to_string(name.receiver_port) + "-" +
         std::to_string(name.sender_port) + "-" + std::to_string(name.pid) + "-" + std::to_string(name.serial);
}

std::optional<ShmSegmentName> parse_shm_segment_name(std::string_view file_name) {
  if (file_name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::vector<std::string_view> fields;
  std::string_view rest = file_name.substr(kPrefix.size());
  for (;;) {
    const size_t dash = rest.find('-');
    fields.push_back(rest.substr(0, dash));
    if (dash == std::string_view::npos) break;
    rest.remove_prefix(dash + 1);
  }
  if (fields.size() != 6) return std::nullopt;
  if (fields[0].size() != kJobHashDigits || !is_hex(fields[0])) return std::nullopt;
  if (fields[1].size() != kIpDigits || !is_hex(fields[1])) return std::nullopt;
  const auto ip = whole_number<uint32_t>(fields[1], 16);
  const auto receiver_port = whole_number<uint16_t>(fields[2], 10);
  const auto sender_port = whole_number<uint16_t>(fields[3], 10);
  const auto pid = whole_number<int>(fields[4], 10);
  const auto serial = whole_number<uint64_t>(fields[5], 10);
  if (!ip || !receiver_port || !sender_port || !pid || !serial || *pid <= 0) return std::nullopt;
  ShmSegmentName name;
  name.job_hash = std::string(fields[0]);
  name.receiver_ip = *ip;
  name.receiver_port = *receiver_port;
  name.sender_port = *sender_port;
  name.pid = *pid;
  name.serial = *serial;
  return name;
}

size_t remove_stale_shm_segments(const std::string& directory) {
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) return 0;
  const uid_t me = ::geteuid();
  size_t removed = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const auto name = parse_shm_segment_name(entry->d_name);
    if (!name || !process_is_gone(name->pid)) continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != me)
      continue;
    // shm_unlink("/x") is unlink("/dev/shm/x"); unlinkat also serves the
    // directories tests sweep.
    const int rc = ::unlinkat(::dirfd(dir), entry->d_name, 0);
    if (rc == 0) {
      ++removed;
      ACCL_LOG_INFO("shm: removed {} ({} bytes), left behind by process {}, which no longer exists",
                    entry->d_name, st.st_size, name->pid);
    } else if (errno != ENOENT) {  // ENOENT: another process swept it first
      ACCL_LOG_WARN("shm: cannot remove stale segment {} of dead process {}: {}", entry->d_name, name->pid,
                    std::strerror(errno));
    }
  }
  ::closedir(dir);
  return removed;
}

}  // namespace accl::emu
