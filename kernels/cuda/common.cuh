// kernels/cuda/common.cuh — shared device-side helpers of the CUDA backend: error checks,
// launch configuration, strided indexing, deterministic block reductions and the dtype
// switch. Included by kernels/cuda/*.cu only (no fmt, no Tensor: see launch.h).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "kernels/cuda/launch.h"

// Every CUDA runtime call and every launch goes through these: a failure throws
// relpos::Error naming the op, the call and CUDA's status string.
#define RELPOS_CUDA_CHECK(op, call)                                                          \
  do {                                                                                       \
    cudaError_t relpos_err_ = (call);                                                        \
    if (relpos_err_ != cudaSuccess)                                                          \
      ::relpos::k::cuda::dev::throw_error(op, #call, cudaGetErrorString(relpos_err_));       \
  } while (0)
// After a launch: a bad launch configuration fails here; with RELPOS_CUDA_SYNC=1 in the
// environment the device is also synchronised, so a fault inside the kernel is reported
// with the op's name instead of at the next, unrelated, synchronising call (debugging aid).
#define RELPOS_LAUNCH_CHECK(op)                                                                   \
  do {                                                                                            \
    RELPOS_CUDA_CHECK(op, cudaGetLastError());                                                    \
    if (::relpos::k::cuda::dev::sync_after_launch()) RELPOS_CUDA_CHECK(op, cudaDeviceSynchronize()); \
  } while (0)

namespace relpos::k::cuda::dev {

inline bool sync_after_launch() {
  static const bool on = [] {
    const char* v = std::getenv("RELPOS_CUDA_SYNC");
    return v != nullptr && v[0] != '\0' && v[0] != '0';
  }();
  return on;
}

constexpr int kThreads = 256;  // block size of every launch (a power of two: block_reduce needs it)

// Grid for a grid-stride loop over n elements (loops use int64 indices, so any n works).
inline unsigned grid_for(int64_t n) {
  return unsigned(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 65535)));
}
// Blocks for one-block-per-row kernels (rows are looped with a block-stride loop).
inline unsigned grid_rows(int64_t rows) { return unsigned(std::max<int64_t>(1, std::min<int64_t>(rows, 65535))); }

#define RELPOS_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

inline int64_t numel(const Geom& g) {
  int64_t n = 1;
  for (int d = 0; d < g.ndim; ++d) n *= g.shape[d];
  return n;
}

// Element offset of row-major linear index i of g in an operand with strides s.
__device__ inline int64_t offset_of(int64_t i, const Geom& g, const Strides& s) {
  int64_t off = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t n = g.shape[d];
    off += (i % n) * s.s[d];
    i /= n;
  }
  return off;
}

struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {  // a < b ? b : a, as std::max: a NaN in b is ignored, as on the CPU
  template <typename T> __device__ T operator()(T a, T b) const { return a < b ? b : a; }
};
struct MinOp {  // b < a ? b : a, as std::min
  template <typename T> __device__ T operator()(T a, T b) const { return b < a ? b : a; }
};

// Reduce one value per thread over the block (blockDim.x == kThreads) with a fixed tree, so
// the result is the same on every run. Every thread gets the result. sh: kThreads entries.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s) sh[threadIdx.x] = op(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  const T r = sh[0];
  __syncthreads();  // sh may be reused right after
  return r;
}

// f(T{}) for the floating dtypes; int64 reaching here is a backend bug (validated on the host).
template <typename F>
void visit_float(DT t, F&& f) {
  if (t == DT::F32) f(float{});
  else if (t == DT::F64) f(double{});
  else throw_error("cuda backend", "dtype switch", "int64 where a floating dtype was expected");
}
template <typename F>
void visit_all(DT t, F&& f) {
  if (t == DT::F32) f(float{});
  else if (t == DT::F64) f(double{});
  else f(int64_t{});
}

}  // namespace relpos::k::cuda::dev
