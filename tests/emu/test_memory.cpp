// SPDX-License-Identifier: Apache-2.0
// Exchange memory MMIO, memory banks, host memory and address resolution.
#include "emu_test_util.hpp"

#include "memory.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <thread>

namespace accl::emu::test {
namespace {

TEST(EmuMemory, ExchangeMemoryBounds) {
  auto d = make_device();
  d->write(0x0, 1);
  d->write(0x1FFC, 0xDEADBEEF);
  EXPECT_EQ(d->read(0x1FFC), 0xDEADBEEFu);
  EXPECT_EQ(d->read(0x0), 1u);
  EXPECT_THROW(d->read(0x2000), std::out_of_range);
  EXPECT_THROW(d->write(0x2000, 1), std::out_of_range);
  EXPECT_THROW(d->read(0x2), std::out_of_range);  // misaligned
  EXPECT_THROW(d->write(0xFFFFFFFC, 1), std::out_of_range);
  try {
    d->read(0x4000);
    FAIL();
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("0x4000"), std::string::npos) << e.what();
  }
}

TEST(EmuMemory, FirmwareExchangeMemoryAccessNeverThrows) {
  auto d = make_device();
  auto& dp = d->dataplane();
  dp.xmem_write(0x10, 42);
  EXPECT_EQ(dp.xmem_read(0x10), 42u);
  EXPECT_EQ(dp.xmem_read(0x2000), 0u);
  dp.xmem_write(0x3000, 1);  // ignored and logged
  EXPECT_EQ(dp.hw_id() & abi::kHwIdStackMask, 1u);
  EXPECT_TRUE(dp.capabilities() & abi::kCapValid);
  EXPECT_TRUE(dp.capabilities() & abi::kCapRendezvous);
}

TEST(EmuMemory, BankAddressesAndAlignment) {
  auto d = make_device();
  auto a = d->allocate(100, MemoryKind::device, 0);
  auto b = d->allocate(5000, MemoryKind::device, 0);
  auto c = d->allocate(10, MemoryKind::device, 1);
  EXPECT_EQ(a.address >> 40, 1u);
  EXPECT_EQ(c.address >> 40, 2u);
  EXPECT_EQ(a.address % 4096, 0u);
  EXPECT_EQ(b.address % 4096, 0u);
  EXPECT_EQ(b.address - a.address, 4096u);  // first fit, 4 KiB granules
  EXPECT_THROW(d->allocate(10, MemoryKind::device, 2), std::invalid_argument);
  // Freed space is reused first-fit; neighbours coalesce.
  d->free(a);
  d->free(b);
  auto e = d->allocate(8192, MemoryKind::device, 0);
  EXPECT_EQ(e.address, a.address);
  d->free(e);
  d->free(c);
}

TEST(EmuMemory, BankExhaustionThrowsBadAlloc) {
  auto o = options();
  o.bank_bytes = 1 << 20;
  EmuDevice d(o, settings());
  auto a = d.allocate(1 << 20, MemoryKind::device, 0);
  EXPECT_THROW(d.allocate(1, MemoryKind::device, 0), std::bad_alloc);
  d.free(a);
  EXPECT_NO_THROW(d.free(d.allocate(1, MemoryKind::device, 0)));
}

// Resident pages of a bank in [from, to) (bytes from its start), by mincore().
size_t resident_pages(const Bank& bank, uint64_t from, uint64_t to) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((to - from) / page);
  if (mincore(bank.translate(bank.base() + from, to - from), to - from, in.data()) != 0) return SIZE_MAX;
  size_t n = 0;
  for (unsigned char c : in) n += c & 1u;
  return n;
}

