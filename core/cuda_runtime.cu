// core/cuda_runtime.cu — CUDA runtime shim (see cuda_runtime.h). Errors go through
// CUDA_CHECK, which throws relpos::Error naming the call and the CUDA error string.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
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
  if (zero && nbytes > 0) CUDA_CHECK(cudaMemsetAsync(p, 0, nbytes, 0));
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

void memset_device(void* p, int byte, size_t n) {
  CUDA_CHECK(cudaMemsetAsync(p, byte, n, 0));
}

// ---------------------------------------------------------------- counted transfers
// The only file of relpos that calls cudaMemcpy* or waits on the device
// (tests/check_cuda_transfers.cmake checks it).
namespace {

struct Counters {
  std::atomic<int64_t> h2d{0}, d2h{0}, d2d{0}, syncs{0}, h2d_bytes{0}, d2h_bytes{0};
};
Counters& counters() {
  static Counters* c = new Counters;
  return *c;
}

constexpr size_t kStageMax = size_t(64) << 20;  // uploads above this are plain synchronous copies
constexpr size_t kFoldMax = size_t(64) << 10;   // reads up to this carry the error record along
constexpr int kStages = 4;

// Pinned host buffers: the upload ring and the read buffer (pinned, so a read is one DMA).
struct Staging {
  std::mutex mu;
  struct Buf {
    void* host = nullptr;
    size_t cap = 0;
    cudaEvent_t done = nullptr;
    bool pending = false;
  };
  Buf up[kStages];
  int next = 0;
  void* read = nullptr;  // pinned, kFoldMax + 16 bytes
  // per device: a scratch block [16 bytes record | up to kFoldMax data] for folded reads
  std::map<int, void*> fold;
};
Staging& staging() {
  static Staging* s = new Staging;  // never destroyed (pinned memory is released with the process)
  return *s;
}

// Make b hold n bytes; the caller has waited for b's copy. Growing frees pinned memory,
// which waits for the device: counted as a sync.
void reserve(Staging::Buf& b, size_t n) {
  if (b.cap >= n) return;
  const size_t cap = std::max<size_t>(n, size_t(64) << 10);
  if (b.host) {
    counters().syncs++;
    CUDA_CHECK(cudaFreeHost(b.host));
  }
  b.host = nullptr;
  b.cap = 0;
  CUDA_CHECK(cudaMallocHost(&b.host, cap));
  b.cap = cap;
}

// ---- deferred device checks
struct Checks {
  std::mutex mu;
  std::map<int, unsigned long long*> record;                  // per device
  std::vector<std::function<std::string(uint64_t)>> pending;  // index = launch sequence number
};
Checks& checks() {
  static Checks* c = new Checks;
  return *c;
}
constexpr size_t kMaxPending = size_t(1) << 16;

unsigned long long* record_of_current_device(Checks& c) {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  auto it = c.record.find(dev);
  if (it != c.record.end()) return it->second;
  void* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, 16));
  CUDA_CHECK(cudaMemsetAsync(p, 0xff, 16, 0));
  c.record[dev] = static_cast<unsigned long long*>(p);
  return static_cast<unsigned long long*>(p);
}

// The record's key as read by the host: throw the failure it names (the reporters were moved
// out of the pending list, which is empty again, so a reporter may read tensors itself).
void raise_recorded(unsigned long long key, std::vector<std::function<std::string(uint64_t)>> reports) {
  if (key == ~0ull) return;
  const uint64_t seq = key >> kCheckPosBits, pos = key & ((1ull << kCheckPosBits) - 1);
  if (seq >= reports.size()) fail("device check: error record {:#x} names no pending launch", key);
  throw Error(reports[size_t(seq)](pos));
}

}  // namespace

