// The CPU caching allocator (core/allocator.h): alignment, and a freed block serving the next
// request of its size class.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>

#include "core/allocator.h"

using namespace relpos;

TEST_CASE("allocator: blocks are 64-byte aligned and a freed block serves the next request of its size class",
          "[core][allocator]") {
  for (size_t n : {size_t(1), size_t(100), size_t(5000), size_t(3) << 20}) {
    void* p = cpu_allocator::allocate(n);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    std::memset(p, 0x5a, n);  // the whole request is usable
    cpu_allocator::release(p, n);
  }
  // 5000 and 8000 bytes round to the same 8 KiB block: when the cache is on (it is off under
  // AddressSanitizer, where reuse would hide a use after free) the second request gets the first's.
  void* p = cpu_allocator::allocate(5000);
  const size_t cached = cpu_allocator::cached_bytes();
  cpu_allocator::release(p, 5000);
  if (cpu_allocator::cached_bytes() > cached) {
    CHECK(cpu_allocator::cached_bytes() == cached + 8192);
    void* q = cpu_allocator::allocate(8000);
    CHECK(q == p);
    cpu_allocator::release(q, 8000);
  }
}

TEST_CASE("allocator: blocks from 2 MiB on are 2 MiB-aligned whole huge pages, and their size class is 2 MiB",
          "[core][allocator]") {
  // Transparent huge pages need 2 MiB-aligned regions; the size class rounds to whole 2 MiB so
  // that a cached block serves any request of its class.
  constexpr size_t kMiB = size_t(1) << 20;
  for (size_t n : {2 * kMiB, 3 * kMiB, 8 * kMiB + 1}) {
    void* p = cpu_allocator::allocate(n);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % (2 * kMiB) == 0);
    std::memset(p, 0x5a, n);
    const size_t cached = cpu_allocator::cached_bytes();
    cpu_allocator::release(p, n);
    if (cpu_allocator::cached_bytes() > cached)
      CHECK(cpu_allocator::cached_bytes() - cached == (n + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB));
  }
  // Just below 2 MiB: the 4 KiB classes as before.
  void* p = cpu_allocator::allocate(2 * kMiB - 4096 - 1);
  const size_t cached = cpu_allocator::cached_bytes();
  cpu_allocator::release(p, 2 * kMiB - 4096 - 1);
  if (cpu_allocator::cached_bytes() > cached) CHECK(cpu_allocator::cached_bytes() - cached == 2 * kMiB - 4096);
}

TEST_CASE("allocator: a request too large for any size class is a named error, not a wrapped small block",
          "[core][allocator]") {
  // Rounding up to the 2 MiB (or 4 KiB) class must not wrap around size_t.
  for (size_t n : {SIZE_MAX, SIZE_MAX - 100, SIZE_MAX - (size_t(1) << 20)})
    CHECK_THROWS_WITH(cpu_allocator::allocate(n), Catch::Contains("out of memory") && Catch::Contains("bytes"));
}
