// core/cuda_runtime.h — the few CUDA runtime calls core needs (memory and device query).
// Implemented in cuda_runtime.cu when built with CUDA, else by a stub that throws
// "built without CUDA support". Without a GPU, device_count() is 0 and allocation throws
// "no CUDA device".
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
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
// Wait for all queued device work (errors surface here); counted in transfer_stats().syncs.
void synchronize();

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
void memset_device(void* p, int byte, size_t nbytes);  // queued (no host wait)

// ---------------------------------------------------------------- host <-> device transfers
// Every host<->device copy and every explicit host wait of relpos goes through the functions
// below (a ctest, tests/check_cuda_transfers.cmake, fails on a cudaMemcpy* or *Synchronize
// anywhere else), and each one is counted in transfer_stats().
//   copy_to_device: the host bytes are copied into a pinned staging buffer (a ring of four)
//     and queued with cudaMemcpyAsync: the host does not wait and src may be freed at once.
//     Waits (counted in syncs) only when the staging buffer it reuses still has its copy in
//     flight, or to grow a staging buffer; copies over 64 MiB are plain synchronous copies.
//   copy_to_host: a blocking read (the only kind of d2h there is). When device checks are
//     pending (below), the error record travels in the same transfer (copies up to 64 KiB) or
//     in one more, and a recorded error is thrown here (check_errors = false: not, for reads
//     that must not throw, e.g. the guard-byte check in a destructor).
//   copy_device_to_device: queued, no host wait, not a host transfer (counted in d2d).
//   synchronize: an explicit wait for all queued device work (counted in syncs).
void copy_to_device(void* dst, const void* src, size_t nbytes);
void copy_to_host(void* dst, const void* src, size_t nbytes, bool check_errors = true);
void copy_device_to_device(void* dst, const void* src, size_t nbytes);

// The transfer counters (a debug statistic: RELPOS_CUDA_STATS=1 makes the trainer log them per
// step). Process-wide, all devices; zero in a build without CUDA.
struct TransferStats {
  int64_t h2d = 0, d2h = 0, d2d = 0;  // calls of copy_to_device / copy_to_host / copy_device_to_device
  int64_t syncs = 0;                  // host waits other than the d2h reads themselves
  int64_t h2d_bytes = 0, d2h_bytes = 0;
};
TransferStats transfer_stats();
void reset_transfer_stats();

// ---------------------------------------------------------------- deferred device checks
// A kernel that validates its inputs on the device (index bounds, targets, integer division)
// records the first failure in a device-side error record instead of copying its inputs to
// the host. begin_device_check() registers one such launch: `report(pos)` builds the error
// message of the failure at element `pos` (the same text the CPU backend throws; it may read
// tensors it captured) and the returned DeviceCheck goes to the kernel, which on a failure at
// element pos does atomicMin(record, base | pos). Failures are thrown (the earliest launch's,
// at its first element) by the next host read (copy_to_host) or by check_device_errors(), in
// the thread that reads. Up to 2^16 launches may be pending; the next one reads the record first.
struct DeviceCheck {
  unsigned long long* record;  // device pointer; ~0ull while nothing failed
  unsigned long long base;     // launch sequence number << kCheckPosBits
};
constexpr int kCheckPosBits = 40;  // element positions below 2^40
DeviceCheck begin_device_check(std::function<std::string(uint64_t pos)> report);
// Read the error record now if launches are pending (one d2h) and throw the first failure.
// A no-op when nothing is pending or in a build without CUDA.
void check_device_errors();
size_t pending_device_checks();

}  // namespace relpos::cuda
