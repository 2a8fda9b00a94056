// kernels/cuda/softmax.cu — softmax / log_softmax forward and backward along the last dim
// of a contiguous [rows, n] (softmax.cpp moves the dim last). One block per row; the formulas
// and accumulation precisions of kernels/cpu/softmax.cpp:
//   softmax:       m = max(a); o = exp(a - m) / sum(exp(a - m)); a fully -inf row -> zeros
//   log_softmax:   o = a - (m + log(sum exp(a - m)))
//   softmax_bwd:   o = y * (gy - sum(gy * y))
//   log_sm_bwd:    o = gy - exp(y) * sum(gy)
#include <cmath>

#include "kernels/cuda/common.cuh"

namespace relpos::k::cuda::dev {

namespace {

template <typename T>
__global__ void softmax_kernel(int kind, T* out, const T* a_all, const T* b_all, int64_t rows, int64_t n) {
  __shared__ double sh[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* a = a_all + r * n;
    T* o = out + r * n;
    if (kind == 0 || kind == 1) {
      double m = -INFINITY;  // max in T is exact in double
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) m = MaxOp{}(m, double(a[i]));
      const T mt = T(block_reduce(m, MaxOp{}, sh));
      if (kind == 0 && isinf(mt) && mt < 0) {  // fully masked row: zeros, not NaN
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = T(0);
        continue;
      }
      double s = 0.0;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += exp(double(a[i] - mt));
      s = block_reduce(s, SumOp{}, sh);
      if (kind == 0) {
        const T inv = T(1.0 / s);
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = T(exp(a[i] - mt)) * inv;
      } else {
        const T lse = T(double(mt) + log(s));
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = a[i] - lse;
      }
    } else {
      const T* g = b_all + r * n;
      double s = 0.0;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        s += kind == 2 ? double(a[i]) * double(g[i]) : double(g[i]);
      const T st = T(block_reduce(s, SumOp{}, sh));
      if (kind == 2)
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = a[i] * (g[i] - st);
      else
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = g[i] - exp(a[i]) * st;
    }
  }
}

}  // namespace

void softmax_rows(int kind, DT t, void* out, const void* a, const void* b, int64_t rows, int64_t n) {
  if (rows == 0 || n == 0) return;
  visit_float(t, [&](auto tag) {
    using T = decltype(tag);
    softmax_kernel<T><<<grid_rows(rows), kThreads>>>(kind, static_cast<T*>(out), static_cast<const T*>(a),
                                                     static_cast<const T*>(b), rows, n);
  });
  RELPOS_LAUNCH_CHECK(kind == 0 ? "softmax" : kind == 1 ? "log_softmax" : kind == 2 ? "softmax_backward"
                                                                                    : "log_softmax_backward");
}

}  // namespace relpos::k::cuda::dev
