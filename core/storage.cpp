#include "core/storage.h"
#include "core/storage_poison.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/allocator.h"
#include "core/cuda_runtime.h"

namespace relpos {

namespace guard {
namespace {
std::atomic<bool> g_enabled{false}, g_poison{false};
std::atomic<uint64_t> g_guarded{0}, g_violations{0}, g_bad_bytes{0};
}  // namespace
void set_enabled(bool on) { g_enabled = on; }
bool enabled() { return g_enabled; }
void set_poison(bool on) { g_poison = on; }
bool poison() { return g_poison; }
Stats stats() { return {g_guarded.load(), g_violations.load(), g_bad_bytes.load()}; }
void reset_stats() { g_guarded = 0, g_violations = 0, g_bad_bytes = 0; }
}  // namespace guard

namespace {

void* raw_alloc(size_t nbytes, Device device, bool zero) {
  if (device == Device::CUDA) return cuda::malloc_device(nbytes, zero);
  void* p = cpu_allocator::allocate(nbytes);
  if (zero) std::memset(p, 0, nbytes);
  return p;
}

void raw_free(void* p, size_t nbytes, Device device) {
  if (device == Device::CUDA)
    cuda::free_device(p, nbytes);
  else
    cpu_allocator::release(p, nbytes);
}

// Count the guard bytes around data that no longer hold the pattern.
size_t count_bad_guard_bytes(const void* base, size_t nbytes, Device device) {
  constexpr size_t G = guard::kGuardBytes;
  std::vector<unsigned char> before(G), after(G);
  const auto* b = static_cast<const unsigned char*>(base);
  if (device == Device::CUDA) {
    cuda::copy_to_host(before.data(), b, G, /*check_errors=*/false);  // may run in a destructor
    cuda::copy_to_host(after.data(), b + G + nbytes, G, /*check_errors=*/false);
  } else {
    std::memcpy(before.data(), b, G);
    std::memcpy(after.data(), b + G + nbytes, G);
  }
  size_t bad = 0;
  for (size_t i = 0; i < G; ++i) bad += size_t(before[i] != guard::kPattern) + size_t(after[i] != guard::kPattern);
  return bad;
}

}  // namespace

Storage::Storage(size_t nbytes, Device device, bool zero) : nbytes_(nbytes), device_(device) {
  if (!guard::enabled()) {
    base_ = data_ = raw_alloc(nbytes, device, zero);
    return;
  }
  constexpr size_t G = guard::kGuardBytes;
  base_ = raw_alloc(nbytes + 2 * G, device, false);
  auto* b = static_cast<unsigned char*>(base_);
  data_ = b + G;
  guarded_ = true;
  if (device == Device::CUDA) {
    cuda::memset_device(b, guard::kPattern, G);
    cuda::memset_device(b + G + nbytes, guard::kPattern, G);
    if ((zero || guard::poison()) && nbytes > 0) cuda::memset_device(data_, zero ? 0 : guard::kPoison, nbytes);
  } else {
    std::memset(b, guard::kPattern, G);
    std::memset(b + G + nbytes, guard::kPattern, G);
    if (zero || guard::poison()) std::memset(data_, zero ? 0 : guard::kPoison, nbytes);
  }
}

Storage::~Storage() {
  if (guarded_) {
    try {
      const size_t bad = count_bad_guard_bytes(base_, nbytes_, device_);
      ++guard::g_guarded;
      if (bad > 0) {
        ++guard::g_violations;
        guard::g_bad_bytes += bad;
        std::fprintf(stderr, "relpos guard: %zu guard bytes overwritten around a %zu-byte %s allocation\n", bad,
                     nbytes_, device_ == Device::CUDA ? "cuda" : "cpu");
      }
    } catch (...) {  // a failed device read cannot be reported from a destructor: count it
      ++guard::g_violations;
    }
    raw_free(base_, nbytes_ + 2 * guard::kGuardBytes, device_);
    return;
  }
  raw_free(base_, nbytes_, device_);
}

}  // namespace relpos
