// SPDX-License-Identifier: Apache-2.0
//
// Voluntary context switches (the thread blocked and was woken) of this
// process's threads named `name`, summed; -1 if /proc cannot be read. The
// emulator names its threads (accl-firmware, accl-shm-rx, ...), so a test can
// count how often one kind of thread was woken.
#pragma once

#include <dirent.h>

#include <fstream>
#include <string>

namespace accl::test {

inline long voluntary_switches(const std::string& name) {
  long total = 0;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const std::string task = std::string("/proc/self/task/") + entry->d_name;
    std::ifstream comm(task + "/comm");
    std::string line;
    if (!std::getline(comm, line) || line != name) continue;
    std::ifstream status(task + "/status");
    while (std::getline(status, line))
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) total += std::stol(line.substr(line.find(':') + 1));
  }
  ::closedir(dir);
  return total;
}

}  // namespace accl::test
