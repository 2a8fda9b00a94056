// core/cuda_runtime.h — the few CUDA runtime calls core needs (memory and device query).
// Implemented in cuda_runtime.cu when built with CUDA, else by a stub that throws
// "built without CUDA support". Without a GPU, device_count() is 0 and allocation throws
// "no CUDA device".
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace relpos::cuda {

// A strided view for the device-side copy/fill that core itself needs (contiguous(),
// clone(), copy_(), fill_() of cuda tensors). Rank <= kMaxDims.
constexpr int kMaxDims = 8;
struct StridedView {
  void* data;  // element 0 (storage base + offset)
  DType dtype;
  int ndim;
  int64_t shape[kMaxDims];
  int64_t strides[kMaxDims];  // in elements; 0 for a broadcast dim
};
// dst[i] = convert(src[i]) for every index of dst's shape (src has the same shape).
void strided_copy(const StridedView& dst, const StridedView& src);
void strided_fill(const StridedView& dst, double value);
void synchronize();  // wait for all queued device work (errors surface here)

struct DeviceInfo {
  int index;
  std::string name;
  size_t total_memory, free_memory;  // bytes
  int cc_major, cc_minor;            // compute capability
  int multiprocessors;
};
std::vector<DeviceInfo> devices();  // empty without a GPU
std::string runtime_version();      // "CUDA runtime 13.0, driver 13.0" (driver "none" without one)

bool built_with_cuda();
int device_count();          // 0 when no driver/device (never throws)
bool available();            // device_count() > 0
// "" when a device is usable, else why not: the cudaError_t name and message of
// cudaGetDeviceCount (or "found no device") and runtime_version() (runtime and driver
// versions); "built without CUDA support ..." in a build without CUDA. Never throws.
std::string unavailable_reason();
// Make device `index` (0 .. device_count() - 1) the current one for this process's later
// allocations and kernels (cudaSetDevice); errors name the index and the device count.
void set_device(int index);
// Device memory comes from a caching allocator (cuda_runtime.cu): freed blocks are kept,
// bucketed by rounded size, and handed out again; cudaMalloc only when no cached block fits
// (after an out-of-memory, the cache is emptied and cudaMalloc retried). Blocks are 256-byte
// aligned and uninitialised unless `zero`. free_device takes the size passed to malloc_device.
void* malloc_device(size_t nbytes, bool zero = false);
void free_device(void* p, size_t nbytes);
void empty_cache();          // cudaFree every cached block (no-op without CUDA)
size_t cached_bytes();       // bytes held in the cache, not in use
void memset_device(void* p, int byte, size_t nbytes);
void copy_to_device(void* dst, const void* src, size_t nbytes);
void copy_to_host(void* dst, const void* src, size_t nbytes);
void copy_device_to_device(void* dst, const void* src, size_t nbytes);

}  // namespace relpos::cuda
