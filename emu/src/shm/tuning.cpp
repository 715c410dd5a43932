// SPDX-License-Identifier: Apache-2.0
//
// The shared-memory transport's tuning from the host and the settings: the
// poll lease, and whether direct writes pay (measured once per process).
#include "transport_tuning.hpp"

#include <accl/config.hpp>
#include <accl/log.hpp>
#include <accl/spin.hpp>

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace accl::emu {

unsigned host_cpu_count(unsigned host_cores) {
  return host_cores != 0 ? host_cores : std::thread::hardware_concurrency();
}

std::chrono::microseconds shm_poll_lease(int64_t configured_us, unsigned host_processes, unsigned cores) {
  if (configured_us > 0) return std::chrono::microseconds(configured_us);
  const bool oversubscribed = host_processes > 0 && !core_per_process(host_processes, cores);
  return oversubscribed ? std::chrono::microseconds(10'000) : std::chrono::microseconds(1'000);
}

size_t shm_direct_min_for(double kernel_copy_ns, double memcpy_ns) {
  // The kernel copy failed, or no usable clock (NaN and infinities included).
  if (!(kernel_copy_ns > 0) || !(memcpy_ns > 0) || !std::isfinite(kernel_copy_ns) || !std::isfinite(memcpy_ns))
    return 0;
  return kernel_copy_ns <= kShmDirectMaxSlowdown * memcpy_ns ? kShmDirectDefaultMinBytes : 0;
}

namespace {

// Copies 1 MiB within this process with memcpy and with process_vm_writev,
// alternating, 8 times each, and decides on the fastest of each (about a
// millisecond, once per process).
size_t measure_direct_min_bytes() {
  constexpr size_t kBytes = size_t{1} << 20;
  std::vector<std::byte> src(kBytes, std::byte{1});
  std::vector<std::byte> dst(kBytes, std::byte{2});
  iovec local{src.data(), kBytes};
  iovec remote{dst.data(), kBytes};
  using Ns = std::chrono::duration<double, std::nano>;
  double best_memcpy = std::numeric_limits<double>::infinity();
  double best_kernel = best_memcpy;
  for (int round = 0; round < 8; ++round) {
    const auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), kBytes);
    const auto t1 = Clock::now();
    // dst escapes into the system call, so the memcpy before it stays.
    const ssize_t copied = ::process_vm_writev(::getpid(), &local, 1, &remote, 1, 0);
    const int err = errno;
    const auto t2 = Clock::now();
    if (copied != static_cast<ssize_t>(kBytes)) {
      ACCL_LOG_INFO("shm: direct writes off (process_vm_writev: {})", copied < 0 ? std::strerror(err) : "short copy");
      return 0;
    }
    best_memcpy = std::min(best_memcpy, Ns(t1 - t0).count());
    best_kernel = std::min(best_kernel, Ns(t2 - t1).count());
  }
  const size_t min_bytes = shm_direct_min_for(best_kernel, best_memcpy);
  ACCL_LOG_INFO("shm: direct writes {} (1 MiB: process_vm_writev {:.1f} us, memcpy {:.1f} us)",
                min_bytes != 0 ? "from " + std::to_string(min_bytes) + " bytes" : std::string("off"),
                best_kernel / 1000, best_memcpy / 1000);
  return min_bytes;
}

}  // namespace

size_t shm_direct_min_bytes(std::optional<size_t> configured) {
  if (configured) return *configured;
  static const size_t measured = measure_direct_min_bytes();
  return measured;
}

std::unique_ptr<Transport> make_shm_transport(const TransportOptions& options) {
  ShmTuning tuning;
  std::optional<size_t> direct_bytes;  // unset: measured
  if (config::get("ACCL_EMU_SHM_DIRECT_BYTES"))
    direct_bytes = static_cast<size_t>(std::max<int64_t>(0, config::get_int("ACCL_EMU_SHM_DIRECT_BYTES")));
  tuning.direct_min_bytes = shm_direct_min_bytes(direct_bytes);
  tuning.share_copies = config::get_bool("ACCL_EMU_SHM_SHARED_COPY");
  tuning.poll_lease = shm_poll_lease(config::get_int("ACCL_EMU_POLL_LEASE_US"), options.host_processes,
                                     host_cpu_count(options.host_cores));
  return make_shm_transport(options, tuning);
}

}  // namespace accl::emu
