// core/storage.h — a reference-counted block of memory on one device, plus the version
// counter that autograd uses to detect in-place changes of saved tensors. Views of a
// tensor share one Storage (and therefore one version counter).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/dtype.h"

namespace relpos {

class Storage {
 public:
  // Memory comes from the device's caching allocator (core/allocator.h for the CPU,
  // core/cuda_runtime.h for CUDA), uninitialised unless `zero`.
  Storage(size_t nbytes, Device device, bool zero = false);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* base_ = nullptr;  // what the allocator returned (data_ - guard bytes when guarded)
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  bool guarded_ = false;
  uint64_t version_ = 0;
};

using StoragePtr = std::shared_ptr<Storage>;

// Guard mode (the backend test harness turns it on): every Storage created while it is on
// gets kGuardBytes of canary bytes before and after its data, on either device; they are
// verified when the Storage is freed, and every overwritten byte counts as a violation
// (out-of-bounds writes of a kernel). Off by default; costs one check (a device -> host copy
// on CUDA) per freed storage.
namespace guard {
constexpr size_t kGuardBytes = 256;  // keeps the data 256-byte aligned (cuBLAS, vector loads)
constexpr unsigned char kPattern = 0xA5;
void set_enabled(bool on);
bool enabled();
struct Stats {
  uint64_t guarded = 0;     // guarded storages freed and checked
  uint64_t violations = 0;  // storages with at least one overwritten guard byte
  uint64_t bad_bytes = 0;   // overwritten guard bytes in total
};
Stats stats();
void reset_stats();
}  // namespace guard

}  // namespace relpos
