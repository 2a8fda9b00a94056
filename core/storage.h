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
  // CPU memory comes from the caching allocator, uninitialised unless `zero`.
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
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  uint64_t version_ = 0;
};

using StoragePtr = std::shared_ptr<Storage>;

}  // namespace relpos
