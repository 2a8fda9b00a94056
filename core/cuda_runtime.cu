// core/cuda_runtime.cu — CUDA runtime shim (see cuda_runtime.h). Errors go through
// CUDA_CHECK, which throws relpos::Error naming the call and the CUDA error string.
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/error.h"

#define CUDA_CHECK(call)                                                                   \
  do {                                                                                     \
    cudaError_t err_ = (call);                                                             \
    if (err_ != cudaSuccess) ::relpos::fail("CUDA error in {}: {}", #call, cudaGetErrorString(err_)); \
  } while (0)

namespace relpos::cuda {

bool built_with_cuda() { return true; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

bool available() { return device_count() > 0; }

void set_device(int index) {
  const int n = device_count();
  RELPOS_CHECK(index >= 0 && index < n, "cuda::set_device({}): this machine has {} CUDA device(s)", index, n);
  CUDA_CHECK(cudaSetDevice(index));
}

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err == cudaSuccess && n > 0) return "";
  (void)cudaGetLastError();
  if (err != cudaSuccess)
    return fmt::format("cudaGetDeviceCount failed: {} ({}); {}", cudaGetErrorName(err), cudaGetErrorString(err),
                       runtime_version());
  return "cudaGetDeviceCount found no device; " + runtime_version();
}

// ---------------------------------------------------------------- caching allocator
// Training allocates the same shapes every step; cudaMalloc/cudaFree synchronise the device
// and cost far more than a kernel. Freed blocks are kept per (device, rounded size) and
// reused; all work is queued on the default stream, so a block handed out again is only
// touched by work ordered after the work that used it before.
namespace {

size_t bucket(size_t n) {
  if (n == 0) n = 1;
  constexpr size_t kSmall = size_t(1) << 20;  // up to 1 MiB: 512-byte steps; above: 1 MiB steps
  if (n <= kSmall) return (n + 511) / 512 * 512;
  return (n + kSmall - 1) / kSmall * kSmall;
}

struct DeviceCache {
  std::mutex mu;
  std::map<std::pair<int, size_t>, std::vector<void*>> free;  // (device, bucket) -> blocks
  std::unordered_map<void*, std::pair<int, size_t>> live;     // block -> (device, bucket)
  size_t bytes = 0;                                           // cached (free) bytes
};

DeviceCache& device_cache() {
  static DeviceCache* c = new DeviceCache;  // never destroyed: blocks may be freed during exit
  return *c;
}

// Release every cached block (caller holds c.mu).
void release_cached(DeviceCache& c) {
  int cur = 0;
  if (cudaGetDevice(&cur) != cudaSuccess) cur = 0;
  for (auto& [key, blocks] : c.free) {
    cudaSetDevice(key.first);
    for (void* p : blocks) cudaFree(p);
  }
  cudaSetDevice(cur);
  (void)cudaGetLastError();
  c.free.clear();
  c.bytes = 0;
}

}  // namespace

void* malloc_device(size_t nbytes, bool zero) {
  if (!available()) fail("no CUDA device ({}): cannot allocate {} bytes on cuda", unavailable_reason(), nbytes);
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  const size_t sz = bucket(nbytes);
  DeviceCache& c = device_cache();
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free.find({dev, sz});
    if (it != c.free.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      c.bytes -= sz;
    } else {
      cudaError_t err = cudaMalloc(&p, sz);
      if (err == cudaErrorMemoryAllocation) {  // give the cache back and try once more
        (void)cudaGetLastError();
        release_cached(c);
        err = cudaMalloc(&p, sz);
      }
      if (err != cudaSuccess) {
        (void)cudaGetLastError();
        fail("CUDA error in cudaMalloc({} bytes): {}", sz, cudaGetErrorString(err));
      }
    }
    c.live[p] = {dev, sz};
  }
  if (zero && nbytes > 0) CUDA_CHECK(cudaMemset(p, 0, nbytes));
  return p;
}

