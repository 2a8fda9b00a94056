// The CPU caching allocator (core/allocator.h): block sizes, alignment, reuse, and blocks of
// 2 MiB and more on transparent huge pages.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "core/allocator.h"
#include "tests/cli_run.h"

using namespace relpos;

namespace {

constexpr size_t kMiB = size_t(1) << 20;

// AnonHugePages (kB) of the mapping of /proc/self/smaps that holds address p (-1: not found).
long anon_huge_kb(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const auto at = reinterpret_cast<uintptr_t>(p);
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find('-')) {
      inside = at >= lo && at < hi;
      continue;
    }
    long kb = 0;
    if (inside && std::sscanf(line.c_str(), "AnonHugePages: %ld kB", &kb) == 1) return kb;
  }
  return -1;
}

}  // namespace

TEST_CASE("allocator: small blocks in 64-byte steps, large ones in 4 KiB pages, 2 MiB and up in whole 2 MiB pages",
          "[core][allocator]") {
  CHECK(cpu_allocator::block_bytes(0) == 64);
  CHECK(cpu_allocator::block_bytes(100) == 128);
  CHECK(cpu_allocator::block_bytes(5000) == 8192);
  CHECK(cpu_allocator::block_bytes(2 * kMiB - 1) == 2 * kMiB);  // 4 KiB pages below 2 MiB
  REQUIRE(cpu_allocator::huge_pages());                          // on by default (ctest sets no RELPOS_THP)
  CHECK(cpu_allocator::block_bytes(2 * kMiB) == 2 * kMiB);
  CHECK(cpu_allocator::block_bytes(2 * kMiB + 1) == 4 * kMiB);
  CHECK(cpu_allocator::block_bytes(5 * kMiB + 4096) == 6 * kMiB);

  void* small = cpu_allocator::allocate(1000);
  CHECK(reinterpret_cast<uintptr_t>(small) % 64 == 0);
  cpu_allocator::release(small, 1000);

  // A 3 MiB tensor's block: 2 MiB-aligned, 4 MiB usable; freed, it serves the next request of its
  // size class (3.5 MiB) when the cache is on (it is off under AddressSanitizer).
  void* p = cpu_allocator::allocate(3 * kMiB);
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % (2 * kMiB) == 0);
  std::memset(p, 0x5a, 4 * kMiB);
  const std::string thp = cpu_allocator::describe();
  INFO(thp);
  // With the kernel's THP in madvise or always mode the touched block is on huge pages.
  if (thp.find("huge pages: madvise") != std::string::npos || thp.find("huge pages: always") != std::string::npos)
    CHECK(anon_huge_kb(p) >= 2048);
  const size_t cached = cpu_allocator::cached_bytes();
  cpu_allocator::release(p, 3 * kMiB);
  if (cpu_allocator::cached_bytes() == cached + 4 * kMiB) {
    void* q = cpu_allocator::allocate(3 * kMiB + kMiB / 2);
    CHECK(q == p);
    cpu_allocator::release(q, 3 * kMiB + kMiB / 2);
  }
}

TEST_CASE("allocator: relpos info names the huge-page setting, RELPOS_THP=0 switches it off, a wrong value is named",
          "[core][allocator]") {
  const auto on = test::cli_run("info");
  REQUIRE(on.code == 0);
  CHECK(on.out.find("CPU memory:   blocks of 2 MiB and more advised MADV_HUGEPAGE") != std::string::npos);
  const auto off = test::shell_run("RELPOS_THP=0 " + test::shell_quote(RELPOS_CLI_PATH) + " info");
  CHECK(off.code == 0);
  CHECK(off.out.find("CPU memory:   blocks of 2 MiB and more on 4 KiB pages (RELPOS_THP=0)") != std::string::npos);
  const auto bad = test::shell_run("RELPOS_THP=yes " + test::shell_quote(RELPOS_CLI_PATH) + " info");
  CHECK(bad.code != 0);
  CHECK(bad.out.find("RELPOS_THP=yes: expected 0 or 1") != std::string::npos);
}
