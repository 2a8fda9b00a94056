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
// environment the device is also synchronised (debug_sync), so a fault inside the kernel is
// reported with the op's name instead of at the next, unrelated, synchronising call.
#define RELPOS_LAUNCH_CHECK(op)                                                              \
  do {                                                                                       \
    RELPOS_CUDA_CHECK(op, cudaGetLastError());                                               \
    if (::relpos::k::cuda::dev::sync_after_launch()) ::relpos::k::cuda::dev::debug_sync(op); \
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

// Merge the adjacent dims of g that every operand walks as one (stride[d] == stride[d + 1] *
// shape[d + 1]) and drop size-1 dims, keeping the row-major order of the elements: a launch
// over contiguous operands becomes 1-d (offset_of: one multiply, no div/mod), a broadcast one
// keeps only the dims it needs. ops: the operands' strides over g, rewritten with it.
template <size_t N>
inline void collapse(Geom& g, Strides* const (&ops)[N]) {
  int64_t shape[kMaxDims], st[N][kMaxDims];
  int nd = 0;  // innermost first
  for (int d = g.ndim - 1; d >= 0; --d) {
    if (g.shape[d] == 1) continue;
    bool merge = nd > 0;
    for (size_t k = 0; merge && k < N; ++k) merge = ops[k]->s[d] == st[k][nd - 1] * shape[nd - 1];
    if (merge) {
      shape[nd - 1] *= g.shape[d];
      continue;
    }
    shape[nd] = g.shape[d];
    for (size_t k = 0; k < N; ++k) st[k][nd] = ops[k]->s[d];
    ++nd;
  }
  g.ndim = nd;
  for (int j = 0; j < nd; ++j) {
    g.shape[j] = shape[nd - 1 - j];
    for (size_t k = 0; k < N; ++k) ops[k]->s[j] = st[k][nd - 1 - j];
  }
}

// Element offset of row-major linear index i of g in an operand with strides s.
__device__ inline int64_t offset_of(int64_t i, const Geom& g, const Strides& s) {
  if (g.ndim == 1) return i * s.s[0];  // a collapsed contiguous (or uniformly strided) launch
  int64_t off = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    const int64_t n = g.shape[d];
    off += (i % n) * s.s[d];
    i /= n;
  }
  return off;
}

// Record a failed device check at element pos (the earliest launch and element win).
__device__ inline void record_failure(const Check& chk, int64_t pos) {
  if (chk.record) atomicMin(chk.record, chk.base | static_cast<unsigned long long>(pos));
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