void free_device(void* p, size_t) {
  if (!p) return;
  DeviceCache& c = device_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.live.find(p);
  if (it == c.live.end()) return;  // not ours (never happens); leaking beats a double free
  c.free[it->second].push_back(p);
  c.bytes += it->second.second;
  c.live.erase(it);
}

void empty_cache() {
  if (!available()) return;
  DeviceCache& c = device_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  release_cached(c);
}

size_t cached_bytes() {
  DeviceCache& c = device_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.bytes;
}

void memset_device(void* p, int byte, size_t n) { CUDA_CHECK(cudaMemset(p, byte, n)); }

void copy_to_device(void* dst, const void* src, size_t n) {
  CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
}
void copy_to_host(void* dst, const void* src, size_t n) {
  CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
}
void copy_device_to_device(void* dst, const void* src, size_t n) {
  CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToDevice));
}

}  // namespace relpos::cuda

// ---------------------------------------------------------------- strided copy / fill
namespace relpos::cuda {

namespace {

template <typename T>
__device__ T* elem(const StridedView& v, int64_t linear) {
  int64_t off = 0;
  for (int d = v.ndim - 1; d >= 0; --d) {
    off += (linear % v.shape[d]) * v.strides[d];
    linear /= v.shape[d];
  }
  return static_cast<T*>(v.data) + off;
}

template <typename D, typename S>
__global__ void copy_kernel(StridedView dst, StridedView src, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    *elem<D>(dst, i) = D(*elem<S>(src, i));
}

template <typename T>
__global__ void fill_kernel(StridedView dst, T value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    *elem<T>(dst, i) = value;
}

int64_t numel(const StridedView& v) {
  int64_t n = 1;
  for (int d = 0; d < v.ndim; ++d) n *= v.shape[d];
  return n;
}

unsigned grid_for(int64_t n) { return unsigned(std::min<int64_t>((n + 255) / 256, 65535)); }

template <typename F>
void visit(DType t, F&& f) {
  switch (t) {
    case DType::F32: f(float{}); break;
    case DType::F64: f(double{}); break;
    case DType::I64: f(int64_t{}); break;
  }
}

}  // namespace

void strided_copy(const StridedView& dst, const StridedView& src) {
  const int64_t n = numel(dst);
  if (n == 0) return;
  visit(dst.dtype, [&](auto d) {
    visit(src.dtype, [&](auto s) {
      copy_kernel<decltype(d), decltype(s)><<<grid_for(n), 256>>>(dst, src, n);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void strided_fill(const StridedView& dst, double value) {
  const int64_t n = numel(dst);
  if (n == 0) return;
  visit(dst.dtype, [&](auto d) {
    using T = decltype(d);
    fill_kernel<T><<<grid_for(n), 256>>>(dst, T(value), n);
  });
  CUDA_CHECK(cudaGetLastError());
}

void synchronize() { CUDA_CHECK(cudaDeviceSynchronize()); }

std::vector<DeviceInfo> devices() {
  std::vector<DeviceInfo> out;
  const int n = device_count();
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    CUDA_CHECK(cudaGetDeviceProperties(&p, i));
    size_t free_b = 0, total_b = 0;
    int cur = 0;
    CUDA_CHECK(cudaGetDevice(&cur));
    CUDA_CHECK(cudaSetDevice(i));
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    CUDA_CHECK(cudaSetDevice(cur));
    out.push_back({i, p.name, total_b, free_b, p.major, p.minor, p.multiProcessorCount});
  }
  return out;
}

std::string runtime_version() {
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
  (void)cudaGetLastError();
  auto v = [](int x) { return std::to_string(x / 1000) + "." + std::to_string((x % 1000) / 10); };
  return "CUDA runtime " + v(rt) + ", driver " + (drv ? v(drv) : std::string("none"));
}

}  // namespace relpos::cuda