// The overflow store's pages after a burst of unexpected data: kept while
// anything lives in the store; once a burst deeper than the kept part has
// drained, the pages beyond that part go back (they must not stay resident
// for the rest of the run), the kept part's stay (no refaults for the
// everyday traffic first fit puts there).
TEST(EmuMemory, AnEmptiedBankReleasesTheDeepPartOfABurst) {
  constexpr uint64_t kKeep = 4 << 20, kBlock = 1 << 20;
  Bank bank(uint64_t{0x100} << 40, 32 << 20, 64, kKeep);
  // A burst: `n` blocks allocated and written (their pages become resident).
  auto burst = [&](int n) {
    std::vector<uint64_t> blocks;
    for (int i = 0; i < n; ++i) {
      auto a = bank.allocate(kBlock);
      if (!a) break;
      std::memset(bank.translate(*a, kBlock), 0x5A, kBlock);
      blocks.push_back(*a);
    }
    return blocks;
  };
  const size_t pages_per_block = kBlock / static_cast<size_t>(sysconf(_SC_PAGESIZE));

  std::vector<uint64_t> blocks = burst(8);
  ASSERT_EQ(blocks.size(), 8u);
  EXPECT_GE(resident_pages(bank, 0, 8 * kBlock), 8 * pages_per_block);
  for (size_t i = 0; i + 1 < blocks.size(); ++i) bank.free(blocks[i]);
  EXPECT_EQ(bank.touched_bytes(), 8 * kBlock) << "released while a block was still allocated";
  EXPECT_GE(resident_pages(bank, kKeep, 8 * kBlock), pages_per_block);
  bank.free(blocks.back());
  EXPECT_EQ(bank.touched_bytes(), kKeep);
  EXPECT_EQ(resident_pages(bank, kKeep, 8 * kBlock), 0u);
  EXPECT_GE(resident_pages(bank, 0, kKeep), 4 * pages_per_block) << "the kept part was released too";
  // The released part reads as zeros and is usable as before.
  EXPECT_EQ(*bank.translate(bank.base() + kKeep, 1), std::byte{0});
  blocks = burst(5);
  ASSERT_EQ(blocks.size(), 5u);
  EXPECT_EQ(blocks.back() - bank.base(), kKeep);
  for (uint64_t a : blocks) bank.free(a);

  // A burst within the kept part releases nothing (no madvise per message).
  std::vector<uint64_t> small = burst(2);
  ASSERT_EQ(small.size(), 2u);
  for (uint64_t a : small) bank.free(a);
  EXPECT_EQ(bank.touched_bytes(), kKeep);
  EXPECT_GE(resident_pages(bank, 0, 2 * kBlock), 2 * pages_per_block);
}

TEST(EmuMemory, CopyIsBoundsChecked) {
  auto o = options();
  o.bank_bytes = 1 << 20;
  EmuDevice d(o, settings());
  auto a = d.allocate(4096, MemoryKind::device, 0);
  std::vector<uint8_t> data(4096);
  std::iota(data.begin(), data.end(), 0);
  d.copy_to_device(a.address, data.data(), data.size());
  std::vector<uint8_t> back(4096);
  d.copy_from_device(a.address, back.data(), back.size());
  EXPECT_EQ(back, data);
  uint64_t end = (uint64_t{1} << 40) + (1 << 20);
  EXPECT_THROW(d.copy_to_device(end - 10, data.data(), 20), std::out_of_range);   // runs past the bank
  EXPECT_THROW(d.copy_from_device(0x1234, back.data(), 4), std::out_of_range);    // no bank
  EXPECT_THROW(d.copy_from_device(uint64_t{9} << 40, back.data(), 4), std::out_of_range);
  EXPECT_NO_THROW(d.copy_to_device(end - 10, data.data(), 10));
}

TEST(EmuMemory, HostOnlyAndMapHost) {
  auto d = make_device();
  auto h = d->allocate(1000, MemoryKind::host_only, 0);
  ASSERT_NE(h.host_ptr, nullptr);
  EXPECT_EQ(h.address, reinterpret_cast<uintptr_t>(h.host_ptr));
  EXPECT_EQ(h.address % 4096, 0u);
  std::byte* p = nullptr;
  EXPECT_EQ(d->memory().resolve(h.address, true, 1000, p), 0u);
  EXPECT_EQ(p, h.host_ptr);
  EXPECT_EQ(d->memory().resolve(h.address + 10, true, 4096, p), static_cast<uint32_t>(abi::kDmaSlaveError));

  std::vector<float> user(256);
  auto m = d->map_host(user.data(), user.size() * sizeof(float));
  EXPECT_EQ(m.address, reinterpret_cast<uintptr_t>(user.data()));
  EXPECT_EQ(d->memory().resolve(m.address + 16, true, 64, p), 0u);
  EXPECT_EQ(reinterpret_cast<void*>(p), static_cast<void*>(user.data() + 4));
  // copy_to_device also accepts host_only addresses.
  float v = 3.5f;
  d->copy_to_device(m.address + 4, &v, 4);
  EXPECT_EQ(user[1], 3.5f);
  d->free(m);
  EXPECT_EQ(d->memory().resolve(m.address, true, 4, p), static_cast<uint32_t>(abi::kDmaDecodeError));
  d->free(h);
  // Unregistered host memory is not reachable.
  int local = 0;
  EXPECT_EQ(d->memory().resolve(reinterpret_cast<uintptr_t>(&local), true, 4, p),
            static_cast<uint32_t>(abi::kDmaDecodeError));
}

