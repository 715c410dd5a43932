// SPDX-License-Identifier: Apache-2.0
//
// Names of the shared-memory transport's ring segments in /dev/shm, and the
// start-up sweep that removes those a dead process left behind.
//
// A ring segment has a name only while its link's handshake runs (the sender
// unlinks it as soon as both sides mapped it), but a process killed in that
// window -- a job stopped by a time limit while a peer did not answer --
// leaves it in /dev/shm, holding memory until the host reboots. The name
// says which job and which process made it:
//   /accl-<job hash>-<receiver ip>-<receiver port>-<sender port>-<pid>-<n>
// (job hash: the first 8 bytes of a hash of the job's secret, pid: the
// creating process), so any later process of the same user can tell that its
// owner is gone and remove it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace accl::emu {

struct ShmSegmentName {
  std::string job_hash;  // 16 hex digits
  uint32_t receiver_ip = 0;
  uint16_t receiver_port = 0;
  uint16_t sender_port = 0;
  int pid = 0;           // the process that created it
  uint64_t serial = 0;   // per process
};

// The file name in /dev/shm (no leading '/'); shm_open takes "/" + it.
std::string format_shm_segment_name(const ShmSegmentName& name);
// Nullopt unless `file_name` is exactly what format_shm_segment_name makes.
std::optional<ShmSegmentName> parse_shm_segment_name(std::string_view file_name);

// Unlinks the ring segments in `directory` that this user owns and whose
// creating process no longer exists (kill(pid, 0) fails with ESRCH); other
// files, other users' segments and live processes' segments stay. Returns how
// many it removed. Never throws: a sweep that cannot read the directory
// removes nothing.
size_t remove_stale_shm_segments(const std::string& directory = "/dev/shm");

}  // namespace accl::emu
