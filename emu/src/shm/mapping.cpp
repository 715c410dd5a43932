// SPDX-License-Identifier: Apache-2.0
#include "mapping.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

namespace accl::emu::transport_detail {
namespace shm __attribute__((visibility("hidden"))) {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, std::weak_ptr<Mapping>>& registry() {
  static std::map<std::string, std::weak_ptr<Mapping>> r;
  return r;
}

}  // namespace

void prefault_segment(void* base, size_t bytes, bool creator, bool writable) {
#if defined(MADV_POPULATE_WRITE) && defined(MADV_POPULATE_READ)
  (void)::madvise(base, bytes, writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);  // best effort: Linux 5.14+
#else
  (void)writable;
#endif
  auto* p = static_cast<volatile std::byte*>(base);
  for (size_t off = 0; off < bytes; off += kPageBytes) {
    if (creator) p[off] = std::byte{0};
    else (void)p[off];
  }
}

bool reserve_pages(int fd, size_t bytes) {
  int r = 0;
  do r = ::fallocate(fd, 0, 0, static_cast<off_t>(bytes));
  while (r != 0 && errno == EINTR);
  return r == 0 || errno == EOPNOTSUPP;
}

Mapping::~Mapping() {
  ::munmap(base_, bytes_);
  std::lock_guard lock(registry_mutex());
  auto it = registry().find(name_);
  if (it != registry().end() && it->second.expired()) registry().erase(it);
}

std::shared_ptr<Mapping> Mapping::create(const std::string& name, size_t ring_bytes) {
  UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return nullptr;
  const size_t bytes = kControlBytes + ring_bytes;
  void* base = MAP_FAILED;
  // The pages are reserved now (prefault_segment touches them all): with
  // /dev/shm full the link is refused here, with an error, instead of the
  // touch dying of SIGBUS.
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) == 0 && reserve_pages(fd.get(), bytes))
    base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    int saved = errno;
    ::shm_unlink(name.c_str());
    errno = saved;
    return nullptr;
  }
  prefault_segment(base, bytes, /*creator=*/true);
  auto* ctl = new (base) RingControl{};
  ctl->magic = kRingMagic;
  ctl->version = kRingVersion;
  ctl->ring_bytes = ring_bytes;
  ctl->sender_pid = static_cast<uint32_t>(::getpid());
  auto mapping = std::make_shared<Mapping>(name, base, bytes);
  std::lock_guard lock(registry_mutex());
  registry()[name] = mapping;
  return mapping;
}

std::shared_ptr<Mapping> Mapping::open(const std::string& name, size_t ring_bytes, std::string& error) {
  {
    std::lock_guard lock(registry_mutex());
    auto it = registry().find(name);
    if (it != registry().end())
      if (auto existing = it->second.lock()) return validate(existing, ring_bytes, error) ? existing : nullptr;
  }
  UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd) {
    error = std::string("shm_open: ") + std::strerror(errno);
    return nullptr;
  }
  struct stat st {};
  const size_t bytes = kControlBytes + ring_bytes;
  if (::fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) != bytes || st.st_uid != ::geteuid()) {
    error = "segment size or owner does not match";
    return nullptr;
  }
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    error = std::string("mmap: ") + std::strerror(errno);
    return nullptr;
  }
  auto mapping = std::make_shared<Mapping>(name, base, bytes);
  if (!validate(mapping, ring_bytes, error)) return nullptr;
  prefault_segment(base, bytes, /*creator=*/false);
  return mapping;
}

bool Mapping::validate(const std::shared_ptr<Mapping>& m, size_t ring_bytes, std::string& error) {
  const RingControl& ctl = m->control();
  if (ctl.magic != kRingMagic || ctl.version != kRingVersion || ctl.ring_bytes != ring_bytes ||
      m->ring_bytes() != ring_bytes) {
    error = "control page does not match the handshake";
    return false;
  }
  return true;
}

UniqueFd create_shared_memfd(const char* name, size_t bytes, void*& base) {
  base = nullptr;
  UniqueFd fd(static_cast<int>(::syscall(SYS_memfd_create, name, MFD_CLOEXEC)));
  if (!fd || ::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) return UniqueFd();
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return UniqueFd();
  base = p;
  return fd;
}

void* map_peer_memfd(int fd, size_t bytes, int prot, const char* what, std::string& error) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes || st.st_uid != ::geteuid()) {
    error = std::string(what) + " size or owner does not match";
    return nullptr;
  }
  void* base = ::mmap(nullptr, bytes, prot, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    error = std::string("mmap ") + what + ": " + std::strerror(errno);
    return nullptr;
  }
  return base;
}

}  // namespace shm
}  // namespace accl::emu::transport_detail
