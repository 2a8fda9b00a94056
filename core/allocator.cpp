#include "core/allocator.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace relpos::cpu_allocator {

namespace {

// No cache under AddressSanitizer (GCC defines __SANITIZE_ADDRESS__, clang has the feature
// test): a reused block would hide a use after free.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCache = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kCache = false;
#else
constexpr bool kCache = true;
#endif
#else
constexpr bool kCache = true;
#endif
constexpr size_t kMaxCached = size_t(1) << 31;  // 2 GiB

constexpr size_t kHugePage = size_t(1) << 21;  // 2 MiB

size_t bucket(size_t n) {
  if (n <= 4096) return (n + 63) / 64 * 64;
  if (n >= kHugePage) return (n + kHugePage - 1) / kHugePage * kHugePage;
  return (n + 4095) / 4096 * 4096;
}

// A fresh block; from 2 MiB on, 2 MiB-aligned and offered to the kernel for transparent huge
// pages (Linux's default "madvise" mode gives them only to regions that ask): the activations and
// GEMM operands of a training step then take one TLB entry per 2 MiB instead of 512.
void* fresh(size_t sz) {
  if (sz < kHugePage) return std::aligned_alloc(64, sz);
  void* p = std::aligned_alloc(kHugePage, sz);
#if defined(MADV_HUGEPAGE)
  if (p) (void)madvise(p, sz, MADV_HUGEPAGE);  // advice only: where refused, 4 KiB pages as before
#endif
  return p;
}

struct Cache {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free;
  size_t bytes = 0;
  ~Cache() {
    for (auto& [sz, v] : free)
      for (void* p : v) std::free(p);
  }
};

Cache& cache() {
  static Cache c;
  return c;
}

}  // namespace

void* allocate(size_t nbytes) {
  // No size class can hold more (the rounding in bucket() would wrap around size_t).
  RELPOS_CHECK(nbytes <= SIZE_MAX - kHugePage, "out of memory allocating {} bytes", nbytes);
  const size_t sz = bucket(nbytes == 0 ? 1 : nbytes);
  if (kCache) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free.find(sz);
    if (it != c.free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      c.bytes -= sz;
      return p;
    }
  }
  void* p = fresh(sz);
  RELPOS_CHECK(p != nullptr, "out of memory allocating {} bytes", nbytes);
  return p;
}

void release(void* p, size_t nbytes) {
  if (!p) return;
  const size_t sz = bucket(nbytes == 0 ? 1 : nbytes);
  if (kCache) {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.bytes + sz <= kMaxCached) {
      c.free[sz].push_back(p);
      c.bytes += sz;
      return;
    }
  }
  std::free(p);
}

void empty_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  for (auto& [sz, v] : c.free)
    for (void* p : v) std::free(p);
  c.free.clear();
  c.bytes = 0;
}

size_t cached_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.bytes;
}

}  // namespace relpos::cpu_allocator
