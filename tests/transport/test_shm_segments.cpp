// SPDX-License-Identifier: Apache-2.0
//
// Ring segment names in /dev/shm and the start-up sweep: a job killed while a
// link's handshake ran leaves its segment behind (the name is unlinked only
// once both sides mapped it); the next shared-memory transport on the host
// removes the segments whose creating process is gone, and nothing else.
#include "shm/shm_segments.hpp"
#include "transport_test_util.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace accl::emu::test {
namespace {

// A process id no process can have: ids run from 1 to pid_max - 1.
int impossible_pid() {
  std::ifstream in("/proc/sys/kernel/pid_max");
  int pid_max = 0;
  in >> pid_max;
  return pid_max > 0 ? pid_max : 4194304;  // the kernel's upper limit for pid_max
}

ShmSegmentName segment(int pid, uint64_t serial) {
  return ShmSegmentName{"0123456789abcdef", 0x7F000001u, 40000, 40001, pid, serial};
}

bool exists_in_dev_shm(const std::string& file_name) {
  struct stat st {};
  return ::stat(("/dev/shm/" + file_name).c_str(), &st) == 0;
}

// Creates /dev/shm/<file_name> as shm_open does, with a page of content.
void create_in_dev_shm(const std::string& file_name) {
  const int fd = ::shm_open(("/" + file_name).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << file_name << ": " << std::strerror(errno);
  ASSERT_EQ(::ftruncate(fd, 4096), 0);
  ::close(fd);
}

TEST(ShmSegmentNames, RoundTrip) {
  const ShmSegmentName in = segment(1234, 7);
  const std::string text = format_shm_segment_name(in);
  EXPECT_EQ(text, "accl-0123456789abcdef-7f000001-40000-40001-1234-7");
  const auto out = parse_shm_segment_name(text);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->job_hash, in.job_hash);
  EXPECT_EQ(out->receiver_ip, in.receiver_ip);
  EXPECT_EQ(out->receiver_port, in.receiver_port);
  EXPECT_EQ(out->sender_port, in.sender_port);
  EXPECT_EQ(out->pid, in.pid);
  EXPECT_EQ(out->serial, in.serial);
}

TEST(ShmSegmentNames, OtherFilesAreNotSegments) {
  for (const char* name : {
           "vader_segment.vm.0.3df60001.0",                           // Open MPI's
           "accl-",                                                   // prefix only
           "accl-0123456789abcdef-7f000001-40000-40001-1234",         // a field short
           "accl-0123456789abcdef-7f000001-40000-40001-1234-7-1",     // a field more
           "accl-0123456789ABCDEF-7f000001-40000-40001-1234-7",       // not our hex
           "accl-0123456789abcde-7f000001-40000-40001-1234-7",        // short hash
           "accl-0123456789abcdef-7f00001-40000-40001-1234-7",        // short ip
           "accl-0123456789abcdef-7f000001-70000-40001-1234-7",       // port out of range
           "accl-0123456789abcdef-7f000001-40000-40001-0-7",          // pid 0
           "accl-0123456789abcdef-7f000001-40000-40001-01234-7",      // leading zero
           "accl-0123456789abcdef-7f000001-40000-40001-+1234-7",      // sign
           "accl-0123456789abcdef-7f000001-40000-40001-1234-7x",      // trailing junk
           "accl-0123456789abcdef-7f000001-40000-40001--7",           // empty field
       })
    EXPECT_FALSE(parse_shm_segment_name(name)) << name;
}

// The sweep in a directory of our own (no other process can touch it):
// exactly the dead process's segment goes.
TEST(ShmSegmentSweep, RemovesOnlyDeadProcessesSegments) {
  char dir_template[] = "/tmp/accl-shm-sweep-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const std::string dead = format_shm_segment_name(segment(impossible_pid(), 1));
  const std::string live = format_shm_segment_name(segment(static_cast<int>(::getpid()), 2));
  const std::string parent = format_shm_segment_name(segment(static_cast<int>(::getppid()), 3));
  const std::string other = "accl-not-a-segment-" + std::to_string(impossible_pid());
  for (const std::string& name : {dead, live, parent, other}) std::ofstream(dir + "/" + name) << "x";

  EXPECT_EQ(remove_stale_shm_segments(dir), 1u);
  auto exists = [&](const std::string& name) {
    struct stat st {};
    return ::stat((dir + "/" + name).c_str(), &st) == 0;
  };
  EXPECT_FALSE(exists(dead));
  EXPECT_TRUE(exists(live));
  EXPECT_TRUE(exists(parent));
  EXPECT_TRUE(exists(other));
  EXPECT_EQ(remove_stale_shm_segments(dir), 0u) << "a second sweep finds nothing";
  for (const std::string& name : {live, parent, other}) ::unlink((dir + "/" + name).c_str());
  ::rmdir(dir.c_str());
  EXPECT_EQ(remove_stale_shm_segments(dir), 0u) << "a missing directory is no error";
}

// End to end in /dev/shm: a segment left there by a killed process is gone
// once a new shared-memory transport started; a live process's stays.
TEST(ShmSegmentSweep, NewTransportRemovesSegmentsOfDeadProcesses) {
  // Serials no transport of this process reaches.
  const std::string dead = format_shm_segment_name(segment(impossible_pid(), 900000001));
  const std::string live = format_shm_segment_name(segment(static_cast<int>(::getpid()), 900000002));
  create_in_dev_shm(dead);
  create_in_dev_shm(live);
  ASSERT_TRUE(exists_in_dev_shm(dead));
  {
    auto transport = make_shm_transport(options());
    ASSERT_NE(transport, nullptr);
  }
  EXPECT_FALSE(exists_in_dev_shm(dead)) << dead << " outlived its process";
  EXPECT_TRUE(exists_in_dev_shm(live)) << live << " belongs to a live process";
  ::shm_unlink(("/" + dead).c_str());
  ::shm_unlink(("/" + live).c_str());
}

}  // namespace
}  // namespace accl::emu::test