// Issue 38: MPI_IN_PLACE ((void*)1) handed on as a buffer was registered as
// host memory at address 1 and the first transfer crashed in the emulator.
// The null page is never host memory: map_host refuses it and a host resolve
// there fails with a decode error instead of touching it.
TEST(EmuMemory, NullPageIsNeverHostMemory) {
  auto d = make_device();
  EXPECT_THROW(d->map_host(nullptr, 64), std::invalid_argument);
  EXPECT_THROW(d->map_host(reinterpret_cast<void*>(uintptr_t{1}), 256), std::invalid_argument);
  EXPECT_THROW(d->map_host(reinterpret_cast<void*>(uintptr_t{4095}), 1), std::invalid_argument);
  auto empty = d->map_host(nullptr, 0);  // describes no memory: allowed
  std::byte* p = nullptr;
  for (uint64_t addr : {uint64_t{0}, uint64_t{1}, uint64_t{4095}})
    EXPECT_EQ(d->memory().resolve(addr, true, 4, p), static_cast<uint32_t>(abi::kDmaDecodeError)) << addr;
  std::vector<std::byte> buf(8);
  EXPECT_THROW(d->copy_to_device(0, buf.data(), 8), std::out_of_range);
  EXPECT_THROW(d->copy_from_device(1, buf.data(), 8), std::out_of_range);
  d->free(empty);
}

TEST(EmuMemory, ResolveErrors) {
  auto o = options();
  o.bank_bytes = 1 << 20;
  EmuDevice d(o, settings());
  std::byte* p = nullptr;
  EXPECT_EQ(d.memory().resolve(0, false, 4, p), static_cast<uint32_t>(abi::kDmaDecodeError));
  EXPECT_EQ(d.memory().resolve((uint64_t{1} << 40) + (1 << 20) - 4, false, 8, p),
            static_cast<uint32_t>(abi::kDmaSlaveError));
  EXPECT_EQ(d.memory().resolve((uint64_t{1} << 40) + (1 << 20) - 4, false, 4, p), 0u);
  EXPECT_EQ(d.memory().resolve(~uint64_t{0}, false, 4, p), static_cast<uint32_t>(abi::kDmaDecodeError));
}

// Issue 7: the overflow store holds queued eager payloads; no address a
// user, driver or peer names (move result, RX buffer, rendezvous window,
// copy_to/from_device) may reach it. Only move operands may read it.
TEST(EmuMemory, OverflowStoreIsNotAddressable) {
  auto d = make_device();
  auto& mem = d->memory();
  auto addr = mem.overflow().allocate(256);
  ASSERT_TRUE(addr.has_value());
  const uint64_t inside = *addr + 64;
  std::byte* p = nullptr;
  EXPECT_EQ(mem.resolve(inside, false, 64, p), static_cast<uint32_t>(abi::kDmaDecodeError));
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(mem.resolve(mem.overflow().base(), false, 0, p), static_cast<uint32_t>(abi::kDmaDecodeError));
  std::vector<std::byte> buf(64);
  EXPECT_THROW(d->copy_to_device(inside, buf.data(), 64), std::out_of_range);
  EXPECT_THROW(d->copy_from_device(inside, buf.data(), 64), std::out_of_range);
  // A rendezvous window or an RX buffer there is refused.
  fw::Window w;
  w.peer_ip = 0x7F000001;
  w.peer_port = 4000;
  w.addr = inside;
  w.bytes = 64;
  EXPECT_EQ(d->dataplane().open_window(w), static_cast<uint32_t>(abi::kInvalidArgument));
  // The firmware still reads queued payloads from it (move operands).
  const std::byte* src = nullptr;
  EXPECT_EQ(mem.resolve_source(inside, false, 64, src), 0u);
  EXPECT_EQ(src, mem.overflow().translate(inside, 64));
  EXPECT_EQ(mem.resolve_source(inside, false, mem.overflow().size(), src),
            static_cast<uint32_t>(abi::kDmaSlaveError));
  mem.overflow().free(*addr);
}

TEST(EmuMemory, ConcurrentAllocateAndFree) {
  auto d = make_device();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        auto a = d->allocate(4096 * (1 + i % 7), MemoryKind::device, i % 2);
        uint32_t v = static_cast<uint32_t>(i);
        d->copy_to_device(a.address, &v, 4);
        d->free(a);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(d->memory().overflow().used_bytes(), 0u);
}

TEST(EmuMemory, RangeAllocatorCoalesces) {
  RangeAllocator r(64 * 4096, 4096);
  auto a = r.allocate(4096), b = r.allocate(4096), c = r.allocate(4096);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(r.free(*b), 4096u);
  EXPECT_EQ(r.free(*b), 0u);  // double free is detected
  EXPECT_EQ(r.free(*a), 4096u);
  EXPECT_EQ(r.free(*c), 4096u);
  EXPECT_EQ(r.free_ranges(), 1u);
  EXPECT_EQ(r.used_bytes(), 0u);
  EXPECT_FALSE(r.allocate(65 * 4096));
}

}  // namespace
}  // namespace accl::emu::test
