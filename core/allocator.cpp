#include "core/allocator.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace relpos::cpu_allocator {

bool huge_pages() {  // RELPOS_THP: unset, empty or 1 = on, 0 = off; read once
  static const bool on = [] {
    const char* e = std::getenv("RELPOS_THP");
    if (!e || !*e || std::strcmp(e, "1") == 0) return true;
    RELPOS_CHECK(std::strcmp(e, "0") == 0, "RELPOS_THP={}: expected 0 or 1", e);
    return false;
  }();
  return on;
}

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
constexpr size_t kHugePage = size_t(1) << 21;   // 2 MiB

size_t bucket(size_t n) {
  if (n <= 4096) return (n + 63) / 64 * 64;
  if (n >= kHugePage && huge_pages()) return (n + kHugePage - 1) / kHugePage * kHugePage;
  return (n + 4095) / 4096 * 4096;
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
  const bool huge = sz >= kHugePage && huge_pages();
  void* p = std::aligned_alloc(huge ? kHugePage : 64, sz);
  RELPOS_CHECK(p != nullptr, "out of memory allocating {} bytes", nbytes);
#ifdef MADV_HUGEPAGE
  if (huge) madvise(p, sz, MADV_HUGEPAGE);  // advice only: where the kernel has no THP, 4 KiB pages as before
#endif
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

std::string describe() {
  if (!huge_pages()) return "blocks of 2 MiB and more on 4 KiB pages (RELPOS_THP=0)";
  std::string mode = "unknown";  // the bracketed word of the kernel's setting
  if (FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r")) {
    char buf[128] = {};
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    const std::string line(buf, n);
    const auto a = line.find('['), b = line.find(']');
    if (a != std::string::npos && b != std::string::npos && b > a) mode = line.substr(a + 1, b - a - 1);
  }
  const bool backed = mode == "madvise" || mode == "always";
  return std::string(
             "blocks of 2 MiB and more advised MADV_HUGEPAGE (RELPOS_THP=0 switches off); kernel transparent "
             "huge pages: ") +
         mode + (backed ? "" : ", so 4 KiB pages");
}

size_t block_bytes(size_t nbytes) {
  return bucket(nbytes == 0 ? 1 : nbytes);
}

size_t cached_bytes() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.bytes;
}

}  // namespace relpos::cpu_allocator
