#include "core/storage.h"

#include <cstring>

#include "core/allocator.h"
#include "core/cuda_runtime.h"

namespace relpos {

Storage::Storage(size_t nbytes, Device device, bool zero) : nbytes_(nbytes), device_(device) {
  if (device == Device::CUDA) {
    data_ = cuda::malloc_device(nbytes);  // always zeroed
    return;
  }
  data_ = cpu_allocator::allocate(nbytes);
  if (zero) std::memset(data_, 0, nbytes);
}

Storage::~Storage() {
  if (device_ == Device::CUDA)
    cuda::free_device(data_);
  else
    cpu_allocator::release(data_, nbytes_);
}

}  // namespace relpos
