#include "core/storage.h"

#include <cstdlib>
#include <cstring>

#include "core/cuda_runtime.h"

namespace relpos {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (device == Device::CUDA) {
    data_ = cuda::malloc_device(nbytes);
    return;
  }
  // 64-byte aligned host memory (cache line / AVX-512 friendly); size rounded up as
  // aligned_alloc requires.
  size_t rounded = (nbytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  RELPOS_CHECK(data_ != nullptr, "out of memory allocating {} bytes", nbytes);
  std::memset(data_, 0, rounded == 0 ? 64 : rounded);
}

Storage::~Storage() {
  if (device_ == Device::CUDA)
    cuda::free_device(data_);
  else
    std::free(data_);
}

}  // namespace relpos