void copy_to_device(void* dst, const void* src, size_t n) {
  if (n == 0) return;
  Counters& k = counters();
  k.h2d++;
  k.h2d_bytes += int64_t(n);
  if (n > kStageMax) {  // pageable: the runtime stages it and the host waits
    k.syncs++;
    CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
    return;
  }
  Staging& s = staging();
  std::lock_guard<std::mutex> lock(s.mu);
  Staging::Buf& b = s.up[s.next];
  s.next = (s.next + 1) % kStages;
  if (b.pending) {
    const cudaError_t q = cudaEventQuery(b.done);
    if (q == cudaErrorNotReady) {
      k.syncs++;
      CUDA_CHECK(cudaEventSynchronize(b.done));
    } else {
      CUDA_CHECK(q);
    }
    b.pending = false;
  }
  reserve(b, n);
  std::memcpy(b.host, src, n);
  CUDA_CHECK(cudaMemcpyAsync(dst, b.host, n, cudaMemcpyHostToDevice, 0));
  if (!b.done) CUDA_CHECK(cudaEventCreateWithFlags(&b.done, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(b.done, 0));
  b.pending = true;
}

void copy_to_host(void* dst, const void* src, size_t n, bool check_errors) {
  Counters& k = counters();
  Checks& c = checks();
  std::vector<std::function<std::string(uint64_t)>> reports;
  unsigned long long* rec = nullptr;
  if (check_errors) {
    std::lock_guard<std::mutex> lock(c.mu);
    if (!c.pending.empty()) {
      reports.swap(c.pending);
      rec = record_of_current_device(c);
    }
  }
  if (n == 0 && !rec) return;
  k.d2h++;
  k.d2h_bytes += int64_t(n);
  if (!rec) {
    CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
    return;
  }
  unsigned long long key = ~0ull;
  if (n <= kFoldMax) {  // one transfer: [record | data] gathered on the device first
    Staging& s = staging();
    std::lock_guard<std::mutex> lock(s.mu);
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    void*& fold = s.fold[dev];
    if (!fold) CUDA_CHECK(cudaMalloc(&fold, kFoldMax + 16));
    if (!s.read) CUDA_CHECK(cudaMallocHost(&s.read, kFoldMax + 16));
    char* f = static_cast<char*>(fold);
    CUDA_CHECK(cudaMemcpyAsync(f, rec, 16, cudaMemcpyDeviceToDevice, 0));
    if (n) CUDA_CHECK(cudaMemcpyAsync(f + 16, src, n, cudaMemcpyDeviceToDevice, 0));
    CUDA_CHECK(cudaMemsetAsync(rec, 0xff, 16, 0));
    CUDA_CHECK(cudaMemcpy(s.read, f, n + 16, cudaMemcpyDeviceToHost));
    std::memcpy(&key, s.read, sizeof key);
    if (n) std::memcpy(dst, static_cast<char*>(s.read) + 16, n);
  } else {  // the record, then the data: two transfers
    k.d2h++;
    CUDA_CHECK(cudaMemcpy(&key, rec, sizeof key, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemsetAsync(rec, 0xff, 16, 0));
    CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
  }
  raise_recorded(key, std::move(reports));
}

void copy_device_to_device(void* dst, const void* src, size_t n) {
  if (n == 0) return;
  counters().d2d++;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, 0));
}

TransferStats transfer_stats() {
  const Counters& k = counters();
  return {k.h2d.load(), k.d2h.load(), k.d2d.load(), k.syncs.load(), k.h2d_bytes.load(), k.d2h_bytes.load()};
}

void reset_transfer_stats() {
  Counters& k = counters();
  k.h2d = 0, k.d2h = 0, k.d2d = 0, k.syncs = 0, k.h2d_bytes = 0, k.d2h_bytes = 0;
}

DeviceCheck begin_device_check(std::function<std::string(uint64_t pos)> report) {
  Checks& c = checks();
  bool full = false;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    full = c.pending.size() >= kMaxPending;
  }
  if (full) check_device_errors();
  std::lock_guard<std::mutex> lock(c.mu);
  const unsigned long long seq = c.pending.size();
  c.pending.push_back(std::move(report));
  return {record_of_current_device(c), seq << kCheckPosBits};
}

void check_device_errors() {
  bool any = false;
  {
    Checks& c = checks();
    std::lock_guard<std::mutex> lock(c.mu);
    any = !c.pending.empty();
  }
  if (any) copy_to_host(nullptr, nullptr, 0);  // the record alone
}

size_t pending_device_checks() {
  Checks& c = checks();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.pending.size();
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

void synchronize() {
  counters().syncs++;
  CUDA_CHECK(cudaDeviceSynchronize());
}

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
